"""The hooks of kind ``tree-shape`` (:class:`evolve.kinds.base.KindHooks`): scored in tokens per second on the
dataset's tree tables (:mod:`evolve.eval.tree_scoring`), seeded with the fixed-width and adaptive trees,
EAGLE-2's per-level top-k and the level gates (:mod:`evolve.kinds.tree_shape.search_seeds`), and run by
``benchmark.py trees`` and ``benchmark.py live --tree-nodes``."""
from __future__ import annotations

from evolve.errors import InputError
from evolve.kinds.base import KindContext, KindHooks
from evolve.eval.tree_levels import program_values
from evolve.kinds.tree_shape.eval_population import TreeShapePopulationEvaluator
from evolve.eval.tree_scoring import ShapeMetrics, shape_data, shape_metrics
from evolve.kinds.tree_shape.export_layout import TREE_LAYOUT
from evolve.kinds.tree_shape.export_engines import engine_support
from evolve.kinds.tree_shape.report_hooks import live_decoder, tree_rows
from evolve.kinds.tree_shape.search_seeds import choose_tree_seeds
from evolve.traces.tree_tables import load_trees


def population(context: KindContext) -> TreeShapePopulationEvaluator:
    """The tree-shape population scorer (tokens per second under the context's costs on the split's tree table)."""
    return TreeShapePopulationEvaluator(context.data, context.fitness, cache_size=context.cache_size,
                                        costs=context.costs)


def score(rule, context: KindContext) -> ShapeMetrics:
    """One shape's :class:`evolve.eval.tree_scoring.ShapeMetrics` under the context's costs on the tree table of
    its split in its dataset directory (the records are not read).

    Raises: InputError without a dataset directory, or as :func:`evolve.traces.tree_tables.load_trees`.
    """
    if context.directory is None:
        raise InputError("a tree-shape program is scored on the tree tables of a dataset directory; give its path",
                         param="data")
    trees = shape_data(load_trees(context.directory, context.split))
    return shape_metrics(program_values(rule.program, trees), trees, context.costs)


def seeds(cfg, features, train, gamma, objective):
    """Fixed-width and adaptive trees, EAGLE-2's per-level top-k and the level gates."""
    return choose_tree_seeds(cfg, features, train, objective)


HOOKS = KindHooks(metrics=ShapeMetrics, population=population, score=score, seeds=seeds, trees=tree_rows,
                  live=live_decoder, export=TREE_LAYOUT, engines=engine_support)

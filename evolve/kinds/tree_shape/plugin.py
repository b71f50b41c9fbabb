"""The hooks of kind ``tree-shape`` (:class:`evolve.kinds.base.KindHooks`): scored in tokens per second on the
dataset's tree tables (:mod:`evolve.kinds.tree_shape.eval_shape`), seeded with the fixed-width and adaptive trees,
EAGLE-2's per-level top-k and the level gates (:mod:`evolve.kinds.tree_shape.search_seeds`), and run by
``benchmark.py trees`` and ``benchmark.py live --tree-nodes``."""
from __future__ import annotations

from evolve.errors import InputError
from evolve.kinds.base import KindHooks
from evolve.kinds.tree_shape.eval_levels import program_values
from evolve.kinds.tree_shape.eval_population import TreeShapePopulationEvaluator
from evolve.kinds.tree_shape.eval_shape import ShapeMetrics, shape_data, shape_metrics
from evolve.kinds.tree_shape.export_layout import TREE_LAYOUT
from evolve.kinds.tree_shape.export_engines import engine_support
from evolve.kinds.tree_shape.report_hooks import live_decoder, tree_rows
from evolve.kinds.tree_shape.search_seeds import choose_tree_seeds
from evolve.traces.trees import load_trees


def population(data, fitness, gamma, cache_size, costs, verifier, weighting) -> TreeShapePopulationEvaluator:
    """The tree-shape population scorer (tokens per second under ``costs`` on the split's tree table)."""
    return TreeShapePopulationEvaluator(data, fitness, cache_size=cache_size, costs=costs)


def score(rule, data, directory, split, gamma, fitness, speedup_costs, costs) -> ShapeMetrics:
    """One shape's :class:`evolve.kinds.tree_shape.eval_shape.ShapeMetrics` under ``costs`` on the tree table of
    ``split`` in the dataset directory ``directory``.

    Raises: InputError without a dataset directory, or as :func:`evolve.traces.trees.load_trees`.
    """
    if directory is None:
        raise InputError("a tree-shape program is scored on the tree tables of a dataset directory; give its path",
                         param="data")
    trees = shape_data(load_trees(directory, split))
    return shape_metrics(program_values(rule.program, trees), trees, costs)


def seeds(cfg, features, train, gamma, objective):
    """Fixed-width and adaptive trees, EAGLE-2's per-level top-k and the level gates."""
    return choose_tree_seeds(cfg, features, train, objective)


HOOKS = KindHooks(metrics=ShapeMetrics, population=population, score=score, seeds=seeds, trees=tree_rows,
                  live=live_decoder, export=TREE_LAYOUT, engines=engine_support)

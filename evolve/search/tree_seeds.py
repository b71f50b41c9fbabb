"""The warm start of a tree-shape search (``evolve = "tree-shape"``).

Its programs are draft-tree shapes (:mod:`evolve.eval.tree_shape`), so no acceptance rule can seed
it. The known shapes written as programs (:func:`evolve.eval.tree_shape.shape_expressions`): every
fixed width (width 1: a chain) to every depth the trees reach, and the adaptive widths (children
growing with the drafter's entropy), all scored on train in one batched call; the seeds are the best
fixed width, the best chain and the best adaptive width by the run's objective, then the other fixed
widths, at most :data:`evolve.search.warm_start.MAX_SEED_FRACTION` of the population.
"""
from __future__ import annotations

from typing import Callable

from evolve.eval.evaluator import EvalData
from evolve.eval.tree_population import TreeShapePopulationEvaluator
from evolve.eval.tree_shape import ShapeMetrics, shape_expressions
from evolve.search.config import RunConfig
from evolve.search.warm_start import Seed, WarmStart, fill_seeds


def choose_tree_seeds(cfg: RunConfig, train: EvalData, objective: Callable[[ShapeMetrics], float]) -> WarmStart:
    """The seeds of a warm-started tree-shape search (see the module doc).

    Raises: InputError when the split has no tree table.
    """
    scorer = TreeShapePopulationEvaluator(train, cfg.acceptance_quality_fitness(), cache_size=0,
                                          costs=cfg.cost_model)
    s = scorer.shapes
    named = shape_expressions(int(max(s.n_children.max(), 1)), int(max(s.depth.max(), 1)))
    values = [objective(m) for m in scorer.evaluate([e for _, e in named])]

    def best(prefix: str) -> int:
        idx = [i for i, (name, _) in enumerate(named) if name.startswith(prefix)]
        return max(idx, key=lambda i: (values[i], -i))

    ordered = [Seed(*named[best("fixed_width")], "the best fixed-width tree on train"),
               Seed(*named[best("fixed_width:width=1,")], "the best chain on train"),
               Seed(*named[best("adaptive_width")], "the best adaptive width on train")]
    ordered += [Seed(name, expr, "a fixed-width tree") for name, expr in named if name.startswith("fixed_width")]
    return fill_seeds(WarmStart(), ordered, cfg.population)


__all__ = ["choose_tree_seeds"]

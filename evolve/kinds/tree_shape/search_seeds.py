"""The warm start of a tree-shape search (``evolve = "tree-shape"``).

Its programs are draft-tree shapes (:mod:`evolve.eval.tree_scoring`), so no acceptance rule can seed
it. The known shapes written as programs (:func:`evolve.eval.tree_competitors.shape_expressions`): every
fixed width (width 1: a chain) to every depth the trees reach, the adaptive widths (children growing with
the drafter's entropy), EAGLE-2's per-level top-k and the level gates, all scored on train in one batched
call; the seeds are the best fixed width, the best chain, the best adaptive width, the best per-level top-k
and the best level gate by the run's objective, then the other fixed widths, at most
:data:`evolve.search.warm_start.MAX_SEED_FRACTION` of the population. A shape reading a feature the run
does not offer (a level feature under ``--features`` without them) is recorded as skipped.
"""
from __future__ import annotations

from typing import Callable

from evolve.eval.evaluator import EvalData
from evolve.kinds.tree_shape.eval_population import TreeShapePopulationEvaluator
from evolve.eval.tree_competitors import shape_expressions
from evolve.eval.tree_scoring import ShapeMetrics
from evolve.kinds.tree_shape import KIND
from evolve.search.config import RunConfig
from evolve.search.warm_start import Seed, Skipped, WarmStart, fill_seeds, unusable
from heuristics.contract import Rule


def choose_tree_seeds(cfg: RunConfig, features: tuple[str, ...], train: EvalData,
                      objective: Callable[[ShapeMetrics], float]) -> WarmStart:
    """The seeds of a warm-started tree-shape search (see the module doc); a named shape reading a feature
    not among the run's ``features`` is recorded as skipped.

    Raises: InputError when the split has no tree table.
    """
    scorer = TreeShapePopulationEvaluator(train, cfg.acceptance_quality_fitness(), cache_size=0,
                                          costs=cfg.cost_model)
    s = scorer.shapes
    warm = WarmStart()
    named = []
    for name, expr in shape_expressions(int(max(s.n_children.max(), 1)), int(max(s.depth.max(), 1))):
        why = unusable(Rule(name, expression=expr, kind=KIND.name), features)
        if why is None:
            named.append((name, expr))
        else:
            warm.skipped.append(Skipped(name, why))
    values = [objective(m) for m in scorer.evaluate([e for _, e in named])]

    def best(prefix: str, reason: str) -> list[Seed]:
        idx = [i for i, (name, _) in enumerate(named) if name.startswith(prefix)]
        return [Seed(*named[max(idx, key=lambda i: (values[i], -i))], reason)] if idx else []

    ordered = (best("fixed_width", "the best fixed-width tree on train")
               + best("fixed_width:width=1,", "the best chain on train")
               + best("adaptive_width", "the best adaptive width on train")
               + best("eagle2_topk", "the best EAGLE-2 per-level top-k on train")
               + best("level_gate", "the best level gate on train"))
    ordered += [Seed(name, expr, "a fixed-width tree") for name, expr in named if name.startswith("fixed_width")]
    return fill_seeds(warm, ordered, cfg.population)


__all__ = ["choose_tree_seeds"]

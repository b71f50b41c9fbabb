"""The warm start of a relaxed block verification search (``evolve = "relaxation"``).

The programs of such a search are relaxation weights w(features)
(:mod:`evolve.eval.relaxed_block`), not acceptance thresholds, so the rules of
the registry cannot seed it. Its known members are the fixed-w family
(:data:`evolve.eval.relaxed_block.FIXED_WEIGHTS`, w the same at every
position; w = 0 is lossless block verification): all are scored on train in one
batched call, and the seeds are, in this order, w = 0 and the member chosen by
each criterion of :func:`evolve.search.warm_start.criteria` (for ``pareto``: the
most tokens per call within each TV budget of
:data:`evolve.search.warm_start.SEED_BUDGETS`, ``tv_budget`` and ``tv_cap``;
for ``speed_at_tv``: the best objective), one per distinct weight, at most
:data:`evolve.search.warm_start.MAX_SEED_FRACTION` of the population.
"""
from __future__ import annotations

from typing import Callable

from evolve.eval.evaluator import EvalData, Metrics
from evolve.eval.relaxed_block import FIXED_WEIGHTS
from evolve.kinds.relaxation.eval_population import RelaxedPopulationEvaluator
from evolve.search.config import RunConfig
from evolve.search.warm_start import Seed, WarmStart, best_per_criterion, criteria, fill_seeds

#: Name of the fixed-w family's members in the seeds: ``relaxed_block(w=0.01)``.
FAMILY = "relaxed_block"


def member_name(weight: float) -> str:
    """``relaxed_block(w=W)``: the fixed-w family's member with weight ``weight``."""
    return f"{FAMILY}(w={weight:g})"


def choose_relaxed_seeds(cfg: RunConfig, train: EvalData, gamma: int,
                         objective: Callable[[Metrics], float]) -> WarmStart:
    """The seeds of a warm-started relaxed block verification search (see the module doc).

    Args: the run's configuration, the train split, the draft length and the
    run's objective of train metrics (higher is better).
    Returns: :class:`evolve.search.warm_start.WarmStart`.
    Raises: InputError when the split lacks the relaxed columns.
    """
    weights = list(FIXED_WEIGHTS)
    exprs = [f"{w!r}" for w in weights]
    metrics = RelaxedPopulationEvaluator(train, cfg.acceptance_quality_fitness(), gamma=gamma,
                                         cache_size=0).evaluate(exprs)
    picks = best_per_criterion(metrics, [FAMILY] * len(weights), criteria(cfg, objective))
    ordered = [Seed(member_name(0.0), exprs[0], "lossless block verification (w = 0)")]
    ordered += [Seed(member_name(weights[i]), exprs[i], f"{criterion} in the fixed-w family")
                for i, criterion, _ in picks]
    return fill_seeds(WarmStart(), ordered, cfg.population)


__all__ = ["FAMILY", "member_name", "choose_relaxed_seeds"]

"""The champion of a search: the candidate with the best validation score, with two guards.

Candidates are the hall-of-fame members (the final non-dominated front of a
``pareto`` run) and, in a warm-started run, the seeded rules
(:mod:`evolve.search.warm_start`); every candidate carries its train and valid
metrics. :func:`choose` picks one:

* plain choice (``warm_start`` off, as every run did before the warm start):
  the best valid score (:func:`evolve.search.algorithms.score`), then the
  smaller tree, then the better train score, then the earlier candidate;
* seeded fallback (warm start): the champion is never worse on valid than the
  best seeded rule; when no evolved candidate scores strictly better, the
  champion *is* that seeded rule (a seeded rule wins ties);
* cliff-safe choice (warm start, fitness kinds ``acceptance_quality`` and
  ``expected``, which halve the fitness below the quality floor): among the
  candidates within :data:`NEAR_EQUAL` (relative) of the best valid fitness,
  and not below the best seeded rule, the one whose valid quality is most
  safely above the floor wins, measured in standard errors of the quality
  estimate (:func:`quality_margin`), counted up to :data:`SAFE_MARGIN`; then
  the plain order. So a rule that beats another by a hair on valid but sits
  on the floor does not become the champion and halve its fitness on test.

Why a margin and not selection on the expected fitness: the expected fitness
removes the noise of the recorded random numbers ``u`` but keeps the noise of
which tokens the valid split holds, and it has the same floor; the margin
measures the distance to the floor in the units of that noise, and costs
nothing when no near-equal candidate is close to the floor.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from evolve.eval.evaluator import AcceptanceQualityFitness, Metrics

#: Candidates whose valid fitness is within this fraction of the best count as near-equal (1%: about
#: 2.5 standard errors of the acceptance rate on a valid split of 15,000 tokens, that of the default data).
NEAR_EQUAL = 0.01
#: Quality margins above the floor count up to this many standard errors (about 2.3% one-sided
#: probability of falling below the floor on a fresh split of the same size); beyond it all are safe.
SAFE_MARGIN = 2.0
#: Fitness kinds with a quality floor, where the cliff-safe choice applies.
FLOOR_FITNESS: tuple[str, ...] = ("acceptance_quality", "expected")


@dataclass(frozen=True)
class Candidate:
    """One champion candidate: its train and valid metrics, node count, and the seeded rule's name (or None)."""

    train: Metrics
    valid: Metrics
    size: int
    seed_name: str | None = None


def quality_margin(metrics: Metrics, fitness: AcceptanceQualityFitness, expected: bool = False) -> float:
    """(quality - quality_floor) / standard error of the quality estimate; +-inf for a zero error.

    Quality Q = 1 - w_fa * fa - w_fr * fr with rates fa, fr over N tokens
    (false accepts and false rejects, or with ``expected`` the expected TV and
    expected false-reject rates and Q = ``expected_quality``). The standard
    error is sqrt((w_fa^2 fa (1 - fa) + w_fr^2 fr (1 - fr)) / N): binomial for
    counted rates, an upper bound for means of values in [0, 1], covariance
    ignored. Returns +inf when the error is 0 and Q >= floor, -inf when Q <
    floor with no error, 0.0 when N is 0.
    """
    n = metrics.tokens
    if n == 0:
        return 0.0
    if expected:
        quality, fa, fr = metrics.expected_quality, metrics.expected_tv, metrics.expected_false_reject
    else:
        quality, fa, fr = metrics.quality_score, metrics.false_accepts / n, metrics.false_rejects / n
    fa, fr = min(max(fa, 0.0), 1.0), min(max(fr, 0.0), 1.0)
    var = (fitness.false_accept_weight ** 2 * fa * (1 - fa) + fitness.false_reject_weight ** 2 * fr * (1 - fr)) / n
    excess = quality - fitness.quality_floor
    if var <= 0.0:
        return math.inf if excess >= 0 else -math.inf
    return excess / math.sqrt(var)


def choose(candidates: list[Candidate], objective: Callable[[Metrics], float], fitness_kind: str,
           fitness: AcceptanceQualityFitness, guarded: bool) -> int:
    """Index of the champion among ``candidates`` (see the module doc).

    Args:
        candidates: non-empty; evolved ones (``seed_name`` None) and seeded ones.
        objective: the run's score of a split's metrics (higher is better).
        fitness_kind: the run's fitness kind (the cliff-safe choice applies to :data:`FLOOR_FITNESS`).
        fitness: the acceptance-quality parameters (floor, weights).
        guarded: apply the seeded fallback and the cliff-safe choice (warm
            start); False gives the plain choice.

    Raises: ValueError for an empty list.
    """
    if not candidates:
        raise ValueError("no champion candidates")
    valid = [objective(c.valid) for c in candidates]
    train = [objective(c.train) for c in candidates]
    if not guarded:
        return min(range(len(candidates)), key=lambda i: (-valid[i], candidates[i].size, -train[i], i))
    pool = list(range(len(candidates)))
    seeded = [valid[i] for i in pool if candidates[i].seed_name is not None]
    floor = max(seeded) if seeded else -math.inf
    margin = [0.0] * len(candidates)
    if fitness_kind in FLOOR_FITNESS:
        best = max(valid)
        near = max(floor, best - NEAR_EQUAL * abs(best))
        pool = [i for i in pool if valid[i] >= near]
        expected = fitness_kind == "expected"
        margin = [min(quality_margin(c.valid, fitness, expected), SAFE_MARGIN) for c in candidates]
    else:
        pool = [i for i in pool if valid[i] >= floor]
    return min(pool, key=lambda i: (-margin[i], -valid[i], candidates[i].seed_name is None, candidates[i].size,
                                    -train[i], i))


__all__ = ["NEAR_EQUAL", "SAFE_MARGIN", "FLOOR_FITNESS", "Candidate", "quality_margin", "choose"]

"""The champion of a search: the candidate with the best validation score, with two guards.

Candidates are the hall-of-fame members (the final non-dominated front of a
``pareto`` run) and, in a warm-started run, the seeded rules
(:mod:`evolve.search.warm_start`); every candidate carries its train and valid
metrics. :func:`choose` picks one:

* plain choice (``warm_start`` off, as every run did before the warm start):
  the best valid score (:func:`evolve.search.state.score`), then the
  smaller tree, then the better train score, then the earlier candidate;
* seeded fallback (warm start): the champion is never worse on valid than the
  best seeded rule; when no evolved candidate scores strictly better, the
  champion *is* that seeded rule (a seeded rule wins ties);
* cliff-safe choice (warm start, objectives with a quality floor:
  ``acceptance_quality`` and ``expected``, which halve the fitness below it): among the
  candidates within :data:`NEAR_EQUAL` (relative) of the best valid fitness,
  and not below the best seeded rule, the one whose valid quality is most
  safely above the floor wins, measured in standard errors of the quality
  estimate (:func:`evolve.eval.objectives.quality_margin`), counted up to :data:`SAFE_MARGIN`; then
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

from evolve.eval.evaluator import Metrics
from evolve.eval.objectives import Objective

#: Candidates whose valid fitness is within this fraction of the best count as near-equal (1%: about
#: 2.5 standard errors of the acceptance rate on a valid split of 15,000 tokens, that of the default data).
NEAR_EQUAL = 0.01
#: Quality margins above the floor count up to this many standard errors (about 2.3% one-sided
#: probability of falling below the floor on a fresh split of the same size); beyond it all are safe.
SAFE_MARGIN = 2.0


@dataclass(frozen=True)
class Candidate:
    """One champion candidate: its train and valid metrics, node count, and the seeded rule's name (or None)."""

    train: Metrics
    valid: Metrics
    size: int
    seed_name: str | None = None


def choose(candidates: list[Candidate], objective: Callable[[Metrics], float], spec: Objective, cfg,
           guarded: bool) -> int:
    """Index of the champion among ``candidates`` (see the module doc).

    Args:
        candidates: non-empty; evolved ones (``seed_name`` None) and seeded ones.
        objective: the run's score of a split's metrics (higher is better).
        spec: the run's objective (the cliff-safe choice applies when it has a
            :attr:`evolve.eval.objectives.Objective.margin`, a quality floor).
        cfg: the run's settings, passed to ``spec.margin``.
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
    if spec.margin is not None:
        best = max(valid)
        near = max(floor, best - NEAR_EQUAL * abs(best))
        pool = [i for i in pool if valid[i] >= near]
        margin = [min(spec.margin(c.valid, cfg), SAFE_MARGIN) for c in candidates]
    else:
        pool = [i for i in pool if valid[i] >= floor]
    return min(pool, key=lambda i: (-margin[i], -valid[i], candidates[i].seed_name is None, candidates[i].size,
                                    -train[i], i))


__all__ = ["NEAR_EQUAL", "SAFE_MARGIN", "Candidate", "choose"]

"""Paired bootstrap intervals of a ratio of sums against a reference, resampling whole groups (texts).

Tokens per second of a heuristic on a split is a ratio of sums over its target calls, sum(tokens) / sum(seconds).
Calls of one text are correlated, so the resampling unit is the text: every replicate draws the split's texts with
replacement (Efron and Tibshirani 1993, the nonparametric bootstrap; resampling clusters, not calls) and recomputes
every heuristic's ratio on the same draw, so heuristics are compared paired. The interval of a heuristic against
the reference is the percentile interval of (its tokens per second) / (the reference's) over the replicates.
"""
from __future__ import annotations

import numpy as np

#: Seed of the replicates' random draws (the same seed gives the same intervals).
BOOTSTRAP_SEED = 0
#: Coverage of the percentile interval.
COVERAGE = 0.95


def group_weights(groups: np.ndarray, replicates: int, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """Weights float64 (replicates, n) of the n calls in each replicate: how many times the call's group (``groups``
    int64 (n,), e.g. the text index) was drawn when the distinct groups are drawn with replacement."""
    ids, index = np.unique(groups, return_inverse=True)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, ids.size, size=(replicates, ids.size))
    counts = np.zeros((replicates, ids.size))
    np.add.at(counts, (np.repeat(np.arange(replicates), ids.size), draws.ravel()), 1.0)
    return counts[:, index]


def ratio_interval(weights: np.ndarray, values: np.ndarray, reference: np.ndarray) -> tuple[float, float, float]:
    """(point, low, high) of ratio(values) / ratio(reference), where ratio(x) = sum(x[:, 0]) / sum(x[:, 1]) over the
    calls: the point on the sample, low and high the :data:`COVERAGE` percentile interval over the replicates.

    ``weights`` float64 (replicates, n) from :func:`group_weights`; ``values``, ``reference`` float64 (n, 2): per
    call (numerator, denominator), e.g. (expected tokens, seconds).
    """
    point = (values[:, 0].sum() / values[:, 1].sum()) / (reference[:, 0].sum() / reference[:, 1].sum())
    rep = (weights @ values[:, 0]) / (weights @ values[:, 1]) / ((weights @ reference[:, 0]) / (weights @ reference[:, 1]))
    tail = (1.0 - COVERAGE) / 2.0 * 100.0
    low, high = np.percentile(rep, [tail, 100.0 - tail])
    return float(point), float(low), float(high)


__all__ = ["BOOTSTRAP_SEED", "COVERAGE", "group_weights", "ratio_interval"]

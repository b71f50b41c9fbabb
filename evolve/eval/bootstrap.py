"""Paired bootstrap intervals of a ratio of sums against a reference, resampling whole groups (texts).

Tokens per second of a heuristic on a split is a ratio of sums over its target calls, sum(tokens) / sum(seconds).
Calls of one text are correlated, so the resampling unit is the text: every replicate draws the split's texts with
replacement (Efron and Tibshirani 1993, the nonparametric bootstrap; resampling clusters, not calls) and recomputes
every heuristic's ratio on the same draw, so heuristics are compared paired. The interval of a heuristic against
the reference is the percentile interval of (its tokens per second) / (the reference's) over the replicates.

What an interval can say is checked here, for every bootstrap of the project: :func:`group_weights` refuses fewer
than :data:`MIN_REPLICATES` replicates (a 95% percentile interval needs at least one replicate in each 2.5% tail,
1 / 0.025 = 40: with fewer the "interval" is a pair of order statistics near the extremes, zero-width for one
replicate and not containing the point), :func:`ratio_interval` gives no interval (NaN ends, printed by
:func:`interval_text` as not estimated) when its replicates do not vary, and :func:`interval_caveat` says when the
split has fewer than :data:`MIN_GROUPS` texts: the percentile bootstrap over few resampling units is narrower than its nominal coverage
(Cameron, Gelbach and Miller 2008 on few clusters), and with one text every replicate is the sample, so the
interval is the point itself.
"""
from __future__ import annotations

import math

import numpy as np

from evolve.errors import InputError

#: Seed of the replicates' random draws (the same seed gives the same intervals).
BOOTSTRAP_SEED = 0
#: Coverage of the percentile interval.
COVERAGE = 0.95
#: Fewest replicates a :data:`COVERAGE` percentile interval can use: one replicate in each tail (40 for 95%).
MIN_REPLICATES = math.ceil(2.0 / (1.0 - COVERAGE) - 1e-9)
#: Fewest groups (texts) below which an interval carries :func:`interval_caveat`'s caveat.
MIN_GROUPS = 10
#: Replicates whose spread is at most this fraction of their magnitude take one value: the same statistic summed in
#: another order (a matrix product against a plain sum) differs in the last bits, which is no variation to estimate
#: an interval from.
SAME_VALUE_RTOL = 1e-12


def check_replicates(replicates: int, param: str = "bootstrap") -> None:
    """Refuse a replicate count that cannot give a :data:`COVERAGE` percentile interval: InputError (one line with
    the value; ``param`` the parameter that carries it, which the command line names as its option) unless
    ``replicates`` is an integer >= :data:`MIN_REPLICATES`."""
    if isinstance(replicates, bool) or not isinstance(replicates, (int, np.integer)) or replicates < MIN_REPLICATES:
        raise InputError(f"a {COVERAGE:.0%} percentile interval needs at least {MIN_REPLICATES} bootstrap replicates "
                         f"(one in each {(1 - COVERAGE) / 2:.1%} tail; value {replicates!r})", param=param)


def interval_caveat(groups: np.ndarray, what: str = "texts") -> str | None:
    """The caveat of an interval resampling the distinct values of ``groups`` (int64 (n,), e.g. the text index), or
    None when there are at least :data:`MIN_GROUPS` of them."""
    count = np.unique(groups).size
    if count >= MIN_GROUPS:
        return None
    if count <= 1:
        return (f"only {count} {what[:-1] if what.endswith('s') else what}: every replicate is the sample, so the "
                f"interval is the point itself and says nothing about the uncertainty")
    return (f"only {count} {what}: with fewer than {MIN_GROUPS} the percentile interval is narrower than "
            f"{COVERAGE:.0%} coverage (too few {what} to resample)")


def group_draws(count: int, replicates: int, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """int64 (replicates, count): in each replicate, ``count`` groups drawn with replacement, as indices into the
    ``count`` distinct groups (sorted ids). Raises: InputError for fewer than :data:`MIN_REPLICATES` replicates
    (:func:`check_replicates`)."""
    check_replicates(replicates)
    return np.random.default_rng(seed).integers(0, count, size=(replicates, count))


def group_weights(groups: np.ndarray, replicates: int, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """Weights float64 (replicates, n) of the n calls in each replicate: how many times the call's group (``groups``
    int64 (n,), e.g. the text index) was drawn when the distinct groups are drawn with replacement.

    Raises: InputError for fewer than :data:`MIN_REPLICATES` replicates (:func:`check_replicates`)."""
    ids, index = np.unique(groups, return_inverse=True)
    draws = group_draws(ids.size, replicates, seed)
    counts = np.zeros((replicates, ids.size))
    np.add.at(counts, (np.repeat(np.arange(replicates), ids.size), draws.ravel()), 1.0)
    return counts[:, index]


def ratio_interval(weights: np.ndarray, values: np.ndarray, reference: np.ndarray) -> tuple[float, float, float]:
    """(point, low, high) of ratio(values) / ratio(reference), where ratio(x) = sum(x[:, 0]) / sum(x[:, 1]) over the
    calls: the point on the sample, low and high the :data:`COVERAGE` percentile interval over the replicates.

    ``weights`` float64 (replicates, n) from :func:`group_weights`; ``values``, ``reference`` float64 (n, 2): per
    call (numerator, denominator), e.g. (expected tokens, seconds).

    An interval is estimated only from replicates that vary: when the finite replicates take one value up to rounding
    (:func:`one_value`: one group, or groups whose ratios are all equal, so every draw gives the point) or fewer than
    :data:`MIN_REPLICATES` are finite, low and high are NaN (:func:`interval_text` prints them as not estimated),
    never a zero-width "interval". The point is NaN when a sum of denominators is 0.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        point = (values[:, 0].sum() / values[:, 1].sum()) / (reference[:, 0].sum() / reference[:, 1].sum())
        rep = (weights @ values[:, 0]) / (weights @ values[:, 1]) \
            / ((weights @ reference[:, 0]) / (weights @ reference[:, 1]))
    return (float(point), *percentile_interval(rep))


def percentile_interval(replicates: np.ndarray) -> tuple[float, float]:
    """(low, high) float: the :data:`COVERAGE` percentile interval of the finite values of ``replicates`` (float64
    (R,), a statistic's bootstrap replicates), or (NaN, NaN) when fewer than :data:`MIN_REPLICATES` are finite or they
    take one value up to rounding (:func:`one_value`; no zero-width "interval" is ever estimated)."""
    finite = replicates[np.isfinite(replicates)]
    if finite.size < MIN_REPLICATES or one_value(finite):
        return math.nan, math.nan
    tail = (1.0 - COVERAGE) / 2.0 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return float(low), float(high)


def one_value(values: np.ndarray) -> bool:
    """Whether the finite float64 ``values`` (1-D, not empty) take one value up to rounding: their spread is at most
    :data:`SAME_VALUE_RTOL` of their largest magnitude (exactly equal when that magnitude is 0)."""
    spread = float(np.max(values) - np.min(values))
    return spread <= SAME_VALUE_RTOL * float(np.max(np.abs(values)))


#: How :func:`interval_text` shows an interval that could not be estimated.
NOT_ESTIMATED = "n/a (one value)"


def interval_text(low: float, high: float, spec: str = ".3f") -> str:
    """``[low, high]`` formatted with ``spec``, or :data:`NOT_ESTIMATED` when either end is not a finite number (an
    interval :func:`ratio_interval` could not estimate from more than one distinct value) or the ends coincide."""
    if not (math.isfinite(low) and math.isfinite(high)) or one_value(np.array([low, high])):
        return NOT_ESTIMATED
    return f"[{low:{spec}}, {high:{spec}}]"


__all__ = ["BOOTSTRAP_SEED", "COVERAGE", "MIN_GROUPS", "MIN_REPLICATES", "NOT_ESTIMATED", "SAME_VALUE_RTOL",
           "check_replicates", "group_draws", "group_weights", "interval_caveat", "interval_text", "one_value",
           "percentile_interval", "ratio_interval"]

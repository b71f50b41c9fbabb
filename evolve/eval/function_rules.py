"""Thresholds of function rules: a Numba-compiled rule function called once per token.

A function rule (:class:`heuristics.contract.Rule` with a Python function) has
the rule contract's signature ``fn(draft_prob, target_prob, position: int,
draft_entropy, target_entropy, top_token_match: bool) -> float``, optionally
with a seventh argument holding the extra columns it declares. Its raw
thresholds are then reduced by the same kernels as programs
(:func:`evolve.eval.fastpath.scoring.score_tau`).

These loops are not cached: Numba cannot cache a function that takes another
function as an argument, so each rule costs one compilation per process.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit
def function_thresholds(fn, X, out):
    """Raw thresholds of a compiled rule function, written into ``out`` float64 (n,) and returned.

    ``fn`` is called per row with rows 0..5 of ``X`` (float64 (n_features, n),
    :data:`evolve.gp.primitives.CORE_FEATURES` first, in order); ``position``
    is passed as int64 and ``top_token_match`` as ``X[5, i] > 0.5``.
    """
    for i in range(X.shape[1]):
        out[i] = fn(X[0, i], X[1, i], np.int64(X[2, i]), X[3, i], X[4, i], X[5, i] > 0.5)
    return out


@njit
def function_thresholds_extra(fn, X, E, out):
    """As :func:`function_thresholds` for a rule declaring extra columns.

    The rule is called with a seventh argument ``E[:, i]``, float64 (k,), the
    declared extra columns of row i in declared order (``E`` float64 (k, n)).
    """
    for i in range(X.shape[1]):
        out[i] = fn(X[0, i], X[1, i], np.int64(X[2, i]), X[3, i], X[4, i], X[5, i] > 0.5, E[:, i])
    return out

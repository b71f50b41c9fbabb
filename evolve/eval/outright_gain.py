"""What accepting one drafted token outright is worth to its block, with every other token standard.

Under token-wise verification with thresholds tau_k, a block of L drafted
tokens emits T = 1 + sum_{k<L} prod_{i<=k} tau_i tokens in expectation and
damages the output by D = sum_k prod_{i<k} tau_i max(0, tau_k - r_k) (the block
metrics of :mod:`evolve.eval.evaluator`; Leviathan, Kalman, Matias 2023, arXiv
2211.17192). Hold every threshold at the standard r_i = min(1, p_i/q_i) and
raise the one at depth d to 1. Then, with reach_d = prod_{i<d} r_i (the
probability that depth d is tested) and W_{d+1} = sum_{k>d} prod_{d<i<=k} r_i
(the drafted tokens expected after depth d once it is accepted),

* the gain in expected tokens is  G_d = reach_d (1 - r_d) (1 + W_{d+1}),
* the added damage is              D_d = reach_d (1 - r_d),

so G_d / D_d = 1 + W_{d+1} is the tokens bought per unit of damage. Both are
computed in one backward and one forward pass over each block's records
(depths >= gamma, and rows before the first block start, get NaN). They are the
training targets of the learned per-token rule of ``benchmark.py pareto``.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def outright_gain_kernel(r, depth, gamma, gain, damage, future):
    """Fill ``gain`` (G_d), ``damage`` (D_d) and ``future`` (1 + W_{d+1}) per record (see the module doc).

    Args: ``r`` float64 (n,) the standard thresholds min(1, p/q); ``depth``
    float64 or int64 (n,) (``draft_index``); ``gamma`` >= 1; ``gain``,
    ``damage``, ``future`` float64 (n,) outputs, NaN where a record is not used.
    """
    n = r.shape[0]
    for i in range(n):
        gain[i] = np.nan
        damage[i] = np.nan
        future[i] = np.nan
    i = 0
    while i < n and depth[i] != 0:
        i += 1
    while i < n:
        s = i
        e = i + 1
        while e < n and depth[e] != 0:
            e += 1
        length = min(e - s, gamma)
        w = 0.0  # W_{k+1}: expected drafted tokens accepted after depth k
        for k in range(length - 1, -1, -1):
            future[s + k] = 1.0 + w
            w = r[s + k] * (1.0 + w)
        reach = 1.0
        for k in range(length):
            row = s + k
            damage[row] = reach * (1.0 - r[row])
            gain[row] = damage[row] * future[row]
            reach *= r[row]
        i = e


def outright_gain(r: np.ndarray, depth: np.ndarray, gamma: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(G, D, 1 + W) per record, float64 (n,) each: gain in tokens, damage in TV, and their ratio (module doc).

    Args: ``r`` float64 (n,) = min(1, p/q); ``depth`` (n,) the ``draft_index``
    column; ``gamma`` the draft length (>= 1). Records at depth >= gamma or
    before the first block start hold NaN. Raises ValueError for gamma < 1 or
    arrays of different lengths.
    """
    if isinstance(gamma, bool) or int(gamma) != gamma or gamma < 1:
        raise ValueError(f"gamma must be an integer >= 1 (value {gamma!r})")
    r = np.ascontiguousarray(r, dtype=np.float64)
    depth = np.ascontiguousarray(depth)
    if depth.shape != r.shape:
        raise ValueError(f"r and depth differ in shape ({r.shape}, {depth.shape})")
    gain, damage, future = np.empty(r.size), np.empty(r.size), np.empty(r.size)
    outright_gain_kernel(r, depth, int(gamma), gain, damage, future)
    return gain, damage, future


__all__ = ["outright_gain", "outright_gain_kernel"]

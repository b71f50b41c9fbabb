"""The token-wise block expectation: expected tokens per target call and expected damage of one block.

Terms as in :mod:`evolve.verification`. A speculation block of L drafted tokens is verified token by
token with thresholds tau_0..tau_{L-1} (a per-token rule; the standard rule has tau_k = r_k =
min(1, p_k(x_k)/q_k(x_k))). Thresholds are the evaluator's: NaN or infinite -> 0, then clamped to
[0, 1] (:func:`clamp_threshold`). Depth k is tested only if every earlier drafted token of its block
was accepted, so with the **reach** R_k = prod_{i<k} tau_i (R_0 = 1):

* **expected tokens** per target call (the mean acceptance length of the block, the bonus or recovered
  token included): T = 1 + sum_{j<L} prod_{i<=j} tau_i = 1 + sum_{j<L} R_{j+1};
* **expected damage** (total-variation distance from p added by the block): D = sum_{j<L} R_j e_j, with
  the **excess** e_j the damage of one tested depth: e_j = max(0, tau_j - r_j) for a record (the
  per-record term whose expectation over x ~ q is the depth's total-variation damage,
  :func:`threshold_excess`), or that total-variation damage itself, sum_v max(0, q_j(v) tau_j(v) -
  p_j(v)), where the whole distributions are known (live decoding).

(Leviathan et al. 2023, arXiv 2211.17192, section 3; the evaluator's block metrics.) Both are one
recursion over the depths, k = 0..L-1, starting from reach = 1, tokens = 1, damage = 0:

    damage += reach * e_k;   reach *= tau_k;   tokens += reach

:func:`expectation_step` is that step, written once: every caller (the evaluator's fast path and
reference path, the simulator's chains, the verification-length prefix tables, live decoding, the
oracle of ``benchmark.py pareto``) runs the recursion through it, in this order of floating-point
operations, so their results agree to the last bit. A caller may keep its own running sums in
``tokens`` and ``damage`` (the fast path sums a whole tile of blocks in one accumulator); the
whole-block forms are :func:`block_expectation` (records), :func:`block_expectation_tv` (given
excesses) and :func:`blocks_expectation` (a matrix of blocks). All are ``@njit(cache=True)``: called
from Numba kernels (LLVM inlines them) and from numpy code as they are.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def clamp_threshold(t):
    """The evaluator's threshold semantics: NaN or +-inf -> 0, then clamped to [0, 1].

    Args: a float. Returns a float in [0, 1] (``t`` itself, with its sign of zero, when already there).
    """
    if not np.isfinite(t):
        return 0.0
    if t < 0.0:
        return 0.0
    if t > 1.0:
        return 1.0
    return t


@njit(cache=True)
def threshold_excess(tau, r):
    """e = max(0, tau - r): a record's damage term (module doc); 0 when tau - r is NaN.

    Args: floats ``tau`` (a clamped threshold) and ``r`` = min(1, p(x)/q(x)). Returns a float >= 0.
    """
    e = tau - r
    return e if e > 0.0 else 0.0


@njit(cache=True)
def expectation_step(reach, tokens, damage, tau, excess):
    """One depth of the token-wise block expectation (module doc): returns (reach, tokens, damage) after it.

    Args: ``reach`` prod of the block's earlier thresholds (1 at depth 0); ``tokens`` and ``damage`` the
    running sums (1 and 0 at a block's start, or any accumulator the caller carries); ``tau`` the depth's
    clamped threshold; ``excess`` its damage term e >= 0. Operations, in order:
    damage + reach * excess, reach * tau, tokens + (reach * tau).
    """
    damage += reach * excess
    reach *= tau
    tokens += reach
    return reach, tokens, damage


@njit(cache=True)
def block_expectation(tau, r):
    """(expected tokens T, expected damage D) of one block of records (module doc).

    Args: ``tau`` float64 (L,) the rule's thresholds (raw: clamped here); ``r`` float64 (>= L,)
    min(1, p/q) of the same records. Returns two floats: T in [1, L + 1], D >= 0.
    """
    reach, tokens, damage = 1.0, 1.0, 0.0
    for k in range(tau.shape[0]):
        t = clamp_threshold(tau[k])
        reach, tokens, damage = expectation_step(reach, tokens, damage, t, threshold_excess(t, r[k]))
    return tokens, damage


@njit(cache=True)
def block_expectation_tv(tau, tv):
    """(expected tokens T, expected damage D) of one block whose depths' damage terms are given (module doc).

    Args: ``tau`` float64 (L,) the thresholds of the drafted tokens (raw: clamped here); ``tv`` float64
    (>= L,) each depth's damage term e_k >= 0 (live decoding: its exact total-variation damage). Returns two
    floats: T in [1, L + 1], D >= 0.
    """
    reach, tokens, damage = 1.0, 1.0, 0.0
    for k in range(tau.shape[0]):
        reach, tokens, damage = expectation_step(reach, tokens, damage, clamp_threshold(tau[k]), tv[k])
    return tokens, damage


@njit(cache=True)
def blocks_expectation(tau, r, length, tokens, damage):
    """:func:`block_expectation` of every row of a matrix of blocks, into ``tokens`` and ``damage``.

    Args: ``tau`` float64 (B, gamma) thresholds (raw: clamped here), ``r`` float64 (B, gamma) min(1, p/q);
    ``length`` int64 (B,) the depths of each block, in [0, gamma] (entries past them are not read);
    ``tokens``, ``damage`` float64 (B,) written. Returns nothing.
    """
    for b in range(tau.shape[0]):
        tokens[b], damage[b] = block_expectation(tau[b, :length[b]], r[b])


__all__ = ["block_expectation", "block_expectation_tv", "blocks_expectation", "clamp_threshold", "expectation_step",
           "threshold_excess"]

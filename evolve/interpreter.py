"""The Numba interpreter for postfix programs and the fused metric reductions.

Tokens are processed in blocks of :data:`BLOCK` rows: each opcode runs over a
whole block (a tight loop the compiler vectorises), so interpretation overhead
is paid once per node per block rather than once per node per token. The
block's thresholds are reduced into the metric counts right away; no array of
per-token thresholds is materialised.

The counts array (float64, :data:`N_COUNTS`) holds, in order: accepts, false
accepts, false rejects, invalid thresholds, sum of tau, sum of max(0, tau - r)
and sum of max(0, r - tau), where tau is the threshold after NaN/inf -> 0 and
clamping to [0, 1], and r = min(1, p/q). Integer counts are exact in float64
up to 2**53 tokens.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from evolve.primitives import (
    OP_ADD, OP_CONST, OP_DIV, OP_EXP, OP_FEATURE, OP_IF_GT, OP_LOG, OP_MAX, OP_MIN, OP_MUL,
    OP_SQRT, OP_SUB, div, exp, if_gt, log, max_, min_, sqrt,
)

BLOCK = 256

C_ACCEPT = 0
C_FALSE_ACCEPT = 1
C_FALSE_REJECT = 2
C_INVALID = 3
C_SUM_TAU = 4
C_SUM_TV = 5
C_SUM_EXPECTED_FR = 6
N_COUNTS = 7


@njit(cache=True)
def eval_block(ops, args, consts, X, start, m, stack):
    """Run one program over rows ``start:start+m`` of ``X``; the result is left in ``stack[0, :m]``.

    ``X`` float64 (n_features, n); ``stack`` float64 (>= stack_size, >= m).
    """
    sp = 0
    for k in range(ops.size):
        op = ops[k]
        if op == OP_FEATURE:
            row = args[k]
            for j in range(m):
                stack[sp, j] = X[row, start + j]
            sp += 1
        elif op == OP_CONST:
            c = consts[args[k]]
            for j in range(m):
                stack[sp, j] = c
            sp += 1
        elif op == OP_ADD:
            for j in range(m):
                stack[sp - 2, j] = stack[sp - 1, j] + stack[sp - 2, j]
            sp -= 1
        elif op == OP_SUB:
            for j in range(m):
                stack[sp - 2, j] = stack[sp - 1, j] - stack[sp - 2, j]
            sp -= 1
        elif op == OP_MUL:
            for j in range(m):
                stack[sp - 2, j] = stack[sp - 1, j] * stack[sp - 2, j]
            sp -= 1
        elif op == OP_DIV:
            for j in range(m):
                stack[sp - 2, j] = div(stack[sp - 1, j], stack[sp - 2, j])
            sp -= 1
        elif op == OP_MIN:
            for j in range(m):
                stack[sp - 2, j] = min_(stack[sp - 1, j], stack[sp - 2, j])
            sp -= 1
        elif op == OP_MAX:
            for j in range(m):
                stack[sp - 2, j] = max_(stack[sp - 1, j], stack[sp - 2, j])
            sp -= 1
        elif op == OP_LOG:
            for j in range(m):
                stack[sp - 1, j] = log(stack[sp - 1, j])
        elif op == OP_EXP:
            for j in range(m):
                stack[sp - 1, j] = exp(stack[sp - 1, j])
        elif op == OP_SQRT:
            for j in range(m):
                stack[sp - 1, j] = sqrt(stack[sp - 1, j])
        elif op == OP_IF_GT:
            for j in range(m):
                stack[sp - 4, j] = if_gt(stack[sp - 1, j], stack[sp - 2, j], stack[sp - 3, j], stack[sp - 4, j])
            sp -= 3


@njit(cache=True)
def accumulate_block(tau, m, start, r, u, b, counts):
    """Reduce thresholds ``tau[:m]`` of rows ``start:start+m`` into ``counts`` (see module doc).

    ``r`` float64 (n,) standard thresholds, ``u`` float64 (n,) rand_value,
    ``b`` bool (n,) baseline_accepts.
    """
    acc = 0
    fa = 0
    fr = 0
    bad = 0
    s_tau = 0.0
    s_tv = 0.0
    s_fr = 0.0
    for j in range(m):
        t = tau[j]
        if not np.isfinite(t):
            bad += 1
            t = 0.0
        elif t < 0.0:
            t = 0.0
        elif t > 1.0:
            t = 1.0
        i = start + j
        accept = u[i] < t
        base = b[i]
        acc += accept
        fa += accept and not base
        fr += base and not accept
        s_tau += t
        d = t - r[i]
        if d > 0.0:
            s_tv += d
        else:
            s_fr -= d
    counts[C_ACCEPT] += acc
    counts[C_FALSE_ACCEPT] += fa
    counts[C_FALSE_REJECT] += fr
    counts[C_INVALID] += bad
    counts[C_SUM_TAU] += s_tau
    counts[C_SUM_TV] += s_tv
    counts[C_SUM_EXPECTED_FR] += s_fr


@njit(cache=True)
def score_program(ops, args, consts, stack_size, X, r, u, b):
    """Counts (float64, N_COUNTS) of one program over all rows of ``X`` (float64 (n_features, n))."""
    n = X.shape[1]
    stack = np.empty((max(stack_size, 1), BLOCK))
    counts = np.zeros(N_COUNTS)
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        eval_block(ops, args, consts, X, start, m, stack)
        accumulate_block(stack[0], m, start, r, u, b, counts)
    return counts


@njit(cache=True)
def program_thresholds(ops, args, consts, stack_size, X):
    """Raw thresholds (float64 (n,), not clamped) of one program over ``X``."""
    n = X.shape[1]
    stack = np.empty((max(stack_size, 1), BLOCK))
    out = np.empty(n)
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        eval_block(ops, args, consts, X, start, m, stack)
        out[start:start + m] = stack[0, :m]
    return out


@njit(cache=True)
def score_thresholds(tau, r, u, b):
    """Counts (float64, N_COUNTS) of given raw thresholds ``tau`` float64 (n,)."""
    n = tau.size
    counts = np.zeros(N_COUNTS)
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        accumulate_block(tau[start:start + m], m, start, r, u, b, counts)
    return counts


@njit
def function_thresholds(fn, X, out):
    """Raw thresholds of a Numba-compiled rule with seed 004's signature, written into ``out`` (n,).

    ``fn(draft_prob, target_prob, position: int, draft_entropy, target_entropy,
    top_token_match: bool) -> float`` is called per row with rows 0..5 of ``X``
    (float64 (n_features, n)). Not cached: Numba cannot cache a function that
    takes another function as an argument, so each rule costs one compilation
    per process.
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

"""The reference stack machine: one postfix program run tile by tile, one thread.

Simple on purpose and independent of the fast path (:mod:`evolve.eval.fastpath.lowering`,
:mod:`evolve.eval.fastpath.kernels`, :mod:`evolve.eval.fastpath.scoring`), which tests check
against it: :func:`eval_rows` runs the postfix program of
:class:`evolve.gp.compiler.Program` over consecutive rows of ``X`` (indexed by
:data:`evolve.gp.primitives.FEATURES`) with an explicit stack;
:func:`score_program` and :func:`score_thresholds` reduce thresholds into the
counts record :class:`evolve.eval.fastpath.layouts.Count` (block counts stay 0);
:func:`program_thresholds` returns the raw thresholds. Operators are the scalar
functions of :mod:`evolve.gp.primitives`, so values agree bit for bit with the
fast path and with the numpy reference.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from evolve.eval.fastpath.layouts import N_COUNTS, TILE, Count
from evolve.gp.primitives import Op, div, exp, if_gt, log, max_, min_, sqrt


@njit(cache=True)
def eval_rows(ops, args, consts, X, start, m, stack):
    """Run one program over rows ``start:start+m`` of ``X``; the result is left in ``stack[0, :m]``.

    ``ops``, ``args`` int32 (k,) and ``consts`` float64 (c,) are the arrays of
    :class:`evolve.gp.compiler.Program`; ``X`` float64 (n_features, n);
    ``stack`` float64 (>= stack_size, >= m), overwritten.
    """
    sp = 0
    for k in range(ops.size):
        op = ops[k]
        if op == Op.FEATURE:
            row = args[k]
            for j in range(m):
                stack[sp, j] = X[row, start + j]
            sp += 1
        elif op == Op.CONST:
            c = consts[args[k]]
            for j in range(m):
                stack[sp, j] = c
            sp += 1
        elif op == Op.ADD:
            for j in range(m):
                stack[sp - 2, j] = stack[sp - 1, j] + stack[sp - 2, j]
            sp -= 1
        elif op == Op.SUB:
            for j in range(m):
                stack[sp - 2, j] = stack[sp - 1, j] - stack[sp - 2, j]
            sp -= 1
        elif op == Op.MUL:
            for j in range(m):
                stack[sp - 2, j] = stack[sp - 1, j] * stack[sp - 2, j]
            sp -= 1
        elif op == Op.DIV:
            for j in range(m):
                stack[sp - 2, j] = div(stack[sp - 1, j], stack[sp - 2, j])
            sp -= 1
        elif op == Op.MIN:
            for j in range(m):
                stack[sp - 2, j] = min_(stack[sp - 1, j], stack[sp - 2, j])
            sp -= 1
        elif op == Op.MAX:
            for j in range(m):
                stack[sp - 2, j] = max_(stack[sp - 1, j], stack[sp - 2, j])
            sp -= 1
        elif op == Op.LOG:
            for j in range(m):
                stack[sp - 1, j] = log(stack[sp - 1, j])
        elif op == Op.EXP:
            for j in range(m):
                stack[sp - 1, j] = exp(stack[sp - 1, j])
        elif op == Op.SQRT:
            for j in range(m):
                stack[sp - 1, j] = sqrt(stack[sp - 1, j])
        elif op == Op.IF_GT:
            for j in range(m):
                stack[sp - 4, j] = if_gt(stack[sp - 1, j], stack[sp - 2, j], stack[sp - 3, j], stack[sp - 4, j])
            sp -= 3


@njit(cache=True)
def accumulate_tile(tau, m, start, r, u, b, counts):
    """Add the counts ACCEPT..SUM_EXPECTED_FR of thresholds ``tau[:m]`` (rows ``start:start+m``) to ``counts``.

    ``r`` float64 (n,) standard thresholds min(1, p/q), ``u`` float64 (n,)
    rand_value, ``b`` bool (n,) baseline_accepts; ``counts`` float64
    (>= N_FITNESS_COUNTS,), laid out as :class:`evolve.eval.fastpath.layouts.Count`.
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
    counts[Count.ACCEPT] += acc
    counts[Count.FALSE_ACCEPT] += fa
    counts[Count.FALSE_REJECT] += fr
    counts[Count.INVALID] += bad
    counts[Count.SUM_TAU] += s_tau
    counts[Count.SUM_TV] += s_tv
    counts[Count.SUM_EXPECTED_FR] += s_fr


@njit(cache=True)
def score_program(ops, args, consts, stack_size, X, r, u, b):
    """Counts (float64 (N_COUNTS,), block counts 0) of one program over all rows of ``X``.

    ``X`` float64 (len(FEATURES), n) indexed by :data:`evolve.gp.primitives.FEATURES`;
    ``r``, ``u``, ``b`` as in :func:`accumulate_tile`; ``stack_size`` from the Program.
    """
    n = X.shape[1]
    stack = np.empty((max(stack_size, 1), TILE))
    counts = np.zeros(N_COUNTS)
    for start in range(0, n, TILE):
        m = min(TILE, n - start)
        eval_rows(ops, args, consts, X, start, m, stack)
        accumulate_tile(stack[0], m, start, r, u, b, counts)
    return counts


@njit(cache=True)
def program_thresholds(ops, args, consts, stack_size, X):
    """Raw thresholds (float64 (n,), not clamped) of one program over ``X`` float64 (n_features, n)."""
    n = X.shape[1]
    stack = np.empty((max(stack_size, 1), TILE))
    out = np.empty(n)
    for start in range(0, n, TILE):
        m = min(TILE, n - start)
        eval_rows(ops, args, consts, X, start, m, stack)
        out[start:start + m] = stack[0, :m]
    return out


@njit(cache=True)
def score_thresholds(tau, r, u, b):
    """Counts (float64 (N_COUNTS,), block counts 0) of given raw thresholds ``tau`` float64 (n,)."""
    n = tau.size
    counts = np.zeros(N_COUNTS)
    for start in range(0, n, TILE):
        m = min(TILE, n - start)
        accumulate_tile(tau[start:start + m], m, start, r, u, b, counts)
    return counts

"""numpy's summation order in Numba: :func:`pairwise_sum` adds a float64 vector exactly as ``numpy.sum`` does.

Numba's ``np.sum`` adds sequentially; numpy adds a contiguous float64 vector pairwise (numpy's
``pairwise_sum`` in ``numpy/_core/src/umath/loops_utils.h.src``, unchanged since numpy 1.9): fewer
than 8 values sequentially from 0; up to 128 values in 8 interleaved partial sums (r_j holds
x_j + x_{j+8} + ...) combined as ((r_0 + r_1) + (r_2 + r_3)) + ((r_4 + r_5) + (r_6 + r_7)), then the
n mod 8 last values sequentially; more than 128 values as the sum of the two halves, the first
half's length rounded down to a multiple of 8, each summed so recursively. The result of a
reduction starts from the identity 0 (so -0.0 sums give 0.0). A core function whose numpy form is
recorded in datasets (traversal verification's residual masses, :mod:`evolve.verification.traversal`)
sums with it, so its Numba form gives the same bits; tests/test_verification_core.py holds it to
``numpy.sum`` for every length up to several vocabularies.
"""
from __future__ import annotations

import numpy as np
from numba import njit

#: numpy's PW_BLOCKSIZE: vectors up to this length are summed in 8 partial sums, longer ones split in two.
PAIRWISE_BLOCK = 128
#: Depth of the halving (n < 2**63 needs fewer than 64 levels).
_MAX_DEPTH = 64


@njit(cache=True)
def _block_sum(x, lo, n):
    """numpy's sum of ``x[lo:lo + n]``, n <= :data:`PAIRWISE_BLOCK` (module doc; ``x`` float64 (>= lo + n,))."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += x[i]
        return res
    r0, r1, r2, r3 = x[lo], x[lo + 1], x[lo + 2], x[lo + 3]
    r4, r5, r6, r7 = x[lo + 4], x[lo + 5], x[lo + 6], x[lo + 7]
    main = n - n % 8
    for i in range(lo + 8, lo + main, 8):
        r0 += x[i]
        r1 += x[i + 1]
        r2 += x[i + 2]
        r3 += x[i + 3]
        r4 += x[i + 4]
        r5 += x[i + 5]
        r6 += x[i + 6]
        r7 += x[i + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(lo + main, lo + n):
        res += x[i]
    return res


@njit(cache=True)
def pairwise_sum(x):
    """sum(x) in numpy's order (module doc): the bits of ``float(numpy.sum(x))`` for a contiguous vector.

    Args: ``x`` float64 (n,). Returns a float (0.0 for n = 0).
    """
    n = x.shape[0]
    if n <= PAIRWISE_BLOCK:
        return 0.0 + _block_sum(x, 0, n)
    # numpy recurses on the halves; Numba cannot cache a recursive function, so the same tree of sums is
    # walked with explicit stacks (segments: start, length, state 0/1/2; partial sums of finished halves)
    seg = np.empty((_MAX_DEPTH, 3), dtype=np.int64)
    vals = np.empty(_MAX_DEPTH + 1)
    top, nv = 0, 0
    seg[0, 0], seg[0, 1], seg[0, 2] = 0, n, 0
    while top >= 0:
        lo, m, state = seg[top, 0], seg[top, 1], seg[top, 2]
        if m <= PAIRWISE_BLOCK:
            vals[nv] = _block_sum(x, lo, m)
            nv += 1
            top -= 1
            continue
        m2 = m // 2
        m2 -= m2 % 8
        if state == 0:  # the first half
            seg[top, 2] = 1
            top += 1
            seg[top, 0], seg[top, 1], seg[top, 2] = lo, m2, 0
        elif state == 1:  # then the second
            seg[top, 2] = 2
            top += 1
            seg[top, 0], seg[top, 1], seg[top, 2] = lo + m2, m - m2, 0
        else:  # both done: their sum, first + second
            nv -= 1
            vals[nv - 1] = vals[nv - 1] + vals[nv]
            top -= 1
    return 0.0 + vals[0]


__all__ = ["PAIRWISE_BLOCK", "pairwise_sum"]

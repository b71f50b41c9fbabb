"""Softmax with entropy, and overlap, of float64 distributions in jitted code.

All functions are ``@njit(cache=True)``; ``x``, ``p``, ``q``, ``work`` are float64 (V,) arrays.
The exponential is computed in plain arithmetic (:func:`_exp_nonpos`), so loops over it
vectorise and the results do not depend on the platform's libm; sums use four fixed
partial sums, so they are the same on every machine.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

# exp for arguments <= 0 in plain arithmetic (Cody-Waite reduction, degree-13 Taylor
# polynomial, exponent built from bits), within 1 ulp of math.exp: unlike the libm
# call, loops over it vectorise, and results do not depend on the platform's libm.
_EXP_SHIFT = 6755399441055744.0  # 1.5 * 2**52: adding it rounds to an integer in the low bits
_EXP_SHIFT_BITS = np.int64(np.float64(_EXP_SHIFT).view(np.int64))
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693145751953125
_LN2_LO = 1.42860682030941723212e-06
_EXP_MIN = -708.0  # below this the result is 0 (exp(-708) ~ 3e-308)


@njit(cache=True, inline="always")
def _exp_nonpos(c):
    """exp(c) for c <= 0 (0 below -708), within 1 ulp; branch-free so that loops vectorise."""
    cc = max(c, _EXP_MIN)
    t = cc * _LOG2E + _EXP_SHIFT
    k = t - _EXP_SHIFT
    r = (cc - k * _LN2_HI) - k * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    scale = np.int64((np.float64(t).view(np.int64) - _EXP_SHIFT_BITS + 1023) << 52).view(np.float64)
    return 0.0 if c < _EXP_MIN else p * scale


@njit(cache=True)
def softmax_given_max(x, m, arg, work):
    """Softmax of logits ``x`` (float64 (V,)) in place, given m = max(x) = x[arg].

    ``work`` is float64 (V,) scratch. Returns: (entropy in nats >= 0, top
    probability, ``arg``). The entropy is log Z - sum_v p_v (x_v - m): no log per token.
    """
    n = x.shape[0]
    for v in range(n):  # vectorises: no calls, no reductions
        c = x[v] - m
        work[v] = c
        x[v] = _exp_nonpos(c)
    n4 = n - n % 4
    z0 = z1 = z2 = z3 = 0.0
    l0 = l1 = l2 = l3 = 0.0
    for v in range(0, n4, 4):  # four fixed partial sums: same result on every machine
        z0 += x[v]
        z1 += x[v + 1]
        z2 += x[v + 2]
        z3 += x[v + 3]
        l0 += x[v] * work[v]
        l1 += x[v + 1] * work[v + 1]
        l2 += x[v + 2] * work[v + 2]
        l3 += x[v + 3] * work[v + 3]
    for v in range(n4, n):
        z0 += x[v]
        l0 += x[v] * work[v]
    z = (z0 + z1) + (z2 + z3)
    zl = (l0 + l1) + (l2 + l3)
    inv = 1.0 / z
    for v in range(n):
        x[v] *= inv
    h = math.log(z) - zl * inv
    return max(h, 0.0), x[arg], arg


@njit(cache=True)
def softmax_inplace(x, work):
    """Softmax of logits ``x`` (float64 (V,)) in place; ``work`` is float64 (V,) scratch.

    Returns: (entropy in nats >= 0, top probability, argmax index, first on ties).
    """
    m = x[0]
    arg = 0
    for v in range(1, x.shape[0]):
        if x[v] > m:
            m = x[v]
            arg = v
    return softmax_given_max(x, m, arg, work)


@njit(cache=True)
def overlap(p, q):
    """sum_v min(p_v, q_v) = 1 - TV(p, q), clamped to [0, 1]; p, q float64 (V,)."""
    n = p.shape[0]
    n4 = n - n % 4
    a0 = a1 = a2 = a3 = 0.0
    for v in range(0, n4, 4):
        a0 += min(p[v], q[v])
        a1 += min(p[v + 1], q[v + 1])
        a2 += min(p[v + 2], q[v + 2])
        a3 += min(p[v + 3], q[v + 3])
    for v in range(n4, n):
        a0 += min(p[v], q[v])
    return min((a0 + a1) + (a2 + a3), 1.0)

"""Random streams for jitted code: splitmix64 seeding, xoshiro256++, ziggurat normals, categorical draws.

Every function here is ``@njit(cache=True)`` and callable from other jitted code
(the trace generators of :mod:`evolve.traces.synth` and the decode-loop simulator of
:mod:`evolve.sim`). A stream ``state`` is a uint64 array of shape (4,), advanced in
place.

``seed_state(seed, key, stream) -> state``
    a fresh stream for (seed, integer key, stream id): splitmix64 (Steele, Lea and
    Flood 2014) hashes the three into the four state words.
``next_u64(state)``, ``next_double(state)`` (U[0, 1), 53 random bits), ``next_normal(state)`` (N(0, 1))
    xoshiro256++ outputs (Blackman and Vigna 2018, arXiv 1805.01407); normals come
    from a 256-layer ziggurat (Marsaglia and Tsang 2000, numpy's table layout).
``u64_s``, ``double_s``, ``normal_s``
    the same three steps on the state words held as four scalars (s0, s1, s2, s3),
    returned with the output, so hot loops keep the state in registers.
``sample_scaled(state, weights, total)``, ``sample_index(state, probs)``, ``sample_normalised(state, weights)``
    inverse-CDF categorical draws with one uniform (of weights with a known sum, of a
    normalised distribution, of unnormalised weights); a zero-probability index is
    never returned.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_MASK8 = np.uint64(0xFF)
_U1 = np.uint64(1)
_DOUBLE_UNIT = 1.0 / 9007199254740992.0  # 2**-53

_ZIG_R = 3.6541528853610088  # tail start of the 256-layer normal ziggurat
_ZIG_V = 0.00492867323399  # area of each layer


def _ziggurat_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ki (int64), wi, fi (float64), 256 entries each, for 52-bit ziggurat normals."""
    n, r, v = 256, _ZIG_R, _ZIG_V
    m = 2.0 ** 52
    ki = np.zeros(n, dtype=np.int64)
    wi = np.zeros(n)
    fi = np.zeros(n)
    f = math.exp(-0.5 * r * r)
    q = v / f
    ki[0] = int(r / q * m)
    ki[1] = 0
    wi[0] = q / m
    wi[n - 1] = r / m
    fi[0] = 1.0
    fi[n - 1] = f
    dn = tn = r
    for i in range(n - 2, 0, -1):
        dn = math.sqrt(-2.0 * math.log(v / dn + math.exp(-0.5 * dn * dn)))
        ki[i + 1] = int(dn / tn * m)
        tn = dn
        fi[i] = math.exp(-0.5 * dn * dn)
        wi[i] = dn / m
    return ki, wi, fi


_ZIG_KI, _ZIG_WI, _ZIG_FI = _ziggurat_tables()


@njit(cache=True, inline="always")
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@njit(cache=True)
def _splitmix64(x):
    """One splitmix64 output for counter value ``x`` (uint64 -> uint64)."""
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def seed_state(seed, key, stream):
    """A fresh xoshiro256++ state for (seed, key, stream).

    Args: non-negative integers (seed < 2**64; key e.g. a sequence index or a
    context hash; stream separates independent uses of one key).
    Returns: uint64 array (4,), never all zero.
    """
    h = _splitmix64(np.uint64(seed))
    h = _splitmix64(h ^ np.uint64(key))
    h = _splitmix64(h ^ (np.uint64(stream) * _GOLDEN))
    state = np.empty(4, dtype=np.uint64)
    for i in range(4):
        h = h + _GOLDEN
        state[i] = _splitmix64(h)
    if state[0] == 0 and state[1] == 0 and state[2] == 0 and state[3] == 0:
        state[0] = _GOLDEN
    return state


# The hot loops keep the four state words in registers: the *_s functions take and
# return them as scalars (s0, s1, s2, s3); the array versions wrap them.


@njit(cache=True, inline="always")
def u64_s(s0, s1, s2, s3):
    """xoshiro256++ step: (output, s0, s1, s2, s3)."""
    result = _rotl(s0 + s3, 23) + s0
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    return result, s0, s1, s2, s3


@njit(cache=True, inline="always")
def double_s(s0, s1, s2, s3):
    """Uniform [0, 1) with 53 random bits: (u, s0, s1, s2, s3)."""
    r, s0, s1, s2, s3 = u64_s(s0, s1, s2, s3)
    return float(np.int64(r >> np.uint64(11))) * _DOUBLE_UNIT, s0, s1, s2, s3


@njit(cache=True, inline="always")
def normal_s(s0, s1, s2, s3):
    """Standard normal (256-layer ziggurat): (x, s0, s1, s2, s3).

    Bits of one uint64: 0-7 layer, 8 sign, 12-63 the 52-bit abscissa; about 99%
    of draws return after one uint64 and no transcendental function.
    """
    while True:
        r, s0, s1, s2, s3 = u64_s(s0, s1, s2, s3)
        idx = np.int64(r & _MASK8)
        sign = 1.0 - 2.0 * np.float64(np.int64((r >> np.uint64(8)) & _U1))
        rabs = np.int64(r >> np.uint64(12))
        x = float(rabs) * _ZIG_WI[idx]
        if rabs < _ZIG_KI[idx]:
            return sign * x, s0, s1, s2, s3
        if idx == 0:  # the tail beyond r (Marsaglia 1964)
            while True:
                u1, s0, s1, s2, s3 = double_s(s0, s1, s2, s3)
                u2, s0, s1, s2, s3 = double_s(s0, s1, s2, s3)
                xx = -math.log1p(-u1) / _ZIG_R
                yy = -math.log1p(-u2)
                if yy + yy > xx * xx:
                    return sign * (_ZIG_R + xx), s0, s1, s2, s3
        else:
            u, s0, s1, s2, s3 = double_s(s0, s1, s2, s3)
            if (_ZIG_FI[idx - 1] - _ZIG_FI[idx]) * u + _ZIG_FI[idx] < math.exp(-0.5 * x * x):
                return sign * x, s0, s1, s2, s3


@njit(cache=True)
def next_u64(state):
    """Next uint64 of the xoshiro256++ stream ``state`` (uint64 (4,), updated in place)."""
    r, state[0], state[1], state[2], state[3] = u64_s(state[0], state[1], state[2], state[3])
    return r


@njit(cache=True)
def next_double(state):
    """Uniform float64 in [0, 1) with 53 random bits; advances ``state`` by one step."""
    u, state[0], state[1], state[2], state[3] = double_s(state[0], state[1], state[2], state[3])
    return u


@njit(cache=True)
def next_normal(state):
    """Standard normal float64 (ziggurat, Marsaglia & Tsang 2000); advances ``state``."""
    x, state[0], state[1], state[2], state[3] = normal_s(state[0], state[1], state[2], state[3])
    return x


@njit(cache=True)
def sample_scaled(state, weights, total):
    """Draw index v with probability weights[v] / total (float64 (V,) >= 0, ``total`` = their sum).

    One uniform from ``state``, then a linear scan; a zero-weight index is never
    returned (the last positive one absorbs rounding); -1 only if every weight is 0.
    """
    target = next_double(state) * total
    cum = 0.0
    last = -1
    for v in range(weights.shape[0]):
        w = weights[v]
        if w > 0.0:
            cum += w
            last = v
            if cum > target:
                return v
    return last


@njit(cache=True)
def sample_index(state, probs):
    """Draw v ~ probs (float64 (V,), summing to about 1) by inverse CDF with one uniform.

    The uniform is scaled by 1 (a normalised ``probs``), so the scan usually
    stops in the head of a Zipf-like distribution; a zero-probability index is
    never returned (the last positive one absorbs rounding).
    """
    return sample_scaled(state, probs, 1.0)


@njit(cache=True)
def sample_normalised(state, weights):
    """Draw v with probability weights[v] / sum(weights) (float64 (V,), >= 0); -1 if all are 0."""
    total = 0.0
    for v in range(weights.shape[0]):
        total += weights[v]
    if not total > 0.0:
        return -1
    return sample_scaled(state, weights, total)

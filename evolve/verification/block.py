"""Block verification: block weights, residual masses, stopping probabilities, phi and the relaxed target.

Terms as in :mod:`evolve.verification`. Generators that know a position's whole target and draft
distributions (the vocabulary model :mod:`evolve.traces.synth.vocab_model`, the harvester
:mod:`evolve.engine.distributions`, the decode-loop simulator :mod:`evolve.sim.chain`) write the
record columns ``block_residual_mass``, ``target_rank`` and ``block_residual_phi`` with the
functions here, so the three agree to the last bit; the simulator, live decoding and the
evaluator verify blocks with them.

Block verification (Ziteng Sun, Uri Mendlovic, Yaniv Leviathan, Asaf Aharoni,
Ahmad Beirami, Jae Hun Ro, Ananda Theertha Suresh 2024, "Block verification
accelerates speculative decoding", arXiv 2403.10444) weighs a block of drafted
tokens X_1..X_gamma with the *block weights*

    P_0 = 1,   P_i = min(1, P_{i-1} p_i(X_i) / q_i(X_i)),

(p_i, q_i: the target's and the draft's distributions at depth i of the block),
and needs, after i accepted tokens, the *residual mass*

    m_i = sum_x max(0, P_i p_{i+1}(x) - q_{i+1}(x))      (i < gamma).

The record of the drafted token X_{d+1} (``draft_index`` d) holds m_{d+1} in
``block_residual_mass``: the block weight after its own token times the *next*
depth's target distribution, minus the next depth's draft distribution. So it is
NaN on a block's last record, and it is never a per-token feature (it depends on
the next position). ``target_rank`` is the rank of the drafted token under the
target distribution, 0 for the arg max; tied tokens share a rank (the number of
tokens with a strictly larger probability).

Relaxed block verification (:mod:`evolve.eval.relaxed_block`) verifies against a
mixture p~ = (1 - w) p + w q instead of p, and its residual mass after a weight P is
(1 - P w) phi(a) with a = P (1 - w) / (1 - P w) and

    phi(a) = sum_x max(0, a p(x) - q(x)),    a in [0, 1],

of the next depth's (p, q). phi is convex and piecewise linear (its slope, the p-mass
of {x : q(x) < a p(x)}, rises from 0 to at most 1), phi(0) = 0 and phi(1) = 1 - overlap.
The optional column ``block_residual_phi`` holds, on the record at depth d, phi of
depth d + 1 at the grid a_k = k / :data:`PHI_POINTS`, k = 1..PHI_POINTS (a row of NaN
at a block's last depth); :func:`interpolate_phi` reads it back. Between two grid
points the chord of a convex function lies above it by at most h (s_+ - s_-) / 4
(h = 1 / PHI_POINTS, s_- and s_+ its slopes at the ends), so the linear
interpolation overestimates phi by at most 1 / (4 PHI_POINTS) and never
underestimates it (:data:`PHI_ERROR_BOUND`).

Given the block weights and residual masses, block verification stops after i accepted tokens
with the *stopping probability* h_i = m_i / (m_i + 1 - P_i) (1 when the denominator is 0),
h_gamma = P_gamma (:func:`stopping_probability`, :func:`block_stops`); with uniforms eta_i it keeps
X_1..X_tau, tau the largest i with eta_i <= h_i (:func:`block_accept`), then emits the bonus token
from p_{gamma+1} if tau = gamma, else the recovered token from norm(max(0, P_tau p_{tau+1} -
q_{tau+1})) (:func:`block_residual`). E[tau] = sum_i i h_i prod_{j>i} (1 - h_j).

The relaxed target (1 - w) p + w q is :func:`relaxed_target` (numpy, also the exported numpy
modules' function word for word; :data:`TORCH_RELAXED_TARGET` the torch modules' text) and
:func:`relaxed_targets` (Numba, one block); relaxed block verification from records weighs a block by
:func:`relaxed_block_weight` and takes its residual masses from phi by :func:`relaxed_residual_mass`
(:func:`interpolate_phi_anchored`), E[tau] and the expected damage by the one-step recursions
:func:`expected_accepted_step` and :func:`expected_damage_step`.

Two forms of the block weight: :func:`block_weight` computes (P_{i-1} p(x)) / q(x) (the generators of
the records and the simulator), :func:`block_weight_ratio` P_{i-1} (p(x) / q(x)) (the evaluator and
relaxed block verification, whose records keep the ratio). float64 rounds them differently and
recorded results depend on each, so both are kept, side by side, rather than one rewritten into the
other.

The ``@njit(cache=True)`` functions take ``p``, ``q`` float64 (V,) rows; the numpy functions
(:func:`block_residual_array`, :func:`normalised_block_residual`, :func:`relaxed_target`) keep
numpy's vectorised evaluation order (pairwise sums), which the engine's recorded values depend on.
"""
from __future__ import annotations

import numpy as np
from numba import njit

#: Grid points of ``block_residual_phi``: phi(k / PHI_POINTS) for k = 1..PHI_POINTS (phi(0) = 0 is not stored).
PHI_POINTS = 32
#: Largest overestimate of phi by :func:`interpolate_phi` between the grid points (the chord bound).
PHI_ERROR_BOUND = 1.0 / (4 * PHI_POINTS)


@njit(cache=True)
def block_weight(weight, target_prob, draft_prob):
    """Next block weight min(1, weight * p(x) / q(x)) (Sun et al. 2024, arXiv 2403.10444).

    Computed as (weight p(x)) / q(x); :func:`block_weight_ratio` is the form weight (p(x) / q(x)) of the
    callers that hold the ratio (the two round differently, and recorded values depend on each).
    Args: the previous weight P_{i-1} in [0, 1]; p(x), q(x) of the drafted token (q(x) > 0), floats.
    Returns: P_i, a float in [0, 1].
    """
    return min(1.0, weight * target_prob / draft_prob)


@njit(cache=True)
def block_weight_ratio(weight, ratio):
    """Next block weight min(1, weight * r) from the ratio r = p(x) / q(x) already divided (Sun et al. 2024,
    arXiv 2403.10444).

    Two forms of one formula, because float64 rounds them differently and the recorded results depend on
    each: :func:`block_weight` computes (P_{i-1} p(x)) / q(x) (the generators of ``block_residual_mass``:
    the vocabulary model, the harvester, the decode-loop simulator, live decoding); this one computes
    P_{i-1} (p(x) / q(x)), for the callers that hold the ratio (the evaluator's block verification
    :mod:`evolve.eval.block_verification` and the lossless weight of relaxed block verification
    :mod:`evolve.eval.relaxed_block`, whose records keep ``target_prob / draft_prob``).

    Args: ``weight`` P_{i-1} in [0, 1]; ``ratio`` r >= 0, a float (unclamped). Returns P_i, a float in [0, 1].
    """
    return min(1.0, weight * ratio)


@njit(cache=True)
def relaxed_block_weight(weight, ratio, w):
    """Next relaxed block weight min(1, P~ ((1 - w) r + w)) against the mixture p~ = (1 - w) p + w q.

    p~(x) / q(x) = (1 - w) r + w with r = p(x) / q(x), so this is :func:`block_weight_ratio` of the
    relaxed target (relaxed block verification, :mod:`evolve.eval.relaxed_block`; the mixture of
    speculative cascades, Narasimhan et al. 2024, arXiv 2405.19261). With w = 0, (1 - 0) r + 0 = r
    exactly, so it equals :func:`block_weight_ratio` to the bit.

    Args: ``weight`` P~_{i-1} in [0, 1]; ``ratio`` r >= 0; ``w`` the relaxation weight in [0, 1]; floats.
    Returns P~_i, a float in [0, 1].
    """
    return min(1.0, weight * ((1.0 - w) * ratio + w))


@njit(cache=True)
def residual_mass(weight, p, q):
    """m = sum_x max(0, weight * p(x) - q(x)): the mass of the block residual after a weight P_i.

    Args: ``weight`` P_i in [0, 1]; ``p``, ``q`` float64 (V,) the next depth's
    target and draft distributions. Returns: float in [0, weight].
    """
    s = 0.0
    for v in range(p.shape[0]):
        d = weight * p[v] - q[v]
        if d > 0.0:
            s += d
    return s


@njit(cache=True)
def residual_mass_onehot(weight, p, y):
    """:func:`residual_mass` with q one-hot at token ``y``: sum_x max(0, weight p(x) - [x == y]).

    The same steps in the same order as :func:`residual_mass` on the dense one-hot row (so the same
    float64 value): the one-hot side is read from its id (greedy decoding, n-gram drafters;
    :mod:`evolve.engine.onehot`). Args: ``weight`` P_i in [0, 1]; ``p`` float64 (V,); ``y`` int, the id
    of q's token (0 <= y < V). Returns a float in [0, weight].
    """
    s = 0.0
    for v in range(p.shape[0]):
        d = weight * p[v] - (1.0 if v == y else 0.0)
        if d > 0.0:
            s += d
    return s


@njit(cache=True)
def residual_mass_onehot_pair(weight, y_p, y_q):
    """:func:`residual_mass` with p one-hot at ``y_p`` and q one-hot at ``y_q``: ``weight`` when they differ,
    else 0 (max(0, weight - 1) = 0 for a weight in [0, 1]); the same float64 as the dense sum (its only
    positive term is weight * 1 - 0).

    Args: ``weight`` P_i in [0, 1], a float; ``y_p``, ``y_q`` ints, the tokens' ids. Returns a float.
    """
    return weight if y_p != y_q else 0.0


@njit(cache=True)
def target_rank(p, x):
    """Rank of token ``x`` under ``p`` (float64 (V,)): the number of tokens with a strictly larger probability.

    Returns: int in [0, V - 1]; 0 for the arg max (and for every token tied with it).
    """
    px = p[x]
    rank = 0
    for v in range(p.shape[0]):
        if p[v] > px:
            rank += 1
    return rank


@njit(cache=True)
def residual_phi(p, q, out):
    """phi(a_k) = sum_x max(0, a_k p(x) - q(x)) at a_k = k / K, k = 1..K (K = ``out.size``), into ``out``.

    Args: ``p``, ``q`` float64 (V,) one depth's target and draft distributions;
    ``out`` float64 (K,). One pass over the vocabulary: token x contributes
    a p(x) - q(x) to every grid point a > q(x) / p(x), so each token's p and q
    are added to the bucket of the first such grid point and the buckets are
    summed cumulatively (O(V + K)); values agree with the direct sum to round-off.
    """
    residual_phi_onehot(p, q, -1, out)


@njit(cache=True)
def residual_phi_onehot(p, q, y, out):
    """:func:`residual_phi` with q one-hot at token ``y`` when ``y`` >= 0 (``q`` is then not read), the same
    steps and values as with the dense one-hot row; ``y`` < 0: q = ``q``.

    Args: ``p`` float64 (V,) the target; ``q`` float64 (V,) the draft (any float64 (V,) row when
    ``y`` >= 0, e.g. ``p`` itself); ``y`` int; ``out`` float64 (K,) written, phi(k / K) at k = 1..K.
    """

    K = out.shape[0]
    sp = np.zeros(K + 1)
    sq = np.zeros(K + 1)
    for v in range(p.shape[0]):
        pv = p[v]
        if pv <= 0.0:
            continue
        qv = q[v] if y < 0 else (1.0 if v == y else 0.0)
        if qv >= pv:  # contributes at no a <= 1
            continue
        k = int(qv / pv * K) + 1  # first k with k / K > q / p (corrected for round-off below)
        while k > 1 and (k - 1) / K * pv > qv:
            k -= 1
        while k <= K and k / K * pv <= qv:
            k += 1
        if k <= K:
            sp[k] += pv
            sq[k] += qv
    cp = 0.0
    cq = 0.0
    for k in range(1, K + 1):
        cp += sp[k]
        cq += sq[k]
        out[k - 1] = max(0.0, k / K * cp - cq)


@njit(cache=True)
def interpolate_phi(phi, a):
    """phi(a) for a in [0, 1] by linear interpolation of the grid values ``phi`` float64 (K,) (phi(0) = 0).

    Exact at the grid points; elsewhere at most :data:`PHI_ERROR_BOUND` above the
    true value and never below it (phi is convex; see the module doc). ``a``
    outside [0, 1] is clamped. :func:`interpolate_phi_anchored` is the form anchored at an exact value
    (relaxed block verification). Args: ``phi`` float64 (K,); ``a`` a float. Returns a float.
    """
    K = phi.shape[0]
    x = min(max(a, 0.0), 1.0) * K
    k = int(x)
    if k >= K:
        return phi[K - 1]
    f = x - k
    lo = phi[k - 1] if k > 0 else 0.0
    return lo + f * (phi[k] - lo)


@njit(cache=True)
def interpolate_phi_anchored(phi, a, a0, v0):
    """phi(a) from its grid values ``phi`` float64 (K,) (phi(k/K), k = 1..K; phi(0) = 0), anchored at the
    exact value v0 = phi(a0) (relaxed block verification, :mod:`evolve.eval.relaxed_block`).

    Linear interpolation between grid points; when a0 lies strictly inside the grid interval of ``a``,
    (a0, v0) replaces the far end, and a == a0 returns v0 itself (so w = 0 is lossless block
    verification exactly). Never below the true value (phi is convex). Beside :func:`interpolate_phi`
    because the arithmetic differs outside the common case: this one does not clamp ``a`` (a < 0 by
    more than a grid step gives 0, a in (-1/K, 0) extrapolates the first segment; a >= 1 gives
    phi(1)); on [0, 1] without an anchor in the interval both compute lo + (aK - k)(phi[k] - lo).

    Args: ``phi`` float64 (K,); ``a``, ``a0`` floats (a0 the lossless block weight, v0 its
    ``block_residual_mass``). Returns a float.
    """
    if a == a0:
        return v0
    K = phi.shape[0]
    x = a * K
    k = int(x)
    if k >= K:
        return phi[K - 1]
    if k < 0:
        return 0.0
    yl = phi[k - 1] if k > 0 else 0.0
    yr = phi[k]
    x0 = a0 * K
    if k < x0 < k + 1:
        if x < x0:
            return yl + (x - k) * (v0 - yl) / (x0 - k)
        return v0 + (x - x0) * (yr - v0) / (k + 1 - x0)
    return yl + (x - k) * (yr - yl)


@njit(cache=True)
def relaxed_residual_mass(weight, w, phi, lossless_weight, lossless_mass):
    """m~ = sum_x max(0, P~ p~(x) - q(x)) after a relaxed block weight P~, p~ = (1 - w) p + w q the next
    depth's relaxed target: (1 - P~ w) phi(a) with a = P~ (1 - w) / (1 - P~ w) (module doc), 0 when
    1 - P~ w <= 0; phi by :func:`interpolate_phi_anchored` at (``lossless_weight``, ``lossless_mass``).

    Args: ``weight`` P~ in [0, 1]; ``w`` the next depth's weight in [0, 1]; ``phi`` float64 (K,) the next
    depth's ``block_residual_phi`` (on the record of the previous depth); ``lossless_weight`` the lossless
    block weight P and ``lossless_mass`` its ``block_residual_mass`` phi(P). Returns a float >= 0.
    Relaxed block verification of :mod:`evolve.eval.relaxed_block`.
    """
    den_w = 1.0 - weight * w
    if den_w <= 0.0:
        return 0.0
    return den_w * interpolate_phi_anchored(phi, weight * (1.0 - w) / den_w, lossless_weight, lossless_mass)


def block_phi_onehot_pair(p_ids, q_ids, points: int = PHI_POINTS) -> np.ndarray:
    """phi rows (:func:`residual_phi`) of one-hot p and q, row by row: float64 (k, points), row d = phi(a_j) =
    a_j = j / points (j = 1..points) where ``p_ids[d]`` != ``q_ids[d]``, else 0 (max(0, a - 1) = 0).

    The values the dense :func:`residual_phi` gives on the one-hot rows (a_j * 1 - 0). Args: ``p_ids``,
    ``q_ids`` int (k,) the rows' token ids; ``points`` the grid size K. Rows are of the same depth (the
    caller shifts them to the record of the previous depth, as :func:`block_phi` does).
    """
    grid = np.arange(1, points + 1) / points
    return np.where((np.asarray(p_ids) != np.asarray(q_ids))[:, None], grid[None, :] * 1.0, 0.0)


def block_phi(p: np.ndarray, q: np.ndarray, points: int = PHI_POINTS) -> np.ndarray:
    """``block_residual_phi`` of one block's k records: float64 (k, points), row d = phi of depth d + 1.

    Args: ``p``, ``q`` float64 (k, V) the target's and the draft's distributions
    at each depth. Row k - 1 (the block's last record) is NaN.
    """
    p = np.ascontiguousarray(p, dtype=np.float64)
    q = np.ascontiguousarray(q, dtype=np.float64)
    k = p.shape[0]
    out = np.full((k, points), np.nan)
    for d in range(k - 1):
        residual_phi(p[d + 1], q[d + 1], out[d])
    return out


def block_columns(p: np.ndarray, q: np.ndarray, drafts) -> tuple[np.ndarray, np.ndarray]:
    """``block_residual_mass`` and ``target_rank`` of one block's k drafted tokens.

    Args: ``p``, ``q`` float64 (k, V) the target's and the draft's distributions
    at each depth; ``drafts`` int (k,) the drafted token ids (q(x) > 0).
    Returns: (block_residual_mass float64 (k,), NaN at the last depth;
    target_rank int64 (k,)).
    """
    p = np.ascontiguousarray(p, dtype=np.float64)
    q = np.ascontiguousarray(q, dtype=np.float64)
    x = np.asarray(drafts, dtype=np.int64)
    k = x.size
    mass = np.full(k, np.nan)
    rank = np.empty(k, dtype=np.int64)
    weight = 1.0
    for d in range(k):
        weight = block_weight(weight, p[d, x[d]], q[d, x[d]])
        rank[d] = target_rank(p[d], x[d])
        if d + 1 < k:
            mass[d] = residual_mass(weight, p[d + 1], q[d + 1])
    return mass, rank


@njit(cache=True)
def block_masses(P, Q, target_prob, draft_prob, gamma, weights, masses):
    """Block weights and residual masses of one drafted block (module doc).

    Args: ``P``, ``Q`` float64 (>= gamma, V) the target's and draft's distributions at each
    depth (rows 1..gamma-1 are read); ``target_prob``, ``draft_prob`` float64 (gamma,) p_i(X_i),
    q_i(X_i); ``gamma`` int >= 1; ``weights``, ``masses`` float64 (>= gamma,) written.
    Writes ``weights[k]`` = P_{k+1} and ``masses[k]`` = m_{k+1} (NaN at k = gamma - 1),
    k = 0..gamma-1 (the ``block_residual_mass`` of the record at depth k).
    """
    w = 1.0
    for k in range(gamma):
        w = block_weight(w, target_prob[k], draft_prob[k])
        weights[k] = w
        masses[k] = residual_mass(w, P[k + 1], Q[k + 1]) if k + 1 < gamma else np.nan


@njit(cache=True)
def stopping_probability(weight, mass):
    """h = m / (m + 1 - P): the probability that block verification stops after a depth with block weight
    ``weight`` P and residual mass ``mass`` m (1 when m + 1 - P <= 0; Sun et al. 2024, arXiv 2403.10444).

    Args: floats, P in [0, 1], m in [0, P]. Returns a float in [0, 1].
    """
    denom = mass + 1.0 - weight
    return 1.0 if denom <= 0.0 else mass / denom


@njit(cache=True)
def expected_accepted_step(acc, k, h):
    """A_k = k h_k + (1 - h_k) A_{k-1}: one step of the recursion for E[tau] over a block's levels.

    The largest success among the first k levels is k with probability h_k, else the largest among the
    first k - 1, so E[tau] = A_L for a block of L levels (A_0 = 0; Sun et al. 2024, arXiv 2403.10444).
    Args: ``acc`` A_{k-1}, a float; ``k`` the 1-based level (int or float); ``h`` h_k in [0, 1].
    Returns A_k, a float in [0, k].
    """
    return k * h + (1.0 - h) * acc


@njit(cache=True)
def expected_damage_step(f, cum, h):
    """F_k = h_k C_{k+1} + (1 - h_k) F_{k-1}: one step of the recursion for E[C_{tau+1}] (:func:`relaxed_damage`).

    Args: ``f`` F_{k-1}; ``cum`` C_{k+1} the damage of depths 1..k+1 (C_{L+1} = C_L); ``h`` h_k in
    [0, 1]; floats. Returns F_k, a float.
    """
    return h * cum + (1.0 - h) * f


@njit(cache=True)
def block_stops(weights, masses, gamma, h):
    """Stopping probabilities h_1..h_gamma into ``h`` float64 (gamma,) and E[tau] (module doc).

    Args: ``weights``, ``masses`` float64 (gamma,) as written by :func:`block_masses`. Returns E[tau], a
    float in [0, gamma].
    """
    acc = 0.0
    for k in range(gamma):
        if k == gamma - 1:
            hk = weights[k]
        else:
            hk = stopping_probability(weights[k], masses[k])
        h[k] = hk
        acc = expected_accepted_step(acc, k + 1, hk)
    return acc


@njit(cache=True)
def block_accept(h, eta, gamma):
    """Accepted length tau: the largest i (1-based) with eta_i <= h_i, 0 if none.

    Args: ``h`` float64 (gamma,) stopping probabilities, ``eta`` float64 (gamma,) uniforms in [0, 1).
    """
    for k in range(gamma - 1, -1, -1):
        if eta[k] <= h[k]:
            return k + 1
    return 0


@njit(cache=True)
def block_residual(weight, p, q, resid):
    """resid[v] = max(0, weight p(v) - q(v)): the block residual, unnormalised, into ``resid`` float64 (V,).

    Args: ``weight`` the block weight P_i (1: the standard residual); ``p``, ``q`` float64 (V,).
    ``resid`` may be ``p`` itself (updated in place).
    """
    for v in range(p.shape[0]):
        resid[v] = max(0.0, weight * p[v] - q[v])


@njit(cache=True)
def relaxed_targets(P, Q, w, drafts, gamma, Pt, tpt):
    """Pt[k] = (1 - w_k) P[k] + w_k Q[k] and tpt[k] = Pt[k, drafts[k]], k = 0..gamma-1 (relaxed block verification).

    Args: ``P``, ``Q`` float64 (>= gamma, V); ``w`` float64 (gamma,) weights in [0, 1]; ``drafts`` int64
    (gamma,); ``Pt`` float64 (>= gamma, V) and ``tpt`` float64 (gamma,) are written.
    """
    for k in range(gamma):
        wk = w[k]
        for v in range(P.shape[1]):
            Pt[k, v] = (1.0 - wk) * P[k, v] + wk * Q[k, v]
        tpt[k] = Pt[k, drafts[k]]


@njit(cache=True)
def relaxed_damage(h, damage, gamma):
    """E[sum over the emitted depths of damage_k] given the stopping probabilities h (gamma,).

    Depth k (1-based) is emitted iff tau >= k - 1; with C_j = damage_1 + ... +
    damage_j (C_{gamma+1} = C_gamma: the bonus token is drawn from p), the value is
    E[C_{tau+1}] by F_0 = C_1, F_k = h_k C_{k+1} + (1 - h_k) F_{k-1} (:func:`expected_damage_step`).

    Args: ``h`` float64 (>= gamma,) stopping probabilities; ``damage`` float64 (>= gamma,) the damage
    (total variation from p) of each depth; ``gamma`` int >= 1. Returns a float >= 0.
    """
    cum = damage[0]
    f = cum
    for k in range(gamma):
        nxt = cum + damage[k + 1] if k + 1 < gamma else cum
        f = expected_damage_step(f, nxt, h[k])
        cum = nxt
    return f


def block_residual_array(weight, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """max(0, weight p - q), unnormalised, in numpy (the vectorised form of :func:`block_residual`).

    Args: ``weight`` the block weight P_i in [0, 1] (1: the standard residual); ``p``, ``q`` float64
    (..., V). Returns float64 (..., V).
    """
    return np.maximum(weight * p - q, 0.0)


def normalised_block_residual(weight, p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, float]:
    """(norm(max(0, weight p - q)), its mass sum(max(0, weight p - q))) in numpy; p itself (a copy) when the
    mass is 0.

    Args: ``weight`` in [0, 1]; ``p``, ``q`` float64 (V,). Returns (float64 (V,), float). The mass is
    numpy's pairwise sum (:func:`residual_mass` sums sequentially).
    """
    r = block_residual_array(weight, p, q)
    m = float(r.sum())
    return (r / m if m > 0.0 else p.copy()), m


def relaxed_target(target_probs, draft_probs, w):
    """The relaxed target (1 - w) p + w q over the last axis (float64); w has p's shape without that axis.

    Args: ``target_probs`` p, ``draft_probs`` q float64 (..., V) (array-likes); ``w`` the weights in
    [0, 1], float64 of p's shape without the last axis (or broadcasting to it). Returns float64
    (..., V): the mixture target of relaxed block verification (speculative cascades, Narasimhan et
    al. 2024, arXiv 2405.19261), exact for p~ under block verification since w does not depend on the
    drafted token.
    """
    p = np.asarray(target_probs, dtype=np.float64)
    q = np.asarray(draft_probs, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)[..., None]
    return (1.0 - w) * p + w * q


#: :func:`relaxed_target` in torch, the text of the exported torch modules (float64 tensors on p's device).
TORCH_RELAXED_TARGET = '''
def relaxed_target(target_probs, draft_probs, w):
    """The relaxed target (1 - w) p + w q over the last axis (float64); w has p's shape without that axis."""
    p = torch.as_tensor(target_probs, dtype=torch.float64)
    q = torch.as_tensor(draft_probs, dtype=torch.float64, device=p.device)
    w = torch.as_tensor(w, dtype=torch.float64, device=p.device)[..., None]
    return (1.0 - w) * p + w * q
'''


__all__ = ["PHI_ERROR_BOUND", "PHI_POINTS", "TORCH_RELAXED_TARGET", "block_accept", "block_columns", "block_masses",
           "block_phi", "block_phi_onehot_pair", "block_residual", "block_residual_array", "block_stops",
           "block_weight", "block_weight_ratio", "expected_accepted_step", "expected_damage_step", "interpolate_phi",
           "interpolate_phi_anchored", "normalised_block_residual", "relaxed_block_weight", "relaxed_damage",
           "relaxed_residual_mass", "relaxed_target", "relaxed_targets", "residual_mass", "residual_mass_onehot",
           "residual_mass_onehot_pair", "residual_phi", "residual_phi_onehot", "stopping_probability", "target_rank"]

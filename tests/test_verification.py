"""The verification core (:mod:`evolve.verification`) against plain-loop references, and its numpy, Numba and
torch forms against each other."""
from __future__ import annotations

import math

import numpy as np
import pytest

from evolve.export.codegen import core_source
from evolve.verification.block import (
    PHI_POINTS, TORCH_RELAXED_TARGET, block_accept, block_masses, block_phi, block_phi_onehot_pair, block_residual,
    block_residual_array, block_stops, block_weight, block_weight_ratio, expected_accepted_step, expected_damage_step, interpolate_phi,
    interpolate_phi_anchored, normalised_block_residual, relaxed_block_weight, relaxed_damage, relaxed_residual_mass,
    relaxed_target, relaxed_targets, residual_mass, residual_mass_onehot, residual_mass_onehot_pair, residual_phi,
    stopping_probability,
)
from evolve.verification.tokenwise import TORCH_RESIDUAL, acceptance_ratio, residual_distribution, standard_threshold
from evolve.verification.traversal import traversal_delete
from evolve.verification.tree import accept_weight, residual_update


def _pair(rng, V=7, rows=None):
    shape = (V,) if rows is None else (rows, V)
    p = rng.dirichlet(np.ones(V), size=rows) if rows else rng.dirichlet(np.ones(V))
    q = rng.dirichlet(np.ones(V), size=rows) if rows else rng.dirichlet(np.ones(V))
    return p.reshape(shape), q.reshape(shape)


def _undocumented():
    return None


def _loop_residual(p, q, tau):
    r = [max(0.0, float(pv) - float(qv) * float(t)) for pv, qv, t in zip(p, q, tau)]
    s = math.fsum(r)
    return [x / s for x in r] if s > 0 else list(p)


def test_standard_threshold_is_min_one_ratio():
    rng = np.random.default_rng(0)
    tp, dp = rng.random(50), rng.random(50) + 1e-3
    assert standard_threshold(tp, dp).tolist() == [min(1.0, a / b) for a, b in zip(tp, dp)]
    assert [acceptance_ratio(a, b) for a, b in zip(tp, dp)] == standard_threshold(tp, dp).tolist()


@pytest.mark.parametrize("seed", range(4))
def test_residual_distribution_against_a_loop(seed):
    rng = np.random.default_rng(seed)
    p, q = _pair(rng)
    for tau in (np.ones(p.size), rng.random(p.size), np.full(p.size, 0.3)):
        np.testing.assert_allclose(residual_distribution(p, q, tau), _loop_residual(p, q, tau), rtol=1e-12)
    # rows: the last axis is the vocabulary, one threshold per row broadcasts
    P, Q = _pair(rng, rows=3)
    tau = rng.random((3, 1))
    got = residual_distribution(P, Q, tau)
    for i in range(3):
        np.testing.assert_allclose(got[i], _loop_residual(P[i], Q[i], np.full(P.shape[1], tau[i, 0])), rtol=1e-12)
    # p == q: the residual is all zero, p itself comes back
    np.testing.assert_array_equal(residual_distribution(p, p, 1.0), p)


def test_torch_texts_match_the_numpy_functions():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    P, Q = _pair(rng, rows=4)
    space: dict = {"torch": torch}
    exec(TORCH_RESIDUAL, space)
    exec(TORCH_RELAXED_TARGET, space)
    tau = rng.random((4, 1))
    np.testing.assert_allclose(space["residual_distribution"](P, Q, tau).numpy(), residual_distribution(P, Q, tau),
                               rtol=0, atol=1e-15)
    w = rng.random(4)
    np.testing.assert_allclose(space["relaxed_target"](P, Q, w).numpy(), relaxed_target(P, Q, w), rtol=0, atol=1e-15)


def test_exported_numpy_text_is_the_core_function():
    text = core_source(residual_distribution)
    assert text.startswith("\ndef residual_distribution(target_probs, draft_probs, tau):\n")
    assert text.count('"""') == 2  # the docstring cut to its first line
    space: dict = {"np": np}
    exec(text, space)
    rng = np.random.default_rng(1)
    p, q = _pair(rng)
    tau = rng.random(p.size)
    np.testing.assert_array_equal(space["residual_distribution"](p, q, tau), residual_distribution(p, q, tau))
    with pytest.raises(ValueError, match="no docstring"):
        core_source(_undocumented)


@pytest.mark.parametrize("seed", range(4))
def test_block_verification_against_a_loop(seed):
    rng = np.random.default_rng(seed)
    gamma, V = 4, 6
    P, Q = _pair(rng, V, gamma + 1)
    x = np.array([rng.choice(V, p=Q[k]) for k in range(gamma)])
    tp, dp = P[np.arange(gamma), x], Q[np.arange(gamma), x]
    weights, masses, h = np.empty(gamma), np.empty(gamma), np.empty(gamma)
    block_masses(P, Q, tp, dp, gamma, weights, masses)
    e_tau = block_stops(weights, masses, gamma, h)
    # plain loop (Sun et al. 2024): P_i = min(1, P_{i-1} p_i / q_i), m_i, h_i
    w, want_w, want_m, want_h = 1.0, [], [], []
    for k in range(gamma):
        w = min(1.0, w * tp[k] / dp[k])
        want_w.append(w)
        if k + 1 < gamma:
            m = sum(max(0.0, w * P[k + 1, v] - Q[k + 1, v]) for v in range(V))
            want_m.append(m)
            want_h.append(1.0 if m + 1.0 - w <= 0 else m / (m + 1.0 - w))
        else:
            want_h.append(w)
    np.testing.assert_allclose(weights, want_w, rtol=1e-15)
    np.testing.assert_allclose(masses[:-1], want_m, rtol=1e-12)
    assert np.isnan(masses[-1])
    np.testing.assert_allclose(h, want_h, rtol=1e-12)
    # E[tau] = sum_i i h_i prod_{j>i} (1 - h_j)
    want_e = sum((i + 1) * want_h[i] * np.prod([1 - want_h[j] for j in range(i + 1, gamma)]) for i in range(gamma))
    assert e_tau == pytest.approx(want_e, rel=1e-12)
    eta = rng.random(gamma)
    tau = max([i + 1 for i in range(gamma) if eta[i] <= h[i]], default=0)
    assert block_accept(h, eta, gamma) == tau
    assert stopping_probability(0.5, 0.25) == 0.25 / 0.75 and stopping_probability(1.0, 0.0) == 1.0


def test_block_residual_forms_agree():
    rng = np.random.default_rng(2)
    p, q = _pair(rng, 9)
    for weight in (1.0, 0.6, 0.0):
        resid = np.empty(9)
        block_residual(weight, p, q, resid)
        np.testing.assert_array_equal(resid, block_residual_array(weight, p, q))  # elementwise: the same bits
        dist, m = normalised_block_residual(weight, p, q)
        row = p.copy()
        m2 = residual_update(weight, row, q)
        assert m == pytest.approx(m2, rel=1e-14)
        if m > 0:
            np.testing.assert_allclose(dist, row, rtol=1e-13)
            np.testing.assert_allclose(dist, np.maximum(weight * p - q, 0) / m, rtol=1e-13)
        else:
            np.testing.assert_array_equal(dist, p)
            np.testing.assert_array_equal(row, p)


def test_relaxed_targets_against_a_loop():
    rng = np.random.default_rng(3)
    gamma, V = 3, 5
    P, Q = _pair(rng, V, gamma)
    w = rng.random(gamma)
    drafts = np.array([0, 3, 1])
    Pt, tpt = np.empty((gamma, V)), np.empty(gamma)
    relaxed_targets(P, Q, w, drafts, gamma, Pt, tpt)
    loop = np.array([[(1.0 - w[k]) * P[k, v] + w[k] * Q[k, v] for v in range(V)] for k in range(gamma)])
    np.testing.assert_array_equal(Pt, loop)
    np.testing.assert_array_equal(relaxed_target(P, Q, w), loop)
    np.testing.assert_array_equal(tpt, loop[np.arange(gamma), drafts])


def test_tree_acceptance_and_updates_against_a_loop():
    rng = np.random.default_rng(4)
    p, q = _pair(rng, 8)
    for weight in (1.0, 0.4):
        for x in range(8):
            assert accept_weight(weight, p, q, x) == min(1.0, weight * p[x] / q[x])
    q0 = q.copy()
    q0[2] = 0.0
    assert accept_weight(1.0, p, q0, 2) == 1.0 and accept_weight(0.0, p, q0, 2) == 0.0
    # SpecInfer's residual after a rejected child and traversal's deletion
    R = p.copy()
    m = residual_update(1.0, R, q)
    np.testing.assert_allclose(R, _loop_residual(p, q, np.ones(8)), rtol=1e-12)
    assert m == pytest.approx(sum(max(0.0, a - b) for a, b in zip(p, q)), rel=1e-12)
    row = p.copy()
    a = traversal_delete(0.7, row, q, np.empty(8))
    mass = sum(max(0.0, 0.7 * a_ - b) for a_, b in zip(p, q))
    assert a == pytest.approx(mass / (mass + 1.0 - 0.7), rel=1e-12)
    np.testing.assert_allclose(row, [max(0.0, 0.7 * a_ - b) / mass for a_, b in zip(p, q)], rtol=1e-12)
    want, m = normalised_block_residual(0.7, p, q)  # the engine's numpy form, to the bit
    assert row.tobytes() == want.tobytes() and a == stopping_probability(0.7, m)
    same = q.copy()
    assert residual_update(1.0, same, q) == 0.0
    np.testing.assert_array_equal(same, q)  # unchanged when the mass is 0


def test_block_weight_forms_against_a_loop():
    rng = np.random.default_rng(5)
    tp, dp, prev, w = rng.random(200), rng.random(200) + 1e-3, rng.random(200), rng.random(200)
    for a, b, c, wk in zip(tp, dp, prev, w):
        assert block_weight(c, a, b) == min(1.0, (c * a) / b)  # (P p) / q
        assert block_weight_ratio(c, a / b) == min(1.0, c * (a / b))  # P (p / q)
        assert relaxed_block_weight(c, a / b, wk) == min(1.0, c * ((1.0 - wk) * (a / b) + wk))
        assert relaxed_block_weight(c, a / b, 0.0) == block_weight_ratio(c, a / b)  # w = 0: lossless
    # the two forms differ in the last bit somewhere: both are needed to keep the recorded values
    assert any(block_weight(c, a, b) != block_weight_ratio(c, a / b) for a, b, c in zip(tp, dp, prev))


def test_recursion_steps_against_the_closed_forms():
    rng = np.random.default_rng(6)
    gamma = 5
    h, damage = rng.random(gamma), rng.random(gamma)
    acc = 0.0
    for k in range(1, gamma + 1):
        acc = expected_accepted_step(acc, k, h[k - 1])
    want = sum(i * h[i - 1] * np.prod([1 - h[j - 1] for j in range(i + 1, gamma + 1)]) for i in range(1, gamma + 1))
    assert acc == pytest.approx(want, rel=1e-12)
    assert expected_accepted_step(0.7, 3, 0.25) == 3 * 0.25 + (1.0 - 0.25) * 0.7
    assert expected_accepted_step(0.7, 3.0, 0.25) == expected_accepted_step(0.7, 3, 0.25)
    assert expected_damage_step(0.4, 1.5, 0.25) == 0.25 * 1.5 + (1.0 - 0.25) * 0.4
    # E[C_{tau+1}] by enumerating tau: P(tau = i) = h_i prod_{j>i} (1 - h_j), tau = 0 with prod (1 - h_j)
    hh = h.copy()
    hh[-1] = 0.6
    C = np.cumsum(damage)
    probs = [np.prod(1 - hh)] + [hh[i - 1] * np.prod(1 - hh[i:]) for i in range(1, gamma + 1)]
    want_d = sum(pr * C[min(t, gamma - 1)] for t, pr in enumerate(probs))
    assert relaxed_damage(hh, damage, gamma) == pytest.approx(want_d, rel=1e-12)


def test_residual_mass_onehot_is_the_dense_sum():
    rng = np.random.default_rng(7)
    V = 11
    p = rng.dirichlet(np.ones(V))
    for weight in (1.0, 0.7, 0.05):
        for y in range(V):
            q = np.zeros(V)
            q[y] = 1.0
            got = residual_mass_onehot(weight, p, y)
            assert got == residual_mass(weight, p, q)  # same steps, the same bits
            loop = 0.0
            for v in range(V):
                d = weight * p[v] - q[v]
                if d > 0.0:
                    loop += d
            assert got == loop


def test_anchored_phi_and_relaxed_residual_mass_against_numpy():
    rng = np.random.default_rng(8)
    V = 13
    for _ in range(30):
        p, q = _pair(rng, V)
        phi = np.empty(PHI_POINTS)
        residual_phi(p, q, phi)
        a0 = float(rng.uniform(0, 1))
        v0 = float(np.maximum(0.0, a0 * p - q).sum())
        assert interpolate_phi_anchored(phi, a0, a0, v0) == v0
        for k in (0, 1, 7, PHI_POINTS):  # grid points away from the anchor: the grid value itself
            if abs(k / PHI_POINTS - a0) * PHI_POINTS >= 1:
                assert interpolate_phi_anchored(phi, k / PHI_POINTS, a0, v0) == (phi[k - 1] if k else 0.0)
        for a in rng.uniform(0, 1, 20):
            true = float(np.maximum(0.0, a * p - q).sum())
            est = interpolate_phi_anchored(phi, a, a0, v0)
            assert true - 1e-12 <= est <= true + 1.0 / (4 * PHI_POINTS) + 1e-12
            if not (int(a * PHI_POINTS) < a0 * PHI_POINTS < int(a * PHI_POINTS) + 1):  # no anchor: plain chord
                assert est == interpolate_phi(phi, a)
        # relaxed residual mass: sum_x max(0, P~ ((1 - w) p + w q) - q) = (1 - P~ w) phi(a)
        for weight, w in ((0.8, 0.3), (0.5, 0.0), (1.0, 0.9), (0.3, 1.0)):
            exact = float(np.maximum(0.0, weight * ((1.0 - w) * p + w * q) - q).sum())
            got = relaxed_residual_mass(weight, w, phi, a0, v0)
            den = 1.0 - weight * w
            want = den * interpolate_phi_anchored(phi, weight * (1.0 - w) / den, a0, v0)
            assert got == want
            assert exact - 1e-12 <= got <= exact + den / (4 * PHI_POINTS) + 1e-12
    assert relaxed_residual_mass(1.0, 1.0, phi, 0.5, 0.1) == 0.0  # P~ w = 1: p~ = q, nothing left


def test_onehot_pair_forms_are_the_dense_values():
    V, K = 6, PHI_POINTS
    eye = np.eye(V)
    p_ids, q_ids = np.array([0, 2, 5, 3]), np.array([0, 4, 5, 1])
    for weight in (1.0, 0.3, 0.0):
        for a, b in zip(p_ids, q_ids):
            assert residual_mass_onehot_pair(weight, a, b) == residual_mass(weight, eye[a], eye[b])
    dense = np.empty((p_ids.size, K))
    for d in range(p_ids.size):
        residual_phi(eye[p_ids[d]], eye[q_ids[d]], dense[d])
    np.testing.assert_array_equal(block_phi_onehot_pair(p_ids, q_ids, K), dense)
    shifted = block_phi(eye[p_ids], eye[q_ids], K)  # block_phi's row d is phi of depth d + 1
    np.testing.assert_array_equal(shifted[:-1], dense[1:])

"""The verification core (:mod:`evolve.verification`) against plain-loop references, and its numpy, Numba and
torch forms against each other."""
from __future__ import annotations

import math

import numpy as np
import pytest

from evolve.export.codegen import core_source
from evolve.verification.block import (
    TORCH_RELAXED_TARGET, block_accept, block_masses, block_residual, block_residual_array, block_stops,
    normalised_block_residual, relaxed_target, relaxed_targets, stopping_probability,
)
from evolve.verification.tokenwise import TORCH_RESIDUAL, acceptance_ratio, residual_distribution, standard_threshold
from evolve.verification.tree import accept_weight, residual_update, traversal_delete


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
    a = traversal_delete(0.7, row, q)
    mass = sum(max(0.0, 0.7 * a_ - b) for a_, b in zip(p, q))
    assert a == pytest.approx(mass / (mass + 1.0 - 0.7), rel=1e-12)
    np.testing.assert_allclose(row, [max(0.0, 0.7 * a_ - b) / mass for a_, b in zip(p, q)], rtol=1e-12)
    same = q.copy()
    assert residual_update(1.0, same, q) == 0.0
    np.testing.assert_array_equal(same, q)  # unchanged when the mass is 0

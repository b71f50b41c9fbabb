"""FLy in the chain simulator (evolve/sim/verification.py; Li et al. 2025, arXiv 2511.22972, as vLLM ships it).

* the decisions (entropy gate, look-ahead window, deferral) by hand and against a brute-force
  enumeration of the native outcomes, and the expected kept length and deferrals;
* with a gate that never opens FLy is token-wise verification, bit for bit;
* simulated tokens per call and deferrals agree with their expectations given the drafts;
* at fixed contexts the first emitted token's TV from p is the rate of deferred acceptances
  (what :func:`evolve.sim.decoding.context_damage` reports), checked against the histogram;
* bad parameters and lossy base rules are refused.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from evolve.errors import InputError
from evolve.sim.chain import B_ANALYTIC, B_TOKENS, B_TV_COUNT, B_TV_EXPECTED, R_ACCEPTED, R_R, R_U
from evolve.sim.decoding import chain_at_context, chain_traces, context_damage, simulate_chain
from evolve.sim.models import SyntheticModel, distributions_at, random_context
from evolve.sim.verification import Verification, fly_accept, fly_expected, topk_entropy
from heuristics.registry import get_rule

from helpers import chi_square_pvalue

STANDARD = get_rule("standard_rejection")
FLY = Verification("fly")


@pytest.fixture(scope="module")
def sim_model() -> SyntheticModel:
    return SyntheticModel(vocab_size=100, seed=11)


def test_decisions_by_hand():
    deferred = np.zeros(5, dtype=np.bool_)
    gate = np.array([True, True, True, False, False])  # depth + W < gamma for W = 2, gamma = 5
    # native rejection at depth 0, natives at 1 and 2 hold: deferred; depth 3 rejected, no gate there
    assert fly_accept(np.array([False, True, True, False, True]), gate, 5, 2, deferred) == 3
    assert list(deferred) == [True, False, False, False, False]
    # the window must hold entirely: a native rejection at depth 2 stops the deferral at depth 0
    assert fly_accept(np.array([False, True, False, True, True]), gate, 5, 2, deferred) == 0
    # a second deferral after a kept window
    assert fly_accept(np.array([True, False, True, True, False]), gate, 5, 2, deferred) == 4
    assert list(deferred) == [False, True, False, False, False]
    # vLLM's top-k entropy: -sum over the k largest p of p log p, not renormalised
    p = np.array([0.1, 0.5, 0.0, 0.25, 0.15])
    top = np.array([0.5, 0.25, 0.15])
    assert topk_entropy(p, 3) == pytest.approx(-(top * np.log(top)).sum())
    assert topk_entropy(p, 10) == pytest.approx(-(p[p > 0] * np.log(p[p > 0])).sum())
    assert topk_entropy(np.array([1.0, 0.0]), 3) == 0.0


def test_expected_kept_length_and_deferrals_match_enumeration():
    rng = np.random.default_rng(0)
    deferred = np.zeros(6, dtype=np.bool_)
    for _ in range(200):
        gamma = int(rng.integers(2, 7))
        window = int(rng.integers(0, gamma))
        r = rng.random(gamma) ** 0.5
        gate = (rng.random(gamma) < 0.6) & (np.arange(gamma) + window < gamma)
        kept = deferrals = 0.0
        for outcome in itertools.product((False, True), repeat=gamma):
            native = np.array(outcome)
            weight = np.prod(np.where(native, r, 1.0 - r))
            k = fly_accept(native, gate, gamma, window, deferred[:gamma])
            kept += weight * k
            deferrals += weight * deferred[:k].sum()
        got = fly_expected(r, gate, gamma, window, np.empty(gamma + 1), np.empty(gamma + 1))
        assert got == pytest.approx((kept, deferrals), abs=1e-12)


def test_closed_gate_is_token_wise_verification(sim_model):
    token = simulate_chain(sim_model, STANDARD, [300], 3, 4)[0]
    closed = simulate_chain(sim_model, STANDARD, [300], 3, 4, verification=Verification("fly", fly_threshold=100.0))[0]
    np.testing.assert_array_equal(token.stats, closed.stats)


def test_tokens_and_deferrals_match_their_expectations(sim_model):
    frame, _, blocks = chain_traces(sim_model, STANDARD, length=2000, sequences=20, gamma=5, verification=FLY)
    realized, expected = blocks[:, B_TOKENS], blocks[:, B_ANALYTIC]
    diff = realized - expected
    z = diff.mean() / (diff.std() / np.sqrt(diff.size))
    dd = blocks[:, B_TV_COUNT] - blocks[:, B_TV_EXPECTED]
    z_def = dd.sum() / np.sqrt((dd ** 2).sum())
    token = simulate_chain(sim_model, STANDARD, [2000], 20, 5)[0]
    print(f"FLy (W=4, theta=0.3, k=3): tokens per call {realized.mean():.4f} (expected {expected.mean():.4f}, "
          f"z = {z:.2f}), token-wise {token.tokens_per_call:.4f}; deferred acceptances per emitted token "
          f"{blocks[:, B_TV_COUNT].sum() / realized.sum():.4f} (expected "
          f"{blocks[:, B_TV_EXPECTED].sum() / expected.sum():.4f}, z = {z_def:.2f})")
    assert abs(z) < 3.29 and abs(z_def) < 3.29
    assert blocks[:, B_TV_COUNT].sum() > 50
    assert realized.mean() > token.tokens_per_call


def test_damage_at_fixed_contexts_is_the_first_tokens_tv():
    """The first emitted token's TV from p (tiny vocabulary) equals the deferral rate at depth 1.

    FLy's first token exceeds p exactly on S = {q > p} (deferred drafts are such tokens, the
    standard residual lives on p > q), so TV = out(S) - p(S), estimated by the fraction of first
    tokens in S (as for the lossy rules in test_decoding.py), paired with the deferral indicator.
    """
    model = SyntheticModel(vocab_size=6, seed=3)
    n = 50_000
    damage = context_damage(model, STANDARD, 3, FLY, contexts=4, draws=n)
    for key in range(4):
        ctx = random_context(model, key=key, position=12)
        dist = distributions_at(model, ctx)
        p, q = dist["p"], dist["q"]
        tokens, rows = chain_at_context(model, STANDARD, ctx, n, gamma=3, seed=key, verification=FLY)
        deferred = (rows[:, R_ACCEPTED] > 0.5) & (rows[:, R_U] >= rows[:, R_R])
        assert damage[key] == deferred.mean()  # context_damage ran the same decodes
        in_s = (q > p)[tokens[:, 0]].astype(float)
        paired = in_s - p[q > p].sum() - deferred
        z = paired.mean() / (paired.std() / np.sqrt(n))
        hist_tv = 0.5 * np.abs(np.bincount(tokens[:, 0], minlength=6) / n - p).sum()
        print(f"context {key}: first token's TV from p: out(S) - p(S) {in_s.mean() - p[q > p].sum():.4f}, "
              f"histogram {hist_tv:.4f}, deferral rate {damage[key]:.4f} (paired z = {z:.2f})")
        assert abs(z) < 3.29
        if damage[key] > 0.02:
            assert chi_square_pvalue(np.bincount(tokens[:, 0], minlength=6), p) < 1e-6  # FLy is lossy
    assert damage.max() > 0.05


def test_bad_parameters_and_lossy_rules_are_refused(sim_model):
    for verification, message in ((Verification("fly", fly_window=4), r"window must be an integer in \[0, gamma - 1\]"),
                                  (Verification("fly", fly_threshold=-1.0), "entropy threshold"),
                                  (Verification("fly", fly_threshold=float("nan")), "entropy threshold"),
                                  (Verification("fly", fly_top_k=0), "top k")):
        with pytest.raises(InputError, match=message):
            simulate_chain(sim_model, STANDARD, [10], 1, 4, verification=verification)
    with pytest.raises(InputError, match="gamma >= 2"):
        simulate_chain(sim_model, STANDARD, [10], 1, 1, verification=FLY)
    with pytest.raises(InputError, match="standard rule only"):
        simulate_chain(sim_model, get_rule("always_accept"), [10], 1, 4, verification=FLY)
    assert FLY.window(8) == 6 and FLY.window(3) == 2 and FLY.label(5) == "fly(W=4, theta=0.3, k=3)"

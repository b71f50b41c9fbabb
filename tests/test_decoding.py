"""The decode-loop simulator (evolve/sim/decoding.py, evolve/sim/chain.py): context-dependent models, exactness, block formula, TV."""
from __future__ import annotations

import numba
import numpy as np
import pandas as pd
import pytest

from evolve.errors import InputError
from evolve.eval.costs import ratio_costs
from evolve.traces.io import Traces
from evolve.gp.compiler import evaluate_numpy
from evolve.sim import chain, decoding
from evolve.sim.chain import B_ANALYTIC, B_TOKENS, B_TV_COUNT, B_TV_EXPECTED, R_R, R_TAU, R_U, S_CALLS
from evolve.sim.decoding import chain_at_context, chain_traces, rule_program, simulate_chain
from evolve.sim.models import Context, SyntheticModel, distributions_at, random_context
from evolve.eval.evaluator import EvalData, evaluate
from evolve.gp.primitives import FEATURES, LOOKUP_FEATURES, SUFFIX_FEATURES
from heuristics.contract import Rule
from evolve.traces.synth.rng import sample_index
from heuristics.registry import get_rule

from helpers import chi_square_pvalue, rebind

V = 48
DRAWS = 100_000  # draws per exactness test (at least 100k)


@pytest.fixture(scope="module")
def context(model) -> Context:
    return random_context(model, key=0, position=12)


def _feature_columns(dist: dict, position: int, depth: int = 0) -> dict:
    """The generator's features of every vocabulary token at one position (numpy reference)."""
    n = dist["p"].size
    return {"draft_prob": dist["q"], "target_prob": dist["p"], "position": np.full(n, float(position)),
            "draft_entropy": np.full(n, dist["draft_entropy"]), "target_entropy": np.full(n, dist["target_entropy"]),
            "top_token_match": np.full(n, float(dist["target_argmax"] == dist["draft_argmax"])),
            "draft_index": np.full(n, float(depth)), "draft_top_prob": np.full(n, dist["draft_top_prob"]),
            "target_top_prob": np.full(n, dist["target_top_prob"]), "overlap": np.full(n, dist["overlap"])}


def _next_context(ctx: Context, token: int, d: float) -> Context:
    return Context(np.append(ctx.window[1:], token).astype(np.int64), ctx.position + 1, d)


# --- the synthetic models -----------------------------------------------------------------------

def test_distributions_are_fixed_functions_of_the_context(model, context):
    a = distributions_at(model, context)
    b = distributions_at(model, context)
    assert np.array_equal(a["p"], b["p"]) and np.array_equal(a["q"], b["q"])
    assert abs(a["p"].sum() - 1) < 1e-12 and abs(a["q"].sum() - 1) < 1e-12
    # the draft's noise grows with the depth since the last verification; the target ignores it
    deep = distributions_at(model, context, depth=4)
    assert np.array_equal(deep["p"], a["p"])
    assert not np.array_equal(deep["q"], a["q"])
    assert np.sum(np.minimum(deep["p"], deep["q"])) < a["overlap"] + 0.05
    # features are the generator's: overlap = sum min(p, q), top probs and entropies of p and q
    assert a["overlap"] == pytest.approx(np.minimum(a["p"], a["q"]).sum(), abs=1e-12)
    assert a["target_top_prob"] == a["p"].max() and a["target_argmax"] == int(np.argmax(a["p"]))
    assert a["target_entropy"] == pytest.approx(-(a["p"] * np.log(a["p"])).sum(), rel=1e-9)


def test_drafted_tokens_change_later_distributions(model, context):
    d = distributions_at(model, context)["d"]
    p_after = [distributions_at(model, _next_context(context, tok, d))["p"] for tok in range(3)]
    assert not np.array_equal(p_after[0], p_after[1]) and not np.array_equal(p_after[1], p_after[2])
    # and the position matters too (same window, next position)
    moved = Context(context.window, context.position + 1, context.d_prev)
    assert not np.array_equal(distributions_at(model, moved)["p"], distributions_at(model, context)["p"])


# --- exactness at a fixed context ---------------------------------------------------------------

def test_standard_rejection_emits_exactly_p(model, context):
    dist = distributions_at(model, context)
    p = dist["p"]
    tokens, rows = chain_at_context(model, get_rule("standard_rejection"), context, DRAWS, gamma=2, n_tokens=2, seed=1)
    first = np.bincount(tokens[:, 0], minlength=V)
    pv1 = chi_square_pvalue(first, p)
    # second emitted token (an accepted draft, the bonus token or the next block's): marginal sum_x p(x) p(.|x)
    p2 = sum(p[x] * distributions_at(model, _next_context(context, x, dist["d"]))["p"] for x in range(V))
    pv2 = chi_square_pvalue(np.bincount(tokens[:, 1], minlength=V), p2)
    print(f"standard rejection: chi-square p-values first token {pv1:.3f}, second token {pv2:.3f}")
    assert pv1 > 0.01 and pv2 > 0.01
    # the decode loop really was speculative: rejections and accepted drafts both occurred
    assert 0.3 < rows[:, R_TAU].mean() < 0.99


@numba.njit
def _residual_from_p(rng, rule, p, q, feats, XV, stack, resid, uses_rank):
    """Deliberately wrong stand-in for ``chain._residual_sample``: the token after a rejection comes from p."""
    return sample_index(rng, p)


def test_wrong_residual_is_detected(model, context, monkeypatch):
    """Sampling from p instead of the residual after a rejection over-weights the drafted tokens."""
    p = distributions_at(model, context)["p"]
    wrong = rebind(chain.chain_batch, chain_run=rebind(chain.chain_run, _residual_sample=_residual_from_p))
    monkeypatch.setattr(decoding, "chain_batch", wrong)
    tokens, _ = chain_at_context(model, get_rule("standard_rejection"), context, DRAWS, gamma=2, n_tokens=1, seed=1)
    pv = chi_square_pvalue(np.bincount(tokens[:, 0], minlength=V), p)
    print(f"broken residual: chi-square p-value {pv:.3g}")
    assert pv < 0.01


@pytest.mark.parametrize("name", ["always_accept", "position_aware"])
def test_lossy_rule_tv_matches_expected(model, context, name):
    rule = get_rule(name)
    dist = distributions_at(model, context)
    p, q = dist["p"], dist["q"]
    tau = np.clip(evaluate_numpy(rule.nodes, _feature_columns(dist, context.position), V), 0.0, 1.0)
    tv = np.maximum(0.0, q * tau - p).sum()                      # TV of tau against p (docs/reference/math.md)
    accept = (q * tau).sum()
    resid = np.maximum(0.0, p - q * tau)
    output = q * tau + (1.0 - accept) * resid / resid.sum()     # the best residual's output distribution
    assert tv > 0.01

    tokens, rows = chain_at_context(model, rule, context, DRAWS, gamma=2, n_tokens=1, seed=3)
    counts = np.bincount(tokens[:, 0], minlength=V)
    assert chi_square_pvalue(counts, output) > 0.01
    assert chi_square_pvalue(counts, p) < 0.01

    # empirical TV between the emitted distribution and p: on S = {q tau > p} the output exceeds p
    # and elsewhere it does not, so TV = out(S) - p(S), estimated without bias by the emitted fraction
    in_s = (q * tau > p)[tokens[:, 0]].astype(float)
    empirical = in_s.mean() - p[q * tau > p].sum()
    se = in_s.std() / np.sqrt(DRAWS)
    # the evaluator's expected TV on the records of the same first drafted tokens
    frame = {f: rows[:, i] for i, f in enumerate(FEATURES)
             if f not in LOOKUP_FEATURES + SUFFIX_FEATURES}  # no prompt lookup nor suffix decoding here
    frame.update(position=frame["position"].astype(np.int64), draft_index=frame["draft_index"].astype(np.int64),
                 top_token_match=frame["top_token_match"] > 0.5, rand_value=rows[:, R_U],
                 baseline_accepts=rows[:, R_U] < rows[:, R_R], seq_id=np.arange(DRAWS))
    metrics = evaluate(rule, EvalData.from_traces(Traces.from_frame(pd.DataFrame(frame))))
    paired = in_s - p[q * tau > p].sum() - np.maximum(0.0, rows[:, R_TAU] - rows[:, R_R])
    z_eval = paired.mean() / (paired.std() / np.sqrt(DRAWS))
    print(f"{name}: expected TV {tv:.5f}, evaluator expected_tv {metrics.expected_tv:.5f}, "
          f"empirical {empirical:.5f} +- {1.96 * se:.5f} (95%), paired z vs evaluator {z_eval:.2f}")
    assert abs(empirical - tv) < 3.29 * se   # 99.9% interval
    assert abs(metrics.expected_tv - tv) < 3.29 * np.maximum(0, rows[:, R_TAU] - rows[:, R_R]).std() / np.sqrt(DRAWS)
    assert abs(z_eval) < 3.29


# --- block level ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sim_model() -> SyntheticModel:
    return SyntheticModel(vocab_size=100, seed=11)


@pytest.mark.parametrize("name", ["standard_rejection", "ratio_floor_0.3", "entropy_aware"])
def test_tokens_per_call_matches_block_formula(sim_model, name):
    rule = get_rule(name)
    frame, tau, blocks = chain_traces(sim_model, rule, length=1500, sequences=20, gamma=4)
    assert len(blocks) > 8000
    realized, analytic = blocks[:, B_TOKENS], blocks[:, B_ANALYTIC]
    rel = realized.mean() / analytic.mean() - 1.0
    diff = realized - analytic
    z = diff.mean() / (diff.std() / np.sqrt(diff.size))
    print(f"{name}: tokens per call simulated {realized.mean():.4f}, block formula {analytic.mean():.4f} "
          f"({100 * rel:+.2f}%, z = {z:.2f}, {len(blocks)} blocks)")
    assert abs(rel) < 0.02
    assert abs(z) < 3.29
    # the evaluator's block metrics on the recorded trace split reproduce the formula exactly
    metrics = evaluate(rule, EvalData.from_traces(Traces.from_frame(frame)), gamma=4)
    assert metrics.tokens_per_call == pytest.approx(analytic.mean(), rel=1e-12)
    if blocks[:, B_TV_EXPECTED].sum() > 0:
        assert metrics.tv_per_token == pytest.approx(blocks[:, B_TV_EXPECTED].sum() / analytic.sum(), rel=1e-9)
    # the loop's thresholds are the interpreter's
    assert np.allclose(tau, np.clip(evaluate_numpy(rule.nodes, {f: frame[f].to_numpy(float) for f in FEATURES if f in frame},
                                                   len(frame)), 0, 1), rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", ["ratio_floor_0.3", "top_token_match"])
def test_tv_per_token_empirical_matches_expected(sim_model, name):
    _, _, blocks = chain_traces(sim_model, get_rule(name), length=1500, sequences=20, gamma=4, key0=100)
    diff = blocks[:, B_TV_COUNT] - blocks[:, B_TV_EXPECTED]
    z = diff.sum() / np.sqrt((diff ** 2).sum())
    emp = blocks[:, B_TV_COUNT].sum() / blocks[:, B_TOKENS].sum()
    exp = blocks[:, B_TV_EXPECTED].sum() / blocks[:, B_ANALYTIC].sum()
    print(f"{name}: tv per emitted token empirical {emp:.5f}, expected {exp:.5f} (z = {z:.2f})")
    assert exp > 0.001
    assert abs(z) < 3.29


def test_standard_rule_is_lossless_and_always_accept_emits_full_blocks(sim_model):
    std, always, never = (simulate_chain(sim_model, r, [120], 4, gamma=3)[0]
                          for r in (get_rule("standard_rejection"), get_rule("always_accept"),
                                    Rule("never", expression="0.0")))
    assert std.tv_expected == 0.0 and std.tv_empirical == 0.0
    assert 1.0 < std.tokens_per_call < 4.0
    assert always.tokens_per_call == always.analytic_tokens_per_call == 4.0
    assert always.acceptance_rate == 1.0 and always.tv_expected > 0.05
    assert always.target_calls == 30.0 and always.calls_per_token == 0.25
    assert never.tokens_per_call == never.analytic_tokens_per_call == 1.0 and never.acceptance_rate == 0.0
    # cost model: AR time = length, speculative time = calls * (1 + gamma * c)
    assert always.autoregressive_time == 120.0
    assert always.speedup == pytest.approx(120.0 / (30 * (1 + 3 * 0.05)))
    assert never.speedup == pytest.approx(1.0 / (1 + 3 * 0.05))


def test_simulation_is_deterministic_and_thread_independent(sim_model):
    rule = get_rule("entropy_aware")
    a = simulate_chain(sim_model, rule, [60, 90], 3, gamma=4)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        b = simulate_chain(sim_model, rule, [60, 90], 3, gamma=4)
    finally:
        numba.set_num_threads(threads)
    for x, y in zip(a, b):
        assert np.array_equal(x.stats, y.stats)
    other = simulate_chain(SyntheticModel(vocab_size=100, seed=12), rule, [60, 90], 3, gamma=4)
    assert not np.array_equal(a[1].stats, other[1].stats)
    assert a[0].stats[S_CALLS] > 0


def test_function_rules_and_bad_options_are_refused(sim_model):
    def fn(draft_prob, target_prob, position, draft_entropy, target_entropy, top_token_match):
        return 1.0
    with pytest.raises(InputError, match="function rule"):
        rule_program(Rule("py_rule", function=fn))
    with pytest.raises(InputError, match="^gamma: must be an integer in") as bad:
        simulate_chain(sim_model, get_rule("standard_rejection"), [10], 1, gamma=0)
    assert bad.value.param == "gamma"
    with pytest.raises(InputError, match="^cost_ratio: must be a finite number"):
        simulate_chain(sim_model, get_rule("standard_rejection"), [10], 1, gamma=2, costs=ratio_costs(-1.0))
    with pytest.raises(InputError, match="^vocab_size: "):
        SyntheticModel(vocab_size=1)
    with pytest.raises(InputError, match="^seed: "):
        SyntheticModel(seed=-3)

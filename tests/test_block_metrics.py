"""Block-level metrics: tokens per target call, speedup, TV per emitted token."""
from __future__ import annotations

import math

import numba
import numpy as np
import pandas as pd
import pytest

from evolve.errors import InputError
from evolve.traces.io import Traces
from evolve.gp.compiler import compile_expression
from evolve.eval.closed_forms import (
    naive_theoretical_speedup as seed001_theoretical_speedup, speedup_constant, tokens_per_call_constant,
)
from evolve.eval.costs import ratio_costs
from evolve.eval.evaluator import BLOCK_FIELDS, EvalData, evaluate, evaluate_thresholds, reference_metrics, thresholds
from evolve.eval.fastpath.scheduler import SCHEDULER, chunk_bounds
from evolve.eval.population import PopulationEvaluator
from heuristics.contract import Rule
from heuristics.registry import get_rule


def block_traces(blocks: list[list[tuple[float, float]]], u: float = 0.5) -> Traces:
    """One sequence per block; each block a list of (p, q) per depth (draft_index 0, 1, ...)."""
    rows = []
    for s, block in enumerate(blocks):
        for k, (p, q) in enumerate(block):
            rows.append(dict(seq_id=s, position=k, draft_prob=q, target_prob=p, draft_entropy=1.0,
                             target_entropy=1.0, top_token_match=False, rand_value=u, draft_index=k))
    df = pd.DataFrame(rows)
    df["baseline_accepts"] = df["rand_value"] < np.minimum(1.0, df["target_prob"] / df["draft_prob"])
    return Traces.from_frame(df, source="hand.json")


# r per depth: block A (0.25, 1, 0.5), block B (1, 0.1, 0.2), block C (0.5, 0.5) ends its sequence early
HAND = [[(0.25, 1.0), (0.9, 0.6), (0.25, 0.5)],
        [(0.8, 0.4), (0.05, 0.5), (0.1, 0.5)],
        [(0.2, 0.4), (0.3, 0.6)]]


def test_hand_computed_blocks_constant_rule():
    data = EvalData.from_traces(block_traces(HAND))
    m = evaluate(Rule("half", expression="0.5"), data, gamma=3, costs=ratio_costs(0.1))
    # tokens: A, B = 1 + .5 + .25 + .125; C = 1 + .5 + .25 (the sequence ends after two drafts)
    assert m.tokens_per_call == pytest.approx((1.875 * 2 + 1.75) / 3, abs=1e-15)
    assert m.speedup == pytest.approx(m.tokens_per_call / (3 * 0.1 + 1), abs=1e-15)
    # TV: A = 1*(.5-.25) = .25; B = .5*(.5-.1) + .25*(.5-.2) = .275; C = 0 (r = .5 at both depths)
    assert m.tv_per_token == pytest.approx((0.25 + 0.275) / (1.875 * 2 + 1.75), abs=1e-15)
    m2 = evaluate(Rule("half", expression="0.5"), data, gamma=2, costs=ratio_costs(0.0))
    assert m2.tokens_per_call == pytest.approx(1.75, abs=1e-15)  # depth 3 ignored
    assert m2.speedup == m2.tokens_per_call
    assert m2.tv_per_token == pytest.approx((0.25 + 0.5 * 0.4) / (3 * 1.75), abs=1e-15)


def test_hand_computed_blocks_standard_rule():
    data = EvalData.from_traces(block_traces(HAND))
    m = evaluate(get_rule("standard_rejection"), data, gamma=3)
    want = [1 + 0.25 + 0.25 + 0.125, 1 + 1 + 0.1 + 0.02, 1 + 0.5 + 0.25]
    assert m.tokens_per_call == pytest.approx(sum(want) / 3, abs=1e-15)
    assert m.tv_per_token == 0.0


def lossy_data(n_seq: int = 300, gamma: int = 6, seed: int = 0) -> Traces:
    """Random blocks of ``gamma`` rows (the last block of each sequence shorter)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(gamma, 4 * gamma, n_seq)
    n = int(lengths.sum())
    seq = np.repeat(np.arange(n_seq), lengths)
    pos = np.arange(n) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    q = rng.uniform(0.05, 1.0, n)
    p = np.clip(q * rng.uniform(0.2, 1.6, n), 0.0, 1.0)
    u = rng.random(n)
    df = pd.DataFrame(dict(seq_id=seq, position=pos, draft_prob=q, target_prob=p,
                           draft_entropy=rng.uniform(0, 5, n), target_entropy=rng.uniform(0, 5, n),
                           top_token_match=rng.random(n) < 0.7, rand_value=u,
                           baseline_accepts=u < np.minimum(1.0, p / q), draft_index=pos % gamma))
    return Traces.from_frame(df, source="lossy")


@pytest.mark.parametrize("name", ["standard_rejection", "conservative"])
def test_lossless_rules_have_zero_tv_per_token(name):
    data = EvalData.from_traces(lossy_data())
    m = evaluate(get_rule(name), data, gamma=6)
    assert m.tv_per_token == 0.0 and m.tokens_per_call > 1.0


def test_fused_values_match_the_reference_loop():
    traces = lossy_data(seed=1)
    data = EvalData.from_traces(Traces(dict(traces.columns), traces.source),)
    data.bounds = chunk_bounds(data.n, data.depth, chunk=300)  # several work items
    for name in ("standard_rejection", "always_accept", "top_token_match", "position_aware", "ratio_floor_0.3"):
        rule = get_rule(name)
        for gamma in (1, 3, 6):
            got = evaluate(rule, data, gamma=gamma, costs=ratio_costs(0.2))
            want = reference_metrics(thresholds(rule, data), traces, gamma=gamma, costs=ratio_costs(0.2))
            for key in BLOCK_FIELDS:
                assert getattr(got, key) == pytest.approx(getattr(want, key), rel=1e-12, abs=1e-15), (name, key)
            assert got.tv_per_token > 0 or rule.lossless or name == "position_aware"


def test_monte_carlo_decoding_reproduces_the_block_metrics():
    """Simulate accept/reject with fresh uniforms per block: tokens per call and TV within sampling error."""
    traces = lossy_data(n_seq=200, gamma=5, seed=2)
    data = EvalData.from_traces(Traces(dict(traces.columns), traces.source))
    rule = get_rule("ratio_floor_0.3")
    gamma = 4
    m = evaluate(rule, data, gamma=gamma)
    tau = np.clip(thresholds(rule, data), 0.0, 1.0)
    r = data.r
    depth = traces["draft_index"]
    starts = np.flatnonzero(depth == 0)
    ends = np.append(starts[1:], data.n)
    rng = np.random.default_rng(7)
    reps = 300
    tokens = np.zeros((reps, starts.size))
    damage = np.zeros((reps, starts.size))
    for b, (s, e) in enumerate(zip(starts, ends)):
        t = tau[s:min(e, s + gamma)]
        excess = np.maximum(0.0, t - r[s:min(e, s + gamma)])
        u = rng.random((reps, t.size))
        accepted = np.cumprod(u < t, axis=1)            # a rejection ends the block
        reached = np.hstack([np.ones((reps, 1)), accepted[:, :-1]])
        tokens[:, b] = 1 + accepted.sum(axis=1)          # accepted prefix + one token
        damage[:, b] = (reached * excess).sum(axis=1)
    per_call = tokens.mean(axis=1)                        # one estimate per repetition
    se = per_call.std(ddof=1) / math.sqrt(reps)
    assert abs(per_call.mean() - m.tokens_per_call) < 4 * se
    assert se < 0.01 * m.tokens_per_call                  # the check is sharp enough to matter
    tv = damage.sum(axis=1) / tokens.sum(axis=1)
    assert abs(tv.mean() - m.tv_per_token) < 4 * tv.std(ddof=1) / math.sqrt(reps) + 1e-3 * m.tv_per_token


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.7, 1.0])
@pytest.mark.parametrize("gamma", [1, 4, 6])
def test_closed_form_equals_fused_value_for_a_constant_rate(alpha, gamma):
    blocks = [[(0.5, 0.5)] * 6 for _ in range(7)]
    data = EvalData.from_traces(block_traces(blocks))
    m = evaluate(Rule("const", expression=repr(alpha)), data, gamma=gamma, costs=ratio_costs(0.05))
    assert m.tokens_per_call == pytest.approx(tokens_per_call_constant(alpha, gamma), rel=1e-14)
    assert m.tokens_per_call == pytest.approx(1 + sum(alpha ** k for k in range(1, gamma + 1)), rel=1e-14)
    assert m.speedup == pytest.approx(speedup_constant(alpha, gamma, ratio_costs(0.05)), rel=1e-14)


def test_seed001_formula_differs_from_tokens_per_call():
    assert seed001_theoretical_speedup(4, 1.0) == pytest.approx(4.0)
    assert seed001_theoretical_speedup(4, 0.0) == 0.0
    assert seed001_theoretical_speedup(4, 0.8) == pytest.approx(3.2 / 1.8)
    assert seed001_theoretical_speedup(8, 0.9) == pytest.approx(4.0)
    assert tokens_per_call_constant(0.0, 4) == 1.0          # every call still emits one token
    assert tokens_per_call_constant(1.0, 4) == 5.0          # gamma accepted + the bonus token
    assert speedup_constant(0.8, 4, ratio_costs(0.0)) == pytest.approx((1 - 0.8 ** 5) / 0.2)


def test_gamma_is_checked_and_block_metrics_need_draft_index(independent_traces):
    data = EvalData.from_traces(block_traces(HAND))
    with pytest.raises(InputError, match=r"gamma \(the draft length\) is larger than the block length 3 .*\(value 4\)"):
        evaluate(get_rule("standard_rejection"), data, gamma=4)
    with pytest.raises(InputError, match=r"gamma \(the draft length\)"):
        evaluate(get_rule("standard_rejection"), data, gamma=0)
    with pytest.raises(InputError, match="cost_ratio"):
        ratio_costs(-1.0)
    with pytest.raises(InputError, match=r"gamma \(the draft length\)"):
        PopulationEvaluator(data, gamma=9)
    plain = EvalData.from_traces(Traces(dict(independent_traces.columns), independent_traces.source))
    m = evaluate(get_rule("standard_rejection"), plain, gamma=4)
    assert m.tokens_per_call is None and m.speedup is None and m.tv_per_token is None
    assert not set(BLOCK_FIELDS) & set(m.to_dict())
    assert evaluate(get_rule("standard_rejection"), data).tokens_per_call is None  # not asked for


def test_function_rules_population_and_threads_agree(monkeypatch):
    traces = lossy_data(seed=3)
    data = EvalData.from_traces(Traces(dict(traces.columns), traces.source))
    data.bounds = chunk_bounds(data.n, data.depth, chunk=250)

    def halfway(draft_prob, target_prob, position, draft_entropy, target_entropy, top_token_match):
        return 0.5 * (1.0 + min(1.0, target_prob / draft_prob))

    fn = evaluate(Rule("fn", function=halfway), data, gamma=5, costs=ratio_costs(0.1))
    expr = "mul(0.5, add(1.0, min(1.0, div(target_prob, draft_prob))))"
    ex = evaluate(compile_expression(expr), data, gamma=5, costs=ratio_costs(0.1))
    for key in BLOCK_FIELDS:
        assert getattr(fn, key) == pytest.approx(getattr(ex, key), rel=1e-12)
    tau = thresholds(compile_expression(expr), data)
    assert evaluate_thresholds(tau, data, gamma=5, costs=ratio_costs(0.1)) == ex  # same kernels and chunks
    scorer = PopulationEvaluator(data, gamma=5, costs=ratio_costs(0.1))
    assert scorer.evaluate([expr, "0.9"])[0] == ex
    if numba.config.NUMBA_NUM_THREADS >= 2:
        before = numba.get_num_threads()
        try:
            numba.set_num_threads(1)
            one = evaluate(compile_expression(expr), data, gamma=5, costs=ratio_costs(0.1))
            numba.set_num_threads(2)
            monkeypatch.setattr(SCHEDULER, "small", 0.0)  # both threads even for this small split
            monkeypatch.setattr(SCHEDULER, "large", 0.0)
            two = evaluate(compile_expression(expr), data, gamma=5, costs=ratio_costs(0.1))
        finally:
            numba.set_num_threads(before)
        assert one == ex == two

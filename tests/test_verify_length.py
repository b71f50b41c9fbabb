"""Verification-length policies: exact tokens per second from records, competitors, cost files, and evolution."""
from __future__ import annotations

import json

import numpy as np
import pytest

from evolve.errors import InputError
from evolve.eval.costs import DEFAULT_COSTS, Costs, costs_from_dict, load_costs
from evolve.eval.evaluator import EvalData, evaluate
from evolve.kinds.verify_length.eval_competitors import competitors, length_oracle
from evolve.kinds.verify_length.eval_policy import (
    LengthPopulationEvaluator, decision_data, fixed_gamma_values, policy_metrics,
)
from evolve.gp.compiler import compile_expression
from evolve.search.algorithms import search
from evolve.search.config import resolve
from evolve.traces.io import load_split
from heuristics.registry import get_rule

#: A CPU where speculation does not pay (drafts cost 0.8 of a target step, verification grows with T).
CPU = Costs((0.06, 0.084, 0.09, 0.093, 0.099, 0.108, 0.114), 0.048, 0.06, source="cpu-like")
#: A drafter almost free and a short verification almost free: speculation pays.
CHEAP = Costs((0.06, 0.064, 0.1, 0.136, 0.16), 0.003, 0.06, source="cheap")


@pytest.fixture(scope="module")
def splits(vocab_dataset):
    return {s: EvalData.from_traces(load_split(vocab_dataset, s)) for s in ("train", "valid", "test")}


def reference(values, data: EvalData, gamma: int, costs: Costs):
    """Tokens per second by plain Python: per block, draft while v > 0, expected tokens by the standard rule."""
    depth, r = data.depth, data.r
    starts = list(np.flatnonzero(depth == 0)) + [data.n]
    tokens = seconds = 0.0
    for a, b in zip(starts[:-1], starts[1:]):
        g = min(b - a, gamma)
        L = 0
        while L < g and values[a + L] > 0:
            L += 1
        t, reach = 1.0, 1.0
        for k in range(L):
            reach *= r[a + k]
            t += reach
        tokens += t
        seconds += costs.forward_seconds(L + 1) + L * costs.draft_token_s
    return tokens / seconds


@pytest.mark.parametrize("costs", [DEFAULT_COSTS, CPU, CHEAP])
def test_policies_are_scored_exactly(splits, costs):
    data = splits["train"]
    dd = decision_data(data)
    expressions = ["sub(draft_prob, 0.4)", "sub(0.3, draft_entropy)", "sub(draft_cumprob, 0.25)",
                   "if_gt(draft_index, 2.5, -1.0, sub(draft_top_prob, 0.5))", "sub(2.5, draft_index)"]
    got = LengthPopulationEvaluator(data, gamma=5, costs=costs).evaluate(expressions)
    for expr, m in zip(expressions, got):
        from evolve.eval.evaluator import thresholds
        v = thresholds(compile_expression(expr), dd)
        assert m.tokens_per_second == pytest.approx(reference(v, data, 5, costs), rel=1e-12), expr
        assert m.speedup == pytest.approx(m.tokens_per_second * costs.plain_token_s, rel=1e-15)
        assert 0.0 <= m.mean_verified <= 5.0 and m.tv_per_token == 0.0


def test_decision_rows_hold_what_is_known_before_each_draft(splits):
    data = splits["valid"]
    dd = decision_data(data)
    depth, q = data.depth, data.feature("draft_prob")
    i = int(np.flatnonzero(depth == 0)[3])
    assert dd.feature("draft_prob")[i] == 1.0 and dd.feature("draft_cumprob")[i] == 1.0
    assert dd.feature("draft_entropy")[i] == 0.0 and dd.feature("draft_index")[i] == 0.0
    assert dd.feature("draft_prob")[i + 2] == q[i + 1]
    assert dd.feature("draft_cumprob")[i + 2] == pytest.approx(q[i] * q[i + 1], rel=1e-15)
    assert np.isnan(dd.feature("target_prob")).all()  # the target is not called yet


@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_a_fixed_length_is_the_evaluators_block_metrics(splits, gamma):
    """Fixed draft length G with the default cost model = the standard rule's tokens per call and speedup at G."""
    data = splits["test"]
    m = policy_metrics(fixed_gamma_values(data, gamma), data, 5)
    standard = evaluate(get_rule("standard_rejection"), data, gamma=gamma)
    assert m.tokens_per_call == pytest.approx(standard.tokens_per_call, rel=1e-12)
    assert m.speedup == pytest.approx(standard.speedup, rel=1e-12)
    assert m.mean_verified == pytest.approx(gamma)
    plain = policy_metrics(fixed_gamma_values(data, 0), data, 5, CPU)
    assert plain.tokens_per_call == 1.0 and plain.speedup == pytest.approx(1.0)


def test_competitors_are_tuned_on_valid(splits):
    found = competitors(splits["test"], 5, CPU, tuned_on=splits["valid"])
    assert list(found) == ["best_fixed_gamma", "confidence_threshold", "survival_prefix", "llama_cpp_p_min",
                           "sglang_adaptive", "dynamic_sd_goodput", "acceptance_band", "learned_logistic",
                           "learned_gbm", "length_oracle"]
    setting, m = found["best_fixed_gamma"]
    assert setting == "gamma=0" and m.speedup == pytest.approx(1.0)  # on this CPU plain decoding is fastest
    setting, m = competitors(splits["test"], 5, CHEAP, splits["valid"])["best_fixed_gamma"]
    assert setting != "gamma=0" and m.speedup > 1.0
    # the setting comes from the split it is tuned on: each split's own best fixed length, scored on test
    for tune in ("valid", "train"):
        best = max(range(6), key=lambda g: (policy_metrics(fixed_gamma_values(splits[tune], g), splits[tune], 5,
                                                           CHEAP).tokens_per_second, -g))
        got = competitors(splits["test"], 5, CHEAP, splits[tune])["best_fixed_gamma"]
        assert got[0] == f"gamma={best}"
        assert got[1] == policy_metrics(fixed_gamma_values(splits["test"], best), splits["test"], 5, CHEAP)
    # survival_prefix drafts the whole block, so on the CPU its drafting cost alone makes it slower than plain
    assert found["survival_prefix"][1].speedup < 1.0
    assert found["survival_prefix"][1].mean_drafted == pytest.approx(5.0, abs=0.5)


def test_one_block_by_hand():
    """Two blocks of 3 records: a policy drafting while draft_index < 2 verifies 2 tokens of each block."""
    q = np.array([0.5, 0.8, 0.9, 0.6, 0.3, 0.7])
    p = np.array([0.25, 0.8, 0.45, 0.6, 0.6, 0.07])
    r = np.minimum(1.0, p / q)  # 0.5, 1, 0.5 | 1, 1, 0.1
    depth = np.array([0, 1, 2, 0, 1, 2], dtype=float)
    X = np.stack([q, p, np.arange(6.0), np.zeros(6), np.zeros(6), np.zeros(6), depth])
    data = EvalData(X, r, np.full(6, 0.99), np.full(6, 0.99) < r,
                    ("draft_prob", "target_prob", "position", "draft_entropy", "target_entropy", "top_token_match",
                     "draft_index"))
    dd = decision_data(data)
    np.testing.assert_allclose(dd.feature("draft_prob"), [1.0, 0.5, 0.8, 1.0, 0.6, 0.3])
    np.testing.assert_allclose(dd.feature("draft_cumprob"), [1.0, 0.5, 0.4, 1.0, 0.6, 0.18])
    costs = Costs((1.0, 1.5, 2.0, 2.5), 0.25, 1.0)
    m = policy_metrics(fixed_gamma_values(data, 2), data, 3, costs)
    tokens = (1 + 0.5 + 0.5 * 1) + (1 + 1 + 1)  # 1 + r1 + r1 r2 per block
    seconds = 2 * (2.0 + 2 * 0.25)  # forward over 3 new tokens + 2 drafts, per block
    assert m.blocks == 2 and m.tokens_per_call == pytest.approx(tokens / 2)
    assert m.tokens_per_second == pytest.approx(tokens / seconds) and m.mean_verified == 2.0
    # the policy "draft on while the prefix's probability is at least 0.45" stops after 2 drafts in block 1
    # (cumprob 0.4 before the third) and after 2 in block 2 (cumprob 0.18)
    from evolve.eval.evaluator import thresholds
    v = thresholds(compile_expression("sub(draft_cumprob, 0.45)"), dd)
    assert policy_metrics(v, dd, 3, costs) == m


@pytest.mark.parametrize("costs, plain", [(CPU, True), (CHEAP, False)])
def test_evolution_learns_when_not_to_speculate(splits, costs, plain, tmp_path):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(costs.to_dict()))
    cfg = resolve({"evolve": "verify-length", "objective": "tokens_per_second", "costs": str(path),
                   "population": 60, "generations": 4, "seed": 3})
    res = search(cfg, splits["train"], splits["valid"], ("draft_prob", "position", "draft_entropy", "draft_index",
                                                         "draft_top_prob", "draft_cumprob"))
    data = splits["test"]
    m = LengthPopulationEvaluator(data, gamma=5, costs=costs).evaluate([res.champion.expression])[0]
    if plain:
        assert m.speedup >= 0.999, res.champion.expression
    else:
        assert m.speedup > 1.0
    # never below the best fixed length on valid (the warm start seeds every fixed length)
    on_valid = competitors(splits["valid"], 5, costs, tuned_on=splits["valid"])["best_fixed_gamma"][1]
    assert res.champion.valid.tokens_per_second >= on_valid.tokens_per_second * (1 - 1e-12)


def test_a_policy_may_not_read_the_target():
    from evolve.search.config import resolve_features
    with pytest.raises(InputError, match="not known before the target is called"):
        resolve_features(resolve({"evolve": "verify-length", "objective": "tokens_per_second",
                                  "features": "target_prob,draft_prob"}), ("target_prob",), "data")
    cfg = resolve({"evolve": "verify-length", "objective": "tokens_per_second"})
    with pytest.raises(InputError, match="does not score verify-length"):
        resolve({"evolve": "verify-length", "objective": "pareto"})
    assert "target_prob" not in resolve_features(cfg, ("draft_index", "target_top_prob"), "data")


def test_cost_files_are_checked(tmp_path):
    assert load_costs(None) is DEFAULT_COSTS
    good = costs_from_dict({"target_forward_s": [0.1, 0.15], "draft_token_s": 0.01, "engine": "torch"}, "x.json")
    assert good.plain_token_s == 0.1 and good.forward_seconds(4) == pytest.approx(0.25) and good.extra == {
        "engine": "torch"}
    for doc, needle in [([1], "JSON object"), ({"draft_token_s": 0.1}, "target_forward_s"),
                        ({"target_forward_s": [], "draft_token_s": 0.1}, "non-empty"),
                        ({"target_forward_s": [0.1, -1], "draft_token_s": 0.1}, "item 1 \\(T = 2\\)"),
                        ({"target_forward_s": [0.1], "draft_token_s": True}, "draft_token_s"),
                        ({"target_forward_s": [0.1], "draft_token_s": 0.1, "plain_token_s": 0}, "plain_token_s")]:
        with pytest.raises(InputError, match=needle):
            costs_from_dict(doc, "x.json")
    bad = tmp_path / "c.json"
    bad.write_text('{"target_forward_s": [NaN], "draft_token_s": 0.1}')
    with pytest.raises(InputError, match="c.json: not valid JSON"):
        load_costs(bad)
    with pytest.raises(InputError, match="no such cost file"):
        load_costs(tmp_path / "absent.json")


@pytest.mark.parametrize("costs", [CPU, CHEAP])
def test_the_length_oracle_is_the_best_choice_of_lengths(splits, costs):
    """On a few blocks, the oracle equals the best of every per-block choice of lengths (enumerated); on a split
    it is at least every competitor and every policy tried."""
    import itertools

    data = splits["valid"]
    starts = np.flatnonzero(data.depth == 0)
    few = EvalData(data.X[:, :starts[5]].copy(), data.r[:starts[5]], data.u[:starts[5]], data.b[:starts[5]],
                   data.available)
    gamma = 3
    blocks = [(a, min(b - a, gamma)) for a, b in zip(starts[:5], starts[1:6])]
    best = 0.0
    for lengths in itertools.product(*[range(g + 1) for _, g in blocks]):
        tokens = seconds = 0.0
        for (a, _), L in zip(blocks, lengths):
            tokens += 1.0 + np.cumprod(few.r[a:a + L]).sum()
            seconds += costs.verify_seconds(L) + L * costs.draft_token_s
        best = max(best, tokens / seconds)
    assert length_oracle(few, gamma, costs).tokens_per_second == pytest.approx(best, rel=1e-12)
    oracle = length_oracle(data, 5, costs).tokens_per_second
    found = competitors(data, 5, costs)
    assert found["length_oracle"][1].tokens_per_second == oracle
    assert all(m.tokens_per_second <= oracle * (1 + 1e-12) for _, m in found.values())
    dd = decision_data(data)
    for expr in ("sub(draft_prob, 0.4)", "sub(draft_cumprob, 0.25)", "sub(2.5, draft_index)"):
        from evolve.eval.evaluator import thresholds
        m = policy_metrics(thresholds(compile_expression(expr), dd), data, 5, costs)
        assert m.tokens_per_second < oracle


def test_position_weighting_by_hand():
    """The two blocks of test_one_block_by_hand: under position weighting each block stands for the positions its
    harvest call covered in expectation (1 + 0.5 + 0.5 + 0.25 = 2.25 and 1 + 1 + 1 + 0.1 = 3.1), and a policy's
    call there costs seconds / tokens per position."""
    from evolve.kinds.verify_length.eval_policy import block_cover
    q = np.array([0.5, 0.8, 0.9, 0.6, 0.3, 0.7])
    p = np.array([0.25, 0.8, 0.45, 0.6, 0.6, 0.07])
    r = np.minimum(1.0, p / q)
    depth = np.array([0, 1, 2, 0, 1, 2], dtype=float)
    X = np.stack([q, p, np.arange(6.0), np.zeros(6), np.zeros(6), np.zeros(6), depth])
    data = EvalData(X, r, np.full(6, 0.99), np.full(6, 0.99) < r,
                    ("draft_prob", "target_prob", "position", "draft_entropy", "target_entropy", "top_token_match",
                     "draft_index"))
    np.testing.assert_allclose(block_cover(data, "position"), [2.25, 0, 0, 3.1, 0, 0])
    assert not block_cover(data, "call").any()
    with pytest.raises(InputError, match="unknown block weighting"):
        block_cover(data, "tokens")
    costs = Costs((1.0, 1.5, 2.0, 2.5), 0.25, 1.0)
    m = policy_metrics(fixed_gamma_values(data, 1), data, 3, costs, weighting="position")
    t1, t2, s = 1.5, 2.0, 1.5 + 0.25  # one draft per call: tokens 1 + r_1, seconds forward over 2 + a draft
    want = (2.25 + 3.1) / (2.25 * s / t1 + 3.1 * s / t2)
    assert m.tokens_per_second == pytest.approx(want, rel=1e-14)
    assert m.tokens_per_call == pytest.approx((2.25 + 3.1) / (2.25 / t1 + 3.1 / t2), rel=1e-14)
    # the harvest's own length: both weightings give the same figures
    full = fixed_gamma_values(data, 3)
    a, b = policy_metrics(full, data, 3, costs), policy_metrics(full, data, 3, costs, weighting="position")
    assert a.tokens_per_second == pytest.approx(b.tokens_per_second, rel=1e-14)
    assert a.tokens_per_call == pytest.approx(b.tokens_per_call, rel=1e-14)


@pytest.mark.parametrize("costs", [CPU, CHEAP])
def test_position_weighting_everywhere(splits, costs):
    """Scorer, policy_metrics and competitors agree under position weighting; the oracle is each block's best
    ratio and bounds every competitor."""
    from evolve.eval.evaluator import thresholds
    from evolve.kinds.verify_length.eval_policy import block_cover
    data = splits["valid"]
    dd = decision_data(data)
    expr = "sub(draft_cumprob, 0.3)"
    v = thresholds(compile_expression(expr), dd)
    got = LengthPopulationEvaluator(data, gamma=5, costs=costs, weighting="position").evaluate([expr])[0]
    assert got == policy_metrics(v, data, 5, costs, weighting="position")
    assert got != policy_metrics(v, data, 5, costs)
    cover = block_cover(data, "position")
    starts = list(np.flatnonzero(data.depth == 0)) + [data.n]
    num = den = 0.0
    for a, b in zip(starts[:-1], starts[1:]):
        g = min(b - a, 5)
        ratios = [1.0 / costs.plain_token_s] + [(1.0 + np.cumprod(data.r[a:a + L]).sum())
                                                 / (costs.verify_seconds(L) + L * costs.draft_token_s)
                                                 for L in range(1, g + 1)]
        num += cover[a]
        den += cover[a] / max(ratios)
    num += data.no_draft_calls
    den += data.no_draft_calls * costs.plain_token_s
    found = competitors(data, 5, costs, weighting="position")
    oracle = found["length_oracle"][1].tokens_per_second
    assert oracle == pytest.approx(num / den, rel=1e-12)
    assert all(m.tokens_per_second <= oracle * (1 + 1e-12) for _, m in found.values())
    assert found["best_fixed_gamma"][1] == policy_metrics(
        fixed_gamma_values(data, int(found["best_fixed_gamma"][0].split("=")[1])), data, 5, costs,
        weighting="position")


def test_length_weighting_is_a_verify_length_setting():
    cfg = resolve({"evolve": "verify-length", "objective": "tokens_per_second", "length_weighting": "position"})
    assert cfg.settings.length_weighting == "position" and cfg.to_dict()["length_weighting"] == "position"
    with pytest.raises(InputError, match="length_weighting|length-weighting"):
        resolve({"length_weighting": "position"})
    with pytest.raises(InputError):
        resolve({"evolve": "verify-length", "objective": "tokens_per_second", "length_weighting": "tokens"})


def test_an_exported_policy_reads_the_lookup_columns(tmp_path):
    """A policy reading prompt lookup's columns exports to a module whose keep_drafting takes them by name."""
    from evolve.export.exporter import export_source
    from heuristics.champions import Champion, champion_json

    champ = Champion("lookup", "if_gt(lookup_freq, 0.7, sub(add(lookup_len, 0.5), draft_index), -1.0)",
                     kind="verify-length", features=("draft_index", "lookup_len", "lookup_freq"),
                     metrics={"train": {"tokens_per_second": 1.0}, "valid": {"tokens_per_second": 1.0}})
    path = tmp_path / "lookup.json"
    path.write_text(champion_json(champ))
    _, text = export_source(str(path), "numpy")
    module: dict = {}
    exec(compile(text, "<exported>", "exec"), module)
    assert set(module["COLUMNS"]) == {"draft_index", "lookup_len", "lookup_freq"}
    got = module["keep_drafting"](lookup_freq=np.array([0.9, 0.9, 0.5]), lookup_len=np.array([3.0, 1.0, 3.0]),
                                  draft_index=np.array([2.0, 2.0, 0.0]))
    assert list(got) == [1.0, 0.0, 0.0]
    assert "lookup_freq (the share of the earlier occurrences" in module["__doc__"]

"""The request so far: history features scored by walking each text, the engines' controllers, the learned stopping
rules, the exported History, and the headroom share."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from evolve.eval.costs import Costs
from evolve.eval.evaluator import EvalData, thresholds
from evolve.eval.headroom import dinkelbach, headroom, headroom_share
from evolve.gp.compiler import compile_expression
from evolve.gp.primitives import FEATURES, HISTORY_FEATURES, PRIMITIVE_SET_VERSION
from evolve.kinds.verify_length.eval_competitors import competitors, length_oracle
from evolve.kinds.verify_length.eval_controllers import (band_choices, goodput_length, p_min_choices,
                                                         sglang_choices, sglang_recompute)
from evolve.kinds.verify_length.eval_learned import fit_trees, model_features, tree_scores, training_rows
from evolve.kinds.verify_length.eval_policy import (LengthPopulationEvaluator, decision_data, fixed_gamma_values,
                                                    policy_metrics, prefix_tables)
from evolve.kinds.verify_length.eval_rows import Scoring
from evolve.kinds.verify_length.history import START, advance_history, outcome_of, start_history
from evolve.kinds.verify_length.settings import STANDARD_VERIFIER
from evolve.traces.io import load_split
from heuristics.champions import load_champion

#: Verification almost free, drafting cheap: speculation pays (gamma up to 5).
CHEAP = Costs((0.06, 0.064, 0.1, 0.136, 0.16, 0.18), 0.003, 0.06, source="cheap")
HISTORY_POLICIES = ("if_gt(prev_accepted, 1.5, sub(3.5, draft_index), sub(1.5, draft_index))",
                    "sub(mul(5.0, accept_ewma), add(draft_index, 0.5))",
                    "sub(add(0.5, min(since_reject, 3.0)), draft_index)",
                    "if_gt(prev_verified, 0.5, sub(first_hit_ewma, mul(0.2, draft_index)), 1.0)")


@pytest.fixture(scope="module")
def splits(vocab_dataset):
    return {s: EvalData.from_traces(load_split(vocab_dataset, s)) for s in ("train", "valid", "test")}


def walk_by_hand(expression: str, data: EvalData, gamma: int, costs: Costs):
    """(choices, tokens per second) of a history policy by plain Python: each text's blocks in order, the history
    written into the block's decision rows, the program run by the evaluator, the outcome u < min(1, p/q)."""
    dd = decision_data(data)
    program = compile_expression(expression)
    tok, _ = prefix_tables(data)
    starts = list(np.flatnonzero(data.depth == 0)) + [data.n]
    text_start = set(data.text_runs[0][:-1].tolist())
    choices, tokens, seconds, state = [], 0.0, 0.0, None
    for a, b in zip(starts[:-1], starts[1:]):
        if state is None or a in text_start:
            state = start_history()
        X = dd.X[:, a:b].copy()
        for f, value in zip(HISTORY_FEATURES, state):
            X[dd.feature_rows[FEATURES.index(f)]] = value
        block = EvalData(X, dd.r[a:b], dd.u[a:b], dd.b[a:b], dd.available)
        v = thresholds(program, block)
        g = min(b - a, gamma)
        L = 0
        while L < g and v[L] > 0:
            L += 1
        choices.append(L)
        tokens += tok[a + L - 1] if L else 1.0
        seconds += costs.verify_seconds(L) + L * costs.draft_token_s
        accepted = 0
        while accepted < L and data.u[a + accepted] < data.r[a + accepted]:
            accepted += 1
        advance_history(state, float(L), float(accepted), *outcome_of(L, accepted))
    return np.array(choices), tokens / seconds


@pytest.mark.parametrize("expression", HISTORY_POLICIES)
def test_the_walk_is_a_plain_python_walk_of_each_text(splits, expression):
    data = splits["train"]
    scorer = LengthPopulationEvaluator(data, gamma=5, costs=CHEAP)
    want_choices, want_tps = walk_by_hand(expression, data, 5, CHEAP)
    assert np.array_equal(scorer.choices(compile_expression(expression)), want_choices)
    m = scorer.evaluate([expression])[0]
    assert m.tokens_per_second == pytest.approx(want_tps, rel=1e-12)
    assert len(set(want_choices.tolist())) > 1  # the history changes the decisions


def test_history_restarts_with_every_text(splits):
    data = splits["valid"]
    ids = np.unique(data.text_runs[1])
    one, twice = data.resample_texts(np.array([0])), data.resample_texts(np.array([0, 0]))
    assert ids.size > 1
    for expression in HISTORY_POLICIES:
        a = LengthPopulationEvaluator(one, gamma=5, costs=CHEAP).choices(compile_expression(expression))
        b = LengthPopulationEvaluator(twice, gamma=5, costs=CHEAP).choices(compile_expression(expression))
        assert np.array_equal(b, np.r_[a, a])


def test_a_champion_of_primitive_set_1_loads_and_scores_as_its_expression(splits):
    rule = load_champion(Path(__file__).parent / "fixtures" / "format_v2" / "champion_verify_length.json")
    assert PRIMITIVE_SET_VERSION >= 2
    data = splits["test"]
    got = LengthPopulationEvaluator(data, gamma=5, costs=CHEAP).evaluate([rule.program])[0]
    want = policy_metrics(thresholds(rule.program, decision_data(data)), data, 5, CHEAP)
    assert got == want == policy_metrics(fixed_gamma_values(data, 5), data, 5, CHEAP)


def test_a_log_of_a_history_feature_is_never_a_stale_derived_row(splits):
    data = splits["train"]
    scorer = LengthPopulationEvaluator(data, gamma=5, costs=CHEAP)
    expression = "sub(add(log(accept_ewma), 1.0), mul(0.3, draft_index))"
    assert np.array_equal(scorer.choices(compile_expression(expression)), walk_by_hand(expression, data, 5, CHEAP)[0])


def test_the_exported_history_is_the_scorers(tmp_path):
    from evolve.export.numpy_module import numpy_source
    from evolve.gp.compiler import parse
    from evolve.kinds.verify_length.export_layout import LENGTH_LAYOUT
    from evolve.kinds.verify_length.history import advance_history_jit
    from evolve.kinds.verify_length.live import PolicyHistory, policy_features, policy_value
    from heuristics.contract import Rule

    expression = HISTORY_POLICIES[3]
    path = tmp_path / "policy.py"
    path.write_text(numpy_source("p", parse(expression), LENGTH_LAYOUT))
    spec = importlib.util.spec_from_file_location("policy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rule = Rule("p", "", "", expression=expression, kind="verify-length", lossless=True)
    exported, live, compiled = module.History(), PolicyHistory(rule), start_history()
    rng = np.random.default_rng(0)
    for _ in range(40):
        verified = int(rng.integers(0, 5))
        accepted = int(rng.integers(0, verified + 1))
        for k in range(3):
            cols = {"draft_prob": 0.7, "draft_top_prob": 0.8, "draft_entropy": 0.5, "draft_cumprob": 0.7 ** k,
                    "draft_index": float(k), "position": 10.0 + k, **exported.columns()}
            want = policy_value(rule, policy_features([0.7] * k, [0.8] * k, [0.5] * k, 10, None, live.state))
            assert float(module.keep_drafting(**{c: cols[c] for c in module.COLUMNS})) == float(want > 0)
        exported.update(verified, accepted)
        live.observe(verified, accepted)
        advance_history_jit(compiled, float(verified), float(accepted), *outcome_of(verified, accepted))
        assert exported.state == pytest.approx(live.state.tolist(), rel=1e-15) and np.allclose(compiled, live.state)
    assert "since_reject" in module.HISTORY_COLUMNS and tuple(module.HISTORY_START) == START


def test_sglang_adaptive_steps_follow_its_source():
    steps = np.array([1, 3, 5, 7], dtype=np.int64)
    assert sglang_recompute(steps, 3, 1.0, -0.25, 0.0) == (3, 1.0)  # neither below 0.25 nor above 2.5
    assert sglang_recompute(steps, 3, 0.2, -0.25, 0.0)[0] == 1      # at most 1 - 0.5 - 0.25
    assert sglang_recompute(steps, 5, 0.2, -0.25, 0.0)[0] == 1      # down as far as the average says
    assert sglang_recompute(steps, 3, 4.6, -0.25, 0.0)[0] == 7      # up past 2.5 and 4.5
    zero = np.array([0, 1, 3], dtype=np.int64)
    assert sglang_recompute(zero, 0, -1.0, 0.0, 0.0) == (1, 0.0)    # from zero steps: probe the next, neutral average
    assert sglang_recompute(zero, 1, 0.4, 0.0, 0.0)[0] == 0         # zero accepted drafts reach the zero step


def _blocks(lengths, accept):
    """depth, text start, tau and u of blocks of the given lengths whose records are accepted where ``accept``."""
    depth = np.concatenate([np.arange(n, dtype=np.float64) for n in lengths])
    tau = np.concatenate([np.where(np.asarray(a, dtype=bool), 1.0, 0.0) for a in accept])
    starts = np.zeros(depth.size, dtype=np.bool_)
    starts[0] = True
    return depth, starts, tau, np.full(depth.size, 0.5)


def test_sglang_waits_for_its_warmup_then_moves_every_interval():
    accept = [[1, 1, 1, 1, 1]] * 12
    depth, _, tau, u = _blocks([5] * 12, accept)
    out = np.zeros(12, dtype=np.int64)
    sglang_choices(depth, (tau, u, True, np.ones(depth.size)), 5,
                   (np.array([1, 3, 5], dtype=np.int64), 1, 2, 3, -0.25, 0.0), out)
    # the average of accepted drafts (alpha 0.2, from steps - 1 = 0) passes 0.5 by the 5th verification: up to 3;
    # at the 8th and 11th (1.81, 2.39) it is not above 2.5 yet
    assert out.tolist() == [1] * 5 + [3] * 7


def test_the_acceptance_band_moves_by_one_within_its_bounds():
    accept = [[0, 0, 0, 0]] * 5 + [[1, 1, 1, 1]] * 13
    depth, starts, tau, u = _blocks([4] * 18, accept)
    out = np.zeros(18, dtype=np.int64)
    band_choices(depth, starts, (tau, u, True, np.ones(depth.size)), 4, (0.5, 0.9, 2, 1), out)
    # the running rate (from 1, weight 0.2) falls below 0.5 at the 4th rejection, rises above 0.9 at the 14th call
    assert out.tolist() == [2] * 4 + [1] * 10 + [2, 3, 4, 4]
    assert all(abs(b - a) <= 1 for a, b in zip(out[:-1], out[1:]))


def test_p_min_verifies_the_confident_prefix_and_pays_one_more_draft():
    depth = np.array([0, 1, 2, 3, 0, 1, 2, 3], dtype=np.float64)
    top = np.array([0.9, 0.8, 0.3, 0.9, 0.2, 0.9, 0.9, 0.9])
    verified, drafted = np.zeros(2, np.int64), np.zeros(2, np.int64)
    p_min_choices(top, depth, 4, 0.5, verified, drafted)
    assert verified.tolist() == [2, 0] and drafted.tolist() == [3, 1]
    p_min_choices(top, depth, 4, 0.0, verified, drafted)
    assert verified.tolist() == [4, 4] and drafted.tolist() == [4, 4]


def test_goodput_pick_is_the_best_fixed_length_of_its_profile(splits):
    s = Scoring(splits["valid"], 5, CHEAP, STANDARD_VERIFIER, "call")
    k = goodput_length(s)
    found = competitors(splits["valid"], 5, CHEAP)
    assert found["dynamic_sd_goodput"][0] == f"K={k}"
    assert 0 <= k <= 5


def test_the_gradient_boosted_trees_are_scikit_learns(splits):
    s = Scoring(splits["train"], 5, CHEAP, STANDARD_VERIFIER, "call")
    features = model_features(s.decisions)
    assert set(HISTORY_FEATURES) <= set(features)
    model = fit_trees(s, features)
    X, surv = training_rows(s, features)
    assert 0.0 <= surv.min() and surv.max() <= 1.0
    rows = np.ascontiguousarray(X[::7])
    ours = np.empty(rows.shape[0])
    tree_scores(rows, model.roots, model.left, model.right, model.feature, model.threshold, model.value, model.base,
                model.scale, ours)
    assert np.ptp(ours) > 0
    assert np.allclose(ours, model.model.decision_function(rows), rtol=0, atol=1e-9)


def test_learned_rows_and_controllers_are_tuned_and_never_beat_the_bound(splits):
    per_block: dict = {}
    found = competitors(splits["test"], 5, CHEAP, tuned_on=splits["valid"], per_block=per_block,
                        train=splits["train"])
    bound = found["length_oracle"][1].tokens_per_second
    for name in ("llama_cpp_p_min", "sglang_adaptive", "dynamic_sd_goodput", "acceptance_band", "learned_logistic",
                 "learned_gbm"):
        assert found[name][1].tokens_per_second <= bound * (1 + 1e-12)
        blocks = per_block[name]
        assert blocks.shape == (int(np.count_nonzero(splits["test"].depth == 0)), 6)
        assert blocks[:, 1].sum() == pytest.approx(found[name][1].tokens_per_call * found[name][1].blocks, rel=1e-9)
    setting = found["learned_logistic"][0]
    expression = setting.split(": ", 1)[1]
    policy = LengthPopulationEvaluator(splits["test"], gamma=5, costs=CHEAP).evaluate([expression])[0]
    assert policy.tokens_per_second == pytest.approx(found["learned_logistic"][1].tokens_per_second, rel=1e-12)


def test_headroom_share_and_its_interval():
    assert headroom_share(1.2, 1.0, 1.4) == pytest.approx(0.5)
    assert math.isnan(headroom_share(1.2, 1.0, 1.0)) and headroom_share(0.9, 1.0, 1.4) < 0
    rng = np.random.default_rng(1)
    fixed = np.c_[rng.uniform(10, 20, 30), rng.uniform(5, 6, 30)]
    bound = fixed * [1.3, 1.0]
    champion = fixed * [1.15, 1.0]
    h = headroom(champion, fixed, bound, np.arange(30), replicates=100)
    # every text takes half the headroom: every replicate is 0.5 up to rounding, one value, no interval
    assert h.share == pytest.approx(0.5) and math.isnan(h.low) and math.isnan(h.high) and h.caveat is None
    varied = fixed * np.c_[1.0 + rng.uniform(0.05, 0.25, 30), np.ones(30)]
    h = headroom(varied, fixed, bound, np.arange(30), replicates=100)
    assert h.low < h.share < h.high and h.caveat is None
    assert headroom(champion, fixed, fixed, np.arange(30), replicates=100).text() == "n/a (no headroom)"


def test_dinkelbach_is_the_best_choice_of_options():
    import itertools

    rng = np.random.default_rng(2)
    tokens, seconds = rng.uniform(1, 3, (5, 3)), rng.uniform(0.5, 2, (5, 3))
    tokens[1, 2] = seconds[1, 2] = np.nan
    best = max(sum(tokens[b, c] for b, c in enumerate(cs)) / sum(seconds[b, c] for b, c in enumerate(cs))
               for cs in itertools.product(range(3), repeat=5) if not any(np.isnan(tokens[b, c])
                                                                          for b, c in enumerate(cs)))
    assert dinkelbach(tokens, seconds)[0] == pytest.approx(best, rel=1e-12)


def test_the_benchmark_prints_the_headroom(vocab_dataset, tmp_path):
    import json

    from click.testing import CliRunner

    from evolve.cli.benchmark import cli
    from heuristics.champions import Champion, save_champion

    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"target_forward_s": list(CHEAP.target_forward_s), "draft_token_s": 0.003,
                                 "plain_token_s": 0.06}))
    champ = Champion(name="hist", expression=HISTORY_POLICIES[0], description="test", kind="verify-length",
                     features=[], metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}})
    path = save_champion(champ, tmp_path)[0]
    result = CliRunner().invoke(cli, ["--data", str(vocab_dataset), "--split", "test", "--costs", str(costs),
                                      "--champion", str(path), "--repeats", "1", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    (rec,) = doc["headroom"]
    rows = {r["heuristic"]: r for r in doc["rows"]}
    h = rec["headroom"]
    assert h["bound"] == pytest.approx(rows["length_oracle"]["tokens_per_second"])
    assert h["fixed"] == pytest.approx(rows["best_fixed_gamma"]["tokens_per_second"])
    assert h["champion"] == pytest.approx(rows["hist"]["tokens_per_second"])
    assert {r["name"] for r in rec["rivals"]} >= {"learned_gbm", "sglang_adaptive", "acceptance_band"}
    text = CliRunner().invoke(cli, ["--data", str(vocab_dataset), "--split", "test", "--costs", str(costs),
                                    "--champion", str(path), "--repeats", "1"]).output
    assert "headroom, test: hist captures" in text and all(len(line) <= 100 for line in text.splitlines())
    oracle = length_oracle(EvalData.from_traces(load_split(vocab_dataset, "test")), 5, CHEAP)
    assert oracle.tokens_per_second == pytest.approx(h["bound"], rel=1e-12)


def test_export_writes_the_history_for_numpy_and_for_llama_cpp_python(tmp_path):
    """A policy reading the history exports to numpy with its History class, and as the llama-cpp-python draft model,
    which keeps one History per text and advances it by each call's outcome (tests/test_export_llama_cpp_python.py
    checks its drafts against live decoding's, inside the library's generate loop); a policy reading the drafter's
    probabilities is refused there in one line (exit 2, no file): they are constant for a lookup drafter."""
    from click.testing import CliRunner

    from evolve.cli.evolve import cli
    from heuristics.champions import Champion, save_champion

    for i, expression in enumerate(HISTORY_POLICIES):
        champ = Champion(name=f"hist{i}", expression=expression, description="test", kind="verify-length",
                         features=[], metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}})
        path = save_champion(champ, tmp_path)[0]
        for target, name in (("numpy", f"p{i}.py"), ("llama-cpp-python", f"d{i}.py")):
            ok = CliRunner().invoke(cli, ["export", str(path), "--to", target, "--output", str(tmp_path / name)])
            assert ok.exit_code == 0, ok.output
            assert "class History:" in (tmp_path / name).read_text()
    champ = Champion(name="probs", expression="sub(draft_top_prob, draft_index)", description="test",
                     kind="verify-length", features=[], metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}})
    path = save_champion(champ, tmp_path)[0]
    res = CliRunner().invoke(cli, ["export", str(path), "--to", "llama-cpp-python", "--output", str(tmp_path / "t.py")])
    assert res.exit_code == 2 and "Traceback" not in res.output and not (tmp_path / "t.py").exists()
    assert "draft_top_prob" in res.output and len(res.output.strip().splitlines()) == 1


def test_the_live_headroom_prices_the_live_calls_against_the_records_bound(splits):
    from evolve.kinds.verify_length.report_live import live_headroom
    from evolve.live.decoding import LiveCounts
    from heuristics.contract import Rule
    from heuristics.length_policies import fixed_gamma

    rules = [fixed_gamma(2), fixed_gamma(1), Rule("hist", "", "", expression=HISTORY_POLICIES[0], kind="verify-length",
                                                  lossless=True)]
    counts = []
    for drafted, tokens in (({2: 10}, 20), ({1: 10}, 16), ({3: 5, 1: 5}, 22)):
        c = LiveCounts()
        c.drafted, c.tokens, c.target_calls = dict(drafted), tokens, sum(drafted.values())
        counts.append(c)
    rows = [{"tokens_per_s": 2.0 * c.tokens / c.predicted_seconds(CHEAP)} for c in counts]  # measured: twice as fast
    (found,) = live_headroom(rules, rows, counts, 1, splits["test"], 5, CHEAP)
    priced = [c.tokens / c.predicted_seconds(CHEAP) for c in counts]
    bound = length_oracle(splits["test"], 5, CHEAP).tokens_per_second
    best = max((0, 1), key=lambda i: priced[i])  # the best fixed row, priced
    assert found["fixed"] == rules[best].name and found["bound_tokens_per_s"] == pytest.approx(bound)
    assert found["priced"] == pytest.approx(headroom_share(priced[2], priced[best], bound))
    assert found["measured"] == pytest.approx(found["priced"])  # the bound scaled by the same measured/priced ratio

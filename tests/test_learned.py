"""The learned per-token rule of `benchmark.py pareto` (evolve.commands.pareto.learned) and its training target."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

import benchmark
from evolve.traces.io import load_split
from evolve.eval.evaluator import EvalData, evaluate, evaluate_thresholds
from evolve.eval.outright_gain import outright_gain
from evolve.commands.pareto.learned import TARGETS, fit_learned, learned_curve
from heuristics.contract import STANDARD_RULE

BUDGETS = (0.0, 0.005, 0.01, 0.02, 0.05)


@pytest.fixture(scope="module")
def splits(vocab_dataset) -> dict[str, EvalData]:
    return {s: EvalData.from_traces(load_split(vocab_dataset, s)) for s in ("train", "valid", "test")}


def _block_tokens_and_damage(r: np.ndarray, tau: np.ndarray) -> tuple[float, float]:
    reach, tokens, damage = 1.0, 1.0, 0.0
    for rk, tk in zip(r, tau):
        damage += reach * max(0.0, tk - rk)
        reach *= tk
        tokens += reach
    return tokens, damage


def test_outright_gain_is_the_difference_of_the_block_formula():
    rng = np.random.default_rng(4)
    depth = np.array([3, 0, 1, 2, 3, 0, 1, 0, 1, 2, 3, 4])  # a stray row, blocks of 4, 2 and 5 rows
    r = rng.uniform(0.0, 1.0, depth.size)
    gamma = 4
    gain, damage, future = outright_gain(r, depth, gamma)
    assert math.isnan(gain[0]) and math.isnan(gain[11])  # before the first block; depth 4 >= gamma
    starts = [1, 5, 7]
    ends = [5, 7, 11]
    for s, e in zip(starts, ends):
        base_t, base_d = _block_tokens_and_damage(r[s:e], r[s:e])
        for k in range(e - s):
            tau = r[s:e].copy()
            tau[k] = 1.0
            t, d = _block_tokens_and_damage(r[s:e], tau)
            assert gain[s + k] == pytest.approx(t - base_t, rel=1e-12, abs=1e-15)
            assert damage[s + k] == pytest.approx(d - base_d, rel=1e-12, abs=1e-15)
            assert future[s + k] == pytest.approx(gain[s + k] / damage[s + k], rel=1e-12)
    with pytest.raises(ValueError):
        outright_gain(r, depth, 0)


@pytest.mark.parametrize("target", TARGETS)
def test_the_curve_is_deterministic_and_lossless_at_infinity(splits, target):
    train, valid, test = splits["train"], splits["valid"], splits["test"]
    a = learned_curve(train, valid, test, 5, BUDGETS, target)
    b = learned_curve(train, valid, test, 5, BUDGETS, target)
    assert [(p.label, p.tv_per_token, p.tokens_per_call) for p in a.rules] == \
        [(p.label, p.tv_per_token, p.tokens_per_call) for p in b.rules]
    last = a.rules[-1]
    std = evaluate(STANDARD_RULE, test, gamma=5)
    assert last.label == "t=inf" and last.lossless and last.tv_per_token == 0.0
    assert last.tokens_per_call == pytest.approx(std.tokens_per_call, rel=1e-12)
    assert a.best_at_budget["0"] >= std.tokens_per_call - 1e-12
    assert a.category == "learned" and a.extra["target"] == target and a.extra["training_rows"] > 0
    assert set(a.extra["valid_choice"]) == {"0", "0.005", "0.01", "0.02", "0.05"}
    assert [p.tv_per_token for p in a.rules[:-1]] == sorted((p.tv_per_token for p in a.rules[:-1]), reverse=True)


def test_a_fitted_rule_predicts_from_the_features_a_rule_sees(splits):
    train, test = splits["train"], splits["test"]
    rule = fit_learned(train, 5, max_iter=5)
    assert rule.features == tuple(f for f in train.available)
    assert "target_rank" in rule.features or "target_rank" not in train.available
    pred = rule.predict(test)
    assert pred.shape == (test.n,) and np.isfinite(pred).all()
    tau = rule.thresholds(pred, test.r, math.inf)
    np.testing.assert_array_equal(tau, test.r)
    t = float(np.median(pred))
    tau = rule.thresholds(pred, test.r, t)
    assert ((tau == 1.0) | (tau == test.r)).all() and (tau[pred > t] == 1.0).all()
    m = evaluate_thresholds(tau, test, gamma=5)
    assert m.tokens_per_call > evaluate(STANDARD_RULE, test, gamma=5).tokens_per_call


def test_the_command_shows_the_learned_curve_and_block_verification(vocab_dataset):
    run = CliRunner().invoke
    res = run(benchmark.cli, ["pareto", "--data", str(vocab_dataset), "--format", "json", "--no-plot", "--learned"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert "learned" in doc["references"] and "learned" not in doc["curves"]
    assert doc["versus_references"]["learned"]["0.01"]["learned"] == \
        doc["references"]["learned"]["best_at_budget"]["0.01"]
    if load_split(vocab_dataset, "test").has("block_residual_mass"):
        bv = doc["references"]["block_verification"]
        assert bv["category"] == "lossless" and bv["points"][0][0] == 0.0
        assert len(set(bv["best_at_budget"].values())) == 1  # lossless: the same value at every budget
        verdict = doc["versus_references"]["block_verification"]["budgets"]
        assert set(verdict) == {"0", "0.005", "0.01", "0.02", "0.05"}
        assert set(verdict["0.01"]["families"]) == {c for c, v in doc["curves"].items() if v["category"] == "family"}
    res = run(benchmark.cli, ["pareto", "--data", str(vocab_dataset), "--no-plot", "--no-learned"])
    assert res.exit_code == 0, res.output
    assert "learned" not in res.stdout.split("oracle bound")[0]

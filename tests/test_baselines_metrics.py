"""Baseline formulas against hand-computed values, and the seed metrics on a hand-built dataset."""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import pandas as pd
import pytest

from evolve.traces.io import Traces
from evolve.eval.evaluator import EvalData, AcceptanceQualityFitness, evaluate, reference_metrics, thresholds
from heuristics.baselines import ratio_floor
from heuristics.contract import Rule
from heuristics.registry import get_rule, rule_names


def make_traces(rows: list[dict]) -> Traces:
    """Records from (p, q, u, ...) dicts; other columns get neutral values."""
    n = len(rows)
    df = pd.DataFrame({
        "seq_id": np.zeros(n, dtype=np.int64),
        "position": [r.get("pos", i) for i, r in enumerate(rows)],
        "draft_prob": [r["q"] for r in rows],
        "target_prob": [r["p"] for r in rows],
        "draft_entropy": [r.get("hq", 1.0) for r in rows],
        "target_entropy": [r.get("hp", 1.0) for r in rows],
        "top_token_match": [r.get("match", False) for r in rows],
        "rand_value": [r.get("u", 0.5) for r in rows],
    })
    df["baseline_accepts"] = df["rand_value"] < np.minimum(1.0, df["target_prob"] / df["draft_prob"])
    return Traces.from_frame(df)


CASES = [  # (rule, row, expected threshold computed by hand)
    ("standard_rejection", dict(p=0.3, q=0.6), 0.5),
    ("standard_rejection", dict(p=0.8, q=0.4), 1.0),
    ("always_accept", dict(p=0.01, q=0.9), 1.0),
    ("conservative", dict(p=0.3, q=0.6), 0.0),
    ("conservative", dict(p=0.6, q=0.6), 1.0),
    ("conservative", dict(p=0.8, q=0.4), 1.0),
    ("top_token_match", dict(p=0.3, q=0.6, match=True), 0.95),
    ("top_token_match", dict(p=0.3, q=0.6, match=False), 0.5),
    ("entropy_aware", dict(p=0.3, q=0.6, hq=4.0, hp=6.0), 0.5 * (1 - 0.5 * 0.5)),
    ("entropy_aware", dict(p=0.3, q=0.6, hq=12.0, hp=18.0), 0.25),
    ("entropy_aware", dict(p=0.9, q=0.3, hq=0.0, hp=0.0), 1.0),
    ("position_aware", dict(p=0.3, q=0.6, pos=10), 0.55),
    ("position_aware", dict(p=0.3, q=0.6, pos=80), 0.75),
    ("position_aware", dict(p=0.9, q=0.6, pos=20), 1.0),
    ("ratio_floor_0.3", dict(p=0.06, q=0.6), 0.3),
    ("ratio_floor_0.3", dict(p=0.3, q=0.6), 0.5),
]


def test_registry_has_the_seed_baselines():
    assert rule_names()[:7] == ["standard_rejection", "always_accept", "conservative", "top_token_match",
                                "entropy_aware", "position_aware", "ratio_floor_0.3"]


@pytest.mark.parametrize("name,row,want", CASES)
def test_baseline_formula(name, row, want):
    data = EvalData.from_traces(make_traces([row]))
    assert thresholds(get_rule(name), data)[0] == pytest.approx(want, abs=1e-15)


@pytest.mark.parametrize("name", sorted({c[0] for c in CASES}))
def test_generated_python_source_agrees(tmp_path, name):
    rule = get_rule(name)
    path = tmp_path / f"{name.replace('.', '_')}.py"
    path.write_text(rule.python_source())
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for case_name, row, want in CASES:
        if case_name == name:
            got = module.acceptance_threshold(row["q"], row["p"], row.get("pos", 0), row.get("hq", 1.0),
                                              row.get("hp", 1.0), row.get("match", False))
            assert got == pytest.approx(want, abs=1e-15)


HAND = [dict(p=0.3, q=0.6, u=0.2), dict(p=0.3, q=0.6, u=0.7), dict(p=0.8, q=0.4, u=0.9), dict(p=0.1, q=0.5, u=0.4)]


def test_seed_metrics_by_hand():
    traces = make_traces(HAND)
    data = EvalData.from_traces(traces)
    m = evaluate(get_rule("always_accept"), data)
    assert (m.acceptance_rate, m.false_accepts, m.false_rejects, m.accuracy) == (1.0, 2, 0, 0.5)
    assert m.quality_score == 0.0 and m.fitness == 0.0
    assert m.expected_tv == pytest.approx((0.5 + 0.5 + 0.0 + 0.8) / 4)

    m = evaluate(get_rule("conservative"), data)
    assert (m.acceptance_rate, m.false_accepts, m.false_rejects, m.accuracy) == (0.25, 0, 1, 0.75)
    assert m.quality_score == pytest.approx(1 - 0.1 * 0.25)
    assert m.fitness == pytest.approx(0.25 * 0.975)
    assert m.expected_false_reject == pytest.approx((0.5 + 0.5 + 0.0 + 0.2) / 4)
    assert m.expected_fitness == pytest.approx(0.25 * (1 - 0.1 * 0.3))

    custom = AcceptanceQualityFitness(false_accept_weight=1.0, false_reject_weight=0.1, quality_floor=0.5, below_floor_scale=0.5)
    m = evaluate(ratio_floor(0.45), data, custom)
    assert (m.acceptance_rate, m.false_accepts, m.false_rejects) == (0.75, 1, 0)
    assert m.quality_score == pytest.approx(0.75) and m.fitness == pytest.approx(0.5625)
    assert m.expected_acceptance == pytest.approx(0.6125) and m.expected_tv == pytest.approx(0.0625)
    m = evaluate(ratio_floor(0.45), data)  # default weights: quality 1 - 2.5 -> 0, below the floor
    assert m.quality_score == 0.0 and m.fitness == 0.0
    assert m.expected_fitness == pytest.approx(0.5 * (1 - 10 * 0.0625))


def test_standard_rejection_is_exact_on_its_own_labels(independent_traces):
    m = evaluate(get_rule("standard_rejection"), EvalData.from_traces(independent_traces))
    assert m.accuracy == 1.0 and m.false_accepts == 0 and m.false_rejects == 0
    assert m.expected_tv == 0.0 and m.expected_false_reject == 0.0


def _nan_rule(draft_prob, target_prob, position, draft_entropy, target_entropy, top_token_match):
    if position % 3 == 0:
        return math.nan
    if position % 3 == 1:
        return math.inf
    return 2.0


def test_invalid_thresholds_count_as_reject(independent_traces):
    data = EvalData.from_traces(independent_traces)
    m = evaluate(Rule("nan_rule", function=_nan_rule), data)
    pos = independent_traces["position"]
    assert m.n_invalid == int((pos % 3 != 2).sum())
    assert m.acceptance_rate == pytest.approx(np.mean(pos % 3 == 2))
    assert m.expected_acceptance == pytest.approx(np.mean(pos % 3 == 2))


def _standard_fn(draft_prob, target_prob, position, draft_entropy, target_entropy, top_token_match):
    return min(1.0, target_prob / draft_prob)


def _top_fn(draft_prob, target_prob, position, draft_entropy, target_entropy, top_token_match, extra):
    return extra[0]


def test_function_rules_match_expression_rules(independent_traces):
    data = EvalData.from_traces(independent_traces)
    got = evaluate(Rule("fn", function=_standard_fn), data)
    want = evaluate(get_rule("standard_rejection"), data)
    for a, b in zip(got.to_dict().values(), want.to_dict().values()):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15)


def test_function_rule_extra_columns(independent_traces):
    frame = independent_traces.to_frame().assign(overlap=0.25)
    data = EvalData.from_traces(Traces.from_frame(frame))
    m = evaluate(Rule("extra", function=_top_fn, extra_columns=("overlap",)), data)
    assert m.expected_acceptance == pytest.approx(0.25)
    from evolve.errors import InputError
    with pytest.raises(InputError, match="needs column 'overlap'"):
        evaluate(Rule("extra", function=_top_fn, extra_columns=("overlap",)), EvalData.from_traces(independent_traces))


def test_interpreter_metrics_match_numpy_reference(independent_traces):
    data = EvalData.from_traces(independent_traces)
    for name in rule_names():
        rule = get_rule(name)
        if any(c not in data.available for c in rule.columns_needed):
            continue  # published rules reading optional columns the seed model lacks
        got = evaluate(rule, data).to_dict()
        want = reference_metrics(thresholds(rule, data), independent_traces).to_dict()
        for key in got:
            assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-15), (name, key)


def test_rule_needs_exactly_one_definition():
    with pytest.raises(ValueError):
        Rule("x")
    with pytest.raises(ValueError):
        Rule("x", expression="1.0", function=_standard_fn)

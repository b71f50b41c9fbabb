"""evolve.api: datasets as frames, rules scored like the evaluator, a small search, champions, the docstring example."""
from __future__ import annotations

import doctest
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from evolve.errors import InputError
from evolve.traces.io import load_split, write_dataset
from evolve.traces.synth import generate
from evolve import api
from evolve.eval.evaluator import EvalData, Metrics, evaluate
from evolve.search.config import resolve
from heuristics.contract import Rule

FLOOR = "max(div(target_prob, draft_prob), 0.3)"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A tiny vocab-model dataset (with speculation blocks): random seed 3, 12 train sequences."""
    path = tmp_path_factory.mktemp("api") / "data"
    generate.write(generate.generate_dataset("vocab", 3, 12), path)
    return path


@pytest.fixture(scope="module")
def run(data_dir, tmp_path_factory) -> api.SearchRun:
    out = tmp_path_factory.mktemp("api_runs")
    return api.run_search({"data": data_dir, "out": out, "population": 16, "generations": 2, "seed": 4})


def test_load_frames(data_dir, tmp_path):
    splits = api.load_frames(data_dir)
    assert list(splits) == ["train", "valid", "test"]
    pd.testing.assert_frame_equal(splits["valid"], load_split(data_dir, "valid").to_frame())
    assert "draft_index" in splits["test"].columns and splits["test"]["position"].dtype == "int64"
    assert list(api.load_frames(data_dir, ["test"])) == ["test"]
    write_dataset(tmp_path / "two", {"train": splits["train"], "valid": splits["valid"]}, {"generator": "test"})
    assert list(api.load_frames(tmp_path / "two")) == ["train", "valid"]
    with pytest.raises(InputError, match="no dataset directory"):
        api.load_frames(tmp_path / "absent")
    with pytest.raises(InputError, match="no test.parquet"):
        api.load_frames(tmp_path / "two", ["test"])


def test_evaluate_rule_matches_the_evaluator(data_dir):
    test = EvalData.from_traces(load_split(data_dir, "test"))
    standard = api.evaluate_rule("standard_rejection", data_dir, gamma=4)
    assert isinstance(standard, Metrics) and standard == evaluate(api._rule("standard_rejection"), test, gamma=4)
    assert standard.expected_tv == 0 and standard.tokens_per_call > 1
    floor = api.evaluate_rule(FLOOR, data_dir, gamma=4)
    assert floor == evaluate(Rule("floor", expression=FLOOR), test, gamma=4)
    assert floor.expected_acceptance > standard.expected_acceptance and floor.expected_tv > 0
    # the same split given as frames, Traces or EvalData
    frames = api.load_frames(data_dir)
    assert api.evaluate_rule(FLOOR, frames, gamma=4) == floor
    assert api.evaluate_rule(FLOOR, frames["test"], gamma=4) == floor
    assert api.evaluate_rule(FLOOR, test, gamma=4) == floor
    assert api.evaluate_rule(FLOOR, data_dir, split="valid") != api.evaluate_rule(FLOOR, data_dir)
    assert api.evaluate_rule(FLOOR, data_dir).tokens_per_call is None  # no gamma: no block metrics


@pytest.mark.parametrize("rule, data, fragment", [
    ("standard_rejecton", None, "unknown rule 'standard_rejecton'"),
    ("min(1.0, div(target_prob, draft_prb))", None, "unknown name 'draft_prb'"),
    ("__import__('os')", None, "expression"),
    (3.5, None, "rule=3.5 (float)"),
    ("standard_rejection", {"train": None}, "split 'test' is not among the given splits"),
    ("standard_rejection", 42, "data=42 (int)"),
])
def test_bad_rules_and_data_are_one_line_input_errors(data_dir, rule, data, fragment):
    with pytest.raises(InputError) as err:
        api.evaluate_rule(rule, data_dir if data is None else data)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_metrics_frame_has_one_row_per_rule(data_dir):
    rules = ["standard_rejection", FLOOR, Rule("mine", expression="min(1.0, div(target_prob, draft_prob))")]
    frame = api.metrics_frame(rules, data_dir, gamma=4)
    assert list(frame["rule"]) == ["standard_rejection", FLOOR, "mine"]
    assert list(frame.columns[:3]) == ["rule", "expression", "records"] and "tv_per_token" in frame.columns
    for row, rule in zip(frame.to_dict("records"), rules):
        assert row == {"rule": row["rule"], "expression": row["expression"],
                       **api.evaluate_rule(rule, data_dir, gamma=4).to_dict()}
    labelled = api.metrics_frame({"std": "standard_rejection", "floor": FLOOR}, data_dir, split="valid")
    assert list(labelled["rule"]) == ["std", "floor"] and "tv_per_token" not in labelled.columns
    assert list(api.metrics_frame([], data_dir).columns) == ["rule", "expression"]


def test_run_search_frames_and_champion(run, data_dir):
    assert run.run_dir.is_dir() and (run.run_dir / "champion.json").exists() and (run.run_dir / "fitness.png").exists()
    assert len(run.logbook_frame()) == 3  # generations 0..2
    hof = run.hall_of_fame_frame()
    assert list(hof.columns[:5]) == ["expression", "size", "depth", "sympy", "latex"]
    assert {"train_fitness", "valid_fitness", "train_expected_tv", "valid_expected_tv"} <= set(hof.columns)
    assert len(hof) == len(run.result.hall_of_fame) and run.champion.expression in set(hof["expression"])
    small = hof[hof["size"] <= api.SYMPY_MAX_NODES]
    assert small["sympy"].map(type).eq(str).all() and small["latex"].map(type).eq(str).all()
    with pytest.raises(InputError, match="keeps no front"):
        run.front_frame()
    champion = api.load_champion(run.run_dir)
    assert champion.expression == run.champion.expression == run.champion_rule().expression
    assert api.evaluate_rule(champion, data_dir, split="valid") == run.champion.valid
    assert api.evaluate_rule(champion, data_dir, split="train") == run.champion.train


def test_run_search_takes_a_run_config_and_is_deterministic(run, data_dir, tmp_path):
    cfg = resolve({"data": str(data_dir), "out": str(tmp_path), "population": 16, "generations": 2, "seed": 4})
    again = api.run_search(cfg)
    assert again.run_dir != run.run_dir
    pd.testing.assert_frame_equal(again.hall_of_fame_frame(), run.hall_of_fame_frame())


def test_pareto_run_has_a_front_frame(data_dir, tmp_path):
    res = api.run_search({"data": data_dir, "out": tmp_path, "population": 16, "generations": 2, "seed": 1,
                          "objective": "pareto", "gamma": 4})
    front = res.front_frame()
    assert len(front) == len(res.result.front) > 0
    assert {"train_tokens_per_call", "valid_tv_per_token"} <= set(front.columns)
    assert front["train_tv_per_token"].is_monotonic_increasing
    assert res.champion.expression in set(front["expression"])


def test_bad_configs(data_dir, tmp_path):
    with pytest.raises(InputError, match="population"):
        api.run_search({"data": data_dir, "out": tmp_path, "population": 1})
    with pytest.raises(InputError, match="unknown setting 'populaton' \\(did you mean 'population'\\?\\)"):
        api.run_search({"data": data_dir, "out": tmp_path, "populaton": 10})
    with pytest.raises(InputError, match="no dataset directory"):
        api.run_search({"data": tmp_path / "absent", "out": tmp_path, "population": 4, "generations": 0})
    with pytest.raises(InputError, match="config=.*\\(list\\): must be a RunConfig"):
        api.run_search([("population", 4)])


@pytest.mark.parametrize("call, fragment", [
    (lambda d: api.load_frames(123), "path=123 (int)"),
    (lambda d: api.load_frames(None), "path=None (NoneType)"),
    (lambda d: api.load_frames(d, splits=["tr"]), "splits='tr' (str): unknown split"),
    (lambda d: api.load_frames(d, splits=5), "splits=5 (int)"),
    (lambda d: api.load_champion(None), "path=None (NoneType)"),
    (lambda d: api.load_champion(7), "path=7 (int)"),
    (lambda d: api.read_champion(b"x"), "path=b'x' (bytes)"),
    (lambda d: api.evaluate_rule("standard_rejection", d, fitness="x"), "fitness='x' (str)"),
    (lambda d: api.evaluate_rule("standard_rejection", d, gamma="4"), "gamma='4' (str)"),
    (lambda d: api.evaluate_rule("standard_rejection", d, gamma=True), "gamma=True (bool)"),
    (lambda d: api.evaluate_rule("standard_rejection", d, gamma=0), "gamma=0 (int)"),
    (lambda d: api.evaluate_rule("standard_rejection", d, split=1), "split=1 (int)"),
    (lambda d: api.evaluate_rule("standard_rejection", d, split="tests"), "split='tests' (str): unknown split"),
    (lambda d: api.evaluate_rule("standard_rejection", d, cost_ratio=float("nan")), "cost_ratio=nan (float)"),
    (lambda d: api.evaluate_rule("standard_rejection", d, cost_ratio="0.1"), "cost_ratio='0.1' (str)"),
    (lambda d: api.evaluate_rule("standard_rejection", d, cost_ratio=10**400), "cost_ratio=1000"),
    (lambda d: api.evaluate_rule("standard_rejection", None), "data=None (NoneType)"),
    (lambda d: api.evaluate_rule(None, d), "rule=None (NoneType)"),
    (lambda d: api.evaluate_rule("", d), "rule='' (str)"),
    (lambda d: api.evaluate_rule("fixed_gamma:gamma=inf", d, gamma=4), "not a finite number"),
    (lambda d: api.evaluate_rule("nofamily:x=1", d), "unknown family 'nofamily'"),
    (lambda d: api.metrics_frame(None, d), "rules=None (NoneType)"),
    (lambda d: api.metrics_frame(["standard_rejection"], None), "data=None (NoneType)"),
    (lambda d: api.metrics_frame(["standard_rejection"], d, fitness=1), "fitness=1 (int)"),
    (lambda d: api.run_search(None), "config=None (NoneType)"),
    (lambda d: api.run_search({1: 2}), "keys must be RunConfig field names"),
])
def test_every_public_function_checks_its_argument_types(data_dir, call, fragment):
    with pytest.raises(InputError) as err:
        call(data_dir)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_run_search_checks_progress_before_it_writes_anything(data_dir, tmp_path):
    out = tmp_path / "runs"
    with pytest.raises(InputError, match="progress='yes' \\(str\\): must be None or a callable"):
        api.run_search({"data": data_dir, "out": out, "population": 4, "generations": 1}, progress="yes")
    assert not out.exists()


def test_a_split_name_as_a_str_is_one_split(data_dir):
    frames = api.load_frames(data_dir, splits="valid")
    assert list(frames) == ["valid"]
    assert frames["valid"].equals(api.load_frames(data_dir, splits=["valid"])["valid"])
    assert list(api.metrics_frame("standard_rejection", data_dir)["rule"]) == ["standard_rejection"]


def test_names_the_command_lines_accept_are_names_in_the_api(data_dir):
    from heuristics.registry import get_rule

    # a family member is resolved as a rule name, not parsed as an expression
    policy = api.evaluate_rule("fixed_gamma:gamma=2", data_dir, gamma=4)
    assert policy == api.evaluate_rule(get_rule("fixed_gamma:gamma=2"), data_dir, gamma=4)
    assert policy.mean_drafted == 2.0
    member = api.evaluate_rule("fuzzy_sd:T=0.1", data_dir)
    assert member == api.evaluate_rule(get_rule("fuzzy_sd:T=0.1"), data_dir)


def test_large_expressions_are_not_handed_to_sympy():
    from evolve.gp.compiler import parse
    big = "add(target_prob, " * api.SYMPY_MAX_NODES + "draft_prob" + ")" * api.SYMPY_MAX_NODES
    assert api._render(parse(big)) == (None, None)
    text, latex = api._render(parse("min(1.0, div(target_prob, draft_prob))"))
    assert "target_prob" in text and "frac" in latex


def test_the_docstring_example_runs(tmp_path, monkeypatch):
    # the example's temporary directory is made below tmp_path, and the example removes it itself
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = doctest.testmod(api, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 10 and result.failed == 0
    assert list(tmp_path.iterdir()) == []


def test_docs_show_the_tested_example():
    """docs/reference/api.md carries the docstring example verbatim (so the tested example is the documented one)."""
    lines = api.__doc__.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(">>>"))
    tested = [line[4:] for line in lines[start:] if line.strip()]
    text = (Path(__file__).resolve().parent.parent / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    block = text.split("```python\n>>>", 1)[1].split("```", 1)[0]
    assert (">>>" + block).strip().splitlines() == tested

"""Champion files: round trip, generated Python, and refusal of malformed or hostile files."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from evolve.errors import InputError
from evolve.eval.evaluator import EvalData, evaluate, thresholds
from evolve.gp.primitives import PRIMITIVE_SET_VERSION
from heuristics.champions import (
    ENV_DIR, Champion, champion_json, champions_dir, list_champions, load_champion, promote, read_champion,
    save_champion,
)

EXPR = "if_gt(top_token_match, 0.5, max(div(target_prob, draft_prob), 0.25), mul(0.9, div(target_prob, draft_prob)))"


@pytest.fixture(scope="module")
def data(independent_traces) -> EvalData:
    return EvalData.from_traces(independent_traces)


def make_champion(data: EvalData, name: str = "my_rule", expression: str = EXPR) -> Champion:
    ch = Champion(name=name, expression=expression, description="test champion",
                  features=("draft_prob", "target_prob", "position", "draft_entropy", "target_entropy",
                            "top_token_match"),
                  objective="acceptance_quality", provenance={"seed": 1, "run_dir": "nowhere"})
    m = evaluate(ch.rule(), data).to_dict()
    ch.metrics = {"train": m, "valid": m}
    return ch


def good_doc(data) -> dict:
    return json.loads(champion_json(make_champion(data)))


def write(tmp_path: Path, doc, name: str = "bad.json") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def test_round_trip_same_metrics(tmp_path, data):
    ch = make_champion(data)
    json_path, py_path = save_champion(ch, tmp_path)
    assert json_path == tmp_path / "my_rule.json" and py_path == tmp_path / "my_rule.py"
    rule = load_champion(json_path)
    assert rule.name == "my_rule"
    assert str(json_path) in rule.source
    again = evaluate(rule, data).to_dict()
    assert again == ch.metrics["train"]
    back = read_champion(json_path)
    assert back.metrics == ch.metrics and back.features == ch.features and back.provenance == ch.provenance
    assert back.primitive_set_version == PRIMITIVE_SET_VERSION


def test_generated_python_matches_the_interpreter(tmp_path, data, independent_traces):
    ch = make_champion(data)
    _, py_path = save_champion(ch, tmp_path)
    spec = importlib.util.spec_from_file_location("generated_champion", py_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # our own generated file, not a champion JSON
    tau = thresholds(ch.rule(), data)
    t = independent_traces
    for i in range(0, t.n, max(1, t.n // 200)):
        got = module.acceptance_threshold(t["draft_prob"][i], t["target_prob"][i], int(t["position"][i]),
                                          t["draft_entropy"][i], t["target_entropy"][i],
                                          bool(t["top_token_match"][i]))
        assert got == tau[i]


def test_python_file_is_built_from_validated_parts_only(tmp_path, data):
    ch = make_champion(data)
    ch.description = 'x"""; import os; os.system("echo pwned") #'
    _, py_path = save_champion(ch, tmp_path)
    source = py_path.read_text()
    assert "pwned" not in source and "import os" not in source
    compile(source, str(py_path), "exec")


def test_list_champions_sorted_and_missing_dir(tmp_path, data):
    save_champion(make_champion(data, "zeta"), tmp_path)
    save_champion(make_champion(data, "alpha", "div(target_prob, draft_prob)"), tmp_path)
    rules = list_champions(tmp_path)
    assert [r.name for r in rules] == ["alpha", "zeta"]
    assert list_champions(tmp_path / "absent") == []


def test_list_champions_reports_the_bad_file(tmp_path, data):
    save_champion(make_champion(data, "good"), tmp_path)
    bad = write(tmp_path, "{not json", "broken.json")
    with pytest.raises(InputError, match="broken.json"):
        list_champions(tmp_path)
    bad.unlink()
    doc = good_doc(data)  # a second file claiming the name "my_rule"
    save_champion(make_champion(data, "my_rule"), tmp_path)
    write(tmp_path, doc, "other.json")
    with pytest.raises(InputError, match="also used by"):
        list_champions(tmp_path)


def test_champions_dir_env_override(tmp_path, monkeypatch, data):
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "mine"))
    assert champions_dir() == tmp_path / "mine"
    save_champion(make_champion(data))
    assert (tmp_path / "mine" / "my_rule.json").exists()
    assert [r.name for r in list_champions()] == ["my_rule"]
    monkeypatch.delenv(ENV_DIR)
    assert champions_dir().name == "champions" and champions_dir().parent.name == "heuristics"


def test_save_refuses_existing_and_bad_names(tmp_path, data):
    save_champion(make_champion(data), tmp_path)
    with pytest.raises(InputError, match="exists already"):
        save_champion(make_champion(data), tmp_path)
    save_champion(make_champion(data, expression="div(target_prob, draft_prob)"), tmp_path, overwrite=True)
    assert read_champion(tmp_path / "my_rule.json").expression == "div(target_prob, draft_prob)"
    for name in ("../evil", "1abc", "a b", "", "x" * 65, "standard_rejection"):
        with pytest.raises(InputError):
            save_champion(make_champion(data, name=name), tmp_path / "n")
    assert not (tmp_path / "n").exists()


def test_promote_from_run_dir(tmp_path, data):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ch = make_champion(data, "champion")
    (run_dir / "champion.json").write_text(champion_json(ch))
    json_path, py_path = promote(run_dir, "promoted_rule", tmp_path / "champs")
    back = read_champion(json_path)
    assert back.name == "promoted_rule" and back.expression == ch.expression
    assert back.provenance["promoted_from"] == str(run_dir / "champion.json")
    assert py_path.exists()
    with pytest.raises(InputError, match="not a run directory"):
        promote(tmp_path / "champs", "x", tmp_path / "other")


def _mutate(key, value):
    def f(doc):
        doc[key] = value
        return doc
    return f


def _drop(key):
    def f(doc):
        del doc[key]
        return doc
    return f


HOSTILE = {
    "import": _mutate("expression", "__import__('os').system('touch /tmp/pwned_by_champion')"),
    "lambda": _mutate("expression", "lambda: 1"),
    "attribute": _mutate("expression", "target_prob.__class__"),
    "call_unknown": _mutate("expression", "open(target_prob)"),
    "unknown_feature": _mutate("expression", "div(target_prob, logits)"),
    "undeclared_feature": lambda d: {**d, "features": ["draft_prob"], "expression": "target_prob"},
    "string_literal": _mutate("expression", "add('a', 1.0)"),
    "semicolon": _mutate("expression", "add(1.0, 2.0); import os"),
    "wrong_arity": _mutate("expression", "div(target_prob)"),
    "trailing": _mutate("expression", "div(target_prob, draft_prob) draft_prob"),
    "huge_nesting": _mutate("expression", "exp(" * 30000 + "1.0" + ")" * 30000),
    "empty_expression": _mutate("expression", ""),
    "expression_type": _mutate("expression", 5),
    "missing_expression": _drop("expression"),
    "missing_metrics": _drop("metrics"),
    "missing_version": _drop("primitive_set_version"),
    "version_mismatch": _mutate("primitive_set_version", PRIMITIVE_SET_VERSION + 1),
    "version_string": _mutate("primitive_set_version", str(PRIMITIVE_SET_VERSION)),
    "version_bool": _mutate("primitive_set_version", True),
    "metrics_list": _mutate("metrics", []),
    "metric_null_fitness": lambda d: {**d, "metrics": {**d["metrics"], "valid": {"fitness": None}}},
    "metric_string": lambda d: {**d, "metrics": {**d["metrics"], "train": {"fitness": "high"}}},
    "metrics_no_valid": lambda d: {**d, "metrics": {"train": d["metrics"]["train"]}},
    "unknown_key": _mutate("code", "print(1)"),
    "bad_format": _mutate("format", "pickle"),
    "bad_name": _mutate("name", "../../etc/passwd"),
    "bad_objective": _mutate("objective", "no such name"),
    "bad_kind": _mutate("kind", "tree"),
    "features_not_list": _mutate("features", "draft_prob"),
    "unknown_feature_declared": _mutate("features", ["draft_prob", "os"]),
    "multiline_description": _mutate("description", "a\nb"),
    "provenance_type": _mutate("provenance", "x"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_or_malformed_champion_is_refused(tmp_path, data, case):
    path = write(tmp_path, HOSTILE[case](good_doc(data)))
    with pytest.raises(InputError) as err:
        load_champion(path)
    msg = str(err.value)
    assert str(path) in msg and "\n" not in msg
    assert not Path("/tmp/pwned_by_champion").exists()


@pytest.mark.parametrize("text", [
    "{not json", "[1, 2, 3]", "null", '"a string"', "[" * 100_000 + "]" * 100_000,
    '{"expression": NaN}', b"\xff\xfe\x00garbage",
])
def test_bad_json_is_refused(tmp_path, text):
    path = tmp_path / "bad.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(InputError) as err:
        load_champion(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_missing_and_oversized_files(tmp_path, data):
    with pytest.raises(InputError, match="no such champion file"):
        load_champion(tmp_path / "absent.json")
    doc = good_doc(data)
    doc["provenance"] = {"padding": "x" * 1_100_000}
    path = write(tmp_path, doc)
    with pytest.raises(InputError, match="larger than"):
        load_champion(path)


def test_loaded_expression_is_canonical(tmp_path, data):
    doc = good_doc(data)
    doc["expression"] = "  div( target_prob ,draft_prob )  "
    rule = load_champion(write(tmp_path, doc))
    assert rule.expression == "div(target_prob, draft_prob)"
    tau = thresholds(rule, data)
    assert np.array_equal(tau, data.feature("target_prob") / data.feature("draft_prob"))

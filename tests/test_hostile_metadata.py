"""Hostile ``metadata.json`` statistics: a split's ``target_calls`` (read by the verification-length scoring as
the calls that drafted nothing) and the other statistics checked for type, range and consistency with the
records; each refusal one line naming ``metadata.json``, the key path and the value, by the loaders and by
the commands (exit 2, no traceback, no file touched).
"""
from __future__ import annotations

import json

import pytest

from evolve.errors import InputError
from evolve.traces.io import load_split
from hostile_helpers import check


def _edit(ws, change) -> None:
    path = ws.data / "metadata.json"
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def _set(split, key, value):
    def change(meta):
        meta.setdefault("statistics", {}).setdefault(split, {})[key] = value
    return change


def _whole(value):
    def change(meta):
        meta["statistics"] = value
    return change


# (case, edit of metadata.json, split loaded, texts the one-line message holds)
CASES = [
    ("target-calls-string", _set("test", "target_calls", "12"), ("statistics.test.target_calls", "'12'")),
    ("target-calls-null", _set("test", "target_calls", None), ("statistics.test.target_calls", "None")),
    ("target-calls-nan", _set("test", "target_calls", float("nan")), ("statistics.test.target_calls", "nan")),
    ("target-calls-inf", _set("test", "target_calls", float("inf")), ("statistics.test.target_calls", "inf")),
    ("target-calls-true", _set("test", "target_calls", True), ("statistics.test.target_calls", "True")),
    ("target-calls-negative", _set("test", "target_calls", -5), ("statistics.test.target_calls", "-5")),
    ("target-calls-fraction", _set("test", "target_calls", 12.7), ("statistics.test.target_calls", "12.7")),
    ("target-calls-list", _set("test", "target_calls", [3]), ("statistics.test.target_calls", "[3]")),
    ("train-target-calls-negative", _set("train", "target_calls", -1), ("statistics.train.target_calls", "-1")),
    ("tokens-negative", _set("test", "tokens", -3), ("statistics.test.tokens", "-3")),
    ("sequences-string", _set("valid", "sequences", "many"), ("statistics.valid.sequences", "'many'")),
    ("generated-tokens-float", _set("test", "generated_tokens", 3.5), ("statistics.test.generated_tokens", "3.5")),
    ("acceptance-above-one", _set("test", "standard_acceptance", 1.5), ("statistics.test.standard_acceptance", "1.5")),
    ("acceptance-nan", _set("test", "expected_standard_acceptance", float("nan")),
     ("statistics.test.expected_standard_acceptance", "nan")),
    ("entropy-negative", _set("test", "mean_target_entropy", -0.2), ("statistics.test.mean_target_entropy", "-0.2")),
    ("tokens-per-call-string", _set("test", "tokens_per_target_call", "2"),
     ("statistics.test.tokens_per_target_call",)),
    ("depth-acceptance-not-rates", _set("test", "acceptance_by_depth", [0.5, 7]),
     ("statistics.test.acceptance_by_depth",)),
    ("depth-acceptance-string", _set("test", "acceptance_by_depth", "0.5"), ("statistics.test.acceptance_by_depth",)),
    ("statistics-list", _whole([1, 2]), ("'statistics'", "an array")),
    ("statistics-string", _whole("none"), ("'statistics'", "a string")),
    ("statistics-number", _whole(3), ("'statistics'", "an integer")),
    ("split-statistics-list", _whole({"test": [1]}), ("statistics.test", "an array")),
    ("split-statistics-string", _whole({"train": "x"}), ("statistics.train", "a string")),
]


@pytest.mark.parametrize("change,culprits", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_statistics_are_refused_by_the_loader(ws, change, culprits):
    _edit(ws, change)
    with pytest.raises(InputError) as err:
        load_split(ws.data, "test")
    message = str(err.value)
    assert "\n" not in message and "metadata.json" in message
    for culprit in culprits:
        assert culprit in message, (culprit, message)


@pytest.mark.parametrize("change,culprits", [c[1:] for c in CASES[:8] + CASES[18:20]],
                         ids=[c[0] for c in CASES[:8] + CASES[18:20]])
def test_bad_statistics_are_refused_by_benchmark(ws, change, culprits):
    _edit(ws, change)
    check(ws, "benchmark", ["--data", ws.data, "--repeats", 1], 2, ("metadata.json", *culprits))


@pytest.mark.parametrize("calls", [0, 1], ids=["zero", "one"])
def test_target_calls_fewer_than_the_blocks_are_refused(vocab_ws, calls):
    """A target call verifies at most one speculation block: fewer calls than blocks contradict the records."""
    _edit(vocab_ws, _set("test", "target_calls", calls))
    with pytest.raises(InputError, match=r"metadata\.json: key 'statistics\.test\.target_calls' is \d+, fewer than"):
        load_split(vocab_ws.data, "test")


@pytest.mark.parametrize("key,delta", [("tokens", 1), ("tokens", -1), ("sequences", 2)])
def test_counts_that_contradict_the_records_are_refused(vocab_ws, key, delta):
    """A split's ``tokens`` and ``sequences`` statistics must be what its records hold (a hand-edited or stale
    metadata.json is refused by the loader and by the commands, naming the key, the value and the records)."""
    ws = vocab_ws
    stats = json.loads((ws.data / "metadata.json").read_text())["statistics"]["test"]
    _edit(ws, _set("test", key, stats[key] + delta))
    with pytest.raises(InputError, match=rf"metadata\.json: key 'statistics\.test\.{key}' is {stats[key] + delta}, "
                                         rf"but .*test\.parquet holds {stats[key]} "):
        load_split(ws.data, "test")
    check(ws, "benchmark", ["--data", ws.data, "--repeats", 1], 2, ("metadata.json", f"statistics.test.{key}"))


def test_target_calls_at_least_the_blocks_load(vocab_ws):
    blocks = int((load_split(vocab_ws.data, "test")["draft_index"] == 0).sum())
    _edit(vocab_ws, _set("test", "target_calls", blocks + 5))
    assert load_split(vocab_ws.data, "test").metadata["statistics"]["test"]["target_calls"] == blocks + 5


def test_empty_split_may_have_nan_means(ws):
    _edit(ws, _set("valid", "tokens", 0))
    _edit(ws, _set("valid", "mean_target_entropy", None))
    load_split(ws.data, "test")


@pytest.mark.parametrize("value", [-5, 12.7, "7", True], ids=["negative", "fraction", "string", "bool"])
def test_verify_length_run_refuses_bad_train_target_calls(vocab_ws, value):
    _edit(vocab_ws, _set("train", "target_calls", value))
    check(vocab_ws, "evolve", ["run", "--data", vocab_ws.data, "--out", vocab_ws.root / "runs", "--evolve",
                               "verify-length", "--objective", "tokens_per_second", "--population", 4,
                               "--generations", 1, "--no-progress", "--from-scratch"],
          2, ("metadata.json", "statistics.train.target_calls", repr(value)))

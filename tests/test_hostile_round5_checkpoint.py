"""Checkpoint contents proven: every figure a resume reports is re-derived or bounded by what it can physically be.

The cases are generated from the checkpoint itself: every number of a (re-signed) checkpoint's payload (the first,
middle and last entry of every list) set to a value no run can have (10**30 for an integer, 1e300 for a float),
and every remembered metric of the evaluator caches (at an entry a resume does not re-score) set to 1e9 (an integer
one to 2**62), of a one-population run, of an island run and of a verification-length run (tokens per second); each
is refused by ``python -m evolve resume`` in one line naming the checkpoint file and a field. Besides: the wall time,
the evaluation count and a champion's tokens per second of the issue, and a seed whose name is not its expression's.
"""
from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from evolve.search.checkpoint import CHECKPOINT_FILE
from test_checkpoint_hostile import _forge, _refused, made  # noqa: F401 - the fixture `made`


def _leaves(data, path: str = ""):
    """(path, value) of every number of ``data`` (the first, middle and last entry of every list)."""
    if isinstance(data, dict):
        for k, v in data.items():
            if k in ("columns", "keys"):  # the caches' metrics: their own cases below
                continue
            yield from _leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(data, list):
        for i in sorted({0, len(data) // 2, len(data) - 1}) if data else []:
            yield from _leaves(data[i], f"{path}[{i}]")
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        yield path, data


def _setter(path: str, value):
    parts = [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", path)]

    def edit(data):
        for p in parts[:-1]:
            data = data[p]
        data[parts[-1]] = value
    return edit


def _payload(partial: Path) -> dict:
    return json.loads((partial / CHECKPOINT_FILE).read_bytes().split(b"\n", 2)[2])


def _copy_dir(partial: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name / partial.name
    shutil.copytree(partial, target)
    return target


def _number_cases(partial: Path) -> dict:
    return {path: _setter(path, 10 ** 30 if isinstance(v, int) else 1e300) for path, v in _leaves(_payload(partial))}


def _held(data) -> set[str]:
    """The expressions of every individual the checkpoint holds (a resume re-scores their remembered metrics)."""
    out = set()
    for island in data["islands"]:
        out |= {ind["tree"] for ind in island["population"]}
        out |= {m[1]["tree"] for m in (island["hof"] or {}).get("members", [])}
    return out


def _metric_cases(partial: Path, value: float = 1e9) -> dict:
    """Every remembered metric of every cache, set at an entry a resume does not re-score (not the first, middle,
    last or an individual's): float columns to ``value``, integer ones to 10**12."""
    data = _payload(partial)
    cases = {}
    for name, cache in (data["caches"] or {}).items():
        keys = cache["keys"]
        sampled = {0, len(keys) // 2, len(keys) - 1}
        k = next(i for i, key in enumerate(keys) if i not in sampled and key not in _held(data))
        for column, col in cache["columns"].items():
            if col.get("dtype") in ("float64", "int64"):  # a binary column
                def edit(d, name=name, column=column, k=k, dtype=col["dtype"]):
                    c = d["caches"][name]["columns"][column]
                    values = np.frombuffer(base64.b64decode(c["data"]), dtype="<f8" if dtype == "float64"
                                           else "<i8").copy()
                    values[k] = value if dtype == "float64" else 10 ** 12  # a count no split of these sizes holds
                    c["data"] = base64.b64encode(values.tobytes()).decode("ascii")
            elif "values" in col and isinstance(col["values"][k], (int, float)):  # a list of numbers
                def edit(d, name=name, column=column, k=k):
                    values = d["caches"][name]["columns"][column]["values"]
                    values[k] = 10 ** 12 if type(values[k]) is int else value
            else:
                continue
            cases[f"caches.{name}.{column}[{k}]"] = edit
    return cases


def _check_all(partial: Path, cases: dict, tmp_path: Path, watch: tuple) -> None:
    assert cases
    for n, (case, edit) in enumerate(cases.items()):
        copy = _copy_dir(partial, tmp_path, f"c{n}")
        _forge(copy / CHECKPOINT_FILE, None, edit)
        line = _refused(copy, watch=watch, culprits=(str(copy / CHECKPOINT_FILE),))
        assert "the checkpoint's field '" in line or "configuration" in line, (case, line)


def test_every_number_of_a_checkpoint_bounded(made, tmp_path):  # noqa: F811
    cases = _number_cases(made["partial"])
    assert len(cases) > 60 and any(c.startswith("caches.train.stats.") for c in cases)
    _check_all(made["partial"], cases, tmp_path, (made["data"],))


def test_every_remembered_metric_bounded(made, tmp_path):  # noqa: F811
    cases = _metric_cases(made["partial"])
    assert any(c.startswith("caches.valid.fitness") for c in cases)
    _check_all(made["partial"], cases, tmp_path, (made["data"],))


def test_the_issues_forgeries(made, tmp_path):  # noqa: F811
    """A wall time of 1e300 s and an evaluation count of 10**30 (with logbook rows to match), refused by name."""
    def evaluations(data):
        data["evaluations"] = 10 ** 30
        data["logbook"][1]["nevals"] = 10 ** 30 - sum(r["nevals"] for i, r in enumerate(data["logbook"]) if i != 1)
    for k, (edit, field) in enumerate(((_setter("seconds", 1e300), "'seconds'"), (evaluations, "nevals"))):
        copy = _copy_dir(made["partial"], tmp_path, f"i{k}")
        _forge(copy / CHECKPOINT_FILE, None, edit)
        _refused(copy, watch=(made["data"],), culprits=(str(copy / CHECKPOINT_FILE), field))


def test_a_seed_whose_name_is_not_its_expressions_is_refused(made, tmp_path):  # noqa: F811
    data = _payload(made["partial"])
    seeds = data["warm"]["seeds"]
    assert len(seeds) >= 2

    def swap_names(d):
        s = d["warm"]["seeds"]
        s[0]["name"], s[1]["name"] = s[1]["name"], s[0]["name"]

    def other_expression(d):
        d["warm"]["seeds"][1]["expression"] = d["warm"]["seeds"][0]["expression"]

    for k, edit in enumerate((swap_names, other_expression)):
        copy = _copy_dir(made["partial"], tmp_path, f"s{k}")
        _forge(copy / CHECKPOINT_FILE, None, edit)
        _refused(copy, watch=(made["data"],), culprits=(str(copy / CHECKPOINT_FILE), "'warm.seeds[0]'"
                                                        if k == 0 else "'warm.seeds[1]'"))


# --- an island run, and a verification-length run (tokens per second) ---------------------------------------

def _stopped_run(root: Path, settings: dict, data: Path, **kw) -> Path:
    from evolve.search.config import resolve
    from evolve.search.rundir import run

    rows: list = []
    stopped = run(resolve({"data": str(data), "out": str(root / "out"), **settings}), progress=rows.append,
                  stop=lambda: len(rows) > 2, **kw)
    assert stopped.checkpoint_dir is not None
    return stopped.checkpoint_dir


@pytest.fixture(scope="module")
def island_checkpoint(tmp_path_factory) -> tuple[Path, Path]:
    pytest.importorskip("distributed")
    from evolve.cluster import ClusterOptions
    from evolve.traces.io import write_dataset
    from evolve.traces.synth.independent import generate_split

    root = tmp_path_factory.mktemp("r5-islands")
    data = root / "data"
    write_dataset(data, {"train": generate_split(40, 1), "valid": generate_split(15, 2)}, {"generator": "independent"})
    settings = {"population": 16, "generations": 4, "migration_interval": 2, "seed": 1, "islands": 2, "migrants": 3}
    return _stopped_run(root, settings, data, cluster=ClusterOptions(workers=1)), data


def test_every_number_of_an_island_checkpoint_bounded(island_checkpoint, tmp_path):
    partial, data = island_checkpoint
    cases = {k: v for k, v in _number_cases(partial).items() if not k.startswith("islands[1].population")}
    assert any(c.startswith("islands[1]") for c in cases) and "programs" in cases
    _check_all(partial, cases, tmp_path, (data,))


@pytest.fixture(scope="module")
def length_checkpoint(vocab_dataset, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("r5-length")
    settings = {"population": 12, "generations": 4, "migration_interval": 1, "seed": 2, "evolve": "verify-length"}
    return _stopped_run(root, settings, vocab_dataset)


def test_a_verification_length_runs_remembered_tokens_per_second(length_checkpoint, vocab_dataset, tmp_path):
    """Tokens per second forged to 1e9 in a remembered entry no resume re-scores (bounded: tokens per call over
    seconds per call), and in the hall of fame's best (re-scored); every other remembered metric as well."""
    cases = _metric_cases(length_checkpoint)
    assert any(".tokens_per_second[" in c for c in cases)
    _check_all(length_checkpoint, cases, tmp_path, (vocab_dataset,))
    data = _payload(length_checkpoint)
    best = data["islands"][0]["hof"]["members"][0][1]["tree"]
    k = data["caches"]["valid"]["keys"].index(best)

    def champion_speed(d):
        c = d["caches"]["valid"]["columns"]["tokens_per_second"]
        if "values" in c:
            c["values"][k] = 1e9
            return
        values = np.frombuffer(base64.b64decode(c["data"]), dtype="<f8").copy()
        values[k] = 1e9
        c["data"] = base64.b64encode(values.tobytes()).decode("ascii")
    copy = _copy_dir(length_checkpoint, tmp_path, "champion")
    _forge(copy / CHECKPOINT_FILE, None, champion_speed)
    _refused(copy, watch=(vocab_dataset,), culprits=(str(copy / CHECKPOINT_FILE), f"caches.valid.keys[{k}]",
                                                     "tokens_per_second"))

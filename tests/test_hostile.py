"""Hostile but realistic input to every command: one line, an honest exit code, nothing lost.

Each case builds a fresh workspace (a copy of a small dataset, a run directory, a champions
directory, a plain file, an empty directory), may damage part of it, and runs one command
through click's test runner with the workspace as the current directory. It asserts

* the exit code (2 for refused input, 0 for data that is valid but earns a warning);
* no traceback, and for a refusal exactly one stderr line ``error: ...`` naming the culprit
  (for a warning, a ``warning: ...`` line naming it);
* every file that existed before (in the workspace and the protected files of the repository)
  is byte-identical afterwards, and a refused command created no file at all.

The faults (Ctrl-C, SIGKILL, writes failing at the end) are in ``test_hostile_faults.py``, the
property-based cases in ``test_hostile_properties.py``.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from evolve.traces.io import load_split
from evolve.files.guard import ROOT, RUN_FILES
from heuristics.champions import ENV_DIR

from hostile_helpers import check

def _bench(ws, *extra):
    return "benchmark", ["--data", ws.data, "--repeats", 1, *extra]


# ---- datasets: NaN, infinity and range per column, dtypes, columns, damaged files -------------

def _cell(column, row, value):
    def setup(ws):
        ws.put(column, row, value)
        return _bench(ws)
    return setup


CELLS = [
    ("draft_prob", 3, float("nan"), "NaN"), ("target_prob", 5, float("inf"), "infinite"),
    ("draft_entropy", 2, -0.5, "-0.5"), ("target_entropy", 4, float("-inf"), "infinite"),
    ("rand_value", 1, 1.0, "[0, 1)"), ("draft_prob", 6, 0.0, "(0, 1]"), ("target_prob", 7, 1.5, "1.5"),
    ("position", 8, -1, "-1"), ("seq_id", 9, -3, "-3"), ("position", 0, "x", "'x'"),
    ("top_token_match", 2, 2, "boolean"), ("draft_prob", 0, "abc", "'abc'"), ("baseline_accepts", 0, "yes", "'yes'"),
]


@pytest.mark.parametrize("column,row,value,fragment", CELLS, ids=[f"{c[0]}-{c[2]!r}" for c in CELLS])
def test_bad_cell(ws, column, row, value, fragment):
    check(ws, *_cell(column, row, value)(ws), 2, ("test.parquet", f"'{column}'", f"row {row}", fragment))


def _flip_baseline(ws):
    df = ws.frame()
    df.loc[6, "baseline_accepts"] = not df.loc[6, "baseline_accepts"]
    ws.save(df)
    return _bench(ws)


def _drop(column):
    def setup(ws):
        ws.save(ws.frame().drop(columns=[column]))
        return _bench(ws)
    return setup


def _rename(old, new):
    def setup(ws):
        ws.save(ws.frame().rename(columns={old: new}))
        return _bench(ws)
    return setup


def _bytes(name, make):
    def setup(ws):
        path = ws.data / name
        path.write_bytes(make(path.read_bytes() if path.exists() else b""))
        return _bench(ws)
    return setup


def _replace_by_dir(name, junk=False):
    def setup(ws):
        path = ws.data / name
        path.unlink()
        path.mkdir()
        if junk:
            (path / "part-0.parquet").write_bytes(b"junk")
        return _bench(ws)
    return setup


def _metadata(text):
    def setup(ws):
        (ws.data / "metadata.json").write_text(text)
        return _bench(ws)
    return setup


def _empty_split(ws):
    ws.save(ws.frame().iloc[:0])
    return _bench(ws)


DATASET_CASES = [
    ("baseline-inconsistent", _flip_baseline, ("baseline_accepts", "row 6")),
    ("missing-column", _drop("target_entropy"), ("target_entropy",)),
    ("misspelt-column", _rename("draft_prob", "draft_prb"), ("draft_prb", "draft_prob")),
    ("truncated-parquet", _bytes("test.parquet", lambda b: b[: len(b) // 2]), ("test.parquet", "Parquet")),
    ("random-bytes-parquet", _bytes("test.parquet", lambda b: bytes(np.random.default_rng(1).integers(
        0, 256, 4000, dtype=np.uint8))), ("test.parquet",)),
    ("empty-file-parquet", _bytes("test.parquet", lambda b: b""), ("test.parquet",)),
    ("empty-split", _empty_split, ("test.parquet", "empty")),
    ("split-is-empty-dir", _replace_by_dir("test.parquet"), ("test.parquet", "directory")),
    ("split-is-dir-with-junk", _replace_by_dir("test.parquet", junk=True), ("test.parquet", "directory")),
    ("metadata-is-dir", _replace_by_dir("metadata.json"), ("metadata.json", "directory")),
    ("metadata-not-json", _metadata("{not json"), ("metadata.json", "JSON")),
    ("metadata-array", _metadata("[1, 2]"), ("metadata.json", "object")),
    ("metadata-schema-version", _metadata('{"schema_version": 99}'), ("metadata.json", "99")),
    ("metadata-random-bytes", _bytes("metadata.json", lambda b: b"\xff\xfe\x00garbage"), ("metadata.json",)),
    ("no-test-split", lambda ws: ((ws.data / "test.parquet").unlink(), _bench(ws))[1], ("test.parquet",)),
    ("data-is-missing", lambda ws: ("benchmark", ["--data", ws.root / "nowhere"]), ("nowhere",)),
    ("data-is-a-file", lambda ws: ("benchmark", ["--data", ws.file]), ("file.txt",)),
    ("evolve-nan-in-train", lambda ws: (ws.put("draft_prob", 0, float("nan"), "train"),
                                       ("evolve", ["run", "--data", ws.data, "--out", ws.root / "o"]))[1],
     ("train.parquet", "'draft_prob'", "row 0")),
    ("evolve-train-is-dir", lambda ws: (_replace_by_dir("train.parquet")(ws),
                                       ("evolve", ["run", "--data", ws.data, "--out", ws.root / "o"]))[1],
     ("train.parquet", "directory")),
]


@pytest.mark.parametrize("setup,culprits", [c[1:] for c in DATASET_CASES], ids=[c[0] for c in DATASET_CASES])
def test_bad_dataset(ws, setup, culprits):
    check(ws, *setup(ws), 2, culprits)


def _records(change):
    def setup(ws):
        ws.as_json()
        records = ws.records()
        change(records)
        ws.write_records(records)
        return _bench(ws)
    return setup


def _json_text(text: bytes):
    def setup(ws):
        ws.as_json()
        (ws.data / "test.json").write_bytes(text)
        return _bench(ws)
    return setup


JSON_CASES = [
    ("object-not-array", _json_text(b'{"seq_id": 0}'), ("test.json", "array", "object")),
    ("array-of-numbers", _json_text(b"[1, 2, 3]"), ("test.json", "record 0", "integer")),
    ("truncated", _json_text(b'[{"seq_id": 0, "posi'), ("test.json", "JSON")),
    ("not-utf8", _json_text(b"[\xff\xfe]"), ("test.json",)),
    ("nested-deeply", _json_text(b"[" * 100_000 + b"]" * 100_000), ("test.json",)),
    ("record-lacks-key", _records(lambda r: r[5].pop("draft_entropy")), ("record 5", "draft_entropy")),
    ("record-extra-key", _records(lambda r: r[4].update(surprise=1)), ("record 4", "surprise")),
    ("null-value", _records(lambda r: r[2].update(draft_prob=None)), ("'draft_prob'", "row 2", "null")),
    ("huge-position", _records(lambda r: r[3].update(position=10**30)), ("'position'", "row 3", "64-bit")),
    ("huge-probability", _records(lambda r: r[3].update(draft_prob=10**30)), ("'draft_prob'", "row 3", "1e+30")),
    ("string-number", _records(lambda r: r[6].update(target_prob="0.5")), ("'target_prob'", "row 6", "'0.5'")),
    ("bool-position", _records(lambda r: r[1].update(position=True)), ("'position'", "row 1", "True")),
]


@pytest.mark.parametrize("setup,culprits", [c[1:] for c in JSON_CASES], ids=[c[0] for c in JSON_CASES])
def test_bad_json_dataset(ws, setup, culprits):
    check(ws, *setup(ws), 2, culprits)


def test_top_prob_error_prints_plain_numbers(vocab_ws):
    df = vocab_ws.frame()
    df.loc[4, "target_top_prob"] = df.loc[4, "target_prob"] / 2
    vocab_ws.save(df)
    check(vocab_ws, *_bench(vocab_ws), 2,
          ("'target_top_prob'", "row 4", f"below target_prob = {float(df.loc[4, 'target_prob'])!r}"))


def test_positions_decreasing_inside_a_block_warn(vocab_ws):
    df = vocab_ws.frame()
    row = int(np.flatnonzero(df["draft_index"].to_numpy() == 2)[0])
    df.loc[row, "position"] = int(df.loc[row - 1, "position"]) - 1
    vocab_ws.save(df)
    check(vocab_ws, *_bench(vocab_ws, "--format", "json"), 0, ("'position'", f"row {row}", "inside a block"))


# ---- outputs never touch inputs ------------------------------------------------------------------

OUTPUT_CASES = [
    ("benchmark-over-split", lambda ws: _bench(ws, "--output", ws.data / "test.parquet"), ("test.parquet",)),
    ("benchmark-over-metadata", lambda ws: _bench(ws, "--output", ws.data / "metadata.json"), ("metadata.json",)),
    ("benchmark-into-directory", lambda ws: _bench(ws, "--output", ws.adir), ("adir",)),
    ("benchmark-over-source", lambda ws: _bench(ws, "--output", ROOT / "heuristics" / "registry.py"),
     ("registry.py",)),
    ("benchmark-under-a-file", lambda ws: _bench(ws, "--output", ws.file / "out.txt"), ("file.txt", "not a directory")),
    ("benchmark-over-dev-null", lambda ws: _bench(ws, "--output", "/dev/null"), ("/dev/null",)),
    ("benchmark-over-its-champion", lambda ws: _bench(ws, "--champion", ws.champion, "--output", ws.champion),
     ("champ.json", "input")),
    ("benchmark-into-champions-dir", lambda ws: _bench(ws, "--champions-dir", ws.champs, "--output",
                                                       ws.champs / "table.json"), ("table.json", "champion")),
    ("benchmark-over-run-file", lambda ws: _bench(ws, "--output", ws.run / "run.json"), ("run.json",)),
    ("pareto-over-split", lambda ws: ("benchmark", ["pareto", "--data", ws.data, "--output",
                                                    ws.data / "test.parquet"]), ("test.parquet",)),
    ("pareto-output-png", lambda ws: ("benchmark", ["pareto", "--data", ws.data, "--output", ws.root / "o.png"]),
     (".png",)),
    ("pareto-over-run-file", lambda ws: ("benchmark", ["pareto", "--data", ws.data, "--run", ws.run, "--output",
                                                       ws.run / "champion.json"]), ("champion.json",)),
    ("simulate-over-its-champion", lambda ws: ("benchmark", ["simulate", "--champion", ws.champion, "--output",
                                                             ws.champion]), ("champ.json", "input")),
    ("simulate-into-source", lambda ws: ("benchmark", ["simulate", "--output", ROOT / "evolve" / "sim.txt"]),
     ("evolve",)),
    ("perf-over-split", lambda ws: ("benchmark", ["perf", "--data", ws.data, "--output", ws.data / "train.parquet"]),
     ("train.parquet",)),
    ("run-out-is-a-file", lambda ws: ("evolve", ["run", "--data", ws.data, "--out", ws.file]), ("file.txt",)),
    ("run-out-under-a-file", lambda ws: ("evolve", ["run", "--data", ws.data, "--out", ws.file / "sub"]),
     ("file.txt", "not a directory")),
    ("run-out-is-the-data", lambda ws: ("evolve", ["run", "--data", ws.data, "--out", ws.data]), ("input",)),
    ("run-out-in-source", lambda ws: ("evolve", ["run", "--data", ws.data, "--out", ROOT / "evolve"]), ("source",)),
    ("run-out-named-like-a-split", lambda ws: ((ws.data / "test.parquet").rename(ws.data / "test.json"),
                                               ("evolve", ["run", "--data", ws.data, "--out",
                                                           ws.data / "test.parquet"]))[1], ("test.parquet",)),
    ("run-out-empty", lambda ws: ("evolve", ["run", "--data", ws.data, "--out", ""]), ("empty",)),
    ("generate-out-empty", lambda ws: ("generate", ["--out", ""]), ("'--out'", "empty")),
    ("generate-out-is-a-file", lambda ws: ("generate", ["--out", ws.file]), ("file.txt",)),
    ("generate-out-under-a-file", lambda ws: ("generate", ["--out", ws.file / "sub"]), ("not a directory",)),
    ("generate-out-in-source", lambda ws: ("generate", ["--out", ROOT / "evolve" / "traces" / "synth"]),
     ("synth", "source")),
    ("generate-out-in-evolve", lambda ws: ("generate", ["--out", ROOT / "evolve" / "newdata"]), ("source",)),
    ("harvest-prompts-is-dir", lambda ws: ("generate", ["harvest", "--target", ws.adir, "--draft-window", "4,8",
                                                        "--prompts", ws.adir]), ("--prompts", "directory")),
    ("harvest-prompts-missing", lambda ws: ("generate", ["harvest", "--target", ws.adir, "--draft-window", "4,8",
                                                         "--prompts", ws.root / "none.txt"]), ("none.txt",)),
]


@pytest.mark.parametrize("setup,culprits", [c[1:] for c in OUTPUT_CASES], ids=[c[0] for c in OUTPUT_CASES])
def test_output_refused_before_any_work(ws, setup, culprits):
    check(ws, *setup(ws), 2, culprits)


def test_harvest_out_is_its_target(ws):
    prompts = ws.root / "prompts.txt"
    prompts.write_text("one\ntwo\nthree\n")
    check(ws, "generate", ["harvest", "--target", ws.adir, "--draft-window", "4,8", "--prompts", prompts,
                           "--out", ws.adir], 2, ("adir", "input"))


# ---- champions ----------------------------------------------------------------------------------

def _promote(name, *extra):
    return lambda ws: ("evolve", ["promote", ws.run, name, *extra])


def _user_module(ws):
    (ws.champs / "mine.py").write_text("print('my own code')\n")
    return "evolve", ["promote", ws.run, "mine", "--force"]


def _existing(ws):
    shutil.copy(ws.champion, ws.champs / "dup.json")
    doc = json.loads((ws.champs / "dup.json").read_text())
    doc["name"] = "dup"
    (ws.champs / "dup.json").write_text(json.dumps(doc))
    return "evolve", ["promote", ws.run, "dup"]


def _run_without(name, make_dir=False):
    def setup(ws):
        (ws.run / name).unlink()
        if make_dir:
            (ws.run / name).mkdir()
        return "evolve", ["show", ws.run]
    return setup


CHAMPION_CASES = [
    ("name-init", _promote("__init__"), ("__init__",)),
    ("name-main", _promote("__main__"), ("__main__",)),
    ("name-keyword", _promote("class"), ("class", "keyword")),
    ("name-builtin-rule", _promote("standard_rejection"), ("standard_rejection", "built-in")),
    ("name-digit", _promote("1abc"), ("1abc",)),
    ("name-dash", _promote("a-b"), ("a-b",)),
    ("name-empty", _promote(""), ("''",)),
    ("name-too-long", _promote("x" * 65), ("xxxx",)),
    ("name-path", _promote("../evil"), ("../evil",)),
    ("name-fullwidth", _promote("ｃｈａｍｐ"), ("ｃｈａｍｐ",)),
    ("dir-in-source", _promote("ok", "--champions-dir", ROOT / "heuristics"), ("heuristics", "source")),
    ("dir-is-a-file", lambda ws: ("evolve", ["promote", ws.run, "ok", "--champions-dir", ws.file]), ("file.txt",)),
    ("dir-under-a-file", lambda ws: ("evolve", ["promote", ws.run, "ok", "--champions-dir", ws.file / "c"]),
     ("not a directory",)),
    ("dir-is-the-run", lambda ws: ("evolve", ["promote", ws.run, "champion", "--champions-dir", ws.run]),
     ("input",)),
    ("force-over-user-module", _user_module, ("mine.py", "not a generated")),
    ("existing-without-force", _existing, ("dup", "exists already")),
    ("promote-not-a-run", lambda ws: ("evolve", ["promote", ws.adir, "ok"]), ("adir", "champion.json")),
    ("show-not-a-run", lambda ws: ("evolve", ["show", ws.adir]), ("adir",)),
    ("show-missing", lambda ws: ("evolve", ["show", ws.root / "gone"]), ("gone",)),
    ("show-champion-is-dir", _run_without("champion.json", make_dir=True), ("champion.json",)),
    ("show-no-champion", _run_without("champion.json"), ("champion.json",)),
    ("file-not-json", lambda ws: (ws.champion.write_text("{oops"), _bench(ws, "--champion", ws.champion))[1],
     ("champ.json", "JSON")),
    ("file-import", lambda ws: _bench(ws, "--champion", ws.bad_champion(expression="__import__('os')")),
     ("bad.json", "__import__")),
    ("file-fullwidth-digits", lambda ws: _bench(ws, "--champion", ws.bad_champion(
        expression="min(１.0, target_prob)")), ("bad.json", "１")),
    ("file-unknown-key", lambda ws: _bench(ws, "--champion", ws.bad_champion(extra=1)), ("bad.json", "extra")),
    ("file-nan-metric", lambda ws: (ws.champion.write_text(ws.champion.read_text().replace(
        '"fitness": ', '"fitness": NaN, "x": ', 1)), _bench(ws, "--champion", ws.champion))[1], ("champ.json",)),
    ("file-huge", lambda ws: (ws.champion.write_bytes(b" " * 1_100_000), _bench(ws, "--champion", ws.champion))[1],
     ("champ.json", "larger")),
    ("file-name-init", lambda ws: _bench(ws, "--champion", ws.bad_champion(name="__init__")), ("__init__",)),
    ("dir-holds-broken-file", lambda ws: ((ws.champs / "broken.json").write_text("[]"),
                                          _bench(ws, "--champions-dir", ws.champs))[1], ("broken.json",)),
]


@pytest.mark.parametrize("setup,culprits", [c[1:] for c in CHAMPION_CASES], ids=[c[0] for c in CHAMPION_CASES])
def test_hostile_champion(ws, setup, culprits):
    check(ws, *setup(ws), 2, culprits)
    assert not (ws.champs / "__init__.py").exists() and not (ROOT / "heuristics" / "champions" / "__init__.py").exists()


# ---- option ranges --------------------------------------------------------------------------------

OPTION_CASES = [
    ("benchmark-repeats-0", lambda ws: _bench(ws, "--repeats", 0), ("--repeats",)),
    ("benchmark-split", lambda ws: _bench(ws, "--split", "bogus"), ("--split",)),
    ("benchmark-gamma-0", lambda ws: _bench(ws, "--gamma", 0), ("--gamma",)),
    ("benchmark-cost-ratio", lambda ws: _bench(ws, "--cost-ratio", -1), ("--cost-ratio",)),
    ("benchmark-format", lambda ws: _bench(ws, "--format", "xml"), ("--format",)),
    ("run-population-0", lambda ws: ("evolve", ["run", "--data", ws.data, "--population", 0]), ("--population",)),
    ("run-generations-neg", lambda ws: ("evolve", ["run", "--data", ws.data, "--generations", -1]),
     ("--generations",)),
    ("run-tv-budget", lambda ws: ("evolve", ["run", "--data", ws.data, "--tv-budget", 2]), ("--tv-budget",)),
    ("run-crossover", lambda ws: ("evolve", ["run", "--data", ws.data, "--crossover-prob", 1.5]),
     ("--crossover-prob",)),
    ("run-features", lambda ws: ("evolve", ["run", "--data", ws.data, "--features", "nonsense"]), ("nonsense",)),
    ("run-config-missing", lambda ws: ("evolve", ["run", "--config", ws.root / "none.toml"]), ("none.toml",)),
    ("run-config-broken", lambda ws: ((ws.root / "c.toml").write_text("x = ["),
                                      ("evolve", ["run", "--config", ws.root / "c.toml"]))[1], ("c.toml",)),
    ("run-config-is-dir", lambda ws: ("evolve", ["run", "--config", ws.adir]), ("adir",)),
    ("simulate-samples-0", lambda ws: ("benchmark", ["simulate", "--samples", 0]), ("--samples",)),
    ("simulate-lengths", lambda ws: ("benchmark", ["simulate", "--lengths", "abc"]), ("--lengths",)),
    ("pareto-budgets", lambda ws: ("benchmark", ["pareto", "--data", ws.data, "--budgets", "x"]), ("--budgets",)),
    ("generate-sequences-0", lambda ws: ("generate", ["--out", ws.root / "g", "--sequences", 0]), ("--sequences",)),
    ("generate-model", lambda ws: ("generate", ["--out", ws.root / "g", "--model", "nope"]), ("--model",)),
]


@pytest.mark.parametrize("setup,culprits", [c[1:] for c in OPTION_CASES], ids=[c[0] for c in OPTION_CASES])
def test_bad_option(ws, setup, culprits):
    check(ws, *setup(ws), 2, culprits)


# ---- valid but suspicious: a warning line, and the command goes on ----------------------------------

def _tiny(ws):
    ws.save(ws.frame().iloc[:20])
    return _bench(ws, "--format", "json")


def _backwards(ws):
    df = ws.frame()
    seq = df["seq_id"].to_numpy()
    row = int(np.flatnonzero(seq[1:] == seq[:-1])[3]) + 1  # a row inside a sequence
    df.loc[row, "position"] = 0
    df.loc[row - 1, "position"] = max(int(df.loc[row - 1, "position"]), 1)
    ws.save(df)
    return _bench(ws, "--format", "json")


WARNING_CASES = [
    ("tiny-split", _tiny, ("test.parquet", "20 records")),
    ("positions-decrease", _backwards, ("test.parquet", "'position'", "decreases")),
    ("champions-dir-missing", lambda ws: _bench(ws, "--format", "json", "--champions-dir", ws.root / "nope"),
     ("nope", "does not exist")),
    ("tiny-train-for-evolve", lambda ws: (ws.save(ws.frame("train").iloc[:1], "train"),
                                          ("evolve", ["run", "--data", ws.data, "--out", ws.root / "o",
                                                      "--population", 4, "--generations", 0, "--no-progress",
                                                      "--from-scratch"]))[1], ("train.parquet", "1 record ")),
]


@pytest.mark.parametrize("setup,culprits", [c[1:] for c in WARNING_CASES], ids=[c[0] for c in WARNING_CASES])
def test_suspicious_data_warns(ws, setup, culprits):
    check(ws, *setup(ws), 0, culprits)


def test_champions_dir_from_the_environment_warns(ws):
    check(ws, *_bench(ws, "--format", "json"), 0, ("gone", "does not exist"), env={ENV_DIR: str(ws.root / "gone")})


def test_positions_of_the_vocab_model_do_not_warn(vocab_dataset):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_split(vocab_dataset, "test")


def test_the_guard_knows_every_file_of_a_run_directory(base_run):
    assert {p.name for p in base_run.iterdir()} <= RUN_FILES


def test_case_count():
    """The suite holds at least 60 hostile cases (parametrised ones counted one by one)."""
    n = (len(CELLS) + len(DATASET_CASES) + len(JSON_CASES) + len(OUTPUT_CASES) + len(CHAMPION_CASES)
         + len(OPTION_CASES) + len(WARNING_CASES))
    assert n >= 60, n

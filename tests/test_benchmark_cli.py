"""benchmark.py through click's test runner: output formats, exact seed metrics, and every kind of bad input."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from helpers import split_verdict

import benchmark
from evolve.commands.compare.table import champion_module
from evolve.cli.errors import CliGroup
from evolve.traces.io import load_split, write_dataset
from evolve.traces.synth.independent import generate_split
from evolve.gp.compiler import evaluate_numpy
from evolve.eval.evaluator import reference_metrics
from heuristics.baselines import BASELINES
from heuristics.contract import Rule
from heuristics.registry import REGISTRY

BASELINE_NAMES = [r.name for r in BASELINES]
JSON_KEYS = {"heuristic", "split", "records", "acceptance_rate", "accuracy", "quality_score", "fitness",
             "false_accepts", "false_rejects", "expected_acceptance", "expected_tv", "expected_fitness",
             "n_invalid", "time_ms"}


def _splits(seeds=(1, 2, 3), sequences=4) -> dict[str, pd.DataFrame]:
    return {s: generate_split(sequences, seed) for s, seed in zip(("train", "valid", "test"), seeds)}


def _write(path: Path, splits: dict[str, pd.DataFrame], fmt: str = "parquet") -> Path:
    write_dataset(path, splits, {"generator": {"name": "test"}}, fmt)
    return path


@pytest.fixture(scope="module")
def dataset(independent_dataset) -> Path:
    """The shared train/valid/test directory (conftest): ``_splits()`` written as Parquet."""
    return independent_dataset


@pytest.fixture()
def empty_champions(tmp_path) -> Path:
    d = tmp_path / "no_champions"
    d.mkdir()
    return d


def run(*args: str):
    return CliRunner().invoke(benchmark.cli, [str(a) for a in args])


def ok(*args: str):
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result


def records(*args: str) -> list[dict]:
    return json.loads(ok(*args, "--format", "json", "--repeats", "1").stdout)["rows"]


# --- normal use -------------------------------------------------------------------------------

def test_cli_is_a_group_for_later_subcommands(tmp_path):
    assert isinstance(benchmark.cli, CliGroup) and benchmark.cli.invoke_without_command
    import click

    @click.command("probe")
    def probe():
        click.echo("probe ran")

    benchmark.cli.add_command(probe)
    try:  # a subcommand runs instead of the comparison (which would fail: no dataset here)
        result = run("--data", tmp_path / "nowhere", "probe")
    finally:
        del benchmark.cli.commands["probe"]
    assert result.exit_code == 0 and result.stdout == "probe ran\n"


def test_default_table(dataset, empty_champions):
    out = ok("--data", dataset, "--champions-dir", empty_champions, "--repeats", "1").stdout
    header = out.splitlines()[0].split()
    assert header == ["Heuristic", "Accept%", "Fitness", "E[TV]"]  # the essential columns (no blocks here)
    for word in BASELINE_NAMES:
        assert word in out
    assert "More columns (Accuracy, Quality, Time, E[accept], E[fitness]): --format markdown, csv or json." in out
    assert str(dataset / "test.parquet") in out
    assert split_verdict(out.splitlines())[1].startswith("verdict: standard_rejection wins on test by fitness (")
    assert "Traceback" not in out


def test_json_rows_match_the_numpy_reference(dataset, empty_champions):
    rows = records("--data", dataset, "--champions-dir", empty_champions)
    traces = load_split(dataset, "test")
    assert [r["heuristic"] for r in rows][:len(BASELINES)] == BASELINE_NAMES
    cols = {k: traces[k].astype(np.float64) for k in ("draft_prob", "target_prob", "position", "draft_entropy",
                                                     "target_entropy", "top_token_match")}
    for rec in rows[:len(BASELINES)]:
        assert JSON_KEYS <= set(rec) and rec["split"] == "test" and rec["records"] == traces.n
        rule = BASELINES[BASELINE_NAMES.index(rec["heuristic"])]
        ref = reference_metrics(evaluate_numpy(rule.nodes, cols, traces.n), traces).to_dict()
        for key in JSON_KEYS - {"heuristic", "split", "time_ms"}:
            assert rec[key] == pytest.approx(ref[key], rel=1e-12, abs=1e-12), (rec["heuristic"], key)
        assert rec["time_ms"] > 0


def test_split_all_gives_rows_for_each_split(dataset, empty_champions):
    rows = records("--data", dataset, "--split", "all", "--champions-dir", empty_champions)
    splits = [r["split"] for r in rows]
    n = len(rows) // 3
    assert splits == ["train"] * n + ["valid"] * n + ["test"] * n
    tokens = {r["split"]: r["records"] for r in rows}
    assert tokens == {s: load_split(dataset, s).n for s in ("train", "valid", "test")}


def test_csv_and_markdown(dataset, empty_champions):
    text = ok("--data", dataset, "--champions-dir", empty_champions, "--format", "csv", "--repeats", "1").stdout
    table = list(csv.DictReader(io.StringIO(text)))
    assert JSON_KEYS <= set(table[0]) and [r["heuristic"] for r in table][:len(BASELINES)] == BASELINE_NAMES
    md = ok("--data", dataset, "--champions-dir", empty_champions, "--format", "markdown", "--repeats", "1").stdout
    lines = [line for line in md.splitlines() if line.startswith("|")]
    assert lines[0].startswith("| Heuristic | Accept% | Accuracy | Quality | Fitness | Time |")
    assert set(lines[1]) <= set("|-:") and len(lines) == 2 + len(table)


def test_output_file_is_written_and_stdout_stays_empty(dataset, empty_champions, tmp_path):
    out = tmp_path / "res" / "bench.json"
    result = ok("--data", dataset, "--champions-dir", empty_champions, "--output", out, "--repeats", "1")
    assert result.stdout == "" and "wrote" in result.stderr
    rows = json.loads(out.read_text())["rows"]  # format inferred from the suffix
    assert [r["heuristic"] for r in rows][:len(BASELINES)] == BASELINE_NAMES
    assert not [p for p in out.parent.iterdir() if ".tmp-" in p.name]


def test_seed_json_dataset_is_accepted(tmp_path, empty_champions):
    data = _write(tmp_path / "d", _splits(), "json")
    rows = records("--data", data, "--champions-dir", empty_champions)
    assert rows[0]["records"] == len(generate_split(4, 3))


def test_rule_needing_an_optional_column_is_skipped_with_a_note(tmp_path, empty_champions, monkeypatch):
    monkeypatch.setitem(REGISTRY, "overlap_rule", Rule("overlap_rule", expression="min(1.0, overlap)"))
    plain = _write(tmp_path / "plain", _splits())
    result = ok("--data", plain, "--champions-dir", empty_champions, "--format", "json", "--repeats", "1")
    rows = json.loads(result.stdout)["rows"]
    assert "overlap_rule" not in {r["heuristic"] for r in rows}
    assert "note:" in result.stderr and "overlap_rule" in result.stderr and "'overlap'" in result.stderr
    table = ok("--data", plain, "--champions-dir", empty_champions, "--repeats", "1").stdout
    assert "skipped overlap_rule" in table
    splits = _splits()
    for df in splits.values():
        df["overlap"] = np.minimum(1.0, df["target_prob"] / df["draft_prob"])
    rich = _write(tmp_path / "with_overlap", splits)
    rows = records("--data", rich, "--champions-dir", empty_champions)
    got = next(r for r in rows if r["heuristic"] == "overlap_rule")
    std = next(r for r in rows if r["heuristic"] == "standard_rejection")
    assert got["expected_acceptance"] == pytest.approx(std["expected_acceptance"])


# --- the seed metrics, by hand ------------------------------------------------------------------

# Eight records; r = min(1, p/q); the standard rule accepts rows 0, 2, 3, 5, 6 (u < r).
#            q     p     u     match  H_q  H_p   seq pos     r
HAND = [(0.5, 0.25, 0.30, False, 5.0, 5.0, 0, 0),  # 0.5   accept
        (0.5, 0.25, 0.70, True, 5.0, 5.0, 0, 1),   # 0.5   reject
        (0.4, 0.80, 0.90, True, 0.0, 0.0, 0, 2),   # 1     accept
        (0.8, 0.20, 0.20, False, 5.0, 5.0, 0, 3),  # 0.25  accept
        (0.8, 0.20, 0.50, False, 5.0, 5.0, 1, 0),  # 0.25  reject
        (0.6, 0.60, 0.99, True, 5.0, 5.0, 1, 1),   # 1     accept
        (0.9, 0.09, 0.05, False, 5.0, 5.0, 1, 2),  # 0.1   accept
        (0.9, 0.09, 0.95, False, 5.0, 5.0, 1, 3)]  # 0.1   reject

# Computed by hand (N = 8; quality = max(0, 1 - 10 FA/N - 0.1 FR/N); fitness = A Q if Q >= 0.95 else Q/2):
EXPECTED = {
    # tau = r: same accepts as the baseline labels. E[accept] = (.5+.5+1+.25+.25+1+.1+.1)/8 = 3.7/8.
    "standard_rejection": dict(acceptance_rate=5 / 8, false_accepts=0, false_rejects=0, accuracy=1.0,
                               quality_score=1.0, fitness=5 / 8, expected_acceptance=3.7 / 8, expected_tv=0.0,
                               expected_fitness=3.7 / 8),
    # tau = 1: FA = rows 1, 4, 7; Q = max(0, 1 - 30/8) = 0. E[TV] = mean(1 - r) = 4.3/8.
    "always_accept": dict(acceptance_rate=1.0, false_accepts=3, false_rejects=0, accuracy=5 / 8, quality_score=0.0,
                          fitness=0.0, expected_acceptance=1.0, expected_tv=4.3 / 8, expected_fitness=0.0),
    # tau = 1 on rows 2, 5 (p >= q), else 0: FR = rows 0, 3, 6; Q = 1 - 0.3/8 = 0.9625; F = 0.25 * 0.9625.
    # E[FR] = (.5+.5+.25+.25+.1+.1)/8 = 0.2125, E[Q] = 0.97875, E[F] = 0.25 * 0.97875.
    "conservative": dict(acceptance_rate=0.25, false_accepts=0, false_rejects=3, accuracy=5 / 8,
                         quality_score=0.9625, fitness=0.240625, expected_acceptance=0.25, expected_tv=0.0,
                         expected_fitness=0.2446875),
    # tau = 0.95 on rows 1, 2, 5: row 1 accepted (FA), row 5 rejected (u = .99, FR). Q = max(0, 1 - 10/8 - .1/8) = 0.
    # E[acc] = 4.05/8, E[TV] = .45/8, E[FR] = .1/8, E[Q] = 1 - .5625 - .00125 = .43625, E[F] = .43625/2.
    "top_token_match": dict(acceptance_rate=5 / 8, false_accepts=1, false_rejects=1, accuracy=6 / 8,
                            quality_score=0.0, fitness=0.0, expected_acceptance=4.05 / 8, expected_tv=0.45 / 8,
                            expected_fitness=0.218125),
    # factor 1 - 0.5*min(1, 10/20) = 0.75 except row 2 (entropies 0: factor 1). Rows 3 (.2 >= .1875) and
    # 5 (.99 >= .75) become false rejects: A = 3/8, Q = 1 - .2/8 = .975, F = .375 * .975.
    # E[acc] = 3.025/8 = .378125, E[FR] = .675/8 = .084375, E[Q] = .9915625.
    "entropy_aware": dict(acceptance_rate=3 / 8, false_accepts=0, false_rejects=2, accuracy=6 / 8,
                          quality_score=0.975, fitness=0.365625, expected_acceptance=0.378125, expected_tv=0.0,
                          expected_fitness=0.378125 * 0.9915625),
    # factor 1 + pos/100: tau = .5, .505, 1, .2575, .25, 1, .102, .103; accepts unchanged.
    # E[acc] = 3.7175/8, E[TV] = (.005+.0075+.002+.003)/8 = .0175/8, E[Q] = 1 - .021875 = .978125.
    "position_aware": dict(acceptance_rate=5 / 8, false_accepts=0, false_rejects=0, accuracy=1.0,
                           quality_score=1.0, fitness=5 / 8, expected_acceptance=3.7175 / 8,
                           expected_tv=0.0175 / 8, expected_fitness=3.7175 / 8 * 0.978125),
    # tau = max(r, .3) = .5, .5, 1, .3, .3, 1, .3, .3: accepts unchanged (row 3: .2 < .3, row 4: .5 >= .3).
    # E[acc] = 4.2/8, E[TV] = (.05+.05+.2+.2)/8 = .0625, E[Q] = 1 - .625 = .375 < .95: E[F] = .1875.
    "ratio_floor_0.3": dict(acceptance_rate=5 / 8, false_accepts=0, false_rejects=0, accuracy=1.0,
                            quality_score=1.0, fitness=5 / 8, expected_acceptance=4.2 / 8, expected_tv=0.0625,
                            expected_fitness=0.1875),
}


def _hand_frame() -> pd.DataFrame:
    q, p, u, match, hq, hp, seq, pos = map(list, zip(*HAND))
    return pd.DataFrame({"seq_id": seq, "position": pos, "draft_prob": q, "target_prob": p, "draft_entropy": hq,
                         "target_entropy": hp, "top_token_match": match, "rand_value": u,
                         "baseline_accepts": [True, False, True, True, False, True, True, False]})


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_seed_metrics_exactly_on_a_hand_built_dataset(tmp_path, empty_champions, fmt):
    df = _hand_frame()
    data = _write(tmp_path / "hand", {"train": df, "valid": df, "test": df}, fmt)
    rows = {r["heuristic"]: r for r in records("--data", data, "--champions-dir", empty_champions)}
    assert set(EXPECTED) <= set(rows)
    for name, expected in EXPECTED.items():
        row = rows[name]
        assert row["records"] == 8 and row["n_invalid"] == 0
        for key, value in expected.items():
            assert row[key] == pytest.approx(value, abs=1e-12), (name, key)


# --- bad input ----------------------------------------------------------------------------------

def _corrupt_test(tmp_path, mutate, fmt="parquet") -> Path:
    """A dataset whose test split is ``mutate(generate_split(...))``."""
    splits = _splits()
    splits["test"] = mutate(splits["test"].copy())
    return _write(tmp_path / "bad", splits, fmt)


def _set(column, row, value):
    def mutate(df):
        if isinstance(value, str):
            df[column] = df[column].astype(object)
        else:  # widen the column's dtype to hold the value (bool -> int64, int64 -> float64)
            dtype = np.int64 if df[column].dtype == bool and isinstance(value, int) else np.result_type(
                df[column].dtype, type(value))
            df[column] = df[column].astype(dtype)
        df.loc[row, column] = value
        return df
    return mutate


def _flip_baseline(row):
    def mutate(df):
        df.loc[row, "baseline_accepts"] = not df.loc[row, "baseline_accepts"]
        return df
    return mutate


def _cut(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


BAD_DATASETS = {
    # name: (mutate test frame, format, post-write damage, expected fragments of the message)
    "missing column": (lambda df: df.drop(columns=["target_prob"]), "parquet", None,
                       ["test.parquet", "missing required column 'target_prob'"]),
    "misspelt column": (lambda df: df.rename(columns={"target_prob": "target_prb"}), "parquet", None,
                        ["test.parquet", "'target_prb'", "did you mean 'target_prob'"]),
    "string in float column": (_set("draft_prob", 3, "0.5"), "json", None,
                               ["test.json", "'draft_prob'", "row 3"]),
    "text column": (lambda df: df.assign(draft_entropy=df["draft_entropy"].astype(str)), "parquet", None,
                    ["test.parquet", "'draft_entropy'", "row 0"]),
    "non-boolean flag": (_set("top_token_match", 4, 2), "parquet", None,
                         ["test.parquet", "'top_token_match'", "row 4", "2"]),
    "non-integer position": (_set("position", 5, 1.5), "parquet", None,
                             ["test.parquet", "'position'", "row 5", "1.5"]),
    "NaN": (_set("draft_entropy", 5, float("nan")), "parquet", None,
            ["test.parquet", "'draft_entropy'", "row 5", "NaN"]),
    "infinity": (_set("target_prob", 6, float("inf")), "parquet", None,
                 ["test.parquet", "'target_prob'", "row 6", "inf"]),
    "draft_prob zero": (_set("draft_prob", 2, 0.0), "parquet", None,
                        ["test.parquet", "'draft_prob'", "row 2", "0.0", "(0, 1]"]),
    "target_prob above 1": (_set("target_prob", 7, 1.5), "parquet", None,
                            ["test.parquet", "'target_prob'", "row 7", "1.5"]),
    "negative probability": (_set("draft_prob", 1, -0.1), "json", None,
                             ["test.json", "'draft_prob'", "row 1", "-0.1"]),
    "negative entropy": (_set("target_entropy", 1, -0.25), "parquet", None,
                         ["test.parquet", "'target_entropy'", "row 1", "-0.25"]),
    "rand_value one": (_set("rand_value", 8, 1.0), "parquet", None,
                       ["test.parquet", "'rand_value'", "row 8", "1.0", "[0, 1)"]),
    "rand_value negative": (_set("rand_value", 0, -0.5), "parquet", None,
                            ["test.parquet", "'rand_value'", "row 0", "-0.5"]),
    "baseline_accepts inconsistent": (_flip_baseline(9), "parquet", None,
                                      ["test.parquet", "'baseline_accepts'", "row 9"]),
    "empty split": (lambda df: df.iloc[:0], "parquet", None, ["test.parquet", "empty"]),
    "empty JSON split": (lambda df: df.iloc[:0], "json", None, ["test.json", "empty"]),
    "truncated parquet": (lambda df: df, "parquet", lambda d: _cut(d / "test.parquet"),
                          ["test.parquet", "not a readable Parquet file"]),
    "garbage parquet": (lambda df: df, "parquet", lambda d: (d / "test.parquet").write_bytes(b"PAR1" * 5),
                        ["test.parquet", "not a readable Parquet file"]),
    "truncated JSON": (lambda df: df, "json", lambda d: _cut(d / "test.json"), ["test.json", "not valid JSON"]),
    "JSON object instead of array": (lambda df: df, "json", lambda d: (d / "test.json").write_text('{"a": 1}'),
                                     ["test.json", "array"]),
    "JSON array of numbers": (lambda df: df, "json", lambda d: (d / "test.json").write_text("[1, 2]"),
                              ["test.json", "record 0"]),
    "missing split file": (lambda df: df, "parquet", lambda d: (d / "test.parquet").unlink(),
                           ["test.parquet", "python generate_data.py"]),
    "bad metadata": (lambda df: df, "parquet", lambda d: (d / "metadata.json").write_text("{not json"),
                     ["metadata.json", "not valid JSON"]),
    "unknown schema version": (lambda df: df, "parquet",
                               lambda d: (d / "metadata.json").write_text('{"schema_version": 99}'),
                               ["metadata.json", "schema_version", "99"]),
}


def assert_clean_failure(result, fragments, output: Path, before: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert result.stdout == ""
    assert output.read_text() == before  # the earlier output is untouched
    assert not [p for p in output.parent.iterdir() if ".tmp-" in p.name]


@pytest.fixture()
def previous_output(tmp_path) -> tuple[Path, str]:
    out = tmp_path / "out" / "result.json"
    out.parent.mkdir()
    out.write_text("previous result\n")
    return out, "previous result\n"


@pytest.mark.parametrize("case", list(BAD_DATASETS))
def test_bad_dataset(tmp_path, empty_champions, previous_output, case):
    mutate, fmt, damage, fragments = BAD_DATASETS[case]
    data = _corrupt_test(tmp_path, mutate, fmt)
    if damage is not None:
        damage(data)
    out, before = previous_output
    result = run("--data", data, "--champions-dir", empty_champions, "--output", out, "--repeats", "1")
    assert_clean_failure(result, fragments, out, before)


def test_missing_dataset_says_how_to_create_it(tmp_path, empty_champions, previous_output):
    out, before = previous_output
    result = run("--data", tmp_path / "nowhere", "--champions-dir", empty_champions, "--output", out)
    assert_clean_failure(result, [str(tmp_path / "nowhere"), "python generate_data.py"], out, before)


def test_bad_train_split_fails_split_all(tmp_path, empty_champions, previous_output):
    splits = _splits()
    splits["train"] = _set("target_entropy", 2, -1.0)(splits["train"].copy())
    data = _write(tmp_path / "d", splits)
    out, before = previous_output
    result = run("--data", data, "--split", "all", "--champions-dir", empty_champions, "--output", out)
    assert_clean_failure(result, ["train.parquet", "'target_entropy'", "row 2"], out, before)
    assert run("--data", data, "--split", "test", "--champions-dir", empty_champions,
               "--repeats", "1").exit_code == 0


@pytest.mark.parametrize("args, fragments", [
    (["--split", "holdout"], ["--split", "holdout"]),
    (["--format", "html"], ["--format", "html"]),
    (["--repeats", "0"], ["--repeats", "0"]),
    (["--repeats", "many"], ["--repeats", "many"]),
    (["--champion", "{tmp}/missing.json"], ["--champion", "missing.json"]),
    (["--data", "{tmp}/out/result.json"], ["--data"]),
    (["--bogus"], ["--bogus"]),
])
def test_invalid_options(tmp_path, dataset, empty_champions, previous_output, args, fragments):
    out, before = previous_output
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = run("--data", dataset, "--champions-dir", empty_champions, "--output", out, *args)
    assert_clean_failure(result, fragments, out, before)


def test_output_into_a_directory_is_refused(tmp_path, dataset, empty_champions):
    result = run("--data", dataset, "--champions-dir", empty_champions, "--output", tmp_path)
    assert result.exit_code == 2 and "--output" in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


# --- champions ----------------------------------------------------------------------------------

def _champion_doc(name: str, expression: str) -> dict:
    """A valid champion file object, built with the champion module's own writer."""
    module = champion_module()
    metrics = {"fitness": 0.5, "acceptance_rate": 0.5}
    champ = module.Champion(name=name, expression=expression, description="hand-written for a test",
                            metrics={"train": metrics, "valid": metrics}, provenance={"test": True})
    return json.loads(module.champion_json(champ))


def _champion_json(path: Path, name: str, expression: str) -> Path:
    path.write_text(json.dumps(_champion_doc(name, expression)))
    return path


def test_champion_files_are_compared_with_standard_rejection(tmp_path, dataset, empty_champions):
    cdir = tmp_path / "champs"
    cdir.mkdir()
    _champion_json(cdir / "floor_half.json", "floor_half", "max(min(1.0, div(target_prob, draft_prob)), 0.5)")
    given = _champion_json(tmp_path / "again_standard.json", "again_standard",
                           "min(1.0, div(target_prob, draft_prob))")
    rows = {r["heuristic"]: r for r in records("--data", dataset, "--champions-dir", cdir, "--champion", given)}
    std, floor, again = rows["standard_rejection"], rows["floor_half"], rows["again_standard"]
    assert floor["role"] == again["role"] == "champion" and std["role"] == "baseline"
    assert floor["delta_fitness"] == pytest.approx(floor["fitness"] - std["fitness"])
    assert floor["delta_acceptance"] == pytest.approx(floor["acceptance_rate"] - std["acceptance_rate"])
    assert floor["delta_acceptance"] > 0 and floor["expected_tv"] > 0
    assert again["delta_fitness"] == 0 and again["fitness"] == std["fitness"]
    table = ok("--data", dataset, "--champions-dir", cdir, "--champion", given, "--repeats", "1").stdout
    assert "ΔFitness" in table and "floor_half" in table and "again_standard" in table


def test_same_champion_twice_is_listed_once(tmp_path, dataset):
    cdir = tmp_path / "champs"
    cdir.mkdir()
    path = _champion_json(cdir / "c.json", "c", "min(1.0, mul(1.1, div(target_prob, draft_prob)))")
    rows = records("--data", dataset, "--champions-dir", cdir, "--champion", path)
    assert [r["heuristic"] for r in rows].count("c") == 1


def _with(**changes) -> str:
    doc = _champion_doc("ok_name", "min(1.0, div(target_prob, draft_prob))")
    doc.update(changes)
    return json.dumps({k: v for k, v in doc.items() if v is not None})


# file text of each case (made lazily: the valid parts come from the champion module); every hostile
# expression sits in an otherwise valid champion file
HOSTILE = {
    "not JSON": lambda: '{"name": "x", "expression": ',
    "not an object": lambda: "[1, 2, 3]",
    "no expression": lambda: _with(expression=None),
    "expression not a string": lambda: _with(expression=3),
    "python code": lambda: _with(expression="__import__('os').system('touch PWNED')"),
    "attribute access": lambda: _with(expression="draft_prob.__class__"),
    "lambda": lambda: _with(expression="(lambda: 1)()"),
    "unknown primitive": lambda: _with(expression="pow(draft_prob, 2.0)"),
    "wrong arity": lambda: _with(expression="div(draft_prob)"),
    "trailing text": lambda: _with(expression="draft_prob; import os"),
    "deep nesting": lambda: _with(expression="sqrt(" * 30_000 + "draft_prob" + ")" * 30_000),
    "NaN constant": lambda: _with(expression="mul(draft_prob, nan)"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_champion_file_is_refused(tmp_path, dataset, empty_champions, previous_output, case,
                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.json"
    path.write_text(HOSTILE[case]())
    out, before = previous_output
    result = run("--data", dataset, "--champions-dir", empty_champions, "--champion", path, "--output", out)
    assert_clean_failure(result, ["evil.json"], out, before)
    assert not (tmp_path / "PWNED").exists()


def test_hostile_file_in_the_champions_directory_is_refused(tmp_path, dataset, previous_output):
    cdir = tmp_path / "champs"
    cdir.mkdir()
    (cdir / "evil.json").write_text(HOSTILE["python code"]())
    out, before = previous_output
    result = run("--data", dataset, "--champions-dir", cdir, "--output", out)
    assert_clean_failure(result, ["evil.json"], out, before)

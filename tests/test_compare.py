"""evolve.report.compare.table: scoring every rule on a split, deltas, skipping, and the four output formats."""
from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from evolve.errors import InputError
from evolve.traces.io import Traces
from evolve.traces.synth.independent import generate_split
from evolve.report.compare.rows import ComparedRule, Comparison, FORMATS
from evolve.report.compare.rows import ROW_KEYS
from evolve.report.compare.table import baseline_entries, resolve_splits, score_split, timed_evaluate
from evolve.report.compare.format import format_csv, format_json, format_markdown, format_table
from evolve.report.output import write_output
from evolve.report.output import resolve_format
from evolve.gp.compiler import evaluate_numpy
from evolve.eval.evaluator import EvalData, evaluate, reference_metrics
from heuristics.baselines import BASELINES
from heuristics.contract import Rule


@pytest.fixture(scope="module")
def traces() -> Traces:
    return Traces.from_frame(generate_split(20, 11), source="mem/test.parquet", split="test")


@pytest.fixture(scope="module")
def split(traces) -> EvalData:
    return EvalData.from_traces(traces)


def _champion(name: str, expression: str) -> ComparedRule:
    return ComparedRule(Rule(name, expression=expression), "champion", f"{name}.json")


def _comparison(split, entries, repeats=1) -> Comparison:
    rows, notes = score_split(entries, split, repeats)
    return Comparison(rows, notes, repeats, (split.split,), {split.split: split.n},
                              {split.split: split.source})


def test_baseline_entries_are_the_registry():
    names = [e.rule.name for e in baseline_entries()]
    assert names[:len(BASELINES)] == [r.name for r in BASELINES]
    assert all(e.kind == "baseline" for e in baseline_entries())


def test_rows_match_the_numpy_reference(split, traces):
    entries = [ComparedRule(r, "baseline", "registry") for r in BASELINES]  # the seven baselines
    rows, notes = score_split(entries, split, repeats=2)
    assert not notes and [r.heuristic for r in rows] == [e.rule.name for e in entries]
    cols = {k: traces[k].astype(np.float64) for k in ("draft_prob", "target_prob", "position", "draft_entropy",
                                                     "target_entropy", "top_token_match")}
    for row in rows:
        rule = next(r for r in BASELINES if r.name == row.heuristic)
        ref = reference_metrics(evaluate_numpy(rule.nodes, cols, traces.n), traces)
        got = row.metrics.to_dict()
        for key, value in ref.to_dict().items():
            if value is None:  # block metrics: not asked for
                assert got[key] is None, (row.heuristic, key)
            else:
                assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), (row.heuristic, key)
        assert row.time_ms > 0 and row.split == "test" and row.delta_fitness is None


def test_timed_evaluate_returns_the_metrics_and_a_time(split):
    rule = BASELINES[0]
    metrics, ms = timed_evaluate(rule, split, repeats=2)
    assert metrics == evaluate(rule, split)
    assert 0 < ms < 60_000
    with pytest.raises(ValueError):
        timed_evaluate(rule, split, repeats=0)


def test_champion_deltas_against_standard_rejection(split):
    entries = baseline_entries() + [_champion("floor_half", "max(min(1.0, div(target_prob, draft_prob)), 0.5)"),
                                            _champion("same_as_standard", "min(1.0, div(target_prob, draft_prob))")]
    rows, _ = score_split(entries, split, repeats=1)
    by = {r.heuristic: r for r in rows}
    std, floor, same = by["standard_rejection"], by["floor_half"], by["same_as_standard"]
    assert floor.kind == "champion"
    assert floor.delta_fitness == pytest.approx(floor.metrics.fitness - std.metrics.fitness)
    assert floor.delta_acceptance == pytest.approx(floor.metrics.acceptance_rate - std.metrics.acceptance_rate)
    assert floor.delta_expected_tv > 0 and floor.delta_acceptance > 0  # a floor accepts more and damages
    assert floor.delta_fitness < 0
    assert same.delta_fitness == 0 and same.delta_acceptance == 0 and same.delta_expected_tv == 0
    assert all(r.delta_fitness is None for r in rows if r.kind == "baseline")


def test_rule_needing_a_missing_column_is_skipped_with_a_note(split):
    needs = _champion("uses_overlap", "min(1.0, add(div(target_prob, draft_prob), overlap))")
    entries = baseline_entries() + [needs]
    rows, notes = score_split(entries, split, repeats=1)
    assert "uses_overlap" not in {r.heuristic for r in rows}
    # seed-model data has no optional columns: published rules that need one are skipped too
    needing = [e.rule.name for e in entries if e.rule.columns_needed]
    assert len(notes) == len(needing) and all(f"skipped {name} " in note for name, note in zip(needing, notes))
    assert "uses_overlap" in notes[-1] and "'overlap'" in notes[-1]
    assert "mem/test.parquet" in notes[-1]


def test_duplicate_labels_are_disambiguated(split):
    other = ComparedRule(Rule("x", expression="0.25"), "champion", "other/x.json")
    entries = baseline_entries() + [_champion("x", "0.5"), other]
    rows, _ = score_split(entries, split, repeats=1)
    labels = [r.heuristic for r in rows if r.kind == "champion"]
    assert labels == ["x", "x (x.json)"]


def test_resolve_options():
    assert resolve_splits("all") == ("train", "valid", "test")
    assert resolve_splits("valid") == ("valid",)
    with pytest.raises(InputError, match="--split"):
        resolve_splits("holdout")
    assert resolve_format(None, None, FORMATS) == "table"
    assert resolve_format(None, "out/x.json", FORMATS) == "json"
    assert resolve_format(None, "x.md", FORMATS) == "markdown"
    assert resolve_format(None, "x.csv", FORMATS) == "csv"
    assert resolve_format("csv", "x.json", FORMATS) == "csv"
    with pytest.raises(InputError, match="--format"):
        resolve_format("html", None, FORMATS)


def test_json_and_csv_hold_the_same_rows(split):
    comp = _comparison(split, baseline_entries() + [_champion("c", "0.9")])
    records = json.loads(format_json(comp))
    assert [list(r) for r in records] == [list(ROW_KEYS)] * len(comp.rows)
    table = list(csv.DictReader(io.StringIO(format_csv(comp))))
    assert len(table) == len(records)
    for rec, line in zip(records, table):
        for key in ROW_KEYS:
            if rec[key] is None:
                assert line[key] == ""
            elif isinstance(rec[key], (int, float)):
                assert float(line[key]) == pytest.approx(rec[key], rel=1e-15)
            else:
                assert line[key] == str(rec[key])
    champ = records[-1]
    assert champ["kind"] == "champion" and champ["delta_fitness"] is not None
    assert records[0]["delta_fitness"] is None


def test_table_and_markdown_show_every_rule_and_the_notes(split):
    needs = _champion("uses_overlap", "overlap")
    comp = _comparison(split, baseline_entries() + [_champion("c", "0.9"), needs])
    table = format_table(comp)
    md = format_markdown(comp)
    for text in (table, md):
        for name in [r.name for r in BASELINES] + ["c"]:
            assert name in text
        for header in ("Heuristic", "Accept%", "Accuracy", "Quality", "Fitness", "Time", "E[accept]", "E[TV]",
                       "E[fitness]", "ΔFitness", "ΔAccept"):
            assert header in text
        assert "uses_overlap" in text  # only in the note
    lines = [line for line in md.splitlines() if line.startswith("|")]
    assert len(lines) == 2 + len(comp.rows)
    assert len({line.count("|") for line in lines}) == 1
    std = next(r for r in comp.rows if r.heuristic == "standard_rejection")
    std_line = next(line for line in md.splitlines() if line.startswith("| standard_rejection "))
    assert f"{100 * std.metrics.acceptance_rate:.1f}%" in std_line and f"{std.metrics.fitness:.3f}" in std_line


def test_no_delta_columns_without_champions(split):
    comp = _comparison(split, baseline_entries())
    assert "ΔFitness" not in format_table(comp) and "ΔFitness" not in format_markdown(comp)


def test_write_output_is_atomic_and_refuses_directories(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    write_output("hello\n", target)
    assert target.read_text() == "hello\n"
    assert not [p for p in target.parent.iterdir() if ".tmp-" in p.name]
    with pytest.raises(InputError, match="--output"):
        write_output("x", tmp_path)


def test_block_level_columns(tmp_path):
    """Datasets with draft_index get tokens per call, speedup and TV per token; others get nulls."""
    import json as _json

    from click.testing import CliRunner

    import benchmark
    from evolve.traces.synth.generate import generate_dataset, write

    write(generate_dataset("vocab", 3, 30), tmp_path / "vocab", "parquet")
    runner = CliRunner()
    res = runner.invoke(benchmark.cli, ["--data", str(tmp_path / "vocab"), "--format", "json", "--repeats", "1",
                                        "--cost-ratio", "0.1"])
    assert res.exit_code == 0, res.output
    rows = {r["heuristic"]: r for r in _json.loads(res.stdout)}
    std, always = rows["standard_rejection"], rows["always_accept"]
    assert std["gamma"] == 5 and std["cost_ratio"] == 0.1
    assert std["tv_per_token"] == 0.0 and 1.0 < std["tokens_per_call"] < 6.0
    assert always["tokens_per_call"] == 6.0 and always["speedup"] == pytest.approx(6.0 / 1.5)
    res = runner.invoke(benchmark.cli, ["--data", str(tmp_path / "vocab"), "--format", "json", "--repeats", "1",
                                        "--gamma", "2"])
    rows2 = {r["heuristic"]: r for r in _json.loads(res.stdout)}
    assert rows2["always_accept"]["tokens_per_call"] == 3.0
    assert rows2["standard_rejection"]["tokens_per_call"] < std["tokens_per_call"]

"""evolve.commands.compare.table: scoring every rule on a split, deltas, skipping, and the four output formats."""
from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
from helpers import split_verdict
import pytest

from evolve.errors import InputError
from evolve.traces.io import Traces
from evolve.traces.synth.independent import generate_split
from evolve.report.compare.rows import ComparedRule, Comparison, FORMATS
from evolve.report.compare.rows import ROW_KEYS
from evolve.commands.compare.table import baseline_entries, resolve_splits, score_split, timed_evaluate
from evolve.eval.evaluator import AcceptanceQualityFitness
from evolve.kinds.base import KindContext
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
    assert all(e.role == "baseline" for e in baseline_entries())


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
    metrics, ms = timed_evaluate(rule, KindContext(split, AcceptanceQualityFitness()), repeats=2)
    assert metrics == evaluate(rule, split)
    assert 0 < ms < 60_000
    with pytest.raises(ValueError):
        timed_evaluate(rule, KindContext(split, AcceptanceQualityFitness()), repeats=0)


def test_champion_deltas_against_standard_rejection(split):
    entries = baseline_entries() + [_champion("floor_half", "max(min(1.0, div(target_prob, draft_prob)), 0.5)"),
                                            _champion("same_as_standard", "min(1.0, div(target_prob, draft_prob))")]
    rows, _ = score_split(entries, split, repeats=1)
    by = {r.heuristic: r for r in rows}
    std, floor, same = by["standard_rejection"], by["floor_half"], by["same_as_standard"]
    assert floor.role == "champion"
    assert floor.delta_fitness == pytest.approx(floor.metrics.fitness - std.metrics.fitness)
    assert floor.delta_acceptance == pytest.approx(floor.metrics.acceptance_rate - std.metrics.acceptance_rate)
    assert floor.delta_expected_tv > 0 and floor.delta_acceptance > 0  # a floor accepts more and damages
    assert floor.delta_fitness < 0
    assert same.delta_fitness == 0 and same.delta_acceptance == 0 and same.delta_expected_tv == 0
    assert all(r.delta_fitness is None for r in rows if r.role == "baseline")


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
    labels = [r.heuristic for r in rows if r.role == "champion"]
    assert labels == ["x", "x (x.json)"]


def test_resolve_options():
    assert resolve_splits("all") == ("train", "valid", "test")
    assert resolve_splits("valid") == ("valid",)
    with pytest.raises(InputError, match="^split: unknown split 'holdout'"):
        resolve_splits("holdout")
    assert resolve_format(None, None, FORMATS) == "table"
    assert resolve_format(None, "out/x.json", FORMATS) == "json"
    assert resolve_format(None, "x.md", FORMATS) == "markdown"
    assert resolve_format(None, "x.csv", FORMATS) == "csv"
    assert resolve_format("csv", "x.json", FORMATS) == "csv"
    with pytest.raises(InputError, match="^fmt: unknown format 'html'"):
        resolve_format("html", None, FORMATS)


def test_json_and_csv_hold_the_same_rows(split):
    comp = _comparison(split, baseline_entries() + [_champion("c", "0.9")])
    records = json.loads(format_json(comp))["rows"]
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
    assert champ["role"] == "champion" and champ["delta_fitness"] is not None
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
    with pytest.raises(InputError, match="^output: .* is a directory"):
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
    rows = {r["heuristic"]: r for r in _json.loads(res.stdout)["rows"]}
    std, always = rows["standard_rejection"], rows["always_accept"]
    assert std["gamma"] == 5 and std["cost_ratio"] == 0.1
    assert std["tv_per_token"] == 0.0 and 1.0 < std["tokens_per_call"] < 6.0
    assert always["tokens_per_call"] == 6.0 and always["speedup"] == pytest.approx(6.0 / 1.5)
    res = runner.invoke(benchmark.cli, ["--data", str(tmp_path / "vocab"), "--format", "json", "--repeats", "1",
                                        "--gamma", "2"])
    rows2 = {r["heuristic"]: r for r in _json.loads(res.stdout)["rows"]}
    assert rows2["always_accept"]["tokens_per_call"] == 3.0
    assert rows2["standard_rejection"]["tokens_per_call"] < std["tokens_per_call"]


# --- the default table's width and the verdict ------------------------------------------------------

def _rows_with_fitness(split, values: dict[str, float], champions: dict[str, str] | None = None):
    """A comparison built directly: the baselines' rows of ``split`` with the given fitness values (by name; the
    others get 0.5) and one champion row per ``champions`` entry (label -> expression), whose fitness is
    ``values[label]``."""
    import dataclasses

    rows, _ = score_split(baseline_entries(), split, repeats=1)
    std = next(r for r in rows if r.heuristic == "standard_rejection")
    out = []
    for row in rows:
        if row.metrics is not None:
            fitness = values.get(row.heuristic, 0.5)
            row = dataclasses.replace(row, metrics=dataclasses.replace(row.metrics, fitness=fitness))
        out.append(row)
    ref_fitness = values.get("standard_rejection", std.metrics.fitness)
    for label, expression in (champions or {}).items():
        metrics = dataclasses.replace(std.metrics, fitness=values[label])
        out.append(dataclasses.replace(std, heuristic=label, role="champion", metrics=metrics, expression=expression,
                                       delta_fitness=values[label] - ref_fitness))
    return Comparison(out, [], 1, (split.split,), {split.split: split.n}, {split.split: split.source})


STANDARD = "min(1.0, div(target_prob, draft_prob))"


def test_verdict_when_the_champion_wins(split):
    from evolve.report.compare.verdict import compute_verdict

    comp = _rows_with_fitness(split, {"standard_rejection": 0.79, "c": 0.81}, {"c": "max(0.9, target_prob)"})
    verdict = compute_verdict(comp)
    assert (verdict.winner, verdict.winner_role, verdict.champion, verdict.reason) == ("c", "champion", "c", None)
    assert verdict.value == pytest.approx(0.81) and verdict.to_dict()["delta"] == pytest.approx(0.02)
    assert verdict.text == "verdict: champion c wins on test by fitness: 0.810 against standard_rejection's 0.790 (+0.020)"
    table = format_table(comp)
    assert table.splitlines()[-1] == verdict.text
    assert json.loads(format_json(comp))["verdict"] == json.loads(json.dumps(verdict.to_dict()))
    assert format_markdown(comp).rstrip().endswith("**Verdict:** " + verdict.text.removeprefix("verdict: "))


def test_verdict_when_standard_rejection_wins(split):
    """Ties go to standard_rejection; the line says why the champion does not win, from its file's provenance
    when the comparison has it, else from its expression, its objective or its origin."""
    from evolve.report.compare.verdict import compute_verdict

    tie = _rows_with_fitness(split, {"standard_rejection": 0.79, "champion": 0.79}, {"champion": STANDARD})
    tie.champions["champion"] = {"champion_source": "seeded:standard_rejection", "objective": "acceptance_quality"}
    verdict = compute_verdict(tie)
    assert verdict.winner == "standard_rejection" and verdict.champion == "champion"
    assert verdict.champion_source == "seeded:standard_rejection"
    assert verdict.text == ("verdict: standard_rejection wins on test by fitness (0.790); the champion is "
                            "standard_rejection itself (evolution found nothing better on valid)")
    tie.champions.clear()  # rows built without champion files: the expression still tells
    assert compute_verdict(tie).text.endswith("; the champion is standard_rejection itself")

    lower = _rows_with_fitness(split, {"standard_rejection": 0.79, "ev": 0.75}, {"ev": "mul(0.9, target_prob)"})
    lower.champions["ev"] = {"champion_source": "evolved", "objective": "acceptance_quality"}
    assert compute_verdict(lower).text == (
        "verdict: standard_rejection wins on test by fitness (0.790); champion ev scores 0.750 (-0.040 against "
        "standard_rejection): an evolved rule whose lead on valid does not carry over to test")
    lower.champions["ev"] = {"champion_source": "evolved", "objective": "pareto"}
    assert compute_verdict(lower).reason == "its run optimised the pareto objective, not fitness"
    lower.champions["ev"] = {"champion_source": "seeded:ears_0.1", "objective": "acceptance_quality"}
    assert compute_verdict(lower).reason == ("it is the seeded rule ears_0.1 (evolution found nothing better on "
                                             "valid)")

    # another registered rule wins: the margin is against standard_rejection
    other = _rows_with_fitness(split, {"standard_rejection": 0.79, "entropy_aware": 0.80})
    assert compute_verdict(other).text == ("verdict: entropy_aware wins on test by fitness: 0.800 against "
                                           "standard_rejection's 0.790 (+0.010)")
    # no champion: standard rejection's lead over the next best rule
    alone = _rows_with_fitness(split, {"standard_rejection": 0.79, "entropy_aware": 0.70})
    verdict = compute_verdict(alone)
    assert verdict.runner_up == "entropy_aware" and verdict.champion is None
    assert verdict.text == ("verdict: standard_rejection wins on test by fitness (0.790), 0.090 ahead of the next "
                            "best, entropy_aware")


def test_verdict_reads_the_champion_file(split, tmp_path):
    """run_comparison records each champion file's champion_source for the verdict (through the command line)."""
    from click.testing import CliRunner

    import benchmark
    from evolve.traces.io import write_dataset
    from heuristics.champions import Champion, champion_json

    data = tmp_path / "data"
    write_dataset(data, {s: generate_split(6, seed) for s, seed in (("train", 1), ("valid", 2), ("test", 3))},
                  {"generator": {"name": "test"}})
    champ = Champion("champion", STANDARD, "the seeded rule standard_rejection", features=(),
                     metrics={"train": {"fitness": 0.8}, "valid": {"fitness": 0.8}},
                     provenance={"champion_source": "seeded:standard_rejection"})
    path = tmp_path / "run" / "champion.json"
    path.parent.mkdir()
    path.write_text(champion_json(champ))
    empty = tmp_path / "champions"
    empty.mkdir()
    res = CliRunner().invoke(benchmark.cli, ["--data", str(data), "--champion", str(path), "--champions-dir",
                                             str(empty), "--repeats", "1"])
    assert res.exit_code == 0, res.output
    verdict = split_verdict(res.stdout.splitlines())[1]
    # on this small split a looser rule may decide every record as standard rejection does: a tie, said as one
    assert re.match(r"verdict: standard_rejection (wins|ties with [^:]+: \d rows share the best value) on test by "
                    r"fitness \(", verdict), verdict
    assert verdict.endswith("; the champion is standard_rejection itself (evolution found nothing better on valid)")
    res = CliRunner().invoke(benchmark.cli, ["--data", str(data), "--champion", str(path), "--champions-dir",
                                             str(empty), "--repeats", "1", "--format", "csv"])
    assert res.exit_code == 0 and split_verdict(res.stderr.splitlines())[1].startswith("verdict: standard_rejection ")


def test_default_table_fits_in_100_columns(tmp_path):
    """Every line of the default table format, the verdict too, is at most 100 characters, with blocks, champions
    (one with a long name), every split and notes; markdown keeps every column."""
    from click.testing import CliRunner

    import benchmark
    from evolve.traces.synth.generate import generate_dataset, write
    from heuristics.champions import Champion, champion_json

    write(generate_dataset("vocab", 3, 30), tmp_path / "vocab", "parquet")
    champs = tmp_path / "champions"
    champs.mkdir()
    for name, expression in (("c", "max(0.5, min(1.0, div(target_prob, draft_prob)))"),
                             ("a_champion_with_a_rather_long_name_indeed", STANDARD),
                             ("needs_overlap", "min(1.0, add(div(target_prob, draft_prob), overlap))")):
        (champs / f"{name}.json").write_text(champion_json(Champion(
            name, expression, features=("target_prob", "draft_prob", "overlap"),
            metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}})))
    for extra in ([], ["--split", "all"]):
        res = CliRunner().invoke(benchmark.cli, ["--data", str(tmp_path / "vocab"), "--champions-dir", str(champs),
                                                 "--repeats", "1", *extra])
        assert res.exit_code == 0, res.output
        lines = res.stdout.splitlines()
        assert split_verdict(lines)[1].startswith("verdict: ")
        too_wide = [line for line in lines if len(line) > 100]  # the verdict too: wrapped
        assert not too_wide, too_wide
        header = lines[0].split()
        assert header[-9:] == ["Heuristic", "Accept%", "Fitness", "Mean", "acc.", "len", "Speedup", "TV/tok", "ΔFitness"]
        assert "a_champion_with_a_rather_long_name_in" in res.stdout  # folded, not cut
        md = CliRunner().invoke(benchmark.cli, ["--data", str(tmp_path / "vocab"), "--champions-dir", str(champs),
                                                "--repeats", "1", "--format", "markdown", *extra]).stdout
        md_header = [c.strip() for c in md.splitlines()[0].strip("|").split("|")]
        assert {"Accuracy", "Quality", "Time", "E[accept]", "E[TV]", "E[fitness]", "ΔE[TV]"} <= set(md_header)

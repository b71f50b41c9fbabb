"""Per-batch-size draft-length schedules (evolve.kinds.verify_length.eval_schedule) and their rows in
``benchmark.py --costs FILE --concurrency R,...``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import benchmark
from evolve.eval.costs import load_costs
from evolve.eval.evaluator import EvalData
from evolve.kinds.verify_length.eval_policy import LengthMetrics
from evolve.kinds.verify_length.eval_schedule import (ScheduleRange, batch_schedule, fixed_length_table,
                                                      length_throughput, nearest_schedule, schedule_length)
from evolve.traces.io import load_split

COSTS = Path(__file__).resolve().parent.parent / "docs" / "costs" / "gpu_batched.json"
REQUESTS = (1, 4, 16, 64, 256)


def _metrics(tpc: float, verified: float) -> LengthMetrics:
    return LengthMetrics(100, 10, tpc, 1.0, tpc, tpc, verified, verified)


def test_schedule_merges_equal_lengths_and_picks_the_fastest():
    costs = load_costs(COSTS)
    # length 0: plain decoding; length 1 and 4: more tokens per call for more verified tokens
    table = [_metrics(1.0, 0.0), _metrics(1.8, 1.0), _metrics(1.9, 2.0), _metrics(1.95, 3.0), _metrics(2.0, 4.0)]
    schedule = batch_schedule(table, [256, 1, 4, 4, 16, 64], costs)
    assert schedule[0].start == 1 and schedule[-1].end is None
    for earlier, later in zip(schedule, schedule[1:]):
        assert earlier.length != later.length and earlier.end == later.start - 1
    for r in (1, 4, 16, 64, 256):
        best = max(length_throughput(m, r, costs) for m in table)
        assert length_throughput(table[schedule_length(schedule, r)], r, costs) == best
    assert schedule_length(schedule, 3) == schedule_length(schedule, 1)  # a range runs to the next batch size
    with pytest.raises(ValueError):
        batch_schedule(table, [], costs)


def test_nearest_schedule_of_a_policy():
    assert nearest_schedule(_metrics(2.0, 2.6), gamma=5) == (ScheduleRange(1, None, 3),)
    assert nearest_schedule(_metrics(2.0, 9.0), gamma=5) == (ScheduleRange(1, None, 5),)
    assert nearest_schedule(_metrics(float("nan"), float("nan")), gamma=5) == (ScheduleRange(1, None, 0),)


def test_benchmark_prints_the_schedule_tuned_on_valid(vocab_dataset):
    args = ["--data", str(vocab_dataset), "--costs", str(COSTS), "--concurrency", ",".join(map(str, REQUESTS)),
            "--repeats", "1"]
    res = CliRunner().invoke(benchmark.cli, args)
    assert res.exit_code == 0, res.output
    assert "per-batch-size schedule (test, tuned on valid" in res.stdout
    doc = json.loads(CliRunner().invoke(benchmark.cli, [*args, "--format", "json"]).stdout)
    ranges = doc["schedules"]["test"]["ranges"]
    assert doc["schedules"]["test"]["tuned_on"] == "valid" and ranges[0][0] == 1 and ranges[-1][1] is None
    # the schedule is the best fixed length at every batch size on valid, so at R = 1 it is best_fixed_gamma's
    costs = load_costs(COSTS)
    gamma = max(r["gamma"] for r in doc["rows"] if r["gamma"] is not None)
    valid = fixed_length_table(EvalData.from_traces(load_split(vocab_dataset, "valid")), gamma, costs)
    schedule = [ScheduleRange(*r) for r in ranges]
    for r in REQUESTS:
        assert length_throughput(valid[schedule_length(schedule, r)], r, costs) == max(
            length_throughput(m, r, costs) for m in valid)
    best = next(r for r in doc["rows"] if r["heuristic"] == "best_fixed_gamma")
    assert best["expression"].startswith(f"gamma={schedule_length(schedule, 1)} ")
    rows = {r["heuristic"]: r for r in doc["concurrency"]}
    assert "per-batch-size schedule" in rows and "block_verification" in rows  # a row without a kind is kept
    assert rows["per-batch-size schedule"]["speedup"]["1"] == pytest.approx(rows["best_fixed_gamma"]["speedup"]["1"])


def test_export_writes_the_schedule_benchmark_prints(vocab_dataset, tmp_path):
    """``export --to vllm|tensorrt-llm --concurrency`` writes the ranges ``benchmark.py --concurrency`` tunes (the last
    one closed at LAST_BATCH_SIZE); an engine without a per-batch-size setting refuses in one line."""
    from evolve.cli.evolve import cli as evolve_cli
    from evolve.export.engines.tensorrt_llm import schedule_length as trt_length
    from evolve.export.engines.vllm import schedule_length as vllm_length
    from evolve.kinds.verify_length.export_engines import LAST_BATCH_SIZE

    requests = ",".join(map(str, REQUESTS))
    doc = json.loads(CliRunner().invoke(benchmark.cli, ["--data", str(vocab_dataset), "--costs", str(COSTS),
                                                        "--concurrency", requests, "--format", "json",
                                                        "--repeats", "1"]).stdout)
    want = [[r[0], LAST_BATCH_SIZE if r[1] is None else r[1], r[2]] for r in doc["schedules"]["test"]["ranges"]]
    base = ["export", "fixed_gamma:gamma=3", "--data", str(vocab_dataset), "--costs", str(COSTS),
            "--concurrency", requests]
    res = CliRunner().invoke(evolve_cli, [*base, "--to", "vllm", "--output", str(tmp_path / "v.yaml")])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "v.yaml").read_text()
    config = json.loads(text.split("speculative-config: ", 1)[1])
    assert config["num_speculative_tokens"] == max(r[2] for r in want)
    res = CliRunner().invoke(evolve_cli, [*base, "--to", "tensorrt-llm", "--output", str(tmp_path / "t.yaml")])
    assert res.exit_code == 0, res.output
    trt = (tmp_path / "t.yaml").read_text()
    # each engine, reading its file as it does, drafts the tuned length at every batch size of every range
    for start, end, length in want:
        for batch in {start, (start + end) // 2, end}:
            assert vllm_length(text, batch) == length and trt_length(trt, batch) == length, (batch, length)
    res = CliRunner().invoke(evolve_cli, [*base, "--to", "sglang"])
    assert res.exit_code == 2 and "--concurrency needs" in res.output and "Traceback" not in res.output

"""The simulate command (evolve/commands/simulate.py, evolve/cli/simulate.py) through click's test runner: table, JSON, chart, bad options."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from evolve.cli.simulate import simulate
from evolve.report.simulate import SWEEP_KEYS, TREE_KEYS
from heuristics.champions import Champion, save_champion

SMALL = ["--lengths", "30,60", "--samples", "3", "--vocab", "80", "--gamma", "3", "--seed", "4"]
CONTRACT_KEYS = {"length", "target_calls", "calls_per_token", "acceptance_rate", "tokens_per_call",
                 "analytic_tokens_per_call", "speedup", "tv_empirical", "tv_expected"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(*args):
    return CliRunner().invoke(simulate, [str(a) for a in args])


def test_table_output_and_chart(tmp_path):
    out = tmp_path / "sweep.txt"
    res = run(*SMALL, "--output", out)
    assert res.exit_code == 0, res.output
    text = out.read_text()
    for col in ("Length", "AR calls", "Spec calls", "Calls/token", "Accept", "Mean acc. len", "Analytic",
                "Speedup", "TV emp", "TV exp"):
        assert col in text
    assert "rule standard_rejection, gamma 3, vocab 80" in text
    assert (tmp_path / "sweep.png").read_bytes().startswith(PNG_MAGIC)
    assert "wrote" in res.output


def test_json_rows(tmp_path):
    out = tmp_path / "sweep.json"
    res = run(*SMALL, "--rule", "ratio_floor_0.3", "--cost-ratio", "0.1", "--output", out, "--no-plot")
    assert res.exit_code == 0, res.output
    rows = json.loads(out.read_text())
    assert [r["length"] for r in rows] == [30, 60]
    assert not (tmp_path / "sweep.png").exists()
    for r in rows:
        assert CONTRACT_KEYS <= set(r) and set(r) == set(SWEEP_KEYS)
        assert r["calls_per_token"] == pytest.approx(r["target_calls"] / r["length"])
        assert r["speculative_time"] == pytest.approx(r["target_calls"] * (1 + 3 * 0.1))
        assert r["speedup"] == pytest.approx(r["length"] / r["speculative_time"])
        assert r["autoregressive_calls"] == r["length"]
        assert 1.0 <= r["tokens_per_call"] <= 4.0 and 1.0 <= r["analytic_tokens_per_call"] <= 4.0
        assert 0.0 <= r["tv_empirical"] <= 1.0 and 0.0 <= r["tv_expected"] <= 1.0
        assert r["rule"] == "ratio_floor_0.3" and r["gamma"] == 3 and r["vocab"] == 80


def test_same_seed_same_json_and_lossless_standard_rule():
    a = run(*SMALL, "--format", "json", "--no-plot")
    b = run(*SMALL, "--format", "json", "--no-plot")
    assert a.exit_code == 0 and a.output == b.output
    rows = json.loads(a.output)
    assert all(r["tv_empirical"] == 0.0 and r["tv_expected"] == 0.0 for r in rows)
    c = run(*SMALL[:-1], "5", "--format", "json", "--no-plot")
    assert c.output != a.output


def test_chart_goes_to_results_without_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run(*SMALL, "--rule", "always_accept")
    assert res.exit_code == 0, res.output
    assert "Speedup by generation length" in res.output
    assert (tmp_path / "results" / "simulate_always_accept.png").read_bytes().startswith(PNG_MAGIC)


def test_champion_file(tmp_path):
    ch = Champion(name="sim_champ", expression="max(min(1.0, div(target_prob, draft_prob)), 0.2)",
                  description="test", features=("draft_prob", "target_prob"), objective="acceptance_quality",
                  metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}})
    path, _ = save_champion(ch, tmp_path)
    res = run(*SMALL, "--champion", path, "--format", "json", "--no-plot")
    assert res.exit_code == 0, res.output
    assert {r["rule"] for r in json.loads(res.output)} == {"sim_champ"}


def test_trees_mode(tmp_path):
    out = tmp_path / "trees.json"
    res = run("--trees", "--budgets", "3,6", "--widths", "2,1", "--lengths", "60", "--samples", "2",
              "--vocab", "60", "--output", out)
    assert res.exit_code == 0, res.output
    rows = json.loads(out.read_text())
    assert len(rows) == 24 and set(rows[0]) == set(TREE_KEYS)
    assert {(r["draft"], r["verification"]) for r in rows} == {
        (k, v) for k in ("chain", "tree", "adaptive", "medusa") for v in ("sample", "traversal", "greedy")}
    for r in rows:
        assert r["nodes_per_call"] == r["budget"] and r["length"] == 60
        assert 1.0 <= r["tokens_per_call"] <= r["budget"] + 1
    assert (tmp_path / "trees.png").read_bytes().startswith(PNG_MAGIC)
    text = run("--trees", "--budgets", "3", "--lengths", "40", "--samples", "1", "--vocab", "50", "--no-plot")
    assert text.exit_code == 0 and "Mean acc. len" in text.output and "medusa 3,1" in text.output


@pytest.mark.parametrize("args, needle", [
    (["--gamma", "0"], "--gamma"),
    (["--gamma", "65"], "--gamma"),
    (["--lengths", "10,x"], "--lengths"),
    (["--lengths", "0"], "--lengths"),
    (["--lengths", ""], "--lengths"),
    (["--samples", "0"], "--samples"),
    (["--vocab", "1"], "--vocab"),
    (["--seed", "-1"], "--seed"),
    (["--cost-ratio", "-0.5"], "--cost-ratio"),
    (["--cost-ratio", "nan"], "--cost-ratio"),
    (["--rule", "no_such_rule"], "unknown rule"),
    (["--rule", "standard_rejection", "--champion", "x.json"], "at most one"),
    (["--champion", "missing.json"], "no such file"),
    (["--format", "xml"], "--format"),
    (["--trees", "--budgets", "4,0"], "--budgets"),
    (["--trees", "--widths", "2,a"], "--widths"),
    (["--trees", "--max-width", "0"], "--max-width"),
    (["--trees", "--rule", "always_accept"], "--trees"),
    (["--gamma", "two"], "--gamma"),
])
def test_bad_options_one_line_exit_2(args, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run(*args, "--no-plot")
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], res.output
    assert "Traceback" not in res.output
    assert not any(tmp_path.iterdir())


def test_bad_champion_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "specdec-evolve champion", "expression": "__import__(1)"}')
    res = run(*SMALL, "--champion", bad, "--no-plot")
    assert res.exit_code == 2 and res.output.startswith("error: ") and "bad.json" in res.output


def test_output_must_not_clash_with_the_chart(tmp_path):
    res = run(*SMALL, "--output", tmp_path / "x.png")
    assert res.exit_code == 2 and "--output" in res.output
    res = run(*SMALL, "--output", tmp_path)
    assert res.exit_code == 2 and "directory" in res.output


def test_registered_in_benchmark_cli():
    import benchmark
    assert "simulate" in benchmark.cli.commands, "benchmark.py does not register the simulate command"
    res = CliRunner().invoke(benchmark.cli, ["simulate", *SMALL, "--format", "json", "--no-plot"])
    assert res.exit_code == 0, res.output
    assert [r["length"] for r in json.loads(res.output)] == [30, 60]


def test_verify_block_and_fly_rows():
    token = json.loads(run(*SMALL, "--format", "json", "--no-plot").output)
    block = json.loads(run(*SMALL, "--verify", "block", "--format", "json", "--no-plot").output)
    fly = json.loads(run(*SMALL, "--verify", "fly", "--fly-window", "1", "--format", "json", "--no-plot").output)
    for rows, kind in ((token, "token"), (block, "block"), (fly, "fly")):
        assert all(set(r) == set(SWEEP_KEYS) and r["verification"] == kind for r in rows)
    assert all(r["tv_empirical"] == r["tv_expected"] == r["context_tv"] == 0.0 for r in token + block)
    assert all(r["fly_window"] is None for r in token + block)
    assert all((r["fly_window"], r["fly_threshold"], r["fly_top_k"]) == (1, 0.3, 3) for r in fly)
    assert all(1.0 <= r["tokens_per_call"] <= 4.0 and 0.0 < r["context_tv"] < 1.0 for r in fly)
    table = run(*SMALL, "--verify", "fly", "--no-plot").output
    assert "verification fly(W=2, theta=0.3, k=3)" in table and "Damage at 8 fixed contexts" in table
    assert "verification block" in run(*SMALL, "--verify", "block", "--no-plot").output


def test_rule_block_verification_is_verify_block():
    """``--rule block_verification`` (the verifier benchmark.py and live name so) is --verify block with the
    standard rule: the same rows, named block_verification; --verify token/fly with it is refused."""
    block = json.loads(run(*SMALL, "--verify", "block", "--format", "json", "--no-plot").output)
    named = json.loads(run(*SMALL, "--rule", "block_verification", "--format", "json", "--no-plot").output)
    assert [r["rule"] for r in named] == ["block_verification"] * len(block)
    assert [{**r, "rule": None} for r in named] == [{**r, "rule": None} for r in block]
    relaxed = json.loads(run(*SMALL, "--rule", "block_verification", "--relaxation", "0.1", "--format", "json",
                             "--no-plot").output)
    assert all(r["verification"] == "block" and r["relaxation"] == "0.1" for r in relaxed)
    res = run(*SMALL, "--rule", "block_verification", "--verify", "token", "--no-plot")
    assert res.exit_code == 2 and "--verify" in res.output and len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("args, needle", [
    (["--verify", "block", "--rule", "ratio_floor_0.3"], "--verify"),
    (["--verify", "fly", "--rule", "always_accept"], "standard rule only"),
    (["--verify", "tree"], "--verify"),
    (["--fly-window", "2"], "--fly-window"),
    (["--verify", "fly", "--fly-window", "3"], "--fly-window"),
    (["--verify", "fly", "--fly-threshold", "-1"], "--fly-threshold"),
    (["--verify", "fly", "--fly-top-k", "0"], "--fly-top-k"),
    (["--verify", "fly", "--gamma", "1"], "--gamma"),
    (["--trees", "--verify", "block"], "--trees"),
])
def test_bad_verification_options(args, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run(*SMALL, *args, "--no-plot")
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], res.output


def test_trees_report_progress_on_stderr():
    """The tree comparison runs for many seconds at the default sizes: it says on stderr how many configurations
    are done (plain lines), keeps stdout for the table, and --no-progress silences it."""
    args = ["--trees", "--budgets", "3", "--lengths", "40", "--samples", "1", "--vocab", "50", "--no-plot"]
    res = run(*args)
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines[0].startswith("tree configurations 0/") and "tree configurations" not in res.stdout
    total = lines[0].split()[2].split("/")[1]
    assert lines[-1].startswith(f"tree configurations {total}/{total}")
    quiet = run(*args, "--no-progress")
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == res.stdout

"""The verdict says what to try next when a champion of an acceptance-quality run does not beat standard rejection.

Standard rejection is the optimum of the acceptance-quality fitness (docs/reference/math.md, section 3), so
the first command of the README ends, as a rule, with the champion tied to it; the lines before the verdict
then point at the objectives that can buy speed. They are printed only when the champion's file says which
objective its run optimised, and every one of them fits in 100 columns.
"""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from helpers import split_verdict

import benchmark
from evolve.eval.objectives import OBJECTIVES
from evolve.report.compare.verdict import MEASURE, NEXT_STEPS
from evolve.traces.io import write_dataset
from evolve.traces.synth.independent import generate_split
from heuristics.champions import Champion, champion_json

STANDARD = "min(1.0, div(target_prob, draft_prob))"
#: The objectives whose champions the acceptance-quality fitness judges.
FITNESS_OBJECTIVES = {name for name, o in OBJECTIVES.items() if o.measure == MEASURE}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("hint") / "data"
    write_dataset(path, {s: generate_split(6, seed) for s, seed in (("train", 1), ("valid", 2), ("test", 3))},
                  {"generator": {"name": "test"}})
    return path


def _champion(tmp_path, expression: str, objective: str, source: str):
    champ = Champion("champion", expression, "a champion", features=(), objective=objective,
                     metrics={"train": {"fitness": 0.8}, "valid": {"fitness": 0.8}},
                     provenance={"champion_source": source})
    path = tmp_path / "run" / "champion.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(champion_json(champ))
    empty = tmp_path / "champions"
    empty.mkdir(exist_ok=True)
    return ["--champion", str(path), "--champions-dir", str(empty), "--repeats", "1"]


def _run(data, args, *extra):
    res = CliRunner().invoke(benchmark.cli, ["--data", str(data), *args, *extra])
    assert res.exit_code == 0, res.output
    return res


def test_the_hint_names_real_objectives_and_fits_in_100_columns():
    assert all(len(line) <= 100 for line in NEXT_STEPS)
    text = "\n".join(NEXT_STEPS)
    named = {word.split()[0] for word in text.split("--objective ")[1:]}
    assert named and named <= set(OBJECTIVES) and not named & FITNESS_OBJECTIVES
    assert "--evolve verify-length" in text and "--costs FILE" in text


@pytest.mark.parametrize("objective", sorted(FITNESS_OBJECTIVES))
def test_seeded_standard_rejection_gets_the_hint(data, tmp_path, objective):
    args = _champion(tmp_path, STANDARD, objective, "seeded:standard_rejection")
    lines = _run(data, args).stdout.splitlines()
    before, line = split_verdict(lines)
    # on this small split a looser rule may decide every record as standard rejection does: a tie, said as one
    assert re.match(r"verdict: standard_rejection (wins|ties with [^:]+: \d rows share the best value) on test by "
                    r"fitness \(", line), line
    assert line.endswith("; the champion is standard_rejection itself (evolution found nothing better on valid)")
    assert before[-len(NEXT_STEPS):] == list(NEXT_STEPS)
    assert all(len(x) <= 100 for x in lines)  # the verdict is wrapped too
    verdict = json.loads(_run(data, args, "--format", "json").stdout)["verdict"]
    assert verdict["hint"] == list(NEXT_STEPS)
    assert verdict["text"].splitlines() == [*NEXT_STEPS, line]  # JSON keeps the line whole
    stderr = _run(data, args, "--format", "csv").stderr.splitlines()  # CSV: the verdict goes to stderr
    err_before, err_line = split_verdict(stderr)
    assert err_line == line and err_before[-len(NEXT_STEPS):] == list(NEXT_STEPS)


def test_an_evolved_rule_behind_standard_rejection_gets_the_hint(data, tmp_path):
    args = _champion(tmp_path, "mul(0.5, div(target_prob, draft_prob))", "acceptance_quality", "evolved")
    before, line = split_verdict(_run(data, args).stdout.splitlines())
    assert "champion scores" in line and before[-len(NEXT_STEPS):] == list(NEXT_STEPS)


def test_no_hint_for_a_speed_run_or_a_winning_champion(data, tmp_path):
    speed = _champion(tmp_path, "mul(0.5, div(target_prob, draft_prob))", "speed_at_tv", "evolved")
    out = _run(data, speed).stdout
    assert NEXT_STEPS[0] not in out
    assert split_verdict(out.splitlines())[1].endswith("its run optimised the speed_at_tv objective, not fitness")
    assert json.loads(_run(data, speed, "--format", "json").stdout)["verdict"]["hint"] == []
    winner = _champion(tmp_path, "1.0", "acceptance_quality", "evolved")  # always accept: its fitness is not higher
    out = _run(data, winner).stdout
    verdict = json.loads(_run(data, winner, "--format", "json").stdout)["verdict"]
    assert (NEXT_STEPS[0] in out) == (verdict["winner"] != "champion")


def test_a_verify_length_champion_is_judged_by_tokens_per_second(vocab_dataset, tmp_path):
    """A verification-length champion has no fitness: the verdict judges it by its run's objective (tokens per
    second), among the rules within its run's TV budget, never by the fitness it was not evolved for."""
    from pathlib import Path

    from evolve.cli.evolve import cli as evolve_cli

    res = CliRunner().invoke(evolve_cli, ["run", "--data", str(vocab_dataset), "--out", str(tmp_path / "runs"),
                                          "--evolve", "verify-length", "--objective", "tokens_per_second",
                                          "--population", "12", "--generations", "1", "--seed", "5", "--no-progress"])
    assert res.exit_code == 0, res.output
    path = Path(res.stdout.strip().splitlines()[-1]) / "champion.json"
    costs = Path(__file__).resolve().parent.parent / "docs" / "costs" / "gpu_like.json"
    args = ["--data", str(vocab_dataset), "--champion", str(path), "--costs", str(costs), "--repeats", "1"]
    verdict = json.loads(CliRunner().invoke(benchmark.cli, [*args, "--format", "json"]).stdout)["verdict"]
    assert verdict["measure"] == "tokens_per_second" and verdict["champion"] == "champion"
    assert verdict["winner"] not in ("length_oracle", "always_accept")  # no bound, nothing over the TV budget
    line = split_verdict(_run(vocab_dataset, args[2:]).stdout.splitlines())[1]
    assert " by tokens per second (" in line and "by fitness" not in line
    assert "TV per token <= 0.01" in line and "the champion" in line

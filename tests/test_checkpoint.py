"""Checkpoints and resume: a run killed at any point (kill -9 included) resumes to the uninterrupted result.

* ``python -m evolve run`` in a subprocess is killed with SIGKILL at several points (before its
  first checkpoint, in the middle, near the end, each plus a random delay);
  ``python -m evolve resume`` then finishes it with exactly the champion, hall of fame and logbook
  (timing columns aside) of the same run left alone;
* a stopped run's checkpoint directory is never corrupt: ``show`` says in one line that it has no
  champion yet; a damaged checkpoint, changed settings or changed data are refused with the reason;
* a run stopped by Ctrl-C (``should_stop``) keeps its checkpoint and ``resume`` finishes it;
* in-process: resuming from every snapshot of a search (both algorithms) gives the same result.
"""
from __future__ import annotations

import csv
import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from evolve.errors import InputError
from evolve.traces.io import Traces, write_dataset
from evolve.traces.synth.independent import generate_split
from evolve.cli.evolve import cli as evolve_cli
from evolve.eval.evaluator import EvalData
from evolve.gp.primitives import CORE_FEATURES
from evolve.search.algorithms import search
from evolve.search.checkpoint import CHECKPOINT_FILE, header, read_checkpoint, read_header, write_checkpoint
from evolve.search.config import resolve
from evolve.search.rundir import resume, run
from evolve.search.state import TIMING_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
#: Header values of checkpoints written by the tests themselves (the header is checked when read).
SHA = {"train": "a" * 64, "valid": "b" * 64}
CREATED = "2025-01-01T00:00:00+00:00"
#: The run that is killed: about 2 s of search on this machine, a checkpoint every 5 generations.
SETTINGS = {"population": 150, "generations": 30, "migration_interval": 5, "seed": 1, "warm_start": False}


def _args(data: Path, out: Path) -> list[str]:
    opts = []
    for key, value in SETTINGS.items():
        if key == "warm_start":
            opts.append("--from-scratch")
        else:
            opts += [f"--{key.replace('_', '-')}", str(value)]
    return ["--data", str(data), "--out", str(out), "--no-progress", *opts]


def _logbook(run_dir: Path) -> list[dict]:
    rows = list(csv.DictReader((run_dir / "logbook.csv").open()))
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


def _outcome(run_dir: Path) -> tuple:
    champion = json.loads((run_dir / "champion.json").read_text())
    hof = json.loads((run_dir / "hall_of_fame.json").read_text())
    return champion["expression"], champion["metrics"], hof, _logbook(run_dir)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("ckpt") / "data"
    write_dataset(d, {"train": generate_split(60, 1), "valid": generate_split(20, 2)}, {"generator": "independent"})
    return d


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory) -> tuple:
    """The outcome of the run left alone (in this process)."""
    out = tmp_path_factory.mktemp("ref")
    info = run(resolve({"data": str(data), "out": str(out), **SETTINGS}))
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # the checkpoint directory is gone
    return _outcome(info.run_dir)


def _generation(partial: Path) -> int:
    try:
        gen = read_header(partial / CHECKPOINT_FILE)["generation"]
    except InputError:
        return -1
    return -1 if gen is None else gen


def _start_and_kill(data: Path, out: Path, target: int | None, delay: float) -> Path:
    """Start the run, SIGKILL it once its checkpoint reaches ``target`` (None: as soon as it exists) plus ``delay`` s."""
    proc = subprocess.Popen([sys.executable, "-m", "evolve", "run", *_args(data, out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    partial = None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            found = list(out.glob(".run-*.partial")) if out.exists() else []
            if found:
                partial = found[0]
                if (partial / CHECKPOINT_FILE).exists() and (target is None or _generation(partial) >= target):
                    break
            time.sleep(0.005)
        time.sleep(delay)
    finally:
        proc.kill()
        proc.communicate()
    assert partial is not None, "the run never created its checkpoint directory"
    return partial


def test_killed_runs_resume_to_the_uninterrupted_result(data, reference, tmp_path):
    rng = random.Random(7)
    resumed = []
    for k, target in enumerate((None, 10, 25)):
        out = tmp_path / f"out{k}"
        partial = _start_and_kill(data, out, target, rng.uniform(0.0, 0.05))
        visible = [p for p in out.iterdir() if not p.name.startswith(".")]
        if visible:  # killed after the run directory was renamed into place: it is complete
            assert _outcome(visible[0]) == reference
            continue
        shown = CliRunner().invoke(evolve_cli, ["show", str(partial)])
        assert shown.exit_code == 2 and "no champion yet" in shown.stderr, shown.output
        assert len(shown.stderr.strip().splitlines()) == 1
        res = CliRunner().invoke(evolve_cli, ["resume", str(out), "--no-progress"])
        assert res.exit_code == 0, res.output
        run_dir = Path(res.stdout.strip().splitlines()[-1])
        assert _outcome(run_dir) == reference, (target, _generation(partial))
        assert not partial.exists()
        resumed.append(target)
    assert len(resumed) >= 2, resumed  # the kills landed in the middle of the runs


def test_stopped_run_keeps_its_checkpoint_and_resume_finishes_it(data, reference, tmp_path):
    calls = []
    cfg = resolve({"data": str(data), "out": str(tmp_path), **SETTINGS})
    info = run(cfg, progress=lambda row: calls.append(row["gen"]), stop=lambda: len(calls) > 7)
    assert info.result.interrupted and info.result.generations == 7
    assert info.checkpoint_dir is not None and (info.checkpoint_dir / CHECKPOINT_FILE).is_file()
    assert json.loads((info.run_dir / "run.json").read_text())["checkpoint_dir"] == str(info.checkpoint_dir)
    assert read_header(info.checkpoint_dir / CHECKPOINT_FILE)["interrupted"] is True
    seen = []
    done = resume(info.run_dir, progress=lambda row: seen.append(row["gen"]))
    assert seen == list(range(SETTINGS["generations"] + 1))  # the done generations are replayed first
    assert done.run_dir != info.run_dir and _outcome(done.run_dir) == reference
    assert not info.checkpoint_dir.exists()
    with pytest.raises(InputError, match="complete"):
        resume(done.run_dir)


def test_changed_settings_data_or_file_are_refused(data, tmp_path):
    cfg = resolve({"data": str(data), "out": str(tmp_path / "out"), **SETTINGS})
    info = run(cfg, stop=lambda: True)
    partial = info.checkpoint_dir
    toml = (partial / "config.toml").read_text()
    (partial / "config.toml").write_text(toml.replace("population = 150", "population = 151"))
    with pytest.raises(InputError, match="setting 'population' is 151 but the checkpoint was made with 150"):
        resume(partial)
    (partial / "config.toml").write_text(toml)
    other = tmp_path / "other"
    shutil.copytree(data, other)
    write_dataset(other, {"train": generate_split(60, 3), "valid": generate_split(20, 2)}, {"generator": "x"})
    with pytest.raises(InputError, match="the train split of .* changed since the run started"):
        resume(partial, data=str(other))
    raw = (partial / CHECKPOINT_FILE).read_bytes()
    (partial / CHECKPOINT_FILE).write_bytes(raw[:-10])
    with pytest.raises(InputError, match="truncated or altered"):
        resume(partial)
    (partial / CHECKPOINT_FILE).write_bytes(b"garbage\n")
    with pytest.raises(InputError, match="not a checkpoint"):
        resume(partial)
    res = CliRunner().invoke(evolve_cli, ["resume", str(tmp_path / "nothing-here")])
    assert res.exit_code == 2 and "no such directory" in res.stderr


def _eval(sequences: int, seed: int, name: str) -> EvalData:
    return EvalData.from_traces(Traces.from_frame(generate_split(sequences, seed), source=name, split=name))


@pytest.mark.parametrize("fitness", ["acceptance_quality", "pareto"])
def test_resuming_from_every_snapshot_gives_the_same_search(fitness, vocab_dataset, tmp_path):
    from evolve.traces.io import load_split

    if fitness == "pareto":
        train, valid = (EvalData.from_traces(load_split(vocab_dataset, s)) for s in ("train", "valid"))
    else:
        train, valid = _eval(40, 11, "train"), _eval(20, 12, "valid")
    cfg = resolve({"population": 40, "generations": 7, "seed": 3, "migration_interval": 3, "objective": fitness})
    files = []

    def keep(snapshot):
        path = tmp_path / f"ckpt{len(files)}"
        write_checkpoint(path, header(cfg.to_dict(), CORE_FEATURES, SHA, CREATED, snapshot), snapshot)
        files.append(path)

    full = search(cfg, train, valid, CORE_FEATURES, on_epoch=keep)
    assert [read_header(p)["generation"] for p in files] == [3, 6, 7]
    strip = [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in full.logbook]
    for path in files:
        _, snapshot = read_checkpoint(path)
        again = search(cfg, train, valid, CORE_FEATURES, resume=snapshot)
        assert again.champion.expression == full.champion.expression
        assert [e.expression for e in again.hall_of_fame] == [e.expression for e in full.hall_of_fame]
        assert [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in again.logbook] == strip
        assert (again.evaluations, again.programs) == (full.evaluations, full.programs)


def test_show_names_a_stopped_run_in_one_line(data, tmp_path):
    info = run(resolve({"data": str(data), "out": str(tmp_path), **SETTINGS, "generations": 0}), stop=lambda: True)
    assert info.checkpoint_dir is None  # nothing was left to do: the run completed
    partial = tmp_path / ".run-x.partial"
    partial.mkdir()
    write_checkpoint(partial / CHECKPOINT_FILE, header({"generations": 9}, CORE_FEATURES, SHA, CREATED, None), None)
    res = CliRunner().invoke(evolve_cli, ["show", str(partial)])
    assert res.exit_code == 2 and "no champion yet (the run stopped before its first checkpoint)" in res.stderr

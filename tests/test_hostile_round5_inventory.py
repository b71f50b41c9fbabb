"""Every file a command reads is in its input inventory: no output option may land on it.

The cases are generated from the commands and from what they read. Every command of ``benchmark.py``,
``generate_data.py`` and ``python -m evolve`` (walked as ``test_hostile_round5_bounds.py`` walks them) that has an
output option runs once per scenario on real inputs: a world built once of tiny offline models (a target, a draft
model, an EAGLE head trained on the target), a harvested dataset with question categories and its subset, a vocab
dataset with draft-tree tables, runs of three kinds (a threshold rule that is a verification-length run's verifier, the
verification-length run made under a cost file, a tree-shape run), a run configuration file, a champions directory and
a ``benchmark.py groups`` runs directory. An audit hook (:func:`sys.addaudithook`) records every file the command opens
for reading under the world. Then each such file is attacked through each output option of the command (a file
option: the file itself; a directory option: the directory holding the file when the file's name is one a command
writes there, a dataset's or a run's file) and must be refused in one line naming the option, exit code 2, with the
file unchanged. So a command or option that reads a path the inventory (:mod:`evolve.cli.inventory`) does not know
fails here, without a line of this file naming it.

A command with an output option and no scenario fails :func:`test_every_command_with_an_output_has_a_scenario`, and an
input option no scenario gives fails :func:`test_the_scenarios_give_every_input_option` (unless :data:`NOT_RUN` says
why it cannot run here).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import click
import pytest
from click.testing import CliRunner

from evolve.cli.benchmark import cli as benchmark_cli
from evolve.cli.evolve import cli as evolve_cli
from evolve.cli.generate import cli as generate_cli
from evolve.cli.inventory import OutputPath
from evolve.files.guard import RUN_FILES, dataset_files

ROOTS = {"benchmark.py": benchmark_cli, "generate_data.py": generate_cli, "python -m evolve": evolve_cli}
REPO = Path(__file__).resolve().parent.parent
#: Input options no scenario can give on this machine, and why.
NOT_RUN = {("benchmark.py", "perf", "backend_curves"): "needs llama-cpp-python and a GGUF model"}

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _walk(cmd: click.Command, path: tuple[str, ...]):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from _walk(sub, path + (name,))


def _commands():
    for root, cmd in ROOTS.items():
        yield from _walk(cmd, (root,))


def _params(cmd: click.Command) -> list[click.Parameter]:
    return cmd.get_params(click.Context(cmd, **cmd.context_settings))


def _flag(param: click.Parameter) -> str:
    return max(param.opts, key=len) if isinstance(param, click.Option) else param.human_readable_name


def _outputs(cmd: click.Command) -> list[click.Parameter]:
    return [p for p in _params(cmd) if isinstance(p.type, OutputPath)]


def _inputs(cmd: click.Command) -> list[click.Parameter]:
    declared = set(getattr(cmd, "inputs", ()) or ())
    return [p for p in _params(cmd) if p.name and (isinstance(p.type, click.Path) and not isinstance(p.type, OutputPath)
                                                    or p.name in declared)]


# --- the scenarios: (command path) -> functions of the world giving the arguments after the command path ----------

def _bench(w):
    return ["--data", w.whole, "--champion", w.vl, "--champions-dir", w.cdir, "--costs", w.costs, "--repeats", "1"]


SCENARIOS = {
    ("benchmark.py",): [_bench],
    ("benchmark.py", "groups"): [lambda w: ["--runs", w.groups]],
    ("benchmark.py", "live"): [
        lambda w: ["--target", w.target, "--draft", w.draft, "--prompts", w.spec, "--data", w.whole, "--champion",
                   w.vl, "--costs", w.costs, "--max-new-tokens", "4", "--temperature", "0", "--peers", "transformers",
                   "--tune-prompts", w.prompts, "--bootstrap", "40", "--no-progress"],
        lambda w: ["--target", w.target, "--draft-eagle", w.eagle, "--prompts", w.prompts, "--rule",
                   "standard_rejection", "--max-new-tokens", "4", "--bootstrap", "40", "--no-progress"]],
    ("benchmark.py", "pareto"): [lambda w: ["--data", w.whole, "--run", w.thr_run, "--costs", w.costs, "--no-plot",
                                            "--no-learned", "--budgets", "0,0.05", "--gamma", "4"]],
    ("benchmark.py", "perf"): [
        lambda w: ["--data", w.vt, "--programs", "10", "--population", "10", "--generations", "1", "--sizes", "1000",
                   "--generator-tokens", "1000"],
        lambda w: ["--harvest", w.target, "--harvest-prompts", w.prompts, "--harvest-texts", "2", "--harvest-tokens",
                   "4"],
        lambda w: ["--write-costs", w.out("costs.json"), "--harvest", w.target, "--draft", w.draft,
                   "--harvest-prompts", w.prompts, "--gamma-max", "2", "--cost-repeats", "1"],
        lambda w: ["--write-costs", w.out("costs.json"), "--harvest", w.target, "--draft-eagle", w.eagle,
                   "--harvest-prompts", w.prompts, "--gamma-max", "2", "--cost-repeats", "1"]],
    ("benchmark.py", "simulate"): [lambda w: ["--champion", w.thr, "--costs", w.costs, "--samples", "200",
                                              "--no-plot", "--no-progress"]],
    ("benchmark.py", "trees"): [lambda w: ["--data", w.vt, "--champion", w.ts, "--costs", w.costs]],
    ("generate_data.py",): [lambda w: ["--sequences", "3", "--out", w.out("gen")]],
    ("generate_data.py", "harvest"): [
        lambda w: ["--target", w.target, "--draft", w.draft, "--prompts", w.spec, "--gamma", "2",
                   "--max-new-tokens", "4", "--no-progress"],
        lambda w: ["--target", w.target, "--draft-eagle", w.eagle, "--prompts", w.prompts, "--gamma", "2",
                   "--max-new-tokens", "4", "--no-progress"]],
    ("generate_data.py", "subset"): [lambda w: ["--data", w.whole, "--categories", "qa"]],
    ("python -m evolve", "export"): [lambda w: [w.vl_run, "--to", "vllm", "--data", w.whole, "--costs", w.costs,
                                                "--champions-dir", w.cdir]],
    ("python -m evolve", "promote"): [lambda w: [w.thr_run, "copied"]],
    ("python -m evolve", "run"): [
        lambda w: ["--config", w.config, "--no-progress"],
        lambda w: ["--data", w.whole, "--evolve", "verify-length", "--objective", "tokens_per_second", "--costs",
                   w.costs, "--verify-with", w.thr, "--gamma", "4", "--population", "6", "--generations", "1",
                   "--seed", "1", "--no-progress"]],
    ("python -m evolve", "train-drafter"): [lambda w: ["--target", w.target, "--prompts", w.prompts, "--steps", "1",
                                                       "--max-new-tokens", "4", "--draft-vocab", "8"]],
}
#: Output options a scenario gives itself (where the command writes), by command: (option, name under the outputs).
OWN_OUTPUT = {("benchmark.py",): ("--output", "bench.json"), ("benchmark.py", "groups"): ("--output", "groups.md"),
              ("benchmark.py", "live"): ("--output", "live.json"), ("benchmark.py", "pareto"): ("--output", "p.json"),
              ("benchmark.py", "perf"): ("--output", "perf.json"),
              ("benchmark.py", "simulate"): ("--output", "sim.json"), ("benchmark.py", "trees"): ("--output", "t.json"),
              ("generate_data.py", "harvest"): ("--out", "harvest"), ("generate_data.py", "subset"): ("--out", "sub"),
              ("python -m evolve", "export"): ("--output", "vllm.json"),
              ("python -m evolve", "promote"): ("--champions-dir", "champs"),
              ("python -m evolve", "run"): ("--out", "runs"), ("python -m evolve", "train-drafter"): ("--out", "td")}


def _cases():
    return [pytest.param(path, i, id=f"{' '.join(path)} #{i}") for path, make in SCENARIOS.items()
            for i in range(len(make))]


def _command(path: tuple[str, ...]) -> click.Command:
    cmd = ROOTS[path[0]]
    for name in path[1:]:
        cmd = cmd.commands[name]
    return cmd


def test_every_command_with_an_output_has_a_scenario():
    with_outputs = {path for path, cmd in _commands() if _outputs(cmd)}
    assert with_outputs <= set(SCENARIOS), sorted(with_outputs - set(SCENARIOS))
    without = {path for path, cmd in _commands() if not _outputs(cmd)}
    assert ("python -m evolve", "show") in without and ("python -m evolve", "resume") in without  # nothing to land


class _Stub:
    def __getattr__(self, name):
        return f"<{name}>"

    def out(self, name):
        return f"<out:{name}>"


def test_the_scenarios_give_every_input_option():
    """Each input option of a command with a scenario is given by one of its scenarios."""
    for path, makers in SCENARIOS.items():
        cmd = _command(path)
        given = {a for make in makers for a in make(_Stub())}
        for p in _inputs(cmd):
            if NOT_RUN.get((*path, p.name)):
                continue
            if isinstance(p, click.Argument):
                continue  # the first positional value of every scenario
            assert set(p.opts) & given, (path, p.name)


# --- the world ---------------------------------------------------------------------------------------------------

def _ok(root: click.Command, args: list) -> str:
    res = CliRunner().invoke(root, [str(a) for a in args])
    assert res.exit_code == 0, (args, res.output, res.exception)
    return res.stdout


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import numpy as np
    from harvest_helpers import WORDS, tiny_llama
    from tree_helpers import write_tree_tables

    root = tmp_path_factory.mktemp("world")
    w = SimpleNamespace(root=root)
    outputs = root / "out"
    outputs.mkdir()
    counter = iter(range(10 ** 6))
    w.out = lambda name: str(outputs / f"{next(counter)}-{name}")
    w.outputs = outputs
    w.cdir = root / "champions"
    w.cdir.mkdir()
    os.environ["SPECDEC_CHAMPIONS_DIR"] = str(w.cdir)
    w.target = tiny_llama(root / "target", 0, 4)
    w.draft = tiny_llama(root / "draft", 1, 2)
    rng = np.random.default_rng(8)

    def words():
        return " ".join(rng.choice(WORDS, size=int(rng.integers(2, 5))))

    rows = [{"question_id": 100 + i, "category": ("chat", "qa", "sum")[i // 3],
             "turns": [words(), words()] if i < 3 else [words()]} for i in range(9)]
    w.spec = root / "spec.jsonl"
    w.spec.write_text("".join(json.dumps(r) + "\n" for r in rows))
    w.prompts = root / "prompts.txt"
    w.prompts.write_text("".join(words() + "\n" for _ in range(4)))
    w.costs = root / "costs.json"
    shutil.copy(REPO / "docs" / "costs" / "gpu_like.json", w.costs)
    w.whole = root / "whole"
    _ok(generate_cli, ["harvest", "--target", w.target, "--draft", w.draft, "--prompts", w.spec, "--out", w.whole,
                       "--gamma", "4", "--max-new-tokens", "8", "--seed", "11", "--no-progress"])
    w.vt = root / "vt"
    _ok(generate_cli, ["--out", w.vt, "--sequences", "20", "--seed", "3"])
    write_tree_tables(w.vt, seed=5)
    runs = root / "runs"

    def run(*args) -> Path:
        return Path(_ok(evolve_cli, ["run", "--out", runs, "--population", "6", "--generations", "1", "--no-progress",
                                     *args]).strip().splitlines()[-1])

    w.thr_run = run("--data", w.whole, "--seed", "1")
    w.thr = w.thr_run / "champion.json"
    vl = ["--evolve", "verify-length", "--objective", "tokens_per_second", "--costs", w.costs, "--verify-with", w.thr,
          "--gamma", "4", "--seed", "1"]
    w.vl_run = run("--data", w.whole, *vl)
    w.vl = w.vl_run / "champion.json"
    w.ts = run("--data", w.vt, "--evolve", "tree-shape", "--objective", "tokens_per_second", "--costs", w.costs,
               "--seed", "1") / "champion.json"
    _ok(evolve_cli, ["promote", w.thr_run, "promoted", "--champions-dir", w.cdir])
    w.eagle = root / "eagle"
    _ok(evolve_cli, ["train-drafter", "--target", w.target, "--prompts", w.prompts, "--out", w.eagle, "--steps", "1",
                     "--max-new-tokens", "4", "--draft-vocab", "8"])
    w.config = root / "run.toml"
    w.config.write_text(f'data = "{w.whole}"\nevolve = "verify-length"\nobjective = "tokens_per_second"\n'
                        f'costs = "{w.costs}"\nverify_with = "{w.thr}"\ngamma = 4\npopulation = 6\ngenerations = 1\n'
                        f'seed = 1\n')
    w.groups = root / "groups"
    (w.groups / "qa").mkdir(parents=True)
    shutil.copy(w.vl, w.groups / "single.json")
    _ok(generate_cli, ["subset", "--data", w.whole, "--categories", "qa", "--out", w.groups / "qa" / "data"])
    shutil.copy(run("--data", w.groups / "qa" / "data", *vl) / "champion.json", w.groups / "qa" / "group.json")
    _ok(benchmark_cli, ["--data", w.groups / "qa" / "data", "--costs", w.costs, "--champion", w.groups / "single.json",
                        "--champion", w.groups / "qa" / "group.json", "--repeats", "1", "--format", "json",
                        "--output", w.groups / "qa" / "bench.json"])
    w.cwd = root / "cwd"
    w.cwd.mkdir()
    yield w
    os.environ.pop("SPECDEC_CHAMPIONS_DIR", None)


# --- recording what a command reads -----------------------------------------------------------------------------

_RECORDING: list[set] = []


def _hook(event: str, args: tuple) -> None:
    if event != "open" or not _RECORDING:
        return
    path, mode, flags = args
    if isinstance(path, int) or path is None:
        return
    writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT
    if (mode is not None and any(c in str(mode) for c in "wax+")) or (isinstance(flags, int) and flags & writes):
        return
    try:
        _RECORDING[-1].add(os.path.abspath(os.fsdecode(path)))
    except (TypeError, ValueError):
        pass


sys.addaudithook(_hook)


def _read_by(root: click.Command, args: list, w) -> set[Path]:
    """The files under the world (outputs left out) that running ``args`` opens for reading; the run must succeed."""
    _RECORDING.append(set())
    try:
        _ok(root, args)
    finally:
        seen = _RECORDING.pop()
    world, outputs = w.root.resolve(), w.outputs.resolve()
    found = set()
    for p in map(Path, seen):
        rp = p.resolve()
        if rp.is_file() and world in rp.parents and outputs not in rp.parents:
            found.add(rp)
    return found


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("path, index", _cases())
def test_every_file_a_command_reads_is_refused_as_its_output(world, path, index, monkeypatch):
    monkeypatch.chdir(world.cwd)
    root, cmd = ROOTS[path[0]], _command(path)
    flag, name = OWN_OUTPUT.get(path, (None, None))
    args = [*path[1:], *map(str, SCENARIOS[path][index](world))]
    if flag is not None and flag not in args:
        args += [flag, world.out(name)]
    read = _read_by(root, args, world)
    if _inputs(cmd):
        assert read, f"{' '.join(path)} read no file of the world: the recording does not work"
    protected = dataset_files() | RUN_FILES
    failures = []
    for file in sorted(read):
        before = file.read_bytes()
        for out in _outputs(cmd):
            directory = not out.type.file_okay
            if directory and file.name not in protected:
                continue  # a file written into that directory would not replace it
            target = file.parent if directory else file
            res = CliRunner().invoke(root, [*args, _flag(out), str(target)])
            lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
            refused = res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and (
                f"option '{_flag(out)}': " in lines[0] and "an input of this command" in lines[0]
                or f"Invalid value for '{_flag(out)}'" in lines[0])
            if not refused:
                failures.append(f"{_flag(out)} {target}: exit {res.exit_code}: {res.output.strip()[:300]}")
            if not file.is_file() or file.read_bytes() != before:
                failures.append(f"{_flag(out)} {target}: {file} was replaced")
                shutil.rmtree(file, ignore_errors=True) if file.is_dir() else None
                file.write_bytes(before)  # the world stays whole for the other cases
    assert not failures, "\n".join(failures)

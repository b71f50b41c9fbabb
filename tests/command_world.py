"""The commands run on real inputs: a world of tiny offline models, datasets, runs and files, the scenarios that run
every command with an output option in it, and the record of the files a command opens for reading (an audit hook,
:func:`sys.addaudithook`). Used by ``test_hostile_round5_inventory.py`` (every file read is refused as an output)
and ``test_hostile_round5_errors.py`` (every file read, damaged, is named in the error).

The world (:func:`build_world`): a target and a draft model (:func:`harvest_helpers.tiny_llama`), an EAGLE head
trained on the target (``train-drafter``), a categorised prompts file and a plain one, a harvest of the categorised
file (``whole``), a vocab dataset with draft-tree tables (``vt``), a cost file, runs of three kinds (a threshold rule,
``thr``, that is the verification-length run's verifier; the verification-length run ``vl`` under the cost file; a
tree shape ``ts``), a champions directory with a promoted champion, an EAGLE head, a run configuration file and a
``benchmark.py groups`` runs directory. Import it after ``pytest.importorskip("torch")`` and ``("transformers")``.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import click
from click.testing import CliRunner

from evolve.cli.benchmark import cli as benchmark_cli
from evolve.cli.evolve import cli as evolve_cli
from evolve.cli.generate import cli as generate_cli
from evolve.cli.inventory import OutputPath

ROOTS = {"benchmark.py": benchmark_cli, "generate_data.py": generate_cli, "python -m evolve": evolve_cli}
REPO = Path(__file__).resolve().parent.parent
#: Input options no scenario can give on this machine, and why.
NOT_RUN = {("benchmark.py", "perf", "backend_curves"): "needs llama-cpp-python and a GGUF model"}

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def walk(cmd: click.Command, path: tuple[str, ...]):
    """(path, command) of ``cmd`` and of every subcommand under it."""
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from walk(sub, path + (name,))


def commands():
    """(path, command) of every command of the three programs."""
    for root, cmd in ROOTS.items():
        yield from walk(cmd, (root,))


def params_of(cmd: click.Command) -> list[click.Parameter]:
    """The parameters of ``cmd`` (with its own context settings)."""
    return cmd.get_params(click.Context(cmd, **cmd.context_settings))


def flag_of(param: click.Parameter) -> str:
    """The longest option string of ``param`` (an argument: its name)."""
    return max(param.opts, key=len) if isinstance(param, click.Option) else param.human_readable_name


def outputs_of(cmd: click.Command) -> list[click.Parameter]:
    """The output parameters of ``cmd`` (of type OutputPath)."""
    return [p for p in params_of(cmd) if isinstance(p.type, OutputPath)]


def inputs_of(cmd: click.Command) -> list[click.Parameter]:
    """The input parameters of ``cmd``: its click.Path parameters that are no output, and those it declares."""
    declared = set(getattr(cmd, "inputs", ()) or ())
    return [p for p in params_of(cmd) if p.name and (isinstance(p.type, click.Path) and not isinstance(p.type, OutputPath)
                                                    or p.name in declared)]


# --- the scenarios: (command path) -> functions of the world giving the arguments after the command path ----------

def bench_args(w):
    """The scenario of ``benchmark.py``."""
    return ["--data", w.whole, "--champion", w.vl, "--champions-dir", w.cdir, "--costs", w.costs, "--repeats", "1"]


SCENARIOS = {
    ("benchmark.py",): [bench_args],
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


def scenarios() -> list[tuple[tuple[str, ...], int]]:
    """(command path, index) of every scenario."""
    return [(path, i) for path, make in SCENARIOS.items() for i in range(len(make))]


def command_at(path: tuple[str, ...]) -> click.Command:
    """The command at ``path`` (program, subcommand...)."""
    cmd = ROOTS[path[0]]
    for name in path[1:]:
        cmd = cmd.commands[name]
    return cmd


class Stub:
    """A world whose every attribute is its own name: the option strings the scenarios give, without a world."""

    def __getattr__(self, name):
        return f"<{name}>"

    def out(self, name):
        return f"<out:{name}>"


def ok(root: click.Command, args: list) -> str:
    """stdout of ``root`` run with ``args``, which must succeed."""
    res = CliRunner().invoke(root, [str(a) for a in args])
    assert res.exit_code == 0, (args, res.output, res.exception)
    return res.stdout


def build_world(root: Path) -> SimpleNamespace:
    """The world every scenario runs in, built under ``root`` (module doc); the caller sets
    ``SPECDEC_CHAMPIONS_DIR`` to ``w.cdir`` while scenarios run."""
    import numpy as np
    from harvest_helpers import WORDS, tiny_llama
    from tree_helpers import write_tree_tables

    w = SimpleNamespace(root=root)
    outputs = root / "out"
    outputs.mkdir()
    counter = iter(range(10 ** 6))
    w.out = lambda name: str(outputs / f"{next(counter)}-{name}")
    w.outputs = outputs
    w.cdir = root / "champions"
    w.cdir.mkdir()
    os.environ["SPECDEC_CHAMPIONS_DIR"] = str(w.cdir)  # promote below writes there, not into the repository
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
    ok(generate_cli, ["harvest", "--target", w.target, "--draft", w.draft, "--prompts", w.spec, "--out", w.whole,
                       "--gamma", "4", "--max-new-tokens", "8", "--seed", "11", "--no-progress"])
    w.vt = root / "vt"
    ok(generate_cli, ["--out", w.vt, "--sequences", "20", "--seed", "3"])
    write_tree_tables(w.vt, seed=5)
    runs = root / "runs"

    def run(*args) -> Path:
        return Path(ok(evolve_cli, ["run", "--out", runs, "--population", "6", "--generations", "1", "--no-progress",
                                     *args]).strip().splitlines()[-1])

    w.thr_run = run("--data", w.whole, "--seed", "1")
    w.thr = w.thr_run / "champion.json"
    vl = ["--evolve", "verify-length", "--objective", "tokens_per_second", "--costs", w.costs, "--verify-with", w.thr,
          "--gamma", "4", "--seed", "1"]
    w.vl_run = run("--data", w.whole, *vl)
    w.vl = w.vl_run / "champion.json"
    w.ts = run("--data", w.vt, "--evolve", "tree-shape", "--objective", "tokens_per_second", "--costs", w.costs,
               "--seed", "1") / "champion.json"
    ok(evolve_cli, ["promote", w.thr_run, "promoted", "--champions-dir", w.cdir])
    w.eagle = root / "eagle"
    ok(evolve_cli, ["train-drafter", "--target", w.target, "--prompts", w.prompts, "--out", w.eagle, "--steps", "1",
                     "--max-new-tokens", "4", "--draft-vocab", "8"])
    w.config = root / "run.toml"
    w.config.write_text(f'data = "{w.whole}"\nevolve = "verify-length"\nobjective = "tokens_per_second"\n'
                        f'costs = "{w.costs}"\nverify_with = "{w.thr}"\ngamma = 4\npopulation = 6\ngenerations = 1\n'
                        f'seed = 1\n')
    w.groups = root / "groups"
    (w.groups / "qa").mkdir(parents=True)
    shutil.copy(w.vl, w.groups / "single.json")
    ok(generate_cli, ["subset", "--data", w.whole, "--categories", "qa", "--out", w.groups / "qa" / "data"])
    shutil.copy(run("--data", w.groups / "qa" / "data", *vl) / "champion.json", w.groups / "qa" / "group.json")
    ok(benchmark_cli, ["--data", w.groups / "qa" / "data", "--costs", w.costs, "--champion", w.groups / "single.json",
                        "--champion", w.groups / "qa" / "group.json", "--repeats", "1", "--format", "json",
                        "--output", w.groups / "qa" / "bench.json"])
    w.cwd = root / "cwd"
    w.cwd.mkdir()
    return w


# --- recording what a command reads -----------------------------------------------------------------------------

#: The sets of paths being recorded (the innermost last); empty: nothing is recorded.
RECORDING: list[set] = []


#: The module whose reads are not the command's own: the inventory looks into the inputs to protect what they name.
INVENTORY = os.path.join("evolve", "cli", "inventory.py")


def audit_hook(event: str, args: tuple) -> None:
    """Record the path of every ``open`` audit event that reads (no write, append, create or update mode), unless the
    output inventory opens it (:data:`INVENTORY`)."""
    if event != "open" or not RECORDING:
        return
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(INVENTORY):
            return
        frame = frame.f_back
    path, mode, flags = args
    if isinstance(path, int) or path is None:
        return
    writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT
    if (mode is not None and any(c in str(mode) for c in "wax+")) or (isinstance(flags, int) and flags & writes):
        return
    try:
        RECORDING[-1].add(os.path.abspath(os.fsdecode(path)))
    except (TypeError, ValueError):
        pass


sys.addaudithook(audit_hook)


def read_by(root: click.Command, args: list, w) -> set[Path]:
    """The files under the world (outputs left out) that running ``args`` opens for reading; the run must succeed."""
    RECORDING.append(set())
    try:
        ok(root, args)
    finally:
        seen = RECORDING.pop()
    world, outputs = w.root.resolve(), w.outputs.resolve()
    found = set()
    for p in map(Path, seen):
        rp = p.resolve()
        if rp.is_file() and world in rp.parents and outputs not in rp.parents:
            found.add(rp)
    return found




def scenario_args(path: tuple[str, ...], index: int, w) -> list[str]:
    """The command line (after the program) of scenario ``index`` of the command ``path``, with the command's own
    output under the world's outputs (:data:`OWN_OUTPUT`)."""
    flag, name = OWN_OUTPUT.get(path, (None, None))
    args = [*path[1:], *map(str, SCENARIOS[path][index](w))]
    if flag is not None and flag not in args:
        args += [flag, w.out(name)]
    return args

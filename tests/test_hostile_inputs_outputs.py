"""Hostile inputs: no output of any command may land on one of its inputs (issue 29, part 1).

The cases are built from the commands themselves (:func:`evolve.cli.inventory.inventory`): every command x every
input option x every output option, organised by the input attacked. An input file given as the output (or a
dataset file of an input directory, or an input directory given as an output directory) is refused in one line
naming both options, with exit code 2, and the input is byte-identical afterwards. A new input option of any
command is a new case here without an edit.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from evolve.cli.benchmark import cli as benchmark_cli
from evolve.cli.evolve import cli as evolve_cli
from evolve.cli.generate import cli as generate_cli
from evolve.cli.inventory import CHAMPION_DIR_PARAMS, OutputPath

ROOTS = {"benchmark.py": benchmark_cli, "python -m evolve": evolve_cli, "generate_data.py": generate_cli}
#: Arguments a command needs before it gets anywhere (placeholders: {file} an existing file, {dir} a directory).
REQUIRED: dict[str, list[str]] = {
    "benchmark.py live": ["--target", "{file}", "--prompts", "{file}"],
    "generate_data.py harvest": ["--target", "{file}", "--prompts", "{file}"],
    "generate_data.py subset": ["--categories", "qa"],
    "python -m evolve export": ["{file}", "--to", "numpy"],
    "python -m evolve promote": ["{dir}", "NAME"],
    "python -m evolve resume": ["{dir}"],
    "python -m evolve show": ["{dir}"],
}


def _commands():
    for root_name, root in ROOTS.items():
        yield root_name, (), root
        for name, sub in getattr(root, "commands", {}).items():
            yield f"{root_name} {name}", (name,), sub


def _context(cmd: click.Command) -> click.Context:
    """A context of ``cmd`` with its own settings: click caches a command's help option from the first context
    that asks (a bare context would leave ``--help`` without ``-h`` in every later help text)."""
    return click.Context(cmd, **cmd.context_settings)


def _flag(param: click.Parameter) -> str | None:
    return max(param.opts, key=len) if isinstance(param, click.Option) else None


def _is_dir_param(param: click.Parameter) -> bool:
    t = param.type
    return isinstance(t, click.Path) and not t.file_okay or param.name in CHAMPION_DIR_PARAMS or \
        param.name in ("data", "data_dir")


def _cases():
    cases = []
    for label, prefix, cmd in _commands():
        params = cmd.get_params(_context(cmd))
        declared = set(getattr(cmd, "inputs", ()))
        inputs = [p for p in params if p.name and (isinstance(p.type, click.Path) and not isinstance(p.type, OutputPath)
                                                   or p.name in declared)]
        outputs = [p for p in params if isinstance(p.type, OutputPath) and _flag(p)]
        for i in inputs:
            for o in outputs:
                cases.append(pytest.param(label, prefix, i.name, o.name,
                                          id=f"{i.name}-[{label}]-{_flag(i) or i.name}-vs-{_flag(o)}"))
    return cases


CASES = _cases()


def _digest(path: Path) -> dict[str, str]:
    if path.is_dir():
        return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(path.rglob("*")) if p.is_file()}
    return {"": hashlib.sha256(path.read_bytes()).hexdigest()}


def _args(label: str, prefix: tuple[str, ...], input_name: str, output_name: str, tmp: Path) -> tuple[list, Path]:
    """The command line of one case and the input attacked."""
    cmd = dict((lbl, c) for lbl, _, c in _commands())[label]
    params = {p.name: p for p in cmd.get_params(_context(cmd))}
    i, o = params[input_name], params[output_name]
    filler = tmp / "filler.txt"
    filler.write_text("filler\n")
    (tmp / "fillerdir").mkdir(exist_ok=True)
    input_is_dir = _is_dir_param(i)
    if input_is_dir:
        target = tmp / "inputdir"
        target.mkdir()
        for name in ("train.parquet", "valid.parquet", "test.parquet", "metadata.json", "test.trees.parquet",
                     "champ.json"):
            (target / name).write_bytes(f"bytes of {name}\n".encode())
    else:
        target = tmp / "input.json"
        target.write_bytes(b'{"the input": "bytes that must survive"}\n')
    out_is_dir = isinstance(o.type, OutputPath) and not o.type.file_okay or o.name in ("out", "large_dir") or \
        (o.name == "champions_dir")
    if out_is_dir:
        out_value = target
    elif input_is_dir:
        out_value = target / ("champ.json" if i.name in CHAMPION_DIR_PARAMS else "test.trees.parquet")
    else:
        out_value = target
    positional = [a.replace("{file}", str(filler)).replace("{dir}", str(tmp / "fillerdir"))
                  for a in REQUIRED.get(label, [])]
    if isinstance(i, click.Argument):
        positional[0] = str(target)
        args = [*prefix, *positional]
    else:
        flag = _flag(i)
        if flag in positional:  # a required option attacked: its placeholder is replaced
            positional[positional.index(flag) + 1] = str(target)
            args = [*prefix, *positional]
        else:
            args = [*prefix, *positional, flag, str(target)]
    args += [_flag(o), str(out_value)]
    return args, target


def test_every_command_has_cases():
    labels = {c.values[0] for c in CASES}
    for must in ("benchmark.py", "benchmark.py trees", "benchmark.py pareto", "benchmark.py simulate",
                 "benchmark.py perf", "benchmark.py live", "python -m evolve run", "python -m evolve export",
                 "python -m evolve promote", "generate_data.py harvest"):
        assert must in labels, must


#: Metavars of options whose value is a path (a model, a file, a directory).
PATH_METAVARS = frozenset({"FILE", "PATH", "DIR", "GGUF", "MODEL"})


def test_every_path_option_is_in_an_inventory():
    """An option taking a path is a click.Path (an input unless an OutputPath) or declared among the command's
    inputs: a new path option cannot escape the inventory silently."""
    for label, _, cmd in _commands():
        declared = set(getattr(cmd, "inputs", ()))
        for p in cmd.get_params(_context(cmd)):
            metavar = getattr(p, "metavar", None)
            if metavar in PATH_METAVARS or p.name in ("data", "data_dir", "out", "output", "costs", "champion",
                                                      "champions", "prompts", "target", "verify_with", "config_file"):
                assert isinstance(p.type, (click.Path, click.Choice)) or p.name in declared, (label, p.name)


@pytest.mark.parametrize("label,prefix,input_name,output_name", CASES)
def test_output_onto_input_is_refused(label, prefix, input_name, output_name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args, target = _args(label, prefix, input_name, output_name, tmp_path)
    before = _digest(target)
    root = ROOTS[next(r for r in ROOTS if label == r or label.startswith(r + " "))]
    r = CliRunner().invoke(root, args)
    assert r.exit_code == 2, (args, r.output, r.exception)
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), (args, r.output)
    out_flag = args[-2]
    # refused as an input, or already by click's type check (a file given where a directory goes)
    assert f"option '{out_flag}': " in lines[0] and "an input of this command" in lines[0] or \
        f"Invalid value for '{out_flag}'" in lines[0], lines[0]
    assert "Traceback" not in r.output
    assert _digest(target) == before


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
@pytest.mark.parametrize("sub", [("simulate",), ("trees",), ("pareto",), ()])
def test_costs_through_a_link(sub, link, tmp_path):
    """``--costs F --output L`` with L a link to F (symbolic or hard) is the same file: refused."""
    costs = tmp_path / "c.json"
    costs.write_bytes(b'{"target_forward_s": [1, 1.1], "draft_token_s": 0.01, "plain_token_s": 1}\n')
    link_path = tmp_path / "l.json"
    (os.symlink if link == "symlink" else os.link)(costs, link_path)
    before = costs.read_bytes()
    data = [] if sub == ("simulate",) else ["--data", str(tmp_path / "d")]
    r = CliRunner().invoke(benchmark_cli, [*sub, *data, "--costs", str(costs), "--output", str(link_path)])
    assert r.exit_code == 2 and "is an input of this command (--costs)" in r.output, r.output
    assert costs.read_bytes() == before


def test_issue_cases(tmp_path, monkeypatch):
    """The data-loss cases of issue 29, each refused, nothing replaced (relative paths too)."""
    monkeypatch.chdir(tmp_path)
    Path("c.json").write_bytes(b"costs\n")
    Path("champ.json").write_bytes(b"champion\n")
    Path("X").mkdir()
    Path("X/test.trees.parquet").write_bytes(b"tree table\n")
    for args in (["trees", "--data", "X", "--output", "X/test.trees.parquet"],
                 ["--costs", "c.json", "--output", "c.json"],
                 ["trees", "--costs", "c.json", "--output", "./c.json"],
                 ["pareto", "--costs", "c.json", "--output", str(tmp_path / "c.json")],
                 ["simulate", "--costs", "c.json", "--output", "c.json"],
                 ["trees", "--champion", "champ.json", "--output", "champ.json"],
                 ["--champion", "champ.json", "--output", "champ.json"]):
        r = CliRunner().invoke(benchmark_cli, args)
        assert r.exit_code == 2 and "an input of this command" in r.output, (args, r.output)
    assert Path("c.json").read_bytes() == b"costs\n" and Path("champ.json").read_bytes() == b"champion\n"
    assert Path("X/test.trees.parquet").read_bytes() == b"tree table\n"
    r = CliRunner().invoke(evolve_cli, ["run", "--costs", "c.json", "--out", "c.json"])
    assert r.exit_code == 2 and "(--costs)" in r.output, r.output
    r = CliRunner().invoke(evolve_cli, ["export", "champ.json", "--to", "numpy", "--output", "champ.json"])
    assert r.exit_code == 2 and "(CHAMPION)" in r.output, r.output
    # an output directory holding an input under the name of a file written there
    Path("H").mkdir()
    Path("H/texts.jsonl").write_bytes(b"prompts\n")
    r = CliRunner().invoke(generate_cli, ["harvest", "--target", "c.json", "--prompts", "H/texts.jsonl", "--out", "H"])
    assert r.exit_code == 2 and "(--prompts)" in r.output, r.output
    assert Path("H/texts.jsonl").read_bytes() == b"prompts\n"


def test_report_layers_check_their_inputs(tmp_path):
    """Below the command line, each report command refuses an output that is its cost file too."""
    from evolve.errors import InputError
    from evolve.commands.trees import TreesOptions, trees_command

    costs = tmp_path / "c.json"
    costs.write_bytes(b"x")
    with pytest.raises(InputError, match="input"):
        trees_command(TreesOptions(data_dir=tmp_path, costs=costs, output=costs))
    assert costs.read_bytes() == b"x"


def test_every_command_knows_every_dataset_file():
    """The modules that define a dataset's files register them with the output-path guard; importing the base of
    every command (:mod:`evolve.cli.errors`, fresh interpreter) registers them all: the splits in both formats,
    metadata.json, the tree tables and the harvest's texts.jsonl."""
    import json
    import subprocess
    import sys

    from evolve.harvest.resume import TEXTS_FILE
    from evolve.traces.io import FORMATS, METADATA_FILE, SPLITS
    from evolve.traces.tree_tables import TREE_FILE

    code = ("import json, evolve.cli.errors; from evolve.files.guard import dataset_files; "
            "print(json.dumps(sorted(dataset_files())))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert run.returncode == 0, run.stderr
    want = {f"{s}.{f}" for s in SPLITS for f in FORMATS} | {TREE_FILE.format(split=s) for s in SPLITS} \
        | {METADATA_FILE, TEXTS_FILE}
    assert set(json.loads(run.stdout)) == want

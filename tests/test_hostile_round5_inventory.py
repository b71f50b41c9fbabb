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

import os
import shutil

import click
import pytest
from click.testing import CliRunner

from evolve.files.guard import RUN_FILES, dataset_files

pytest.importorskip("torch")
pytest.importorskip("transformers")
from command_world import (NOT_RUN, ROOTS, SCENARIOS, Stub, build_world, command_at, commands, flag_of,  # noqa: E402
                           inputs_of, outputs_of, read_by, scenario_args, scenarios)

def test_every_command_with_an_output_has_a_scenario():
    with_outputs = {path for path, cmd in commands() if outputs_of(cmd)}
    assert with_outputs <= set(SCENARIOS), sorted(with_outputs - set(SCENARIOS))
    without = {path for path, cmd in commands() if not outputs_of(cmd)}
    assert ("python -m evolve", "show") in without and ("python -m evolve", "resume") in without  # nothing to land


def test_the_scenarios_give_every_input_option():
    """Each input option of a command with a scenario is given by one of its scenarios."""
    for path, makers in SCENARIOS.items():
        cmd = command_at(path)
        given = {a for make in makers for a in make(Stub())}
        for p in inputs_of(cmd):
            if NOT_RUN.get((*path, p.name)):
                continue
            if isinstance(p, click.Argument):
                continue  # the first positional value of every scenario
            assert set(p.opts) & given, (path, p.name)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The world of :mod:`command_world`, its champions directory the one the commands read."""
    before = os.environ.get("SPECDEC_CHAMPIONS_DIR")
    w = build_world(tmp_path_factory.mktemp("world"))
    yield w
    if before is None:
        os.environ.pop("SPECDEC_CHAMPIONS_DIR", None)
    else:
        os.environ["SPECDEC_CHAMPIONS_DIR"] = before


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("path, index", [pytest.param(p, i, id=f"{' '.join(p)} #{i}") for p, i in scenarios()])
def test_every_file_a_command_reads_is_refused_as_its_output(world, path, index, monkeypatch):
    monkeypatch.chdir(world.cwd)
    root, cmd = ROOTS[path[0]], command_at(path)
    args = scenario_args(path, index, world)
    read = read_by(root, args, world)
    if inputs_of(cmd):
        assert read, f"{' '.join(path)} read no file of the world: the recording does not work"
    protected = dataset_files() | RUN_FILES
    failures = []
    for file in sorted(read):
        before = file.read_bytes()
        for out in outputs_of(cmd):
            directory = not out.type.file_okay
            if directory and file.name not in protected:
                continue  # a file written into that directory would not replace it
            target = file.parent if directory else file
            res = CliRunner().invoke(root, [*args, flag_of(out), str(target)])
            lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
            refused = res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and (
                f"option '{flag_of(out)}': " in lines[0] and "an input of this command" in lines[0]
                or f"Invalid value for '{flag_of(out)}'" in lines[0])
            if not refused:
                failures.append(f"{flag_of(out)} {target}: exit {res.exit_code}: {res.output.strip()[:300]}")
            if not file.is_file() or file.read_bytes() != before:
                failures.append(f"{flag_of(out)} {target}: {file} was replaced")
                shutil.rmtree(file, ignore_errors=True) if file.is_dir() else None
                file.write_bytes(before)  # the world stays whole for the other cases
    assert not failures, "\n".join(failures)

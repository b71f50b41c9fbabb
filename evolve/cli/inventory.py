"""Every command's input inventory, and the check that no output of a command lands on one of its inputs.

A command's **inputs** are collected from its parameters, so a new input option is covered without
a line of its own: every parameter whose type is a :class:`click.Path` is an input (a drafter's path option,
``--draft``, ``--draft-eagle`` or one registered later, is one by its value type: :mod:`evolve.cli.drafters`), unless
its type is :class:`OutputPath` (what the command writes: ``--output``, ``--out``, ``--write-costs``,
``--large-dir``, ``promote``'s ``--champions-dir``); options whose values are names *or* paths
(``--costs`` and ``--verify-with`` of ``run``, ``--target``, ``--prompts``, ``export``'s CHAMPION)
are declared by the command (``CliCommand(inputs=(...))``) and count when the path exists. The
files inside an input directory that its readers read (the splits, tree tables and
``metadata.json`` of a dataset, the files of a run directory: :func:`evolve.files.guard.dataset_files`,
:data:`evolve.files.guard.RUN_FILES`; the ``*.json`` and ``*.py`` of a champions directory) are
inputs too, and so are the files a champion input names (the verifier champion file of a policy's run,
``provenance.config.verify_with``: :func:`champion_references`), which the command reads through it. Every command
passes through this module, which imports the modules that register a dataset's files with the guard
(:mod:`evolve.traces.io`, :mod:`evolve.traces.tree_tables`, :mod:`evolve.harvest.resume`), so all of them are known
before any check.

:func:`check_outputs` runs before a command's callback (:class:`evolve.cli.errors.CliCommand`) and
refuses, in one line naming both options (``error: option '--output': F is an input of this command
(--costs)``, exit code 2), an output that is one of the inputs (resolved paths; through symbolic or
hard links when both exist, :func:`os.path.samefile`), an output file inside an input directory
under a name that directory's readers read, an output directory that is an input, and an output directory
holding an input under the name of a dataset or run file (which a file written there would replace). Nothing has
been read or written at that point. The lower layers check their outputs against the inputs they
are given as well (:mod:`evolve.files.guard`); this check is the one that knows every option.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import click

import evolve.harvest.resume  # noqa: F401 - registers texts.jsonl with the guard (and, through its imports, the rest)
import evolve.traces.io  # noqa: F401 - registers the split files and metadata.json
import evolve.traces.tree_tables  # noqa: F401 - registers the tree tables
from evolve.errors import InputError
from evolve.files.guard import RUN_FILES, dataset_files, same_path


class OutputPath(click.Path):
    """A :class:`click.Path` the command writes (a file or a directory): never part of its input inventory.

    Not checked for being readable (the output guard of :mod:`evolve.files.guard` says why a path cannot be written).
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("readable", False)
        super().__init__(**kwargs)


#: Parameter names of input directories whose ``*.json`` and ``*.py`` files are read as champions.
CHAMPION_DIR_PARAMS = frozenset({"champions_dir"})
#: Parameter names whose value is a champion (a file or a run directory): the files it names are inputs too.
CHAMPION_PARAMS = frozenset({"champion"})
#: Run settings of a champion's provenance (``provenance.config``) that name another champion file it is read with.
CHAMPION_FILE_SETTINGS = ("verify_with",)


@dataclass(frozen=True)
class Entry:
    """One path of a command's inventory: the option (``--costs``, ``CHAMPION``) and the path given."""

    flag: str
    path: Path
    champions: bool = False


def _flag(param: click.Parameter) -> str:
    if isinstance(param, click.Option):
        return max(param.opts, key=len)
    return param.human_readable_name


def _values(value: Any) -> Iterator[Any]:
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _values(v)
    elif value is not None and not isinstance(value, bool) and str(value).strip() != "":
        yield value


def _params(ctx: click.Context) -> list[click.Parameter]:
    return list(ctx.command.get_params(ctx))


def inventory(ctx: click.Context) -> tuple[list[Entry], list[tuple[click.Parameter, Path]]]:
    """(inputs, outputs) of the command of ``ctx`` with the values it was given.

    Inputs: every :class:`click.Path` parameter that is not an :class:`OutputPath`, and the parameters
    the command declares as ``inputs`` (counted only when the path exists: their values may be names).
    Outputs: every :class:`OutputPath` parameter, with the path given.
    """
    declared = set(getattr(ctx.command, "inputs", ()) or ())
    inputs: list[Entry] = []
    outputs: list[tuple[click.Parameter, Path]] = []
    for param in _params(ctx):
        if param.name is None or param.name not in ctx.params:
            continue
        is_path = isinstance(param.type, click.Path)
        for value in _values(ctx.params[param.name]):
            try:
                path = Path(os.fsdecode(value))
            except TypeError:
                continue
            if isinstance(param.type, OutputPath):
                outputs.append((param, path))
            elif is_path or (param.name in declared and path.exists()):
                inputs.append(Entry(_flag(param), path, param.name in CHAMPION_DIR_PARAMS))
                if param.name in CHAMPION_PARAMS:
                    inputs += [Entry(f"{_flag(param)} {key}", found) for key, found in champion_references(path)]
    return inputs, outputs


def champion_references(path: Path) -> list[tuple[str, Path]]:
    """(setting, path) of the files a champion input names and is read with: the champion file of a run setting of
    :data:`CHAMPION_FILE_SETTINGS` in its ``provenance.config`` (a run directory: its ``champion.json``). A file that
    cannot be read as a champion names nothing here (the command reports it)."""
    file = path / "champion.json" if path.is_dir() else path
    try:
        config = json.loads(file.read_text(encoding="utf-8")).get("provenance", {}).get("config", {})
    except (OSError, ValueError, AttributeError):
        return []
    if not isinstance(config, dict):
        return []
    return [(key, Path(config[key])) for key in CHAMPION_FILE_SETTINGS
            if isinstance(config.get(key), str) and config[key].endswith(".json") and Path(config[key]).is_file()]


def conflict(output: Path, entry: Entry) -> str | None:
    """Why writing ``output`` would replace (or be read as) the input ``entry``, or None."""
    if same_path(output, entry.path):
        return f"{output} is an input of this command ({entry.flag})"
    parent, name = output.parent, output.name
    protected = dataset_files() | RUN_FILES
    if (entry.path.is_dir() or not entry.path.exists()) and same_path(parent, entry.path):
        if name in protected:
            return f"{output} is a file of {entry.path}, an input of this command ({entry.flag})"
        if entry.champions and Path(name).suffix.lower() in (".json", ".py"):
            return f"{output} would be read as a champion of {entry.path}, an input of this command ({entry.flag})"
    if entry.path.name in protected and same_path(entry.path.parent, output):
        return (f"{output} is the directory of {entry.path}, an input of this command ({entry.flag}), which a "
                "file written there would replace")
    return None


def check_outputs(ctx: click.Context) -> None:
    """Refuse (InputError naming the output's parameter) an output of the command of ``ctx`` that lands on one
    of its inputs (see the module doc)."""
    inputs, outputs = inventory(ctx)
    for param, path in outputs:
        for entry in inputs:
            why = conflict(path, entry)
            if why is not None:
                raise InputError(why, param=param.name)


__all__ = ["OutputPath", "Entry", "inventory", "conflict", "check_outputs", "champion_references",
           "CHAMPION_DIR_PARAMS", "CHAMPION_PARAMS"]

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
inputs too. Every command passes through this module, which imports the modules that register a dataset's files
with the guard (:mod:`evolve.traces.io`, :mod:`evolve.traces.tree_tables`, :mod:`evolve.harvest.resume`), so all of
them are known before any check.

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
    return inputs, outputs


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


__all__ = ["OutputPath", "Entry", "inventory", "conflict", "check_outputs", "CHAMPION_DIR_PARAMS"]

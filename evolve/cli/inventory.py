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
:data:`evolve.files.guard.RUN_FILES`; the ``*.json`` and ``*.py`` of a champions directory; every file of a model
directory, one holding ``config.json``) are inputs too, and so are the files an input names, which the command reads
through it (:func:`references_of`: by the parameter's name, :data:`REFERENCES`, or the command's own
``CliCommand(references={PARAM: function})``): a champion's verifier champion file, its run's dataset and cost file
(:func:`champion_references`); a run directory's champion and what it names (:func:`run_references`); the files a run
configuration names (:func:`config_references`); what each champion of a champions directory names; the files of
``benchmark.py groups``'s runs directory (:func:`groups_references`). ``tests/test_hostile_round5_inventory.py``
runs every command on real inputs and checks that every file it opens is one of these. Every command
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
from typing import Any, Callable, Iterator

import click

import evolve.harvest.resume  # noqa: F401 - registers texts.jsonl with the guard (and, through its imports, the rest)
import evolve.traces.io  # noqa: F401 - registers the split files and metadata.json
import evolve.traces.tree_tables  # noqa: F401 - registers the tree tables
from evolve.errors import InputError
from evolve.files.guard import RUN_FILES, control_character, dataset_files, same_path


class OutputPath(click.Path):
    """A :class:`click.Path` the command writes (a file or a directory): never part of its input inventory.

    Not checked for being readable (the output guard of :mod:`evolve.files.guard` says why a path cannot be written);
    refused, whatever the command does with it, when it holds a control character (a newline, an escape): the
    commands print the paths they write on one line.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("readable", False)
        super().__init__(**kwargs)

    def convert(self, value, param, ctx):
        text = os.fsdecode(value) if isinstance(value, (str, bytes, os.PathLike)) else str(value)
        i = control_character(text)
        if i is not None:
            shown = "".join(ascii(ch)[1:-1] if control_character(ch) is not None else ch for ch in text)
            self.fail(f"{shown}: the path holds the control character {ascii(text[i])[1:-1]} at position {i}; use a "
                      f"name without control characters (the path is printed on one line)", param, ctx)
        return super().convert(value, param, ctx)


#: Parameter names of input directories whose ``*.json`` and ``*.py`` files are read as champions.
CHAMPION_DIR_PARAMS = frozenset({"champions_dir"})
#: Parameter names whose value is a champion (a file or a run directory): the files it names are inputs too.
CHAMPION_PARAMS = frozenset({"champion", "champions"})
#: Parameter names whose value is a run directory (its champion, and the files its run read, are inputs too).
RUN_DIR_PARAMS = frozenset({"run_dir"})
#: Parameter names whose value is a run configuration file (TOML): the files its settings name are inputs too.
CONFIG_PARAMS = frozenset({"config_file"})
#: Run settings (of a configuration file, or of a champion's ``provenance.config``) that name a file or directory
#: the run read, and through it the commands that read the champion or the configuration: the verifier champion
#: file, the dataset, the cost file.
RUN_FILE_SETTINGS = ("verify_with", "data", "costs")
#: The same, kept under its earlier name (the verifier champion file alone was named before).
CHAMPION_FILE_SETTINGS = RUN_FILE_SETTINGS
#: A directory holding this file is a model directory (config.json, weights, tokenizer): every file in it is read.
MODEL_MARKER = "config.json"


@dataclass(frozen=True)
class Entry:
    """One path of a command's inventory: the option (``--costs``, ``CHAMPION``) and the path given. ``champions``:
    a directory whose ``*.json`` and ``*.py`` are read as champions; ``whole``: a directory every file of which is
    read (a model directory)."""

    flag: str
    path: Path
    champions: bool = False
    whole: bool = False


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
                inputs.append(Entry(_flag(param), path, param.name in CHAMPION_DIR_PARAMS,
                                    path.is_dir() and (path / MODEL_MARKER).is_file()))
                refer = references_of(ctx.command, param.name)
                if refer is not None:
                    inputs += [Entry(f"{_flag(param)}: {what}", found) for what, found in refer(path)]
    return inputs, outputs


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _settings_files(config: Any) -> list[tuple[str, Path]]:
    """(setting, path) of the run settings of :data:`RUN_FILE_SETTINGS` in ``config`` that name an existing file or
    directory (a setting whose value is a name, ``default`` or ``standard_rejection``, names nothing)."""
    if not isinstance(config, dict):
        return []
    return [(f"its run's {key}", Path(config[key])) for key in RUN_FILE_SETTINGS
            if isinstance(config.get(key), str) and config[key].strip() and Path(config[key]).exists()]


def champion_references(path: Path) -> list[tuple[str, Path]]:
    """(setting, path) of the files a champion input names and is read with: the verifier champion file, the dataset
    and the cost file of its run (the settings :data:`RUN_FILE_SETTINGS` in its ``provenance.config``, and its
    ``provenance.data_dir``), which the commands scoring it read (:mod:`evolve.commands.run_context`); a run
    directory: its ``champion.json``. A file that cannot be read as a champion names nothing here (the command
    reports it)."""
    file = path / "champion.json" if path.is_dir() else path
    doc = _json(file) if file.is_file() else None
    prov = doc.get("provenance") if isinstance(doc, dict) else None
    if not isinstance(prov, dict):
        return []
    found = _settings_files(prov.get("config"))
    data_dir = prov.get("data_dir")
    if isinstance(data_dir, str) and data_dir.strip() and Path(data_dir).is_dir():
        found.append(("its run's data_dir", Path(data_dir)))
    return found


def run_references(path: Path) -> list[tuple[str, Path]]:
    """The files a run directory input names: its ``champion.json`` and that champion's references
    (:func:`champion_references`), and the files the settings of its ``config.toml`` name."""
    found = [("champion", path / "champion.json")] if (path / "champion.json").is_file() else []
    return found + champion_references(path) + config_references(path / "config.toml")


def config_references(path: Path) -> list[tuple[str, Path]]:
    """(setting, path) of the files a run configuration file (TOML) names in :data:`RUN_FILE_SETTINGS`."""
    import tomllib

    try:
        with open(path, "rb") as fh:
            return _settings_files(tomllib.load(fh))
    except (OSError, ValueError):
        return []


def champions_dir_references(path: Path) -> list[tuple[str, Path]]:
    """The files each champion of a champions directory names (:func:`champion_references` of its ``*.json``)."""
    try:
        files = sorted(path.glob("*.json")) if path.is_dir() else []
    except OSError:
        return []
    return [(f"{f.name}, {what}", found) for f in files for what, found in champion_references(f)]


def groups_references(path: Path) -> list[tuple[str, Path]]:
    """The files ``benchmark.py groups`` reads in a runs directory (:func:`evolve.commands.groups.group_files`), and
    what its champions name (:func:`champion_references`)."""
    from evolve.commands.groups import group_files

    found = []
    for what, file in group_files(path):
        found.append((what, file))
        if file.suffix == ".json" and file.name != "bench.json":
            found += [(f"{what}, {key}", f) for key, f in champion_references(file)]
    return found


#: What the value of a parameter (by name) names besides itself; a command may add its own
#: (``CliCommand(references={PARAM: function})``): function(path) -> [(what, path)].
REFERENCES: dict[str, Callable[[Path], list[tuple[str, Path]]]] = {
    **{name: champion_references for name in CHAMPION_PARAMS}, **{name: run_references for name in RUN_DIR_PARAMS},
    **{name: config_references for name in CONFIG_PARAMS},
    **{name: champions_dir_references for name in CHAMPION_DIR_PARAMS},
}


def references_of(command: click.Command, param: str | None) -> Callable[[Path], list[tuple[str, Path]]] | None:
    """The function giving what the value of ``command``'s parameter ``param`` names: the command's own
    (``references``), else :data:`REFERENCES`'s, else None."""
    own = getattr(command, "references", None) or {}
    return own.get(param) or REFERENCES.get(param)


def conflict(output: Path, entry: Entry) -> str | None:
    """Why writing ``output`` would replace (or be read as) the input ``entry``, or None."""
    if same_path(output, entry.path):
        return f"{output} is an input of this command ({entry.flag})"
    parent, name = output.parent, output.name
    protected = dataset_files() | RUN_FILES
    if entry.whole and entry.path.is_dir() and _inside(output, entry.path):
        return f"{output} is inside {entry.path}, an input of this command ({entry.flag}) every file of which is read"
    if (entry.path.is_dir() or not entry.path.exists()) and same_path(parent, entry.path):
        if name in protected:
            return f"{output} is a file of {entry.path}, an input of this command ({entry.flag})"
        if entry.champions and Path(name).suffix.lower() in (".json", ".py"):
            return f"{output} would be read as a champion of {entry.path}, an input of this command ({entry.flag})"
    if entry.path.name in protected and same_path(entry.path.parent, output):
        return (f"{output} is the directory of {entry.path}, an input of this command ({entry.flag}), which a "
                "file written there would replace")
    return None


def _inside(path: Path, directory: Path) -> bool:
    """Whether ``path`` lies inside ``directory`` (both resolved)."""
    try:
        return directory.resolve() in path.resolve().parents
    except (OSError, RuntimeError):
        return False


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
           "run_references", "config_references", "champions_dir_references", "groups_references", "references_of",
           "REFERENCES", "CHAMPION_DIR_PARAMS", "CHAMPION_PARAMS", "RUN_DIR_PARAMS", "CONFIG_PARAMS",
           "RUN_FILE_SETTINGS", "MODEL_MARKER"]

"""Where commands may write: the output-path guard and the rescue directory.

Every command that writes checks its output paths before any work:
:func:`check_output_file` for a file (a table, a plot, a report) and
:func:`check_output_dir` for a directory (a dataset, the parent of run
directories, the champions directory). A path is refused, with one line naming
it, when

* it is empty, or holds a control character (a newline, tab, escape ...:
  :func:`control_character`; commands print the paths they write, one per line), or a
  directory where a file is expected (or the reverse), or a special file (``/dev/null``
  would be replaced by the atomic rename);
* a parent is a file, or the nearest existing parent cannot be written;
* it is one of the command's inputs (the same file, also through a link);
* it would replace a file of a dataset directory (``train.parquet`` ...
  ``test.trees.parquet``, ``metadata.json``, ``texts.jsonl``: :func:`dataset_files`) or of a run
  directory (:data:`RUN_FILES`), or be read as a champion file (``*.json``,
  ``*.py`` directly inside a champions directory the command reads);
* it lies inside the package's source: the packages :data:`PACKAGES` and the
  repository's top-level Python files and ``pyproject.toml`` (``data/``, the
  default dataset directory, holds no code).

When writing still fails at the end of a long job, :func:`write_or_rescue`
saves the result under a new directory in the temporary directory
(:func:`rescue_dir`) and raises an InputError naming both places, so a result
is never lost silently.

The guard depends on nothing above it (the standard library and :mod:`evolve.errors`): the modules that define a
dataset's files register their names (:func:`register_dataset_files`; :mod:`evolve.traces.io` the splits and
``metadata.json``, :mod:`evolve.traces.tree_tables` the tree tables, :mod:`evolve.harvest.resume` ``texts.jsonl``) when
they are imported, and the command line imports all three before any check (:mod:`evolve.cli.inventory`).
"""
from __future__ import annotations

import os
import tempfile
import unicodedata
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from evolve.errors import InputError, os_error_text

T = TypeVar("T")

#: The repository (or site-packages) directory holding the packages.
ROOT = Path(__file__).resolve().parents[2]
#: The package directories whose contents are source code.
PACKAGES: tuple[str, ...] = ("evolve", "heuristics", "tests")
#: Suffixes of files that are (or are made from) source code.
SOURCE_SUFFIXES = frozenset({".py", ".pyc", ".pyi", ".pyd", ".so", ".pth", ".nbi", ".nbc"})
#: Files of the repository root that are source.
TOP_LEVEL_SOURCES = frozenset({"pyproject.toml", "setup.py", "setup.cfg"})
#: The file names of a dataset directory registered so far (:func:`register_dataset_files`).
_DATASET_FILES: set[str] = set()
#: The files of a run directory (written by :func:`evolve.search.run_files.write_run`).
RUN_FILES = frozenset({"config.toml", "run.json", "logbook.csv", "hall_of_fame.json", "champion.json",
                       "champion.py", "front.json", "fitness.png"})
#: Prefix of the directories made by :func:`rescue_dir`.
RESCUE_PREFIX = "specdec-rescued-"


def resolved(path: Path) -> Path:
    """``path`` made absolute with its links resolved (only made absolute where a link loops)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return path.absolute()


def same_path(a: Path, b: Path) -> bool:
    """Whether two paths name the same file or directory (also through links)."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return resolved(a) == resolved(b)


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def register_dataset_files(names: Iterable[str]) -> None:
    """Add ``names`` (file names, no directories) to the files of a dataset directory: a dataset directory is one
    holding any of them, and no output may replace one there. Called by the module that defines the names, when it
    is imported (see the module doc). Raises: ValueError for an empty name or one with a path separator."""
    names = tuple(names)
    bad = next((n for n in names if not n or os.sep in n or (os.altsep and os.altsep in n)), None)
    if bad is not None:
        raise ValueError(f"a dataset file is a plain file name (got {bad!r})")
    _DATASET_FILES.update(names)


def dataset_files() -> frozenset[str]:
    """The file names of a dataset directory registered so far (:func:`register_dataset_files`)."""
    return frozenset(_DATASET_FILES)


def is_dataset_dir(directory: Path) -> bool:
    """Whether ``directory`` holds a dataset (any of :func:`dataset_files`: ``metadata.json`` or a split file)."""
    return any((directory / name).is_file() for name in dataset_files())


def is_run_dir(directory: Path) -> bool:
    """Whether ``directory`` is a run directory of ``python -m evolve run`` (holds ``run.json``)."""
    return (directory / "run.json").is_file()


def source_location(path: str | os.PathLike, allowed: str | os.PathLike | None = None) -> str | None:
    """Why ``path`` lies inside the package's source (a short phrase), or None when it does not.

    Args:
        path: a file or directory (need not exist).
        allowed: a directory inside the source that may be written (with
            everything below it), e.g. the default champions directory.
    """
    p = resolved(Path(path))
    if allowed is not None and _inside(p, resolved(Path(allowed))):
        return None
    if p.parent == ROOT and (p.suffix in SOURCE_SUFFIXES or p.name in TOP_LEVEL_SOURCES):
        if not p.exists() and p.suffix == ".py":
            return (f"a new Python file at the top of the repository ({ROOT}), which Python would import in place of "
                    f"a module of its name; write it into another directory (e.g. results/)")
        return f"a source file of the repository ({ROOT})"
    for name in PACKAGES:
        package = ROOT / name
        if _inside(p, package) and package.is_dir():
            return f"inside the package's source ({package})"
    return None


Refuse = Callable[[str], InputError]


def _refusal(what: str | None, param: str | None, default: str) -> Refuse:
    """The error of a refused path: ``what: text``, or with ``param`` the text naming that parameter
    (``output: x is a directory``; the command line shows its option). ``default`` names the path when
    neither is given."""
    if what is None and param is None:
        what = default
    return lambda text: InputError(text if what is None else f"{what}: {text}", param=param)


def _check_parents(path: Path, refuse: Refuse) -> None:
    """The nearest existing parent of ``path`` must be a writable directory."""
    parent = next((q for q in path.parents if q.exists()), Path("."))
    if not parent.is_dir():
        raise refuse(f"{parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise refuse(f"cannot write into {parent} (permission denied)")


def _check_protected(path: Path, refuse: Refuse) -> None:
    """Refuse a path that would replace (or hide) a file of a dataset or run directory."""
    for p in (path, *path.parents):
        parent = p.parent
        if parent == p:
            break
        if p.name in _DATASET_FILES and parent.is_dir() and is_dataset_dir(parent):
            raise refuse(f"{path} would replace a file of the dataset in {parent}")
        if p.name in RUN_FILES and parent.is_dir() and is_run_dir(parent):
            raise refuse(f"{path} would replace a file of the run directory {parent}")
        if p.exists():
            break


def _check_inputs(path: Path, inputs: Iterable[str | os.PathLike | None],
                  champion_dirs: Iterable[str | os.PathLike | None], refuse: Refuse) -> None:
    """Refuse ``path`` when it is one of ``inputs`` or a file directly inside one of ``champion_dirs``
    that would be read as a champion."""
    for given in inputs:
        if given is not None and str(given) != "" and same_path(path, Path(given)):
            raise refuse(f"{path} is also an input of this command")
    for given in champion_dirs:
        if given is not None and str(given) != "" and path.suffix.lower() in (".json", ".py") \
                and same_path(path.parent, Path(given)):
            raise refuse(f"{path} would be read as a champion file of {given}")


def control_character(text: str) -> int | None:
    """Index of the first character of ``text`` that would break it out of one line of a terminal (a C0 or C1
    control character such as a newline, tab or escape, DEL, or the Unicode line and paragraph separators
    U+2028/U+2029), or None when there is none."""
    for i, ch in enumerate(text):
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            return i
    return None


def _check_nonempty(path: str | os.PathLike | None, refuse: Refuse) -> Path:
    """The path, refused when empty or holding a control character: commands print the paths they write
    (``python -m evolve run`` prints its run directory as the last line of stdout), and a newline or an
    escape sequence in them would split or garble that line."""
    if path is None or str(path).strip() == "":
        raise refuse("the path is empty")
    text = os.fsdecode(path)
    i = control_character(text)
    if i is not None:
        shown = "".join(ascii(ch)[1:-1] if control_character(ch) is not None else ch for ch in text)
        raise refuse(f"{shown}: the path holds the control character {ascii(text[i])[1:-1]} at position {i}; "
                     "use a name without control characters (the path is printed on one line)")
    return Path(path)


def check_output_file(path: str | os.PathLike, inputs: Iterable[str | os.PathLike | None] = (),
                      what: str | None = None, champion_dirs: Iterable[str | os.PathLike | None] = (),
                      *, param: str | None = None) -> Path:
    """Check, before any work, that a file may be written at ``path``.

    Args:
        path: the file to write (need not exist).
        inputs: the files and directories the command reads (None entries are skipped).
        what: how the path is named in messages (e.g. ``chart beside it``); default ``output``
            when there is no ``param``.
        champion_dirs: champions directories the command reads; a ``.json`` or ``.py``
            file directly inside one is refused (it would be read as a champion).
        param: the parameter that gave the path (e.g. ``output``), set on the error.

    Returns: ``path`` as a :class:`~pathlib.Path`.

    Raises: InputError (one line naming ``what`` or ``param`` and the path) for every case in the module doc.
    """
    refuse = _refusal(what, param, "output")
    p = _check_nonempty(path, refuse)
    if p.is_dir():
        raise refuse(f"{p} is a directory")
    if p.exists() and not p.is_file():
        raise refuse(f"{p} is not a regular file")
    _check_parents(p, refuse)
    if p.exists() and not os.access(p, os.W_OK):
        raise refuse(f"{p} is read-only")
    _check_inputs(p, inputs, champion_dirs, refuse)
    _check_protected(p, refuse)
    where = source_location(p)
    if where is not None:
        raise refuse(f"{p} is {where}")
    return p


def check_output_dir(path: str | os.PathLike, inputs: Iterable[str | os.PathLike | None] = (),
                     what: str | None = None, allowed_source: str | os.PathLike | None = None,
                     *, param: str | None = None) -> Path:
    """Check, before any work, that files may be written into the directory ``path``.

    Args:
        path: the directory (created later if it does not exist).
        inputs: the files and directories the command reads; ``path`` may not be one of them.
        what: how the path is named in messages (e.g. ``champions directory``); default ``out``
            when there is no ``param``.
        allowed_source: a directory inside the source that may be written (the champions directory).
        param: the parameter that gave the path (e.g. ``out``), set on the error.

    Returns: ``path`` as a :class:`~pathlib.Path`.

    Raises: InputError (one line naming ``what`` or ``param`` and the path) for every case in the module doc.
    """
    refuse = _refusal(what, param, "out")
    p = _check_nonempty(path, refuse)
    if p.exists() and not p.is_dir():
        raise refuse(f"{p} exists and is not a directory")
    if p.is_dir():
        if not os.access(p, os.W_OK | os.X_OK):
            raise refuse(f"cannot write into {p} (permission denied)")
    else:
        _check_parents(p, refuse)
    _check_inputs(p, inputs, (), refuse)
    if not p.exists():
        _check_protected(p, refuse)
    where = source_location(p, allowed_source)
    if where is not None:
        raise refuse(f"{p} is {where}")
    return p


def rescue_dir() -> Path:
    """A new, empty directory for results that could not be written where asked.

    Made in the temporary directory (:func:`tempfile.gettempdir`), else the home
    directory, else the current one. Raises: InputError when none can be written.
    """
    tried = []
    for base in (tempfile.gettempdir(), Path.home(), Path.cwd()):
        try:
            return Path(tempfile.mkdtemp(prefix=RESCUE_PREFIX, dir=base))
        except OSError as exc:
            tried.append(os_error_text(exc))
    raise InputError(f"cannot create a rescue directory ({'; '.join(tried)})")


def write_or_rescue(write: Callable[[Path], T], target: str | os.PathLike, what: str | None = None,
                    is_dir: bool = False, *, param: str | None = None) -> T:
    """``write(target)``; if it fails with an OSError, ``write`` into a :func:`rescue_dir` instead.

    Args:
        write: writes the result at the path it is given and returns what it wrote.
        target: the path asked for (a file, or with ``is_dir`` a directory).
        what: how ``target`` is named in messages (default ``output`` when there is no ``param``).
        is_dir: ``target`` is a directory (the rescue directory itself is passed to
            ``write``), else a file (``rescue_dir() / target.name`` is passed).
        param: the parameter that gave ``target`` (e.g. ``output``), set on the error.

    Returns: ``write``'s result when the asked-for place could be written.

    Raises: InputError after a failure, naming the reason and where the result
    was saved instead (or why that failed too).
    """
    refuse = _refusal(what, param, "output")
    target = Path(target)
    try:
        return write(target)
    except OSError as exc:
        reason = os_error_text(exc)
    place = rescue_dir()
    fallback = place if is_dir else place / (target.name or "output")
    try:
        saved = write(fallback)
    except OSError as exc:
        raise refuse(f"cannot write {target} ({reason}); saving to {fallback} failed too "
                     f"({os_error_text(exc)})") from None
    saved = saved if isinstance(saved, (str, os.PathLike)) else fallback
    raise refuse(f"cannot write {target} ({reason}); the result was saved to {saved} instead")


__all__ = ["resolved", "same_path", "check_output_file", "check_output_dir", "control_character", "source_location",
           "register_dataset_files", "dataset_files", "is_dataset_dir", "is_run_dir", "rescue_dir", "write_or_rescue",
           "RUN_FILES", "PACKAGES", "ROOT"]

"""Where a command's results go: the output format, the output-path checks, and atomic writes of its text and PNG.

Every command that writes a table or plot checks its ``output`` file (and the plot
beside it) before any work (:func:`check_output`, which applies the guard of
:mod:`evolve.files.guard`: never a directory, an input, a file of a dataset or run
directory, or the package's source) and writes only when everything
succeeded, each file atomically (temporary file + rename,
:func:`evolve.files.atomic.atomic_write_bytes`). If a write still fails at the end, the
files not yet written are saved into a rescue directory
(:func:`evolve.files.guard.rescue_dir`) and the one-line error names it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from evolve.errors import InputError, os_error_text
from evolve.files.atomic import atomic_write_bytes
from evolve.files.guard import check_output_file, rescue_dir

#: Output file suffixes that select a format when ``fmt`` (the command line's ``--format``) is not given.
SUFFIX_FORMATS = {".json": "json", ".csv": "csv", ".md": "markdown", ".markdown": "markdown",
                  ".txt": "table"}


def resolve_format(fmt: str | None, output: str | os.PathLike | None,
                   formats: tuple[str, ...]) -> str:
    """The output format of a command offering ``formats``: ``fmt`` if given, else from the
    output file's suffix (:data:`SUFFIX_FORMATS`, when the command offers it), else ``table``.
    Raises InputError (parameter ``fmt``) for a format not in ``formats``."""
    if fmt is None:
        if output is not None:
            guess = SUFFIX_FORMATS.get(Path(output).suffix.lower(), "table")
            return guess if guess in formats else "table"
        return "table"
    if fmt not in formats:
        raise InputError(f"unknown format '{fmt}' (choose from {', '.join(formats)})", param="fmt")
    return fmt


def write_output(text: str, output: str | os.PathLike) -> None:
    """Write ``text`` to ``output`` atomically. Raises InputError if it cannot be written
    (the text is then saved in a rescue directory, which the message names)."""
    write_outputs(text, output, None, output)


def check_output(output: str | os.PathLike | None, image: str | None = None,
                 inputs: Iterable[str | os.PathLike | None] = (), png_path: str | os.PathLike | None = None,
                 champion_dirs: Iterable[str | os.PathLike | None] = ()) -> None:
    """Check ``output`` and the image beside it before any work is done.

    Args:
        output: the output file, or None (the text goes to stdout).
        image: what the PNG is called in messages ("plot", "chart"), or None when no
            PNG is written. The PNG goes next to ``output`` under its name with suffix
            .png, so ``output`` may not be a .png itself.
        inputs: files and directories the command reads (datasets, run
            directories, champion files); no output may be one of them.
        png_path: where the PNG goes when there is no ``output`` (checked as well).
        champion_dirs: champions directories the command reads.

    Raises: InputError naming the parameter ``output`` (or, for the PNG without an
    ``output``, the image) for every refusal of :func:`evolve.files.guard.check_output_file`.
    """
    inputs, champion_dirs = list(inputs), list(champion_dirs)
    if output is not None:
        out = check_output_file(output, inputs, champion_dirs=champion_dirs, param="output")
        if image is not None and out.suffix.lower() == ".png":
            raise InputError(f"the table cannot share the {image}'s .png name ({out})", param="output")
        if image is not None:
            check_output_file(out.with_suffix(".png"), inputs, f"{image} beside it", champion_dirs,
                              param="output")
    elif image is not None and png_path is not None:
        check_output_file(png_path, inputs, f"{image} file", champion_dirs)


def write_outputs(text: str, output: str | os.PathLike | None, png: bytes | None,
                  png_path: str | os.PathLike, png_param: str = "output") -> Path | None:
    """Write ``text`` to ``output`` (when given) and ``png`` to ``png_path`` (when any), each atomically.

    Returns the PNG path written, or None. Raises InputError naming the parameter ``output``
    (``png_param`` for the PNG) when a file cannot be written; that file and the
    ones after it are then saved into a new rescue directory
    (:func:`evolve.files.guard.rescue_dir`), which the message names.
    """
    files: list[tuple[Path, bytes, str]] = []
    if output is not None:
        if Path(output).is_dir():
            raise InputError(f"{output} is a directory", param="output")
        files.append((Path(output), text.encode("utf-8"), "output"))
    if png is not None:
        files.append((Path(png_path), png, png_param))
    for k, (path, data, param) in enumerate(files):
        try:
            atomic_write_bytes(path, data)
        except OSError as exc:
            _rescue(files[k:], f"cannot write {path} ({os_error_text(exc)})", param)
    return Path(png_path) if png is not None else None


def _rescue(files: list[tuple[Path, bytes, str]], failure: str, param: str) -> None:
    """Save ``files`` (path, bytes, parameter) into a rescue directory; raise InputError naming ``param``."""
    place = rescue_dir()
    try:
        for path, data, _ in files:
            atomic_write_bytes(place / (path.name or "output"), data)
    except OSError as exc:
        raise InputError(f"{failure}; saving to {place} failed too ({os_error_text(exc)})", param=param) from None
    what = "the result was" if len(files) == 1 else f"{len(files)} files were"
    raise InputError(f"{failure}; {what} saved to {place} instead", param=param)

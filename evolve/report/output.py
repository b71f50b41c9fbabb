"""Where a command's results go: the output format, and atomic writes of its text and PNG.

Every command that writes a table or plot checks ``--output`` before any work
(:func:`check_output`) and writes only when everything succeeded, each file
atomically (temporary file + rename, :func:`data.io.atomic_write_text`).
"""
from __future__ import annotations

import os
from pathlib import Path

from data.errors import InputError
from data.io import atomic_write_bytes, atomic_write_text

#: Output file suffixes that select a format when ``--format`` is not given.
SUFFIX_FORMATS = {".json": "json", ".csv": "csv", ".md": "markdown", ".markdown": "markdown",
                  ".txt": "table"}


def resolve_format(fmt: str | None, output: str | os.PathLike | None,
                   formats: tuple[str, ...]) -> str:
    """The output format of a command offering ``formats``: ``fmt`` if given, else from the
    output file's suffix (:data:`SUFFIX_FORMATS`, when the command offers it), else ``table``.
    Raises InputError for a format not in ``formats``."""
    if fmt is None:
        if output is not None:
            guess = SUFFIX_FORMATS.get(Path(output).suffix.lower(), "table")
            return guess if guess in formats else "table"
        return "table"
    if fmt not in formats:
        raise InputError(f"option '--format': unknown format '{fmt}' (choose from {', '.join(formats)})")
    return fmt


def write_output(text: str, output: str | os.PathLike) -> None:
    """Write ``text`` to ``output`` atomically. Raises InputError if it cannot be written."""
    path = Path(output)
    if path.is_dir():
        raise InputError(f"option '--output': {path} is a directory")
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise InputError(f"option '--output': cannot write {path} ({exc.strerror or exc})") from None


def check_output(output: str | os.PathLike | None, image: str | None = None) -> None:
    """Check ``--output`` before any work is done.

    It must not be a directory and, when an image (``image``: "plot", "chart")
    is written next to it under its name with suffix .png, not be a .png itself.
    Raises: InputError naming ``--output``.
    """
    if output is None:
        return
    out = Path(output)
    if out.is_dir():
        raise InputError(f"option '--output': {out} is a directory")
    if image is not None and out.suffix.lower() == ".png":
        raise InputError(f"option '--output': the table cannot share the {image}'s .png name ({out})")


def write_outputs(text: str, output: str | os.PathLike | None, png: bytes | None,
                  png_path: str | os.PathLike, option: str = "--output") -> Path | None:
    """Write ``text`` to ``output`` (when given) and ``png`` to ``png_path`` (when any), each atomically.

    Returns the PNG path written, or None. Raises InputError naming ``option``
    when the PNG cannot be written (and as :func:`write_output` for the text).
    """
    if output is not None:
        write_output(text, output)
    if png is None:
        return None
    path = Path(png_path)
    try:
        atomic_write_bytes(path, png)
    except OSError as exc:
        raise InputError(f"option '{option}': cannot write {path} ({exc.strerror or exc})") from None
    return path



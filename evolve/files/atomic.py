"""Atomic writes: a file is written to a temporary name beside it and renamed into place.

The temporary file of a write of ``NAME`` is ``.NAME.tmp-XXXXXXXX`` (:data:`TEMP_MARK`, the random suffix of
:func:`tempfile.mkstemp`), created with ordinary permissions and locked by its writer until the rename
(:func:`evolve.files.locks.mkstemp_locked`). A reader therefore sees the old file or the new one, never half
of one; a write that is interrupted removes its temporary file, and one that is killed leaves it, to be
removed by the next successful write of the same name (:func:`remove_stale_temps`), which never touches the
temporary file of a writer still at work. Used by every writer of datasets, run directories, checkpoints,
reports and cost files.
"""
from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from evolve.files.locks import claim_stale, mkstemp_locked

#: What follows ``.NAME`` in the name of a temporary file of an atomic write of ``NAME``.
TEMP_MARK = ".tmp-"


def _file_mode() -> int:
    """Permissions of a new file under the current umask (mkstemp alone would give 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _file_mode()


def mkstemp_beside(directory: Path, name: str) -> tuple[int, str]:
    """A temporary file beside ``name`` in ``directory``, with ordinary permissions, locked by this
    writer through the returned descriptor (:func:`evolve.files.locks.mkstemp_locked`: while it, or a
    duplicate, is open, :func:`remove_stale_temps` leaves the file alone)."""
    fd, tmp = mkstemp_locked(directory, f".{name}{TEMP_MARK}")
    os.chmod(tmp, _FILE_MODE)
    return fd, tmp


def remove_stale_temps(directory: str | os.PathLike, name: str, keep: str | None = None,
                       min_age: float = 0.0) -> list[Path]:
    """Remove the temporary files ``.NAME.tmp-XXXXXXXX`` of atomic writes of ``name`` in ``directory``.

    Called after a successful write of ``name``: such files are left only by a
    write that was killed (an interrupted one removes its own). Only entries with
    exactly the random suffix of :func:`tempfile.mkstemp` are removed, and only
    when their writer is gone: a writer locks its temporary file from creation to
    rename (:func:`evolve.files.locks.claim_stale`), so the in-flight file of a
    write running elsewhere, in this process or another, is never removed.

    Args:
        directory: where to look (nothing happens if it cannot be listed).
        name: the file name written; ``*`` in it stands for any characters
            (``run-*`` for the staging directories of run directories).
        keep: a temporary file not to remove.
        min_age: keep entries modified less than this many seconds ago (the
            temporary files of a write still running elsewhere).

    Returns: the paths removed. Directories (staging directories) are removed with their contents.
    """
    pattern = re.compile(re.escape(f".{name}{TEMP_MARK}").replace(r"\*", ".*") + r"[a-z0-9_]{8}")
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not pattern.fullmatch(entry.name) or entry.path == keep or entry.is_symlink():
            continue
        try:
            if min_age > 0 and now - entry.stat().st_mtime < min_age:
                continue
            with claim_stale(entry.path) as stale:
                if not stale:
                    continue  # its writer is still at work
                if entry.is_dir():
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = mkstemp_beside(path.parent, path.name)
    guard = os.dup(fd)  # keeps the temporary file locked until it is renamed
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise
    finally:
        os.close(guard)
    remove_stale_temps(path.parent, path.name)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Text version of :func:`atomic_write_bytes` (UTF-8)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def remove_quietly(path: str) -> None:
    """Remove the file ``path``; nothing happens if it is already gone."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


__all__ = ["TEMP_MARK", "atomic_write_bytes", "atomic_write_text", "mkstemp_beside", "remove_quietly",
           "remove_stale_temps"]

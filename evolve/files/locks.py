"""Locks: one writer per output directory, and temporary files that tell whether their writer is alive.

Both kinds of lock are ``flock`` locks, which the kernel releases when their process ends (``kill -9``
included), so a lock is never left behind by a killed writer:

* :class:`DirectoryLock`: a directory that one process at a time may write (a run's checkpoint
  directory for the whole run or resume, :mod:`evolve.search.rundir`; a dataset directory while
  :func:`evolve.traces.io.write_dataset` writes it). A file lock (the ``filelock`` package) on
  ``DIR/.specdec-evolve.lock`` (:data:`LOCK_FILE`); its holder writes its PID and host into
  ``DIR/.specdec-evolve.lock.pid``, so that a second writer is refused in one line that names the
  first. Both files are removed when the lock is released.
* temporary files and staging directories of atomic writes are locked by their writer from their
  creation (:func:`mkstemp_locked`, :func:`mkdtemp_locked`) until they are renamed into place;
  :func:`claim_stale` tells a temporary file of a live writer from one that a killed writer left
  (:func:`evolve.files.atomic.remove_stale_temps` removes only the latter).

Where ``flock`` does not exist (Windows) temporary files are not locked and count as left behind
(a file that another process holds open cannot be removed there anyway).
"""
from __future__ import annotations

import errno
import os
import socket
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Callable, Iterator

from evolve.errors import InputError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: Name of the lock file of a :class:`DirectoryLock`, inside the locked directory.
LOCK_FILE = ".specdec-evolve.lock"
#: What follows :data:`LOCK_FILE` in the name of the file holding the holder's PID.
PID_SUFFIX = ".pid"
#: Errors of a non-blocking ``flock`` that mean "held by another".
_BUSY = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES})
#: Attempts to create a locked temporary file (one fails only when a cleaner took the new file).
_ATTEMPTS = 100


def _flock(fd: int) -> bool | None:
    """Try to lock ``fd`` exclusively without waiting: True locked, False held elsewhere, None no locks here."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return False if exc.errno in _BUSY else None  # any other error: this file system cannot lock it
    return True


def _lock_new(fd: int) -> bool:
    """Lock the new temporary file or directory open as ``fd``; False when a cleaner holds or removed it."""
    got = _flock(fd)
    if got is None:
        return True
    return got and os.fstat(fd).st_nlink > 0


def mkstemp_locked(directory: str | os.PathLike, prefix: str) -> tuple[int, str]:
    """``tempfile.mkstemp(dir=directory, prefix=prefix)`` with the new file locked through the returned
    descriptor (the lock lasts while any duplicate of it is open)."""
    for _ in range(_ATTEMPTS):
        fd, path = tempfile.mkstemp(dir=directory, prefix=prefix)
        if _lock_new(fd):
            return fd, path
        os.close(fd)  # a cleaner took it for a left-over file and removes it
    raise OSError(errno.EAGAIN, "cannot create a temporary file (taken every time)", str(directory))


def mkdtemp_locked(directory: str | os.PathLike, prefix: str) -> tuple[Path, int]:
    """``tempfile.mkdtemp(dir=directory, prefix=prefix)`` with the new directory locked through the
    returned descriptor (close it when the directory has been renamed or removed)."""
    for _ in range(_ATTEMPTS):
        path = tempfile.mkdtemp(dir=directory, prefix=prefix)
        fd = os.open(path, os.O_RDONLY)
        if _lock_new(fd):
            return Path(path), fd
        os.close(fd)
    raise OSError(errno.EAGAIN, "cannot create a temporary directory (taken every time)", str(directory))


@contextmanager
def claim_stale(path: str | os.PathLike) -> Iterator[bool]:
    """Whether the temporary file or directory ``path`` was left by a writer that is gone.

    Yields True when no process holds its lock (it is then held here until the block ends, so no
    writer can take it meanwhile: remove it inside the block), False when its writer is still
    running or the entry cannot be opened (it is left alone).
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        yield False
        return
    try:
        got = _flock(fd)
        yield got is not False
    finally:
        os.close(fd)


def holder(directory: str | os.PathLike) -> str:
    """``PID 1234`` (``PID 1234 on host H`` for another host) of the process holding the lock of ``directory``."""
    try:
        fields = (Path(directory) / (LOCK_FILE + PID_SUFFIX)).read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError):
        fields = []
    if not fields or not fields[0].isdigit():
        return "PID unknown"
    host = fields[1] if len(fields) > 1 else ""
    return f"PID {fields[0]}" + (f" on host {host}" if host and host != socket.gethostname() else "")


class DirectoryLock:
    """The lock of a directory that one process at a time may write (see the module doc).

    Args:
        directory: the directory (it must exist).
        busy: the one-line message of the refusal, given the holder (``PID 1234``, :func:`holder`).

    Use as a context manager (entering a lock already acquired keeps it), or :meth:`acquire` and
    :meth:`release`.

    Raises (acquire): InputError with ``busy`` when another process holds the lock; OSError when the
    lock file cannot be created (e.g. a read-only directory).
    """

    def __init__(self, directory: str | os.PathLike, busy: Callable[[str], str]):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILE
        self.busy = busy
        self._lock = None

    def acquire(self) -> "DirectoryLock":
        """Take the lock and write this process's PID beside it."""
        from filelock import FileLock, Timeout

        for _ in range(_ATTEMPTS):
            lock = FileLock(str(self.path), timeout=0)
            try:
                lock.acquire(timeout=0)
            except Timeout:
                raise InputError(self.busy(holder(self.directory))) from None
            if self._still_linked(lock):
                break
            lock.release()  # the file was removed by the holder that just released it: take the new one
        else:
            raise InputError(self.busy(holder(self.directory)))
        self._lock = lock
        try:
            (self.directory / (LOCK_FILE + PID_SUFFIX)).write_text(f"{os.getpid()} {socket.gethostname()}\n",
                                                                   encoding="utf-8")
        except OSError:
            pass  # a refused writer then says "PID unknown"
        return self

    def _still_linked(self, lock) -> bool:
        fd = getattr(getattr(lock, "_context", None), "lock_file_fd", None)
        if fd is None:
            return True
        try:
            return os.path.samestat(os.fstat(fd), os.stat(self.path))
        except OSError:
            return False

    def release(self) -> None:
        """Remove the PID and lock files, then release the lock (nothing happens when it is not held)."""
        if self._lock is None:
            return
        for name in (LOCK_FILE + PID_SUFFIX, LOCK_FILE):
            with suppress(OSError):
                os.unlink(self.directory / name)
        lock, self._lock = self._lock, None
        lock.release()

    def __enter__(self) -> "DirectoryLock":
        return self if self._lock is not None else self.acquire()

    def __exit__(self, *exc) -> bool:
        self.release()
        return False


__all__ = ["LOCK_FILE", "PID_SUFFIX", "DirectoryLock", "holder", "claim_stale", "mkstemp_locked", "mkdtemp_locked"]

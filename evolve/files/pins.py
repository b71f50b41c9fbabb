"""Pinned input files: the SHA-256 a run recorded for a file it reads, and reads that refuse other content.

A search records the digest of every file it reads when it starts (the checkpoint's ``data_sha256`` and
``inputs``), but some files are read again later in the same process or in an island worker: the cost file
(read once per file state), the tree tables of a tree-shape run (read by every evaluator built). Each such
read goes through :func:`read_bytes` with the digest pinned here (:func:`pin`), so the bytes parsed are the
bytes whose digest the run recorded, or the read is refused in one line naming the file: a file replaced
while a run goes cannot give digests of one content and scores of another.

Pins live in the process that sets them (the run's own process, each island worker); a run sets its pins
when it starts or resumes, replacing those of an earlier run of the same files, and drops them all when it
ends (:func:`released`).
"""
from __future__ import annotations

import functools
import os
from typing import Callable, TypeVar

from evolve.errors import InputError
from evolve.files.digest import same_digest, sha256_bytes

_PINS: dict[str, str] = {}
_F = TypeVar("_F", bound=Callable)


def pin(path: str | os.PathLike, sha256: str) -> None:
    """Pin the file ``path`` (made absolute) to the SHA-256 ``sha256`` (hex) in this process."""
    _PINS[os.path.abspath(path)] = sha256


def unpin(path: str | os.PathLike) -> None:
    """Drop the pin of ``path`` (no error when it has none)."""
    _PINS.pop(os.path.abspath(path), None)


def pinned(path: str | os.PathLike) -> str | None:
    """The SHA-256 ``path`` is pinned to in this process, or None."""
    return _PINS.get(os.path.abspath(path))


def clear() -> None:
    """Drop every pin of this process."""
    _PINS.clear()


def released(fn: _F) -> _F:
    """Decorator: the pins set while ``fn`` runs are dropped when it returns or raises (:func:`clear`), so a file
    changed after a run is read afresh by whatever reads it next."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            clear()
    return call  # type: ignore[return-value]


def read_bytes(path: str | os.PathLike, what: str) -> tuple[bytes, str]:
    """(bytes, SHA-256 hex of those bytes) of the file ``path``, read once.

    ``what`` names the file in messages (``cost file``, ``tree table``).
    Raises: OSError as :func:`open`; InputError (one line naming the file and both digests) when the file is
    pinned (:func:`pin`) and its bytes have another SHA-256.
    """
    with open(path, "rb") as fh:
        raw = fh.read()
    digest = sha256_bytes(raw)
    want = pinned(path)
    if want is not None and not same_digest(want, digest):
        raise InputError(f"{path}: the {what} changed since the run started and recorded its SHA-256 "
                         f"(SHA-256 {digest[:12]}..., pinned {want[:12]}...); restore it or start a new run")
    return raw, digest


__all__ = ["pin", "unpin", "pinned", "clear", "released", "read_bytes"]

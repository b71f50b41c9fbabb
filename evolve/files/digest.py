"""SHA-256 digests of bytes and of files, the one place they are computed (datasets bound to their records, pinned
inputs, model files, checkpoints).

:func:`sha256_file` reads a file in blocks, so a split larger than memory is hashed without being held;
:func:`cached_sha256_file` remembers the digest of a file while its size and modification time stay the same, for a
reader that binds the same large file on every pass (chunked reads of a split, :mod:`evolve.traces.chunks`).
"""
from __future__ import annotations

import functools
import hashlib
import os

#: Bytes read per block.
BLOCK = 1 << 22


def sha256_bytes(raw: bytes) -> str:
    """SHA-256 (hex) of ``raw``."""
    return hashlib.sha256(raw).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of the file ``path``, read in blocks of :data:`BLOCK` bytes. Raises OSError."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(BLOCK), b""):
            h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=256)
def _cached(path: str, size: int, mtime_ns: int, inode: int) -> str:
    return sha256_file(path)


def cached_sha256_file(path: str | os.PathLike) -> str:
    """:func:`sha256_file` of ``path``, computed once per state of the file (its size, modification time and inode
    unchanged: a file replaced or rewritten is hashed again). Raises OSError."""
    st = os.stat(path)
    return _cached(os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ino)


def same_digest(recorded, computed: str | None) -> bool:
    """Whether the SHA-256 ``recorded`` in a file (any JSON value) is ``computed`` (hex, as :func:`sha256_bytes`
    gives it): hex digits compare case-insensitively, so a digest written in upper case by another tool is the same
    digest; anything that is not a string is never the same."""
    return isinstance(recorded, str) and isinstance(computed, str) and recorded.lower() == computed.lower()


__all__ = ["BLOCK", "sha256_bytes", "sha256_file", "cached_sha256_file", "same_digest"]

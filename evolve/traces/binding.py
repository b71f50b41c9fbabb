"""The files of a dataset bound together: every file is read only with the records it was written with.

A dataset directory holds the records (``train``/``valid``/``test``, Parquet or JSON) and files derived from them:
``metadata.json`` (statistics of the records, the splits' texts), a tree harvest's tree tables
(``{split}.trees.parquet``, :mod:`evolve.traces.tree_tables`) and a harvest's ``texts.jsonl`` (the texts whose records they
are). Files written at different times (records generated again into a directory that still holds another
dataset's tree tables, a copied ``texts.jsonl``) must never be read together.

When a dataset is written (:func:`evolve.traces.io.write_dataset`, every file staged and renamed together), its
``metadata.json`` records under ``files`` (:data:`FILES_KEY`) the SHA-256 and the row count (lines for a text
file) of every other file written with it (:func:`file_record`). Every reader of a dataset's file checks the bytes it
parsed against that record with one function, :func:`check_bound`: a file of the dataset whose digest differs, or
that the record does not list while it lists others, is refused in one line naming the file and what it should
have been. The readers: :func:`evolve.traces.io.load_split` (records), :func:`evolve.traces.chunks.iter_split_chunks`
(records read row group by row group), :func:`evolve.traces.tree_tables.load_trees` (a tree table and the records of its
split), :func:`evolve.harvest.subset.read_texts` (``texts.jsonl``; the per-category figures of ``benchmark.py`` read
it through it) and ``generate_data.py subset``.

A dataset written before the record existed (no ``files`` in its metadata) still loads: its files are checked by
their counts against the statistics its metadata holds (the records' ``tokens`` and ``sequences``, a tree table's
``trees.trees`` and ``trees.nodes``, the texts per split of ``texts.jsonl``), which catches a table or a text list of
another dataset of another size; a dataset without ``metadata.json`` has nothing to check against.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from evolve.errors import InputError, printable
from evolve.files.digest import same_digest, sha256_file

#: Key of ``metadata.json`` recording the files written with it: {file name: {"sha256": hex, "rows": int}}.
FILES_KEY = "files"
METADATA_NAME = "metadata.json"


def file_record(path: str | os.PathLike, rows: int) -> dict[str, Any]:
    """What ``metadata.json`` records of a file written with the dataset: {"sha256", "rows"}."""
    return {"sha256": sha256_file(path), "rows": int(rows)}


def _recorded(meta: Mapping[str, Any], key_path: str) -> Any:
    value: Any = meta
    for part in key_path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def check_bound(path: str | os.PathLike, sha256: str, meta: Mapping[str, Any] | None,
                counts: Mapping[str, int] | None = None, what: str = "file", recorded_in: str | None = None) -> None:
    """Refuse the file ``path`` of a dataset when it is not the one the dataset's ``metadata.json`` (``meta``, its
    contents; None or empty: no metadata, nothing to check) was written with (module doc).

    ``sha256``: the digest of the bytes the reader parsed. ``counts``: for a dataset written before the record
    existed, {key path in the metadata (``statistics.train.trees.nodes``): the count the file holds}; a key the
    metadata lacks is not checked. ``what`` names the file in messages (``tree table``, ``text list``);
    ``recorded_in`` names where the record is kept when it is not the ``metadata.json`` beside the file (a harvest's
    part file recording its text's tree table, :mod:`evolve.harvest.resume`).

    Raises: InputError (one line naming the file) when the recorded digest differs, when the record lists other
    files but not this one, when the record is malformed, or (older datasets) when a count differs.
    """
    if not meta:
        return
    path = Path(path)
    where = recorded_in or path.parent / METADATA_NAME
    files = meta.get(FILES_KEY)
    if files is not None:
        if not isinstance(files, Mapping):
            raise InputError(f"{where}: key '{FILES_KEY}' must be an object of {{file: {{sha256, rows}}}}")
        entry = files.get(path.name)
        if entry is None:
            raise InputError(f"{path}: a {what} that was not written with this dataset ({where} lists the files "
                             f"written together: {', '.join(sorted(map(str, files))) or 'none'}); it is left from "
                             f"another dataset: delete it, or write the dataset again")
        if not isinstance(entry, Mapping) or not isinstance(entry.get("sha256"), str):
            raise InputError(f"{where}: key '{FILES_KEY}.{printable(path.name)}' must be an object with 'sha256'")
        if not same_digest(entry["sha256"], sha256):
            raise InputError(f"{path}: not the {what} written with this dataset's other files (SHA-256 "
                             f"{sha256[:12]}..., {where} records {entry['sha256'][:12]}...): it was written again or "
                             f"replaced on its own; write the whole dataset again")
        return
    for key, found in (counts or {}).items():
        recorded = _recorded(meta, key)
        if recorded is not None and recorded != found:
            raise InputError(f"{path}: holds {found} where {where} records '{key}' = {recorded!r}: a {what} of "
                             f"another dataset (this dataset's metadata names no file digests; write it again to "
                             f"record them)")


__all__ = ["FILES_KEY", "check_bound", "file_record"]

"""Parquet splits read row group by row group: a split larger than memory, one chunk at a time.

A split written in chunks (:func:`evolve.traces.io.write_dataset` given an iterable of
chunks, ``generate_data.py --chunk-sequences``) holds whole sequences in every
row group, so each row group is a valid split of its own:
:func:`iter_split_chunks` yields them as validated :class:`evolve.traces.io.Traces`,
:func:`split_row_groups` reads the rows per row group from the file's footer
and :func:`iter_parquet_column` one column, row group by row group. Reading
errors become one-line :class:`evolve.errors.InputError` messages, as in :mod:`evolve.traces.io`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from evolve.errors import InputError, os_error_text
from evolve.traces.binding import check_bound
from evolve.files.digest import cached_sha256_file
from evolve.traces.io import METADATA_FILE, Traces, load_metadata, load_split, split_path


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] if text else type(exc).__name__


def _open_parquet(path: Path):
    """A :class:`pyarrow.parquet.ParquetFile` of ``path``; InputError when it is not a readable Parquet file."""
    import pyarrow.parquet as pq

    try:
        with open(path, "rb"):
            pass
        return pq.ParquetFile(path)
    except OSError as exc:
        if exc.filename is None:
            raise InputError(f"{path}: not a readable Parquet file ({_short(exc)})") from None
        raise InputError(os_error_text(exc)) from None
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise InputError(f"{path}: not a readable Parquet file ({_short(exc)})") from None


def split_row_groups(data_dir: str | os.PathLike, split: str) -> list[int] | None:
    """Rows of each row group of ``split`` in ``data_dir`` (its Parquet footer only), or None when the
    split is missing or a JSON file. Raises: InputError for an unreadable Parquet file."""
    path = split_path(data_dir, split)
    if path is None or path.suffix != ".parquet":
        return None
    meta = _open_parquet(path).metadata
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def iter_parquet_column(path: str | os.PathLike, column: str) -> Iterator[np.ndarray]:
    """One column of a Parquet file, row group by row group (numpy arrays, unvalidated).

    Raises: InputError for an unreadable file or a missing column.
    """
    pf = _open_parquet(Path(path))
    if column not in pf.schema_arrow.names:
        raise InputError(f"{path}: no column '{column}'")
    for i in range(pf.metadata.num_row_groups):
        yield pf.read_row_group(i, columns=[column]).column(0).to_numpy()


def _will_need(path: Path, row_group, names: list[str] | None) -> None:
    """Advise the OS that the byte ranges of ``row_group``'s column chunks (``names``, None = all) will be read."""
    if not hasattr(os, "posix_fadvise"):
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        for j in range(row_group.num_columns):
            col = row_group.column(j)
            if names is not None and col.path_in_schema.split(".")[0] not in names:
                continue
            first = col.data_page_offset
            if col.has_dictionary_page and col.dictionary_page_offset is not None:
                first = min(first, col.dictionary_page_offset)
            os.posix_fadvise(fd, first, col.total_compressed_size, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass
    finally:
        os.close(fd)


def iter_split_chunks(data_dir: str | os.PathLike, split: str, columns: Iterable[str] | None = None,
                      prefetch: bool = True) -> Iterator[Traces]:
    """Read one split row group by row group, each validated as a split of its own.

    Only one row group is in memory at a time (plus what the caller keeps). Each
    :class:`Traces` has ``source`` ``FILE row group I (rows A..B)`` (row numbers in
    validation errors count from the row group's first row) and the dataset's
    metadata. A JSON split is read whole and yielded as one chunk. Row groups must
    hold whole sequences (as :func:`evolve.traces.io.write_dataset` writes them from chunks), since
    each is validated alone; no :func:`evolve.traces.io.warn_suspicious` warnings are issued.

    Args:
        data_dir: dataset directory; split: ``train``, ``valid`` or ``test``.
        columns: the columns to read (those the file lacks are skipped; the required
            columns must be among them), or None for all; leaving out
            ``block_residual_phi`` (32 float64 per row) makes reading several times cheaper.
        prefetch: before reading a row group, ask the operating system to read the next one's
            column chunks into its page cache in the background (``posix_fadvise`` WILLNEED, where
            available), so that reading from disk overlaps the caller's work on the current one.

    Raises: InputError as :func:`evolve.traces.io.load_split` (missing or unreadable file, schema violation, a file
    the dataset's metadata.json was not written with: :func:`evolve.traces.binding.check_bound`).
    """
    path = split_path(data_dir, split)
    if path is None or path.suffix != ".parquet":
        yield load_split(data_dir, split)
        return
    meta = load_metadata(data_dir) if (Path(data_dir) / METADATA_FILE).exists() else {}
    pf = _open_parquet(path)
    if meta:  # the file must be the one the metadata was written with (hashed in blocks once per state of the file)
        check_bound(path, cached_sha256_file(path), meta, {f"statistics.{split}.tokens": pf.metadata.num_rows},
                    "split file")
    names = None if columns is None else [c for c in pf.schema_arrow.names if c in set(columns)]
    start = 0
    for i in range(pf.metadata.num_row_groups):
        if prefetch and i + 1 < pf.metadata.num_row_groups:
            _will_need(path, pf.metadata.row_group(i + 1), names)
        try:
            frame = pf.read_row_group(i, columns=names).to_pandas()
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise InputError(f"{path}: row group {i} is not readable ({_short(exc)})") from None
        end = start + len(frame)
        traces = Traces.from_frame(frame, source=f"{path} row group {i} (rows {start}..{end - 1})", split=split)
        del frame
        traces.metadata = meta
        yield traces
        start = end


__all__ = ["split_row_groups", "iter_parquet_column", "iter_split_chunks"]

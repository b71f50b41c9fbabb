"""Reading and writing trace datasets.

A dataset is a directory holding ``train``, ``valid`` and ``test`` files, either
``.parquet`` (default) or the JSON array-of-records format, plus ``metadata.json``
(schema version, generator name and version, full config, seed, per-split
statistics). Every load validates the split (:func:`evolve.traces.schema.validate`).
Writes are atomic (:mod:`evolve.files.atomic`): each file is written to a temporary name beside it
and renamed; a successful write of ``NAME`` removes the temporary files of ``NAME`` that an earlier,
killed write left behind.

A Parquet split may also be written in chunks, one row group per chunk, so that a
split larger than memory is never held whole (:func:`write_dataset` given an
iterable of DataFrames or Traces); it is an ordinary Parquet file that :func:`load_split`
reads whole, and :func:`evolve.traces.chunks.iter_split_chunks` reads row group by row group.

Loading turns every file-system error (a directory where a file is expected, a
missing or unreadable file) into a one-line :class:`evolve.errors.InputError`,
and warns (:class:`evolve.errors.InputWarning`) about a split that is valid but
suspicious: fewer than :data:`TINY_RECORDS` records or :data:`TINY_BLOCKS`
blocks, or positions that decrease inside a block (inside a sequence when the
split has no ``draft_index``).
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from evolve.errors import InputError, InputWarning, json_type, os_error_text, printable
from evolve.files.atomic import mkstemp_beside, remove_quietly, remove_stale_temps
from evolve.files.digest import sha256_bytes
from evolve.files.parquet import read_parquet_bytes
from evolve.files.guard import dataset_files, register_dataset_files
from evolve.files.locks import DirectoryLock
from evolve.traces.binding import FILES_KEY, check_bound, file_record
from evolve.traces.statistics import check_split_statistics, check_statistics
from evolve.traces.schema import COLUMN_BY_NAME, COLUMNS, SCHEMA_VERSION, derive_seq_id, validate

SPLITS: tuple[str, ...] = ("train", "valid", "test")
FORMATS: tuple[str, ...] = ("parquet", "json")
METADATA_FILE = "metadata.json"
register_dataset_files([f"{s}.{f}" for s in SPLITS for f in FORMATS] + [METADATA_FILE])
#: A split with fewer records than this is loaded with a warning.
TINY_RECORDS = 100
#: A split with ``draft_index`` and fewer blocks than this is loaded with a warning.
TINY_BLOCKS = 10


@dataclass
class Traces:
    """One validated split: schema columns as numpy arrays of length ``n``.

    ``columns`` maps column name to a 1-D array (int64, float64 or bool); optional
    columns are present only when the file has them. ``source`` is the file path; ``sha256`` the SHA-256 (hex)
    of the bytes the columns were parsed from (:func:`load_split` reads a file once, hashes and parses the same
    bytes), None for a split built in memory.
    """

    columns: dict[str, np.ndarray]
    source: str = "<memory>"
    split: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    sha256: str | None = None

    @property
    def n(self) -> int:
        """Number of records (drafted tokens)."""
        return int(self.columns["draft_prob"].size)

    def has(self, name: str) -> bool:
        """Whether the split has column ``name``."""
        return name in self.columns

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    @classmethod
    def from_frame(cls, df: pd.DataFrame, source: str = "<memory>", split: str = "") -> "Traces":
        """Validate a DataFrame (see :func:`evolve.traces.schema.validate`) and wrap it.

        Raises: InputError on any schema violation.
        """
        if "seq_id" not in df.columns and "position" in df.columns:
            df = df.assign(seq_id=derive_seq_id(df["position"].to_numpy()))
        return cls(validate(df, source), source=source, split=split)

    def to_frame(self) -> pd.DataFrame:
        """The split as a DataFrame with the schema's column order."""
        return pd.DataFrame({c.name: _frame_column(self.columns[c.name]) for c in COLUMNS if c.name in self.columns})


def _frame_column(values: np.ndarray):
    """A column for a DataFrame: a list column (2-D array, :attr:`evolve.traces.schema.Column.length`) as a list of rows."""
    return list(values) if values.ndim == 2 else values


def split_path(data_dir: str | os.PathLike, split: str) -> Path | None:
    """The file holding ``split`` in ``data_dir`` (Parquet preferred), or None.

    Raises: InputError when the name is taken by a directory or another non-file.
    """
    for fmt in FORMATS:
        p = Path(data_dir) / f"{split}.{fmt}"
        if p.exists():
            if not p.is_file():
                raise InputError(f"{p}: is a {'directory' if p.is_dir() else 'special file'}, "
                                 f"expected the {split} split as a .{fmt} file")
            return p
    return None


def _read_frame(path: Path) -> tuple[pd.DataFrame, str]:
    """The records of the split file ``path`` and the SHA-256 (hex) of the very bytes they were parsed from (the
    file is read once: a file replaced meanwhile cannot give the digest of one content and the records of
    another)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(os_error_text(exc)) from None
    digest = sha256_bytes(raw)
    if path.suffix == ".parquet":
        try:
            return read_parquet_bytes(raw), digest
        except OSError as exc:
            raise InputError(f"{path}: not a readable Parquet file ({_short(exc)})") from None
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise InputError(f"{path}: not a readable Parquet file ({_short(exc)})") from None
    records = json_bytes(raw, path)
    if not isinstance(records, list):
        raise InputError(f"{path}: expected a JSON array of records, found {json_type(records)}")
    _check_records(records, path)
    return pd.DataFrame.from_records(records), digest


def _null_ok(name: str) -> bool:
    return bool(getattr(COLUMN_BY_NAME.get(name), "nan_ok", False))


def _check_records(records: list, path: Path) -> None:
    """Every record is an object with the keys of the first record, none of them null
    (except in a column whose NaN is valid, :attr:`evolve.traces.schema.Column.nan_ok`, written as null)."""
    if not records:
        return
    if not isinstance(records[0], dict):
        raise InputError(f"{path}: record 0 is {json_type(records[0])}, expected an object")
    keys = records[0].keys()
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise InputError(f"{path}: record {i} is {json_type(rec)}, expected an object")
        if rec.keys() != keys:
            missing = [k for k in keys if k not in rec]
            if missing:
                raise InputError(f"{path}: record {i} lacks key '{printable(missing[0])}' (record 0 has it)")
            extra = next(k for k in rec if k not in keys)
            raise InputError(f"{path}: record {i} has key '{printable(extra)}' that record 0 lacks")
        if None in rec.values():
            key = next((k for k, v in rec.items() if v is None and not _null_ok(k)), None)
            if key is not None:
                raise InputError(f"{path}: column '{printable(key)}', row {i}: null (expected a value)")


def read_json(path: str | Path, strict: bool = False) -> Any:
    """The JSON document of the file ``path``.

    ``strict``: refuse the non-standard constants NaN and Infinity. Raises: InputError naming the file
    for a missing or unreadable file, text that is not UTF-8, invalid or too deeply nested JSON.
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise InputError(os_error_text(exc)) from None
    return json_bytes(raw, path, strict)


def json_bytes(raw: bytes, path: str | Path, strict: bool = False) -> Any:
    """The JSON document of ``raw``, the bytes of the file ``path`` (named in errors); ``strict`` as :func:`read_json`."""
    def reject(name: str):
        raise ValueError(f"{name} is not allowed")

    try:
        return json.loads(raw.decode("utf-8"), **({"parse_constant": reject} if strict else {}))
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON ({_short(exc)})") from None


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] if text else type(exc).__name__


def load_split(data_dir: str | os.PathLike, split: str) -> Traces:
    """Load and validate one split of a dataset directory.

    Args:
        data_dir: dataset directory (as written by ``generate_data.py``).
        split: one of ``train``, ``valid``, ``test``.

    Returns: :class:`Traces`.

    Raises:
        InputError: no such directory or split file (the message says which
            command creates it), unreadable file, any schema violation, or a file that is not the one the
            dataset's metadata.json was written with (:func:`evolve.traces.binding.check_bound`).
    """
    if split not in SPLITS:
        raise InputError(f"unknown split '{split}' (choose from {', '.join(SPLITS)})")
    data_dir = Path(data_dir)
    path = split_path(data_dir, split)
    if path is None:
        if data_dir.exists() and not data_dir.is_dir():
            raise InputError(f"{data_dir}: not a directory (expected a dataset directory)")
        if not data_dir.is_dir():
            raise InputError(f"{data_dir}: no dataset directory; create one there with `python generate_data.py`")
        raise InputError(f"{data_dir}: no {split}.parquet or {split}.json; create the dataset there with "
                         f"`python generate_data.py`")
    frame, digest = _read_frame(path)
    traces = Traces.from_frame(frame, source=str(path), split=split)
    traces.sha256 = digest
    meta_path = data_dir / METADATA_FILE
    if meta_path.exists():
        traces.metadata = load_metadata(data_dir)
        check_split_statistics(traces, meta_path)
        check_bound(path, digest, traces.metadata, {f"statistics.{split}.tokens": traces.n}, "split file")
    warn_suspicious(traces.columns, str(path))
    return traces


def warn_suspicious(cols: dict[str, np.ndarray], source: str) -> list[str]:
    """Warn (:class:`evolve.errors.InputWarning`) about a split that is valid but suspicious.

    Suspicious: fewer than :data:`TINY_RECORDS` records, or with ``draft_index``
    fewer than :data:`TINY_BLOCKS` blocks (rows with ``draft_index`` 0); a
    position lower than the previous row's inside a block (with ``draft_index``;
    blocks of one sequence may overlap, as the vocab model redrafts after a
    rejection) or inside a sequence (without ``draft_index``).

    Args: the validated columns (int64/float64/bool arrays of length n) and the
    file name. Returns: the warning messages issued (one line each).
    """
    messages = []
    n = int(cols["position"].size)
    if n < TINY_RECORDS:
        messages.append(f"{source}: only {n} record{'s' if n != 1 else ''} (fewer than {TINY_RECORDS}); "
                        "results on it are mostly noise")
    elif "draft_index" in cols:
        blocks = int(np.count_nonzero(cols["draft_index"] == 0))
        if blocks < TINY_BLOCKS:
            messages.append(f"{source}: only {blocks} block{'s' if blocks != 1 else ''} (fewer than {TINY_BLOCKS}); "
                            "results on it are mostly noise")
    pos, seq = cols["position"], cols["seq_id"]
    if n > 1:
        same = seq[1:] == seq[:-1]
        if "draft_index" in cols:
            same &= cols["draft_index"][1:] > 0
        down = same & (pos[1:] < pos[:-1])
        if down.any():
            i = int(np.flatnonzero(down)[0]) + 1
            inside = "block" if "draft_index" in cols else "sequence"
            k = int(np.count_nonzero(down))
            messages.append(f"{source}: column 'position', row {i}: decreases inside a {inside} "
                            f"({int(pos[i - 1])} then {int(pos[i])}; {k} such row{'s' if k != 1 else ''})")
    for message in messages:
        warnings.warn(message, InputWarning, stacklevel=2)
    return messages


def load_dataset(data_dir: str | os.PathLike, splits: Iterable[str] = SPLITS) -> dict[str, Traces]:
    """Load several splits; see :func:`load_split`. Returns {split: Traces}."""
    return {s: load_split(data_dir, s) for s in splits}


def load_metadata(data_dir: str | os.PathLike) -> dict[str, Any]:
    """Read ``metadata.json`` of a dataset directory (empty dict if absent).

    Raises: InputError if the file is not a readable JSON object (a directory, unreadable, not UTF-8 or
    not JSON), its schema version is unknown, or its ``statistics`` make no sense
    (:func:`check_statistics`).
    """
    path = Path(data_dir) / METADATA_FILE
    if not path.exists():
        return {}
    if not path.is_file():
        raise InputError(f"{path}: is a directory or special file, expected a JSON file")
    meta = read_json(path)
    if not isinstance(meta, dict):
        raise InputError(f"{path}: expected a JSON object")
    version = meta.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise InputError(f"{path}: schema_version {version!r} is not supported (expected {SCHEMA_VERSION})")
    check_statistics(meta.get("statistics"), path)
    return meta


def _frame_to_json_records(df: pd.DataFrame) -> bytes:
    records = df.to_dict(orient="records")
    for name in (c.name for c in COLUMNS if c.nan_ok and c.name in df.columns):  # NaN -> null (plain JSON)
        if COLUMN_BY_NAME[name].length:  # a list column: a JSON array, or null for a record of NaN
            for rec in records:
                row = np.asarray(rec[name], dtype=np.float64)
                rec[name] = None if np.isnan(row).all() else row.tolist()
            continue
        for rec in records:
            if rec[name] != rec[name]:
                rec[name] = None
    return json.dumps(records, separators=(",", ":")).encode("utf-8")


def write_dataset(out_dir: str | os.PathLike, splits: dict[str, pd.DataFrame | Traces | Iterable[pd.DataFrame]],
                  metadata: dict[str, Any] | Callable[[dict[str, Path]], dict[str, Any]],
                  fmt: str = "parquet", extras: dict[str, bytes] | None = None) -> list[Path]:
    """Write a dataset directory atomically.

    Every split file and ``metadata.json`` is first written under a temporary
    name; only when all have been written are they renamed into place (metadata
    last), so an interrupted write leaves any earlier dataset intact. Files of
    the other format for the same splits are removed so loading is unambiguous,
    and so are temporary files that a killed earlier write left behind
    (:func:`remove_stale_temps`). One writer at a time: the directory is locked
    for the whole write (:class:`evolve.files.locks.DirectoryLock`), and a second
    writer into the same directory is refused with the first one's PID.

    Args:
        out_dir: target directory (created if needed).
        splits: {split name: DataFrame or Traces, columns of the schema}; or, for
            ``parquet``, {split name: iterable of DataFrames or Traces}: the chunks
            of the split, each written as one row group of the split's file as soon
            as it arrives (so only one chunk is in memory; the caller makes every
            chunk hold whole sequences and every chunk has the same columns).
        metadata: JSON-serialisable dict; ``schema_version`` and ``format`` are added.
            May be a function of {split name: its written temporary file}, called
            once every split is written (metadata made while or after chunks were
            generated).
        fmt: ``parquet`` or ``json``.
        extras: other files of the dataset, {file name: bytes} (a harvest's ``texts.jsonl``), written and renamed
            with the splits.

    ``metadata.json`` records the SHA-256 and row count (lines of an extra file) of every file written with it
    under ``files`` (:mod:`evolve.traces.binding`), so that every reader refuses a file of another write.

    Returns: the paths written. Raises: InputError for an unknown format, for chunks with
    ``json``, for a chunked split without rows, or when another process is writing into
    ``out_dir``.
    """
    if fmt not in FORMATS:
        raise InputError(f"format: unknown format '{fmt}' (choose from {', '.join(FORMATS)})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with DirectoryLock(out, lambda who: f"{out}: another process ({who}) is writing a dataset into this "
                                        "directory; wait for it to finish, or write elsewhere"):
        return _write_dataset(out, splits, metadata, fmt, extras or {})


def _write_dataset(out: Path, splits, metadata, fmt: str, extras: dict[str, bytes]) -> list[Path]:
    """:func:`write_dataset` with the directory's lock held."""
    staged: list[tuple[str, Path]] = []
    guards: list[int] = []  # the descriptors that keep the temporary files locked until they are renamed
    try:
        return _stage_and_rename(out, (splits, extras), metadata, fmt, staged, guards)
    finally:
        for fd in guards:
            os.close(fd)


def _stage_and_rename(out: Path, files, metadata, fmt: str, staged: list[tuple[str, Path]],
                      guards: list[int]) -> list[Path]:
    splits, extras = files
    rows: dict[str, int] = {}
    try:
        for name, frame in splits.items():
            target = out / f"{name}.{fmt}"
            fd, tmp = mkstemp_beside(out, target.name)
            guards.append(fd)
            staged.append((tmp, target))
            if not isinstance(frame, (pd.DataFrame, Traces)):
                if fmt != "parquet":
                    raise InputError(f"format: a split written in chunks must be parquet (value '{fmt}')")
                _write_parquet_chunks(tmp, frame, name)
                import pyarrow.parquet as pq

                rows[target.name] = pq.ParquetFile(tmp).metadata.num_rows
                continue
            df = frame.to_frame() if isinstance(frame, Traces) else frame
            rows[target.name] = len(df)
            if fmt == "parquet":
                df.to_parquet(tmp, index=False)
            else:
                Path(tmp).write_bytes(_frame_to_json_records(df))
        for name, raw in extras.items():
            fd, tmp = mkstemp_beside(out, name)
            guards.append(fd)
            staged.append((tmp, out / name))
            Path(tmp).write_bytes(raw)
            rows[name] = sum(1 for line in raw.splitlines() if line.strip())
        if callable(metadata):
            metadata = metadata({target.stem: Path(tmp) for tmp, target in staged if target.name not in extras})
        records = {target.name: file_record(tmp, rows[target.name]) for tmp, target in staged}
        meta = {"schema_version": SCHEMA_VERSION, "format": fmt, **metadata, FILES_KEY: records}
        fd, tmp = mkstemp_beside(out, METADATA_FILE)
        guards.append(os.dup(fd))
        staged.append((tmp, out / METADATA_FILE))
        with os.fdopen(fd, "w") as fh:
            json.dump(meta, fh, indent=2, sort_keys=False, default=_json_default)
    except BaseException:
        for tmp, _ in staged:
            remove_quietly(tmp)
        raise
    for tmp, target in staged:
        os.replace(tmp, target)
    written = {target.name for _, target in staged}
    for name in sorted(dataset_files() - written):  # files of the dataset written here before: not of this one
        stale = out / name
        if stale.is_file() and not stale.is_symlink():
            stale.unlink()
            warnings.warn(InputWarning(f"{stale}: removed, a file of the dataset {out} held before that this dataset "
                                       f"does not have"), stacklevel=3)
    for name in [*(f"{split}.{other}" for split in splits for other in FORMATS), *extras, METADATA_FILE]:
        remove_stale_temps(out, name)
    return [target for _, target in staged]


def _arrow_table(chunk: pd.DataFrame | Traces):
    """A chunk as an Arrow table. Traces are converted column by column without pandas (NaN stored as
    null, as pandas' conversion does; a 2-D list column as list<double>), which copies far less."""
    import pyarrow as pa

    if not isinstance(chunk, Traces):
        return pa.Table.from_pandas(chunk, preserve_index=False)
    arrays, names = [], []
    for c in COLUMNS:
        if c.name not in chunk.columns:
            continue
        values = chunk.columns[c.name]
        if values.ndim == 2:
            n, k = values.shape
            if n * k >= 2 ** 31:
                raise InputError(f"column '{c.name}': a chunk of {n} rows is too large (at most {(2 ** 31 - 1) // k})")
            offsets = pa.array(np.arange(0, n * k + 1, k, dtype=np.int32))
            arrays.append(pa.ListArray.from_arrays(offsets, pa.array(values.reshape(-1), from_pandas=True)))
        else:
            arrays.append(pa.array(values, from_pandas=True))
        names.append(c.name)
    return pa.Table.from_arrays(arrays, names=names)


def _write_parquet_chunks(path: str, chunks: Iterable[pd.DataFrame | Traces], split: str) -> None:
    """Write ``chunks`` as the row groups of one Parquet file, one row group per chunk, in order."""
    import pyarrow.parquet as pq

    writer = None
    try:
        for chunk in chunks:
            table = _arrow_table(chunk)
            del chunk
            if table.num_rows == 0:
                continue
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            elif not table.schema.equals(writer.schema):
                table = table.cast(writer.schema)
            writer.write_table(table, row_group_size=table.num_rows)
            del table
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        raise InputError(f"split '{split}': no rows in any chunk")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")

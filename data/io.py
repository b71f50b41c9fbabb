"""Reading and writing trace datasets.

A dataset is a directory holding ``train``, ``valid`` and ``test`` files, either
``.parquet`` (default) or the JSON array-of-records format, plus ``metadata.json``
(schema version, generator name and version, full config, seed, per-split
statistics). Every load validates the split (:func:`data.schema.validate`).
Writes are atomic: each file is written to a temporary name and renamed.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from data.errors import InputError
from data.schema import COLUMNS, SCHEMA_VERSION, derive_seq_id, validate

SPLITS: tuple[str, ...] = ("train", "valid", "test")
FORMATS: tuple[str, ...] = ("parquet", "json")
METADATA_FILE = "metadata.json"


def _file_mode() -> int:
    """Permissions of a new file under the current umask (mkstemp alone would give 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _file_mode()


def _mkstemp(directory: Path, name: str) -> tuple[int, str]:
    """A temporary file beside ``name`` in ``directory``, with ordinary permissions."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.tmp-")
    os.chmod(tmp, _FILE_MODE)
    return fd, tmp


@dataclass
class Traces:
    """One validated split: schema columns as numpy arrays of length ``n``.

    ``columns`` maps column name to a 1-D array (int64, float64 or bool); optional
    columns are present only when the file has them. ``source`` is the file path.
    """

    columns: dict[str, np.ndarray]
    source: str = "<memory>"
    split: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

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
        """Validate a DataFrame (see :func:`data.schema.validate`) and wrap it.

        Raises: InputError on any schema violation.
        """
        if "seq_id" not in df.columns and "position" in df.columns:
            df = df.assign(seq_id=derive_seq_id(df["position"].to_numpy()))
        return cls(validate(df, source), source=source, split=split)

    def to_frame(self) -> pd.DataFrame:
        """The split as a DataFrame with the schema's column order."""
        return pd.DataFrame({c.name: self.columns[c.name] for c in COLUMNS if c.name in self.columns})


def split_path(data_dir: str | os.PathLike, split: str) -> Path | None:
    """The file holding ``split`` in ``data_dir`` (Parquet preferred), or None."""
    for fmt in FORMATS:
        p = Path(data_dir) / f"{split}.{fmt}"
        if p.exists():
            return p
    return None


def _read_frame(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        try:
            return pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise InputError(f"{path}: not a readable Parquet file ({_short(exc)})") from None
    try:
        with open(path, "rb") as fh:
            records = json.load(fh)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON ({_short(exc)})") from None
    if not isinstance(records, list):
        raise InputError(f"{path}: expected a JSON array of records, found {type(records).__name__}")
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise InputError(f"{path}: record {i} is a {type(rec).__name__}, expected an object")
    return pd.DataFrame.from_records(records)


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
            command creates it), unreadable file, or any schema violation.
    """
    if split not in SPLITS:
        raise InputError(f"unknown split '{split}' (choose from {', '.join(SPLITS)})")
    data_dir = Path(data_dir)
    path = split_path(data_dir, split)
    if path is None:
        if not data_dir.is_dir():
            raise InputError(f"{data_dir}: no dataset directory; create one with "
                             f"`python generate_data.py --out {data_dir}`")
        raise InputError(f"{data_dir}: no {split}.parquet or {split}.json; create the dataset with "
                         f"`python generate_data.py --out {data_dir}`")
    traces = Traces.from_frame(_read_frame(path), source=str(path), split=split)
    meta_path = data_dir / METADATA_FILE
    if meta_path.exists():
        traces.metadata = load_metadata(data_dir)
    return traces


def load_dataset(data_dir: str | os.PathLike, splits: Iterable[str] = SPLITS) -> dict[str, Traces]:
    """Load several splits; see :func:`load_split`. Returns {split: Traces}."""
    return {s: load_split(data_dir, s) for s in splits}


def load_metadata(data_dir: str | os.PathLike) -> dict[str, Any]:
    """Read ``metadata.json`` of a dataset directory (empty dict if absent).

    Raises: InputError if the file is not a JSON object or its schema version is unknown.
    """
    path = Path(data_dir) / METADATA_FILE
    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON ({_short(exc)})") from None
    if not isinstance(meta, dict):
        raise InputError(f"{path}: expected a JSON object")
    version = meta.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise InputError(f"{path}: schema_version {version!r} is not supported (expected {SCHEMA_VERSION})")
    return meta


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _mkstemp(path.parent, path.name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Text version of :func:`atomic_write_bytes` (UTF-8)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _frame_to_json_records(df: pd.DataFrame) -> bytes:
    records = df.to_dict(orient="records")
    return json.dumps(records, separators=(",", ":")).encode("utf-8")


def write_dataset(out_dir: str | os.PathLike, splits: dict[str, pd.DataFrame | Traces],
                  metadata: dict[str, Any], fmt: str = "parquet") -> list[Path]:
    """Write a dataset directory atomically.

    Every split file and ``metadata.json`` is first written under a temporary
    name; only when all have been written are they renamed into place (metadata
    last), so an interrupted write leaves any earlier dataset intact. Files of
    the other format for the same splits are removed so loading is unambiguous.

    Args:
        out_dir: target directory (created if needed).
        splits: {split name: DataFrame or Traces}, columns of the schema.
        metadata: JSON-serialisable dict; ``schema_version`` and ``format`` are added.
        fmt: ``parquet`` or ``json``.

    Returns: the paths written. Raises: InputError for an unknown format.
    """
    if fmt not in FORMATS:
        raise InputError(f"format: unknown format '{fmt}' (choose from {', '.join(FORMATS)})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[str, Path]] = []
    try:
        for name, frame in splits.items():
            df = frame.to_frame() if isinstance(frame, Traces) else frame
            target = out / f"{name}.{fmt}"
            fd, tmp = _mkstemp(out, target.name)
            os.close(fd)
            staged.append((tmp, target))
            if fmt == "parquet":
                df.to_parquet(tmp, index=False)
            else:
                Path(tmp).write_bytes(_frame_to_json_records(df))
        meta = {"schema_version": SCHEMA_VERSION, "format": fmt, **metadata}
        fd, tmp = _mkstemp(out, METADATA_FILE)
        with os.fdopen(fd, "w") as fh:
            json.dump(meta, fh, indent=2, sort_keys=False, default=_json_default)
        staged.append((tmp, out / METADATA_FILE))
    except BaseException:
        for tmp, _ in staged:
            _remove(tmp)
        raise
    for tmp, target in staged:
        os.replace(tmp, target)
    for name in splits:
        for other in FORMATS:
            stale = out / f"{name}.{other}"
            if other != fmt and stale.exists():
                stale.unlink()
    return [target for _, target in staged]


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")

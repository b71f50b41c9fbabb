"""Parquet bytes read and written with no Python object in Arrow's hands, the one place the project does it.

Why: a Python file object (``io.BytesIO``) given to pyarrow is wrapped in a ``PyReadableFile``, and the Arrow dataset
scanner's worker threads hold references to it after the read returns. When the last reference is dropped on such a
thread while the interpreter is finalising, the destructor asks for the GIL, CPython ends the thread with
``pthread_exit`` (``PyThread_exit_thread`` in ``take_gil``), and the forced unwind through Arrow's ``noexcept``
destructor calls ``std::terminate``: the process prints ``terminate called without an active exception`` and exits
134 (SIGABRT) after its work is done. Core dumps of pyarrow 26.0.1 show exactly that stack
(``arrow::py::OwnedRefNoGIL::~OwnedRefNoGIL`` under ``ParquetFileFragment::~ParquetFileFragment`` on a pool thread;
Apache Arrow issues 34314 and 45017 report the same). Reading from a :class:`pyarrow.BufferReader` over the bytes, and
writing into a :class:`pyarrow.BufferOutputStream`, leaves Arrow nothing that needs the GIL.
``scripts/exit_soak.sh`` runs the default benchmark under load and records every exit code.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd


def read_parquet_bytes(raw: bytes, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The frame stored in the Parquet file content ``raw`` (the same frame :func:`pandas.read_parquet` gives for the
    file), only ``columns`` when given. Raises whatever pyarrow raises for damaged bytes (the callers name the
    file)."""
    import pyarrow as pa

    return pd.read_parquet(pa.BufferReader(raw), columns=list(columns) if columns is not None else None)


def parquet_bytes(frame: pd.DataFrame | None = None, table=None) -> bytes:
    """The Parquet file content of ``frame`` (written without its index) or of the :class:`pyarrow.Table` ``table``
    (exactly one of them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if (frame is None) == (table is None):
        raise TypeError("parquet_bytes takes a frame or a table")
    if table is None:
        table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


__all__ = ["parquet_bytes", "read_parquet_bytes"]

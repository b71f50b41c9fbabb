"""What the decode loops of a harvest return: one speculation block (:class:`BlockResult`) and one text
(:class:`TextResult`), shared by the chain loop (:mod:`evolve.harvest.loop`) and the tree loop
(:mod:`evolve.harvest.tree_harvest`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from evolve.harvest.resume import COLUMN_ORDER
from evolve.traces.schema import COLUMNS, DTYPES, TEXT_COLUMNS


@dataclass
class BlockResult:
    """One speculation block of one text: drafts, the number the standard rule accepted, the emitted
    tokens and the records (columns without ``seq_id``/``position``; None for a target-only step)."""

    start: int
    drafts: list[int]
    accepted: int
    emitted: list[int]
    records: dict[str, np.ndarray] | None


@dataclass
class TextResult:
    """A generated text: continuation ids, why it stopped (``eos``/``length``), its blocks and
    the number of target passes after the prefill."""

    tokens: list[int]
    finish: str
    blocks: list[BlockResult]
    target_calls: int

    def frame(self, seq_id: int) -> pd.DataFrame:
        """The text's records as a schema DataFrame (columns in schema order)."""
        cols: dict[str, list] = {}
        for b in self.blocks:
            k = len(b.drafts)
            parts = dict(b.records, seq_id=np.full(k, seq_id, dtype=np.int64),
                         position=np.arange(b.start, b.start + k, dtype=np.int64))
            for name, values in parts.items():
                cols.setdefault(name, []).append(values)
        if not cols:
            return pd.DataFrame({c: pd.Series(dtype=_dtype(c)) for c in COLUMN_ORDER if c not in TEXT_COLUMNS})
        return pd.DataFrame({c: np.concatenate(cols[c]) for c in COLUMN_ORDER if c in cols})


def _dtype(col: str) -> str:
    return DTYPES[next(c.value_type for c in COLUMNS if c.name == col)]


__all__ = ["BlockResult", "TextResult"]

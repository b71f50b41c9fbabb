"""The order records are read in: text by text, each text's speculation blocks in the order they were drafted.

A split file may hold its texts interleaved, or a text's blocks out of order (a tool writing blocks as workers finish
them); the schema does not forbid it. What a record means does not depend on its row, but what a policy reading the
request so far (the history features, :mod:`evolve.kinds.verify_length.history`) sees at a block does: it is what the
text's *earlier* blocks did. So every split is read in one canonical order (:func:`reading_order`): texts in the order
of their first record in the file, and inside a text its blocks (with ``draft_index``: a record with draft_index 0 and
the records after it; without it: each record) by the ``position`` of their first record, ties kept in file order. A
block's records stay together and in their order. A file already in that order (every file this project writes) is
read unchanged, so its scores keep their bits; a file in another order scores exactly as the same records in
reading order.
"""
from __future__ import annotations

import numpy as np


def reading_order(cols: dict[str, np.ndarray]) -> np.ndarray | None:
    """int64 (n,): the rows of the validated columns ``cols`` (``seq_id`` and ``position`` int64 (n,), ``draft_index``
    when present) in reading order (module doc), or None when the rows already are in it."""
    seq = cols["seq_id"]
    n = seq.size
    if n < 2:
        return None
    blocks = "draft_index" in cols
    starts = np.flatnonzero(cols["draft_index"] == 0) if blocks else np.arange(n)
    if starts.size == 0 or starts[0] != 0:
        return None  # validation guarantees a block starts at row 0; nothing to order otherwise
    unit_text = seq[starts]
    ids, text_of = np.unique(unit_text, return_inverse=True)
    first = np.full(ids.size, starts.size, dtype=np.int64)
    np.minimum.at(first, text_of, np.arange(starts.size))
    rank = np.empty(ids.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(ids.size)
    within = cols["position"][starts] if blocks else np.zeros(starts.size, dtype=np.int64)
    order = np.lexsort((np.arange(starts.size), within, rank[text_of]))
    if np.array_equal(order, np.arange(starts.size)):
        return None
    lengths = np.diff(np.append(starts, n))
    new_lengths = lengths[order]
    offsets = np.repeat(starts[order] - np.concatenate(([0], np.cumsum(new_lengths)[:-1])), new_lengths)
    return (np.arange(n, dtype=np.int64) + offsets).astype(np.int64)


def in_reading_order(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``cols`` with every column's rows in reading order (:func:`reading_order`); the same dict when they already
    are."""
    rows = reading_order(cols)
    if rows is None:
        return cols
    return {name: values[rows] for name, values in cols.items()}


__all__ = ["in_reading_order", "reading_order"]

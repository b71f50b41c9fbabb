"""One-hot distributions kept as token ids (:class:`OneHot`) and the block quantities of mixed rows.

Greedy decoding (T = 0) and deterministic drafters (n-gram prompt lookup) have one-hot
distributions. Building them as dense float64 (m, V) rows costs an allocation and several
passes over the vocabulary per row for values that follow from the id alone: probability 1 at
the id and 0 elsewhere, top probability 1, entropy 0. The helpers here take dense float64 rows
or :class:`OneHot` rows on either side and return the values the dense computation gives on the
dense one-hot rows, bit for bit: the vocabulary sums (overlap, block residual mass, phi) run the
same sequential kernels as :mod:`evolve.verification.block`, with the one-hot side read
from its id, so a sum that adds exact zeros is the same float64 sum.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from evolve.verification.block import (
    PHI_POINTS, block_columns, block_phi, block_phi_onehot_pair, block_weight, residual_mass_onehot,
    residual_mass_onehot_pair, residual_phi_onehot, target_rank,
)


@dataclass(frozen=True)
class OneHot:
    """Rows one-hot at ``ids`` over ``vocab`` tokens: ``ids`` int64 (m,) for m rows, or a 0-d array
    for one row (what indexing with an int gives)."""

    ids: np.ndarray
    vocab: int

    def __len__(self) -> int:
        return int(np.asarray(self.ids).shape[0])

    def __getitem__(self, key) -> "OneHot":
        return OneHot(np.asarray(self.ids)[key], self.vocab)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.asarray(self.ids).shape) + (self.vocab,)

    def dense(self) -> np.ndarray:
        """The dense float64 rows (for the rare consumer that needs them)."""
        ids = np.asarray(self.ids)
        out = np.zeros(ids.shape + (self.vocab,))
        if ids.ndim == 0:
            out[int(ids)] = 1.0
        else:
            out[np.arange(ids.size), ids] = 1.0
        return out


def densify(rows):
    """Dense float64 rows of dense or :class:`OneHot` rows."""
    return rows.dense() if isinstance(rows, OneHot) else rows


def values_at(rows, d, x) -> np.ndarray:
    """rows[d, x] (float64) for index arrays ``d`` (rows) and ``x`` (token ids)."""
    if isinstance(rows, OneHot):
        return (np.asarray(rows.ids)[d] == x).astype(np.float64)
    return rows[d, x]


def argmax_rows(rows) -> np.ndarray:
    """Arg max of every row (lowest id on ties)."""
    return np.asarray(rows.ids) if isinstance(rows, OneHot) else rows.argmax(axis=1)


def max_rows(rows) -> np.ndarray:
    """Largest value of every row."""
    return np.ones(len(rows)) if isinstance(rows, OneHot) else rows.max(axis=1)


def overlap_rows(p, q) -> np.ndarray:
    """sum_v min(p(v), q(v)) of every row (not clipped): a one-hot side picks the other side's value."""
    if isinstance(q, OneHot) and isinstance(p, OneHot):
        return (np.asarray(p.ids) == np.asarray(q.ids)).astype(np.float64)
    if isinstance(q, OneHot):
        return np.minimum(p[np.arange(len(q)), q.ids], 1.0)
    if isinstance(p, OneHot):
        return np.minimum(q[np.arange(len(p)), p.ids], 1.0)
    return np.minimum(p, q).sum(axis=1)


def support(rows, d: int) -> np.ndarray:
    """Token ids where row ``d`` is positive (int64, increasing)."""
    if isinstance(rows, OneHot):
        return np.asarray(rows.ids)[d:d + 1].astype(np.int64)
    return np.flatnonzero(rows[d] > 0)


@njit(cache=True)
def _columns_point(p, qids, x, mass, rank):
    weight = 1.0
    k = x.shape[0]
    for d in range(k):
        weight = block_weight(weight, p[d, x[d]], 1.0 if qids[d] == x[d] else 0.0)
        rank[d] = target_rank(p[d], x[d])
        if d + 1 < k:
            mass[d] = residual_mass_onehot(weight, p[d + 1], qids[d + 1])


@njit(cache=True)
def _phi_point(p, y, out):
    """:func:`evolve.verification.block.residual_phi` with q one-hot at y (same steps)."""
    residual_phi_onehot(p, p, y, out)

def block_columns_any(p, q, drafts) -> tuple[np.ndarray, np.ndarray]:
    """:func:`evolve.verification.block.block_columns` for dense or :class:`OneHot` rows."""
    x = np.asarray(drafts, dtype=np.int64)
    k = x.size
    if isinstance(p, OneHot) and isinstance(q, OneHot):
        pid, qid = np.asarray(p.ids), np.asarray(q.ids)
        mass, rank = np.full(k, np.nan), (pid != x).astype(np.int64)
        weight = 1.0
        for d in range(k):
            weight = block_weight(weight, float(pid[d] == x[d]), float(qid[d] == x[d]))
            if d + 1 < k:
                mass[d] = residual_mass_onehot_pair(weight, pid[d + 1], qid[d + 1])
        return mass, rank
    if isinstance(q, OneHot):
        mass, rank = np.full(k, np.nan), np.empty(k, dtype=np.int64)
        _columns_point(np.ascontiguousarray(p, dtype=np.float64), np.asarray(q.ids, dtype=np.int64), x, mass, rank)
        return mass, rank
    return block_columns(densify(p), q, x)


def block_phi_any(p, q, points: int = PHI_POINTS) -> np.ndarray:
    """:func:`evolve.verification.block.block_phi` for dense or :class:`OneHot` rows."""
    k = len(q)
    if isinstance(q, OneHot) and isinstance(p, OneHot):
        out = np.roll(block_phi_onehot_pair(p.ids, q.ids, points), -1, axis=0)
        out[k - 1] = np.nan
        return out
    if isinstance(q, OneHot):
        p = np.ascontiguousarray(p, dtype=np.float64)
        out = np.full((k, points), np.nan)
        for d in range(k - 1):
            _phi_point(p[d + 1], int(q.ids[d + 1]), out[d])
        return out
    return block_phi(densify(p), q, points)


__all__ = ["OneHot", "argmax_rows", "block_columns_any", "block_phi_any", "densify", "max_rows", "overlap_rows",
           "support", "values_at"]

"""Scoring programs over a split read from disk row group by row group (splits larger than memory).

:func:`score_split_chunks` reads the split's Parquet file one row group at a time
(:func:`evolve.traces.chunks.iter_split_chunks`, only the required columns and those the
programs read, :func:`read_columns`), prepares each as an
:class:`evolve.eval.evaluator.EvalData`, scores every program on it in one
batched call (:func:`evolve.eval.population.score_counts`) and adds the raw
counts (:class:`evolve.eval.fastpath.layouts.Count`) up. Only one row group and its
prepared data are resident at a time.

Every count is a sum over tokens or over speculation blocks, and row groups
hold whole sequences (hence whole blocks), so the totals are the counts of the
whole split scored at once: the integer counts exactly (float64 is exact up to
2**53), the float sums up to the rounding of the summation order.
:meth:`ChunkedCounts.metrics` turns them into :class:`evolve.eval.evaluator.Metrics`
with :func:`evolve.eval.evaluator.metrics_from_counts`.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from evolve.traces.chunks import iter_split_chunks
from evolve.traces.schema import COLUMNS, REQUIRED_COLUMNS
from evolve.eval.evaluator import (
    AcceptanceQualityFitness, EvalData, Metrics, check_gamma, metrics_from_counts,
)
from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.eval.fastpath.layouts import N_COUNTS
from evolve.eval.population import score_counts
from evolve.gp.compiler import Program

#: The columns read from disk: every schema column of one value per row.
SCALAR_COLUMNS: tuple[str, ...] = tuple(c.name for c in COLUMNS if not c.length)


def read_columns(programs: Sequence[Program], blocks: bool = False) -> tuple[str, ...]:
    """The columns scoring ``programs`` needs, in schema order: the required ones, every feature a
    program reads and, with ``blocks`` (block counts), ``draft_index`` (scalar columns only).
    Reading no others keeps the bytes read per token down."""
    wanted = set(REQUIRED_COLUMNS) | {f for program in programs for f in program.features}
    if blocks:
        wanted.add("draft_index")
    return tuple(c for c in SCALAR_COLUMNS if c in wanted)


@dataclass
class ChunkedCounts:
    """Counts of several programs summed over the row groups of one split.

    ``counts`` float64 (P, N_COUNTS), one row per program in the order given;
    ``tokens`` and ``chunks`` the records and row groups read; ``read_seconds``
    the wall seconds spent reading, validating and preparing the row groups and
    ``score_seconds`` those spent scoring them.
    """

    counts: np.ndarray
    tokens: int
    chunks: int
    gamma: int
    read_seconds: float
    score_seconds: float

    def metrics(self, index: int, fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(),
                costs: Costs = DEFAULT_COSTS) -> Metrics:
        """The metrics of program ``index`` over the whole split (block metrics when scored with a gamma)."""
        return metrics_from_counts(self.counts[index], self.tokens, fitness, self.gamma or None, costs)


def score_split_chunks(programs: Sequence[Program], data_dir: str | os.PathLike, split: str = "train",
                       gamma: int | None = None,
                       on_chunk: Callable[[int, int], None] | None = None) -> ChunkedCounts:
    """Score compiled programs over ``split`` of ``data_dir``, one row group at a time (see the module doc).

    Args:
        programs: compiled programs (:class:`evolve.gp.compiler.Program`; a rule's ``.program``).
        data_dir: dataset directory; a JSON split is read whole, as one chunk.
        split: ``train``, ``valid`` or ``test``.
        gamma: draft length of the block counts (None: no block counts), checked against
            the first row group (:func:`evolve.eval.evaluator.check_gamma`).
        on_chunk: called after each row group with (row groups done, tokens done).

    Returns: :class:`ChunkedCounts`; ``counts`` equal those of
    :func:`evolve.eval.population.score_counts` on the whole split.

    Raises: InputError as :func:`evolve.traces.io.load_split` (missing, unreadable or invalid split), for a program
    reading a column the split lacks, or a bad ``gamma``.
    """
    total = np.zeros((len(programs), N_COUNTS))
    tokens = chunks = depth = 0
    read = score = 0.0
    t0 = time.perf_counter()
    for traces in iter_split_chunks(data_dir, split, read_columns(programs, gamma is not None)):
        data = EvalData.from_traces(traces, share=False)
        del traces
        if chunks == 0:
            depth = check_gamma(gamma, data)
        t1 = time.perf_counter()
        read += t1 - t0
        total += score_counts(programs, data, depth)
        tokens += data.n
        chunks += 1
        del data
        score += time.perf_counter() - t1
        if on_chunk is not None:
            on_chunk(chunks, tokens)
        t0 = time.perf_counter()
    return ChunkedCounts(total, tokens, chunks, depth, read, score)


__all__ = ["SCALAR_COLUMNS", "ChunkedCounts", "read_columns", "score_split_chunks"]

"""Datasets generated and written in chunks (``generate_data.py --chunk-sequences N``), for splits larger than memory.

Each split is cut into chunks of ``chunk_sequences`` sequences (the last one
shorter). Chunk ``c`` of a split is drawn on its own by the model's
``generate_split(size, chunk_seed, config)`` with

    chunk_seed = SeedSequence(split_seed).spawn(C)[c].generate_state(1, uint64)[0]

(numpy; ``split_seed`` as in :func:`evolve.traces.synth.generate.split_seeds`, the same
child whatever the number of chunks C), its ``seq_id`` offset by
``c * chunk_sequences``, validated, and appended to the split's Parquet file as one
row group (:func:`evolve.traces.io.write_dataset` with an iterable of chunks). Only one
chunk is in memory at a time, whatever the size; the same seed and chunk size
give the same files.

A chunked dataset is **not** the dataset written without chunks for the same seed
(the sequences come from other streams, and a different ``chunk_sequences`` gives
another dataset): it is another draw of the same model with the same split sizes.
A chunk does not depend on how many chunks follow it, so the first chunks of a
large dataset are those of a small one with the same seed and chunk size.

The statistics in ``metadata.json`` are those of :func:`evolve.traces.schema.split_stats`
on the whole split, accumulated chunk by chunk: counts and the median are exact,
means equal up to float64 rounding of the summation order. The median target
entropy takes a second pass over the written file's ``target_entropy`` column:
the first pass counts values per bucket of their float64 bit pattern (order
preserving for non-negative values), the second keeps the values of the
buckets holding the middle ranks.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from evolve.errors import InputError
from evolve.traces.chunks import iter_parquet_column
from evolve.traces.io import SPLITS, Traces, write_dataset
from evolve.verification.tokenwise import standard_threshold
from evolve.traces.synth.generate import (
    build_config, check_output_dir, dataset_metadata, get_model, split_seeds, split_sizes,
)

#: Buckets of the median's first pass: the top bits of the float64 bit pattern.
_MEDIAN_SHIFT = 44


def chunk_seed(split_seed: int, index: int) -> int:
    """The seed of chunk ``index`` (>= 0) of a split with seed ``split_seed`` (integer in [0, 2**64)).

    ``SeedSequence(split_seed).spawn(C)[index].generate_state(1, uint64)[0]`` for any C > index.
    """
    child = np.random.SeedSequence(int(split_seed), spawn_key=(int(index),))
    return int(child.generate_state(1, dtype=np.uint64)[0])


def chunk_sizes(sequences: int, chunk_sequences: int) -> list[int]:
    """Sequences per chunk: ``chunk_sequences`` each, the last one the remainder.

    Raises: InputError if ``chunk_sequences`` is not an integer >= 1.
    """
    if isinstance(chunk_sequences, bool) or not isinstance(chunk_sequences, (int, np.integer)) or chunk_sequences < 1:
        raise InputError(f"must be an integer >= 1 (value {chunk_sequences!r})", param="chunk_sequences")
    full, rest = divmod(int(sequences), int(chunk_sequences))
    return [int(chunk_sequences)] * full + ([rest] if rest else [])


def mean_sequence_rows(model: str, config) -> float:
    """Expected rows (tokens) of one sequence of ``model`` with ``config``.

    ``vocab``: mean over u = 0..avg-1 of max(1, round((avg//2 + u) / gamma)) * gamma
    (:mod:`evolve.traces.synth.vocab_blocks`: the length rounded to whole blocks);
    ``independent``: avg//2 + (avg - 1) / 2. Used to choose the sequences of a
    dataset of about N tokens.
    """
    avg = int(config.avg_length)
    if model == "vocab":
        gamma = int(config.gamma)
        rows = avg // 2 + np.arange(avg)
        return float(np.mean(np.maximum(1, (rows + gamma // 2) // gamma) * gamma))
    return avg // 2 + (avg - 1) / 2


class StreamingStats:
    """:func:`evolve.traces.schema.split_stats` of a split seen chunk by chunk (see the module doc)."""

    def __init__(self) -> None:
        self.n = 0
        self.sequences = 0
        self.sums = {k: 0.0 for k in ("baseline_accepts", "r", "top_token_match", "draft_entropy",
                                      "target_entropy", "overlap")}
        self.has_overlap = True
        self.depth_sum = np.zeros(0)
        self.depth_count = np.zeros(0, np.int64)
        self.buckets = np.zeros(1 << (64 - _MEDIAN_SHIFT), np.int64)

    def add(self, cols: dict[str, np.ndarray]) -> None:
        """Add one chunk's validated columns (whole sequences, sequence ids not seen before)."""
        r = standard_threshold(cols["target_prob"], cols["draft_prob"])
        self.n += int(r.size)
        self.sequences += int(np.unique(cols["seq_id"]).size)
        for key, values in (("baseline_accepts", cols["baseline_accepts"]), ("r", r),
                            ("top_token_match", cols["top_token_match"]), ("draft_entropy", cols["draft_entropy"]),
                            ("target_entropy", cols["target_entropy"])):
            self.sums[key] += float(np.sum(values, dtype=np.float64))
        self.has_overlap &= "overlap" in cols
        if self.has_overlap:
            self.sums["overlap"] += float(np.sum(cols["overlap"]))
        if "draft_index" in cols:
            d = cols["draft_index"]
            size = max(self.depth_sum.size, int(d.max()) + 1)
            self.depth_sum = np.pad(self.depth_sum, (0, size - self.depth_sum.size))
            self.depth_count = np.pad(self.depth_count, (0, size - self.depth_count.size))
            self.depth_sum += np.bincount(d, weights=r, minlength=size)
            self.depth_count += np.bincount(d, minlength=size)
        self.buckets += np.bincount(_bucket(cols["target_entropy"]), minlength=self.buckets.size)

    def median(self, chunks: Iterator[np.ndarray]) -> float:
        """The exact median of ``target_entropy`` given the column again, chunk by chunk (second pass)."""
        ranks = (self.n // 2,) if self.n % 2 else (self.n // 2 - 1, self.n // 2)
        cum = np.cumsum(self.buckets)
        wanted = sorted({int(np.searchsorted(cum, k, side="right")) for k in ranks})
        kept = np.sort(np.concatenate([v[np.isin(_bucket(v), wanted)] for v in chunks]))
        first = int(cum[wanted[0] - 1]) if wanted[0] > 0 else 0  # rank of kept[0]
        values = [kept[k - first] for k in ranks]
        return float(values[0]) if len(values) == 1 else float(np.mean(values))

    def result(self, median: float) -> dict[str, Any]:
        """The statistics dict (keys and order of :func:`evolve.traces.schema.split_stats`)."""
        n, s = self.n, self.sums
        stats: dict[str, Any] = {
            "tokens": n, "sequences": self.sequences, "standard_acceptance": s["baseline_accepts"] / n,
            "expected_standard_acceptance": s["r"] / n, "top_token_match": s["top_token_match"] / n,
            "mean_draft_entropy": s["draft_entropy"] / n, "mean_target_entropy": s["target_entropy"] / n,
            "median_target_entropy": median}
        if self.has_overlap:
            stats["mean_overlap"] = s["overlap"] / n
        if self.depth_count.size:
            stats["acceptance_by_depth"] = [float(a / c) for a, c in zip(self.depth_sum, self.depth_count)]
        return stats


def _bucket(values: np.ndarray) -> np.ndarray:
    """Bucket of each non-negative float64 (its bit pattern's top bits; -0.0 counts as 0.0)."""
    return ((np.asarray(values, np.float64) + 0.0).view(np.uint64) >> np.uint64(_MEDIAN_SHIFT)).astype(np.int64)


def _chunk(spec, config, size: int, seed: int, index: int, first: int, stats: StreamingStats,
           split: str) -> Traces:
    """Chunk ``index`` of a split (``size`` sequences, seq_id from ``first``), validated and added to ``stats``."""
    frame = spec.generate_split(size, chunk_seed(seed, index), config)
    frame["seq_id"] += first
    traces = Traces.from_frame(frame, source=f"generated {split} split, chunk {index}", split=split)
    stats.add(traces.columns)
    return traces


def _chunks(spec, config, sizes: list[int], seed: int, stats: StreamingStats, split: str,
            say: Callable[[str], None]) -> Iterator[Traces]:
    """The validated chunks of one split, seq_id offset per chunk (no reference kept once written)."""
    first = 0
    for c, size in enumerate(sizes):
        yield _chunk(spec, config, size, seed, c, first, stats, split)
        first += size
        say(f"{split}: chunk {c + 1}/{len(sizes)} written, {stats.n:,} tokens")


def generate_chunked(out: str | os.PathLike, model: str, seed: int, sequences: int, chunk_sequences: int,
                     config=None, overrides: dict[str, Any] | None = None, splits: tuple[str, ...] = SPLITS,
                     progress: Callable[[str], None] | None = None) -> tuple[list[Path], dict[str, Any]]:
    """Generate a dataset chunk by chunk straight into ``out`` (see the module doc).

    Args:
        out: dataset directory (checked first, :func:`evolve.traces.synth.generate.check_output_dir`).
        model, seed, sequences, config, overrides: as :func:`evolve.traces.synth.generate.generate_dataset`.
        chunk_sequences: sequences per chunk (one Parquet row group each).
        splits: the splits to write (default all three; sizes as :func:`evolve.traces.synth.generate.split_sizes`).
        progress: called with a line after each chunk.

    Returns: (paths written, metadata as in ``metadata.json`` without schema version and format):
    the metadata of :func:`evolve.traces.synth.generate.generate_dataset` plus ``chunk_sequences`` and
    ``chunks`` {split: count}.

    Raises: InputError for any invalid argument, before anything is generated. A failed write
    (OSError, e.g. a full disk) removes its temporary files and leaves any earlier dataset intact.
    """
    spec = get_model(model)
    config = build_config(model, overrides) if config is None else spec.validate(config)
    sizes, seeds = split_sizes(sequences), split_seeds(seed)
    chunk_sizes(1, chunk_sequences)
    unknown = [s for s in splits if s not in SPLITS]
    if unknown or not splits:
        raise InputError(f"splits: unknown split '{unknown[0] if unknown else ''}' (choose from {', '.join(SPLITS)})")
    target = check_output_dir(out)
    say = progress or (lambda _msg: None)
    plan = {s: chunk_sizes(sizes[s], chunk_sequences) for s in splits}
    stats = {s: StreamingStats() for s in splits}
    chunks = {s: _chunks(spec, config, plan[s], seeds[s], stats[s], s, say) for s in splits}
    written: dict[str, Any] = {}

    def metadata(files: dict[str, Path]) -> dict[str, Any]:
        result = {s: stats[s].result(stats[s].median(iter_parquet_column(files[s], "target_entropy")))
                  for s in splits}
        written.update(_metadata(spec, config, seed, {s: sizes[s] for s in splits}, {s: seeds[s] for s in splits},
                                 chunk_sequences, {s: len(plan[s]) for s in splits}, result))
        return written

    return write_dataset(target, chunks, metadata), written


def _metadata(spec, config, seed, sizes, seeds, chunk_sequences, chunks, stats) -> dict[str, Any]:
    return dataset_metadata(spec, config, seed, sizes, seeds, stats,
                            "; chunk c of a split (chunk_sequences sequences, seq_id offset by c * "
                            "chunk_sequences): SeedSequence(split_seed).spawn(C)[c].generate_state(1, uint64)[0]",
                            chunk_sequences=int(chunk_sequences), chunks=chunks)


__all__ = ["chunk_seed", "chunk_sizes", "mean_sequence_rows", "StreamingStats", "generate_chunked"]

"""Scale measurements of ``python benchmark.py perf --islands``: the island model on Dask, and a large dataset.

:func:`measure_islands`: one island run (``islands`` 2, population and
generations as given, epochs of ``interval`` generations) on a dataset whose
train split is the given train split tiled to ``tokens`` tokens (1M by
default; written to a temporary directory, from which the workers read it),
once on a local Dask cluster of 1 worker and once of 2 workers, each worker
with 1 Numba thread (so 1 worker uses 1 core and 2 workers 2). Reported:

* ``islands_generations_per_s`` {workers: generations per second}, over the
  epochs after the first (the first includes starting the workers, reading
  the data and compiling);
* ``parallel_efficiency``: speedup of 2 workers over 1, divided by 2;
* ``dask_overhead``: per epoch, the client's wall time from submitting the
  tasks to having every result, minus the time the workers needed for the
  tasks' own work (the slowest task, or all tasks' seconds / workers when
  there are more tasks than workers): pickling, scheduling and transfers, as
  a fraction of the epoch's wall time (mean over the epochs after the first,
  2 workers).

:func:`measure_large`: a dataset of ``tokens`` tokens (100M by default)
generated and evaluated chunk by chunk (``chunk`` tokens each: the train split
tiled, sequence ids offset per copy, prepared as a split and dropped after
use), scoring the standard rule and a batch of random programs with the
acceptance-quality fitness; the raw counts of the chunks add up to the
counts of the whole set. Reported: ``tokens_100m_seconds`` (the whole pass),
``resident_bytes_per_token_100m`` (peak growth of the resident set over the
pass, sampled, per token), and the cost per token against one chunk of 1M
tokens (``cost_per_token_ratio``; 1 = the same).
"""
from __future__ import annotations

import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from data.io import Traces, write_dataset
from evolve.eval.evaluator import EvalData
from evolve.eval.population import score_counts
from evolve.gp.compiler import compile_nodes, from_tree
from evolve.report.perf_measure import tiled_columns
from evolve.report.perf_timing import RssSampler

#: Workers compared by :func:`measure_islands`.
WORKERS: tuple[int, ...] = (1, 2)


def _dataset(train: Traces, valid: Traces, tokens: int, directory: Path) -> Path:
    """Write train (tiled to ``tokens``) and valid into ``directory``; returns it."""
    frame = pd.DataFrame(tiled_columns(train, tokens))
    write_dataset(directory, {"train": frame, "valid": valid.to_frame()}, {"generator": "perf tiled"})
    return directory


def measure_islands(train: Traces, valid: Traces, tokens: int = 1_000_000, population: int = 1000,
                    generations: int = 30, interval: int = 10, seed: int = 0,
                    progress: Callable[[str], None] | None = None) -> dict:
    """Generations per second of one island run on 1 and 2 local workers, and Dask's per-epoch overhead.

    See the module doc. Returns a dict with ``islands_generations_per_s``,
    ``parallel_efficiency``, ``dask_overhead`` and the settings.
    """
    from data.io import load_split
    from evolve.search.checkpoint import file_sha256
    from data.cluster import ClusterOptions
    from evolve.search.config import resolve, resolve_features
    from evolve.search.islands import island_search

    say = progress or (lambda _msg: None)
    per_s, overhead, epochs = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="perf-islands-") as tmp:
        data = _dataset(train, valid, tokens, Path(tmp) / "data")
        traces = [load_split(data, s) for s in ("train", "valid")]
        sha = {t.split: file_sha256(t.source) for t in traces}
        tr, va = EvalData.from_traces(traces[0]), EvalData.from_traces(traces[1])
        cfg = resolve({"data": str(data), "population": population, "generations": generations, "seed": seed,
                       "islands": 2, "migration_interval": interval, "migrants": min(5, population - 1)})
        features = resolve_features(cfg, tuple(f for f in tr.available if f in va.available), str(data))
        for workers in WORKERS:
            say(f"islands: 2 islands of {population} on {workers} worker(s), {tokens:,} train tokens")
            timings: list[dict] = []
            island_search(cfg, tr, va, features, str(data), sha, ClusterOptions(workers=workers, numba_threads=1),
                          timings=timings)
            later = timings[1:] or timings
            gens = sum(t["generations"] for t in later)
            wall = sum(t["seconds"] + t["client_seconds"] for t in later)
            per_s[str(workers)] = gens / wall if wall > 0 else float("nan")
            busy = [max(t["task_seconds"], t["task_seconds_total"] / workers) for t in later]
            overhead[str(workers)] = statistics.mean((t["seconds"] - b) / t["seconds"] for t, b in zip(later, busy))
            epochs[str(workers)] = later
    lo, hi = WORKERS[0], WORKERS[-1]
    efficiency = per_s[str(hi)] / per_s[str(lo)] / (hi / lo)
    return {"islands_generations_per_s": per_s, "parallel_efficiency": efficiency,
            "dask_overhead": overhead[str(hi)], "dask_overhead_by_workers": overhead,
            "islands_epochs": epochs,
            "islands_settings": {"islands": 2, "population_per_island": population, "generations": generations,
                                 "migration_interval": interval, "train_tokens": tokens, "numba_threads": 1,
                                 "seed": seed},
            "islands_method": "generations per second over the epochs after the first; efficiency = speedup of "
                              f"{hi} workers over {lo} / {hi // lo}; overhead = (epoch wall - max(slowest task, "
                              "task seconds / workers)) / epoch wall, mean over the epochs after the first"}


def measure_large(train: Traces, trees: list, tokens: int = 100_000_000, chunk: int = 1_000_000,
                  progress: Callable[[str], None] | None = None) -> dict:
    """Evaluate ``tokens`` tokens chunk by chunk; time, resident memory and cost per token (see the module doc).

    Args:
        train: the split tiled into chunks.
        trees: DEAP trees (or prefix node lists) scored with the standard rule in every chunk.
        tokens, chunk: total size and chunk size (tokens).
    """
    from heuristics.registry import get_rule

    say = progress or (lambda _msg: None)
    programs = [get_rule("standard_rejection").program] + [compile_nodes(from_tree(t)) for t in trees]
    big = tiled_columns(train, chunk)  # every chunk holds these rows (sequence ids offset per chunk)

    def chunk_data(start: int, size: int) -> EvalData:
        cols = {k: v[:size] + start if k == "seq_id" else v[:size] for k, v in big.items()}
        return EvalData.from_traces(Traces.from_frame(pd.DataFrame(cols), source=f"chunk {start}"), share=False)

    first = chunk_data(0, chunk)
    score_counts(programs, first)  # compile
    t0 = time.perf_counter()
    reference = score_counts(programs, first)
    ref_seconds = time.perf_counter() - t0
    del first
    gc.collect()
    say(f"large dataset: {tokens:,} tokens in chunks of {chunk:,}, {len(programs)} programs")
    total = np.zeros_like(reference)
    with RssSampler() as sampler:
        before = sampler.rss()
        t0 = time.perf_counter()
        score_seconds = 0.0
        for start in range(0, tokens, chunk):
            data = chunk_data(start, min(chunk, tokens - start))
            t1 = time.perf_counter()
            total += score_counts(programs, data)
            score_seconds += time.perf_counter() - t1
            del data
        seconds = time.perf_counter() - t0
    per_token_large = score_seconds / tokens
    per_token_ref = ref_seconds / chunk
    return {"tokens_100m_seconds": seconds, "tokens_100m_score_seconds": score_seconds,
            "resident_bytes_per_token_100m": (sampler.peak - before) / tokens,
            "resident_peak_bytes_100m": sampler.peak - before,
            "cost_per_token_ratio": per_token_large / per_token_ref, "large_tokens": tokens, "large_chunk": chunk,
            "large_programs": len(programs),
            "large_method": "chunks of the train split tiled, each prepared as a split, scored with the standard "
                            "rule and random programs (score_counts) and dropped; seconds = whole pass (making the "
                            "chunks included); ratio = scoring seconds per token against one 1M-token chunk"}


#: Targets of the scale measurements (set for a 2-core machine).
SCALE_TARGETS = {"parallel_efficiency": (">=", 0.8), "dask_overhead": ("<=", 0.05),
                 "cost_per_token_ratio": ("<=", 1.1), "resident_peak_bytes_100m": ("<=", 2 * 1024 ** 3)}


def run_scale(data_dir, population: int = 1000, generations: int = 30, interval: int = 10, seed: int = 0,
              island_tokens: int = 1_000_000, large_tokens: int = 100_000_000,
              progress: Callable[[str], None] | None = None) -> dict:
    """:func:`measure_islands` and :func:`measure_large` on the splits of ``data_dir`` (or the default data
    generated in memory, :func:`evolve.report.perf_measure.load_splits`); returns the figures, the
    targets met (:data:`SCALE_TARGETS`) and the machine's load."""
    import os

    from evolve.gp.primitives import build_pset
    from evolve.report.perf_measure import load_splits, random_programs
    from evolve.report.perf_timing import environment

    env = environment()
    train, valid, desc = load_splits(data_dir)
    features = tuple(f for f in EvalData.from_traces(train).available)
    report = {"scale_data": desc, "scale_environment": env}
    report.update(measure_islands(train, valid, island_tokens, population, generations, interval, seed, progress))
    trees = random_programs(build_pset(features), 31, seed)
    report.update(measure_large(train, trees, large_tokens, progress=progress))
    report["scale_environment"]["load_average_end"] = list(os.getloadavg())
    report["scale_targets_met"] = {key: (report[key] >= bound if op == ">=" else report[key] <= bound)
                                   for key, (op, bound) in SCALE_TARGETS.items()}
    return report


def merge_into(path, figures: dict) -> dict:
    """The perf report at ``path`` (an empty dict when there is none or it is unreadable) updated with ``figures``."""
    import json

    try:
        report = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        report = {}
    if not isinstance(report, dict):
        report = {}
    report.update(figures)
    return report


def render_scale(report: dict) -> str:
    """The scale figures as a short text table."""
    per_s = report["islands_generations_per_s"]
    lines = [f"{'islands: generations/s, ' + w + ' worker(s)':<44}{v:>12.3f}" for w, v in per_s.items()]
    met = report.get("scale_targets_met", {})

    def mark(key):
        return "" if key not in met else ("  (target met)" if met[key] else "  (target missed)")
    lines += [f"{'parallel efficiency (2 workers)':<44}{report['parallel_efficiency']:>12.3f}{mark('parallel_efficiency')}",
              f"{'Dask overhead per epoch (fraction)':<44}{report['dask_overhead']:>12.4f}{mark('dask_overhead')}",
              f"{'large dataset: tokens':<44}{report['large_tokens']:>12,}",
              f"{'large dataset: seconds':<44}{report['tokens_100m_seconds']:>12.1f}",
              f"{'large dataset: resident bytes per token':<44}{report['resident_bytes_per_token_100m']:>12.2f}"
              f"{mark('resident_peak_bytes_100m')}",
              f"{'large dataset: cost per token vs 1M':<44}{report['cost_per_token_ratio']:>12.3f}"
              f"{mark('cost_per_token_ratio')}"]
    return "\n".join(lines) + "\n"


__all__ = ["WORKERS", "SCALE_TARGETS", "measure_islands", "measure_large", "run_scale", "merge_into", "render_scale"]

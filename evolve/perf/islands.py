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

:func:`measure_large`: a dataset of about ``tokens`` tokens (100M by default)
generated on disk chunk by chunk and scored from disk chunk by chunk. The
train split of the vocab model (seed 42) is written by
:func:`evolve.traces.synth.chunked.generate_chunked` into ``DIR/vocab-seed42-<tokens>``
(``DIR`` = ``--large-dir``, default ``results/large``), one Parquet row group
per chunk of ``chunk_sequences`` sequences (by default the sequences of about
``reference_tokens`` tokens, so the 1M-token reference is one row group). A
dataset already there with the same metadata and all its rows is reused. The
generation runs in a child process (its memory is not the scorer's) and is
timed on its own (``large_generate_seconds``, null when reused); a Ctrl-C stops
it without leaving a temporary file behind (:func:`_stop_child`). Then the
standard rule and 31 random programs are scored on the file with
:func:`evolve.eval.chunked.score_split_chunks` (row group by row group: read,
validate, prepare, score, drop; the next row group prefetched by the OS) while
the resident set is sampled. Before each timed pass the file's pages are
dropped from the page cache (:func:`drop_from_page_cache`), so every pass
reads from disk, at any size (``large_from_disk``). The
reference is the same pipeline on a dataset of ``reference_tokens`` tokens
(1M) made the same way (the median of ``reference_repeats`` passes after a
warm-up pass and of one pass after every ``reference_every`` row groups of the
large pass, whose time is left out of the large pass's: a change of machine
load during the large pass weighs on both), so the ratio compares like with like. Reported:
``tokens_100m_seconds`` (the whole pass from disk: reading, validating,
preparing and scoring), ``resident_peak_bytes_100m`` (the process's peak
resident set during the pass), ``resident_bytes_per_token_100m`` (the peak's
growth over the pass, per token), and ``cost_per_token_ratio`` (seconds per
token of the pass against the reference's; 1 = the same).
"""
from __future__ import annotations

import gc
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import pandas as pd

from evolve.traces.io import Traces, write_dataset
from evolve.eval.evaluator import EvalData
from evolve.gp.compiler import compile_nodes, from_tree
from evolve.perf.measure import tiled_columns
from evolve.perf.timing import RssSampler

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
    from evolve.traces.io import load_split
    from evolve.search.checkpoint import file_sha256
    from evolve.cluster import ClusterOptions
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
            timings = island_search(cfg, tr, va, features, sha,
                                    ClusterOptions(workers=workers, numba_threads=1)).epoch_timings
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


#: Where ``benchmark.py perf --islands`` keeps its large datasets (``--large-dir``; results/ is not tracked).
DEFAULT_LARGE_DIR = "results/large"
#: Tokens of the reference dataset of :func:`measure_large`.
REFERENCE_TOKENS = 1_000_000
#: The trace model and seed of the large datasets.
LARGE_MODEL, LARGE_SEED = "vocab", 42


#: Seconds the generating child gets to stop by itself after the parent was interrupted (a Ctrl-C reaches
#: both), and then again after a SIGINT of its own, before it is terminated (its temporary files are then
#: removed by the parent).
CHILD_STOP_SECONDS = (2.0, 30.0)


def _interrupt(signum, frame):
    from evolve.errors import note_interrupt

    note_interrupt()
    raise KeyboardInterrupt


def _generate_child(queue, kwargs: dict) -> None:
    """In a child process: :func:`evolve.traces.synth.chunked.generate_chunked` with progress lines sent on ``queue``.

    SIGTERM stops it as SIGINT does (a KeyboardInterrupt), so the dataset writer removes its temporary files.
    An interrupt that arrives inside a callback from C (numba writing its cache) prints no traceback and
    arrives again a moment later (:func:`evolve.errors.redeliver_swallowed_interrupts`). Once the work has ended
    (done, failed or interrupted, its outcome queued) both signals are ignored: the process only exits then, and an
    interrupt arriving meanwhile (the parent's own SIGINT after a terminal's Ctrl-C, :func:`_stop_child`) would
    otherwise print a traceback from multiprocessing's exit handlers.
    """
    import signal

    from evolve.errors import redeliver_swallowed_interrupts
    from evolve.traces.synth.chunked import generate_chunked
    signal.signal(signal.SIGTERM, _interrupt)
    redeliver_swallowed_interrupts()
    try:
        t0 = time.perf_counter()
        generate_chunked(**kwargs, progress=lambda msg: queue.put(("progress", msg)))
        queue.put(("done", (time.perf_counter() - t0, _peak_rss())))
    except BaseException as exc:  # noqa: BLE001 - handed to the parent
        _exiting()
        queue.put(("error", exc))
    finally:
        _exiting()


def _exiting() -> None:
    """Ignore SIGINT and SIGTERM from now on (the generating child's work has ended: :func:`_generate_child`)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _peak_rss() -> int | None:
    """This process's peak resident set size in bytes (Linux and macOS), or None."""
    try:
        import resource
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return None
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def _matches(directory: Path, expected: dict) -> bool:
    """Whether ``directory`` holds a complete large dataset with the ``expected`` metadata."""
    from evolve.traces.chunks import split_row_groups
    from evolve.traces.io import load_metadata
    from evolve.errors import InputError
    try:
        meta = load_metadata(directory)
        groups = split_row_groups(directory, "train")
    except InputError:
        return False
    if not meta or groups is None or any(meta.get(k) != v for k, v in expected.items()):
        return False
    return sum(groups) == meta["statistics"]["train"]["tokens"] and len(groups) == meta["chunks"]["train"]


def drop_from_page_cache(path) -> bool:
    """Flush ``path`` and ask the OS to drop its pages from the page cache (``posix_fadvise`` DONTNEED),
    so that the next read comes from disk; returns False where that is not available."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def _stop_child(child, path: Path, fresh: bool) -> None:
    """Stop the process generating the dataset ``path`` and remove the temporary files its write left.

    A Ctrl-C in a terminal reaches the child too, which then removes its own temporary files; it gets
    a moment for that, then a SIGINT of its own, then SIGTERM (which it also turns into an interrupt),
    and SIGKILL as the last resort. Whatever stopped it, the temporary files of its write that are left
    (their writer gone) are removed here (:func:`evolve.files.atomic.remove_stale_temps`), and so is
    ``path`` itself when it did not exist before (``fresh``) and is empty.
    """
    import signal

    from evolve.traces.io import METADATA_FILE
    from evolve.files.atomic import remove_stale_temps

    first, second = CHILD_STOP_SECONDS
    child.join(first)
    if child.is_alive():
        try:
            os.kill(child.pid, signal.SIGINT)
        except OSError:
            pass
        child.join(second)
    if child.is_alive():
        child.terminate()
        child.join(5.0)
    if child.is_alive():
        child.kill()
    child.join()
    for name in ("train.parquet", METADATA_FILE):
        remove_stale_temps(path, name)
    if fresh:
        try:
            path.rmdir()
        except OSError:  # not empty (or already gone)
            pass


def large_dataset(directory, tokens: int, chunk_sequences: int,
                  progress: Callable[[str], None] | None = None) -> dict:
    """The train split of about ``tokens`` tokens in ``directory/vocab-seed42-<tokens>``, generated unless present.

    Sequences: ceil(tokens / expected rows per sequence) (:func:`evolve.traces.synth.chunked.mean_sequence_rows`),
    so the split has ``tokens`` tokens up to the spread of the sequence lengths (well under 1% from 1M
    tokens on). Returns a dict: ``path``, ``tokens`` (actual), ``sequences``, ``row_groups``, ``file_bytes``,
    ``generate_seconds`` and ``generate_peak_bytes`` (the generating process's peak resident set; both None
    when reused) and ``reused``.

    Raises: InputError for an unusable directory, or what the generation raised; RuntimeError when the
    generating process dies.
    """
    import multiprocessing as mp
    import queue as queues

    from evolve.traces.io import load_metadata, split_path
    from evolve.traces.synth.chunked import mean_sequence_rows
    from evolve.traces.synth.generate import MODELS, build_config

    say = progress or (lambda _msg: None)
    spec, config = MODELS[LARGE_MODEL], build_config(LARGE_MODEL)
    sequences = max(1, math.ceil(tokens / mean_sequence_rows(LARGE_MODEL, config)))
    path = Path(directory) / f"{LARGE_MODEL}-seed{LARGE_SEED}-{tokens}"
    expected = {"generator": spec.name, "generator_version": spec.version, "config": config.to_dict(),
                "seed": LARGE_SEED, "sequences": {"train": sequences}, "chunk_sequences": chunk_sequences}
    seconds = peak = None
    if _matches(path, expected):
        say(f"large dataset: reusing {path}")
    else:
        say(f"large dataset: generating {sequences:,} sequences (about {tokens:,} tokens) into {path}")
        ctx = mp.get_context("spawn")
        channel = ctx.Queue()
        kwargs = {"out": str(path), "model": LARGE_MODEL, "seed": LARGE_SEED, "sequences": sequences,
                  "chunk_sequences": chunk_sequences, "splits": ("train",)}
        child = ctx.Process(target=_generate_child, args=(channel, kwargs), daemon=True)
        fresh = not path.exists()
        child.start()
        try:
            while seconds is None:
                try:
                    message, value = channel.get(timeout=1.0)
                except queues.Empty:
                    if not child.is_alive():
                        raise RuntimeError(f"the process generating {path} died (exit code {child.exitcode})")
                    continue
                if message == "error":
                    raise value
                if message == "done":
                    seconds, peak = value
                else:
                    say(f"large dataset: {value}")
        finally:
            if seconds is None:  # interrupted or failed: stop the child and leave no temporary file behind
                _stop_child(child, path, fresh)
            child.join()
    meta = load_metadata(path)
    return {"path": str(path), "tokens": meta["statistics"]["train"]["tokens"], "sequences": sequences,
            "row_groups": meta["chunks"]["train"], "file_bytes": split_path(path, "train").stat().st_size,
            "generate_seconds": seconds, "generate_peak_bytes": peak, "reused": seconds is None}


def measure_large(tokens: int = 100_000_000, directory=DEFAULT_LARGE_DIR, trees: list | None = None,
                  seed: int = 0, reference_tokens: int | None = None, chunk_sequences: int | None = None,
                  reference_repeats: int = 3, reference_every: int = 10,
                  progress: Callable[[str], None] | None = None) -> dict:
    """Generate (or reuse) a dataset of about ``tokens`` tokens on disk and score it chunk by chunk from disk.

    See the module doc. Args:
        tokens: size of the large dataset (tokens, >= 1).
        directory: where the datasets are kept (created if needed).
        trees: DEAP trees (or prefix node lists) scored with the standard rule; None: 31 random programs
            over the data's features (:func:`evolve.perf.measure.random_programs`, ``seed``).
        reference_tokens: size of the reference dataset (None: :data:`REFERENCE_TOKENS`, 1M).
        chunk_sequences: sequences per row group; None: those of about ``reference_tokens`` tokens.
        reference_repeats: timed passes over the reference before the large pass.
        reference_every: one more timed reference pass after every this many row groups of the large
            pass (its time left out of the large pass's), so that a change of machine load during the
            large pass weighs on the reference too; the reference is the median of all its passes.

    Returns: the figures (``tokens_100m_seconds``, ``resident_bytes_per_token_100m``,
    ``resident_peak_bytes_100m``, ``cost_per_token_ratio`` and the details, keys ``large_*``).

    Raises: InputError for an unusable directory; what :func:`large_dataset` raises.
    """
    import pyarrow.parquet as pq

    from evolve.traces.io import split_path
    from evolve.traces.synth.chunked import mean_sequence_rows
    from evolve.traces.synth.generate import build_config
    from evolve.eval.chunked import score_split_chunks
    from evolve.gp.primitives import FEATURES, build_pset
    from evolve.perf.measure import random_programs
    from heuristics.registry import get_rule

    say = progress or (lambda _msg: None)
    reference_tokens = REFERENCE_TOKENS if reference_tokens is None else reference_tokens
    if chunk_sequences is None:
        per_sequence = mean_sequence_rows(LARGE_MODEL, build_config(LARGE_MODEL))
        chunk_sequences = max(1, math.ceil(reference_tokens / per_sequence))
    ref = large_dataset(directory, reference_tokens, chunk_sequences, progress)
    big = large_dataset(directory, tokens, chunk_sequences, progress)
    ref_file, big_file = split_path(ref["path"], "train"), split_path(big["path"], "train")
    if trees is None:
        names = set(pq.read_schema(ref_file).names)
        trees = random_programs(build_pset(tuple(f for f in FEATURES if f in names)), 31, seed)
    programs = [get_rule("standard_rejection").program] + [compile_nodes(from_tree(t)) for t in trees]
    say(f"large dataset: reference pass over {ref['tokens']:,} tokens, {len(programs)} programs")
    score_split_chunks(programs, ref["path"])  # compile (or load the cached machine code)
    passes = []

    def reference_pass() -> None:
        """One timed pass over the reference, read from disk, added to ``passes``."""
        nonlocal cold
        cold = drop_from_page_cache(ref_file) and cold
        t1 = time.perf_counter()
        out = score_split_chunks(programs, ref["path"])
        passes.append((time.perf_counter() - t1, out))

    cold = True
    for _ in range(max(1, reference_repeats)):
        reference_pass()
    gc.collect()
    say(f"large dataset: scoring {big['tokens']:,} tokens in {big['row_groups']} row groups from disk")
    inserted = 0.0  # seconds of the reference passes made during the large pass

    def chunk_done(done: int, seen: int) -> None:
        nonlocal inserted
        if done % 10 == 0 or done == big["row_groups"]:
            say(f"large dataset: {done}/{big['row_groups']} row groups, {seen:,} tokens")
        if reference_every and done % reference_every == 0 and done < big["row_groups"]:
            t1 = time.perf_counter()
            reference_pass()
            inserted += time.perf_counter() - t1
    cold = drop_from_page_cache(big_file) and cold
    with RssSampler(interval=0.01) as sampler:
        before = sampler.rss()
        t0 = time.perf_counter()
        result = score_split_chunks(programs, big["path"], on_chunk=chunk_done)
        seconds = time.perf_counter() - t0 - inserted
    ref_seconds, ref_result = sorted(passes, key=lambda p: p[0])[len(passes) // 2]
    n, n_ref = result.tokens, ref_result.tokens
    return {"tokens_100m_seconds": seconds, "tokens_100m_read_seconds": result.read_seconds,
            "tokens_100m_score_seconds": result.score_seconds,
            "resident_bytes_per_token_100m": (sampler.peak - before) / n,
            "resident_peak_bytes_100m": sampler.peak, "resident_growth_bytes_100m": sampler.peak - before,
            "cost_per_token_ratio": (seconds / n) / (ref_seconds / n_ref),
            "cost_per_token_ratio_scoring": (result.score_seconds / n) / (ref_result.score_seconds / n_ref),
            "large_tokens": tokens, "large_tokens_actual": n, "large_sequences": big["sequences"],
            "large_chunk_sequences": chunk_sequences, "large_row_groups": result.chunks,
            "large_file_bytes": big["file_bytes"], "large_path": big["path"], "large_reused": big["reused"],
            "large_generate_seconds": big["generate_seconds"], "large_generate_peak_bytes": big["generate_peak_bytes"],
            "large_reference_tokens": n_ref, "large_reference_seconds": ref_seconds,
            "large_reference_row_groups": ref_result.chunks,
            "large_reference_generate_seconds": ref["generate_seconds"],
            "large_reference_generate_peak_bytes": ref["generate_peak_bytes"], "large_programs": len(programs),
            "large_from_disk": cold,
            "large_method": "the train split of the vocab model (seed 42) generated chunk by chunk into one Parquet "
                            "file (one row group per chunk, in a child process; generate seconds apart, null when "
                            "reused), then read row group by row group from disk (scalar columns; the file's pages "
                            "dropped from the page cache before each timed pass, the next row group prefetched), "
                            "validated, prepared and scored with the standard rule and random programs "
                            "(score_counts), counts summed; seconds = that whole pass; resident peak = the process's "
                            "resident set, sampled "
                            "every 10 ms during the pass; bytes per token = the peak's growth over the pass / "
                            "tokens; ratio = seconds per token of the pass against the median of "
                            f"{len(passes)} passes over a {n_ref:,}-token file made the same way "
                            f"({max(1, reference_repeats)} before the pass, one after every {reference_every} row "
                            "groups of it, their time left out of the pass's)",
            "large_reference_passes": len(passes)}


#: Targets of the scale measurements (set for a 2-core machine).
SCALE_TARGETS = {"parallel_efficiency": (">=", 0.8), "dask_overhead": ("<=", 0.05),
                 "cost_per_token_ratio": ("<=", 1.1), "resident_peak_bytes_100m": ("<=", 2 * 1024 ** 3)}


def run_scale(data_dir, population: int = 1000, generations: int = 30, interval: int = 10, seed: int = 0,
              island_tokens: int = 1_000_000, large_tokens: int = 100_000_000, large_dir=DEFAULT_LARGE_DIR,
              large_only: bool = False, progress: Callable[[str], None] | None = None) -> dict:
    """:func:`measure_islands` on the splits of ``data_dir`` (or the default data generated in memory,
    :func:`evolve.perf.measure.load_splits`; skipped with ``large_only``) and :func:`measure_large`
    in ``large_dir``; returns the figures, the targets met (:data:`SCALE_TARGETS`, those measured) and the
    machine's load."""
    import os

    from evolve.perf.measure import load_splits
    from evolve.perf.timing import environment

    report: dict = {"scale_environment": environment()}
    if not large_only:
        train, valid, desc = load_splits(data_dir)
        report["scale_data"] = desc
        report.update(measure_islands(train, valid, island_tokens, population, generations, interval, seed,
                                      progress))
        del train, valid
        gc.collect()
    report.update(measure_large(large_tokens, large_dir, seed=seed, progress=progress))
    report["scale_environment"]["load_average_end"] = list(os.getloadavg())
    report["scale_targets_met"] = {key: (report[key] >= bound if op == ">=" else report[key] <= bound)
                                   for key, (op, bound) in SCALE_TARGETS.items() if key in report}
    return report


def merge_into(path, figures: dict) -> dict:
    """The perf report at ``path`` (an empty dict when there is none or it is unreadable) updated with ``figures``
    (a ``*_targets_met`` dict is updated key by key, so a partial measurement keeps the other verdicts)."""
    import json

    try:
        report = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        report = {}
    if not isinstance(report, dict):
        report = {}
    for key, value in figures.items():
        if key.endswith("_targets_met") and isinstance(value, dict) and isinstance(report.get(key), dict):
            value = {**report[key], **value}
        report[key] = value
    return report


def render_scale(report: dict) -> str:
    """The scale figures as a short text table (the island lines only when they were measured)."""
    met = report.get("scale_targets_met", {})

    def mark(key):
        return "" if key not in met else ("  (target met)" if met[key] else "  (target missed)")
    lines = []
    if "islands_generations_per_s" in report:
        per_s = report["islands_generations_per_s"]
        lines += [f"{'islands: generations/s, ' + w + ' worker(s)':<44}{v:>12.3f}" for w, v in per_s.items()]
        lines += [f"{'parallel efficiency (2 workers)':<44}{report['parallel_efficiency']:>12.3f}"
                  f"{mark('parallel_efficiency')}",
                  f"{'Dask overhead per epoch (fraction)':<44}{report['dask_overhead']:>12.4f}{mark('dask_overhead')}"]
    generated = report["large_generate_seconds"]
    peaks = [p for p in (report.get("large_generate_peak_bytes"), report.get("large_reference_generate_peak_bytes"))
             if p]
    lines += [f"{'large dataset: tokens':<44}{report['large_tokens_actual']:>12,}",
              f"{'large dataset: file MB':<44}{report['large_file_bytes'] / 1e6:>12.1f}",
              f"{'large dataset: generation seconds':<44}"
              + (f"{generated:>12.1f}" if generated is not None else f"{'reused':>12}"),
              f"{'large dataset: generation peak MB (child)':<44}"
              + (f"{max(peaks) / 1e6:>12.1f}" if peaks else f"{'-':>12}"),
              f"{'large dataset: seconds (read and score)':<44}{report['tokens_100m_seconds']:>12.1f}",
              f"{'large dataset: resident peak MB':<44}{report['resident_peak_bytes_100m'] / 1e6:>12.1f}"
              f"{mark('resident_peak_bytes_100m')}",
              f"{'large dataset: resident growth bytes/token':<44}{report['resident_bytes_per_token_100m']:>12.2f}",
              f"{'large dataset: cost per token vs reference':<44}{report['cost_per_token_ratio']:>12.3f}"
              f"{mark('cost_per_token_ratio')}"]
    return "\n".join(lines) + "\n"


__all__ = ["WORKERS", "SCALE_TARGETS", "DEFAULT_LARGE_DIR", "REFERENCE_TOKENS", "measure_islands",
           "drop_from_page_cache", "large_dataset", "measure_large", "run_scale", "merge_into", "render_scale"]

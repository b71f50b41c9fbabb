"""Measurement (5) of the performance harness: evaluation time against data size, and memory per token.

See :func:`measure_scaling`. The rule's memory bound is the rate at which all
threads can read the four float64 rows the standard rule reads
(:func:`read_bandwidth`).
"""
from __future__ import annotations

import gc

import numba
import numpy as np

from evolve.traces.io import Traces
from evolve.eval.evaluator import EvalData, evaluate
from evolve.eval.fastpath.layouts import CHUNK
from evolve.eval.population import PopulationEvaluator
from evolve.perf.measure import tiled_columns
from evolve.perf.timing import RssSampler, Timing, repeat, timed, utilisation

#: Token counts of the scaling measurement.
DEFAULT_SCALING = (10_000, 100_000, 1_000_000, 10_000_000)


def _load_point(traces: Traces, size: int) -> tuple[EvalData, dict]:
    """Tiled data of ``size`` tokens loaded like a split (validated), with its resident and peak bytes per token."""
    import pandas as pd
    gc.collect()
    with RssSampler() as sampler:
        before = sampler.rss()
        tiled = Traces.from_frame(pd.DataFrame(tiled_columns(traces, size)), source=f"tiled {size}")
        data = EvalData.from_traces(tiled, share=False)
        del tiled
        gc.collect()
        resident = sampler.rss() - before
    return data, {"tokens": size, "resident_bytes_per_token": resident / size,
                  "data_bytes_per_token": data.nbytes() / size, "peak_bytes_per_token": (sampler.peak - before) / size}


def measure_scaling(traces: Traces, sizes: tuple[int, ...], trees: list, threads: int,
                    rounds: int = 3) -> dict:
    """(5) Evaluation time on tiled data of each size; resident and peak bytes per token of the largest.

    Every size is loaded first (sizes ascending); then ``rounds`` rounds time
    each size in turn, the standard rule (best of many calls) and a batch of 32
    random programs (derived rows off, no cache, so each call lowers and
    scores the whole batch), and each figure is the best over the rounds.
    Taking the sizes in turn spreads changes in the machine's speed (other
    processes, other virtual machines) over all sizes alike.

    Resident bytes: growth of the process's resident set from before building
    the data to after the loaded frame and traces were dropped (the prepared
    :class:`EvalData` alone; meaningful for large sizes only, small ones fit in
    memory the allocator already holds). Peak: the largest resident set while
    building, measured by sampling.
    """
    from heuristics.registry import get_rule
    rule = get_rule("standard_rejection")
    batch = trees[:32]
    loaded = [_load_point(traces, size) for size in sizes]
    rule_t: dict[int, list[Timing]] = {size: [] for size in sizes}
    pop_t: dict[int, list[Timing]] = {size: [] for size in sizes}
    stream_t: list[Timing] = []
    for k in range(rounds):
        stream_t += read_bandwidth(loaded[-1][0])
        for data, point in loaded:
            size = point["tokens"]
            rule_t[size] += repeat(lambda: evaluate(rule, data), min_repeats=3, budget=min(0.7, 3e-8 * size + 0.2))
            scorer = PopulationEvaluator(data, cache_size=0, derive=False)
            pop_t[size] += repeat(lambda: scorer.evaluate(batch), min_repeats=1, budget=0.3, warm_up=k == 0)
    points = []
    for data, point in loaded:
        size = point["tokens"]
        best = min(rule_t[size], key=lambda t: t.wall)
        pop_best = min(pop_t[size], key=lambda t: t.wall)
        points.append({**point, "seconds": best.wall, "tokens_per_s": size / best.wall, "cpu_seconds": best.cpu,
                       "cpu_utilisation": utilisation(rule_t[size], threads),
                       "rule_bytes_read_per_s": RULE_BYTES_PER_TOKEN * size / best.wall, "repeats": len(rule_t[size]),
                       "population_seconds": pop_best.wall, "population_cpu_seconds": pop_best.cpu,
                       "population_programs": len(batch), "population_repeats": len(pop_t[size])})
    del loaded
    memory = points[-1]
    by = {p["tokens"]: p for p in points}
    lo = min((s for s in by if s >= 100_000), default=min(by))
    hi = max(by)

    def ratio(key):
        return (by[hi][key] / hi) / (by[lo][key] / lo)

    lin_rule, lin_pop = ratio("seconds"), ratio("population_seconds")
    bandwidth = RULE_BYTES_PER_TOKEN * hi / min(t.wall for t in stream_t)
    return {"points": points, "linearity_rule": lin_rule, "linearity_population": lin_pop,
            "linearity_rule_cpu": ratio("cpu_seconds"), "linearity_population_cpu": ratio("population_cpu_seconds"),
            "linearity": "(seconds per token at the largest size) / (seconds per token at 100k); 1 = linear",
            "rounds": rounds,
            "memory_read_bandwidth_bytes_per_s": bandwidth,
            "memory_read_bandwidth": "all threads summing the 4 rows the rule reads at the largest size, "
                                     "chunk by chunk (the rule's access pattern), best over the rounds",
            "rule_memory_bound_tokens_per_s": bandwidth / RULE_BYTES_PER_TOKEN,
            "rule_fraction_of_memory_bound": by[hi]["tokens_per_s"] * RULE_BYTES_PER_TOKEN / bandwidth,
            "rule_bytes_per_token_read": "32 (target_prob, draft_prob, r, rand_value: float64)",
            "linearity_range": [lo, hi], "bytes_per_token": memory["resident_bytes_per_token"],
            "data_bytes_per_token": memory["data_bytes_per_token"],
            "peak_bytes_per_token": memory["peak_bytes_per_token"]}


#: Bytes of the split the standard rule reads per token (target_prob, draft_prob, r, rand_value).
RULE_BYTES_PER_TOKEN = 32


@numba.njit(cache=True, parallel=True, fastmath=True)
def _stream_sum(a, b, c, d, chunk):
    n = a.size
    n_chunks = (n + chunk - 1) // chunk
    out = np.zeros(n_chunks)
    for k in numba.prange(n_chunks):
        s = 0.0
        for j in range(k * chunk, min(n, (k + 1) * chunk)):
            s += a[j] + b[j] + c[j] + d[j]
        out[k] = s
    return out


def read_bandwidth(data: EvalData, repeats: int = 5, chunk: int = CHUNK) -> list[Timing]:
    """Timings of all threads reading the rows the standard rule reads (target_prob, draft_prob, r, rand_value).

    The rows are summed together, chunk by chunk as work items, the way the
    rule's kernel reads them: the memory rate a memory-bound rule can reach
    on ``data`` (bytes: :data:`RULE_BYTES_PER_TOKEN` x tokens).
    """
    rows = (data.feature("target_prob"), data.feature("draft_prob"), data.r, data.u)
    _stream_sum(*rows, chunk)
    return [timed(lambda: _stream_sum(*rows, chunk))[1] for _ in range(repeats)]


__all__ = ["DEFAULT_SCALING", "RULE_BYTES_PER_TOKEN", "measure_scaling", "read_bandwidth"]

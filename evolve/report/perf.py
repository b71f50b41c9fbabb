"""The performance harness: ``python benchmark.py perf [--output results/perf.json]``.

One process, one run, five measurements (issue 3) plus the trace generator's speed:

1. ``standard_rejection`` with seed 004's fitness on the default train split
   (``DATA/train.*`` when it exists, else the default vocab-model train split
   generated in memory, else seed 004's model): tokens per second of one
   :func:`evolve.eval.evaluator.evaluate` call (best of many; median also reported);
2. 1,000 distinct random programs (ramped half-and-half, depth 2-6, the full
   primitive set over the split's features, fixed seed) with the seed fitness:
   node evaluations per second (tree nodes x tokens / wall time, compiling
   included) of :class:`evolve.eval.population.PopulationEvaluator`, and of DEAP's
   stock path on the same programs (``deap.gp.compile``, a numpy-vectorised
   call, the same fitness in numpy: :func:`evolve.eval.evaluator.reference_metrics`);
3. when ``pyoperon`` is installed, Operon's ``EvaluateTrees`` on 1,000 random
   programs of the arithmetic subset (add, sub, mul, div) converted to Operon
   trees, same rows and thread count, against our evaluator on the same
   programs (Operon computes float32 predictions only; we compute float64
   thresholds *and* the fitness);
4. an end-to-end evolution (population 1000, 20 generations) with
   :func:`evolve.search.engine.search`: generations per second, the share of time
   outside evaluation, and the extrapolated time of 100 generations;
5. evaluation time of the standard rule and of a batch of 32 programs (derived
   rows off, so every size does the same work per token) on 10k, 100k, 1M and
   10M tokens (train rows tiled, validated like a loaded split; the sizes are
   timed in turn over three rounds, best of each), the linearity of both from
   100k to 10M, the rate at which all threads can read the four rows the rule
   reads (its memory bound at 10M tokens, where the rows no longer fit in the
   caches), and resident/peak memory per token of the prepared data.

Figures that are compared (ours against DEAP and Operon, one size against
another) are timed in turn over several rounds, best of each, so that changes
in the machine's speed during the run (other processes, other virtual
machines on the host) hit both sides alike. Timings are wall-clock
(``time.perf_counter``); process CPU time is recorded too, so that a run on a
machine shared with other processes can be read (``cpu_utilisation`` = CPU
seconds / wall seconds / threads). The figures, the
targets of issue 3 and whether each is met, the core count, thread count,
load average and versions are printed as a table and written as JSON
(atomically) with at least the keys of :data:`REQUIRED_KEYS`.
"""
from __future__ import annotations

import gc
import io
import json
import math
import os
import platform
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numba
import numpy as np

from data.errors import InputError
from data.io import Traces, atomic_write_text, load_split, split_path
from evolve.gp.compiler import from_tree, to_string
from evolve.eval.evaluator import EvalData, evaluate, reference_metrics
from evolve.eval.interpreter import CHUNK
from evolve.eval.population import PopulationEvaluator
from evolve.gp.primitives import FEATURES, PRIMITIVE_BY_NAME, build_pset, random_constant

REQUIRED_KEYS: tuple[str, ...] = (
    "rule_tokens_per_s", "gp_node_evals_per_s", "deap_node_evals_per_s", "gp_vs_deap", "operon_node_evals_per_s",
    "gp_vs_operon", "evolve_generations_per_s", "scaling", "bytes_per_token", "cores", "generator_tokens_per_s",
)

#: Issue 3's targets (2-core machine).
TARGETS = {
    "rule_tokens_per_s": 1e9,
    "gp_node_evals_per_s": 2e9,
    "gp_vs_deap": 5.0,
    "gp_vs_operon": 1.0,
    "evolve_100_generations_s": 60.0,
    "scaling_linearity": 1.10,        # the population evaluation (the search's work)
    "scaling_linearity_rule": 1.10,   # the standard rule alone (memory-bound at 10M tokens)
    "bytes_per_token": 120.0,
}
DEFAULT_SCALING = (10_000, 100_000, 1_000_000, 10_000_000)
ARITHMETIC = ("add", "sub", "mul", "div")


@dataclass
class Timing:
    """Wall and process-CPU seconds of one measured call."""

    wall: float
    cpu: float


def timed(fn: Callable[[], Any]) -> tuple[Any, Timing]:
    """Run ``fn`` once; return its value and the wall/CPU seconds it took."""
    c0, t0 = time.process_time(), time.perf_counter()
    value = fn()
    return value, Timing(time.perf_counter() - t0, time.process_time() - c0)


def repeat(fn: Callable[[], Any], min_repeats: int = 5, budget: float = 1.0, warm_up: bool = True) -> list[Timing]:
    """Time ``fn`` at least ``min_repeats`` times and until ``budget`` seconds have passed (after one warm-up call)."""
    if warm_up:
        fn()
    out: list[Timing] = []
    start = time.perf_counter()
    while len(out) < min_repeats or time.perf_counter() - start < budget:
        out.append(timed(fn)[1])
        if len(out) >= 100_000:
            break
    return out


def utilisation(timings: list[Timing], threads: int) -> float:
    """CPU seconds / (wall seconds x threads) over ``timings`` (1.0: every thread busy all the time)."""
    wall = sum(t.wall for t in timings)
    return sum(t.cpu for t in timings) / (wall * threads) if wall > 0 else float("nan")


def rss_bytes() -> int:
    """Resident set size of this process, bytes (``/proc/self/statm``; psutil elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import psutil
        return int(psutil.Process().memory_info().rss)


class RssSampler:
    """Samples the resident set size every ``interval`` seconds in a background thread; ``peak`` in bytes."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval = interval
        self.peak = self.rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def rss() -> int:
        """Current resident set size, bytes."""
        return rss_bytes()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.interval)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())


# --- data -------------------------------------------------------------------------------------

def load_splits(data_dir: str | os.PathLike, independent_fallback: bool = False) -> tuple[Traces, Traces, dict]:
    """Train and valid splits: ``data_dir`` when it has them, else the default dataset generated in memory.

    Returns (train, valid, description). The in-memory dataset is the one
    ``python generate_data.py`` writes by default (:mod:`data.synth.generate`: vocab
    model, seed 42, 1000 train sequences); when that model is unavailable,
    seed 004's model with the same sizes.
    """
    if split_path(data_dir, "train") is not None and split_path(data_dir, "valid") is not None:
        train, valid = load_split(data_dir, "train"), load_split(data_dir, "valid")
        meta = train.metadata or {}
        return train, valid, {"source": str(Path(data_dir)), "generator": meta.get("generator"),
                              "train_tokens": train.n, "valid_tokens": valid.n}
    try:
        if independent_fallback:
            raise ImportError("seed model requested")
        from data.synth import generate
        model, seed = generate.DEFAULT_MODEL, generate.DEFAULT_SEED
        spec = generate.get_model(model)
        config = generate.build_config(model, None)
        sizes, seeds = generate.split_sizes(generate.DEFAULT_SEQUENCES), generate.split_seeds(seed)
        splits = {s: Traces.from_frame(spec.generate_split(sizes[s], seeds[s], config), f"generated {s} split", s)
                  for s in ("train", "valid")}
        desc = {"source": f"generated in memory ({model} model, seed {seed}, {sizes['train']} train sequences; "
                          f"no dataset in {data_dir})", "generator": model}
    except ImportError:
        from data.synth.independent import generate_split
        splits = {s: Traces.from_frame(generate_split(n, sd), f"generated {s} split", s)
                  for s, n, sd in (("train", 1000, 42), ("valid", 300, 123))}
        desc = {"source": f"generated in memory (seed 004's model, 1000/300 sequences, seeds 42/123; "
                          f"no dataset in {data_dir})", "generator": "independent"}
    desc.update(train_tokens=splits["train"].n, valid_tokens=splits["valid"].n)
    return splits["train"], splits["valid"], desc


def tiled_columns(traces: Traces, size: int) -> dict[str, np.ndarray]:
    """Columns of ``size`` tokens made by tiling ``traces`` (sequence ids offset per copy, cut at ``size``)."""
    n = traces.n
    reps = -(-size // n)
    out = {}
    for name, col in traces.columns.items():
        if name == "seq_id":
            offset = int(col.max()) + 1
            out[name] = (col[None, :] + offset * np.arange(reps, dtype=np.int64)[:, None]).reshape(-1)[:size]
        else:
            out[name] = np.tile(col, reps)[:size]
    return out


# --- programs ---------------------------------------------------------------------------------

def random_programs(pset, count: int, seed: int, min_depth: int = 2, max_depth: int = 6) -> list:
    """``count`` distinct ramped half-and-half DEAP trees (Python's ``random`` seeded with ``seed``)."""
    from deap import gp
    random.seed(seed)
    trees, seen = [], set()
    attempts = 0
    while len(trees) < count and attempts < 100 * count:
        attempts += 1
        tree = gp.PrimitiveTree(gp.genHalfAndHalf(pset, min_depth, max_depth))
        key = to_string(from_tree(tree))
        if key not in seen:
            seen.add(key)
            trees.append(tree)
    return trees


def arithmetic_pset(features: tuple[str, ...]):
    """A DEAP primitive set with only add, sub, mul and div (numpy semantics of :mod:`evolve.gp.primitives`)."""
    from deap import gp
    pset = gp.PrimitiveSet("arithmetic", len(features))
    pset.renameArguments(**{f"ARG{i}": name for i, name in enumerate(features)})
    for name in ARITHMETIC:
        prim = PRIMITIVE_BY_NAME[name]
        pset.addPrimitive(prim.vector, prim.arity, name=prim.name)
    pset.addEphemeralConstant("const", random_constant)
    return pset


def operon_infix(tree, names: dict[str, str]) -> str:
    """Infix text of an arithmetic-subset tree for Operon's parser; feature f becomes variable ``names[f]``."""
    symbols = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
    stack: list[str] = []
    for node in reversed(from_tree(tree)):
        if node.kind == "prim":
            a, b = stack.pop(), stack.pop()
            stack.append(f"({a} {symbols[node.value]} {b})")
        elif node.kind == "feature":
            stack.append(names[str(node.value)])
        else:
            stack.append(repr(float(node.value)))
    return stack[0]


# --- the five measurements ------------------------------------------------------------------------

def measure_rule(train: EvalData, threads: int) -> dict:
    """(1) Tokens per second of ``evaluate(standard_rejection)`` on ``train``.

    Also the kernel alone (:func:`evolve.eval.interpreter.score_packed` on the
    already lowered program, no Metrics built): the difference is the fixed
    cost of a call (Python, argument checks, starting the threads), which
    matters on a split this small.
    """
    from heuristics.contract import get_rule
    from evolve.eval.evaluator import lowered_program
    from evolve.eval.interpreter import score_packed
    rule = get_rule("standard_rejection")
    times = repeat(lambda: evaluate(rule, train), min_repeats=50, budget=2.0)
    walls = sorted(t.wall for t in times)
    _, packed = lowered_program(rule.program, train)
    kernel = repeat(lambda: score_packed(packed, train.X, train.r, train.u, train.bounds, train.depth, 0,
                                         baseline=train.baseline), min_repeats=50, budget=1.0)
    return {"tokens": train.n, "repeats": len(times), "best_seconds": walls[0],
            "median_seconds": walls[len(walls) // 2], "tokens_per_s": train.n / walls[0],
            "median_tokens_per_s": train.n / walls[len(walls) // 2],
            "kernel_tokens_per_s": train.n / min(t.wall for t in kernel),
            "cpu_utilisation": utilisation(times, threads)}


def measure_gp(train: EvalData, traces: Traces, features: tuple[str, ...], count: int, seed: int,
               threads: int, rounds: int = 3) -> tuple[dict, list]:
    """(2) Node evaluations per second: our batched evaluator and DEAP's stock path on the same programs.

    The two are timed in turn, ``rounds`` times each (best of each), so that
    changes in the machine's speed during the run affect both alike.
    """
    from deap import gp
    pset = build_pset(features)
    trees = random_programs(pset, count, seed)
    nodes = sum(len(t) for t in trees)
    n = train.n
    PopulationEvaluator(train, cache_size=0, derive=False).evaluate(trees[:8])  # compile / load the kernels
    cols = [np.ascontiguousarray(train.feature(f)) for f in features]

    def deap_all() -> list:
        out = []
        with np.errstate(all="ignore"):
            for tree in trees:
                tau = np.broadcast_to(np.asarray(gp.compile(tree, pset)(*cols), dtype=np.float64), (n,))
                out.append(reference_metrics(tau, traces))
        return out

    with np.errstate(all="ignore"):  # warm-up (numpy, DEAP)
        for tree in trees[:5]:
            reference_metrics(np.broadcast_to(np.asarray(gp.compile(tree, pset)(*cols), float), (n,)), traces)
    runs, deap_runs = [], []
    for _ in range(rounds):
        train.clear_derived()  # the derived rows are built inside the timed call
        scorer = PopulationEvaluator(train, cache_size=0)
        metrics, t = timed(lambda: scorer.evaluate(trees))
        runs.append((t, scorer.stats))
        deap_metrics, t = timed(deap_all)
        deap_runs.append(t)
    best_t, stats = min(runs, key=lambda x: x[0].wall)
    ours = nodes * n / best_t.wall
    plain = PopulationEvaluator(train, cache_size=0, derive=False)
    plain_t = timed(lambda: plain.evaluate(trees))[1]
    dt = min(deap_runs, key=lambda t: t.wall)
    deap = nodes * n / dt.wall
    mismatch = sum(1 for a, b in zip(metrics, deap_metrics)
                   if a.false_accepts != b.false_accepts or a.false_rejects != b.false_rejects
                   or a.n_invalid != b.n_invalid or not math.isclose(a.fitness, b.fitness, rel_tol=1e-9, abs_tol=1e-12))
    return {
        "programs": len(trees), "nodes": nodes, "mean_nodes": nodes / len(trees), "tokens": n,
        "features": list(features), "depth": [2, 6],
        "seconds": best_t.wall, "compile_seconds": stats.compile_seconds, "kernel_seconds": stats.score_seconds,
        "node_evals_per_s": ours, "kernel_node_evals_per_s": nodes * n / stats.score_seconds,
        "instructions_per_node": stats.instructions / stats.nodes,
        "derived_rows": stats.derived_rows,
        "node_evals_per_s_without_derived_rows": nodes * n / plain_t.wall,
        "instructions_per_node_without_derived_rows": plain.stats.instructions / plain.stats.nodes,
        "cpu_utilisation": best_t.cpu / (best_t.wall * threads),
        "node_evals_per_cpu_s": nodes * n / best_t.cpu if best_t.cpu > 0 else None,
        "deap_seconds": dt.wall, "deap_node_evals_per_s": deap, "gp_vs_deap": ours / deap,
        "deap_cpu_utilisation": dt.cpu / dt.wall,
        "deap_node_evals_per_cpu_s": nodes * n / dt.cpu if dt.cpu > 0 else None,
        "metrics_disagreeing_with_deap": mismatch,
    }, trees


def measure_operon(train: EvalData, features: tuple[str, ...], count: int, seed: int, threads: int) -> dict:
    """(3) Operon's EvaluateTrees against our evaluator on the same arithmetic-subset programs."""
    try:
        import pyoperon as op
    except ImportError as exc:
        return {"available": False, "reason": f"pyoperon not installed ({exc})"}
    trees = random_programs(arithmetic_pset(features), count, seed + 1)
    nodes = sum(len(t) for t in trees)
    n = train.n
    PopulationEvaluator(train, cache_size=0).evaluate(trees[:8])
    ds = op.Dataset(np.ascontiguousarray(np.stack([train.feature(f) for f in features], axis=1)))
    names = [v.Name for v in ds.Variables]
    hashes = {v.Name: v.Hash for v in ds.Variables}
    rename = dict(zip(features, names))
    op_trees = [op.InfixParser.Parse(operon_infix(tree, rename), hashes) for tree in trees]
    result = np.zeros((len(op_trees), n), dtype=np.float32)
    rng = op.Range(0, n)
    op.EvaluateTrees(op_trees[:8], ds, rng, result[:8], nthread=threads)
    ours_runs, op_runs = [], []
    for _ in range(5):  # in turn, as in measure_gp
        scorer = PopulationEvaluator(train, cache_size=0)
        ours_runs.append(timed(lambda: scorer.evaluate(trees))[1])
        op_runs.append(timed(lambda: op.EvaluateTrees(op_trees, ds, rng, result, nthread=threads))[1])
    ours_t = min(ours_runs, key=lambda t: t.wall)
    op_t = min(op_runs, key=lambda t: t.wall)
    ours = nodes * n / ours_t.wall
    operon = nodes * n / op_t.wall
    # sanity: Operon's float32 predictions agree with the float64 thresholds where both are finite and moderate
    from evolve.eval.evaluator import thresholds
    from evolve.gp.compiler import compile_tree
    check = [i for i in range(0, len(trees), max(1, len(trees) // 20))]
    agree = 0
    for i in check:
        ref = thresholds(compile_tree(trees[i]), train)
        ok = np.isfinite(ref) & (np.abs(ref) < 1e3) & np.isfinite(result[i])
        agree += int(np.allclose(result[i][ok], ref[ok], rtol=1e-2, atol=1e-3))
    return {
        "available": True, "version": _operon_version(op), "programs": len(trees), "nodes": nodes,
        "mean_nodes": nodes / len(trees), "tokens": n, "primitives": list(ARITHMETIC), "threads": threads,
        "seconds": ours_t.wall, "node_evals_per_s": ours, "cpu_utilisation": ours_t.cpu / (ours_t.wall * threads),
        "operon_seconds": op_t.wall, "operon_node_evals_per_s": operon, "gp_vs_operon": ours / operon,
        "operon_cpu_utilisation": op_t.cpu / (op_t.wall * threads),
        "operon_precision": "float32 (pyoperon's single-precision build); plain division",
        "spot_checks_agreeing": f"{agree}/{len(check)}",
    }


def _operon_version(op) -> str:
    try:
        return " ".join(op.Version().split()[:3])
    except Exception:  # noqa: BLE001  (the version string is informative only)
        return "unknown"


def measure_evolution(train: EvalData, valid: EvalData, population: int, generations: int, seed: int) -> dict:
    """(4) An end-to-end run of :func:`evolve.search.engine.search` (population x generations)."""
    from evolve.search.config import RunConfig, resolve_features
    from evolve.search.engine import search
    cfg = RunConfig(population=population, generations=generations, seed=seed)
    available = tuple(f for f in train.available if f in valid.available)
    features = resolve_features(cfg, available, "perf")
    result, t = timed(lambda: search(cfg, train, valid, features))
    rows = result.logbook
    gens = [r for r in rows if r["gen"] >= 1]
    gen_seconds = sum(r["seconds"] for r in gens)
    eval_seconds = sum(r["eval_seconds"] for r in gens)
    init_seconds = rows[0]["seconds"] if rows else 0.0
    per_gen = gen_seconds / len(gens) if gens else float("nan")
    return {
        "population": population, "generations": len(gens), "loop": "evolve.search.engine.search",
        "seconds": t.wall, "initial_generation_seconds": init_seconds,
        "generations_per_s": len(gens) / gen_seconds if gen_seconds > 0 else float("nan"),
        "seconds_per_generation": per_gen,
        "share_outside_evaluation": 1.0 - eval_seconds / gen_seconds if gen_seconds > 0 else float("nan"),
        "evaluations": result.evaluations, "programs_scored": result.programs,
        "mean_size_last_generation": gens[-1]["size_avg"] if gens else None,
        "extrapolated_100_generations_s": init_seconds + 100 * per_gen,
        "extrapolation": f"initial generation + 100 x the mean of generations 1-{len(gens)} "
                         "(later generations may be slower if trees grow)",
        "best_train_fitness": gens[-1]["train_max"] if gens else None,
    }


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
    from heuristics.contract import get_rule
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


def measure_generator(seed: int, tokens: int = 1_000_000) -> dict:
    """The vocab generator's throughput (:func:`data.synth.vocab_model.measure_throughput`), when available."""
    try:
        from data.synth.vocab_model import measure_throughput
    except ImportError as exc:
        return {"available": False, "reason": str(exc)}
    return {"available": True, **measure_throughput(tokens, seed)}


def environment() -> dict:
    """Cores, threads, CPU model, load average and versions."""
    from importlib import metadata
    versions = {"python": platform.python_version()}
    for pkg in ("numpy", "numba", "llvmlite", "deap", "pandas", "pyoperon", "psutil"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import llvmlite.binding as llvm
        llvm_svml = bool(llvm.targets.has_svml())
    except Exception:  # noqa: BLE001
        llvm_svml = False
    return {"cores": os.cpu_count(), "threads": numba.get_num_threads(), "threading_layer": _layer(),
            "cpu": cpu, "platform": platform.platform(), "versions": versions,
            "svml": {"numba_using_svml": bool(numba.config.USING_SVML), "llvmlite_built_with_svml": llvm_svml},
            "load_average_start": list(os.getloadavg())}


def _layer() -> str:
    try:
        return numba.threading_layer()
    except ValueError:
        return "not initialised"


# --- the whole run ------------------------------------------------------------------------------

def run_perf(data_dir: str | os.PathLike = "data", programs: int = 1000, population: int = 1000,
             generations: int = 20, sizes: tuple[int, ...] = DEFAULT_SCALING, seed: int = 0,
             generator_tokens: int = 1_000_000, progress: Callable[[str], None] | None = None) -> dict:
    """Run all measurements (see the module doc) and return the report dict (keys :data:`REQUIRED_KEYS` and more).

    Raises: InputError for an unreadable dataset or bad sizes.
    """
    if programs < 1 or population < 2 or generations < 1 or not sizes or min(sizes) < 1:
        raise InputError("option '--programs/--population/--generations/--sizes': must be positive "
                         f"(values {programs}, {population}, {generations}, {list(sizes)})")
    say = progress or (lambda _msg: None)
    env = environment()
    threads = env["threads"]
    say("loading data")
    train_t, valid_t, data_desc = load_splits(data_dir)
    train, valid = EvalData.from_traces(train_t), EvalData.from_traces(valid_t)
    features = tuple(f for f in FEATURES if f in train.available)
    say(f"(1) standard_rejection on {train.n} tokens")
    rule = measure_rule(train, threads)
    say(f"(2) {programs} random programs: ours and DEAP's stock path")
    gp_res, trees = measure_gp(train, train_t, features, programs, seed, threads)
    say("(3) Operon")
    operon = measure_operon(train, features, programs, seed, threads)
    say(f"(4) evolution: population {population}, {generations} generations")
    evo = measure_evolution(train, valid, population, generations, seed)
    say(f"(5) scaling: {', '.join(f'{s:,}' for s in sizes)} tokens")
    scaling = measure_scaling(train_t, tuple(sorted(sizes)), trees, threads)
    say("generator throughput")
    generator = measure_generator(seed, generator_tokens)
    env["load_average_end"] = list(os.getloadavg())

    report: dict[str, Any] = {
        "rule_tokens_per_s": rule["tokens_per_s"],
        "gp_node_evals_per_s": gp_res["node_evals_per_s"],
        "deap_node_evals_per_s": gp_res["deap_node_evals_per_s"],
        "gp_vs_deap": gp_res["gp_vs_deap"],
        "operon_node_evals_per_s": operon.get("operon_node_evals_per_s"),
        "gp_vs_operon": operon.get("gp_vs_operon"),
        "evolve_generations_per_s": evo["generations_per_s"],
        "evolve_100_generations_s": evo["extrapolated_100_generations_s"],
        "scaling": [{"tokens": p["tokens"], "seconds": p["seconds"], "population_seconds": p["population_seconds"]}
                    for p in scaling["points"]],
        "bytes_per_token": scaling["bytes_per_token"],
        "peak_bytes_per_token": scaling["peak_bytes_per_token"],
        "cores": env["cores"],
        "threads": threads,
        "generator_tokens_per_s": generator.get("tokens_per_s"),
        "data": data_desc,
        "details": {"rule": rule, "gp": gp_res, "operon": operon, "evolution": evo, "scaling": scaling,
                    "generator": generator},
        "environment": env,
    }
    report["targets"] = check_targets(report)
    return report


def check_targets(report: dict) -> dict:
    """Each target of issue 3 with the value reached and whether it is met (None: not measured)."""
    sc = report["details"]["scaling"]
    values = {
        "rule_tokens_per_s": report["rule_tokens_per_s"],
        "gp_node_evals_per_s": report["gp_node_evals_per_s"],
        "gp_vs_deap": report["gp_vs_deap"],
        "gp_vs_operon": report["gp_vs_operon"],
        "evolve_100_generations_s": report["evolve_100_generations_s"],
        "scaling_linearity": sc["linearity_population"],
        "scaling_linearity_rule": sc["linearity_rule"],
        "bytes_per_token": report["bytes_per_token"],
    }
    out = {}
    for key, target in TARGETS.items():
        v = values[key]
        lower_is_better = key in ("evolve_100_generations_s", "bytes_per_token")
        if key.startswith("scaling_linearity"):  # within the target's fraction of linear, either way
            met = None if v is None else abs(v - 1.0) <= target - 1.0
            out[key] = {"value": v, "target": target, "met": met, "better": "closer to 1"}
            continue
        met = None if v is None else (v <= target if lower_is_better else v >= target)
        out[key] = {"value": v, "target": target, "met": met, "better": "lower" if lower_is_better else "higher"}
    return out


def render(report: dict) -> str:
    """The report as a rich table (plain text)."""
    from rich.console import Console
    from rich.table import Table
    t = report["targets"]
    gp_res = report["details"]["gp"]
    evo = report["details"]["evolution"]
    sc = report["details"]["scaling"]
    table = Table(title=f"perf: {report['cores']} cores, {report['threads']} threads, "
                        f"data {report['data']['source']}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    table.add_column("met")

    def row(label, value, fmt, key=None, text=None):
        target = t[key] if key else None
        bound = "" if target is None else {"lower": "<= ", "higher": ">= "}.get(target["better"], "1 ± ")
        if target is not None and target["better"] == "closer to 1":
            bound += format(target["target"] - 1.0, ".2f")
        elif target is not None:
            bound += format(target["target"], fmt)
        table.add_row(label, text if text is not None else "n/a" if value is None else format(value, fmt), bound,
                      "" if target is None or target["met"] is None else ("yes" if target["met"] else "NO"))

    row("(1) standard_rejection tokens/s", report["rule_tokens_per_s"], ".3g", "rule_tokens_per_s")
    row("    tokens/s (kernel only)", report["details"]["rule"]["kernel_tokens_per_s"], ".3g")
    row("(2) node evals/s (ours, incl. compile)", report["gp_node_evals_per_s"], ".3g", "gp_node_evals_per_s")
    row("    node evals/s (kernel only)", gp_res["kernel_node_evals_per_s"], ".3g")
    row("    node evals/s (no derived log/exp rows)", gp_res["node_evals_per_s_without_derived_rows"], ".3g")
    row("    node evals/s (DEAP stock path)", report["deap_node_evals_per_s"], ".3g")
    row("    ours / DEAP", report["gp_vs_deap"], ".1f", "gp_vs_deap")
    row("    node evals per CPU-second: ours", gp_res["node_evals_per_cpu_s"], ".3g")
    row("    node evals per CPU-second: DEAP", gp_res["deap_node_evals_per_cpu_s"], ".3g")
    row("(3) node evals/s (Operon, arithmetic)", report["operon_node_evals_per_s"], ".3g")
    row("    ours / Operon", report["gp_vs_operon"], ".2f", "gp_vs_operon")
    row(f"(4) generations/s (population {evo['population']})", report["evolve_generations_per_s"], ".3g")
    row("    100 generations, s (extrapolated)", report["evolve_100_generations_s"], ".1f",
        "evolve_100_generations_s")
    row("    share of time outside evaluation", evo["share_outside_evaluation"], ".2f")
    for p in sc["points"]:
        row(f"(5) {p['tokens']:,} tokens: seconds, rule / {p['population_programs']} programs",
            None, "", None, f"{p['seconds']:.3g} / {p['population_seconds']:.3g}")
    lo, hi = sc["linearity_range"]
    row(f"    linearity {lo:,}->{hi:,}, population (time/token ratio)", t["scaling_linearity"]["value"], ".3f",
        "scaling_linearity")
    row(f"    linearity {lo:,}->{hi:,}, rule alone", t["scaling_linearity_rule"]["value"], ".3f",
        "scaling_linearity_rule")
    row(f"    rule at {hi:,}: share of its memory bound", sc["rule_fraction_of_memory_bound"], ".2f")
    row(f"    memory bound: reading the rule's rows, tokens/s ({RULE_BYTES_PER_TOKEN} B/token)",
        sc["rule_memory_bound_tokens_per_s"], ".3g")
    row("    resident bytes/token", report["bytes_per_token"], ".1f", "bytes_per_token")
    row("    peak bytes/token while loading", report["peak_bytes_per_token"], ".1f")
    row("generator tokens/s", report["generator_tokens_per_s"], ".3g")
    console = Console(width=110, record=True, file=io.StringIO())
    console.print(table)
    env = report["environment"]
    console.print(f"load average at start {env['load_average_start'][0]:.2f}, at end "
                  f"{env['load_average_end'][0]:.2f} (other processes share the cores when this exceeds "
                  f"{report['cores']})")
    return console.export_text()


def write_report(report: dict, output: str | os.PathLike) -> None:
    """Write ``report`` as JSON, atomically."""
    atomic_write_text(output, json.dumps(report, indent=2, default=_json_default, allow_nan=True) + "\n")


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(s.replace("_", "")) for s in text.split(",") if s.strip())
    except ValueError:
        raise InputError(f"option '--sizes': expected comma-separated integers (value {text!r})") from None
    if not sizes or min(sizes) < 1:
        raise InputError(f"option '--sizes': sizes must be positive integers (value {text!r})")
    return sizes


__all__ = ["parse_sizes", "run_perf", "render", "write_report", "REQUIRED_KEYS", "TARGETS", "load_splits"]

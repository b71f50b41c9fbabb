"""Measurements (1) to (4) of the performance harness and the trace generator's speed.

See :mod:`evolve.perf.command` for what each measures; the data they run on
(:func:`load_splits`) and the random programs they score
(:func:`random_programs`) are defined here too.
"""
from __future__ import annotations

import math
import os
import random
from pathlib import Path

import numpy as np

from evolve.traces.io import Traces, load_split, split_path
from evolve.eval.evaluator import EvalData, evaluate, reference_metrics
from evolve.eval.population import PopulationEvaluator
from evolve.gp.compiler import from_tree, to_string
from evolve.gp.primitives import PRIMITIVE_BY_NAME, build_pset, random_constant
from evolve.perf.timing import repeat, timed, utilisation

#: The primitives of the Operon comparison (the subset Operon and we share).
ARITHMETIC = ("add", "sub", "mul", "div")


# --- data -------------------------------------------------------------------------------------

def load_splits(data_dir: str | os.PathLike, independent_fallback: bool = False) -> tuple[Traces, Traces, dict]:
    """Train and valid splits: ``data_dir`` when it has them, else the default dataset generated in memory.

    Returns (train, valid, description). The in-memory dataset is the one
    ``python generate_data.py`` writes by default (:mod:`evolve.traces.synth.generate`: vocab
    model, seed 42, 1000 train sequences); when that model is unavailable,
    the independent-features model (:mod:`evolve.traces.synth.independent`) with the same sizes.
    """
    if split_path(data_dir, "train") is not None and split_path(data_dir, "valid") is not None:
        train, valid = load_split(data_dir, "train"), load_split(data_dir, "valid")
        meta = train.metadata or {}
        return train, valid, {"source": str(Path(data_dir)), "generator": meta.get("generator"),
                              "train_tokens": train.n, "valid_tokens": valid.n}
    try:
        if independent_fallback:
            raise ImportError("independent-features model requested")
        from evolve.traces.synth import generate
        model, seed = generate.DEFAULT_MODEL, generate.DEFAULT_SEED
        spec = generate.get_model(model)
        config = generate.build_config(model, None)
        sizes, seeds = generate.split_sizes(generate.DEFAULT_SEQUENCES), generate.split_seeds(seed)
        splits = {s: Traces.from_frame(spec.generate_split(sizes[s], seeds[s], config), f"generated {s} split", s)
                  for s in ("train", "valid")}
        desc = {"source": f"generated in memory ({model} model, seed {seed}, {sizes['train']} train sequences; "
                          f"no dataset in {data_dir})", "generator": model}
    except ImportError:
        from evolve.traces.synth.independent import generate_split
        splits = {s: Traces.from_frame(generate_split(n, sd), f"generated {s} split", s)
                  for s, n, sd in (("train", 1000, 42), ("valid", 300, 123))}
        desc = {"source": f"generated in memory (independent-features model, 1000/300 sequences, seeds 42/123; "
                          f"no dataset in {data_dir})", "generator": "independent"}
    desc.update(train_tokens=splits["train"].n, valid_tokens=splits["valid"].n)
    return splits["train"], splits["valid"], desc


def tiled_columns(traces: Traces, size: int) -> dict[str, np.ndarray]:
    """Columns of ``size`` tokens made by tiling ``traces`` (sequence ids offset per copy, cut at ``size``).

    List columns (``block_residual_phi``, 2-D arrays) are left out: the timed scoring never reads them.
    """
    n = traces.n
    reps = -(-size // n)
    out = {}
    for name, col in traces.columns.items():
        if col.ndim != 1:
            continue
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
        if node.node_type == "prim":
            a, b = stack.pop(), stack.pop()
            stack.append(f"({a} {symbols[node.value]} {b})")
        elif node.node_type == "feature":
            stack.append(names[str(node.value)])
        else:
            stack.append(repr(float(node.value)))
    return stack[0]


# --- the five measurements ------------------------------------------------------------------------

def measure_rule(train: EvalData, threads: int) -> dict:
    """(1) Tokens per second of ``evaluate(standard_rejection)`` on ``train``.

    Also the kernel alone (:func:`evolve.eval.fastpath.scoring.score_packed` on the
    already lowered program, no Metrics built): the difference is the fixed
    cost of a call (Python, argument checks, starting the threads), which
    matters on a split this small.
    """
    from heuristics.registry import get_rule
    from evolve.eval.evaluator import lowered_program
    from evolve.eval.fastpath.scoring import score_packed
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
    """(4) An end-to-end run of :func:`evolve.search.algorithms.search` (population x generations)."""
    from evolve.search.config import RunConfig, resolve_features
    from evolve.search.algorithms import search
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
        "population": population, "generations": len(gens), "loop": "evolve.search.algorithms.search",
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


def measure_generator(seed: int, tokens: int = 1_000_000) -> dict:
    """The vocab generator's throughput (:func:`evolve.traces.synth.vocab_blocks.measure_throughput`), when available."""
    try:
        from evolve.traces.synth.vocab_blocks import measure_throughput
    except ImportError as exc:
        return {"available": False, "reason": str(exc)}
    return {"available": True, **measure_throughput(tokens, seed)}


__all__ = ["ARITHMETIC", "load_splits", "tiled_columns", "random_programs", "arithmetic_pset", "operon_infix",
           "measure_rule", "measure_gp", "measure_operon", "measure_evolution", "measure_generator"]

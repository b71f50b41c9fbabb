"""The performance harness: ``python benchmark.py perf [--output results/perf.json]``.

One process, one run, five measurements plus the trace generator's speed
(:mod:`evolve.perf.measure`, :mod:`evolve.perf.scaling`):

1. ``standard_rejection`` with the acceptance-quality fitness on the default
   train split (``DATA/train.*`` when it exists, else the default vocab-model
   train split generated in memory, else the independent-features model's):
   tokens per second of one :func:`evolve.eval.evaluator.evaluate` call (best
   of many; median also reported);
2. 1,000 distinct random programs (ramped half-and-half, depth 2-6, the full
   primitive set over the split's features, fixed seed) with the
   acceptance-quality fitness: node evaluations per second (tree nodes x
   tokens / wall time, compiling included) of :class:`evolve.eval.population.PopulationEvaluator`, and of DEAP's
   stock path on the same programs (``deap.gp.compile``, a numpy-vectorised
   call, the same fitness in numpy: :func:`evolve.eval.evaluator.reference_metrics`);
3. when ``pyoperon`` is installed, Operon's ``EvaluateTrees`` on 1,000 random
   programs of the arithmetic subset (add, sub, mul, div) converted to Operon
   trees, same rows and thread count, against our evaluator on the same
   programs (Operon computes float32 predictions only; we compute float64
   thresholds *and* the fitness);
4. an end-to-end evolution (population 1000, 20 generations) with
   :func:`evolve.search.algorithms.search`: generations per second, the share of time
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
seconds / wall seconds / threads). The figures, the performance targets
(:data:`TARGETS`) and whether each is met, the core count, thread count, load
average and versions are printed as a table and written as JSON (atomically)
with at least the keys of :data:`REQUIRED_KEYS`.
"""
from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from evolve.errors import InputError
from evolve.files.atomic import atomic_write_text
from evolve.files.guard import check_output_dir, write_or_rescue
from evolve.eval.evaluator import EvalData
from evolve.kinds.registry import DEFAULT_KIND
from evolve.gp.primitives import FEATURES
from evolve.perf.measure import (
    load_splits, measure_evolution, measure_generator, measure_gp, measure_operon, measure_rule,
)
from evolve.report.output import check_output
from evolve.perf.islands import DEFAULT_LARGE_DIR
from evolve.perf.scaling import DEFAULT_SCALING, RULE_BYTES_PER_TOKEN, measure_scaling
from evolve.perf.timing import environment

REQUIRED_KEYS: tuple[str, ...] = (
    "rule_tokens_per_s", "gp_node_evals_per_s", "deap_node_evals_per_s", "gp_vs_deap", "operon_node_evals_per_s",
    "gp_vs_operon", "evolve_generations_per_s", "scaling", "bytes_per_token", "cores", "generator_tokens_per_s",
)

#: The harness's performance targets (set for a 2-core machine).
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


# --- the whole run ------------------------------------------------------------------------------

def run_perf(data_dir: str | os.PathLike = "data", programs: int = 1000, population: int = 1000,
             generations: int = 20, sizes: tuple[int, ...] = DEFAULT_SCALING, seed: int = 0,
             generator_tokens: int = 1_000_000, progress: Callable[[str], None] | None = None) -> dict:
    """Run all measurements (see the module doc) and return the report dict (keys :data:`REQUIRED_KEYS` and more).

    Raises: InputError naming the parameter for a count below its minimum (programs 1, population 2,
    generations 1) or bad sizes, or for an unreadable dataset.
    """
    for name, value, low in (("programs", programs, 1), ("population", population, 2), ("generations", generations, 1)):
        if value < low:
            raise InputError(f"must be at least {low} (value {value})", param=name)
    if not sizes or min(sizes) < 1:
        raise InputError(f"token counts must be positive integers (value {list(sizes)})", param="sizes")
    say = progress or (lambda _msg: None)
    env = environment()
    threads = env["threads"]
    say("loading data")
    train_t, valid_t, data_desc = load_splits(data_dir)
    train, valid = EvalData.from_traces(train_t), EvalData.from_traces(valid_t)
    features = tuple(f for f in FEATURES if f in train.available and f not in DEFAULT_KIND.excluded_features)
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
    """Each of :data:`TARGETS` with the value reached and whether it is met (None: not measured)."""
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
    row(f"    memory bound (rule's rows, {RULE_BYTES_PER_TOKEN} B/token), tokens/s",
        sc["rule_memory_bound_tokens_per_s"], ".3g")
    row("    resident bytes/token", report["bytes_per_token"], ".1f", "bytes_per_token")
    row("    peak bytes/token while loading", report["peak_bytes_per_token"], ".1f")
    row("generator tokens/s", report["generator_tokens_per_s"], ".3g")
    console = Console(width=100, record=True, file=io.StringIO())  # every printed line fits 100 columns
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


@dataclass(frozen=True)
class PerfOptions:
    """Everything :func:`perf_command` does, as the command line's options of the same names.

    ``data_dir``: the dataset measured (generated in memory without train/valid splits); ``output``:
    the JSON report. The evaluation measurements (:func:`run_perf`): ``programs``, ``population``,
    ``generations``, ``sizes`` (token counts of the scaling), ``seed``, ``generator_tokens``. With
    ``islands`` the scale measurements instead (:func:`evolve.perf.islands.run_scale`:
    ``island_tokens``, ``large_tokens``, ``large_dir``, ``large_only``); with ``harvest_model`` the
    harvester's speed instead (:func:`evolve.perf.harvest.run_harvest_perf`: ``harvest_prompts``,
    ``harvest_texts``, ``harvest_tokens``, ``threads``); with ``backend_curves`` (a .gguf) the forward cost
    over T new tokens on both backends (:mod:`evolve.perf.backend_curves`, ``curve_repeats``); all
    merge their figures into ``output``. With ``costs`` (a path) the cost file of the target ``harvest_model``
    and the drafter (``drafters``: {drafter field: value} of the one drafter option given, as
    :class:`evolve.harvest.config.HarvestConfig` takes it) is measured and written there instead (:mod:`evolve.perf.costs`: ``gamma_max``, ``cost_repeats``, ``threads``,
    ``backend``), or, with ``engine`` (a name of :data:`evolve.perf.engine_loop.ENGINE_LOOPS`), inside that engine's own
    decoding loop (:mod:`evolve.perf.engine_loop`).
    """

    data_dir: str | os.PathLike = "data"
    output: str | os.PathLike = "results/perf.json"
    programs: int = 1000
    population: int = 1000
    generations: int = 20
    sizes: tuple[int, ...] = DEFAULT_SCALING
    seed: int = 0
    generator_tokens: int = 1_000_000
    islands: bool = False
    island_tokens: int = 1_000_000
    large_tokens: int = 100_000_000
    large_dir: str | os.PathLike = DEFAULT_LARGE_DIR
    large_only: bool = False
    harvest_model: str | None = None
    harvest_prompts: str | os.PathLike = "prompts/smollm2_prompts.txt"
    harvest_texts: int = 16
    harvest_tokens: int = 64
    threads: int | None = None
    backend_curves: str | None = None
    curve_repeats: int = 15
    costs: str | os.PathLike | None = None
    backend: str = "torch"
    gamma_max: int = 6
    cost_repeats: int = 7
    drafters: dict[str, Any] = field(default_factory=dict)
    engine: str | None = None


def perf_command(options: PerfOptions = PerfOptions(),
                 progress: Callable[[str], None] | None = None) -> tuple[dict, str]:
    """The whole command: check ``output``, measure (module doc; or the islands or harvest measurements),
    write the report atomically (into a rescue directory, named by the error, when that fails).

    Returns (the report written, its rendering). Raises: InputError naming the parameter of a bad option.
    """
    o = options
    if o.costs is not None:  # a cost file (evolve.perf.costs), not the report
        from evolve.perf.costs import measure_costs, render_costs, write_costs
        from evolve.harvest.config import HarvestConfig

        if o.harvest_model is None:
            raise InputError("a cost file needs the target model", param="target")
        check_output(o.costs, inputs=(o.harvest_model, o.harvest_prompts))
        config = HarvestConfig(target=o.harvest_model, prompts=o.harvest_prompts, **o.drafters,
                               gamma=o.gamma_max, threads=o.threads, backend=o.backend)
        if o.engine is not None:
            from evolve.perf.engine_loop import measure_engine_costs

            doc = measure_engine_costs(config, o.engine, o.gamma_max, o.cost_repeats, progress=progress)
        else:
            doc = measure_costs(config, o.gamma_max, o.cost_repeats, progress=progress)
        write_costs(o.costs, doc)
        return doc, render_costs(doc)
    check_output(o.output, inputs=(o.data_dir,))
    if o.backend_curves is not None:
        from evolve.perf.backend_curves import render_backend_curves, run_backend_curves
        from evolve.perf.islands import merge_into

        figures = run_backend_curves(o.backend_curves, repeats=o.curve_repeats, progress=progress)
        report, text = merge_into(o.output, figures), render_backend_curves(figures)
    elif o.harvest_model is not None:
        from evolve.perf.harvest import render_harvest, run_harvest_perf
        from evolve.perf.islands import merge_into

        figures = run_harvest_perf(o.harvest_model, o.harvest_prompts, o.harvest_texts, o.harvest_tokens,
                                   threads=o.threads, seed=o.seed, progress=progress)
        report, text = merge_into(o.output, figures), render_harvest(figures)
    elif o.islands:
        from evolve.perf.islands import merge_into, render_scale, run_scale

        check_output_dir(o.large_dir, (o.data_dir, o.output), param="large_dir")
        figures = run_scale(o.data_dir, o.population, o.generations, 10, o.seed, o.island_tokens, o.large_tokens,
                            o.large_dir, o.large_only, progress=progress)
        report, text = merge_into(o.output, figures), render_scale(figures)
    else:
        report = run_perf(o.data_dir, o.programs, o.population, o.generations, tuple(o.sizes), o.seed,
                          o.generator_tokens, progress=progress)
        text = render(report)
    write_or_rescue(lambda path: write_report(report, path), o.output, param="output")
    return report, text


__all__ = ["PerfOptions", "perf_command", "run_perf", "render", "write_report", "REQUIRED_KEYS", "TARGETS"]

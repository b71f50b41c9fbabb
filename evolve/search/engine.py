"""The evolution loop: DEAP genetic programming of acceptance rules, and the run directory.

One run (:func:`run`) reads the ``train`` and ``valid`` splits of a dataset (never
``test``), evolves expressions over the primitive set (:mod:`evolve.gp.primitives`)
with fitness on train, and writes a run directory. The loop (:func:`search`):

* population of ramped half-and-half trees (optionally plus standard rejection,
  ``include_standard``); terminals are the run's features and ephemeral constants;
* selection by double tournament (fitness tournament, then a size tournament:
  parsimony pressure against bloat; Luke and Panait 2002), one-point subtree
  crossover and a mutation drawn from subtree, node-replacement, constant,
  shrink and hoist mutation, each guarded by Koza's static depth limit (17);
* ``elitism`` copies of the best individuals so far survive unchanged;
* each generation's new individuals are compiled to postfix programs and
  scored on train in one batched call (:class:`evolve.eval.population.PopulationEvaluator`,
  the same metrics as :func:`evolve.eval.evaluator.evaluate`); scores are cached by
  expression string within the run;
* a hall of fame keeps the best distinct individuals on train (ties: the smaller
  tree); each member is also scored on valid, and the champion is the member with the best validation
  fitness (ties: the smaller tree, then the better train fitness).

Objectives (``fitness``): ``seed`` and ``expected`` (seed 004's fitness, sampled
or expected), ``speed_at_tv`` (expected tokens per target call with draft
length ``gamma``, penalised steeply beyond ``tv_budget`` TV per emitted token;
:mod:`evolve.eval.objectives`) and ``pareto``. The block objectives need
``draft_index`` in the data. A ``pareto`` run replaces the loop above by NSGA-II
(Deb et al. 2002): mating by binary tournaments on Pareto dominance, then
crowding distance (as DEAP's ``selTournamentDCD``, for any population size),
the same variation operators, and survivor selection of the parents plus the
offspring (duplicate expressions last) by ``deap.tools.selNSGA2`` (with DEAP's
O(N log^2 N) non-dominated sort, ``nd="log"``; the quadratic one took most of
the run time at population 1000) over (speed
up, TV per token down, program size down), speed being tokens per call inside
``tv_cap`` (:func:`evolve.eval.objectives.pareto_values`). The final population's
non-dominated front (on train, distinct expressions) is written to
``front.json`` with each member's objectives on train and valid; the champion
is the front member with the best ``speed_at_tv`` (budget ``tv_budget``) on
valid, i.e. the fastest within the budget (ties: the smaller tree).

Seeding Python's ``random`` (DEAP) and numpy with ``seed`` makes a run
deterministic: same config, same data -> same champion.

Inside :func:`graceful_interrupt` (``python -m evolve run`` uses it), Ctrl-C
(SIGINT) finishes the current generation, then the run stops and is written as
usual (``interrupted: true`` in ``run.json`` and in the champion's provenance);
a second Ctrl-C aborts at once without writing.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import operator
import os
import platform
import random
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from data.io import Traces, atomic_write_bytes, atomic_write_text, load_split
from evolve.gp.compiler import Node, compile_nodes, from_tree, parse, to_string, to_tree
from evolve.search.config import BLOCK_FITNESS, RunConfig, resolve_features, to_toml
from evolve.eval.evaluator import EvalData, Metrics, check_gamma, evaluate
from evolve.eval.objectives import DEFAULT_BUDGET, PARETO_OBJECTIVES, PARETO_WEIGHTS, pareto_values, speed_at_tv
from evolve.eval.population import PopulationEvaluator
from evolve.gp.primitives import PRIMITIVE_SET_VERSION, build_pset
from heuristics.baselines import STANDARD as STANDARD_EXPRESSION  # min(1, p/q), added by include_standard

#: Columns of the per-generation logbook CSV, in order.
LOGBOOK_COLUMNS: tuple[str, ...] = (
    "gen", "nevals", "new_programs", "train_max", "train_avg", "train_median", "train_min", "train_std",
    "size_avg", "size_min", "size_max", "depth_max", "best_valid", "best_valid_size", "eval_seconds",
    "evals_per_s", "seconds",
)
#: Fitness given to a program whose objective is not finite (worst for maximised, best negated for minimised).
WORST = 1e9
#: Distinct expressions whose train metrics are remembered (least recently used dropped; results unchanged).
CACHE_LIMIT = 200_000


@dataclass
class Entry:
    """One scored expression: a hall-of-fame member or the champion.

    ``size`` is the node count, ``depth`` the tree height (a terminal has 0).
    """

    expression: str
    nodes: list[Node]
    size: int
    depth: int
    train: Metrics
    valid: Metrics

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (expression, size, depth, train and valid metrics)."""
        return {"expression": self.expression, "size": self.size, "depth": self.depth,
                "train": self.train.to_dict(), "valid": self.valid.to_dict()}


@dataclass
class SearchResult:
    """Outcome of :func:`search`.

    ``logbook`` is one dict per generation (keys :data:`LOGBOOK_COLUMNS`);
    ``hall_of_fame`` is ordered best train fitness first (for a ``pareto``
    run: the front, ascending TV per token on train); ``generations`` is
    the number of generations completed after the initial population;
    ``front`` is the final non-dominated front of a ``pareto`` run (None otherwise).
    """

    config: RunConfig
    features: tuple[str, ...]
    champion: Entry
    hall_of_fame: list[Entry]
    logbook: list[dict[str, float]]
    generations: int
    interrupted: bool
    evaluations: int
    programs: int
    seconds: float
    front: list[Entry] | None = None


def score(metrics: Metrics, fitness: str, budget: float = DEFAULT_BUDGET) -> float:
    """The value a run ranks programs by (on train) and picks its champion by (on valid).

    ``Metrics.fitness`` (``seed``), ``Metrics.expected_fitness`` (``expected``),
    or :func:`evolve.eval.objectives.speed_at_tv` with TV-per-token ``budget``
    (``speed_at_tv``, and ``pareto``, whose champion is the fastest front member
    within the budget). Raises ValueError for a block objective on metrics
    without block metrics.
    """
    if fitness == "acceptance_quality":
        return metrics.fitness
    if fitness == "expected":
        return metrics.expected_fitness
    return speed_at_tv(metrics, budget)


def _deap_types(pareto: bool = False):
    """Fitness and individual classes (module-level, no ``creator`` globals).

    ``pareto``: the three-objective fitness of :data:`evolve.eval.objectives.PARETO_WEIGHTS`.
    """
    global _TYPES
    if _TYPES is None:
        from deap import base, gp

        class FitnessMax(base.Fitness):
            weights = (1.0,)

        class FitnessPareto(base.Fitness):
            weights = PARETO_WEIGHTS

        class Individual(gp.PrimitiveTree):
            def __init__(self, content):
                super().__init__(content)
                self.fitness = FitnessMax()

        class ParetoIndividual(gp.PrimitiveTree):
            def __init__(self, content):
                super().__init__(content)
                self.fitness = FitnessPareto()

        _TYPES = {False: (FitnessMax, Individual), True: (FitnessPareto, ParetoIndividual)}
    return _TYPES[pareto]


_TYPES = None


def _toolbox(cfg: RunConfig, pset):
    from deap import base, gp, tools

    _, Individual = _deap_types(cfg.fitness == "pareto")
    tb = base.Toolbox()
    tb.register("expr", gp.genHalfAndHalf, pset=pset, min_=cfg.init_min_depth, max_=cfg.init_max_depth)
    tb.register("individual", lambda: Individual(tb.expr()))
    tb.register("select", tools.selDoubleTournament, fitness_size=cfg.tournament_size,
                parsimony_size=cfg.parsimony_size, fitness_first=True)
    tb.register("mate", gp.cxOnePoint)
    tb.register("expr_mut", gp.genFull, min_=0, max_=cfg.mutation_max_depth)

    def mutate(ind):
        # subtree 35%, node replacement 20%, one constant 20% (node replacement if the tree has
        # no constant), shrink 10%, hoist 15%
        r = random.random()
        if r < 0.35:
            return gp.mutUniform(ind, expr=tb.expr_mut, pset=pset)
        if r < 0.55:
            return gp.mutNodeReplacement(ind, pset=pset)
        if r < 0.75:
            if any(isinstance(type(node), gp.MetaEphemeral) for node in ind):
                return gp.mutEphemeral(ind, mode="one")
            return gp.mutNodeReplacement(ind, pset=pset)
        if r < 0.85:
            return gp.mutShrink(ind)
        return mut_hoist(ind)

    tb.register("mutate", mutate)
    limit = gp.staticLimit(key=operator.attrgetter("height"), max_value=cfg.max_depth)
    tb.decorate("mate", limit)
    tb.decorate("mutate", limit)
    return tb


class HallOfFame:
    """The best distinct individuals seen so far, ordered by train fitness, then size (smaller first).

    Unlike DEAP's ``tools.HallOfFame`` (fitness only), a smaller tree with the
    same fitness displaces a larger one, so the parsimony pressure of the
    search reaches the hall of fame too. Distinct means a different expression
    string. Members are copies; ``hof[i]`` and iteration follow the order.
    """

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._ranked: list[tuple[tuple[float, int, int], Any]] = []  # ((-fitness, size, arrival), individual)
        self._keys: set[str] = set()
        self._arrivals = 0

    def update(self, population) -> None:
        """Consider every individual of ``population`` (each must have a valid fitness)."""
        import bisect
        import copy

        for ind in population:
            rank = (-ind.fitness.values[0], len(ind))
            if len(self._ranked) >= self.maxsize and rank >= self._ranked[-1][0][:2]:
                continue
            key = str(ind)
            if key in self._keys:
                continue
            self._arrivals += 1
            entry = ((rank[0], rank[1], self._arrivals), copy.deepcopy(ind))
            bisect.insort(self._ranked, entry, key=lambda e: e[0])
            self._keys.add(key)
            if len(self._ranked) > self.maxsize:
                _, dropped = self._ranked.pop()
                self._keys.discard(str(dropped))

    def __len__(self) -> int:
        return len(self._ranked)

    def __getitem__(self, i: int):
        return self._ranked[i][1]

    def __iter__(self):
        return (ind for _, ind in self._ranked)


def mut_hoist(individual):
    """Hoist mutation (Kinnear 1994): the tree is replaced by one of its subtrees, chosen uniformly.

    Lifts a useful building block buried in a larger tree to the root (and
    counters bloat). Returns a tuple of one tree, as DEAP's mutation operators.
    """
    if len(individual) > 1:
        index = random.randrange(1, len(individual))
        subtree = individual[individual.searchSubtree(index)]
        individual[0:len(individual)] = subtree
    return individual,


def dcd_tournament(population, k: int) -> list:
    """``k`` parents by binary tournaments: the dominating one wins, else the larger crowding distance.

    The comparison of DEAP's ``selTournamentDCD`` (Deb et al. 2002), without its
    requirement that the population size be a multiple of 4. Individuals need
    ``fitness.crowding_dist`` (set by ``tools.selNSGA2``); ties go to the first drawn.
    """
    out = []
    for _ in range(k):
        a, b = random.choice(population), random.choice(population)
        if b.fitness.dominates(a.fitness):
            out.append(b)
        elif a.fitness.dominates(b.fitness):
            out.append(a)
        else:
            out.append(b if b.fitness.crowding_dist > a.fitness.crowding_dist else a)
    return out


def distinct_first(individuals) -> list:
    """``individuals`` with the first copy of each expression first, repeated expressions after them.

    Survivor selection then keeps duplicates only when there are fewer distinct
    expressions than places (they would otherwise crowd the front).
    """
    seen, first, rest = set(), [], []
    for ind in individuals:
        key = str(ind)
        (rest if key in seen else first).append(ind)
        seen.add(key)
    return first + rest


def first_front(population) -> list:
    """The non-dominated individuals of ``population``, one per distinct expression, in population order."""
    from deap import tools
    front = tools.sortLogNondominated(population, len(population), first_front_only=True) if population else []
    in_front = {id(ind) for ind in front}
    seen, out = set(), []
    for ind in population:
        if id(ind) in in_front and str(ind) not in seen:
            seen.add(str(ind))
            out.append(ind)
    return out


def _check_block_data(cfg: RunConfig, train: EvalData, valid: EvalData) -> int | None:
    """The draft length of the block objectives (None for seed/expected). Raises InputError for unusable data."""
    if cfg.fitness not in BLOCK_FITNESS:
        return None
    from data.errors import InputError
    for data in (train, valid):
        if data.depth is None:
            raise InputError(f"{data.source}: --fitness {cfg.fitness} needs column 'draft_index' (speculation "
                             "blocks); generate the data with `python generate_data.py` (vocab model)")
        check_gamma(cfg.gamma, data)
    return cfg.gamma


def search(cfg: RunConfig, train: EvalData, valid: EvalData, features: tuple[str, ...],
           on_generation: Callable[[dict[str, float]], None] | None = None,
           should_stop: Callable[[], bool] | None = None) -> SearchResult:
    """Evolve acceptance rules on ``train``; pick the champion on ``valid``.

    Args:
        cfg: run configuration (population, generations, seed, operators, fitness).
        train, valid: prepared splits (:meth:`EvalData.from_traces`).
        features: terminal features; each must be available in both splits.
        on_generation: called after every generation (the initial one is 0)
            with that generation's logbook row. It runs in this thread and the
            state of Python's ``random`` is restored after it, so a callback
            cannot change the search (it must not start threads that draw
            from ``random`` while the search runs).
        should_stop: polled after every generation; True ends the run early
            (the result is complete up to that generation, ``interrupted``).

    Returns: :class:`SearchResult` (with ``front`` for ``pareto``).

    Raises: InputError if a feature is missing from a split, or (block
    objectives) the splits lack ``draft_index`` or ``gamma`` exceeds their
    block length.
    """
    from deap import algorithms, tools

    for data in (train, valid):
        missing = [f for f in features if f not in data.available]
        if missing:
            from data.errors import InputError
            raise InputError(f"{data.source}: feature '{missing[0]}' is not a column of this split")
    gamma = _check_block_data(cfg, train, valid)
    pareto = cfg.fitness == "pareto"
    random.seed(cfg.seed)
    np.random.seed(cfg.seed % 2**32)
    fit = cfg.acceptance_quality_fitness()
    pset = build_pset(features)
    tb = _toolbox(cfg, pset)
    _, Individual = _deap_types(pareto)

    scorer = PopulationEvaluator(train, fit, gamma=gamma, cache_size=CACHE_LIMIT)
    valid_scorer = PopulationEvaluator(valid, fit, gamma=gamma, cache_size=CACHE_LIMIT)
    counters = {"evaluations": 0, "eval_seconds": 0.0, "new_programs": 0}

    def objective(metrics: Metrics) -> float:
        return score(metrics, cfg.fitness, cfg.tv_budget)

    def assign(ind, m: Metrics) -> None:
        if pareto:
            speed, tv, size = pareto_values(m, len(ind), cfg.tv_cap)
            ind.fitness.values = (speed if math.isfinite(speed) else -WORST, tv if math.isfinite(tv) else WORST,
                                  size)
        else:
            value = objective(m)
            floor = -WORST if cfg.fitness in BLOCK_FITNESS else 0.0
            ind.fitness.values = (value if math.isfinite(value) else floor,)

    def evaluate_all(individuals) -> int:
        """Score individuals without a valid fitness on train (one batched call; cached by expression)."""
        todo = [ind for ind in individuals if not ind.fitness.valid]
        before = scorer.stats.scored
        t0 = time.perf_counter()
        for ind, m in zip(todo, scorer.evaluate(todo)):
            assign(ind, m)
        counters["eval_seconds"] = time.perf_counter() - t0
        counters["evaluations"] += len(todo)
        counters["new_programs"] = scorer.stats.scored - before
        return len(todo)

    def both_metrics(individuals) -> list[tuple[Metrics, Metrics]]:
        """(train, valid) metrics of each individual (batched, cached by expression)."""
        return list(zip(scorer.evaluate(individuals), valid_scorer.evaluate(individuals)))

    hof = HallOfFame(cfg.hall_of_fame)

    def candidates(population) -> list:
        """Where the champion is picked from: the hall of fame, or (pareto) the current front."""
        return first_front(population) if pareto else list(hof)

    def best_valid(population) -> tuple[float, int]:
        best = (-math.inf, 0)
        members = candidates(population)
        for member, (_, va) in zip(members, both_metrics(members)):
            v = objective(va)
            if v > best[0] or (v == best[0] and len(member) < best[1]):
                best = (v, len(member))
        return best

    logbook: list[dict[str, float]] = []

    def record(gen: int, population, nevals: int, t_start: float) -> dict[str, float]:
        fits = np.array([ind.fitness.values[0] for ind in population])
        sizes = np.array([len(ind) for ind in population])
        bv, bv_size = best_valid(population)
        eval_s = counters["eval_seconds"]
        row = {
            "gen": gen, "nevals": nevals, "new_programs": counters["new_programs"],
            "train_max": float(fits.max()), "train_avg": float(fits.mean()),
            "train_median": float(np.median(fits)), "train_min": float(fits.min()),
            "train_std": float(fits.std()), "size_avg": float(sizes.mean()), "size_min": int(sizes.min()),
            "size_max": int(sizes.max()), "depth_max": int(max(ind.height for ind in population)),
            "best_valid": float(bv), "best_valid_size": int(bv_size), "eval_seconds": eval_s,
            "evals_per_s": counters["new_programs"] / eval_s if eval_s > 0 else 0.0,
            "seconds": time.perf_counter() - t_start,
        }
        logbook.append(row)
        if on_generation is not None:
            state = random.getstate()  # a callback (e.g. a progress bar) must not change the search
            on_generation(row)
            random.setstate(state)
        return row

    t_run = time.perf_counter()
    population = [tb.individual() for _ in range(cfg.population)]
    if cfg.include_standard:
        population[0] = Individual(to_tree(parse(STANDARD_EXPRESSION), pset))
    nevals = evaluate_all(population)
    if pareto:
        population = tools.selNSGA2(population, cfg.population, nd="log")  # assigns the crowding distances
    else:
        hof.update(population)
    record(0, population, nevals, t_run)

    interrupted = False
    completed = 0
    for gen in range(1, cfg.generations + 1):
        if should_stop is not None:
            state = random.getstate()
            stop_now = should_stop()
            random.setstate(state)
            if stop_now:
                interrupted = True
                break
        t_gen = time.perf_counter()
        if pareto:
            parents = dcd_tournament(population, cfg.population)
            offspring = algorithms.varAnd(parents, tb, cfg.crossover_prob, cfg.mutation_prob)
            nevals = evaluate_all(offspring)
            population = tools.selNSGA2(distinct_first(population + offspring), cfg.population, nd="log")
        else:
            n_elite = min(cfg.elitism, len(hof))
            offspring = tb.select(population, cfg.population - n_elite)
            offspring = algorithms.varAnd(offspring, tb, cfg.crossover_prob, cfg.mutation_prob)
            nevals = evaluate_all(offspring)
            offspring.extend(tb.clone(hof[i]) for i in range(n_elite))
            hof.update(offspring)
            population[:] = offspring
        completed = gen
        record(gen, population, nevals, t_gen)

    members = candidates(population)
    entries = []
    for member, (tr, va) in zip(members, both_metrics(members)):
        nodes = from_tree(member)
        entries.append(Entry(to_string(nodes), nodes, len(member), member.height, tr, va))
    if pareto:  # the front, ascending TV per token on train (then more tokens, then smaller)
        entries.sort(key=lambda e: (e.train.tv_per_token, -e.train.tokens_per_call, e.size, e.expression))
    order = sorted(range(len(entries)),
                   key=lambda i: (-objective(entries[i].valid), entries[i].size, -objective(entries[i].train), i))
    return SearchResult(cfg, tuple(features), entries[order[0]], entries, logbook, completed, interrupted,
                        counters["evaluations"], scorer.stats.scored, time.perf_counter() - t_run,
                        front=entries if pareto else None)


# --- interrupt handling ----------------------------------------------------------------------

@contextmanager
def graceful_interrupt() -> Iterator[Callable[[], bool]]:
    """Within the block the first SIGINT only sets a flag (yielded as a poll function).

    A second SIGINT raises KeyboardInterrupt as usual. Outside the main thread
    (where signal handlers cannot be set) the poll always returns False.
    """
    state = {"stop": False}
    if threading.current_thread() is not threading.main_thread():
        yield lambda: state["stop"]
        return

    def handler(signum, frame):
        if state["stop"]:
            raise KeyboardInterrupt
        state["stop"] = True

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: state["stop"]
    finally:
        signal.signal(signal.SIGINT, previous)


# --- a whole run -----------------------------------------------------------------------------

@dataclass
class RunInfo:
    """What :func:`run` wrote: the run directory and the search result."""

    run_dir: Path
    result: SearchResult
    data: dict[str, Any] = field(default_factory=dict)


def load_search_data(cfg: RunConfig) -> tuple[Traces, Traces]:
    """Load and validate the train and valid splits of ``cfg.data`` (the test split is never read).

    Raises: InputError for a missing or invalid dataset (the message says how to create one).
    """
    return load_split(cfg.data, "train"), load_split(cfg.data, "valid")


def run(cfg: RunConfig, progress: Callable[[dict[str, float]], None] | None = None,
        stop: Callable[[], bool] | None = None) -> RunInfo:
    """Load the data, evolve, and write a new run directory under ``cfg.out``.

    Args:
        cfg: resolved configuration (:func:`evolve.search.config.resolve`).
        progress: called with each generation's logbook row.
        stop: polled after each generation (e.g. from :func:`graceful_interrupt`).

    Returns: :class:`RunInfo` with the run directory.

    Raises: InputError for bad data or an unusable output directory; nothing
    is written in that case.
    """
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        from data.errors import InputError
        raise InputError(f"option '--out': {out} exists and is not a directory")
    train_t, valid_t = load_search_data(cfg)
    train, valid = EvalData.from_traces(train_t), EvalData.from_traces(valid_t)
    available = tuple(f for f in train.available if f in valid.available)
    features = resolve_features(cfg, available, cfg.data)
    started = datetime.now(timezone.utc)
    result = search(cfg, train, valid, features, on_generation=progress, should_stop=stop)
    data_info = dataset_info(cfg.data, train_t, valid_t)
    run_dir = write_run(result, out, data_info, started)
    return RunInfo(run_dir, result, data_info)


def dataset_info(data_dir: str, train: Traces, valid: Traces) -> dict[str, Any]:
    """Provenance of the data a run read: directory, generator metadata, tokens and file digests."""
    meta = train.metadata or {}
    info: dict[str, Any] = {"dir": str(data_dir)}
    for key in ("generator", "generator_version", "seed", "schema_version", "format"):
        if key in meta:
            info[key] = meta[key]
    if "config" in meta:
        info["generator_config"] = meta["config"]
    info["tokens"] = {"train": train.n, "valid": valid.n}
    info["sha256"] = {t.split: _sha256(t.source) for t in (train, valid)}
    return info


def _sha256(path: str) -> str | None:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def versions() -> dict[str, str]:
    """Versions of Python and the packages that determine a run's outcome."""
    from importlib import metadata
    out = {"python": platform.python_version(), "primitive_set": str(PRIMITIVE_SET_VERSION)}
    for pkg in ("specdec-evolve", "deap", "numpy", "numba"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def run_dir_name(cfg: RunConfig, started: datetime) -> str:
    """``run-YYYYmmdd-HHMMSS-seedN`` (UTC)."""
    return f"run-{started.strftime('%Y%m%d-%H%M%S')}-seed{cfg.seed}"


def write_run(result: SearchResult, out: Path, data_info: dict[str, Any], started: datetime) -> Path:
    """Write a run directory under ``out`` and return its path.

    Files: ``config.toml`` (resolved config), ``run.json`` (summary, data
    provenance, versions), ``logbook.csv``, ``hall_of_fame.json``,
    ``champion.json`` (champion file format, :mod:`heuristics.champions`),
    ``champion.py``, ``fitness.png`` and, for a ``pareto`` run, ``front.json``
    (:func:`front_document`). Every file is written atomically into a
    hidden staging directory that is renamed into place at the end, so a run
    directory is either complete or absent. The name is unique: a suffix
    ``-2``, ``-3``... is added when needed.
    """
    from heuristics.champions import Champion, champion_python, champion_json

    cfg = result.config
    out.mkdir(parents=True, exist_ok=True)
    base = run_dir_name(cfg, started)
    stage = Path(tempfile.mkdtemp(dir=out, prefix=f".{base}.tmp-"))
    created = started.isoformat(timespec="seconds")
    provenance = {
        "run_dir": None, "seed": cfg.seed, "data_dir": str(cfg.data), "data": data_info,
        "config": cfg.to_dict(), "created": created, "versions": versions(),
        "generations_completed": result.generations, "interrupted": result.interrupted,
    }
    try:
        final = _unique(out, base)
        provenance["run_dir"] = str(final)
        champ = Champion(
            name="champion", expression=result.champion.expression,
            description=f"evolved on {data_info.get('dir')} ({cfg.fitness} fitness{_objective_text(cfg)}, "
                        f"seed {cfg.seed})",
            features=result.features, fitness=cfg.fitness,
            metrics={"train": result.champion.train.to_dict(), "valid": result.champion.valid.to_dict()},
            provenance=provenance)
        atomic_write_text(stage / "config.toml", to_toml(cfg))
        summary = {
            "run_dir": str(final), "created": created, "seed": cfg.seed, "fitness": cfg.fitness,
            "features": list(result.features), "generations_completed": result.generations,
            "interrupted": result.interrupted, "evaluations": result.evaluations,
            "programs_scored": result.programs, "seconds": round(result.seconds, 3),
            "champion": result.champion.to_dict(), "data": data_info, "versions": versions(),
            "config": cfg.to_dict(),
        }
        if result.front is not None:
            summary["front_size"] = len(result.front)
        atomic_write_text(stage / "run.json", json.dumps(summary, indent=2) + "\n")
        atomic_write_text(stage / "logbook.csv", logbook_csv(result.logbook))
        atomic_write_text(stage / "hall_of_fame.json",
                          json.dumps([e.to_dict() for e in result.hall_of_fame], indent=2) + "\n")
        atomic_write_text(stage / "champion.json", champion_json(champ))
        atomic_write_text(stage / "champion.py", champion_python(champ))
        atomic_write_bytes(stage / "fitness.png", fitness_plot(result.logbook, cfg.fitness))
        if result.front is not None:
            atomic_write_text(stage / "front.json", json.dumps(front_document(result), indent=2) + "\n")
        while True:
            try:
                os.rename(stage, final)
                break
            except OSError:
                if not final.exists():
                    raise
                final = _unique(out, base)  # another run took the name meanwhile
                _retarget(stage, final)
    except BaseException:
        _rmtree(stage)
        raise
    return final


def _objective_text(cfg: RunConfig) -> str:
    """``, gamma 5, TV budget 0.01`` for block objectives (empty otherwise)."""
    if cfg.fitness not in BLOCK_FITNESS:
        return ""
    text = f", gamma {cfg.gamma}, TV budget {cfg.tv_budget:g}"
    return text + (f", TV cap {cfg.tv_cap:g}" if cfg.fitness == "pareto" else "")


def front_document(result: SearchResult) -> dict[str, Any]:
    """The ``front.json`` object of a ``pareto`` run.

    Keys: ``objectives`` (names and directions), ``gamma``, ``tv_cap``,
    ``tv_budget``, ``champion`` (its expression), ``front``: one object per
    member, ascending TV per token on train, with ``expression``, ``size``,
    ``depth``, ``objectives`` {``train``, ``valid``: {tokens_per_call,
    tv_per_token, size}}, ``speed_at_tv`` {``train``, ``valid``} (with
    ``tv_budget``) and the full ``train`` and ``valid`` metrics.
    """
    cfg = result.config
    members = []
    for e in result.front or []:
        objectives = {split: {"tokens_per_call": m.tokens_per_call, "tv_per_token": m.tv_per_token,
                              "size": e.size} for split, m in (("train", e.train), ("valid", e.valid))}
        members.append({"expression": e.expression, "size": e.size, "depth": e.depth, "objectives": objectives,
                        "speed_at_tv": {"train": speed_at_tv(e.train, cfg.tv_budget),
                                        "valid": speed_at_tv(e.valid, cfg.tv_budget)},
                        "train": e.train.to_dict(), "valid": e.valid.to_dict()})
    directions = dict(zip(PARETO_OBJECTIVES, ("max", "min", "min")))
    return {"objectives": [{"name": k, "direction": v} for k, v in directions.items()], "gamma": cfg.gamma,
            "tv_cap": cfg.tv_cap, "tv_budget": cfg.tv_budget, "champion": result.champion.expression,
            "front": members}


def _unique(out: Path, base: str) -> Path:
    candidate = out / base
    k = 2
    while candidate.exists():
        candidate = out / f"{base}-{k}"
        k += 1
    return candidate


def _retarget(stage: Path, final: Path) -> None:
    """Rewrite the run directory path recorded in the staged files."""
    for name in ("run.json", "champion.json"):
        doc = json.loads((stage / name).read_text())
        if name == "run.json":
            doc["run_dir"] = str(final)
        else:
            doc["provenance"]["run_dir"] = str(final)
        atomic_write_text(stage / name, json.dumps(doc, indent=2) + "\n")


def _rmtree(path: Path) -> None:
    import shutil
    shutil.rmtree(path, ignore_errors=True)


def logbook_csv(logbook: list[dict[str, float]]) -> str:
    """The logbook as CSV text (header :data:`LOGBOOK_COLUMNS`)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(LOGBOOK_COLUMNS), lineterminator="\n")
    w.writeheader()
    for row in logbook:
        w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    return buf.getvalue()


def fitness_plot(logbook: list[dict[str, float]], fitness: str) -> bytes:
    """PNG (bytes) of best/mean/median train fitness, best validation fitness and mean size per generation."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    gens = [r["gen"] for r in logbook]
    fig = Figure(figsize=(7, 5.5), dpi=100)
    ax, ax2 = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    ax.plot(gens, [r["train_max"] for r in logbook], label="best (train)", color="tab:blue")
    ax.plot(gens, [r["train_median"] for r in logbook], label="median (train)", color="tab:blue", alpha=0.4)
    ax.plot(gens, [r["best_valid"] for r in logbook], label="hall of fame best (valid)", color="tab:orange",
            linestyle="--")
    ax.set_ylabel(f"{fitness} fitness")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax2.plot(gens, [r["size_avg"] for r in logbook], color="tab:gray")
    ax2.set_ylabel("mean size")
    ax2.set_xlabel("generation")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


__all__ = ["Entry", "SearchResult", "RunInfo", "search", "run", "write_run", "graceful_interrupt", "score",
           "front_document", "dcd_tournament", "first_front", "distinct_first",
           "load_search_data", "dataset_info", "versions", "logbook_csv", "fitness_plot", "LOGBOOK_COLUMNS",
           "STANDARD_EXPRESSION"]

"""The search: DEAP genetic programming of acceptance rules on train, champion chosen on valid.

:func:`search` draws an initial population of ramped half-and-half trees over
the primitive set (:mod:`evolve.gp.primitives`; terminals are the run's
features and ephemeral constants), with ``warm_start`` (the default) the known
rules of :mod:`evolve.search.warm_start` as its first members, and runs one of
two algorithms:

* :func:`generational`: the single-objective generational loop with elitism
  and a hall of fame, for the fitness kinds ``acceptance_quality`` (the
  acceptance-quality fitness: acceptance rate times quality score, with the
  quality floor 0.95), ``expected`` (its noise-free expected form) and
  ``speed_at_tv`` (expected tokens per target call with draft length
  ``gamma``, penalised steeply beyond ``tv_budget`` TV per emitted token;
  :mod:`evolve.eval.objectives`);
* :func:`nsga2`: NSGA-II (Deb et al. 2002) for the fitness kind ``pareto``, over
  (speed up, TV per token down, program size down), speed being tokens per
  call inside ``tv_cap`` (:func:`evolve.eval.objectives.pareto_values`).

The block objectives (``speed_at_tv``, ``pareto``) need ``draft_index`` in the
data. Each generation's new individuals are compiled to postfix programs and
scored on train in one batched call
(:class:`evolve.eval.population.PopulationEvaluator`, the same metrics as
:func:`evolve.eval.evaluator.evaluate`); scores are cached by expression string
within the run. The variation and selection operators are in
:mod:`evolve.search.operators`.

The champion is the candidate (hall-of-fame member, or member of the final
non-dominated front for ``pareto``) with the best validation score
(:func:`score`; for ``pareto`` the best ``speed_at_tv`` with budget
``tv_budget``); ties go to the smaller tree, then the better train score. With
the warm start the seeded rules are candidates too, a seeded rule wins ties,
and under the two fitness kinds with a quality floor the choice avoids
candidates on the floor (:mod:`evolve.search.champion`).

Seeding Python's ``random`` (DEAP) and numpy with the random seed ``cfg.seed``
makes a search deterministic: same config, same data -> same champion.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from deap import tools
from deap.algorithms import varAnd

from data.errors import InputError
from evolve.eval.evaluator import EvalData, Metrics, check_gamma
from evolve.eval.objectives import DEFAULT_BUDGET, pareto_values, speed_at_tv
from evolve.eval.population import PopulationEvaluator
from evolve.gp.compiler import Node, from_tree, to_string
from evolve.gp.primitives import build_pset
from evolve.search.champion import Candidate, choose
from evolve.search.config import BLOCK_FITNESS, RunConfig
from evolve.search.individuals import HallOfFame, deap_types
from evolve.search.operators import dcd_tournament, distinct_first, first_front, toolbox
from evolve.search.warm_start import WarmStart, choose_seeds, seed_individuals

#: Columns of the per-generation logbook, in order.
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
    ``front`` is the final non-dominated front of a ``pareto`` run (None otherwise);
    ``warm_start`` the seeded and skipped rules (None when ``warm_start`` is off);
    ``champion_source`` is ``"evolved"``, or ``"seeded:NAME"`` when the champion
    is the seeded rule NAME (evolution found nothing better on valid);
    ``seeded`` holds the seeded rules' entries, in seed order.
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
    warm_start: WarmStart | None = None
    champion_source: str = "evolved"
    seeded: list[Entry] = field(default_factory=list)


def score(metrics: Metrics, fitness: str, budget: float = DEFAULT_BUDGET) -> float:
    """The value a run ranks programs by (on train) and picks its champion by (on valid).

    ``Metrics.fitness`` for the fitness kind ``acceptance_quality``,
    ``Metrics.expected_fitness`` for ``expected``, otherwise
    :func:`evolve.eval.objectives.speed_at_tv` with TV-per-token ``budget``
    (``speed_at_tv``, and ``pareto``, whose champion is the fastest front
    member within the budget). Raises ValueError for a block objective on
    metrics without block metrics.
    """
    if fitness == "acceptance_quality":
        return metrics.fitness
    if fitness == "expected":
        return metrics.expected_fitness
    return speed_at_tv(metrics, budget)


def _check_block_data(cfg: RunConfig, train: EvalData, valid: EvalData) -> int | None:
    """The draft length of the block objectives (None for the others). Raises InputError for unusable data."""
    if cfg.fitness not in BLOCK_FITNESS:
        return None
    for data in (train, valid):
        if data.depth is None:
            raise InputError(f"{data.source}: fitness '{cfg.fitness}' needs column 'draft_index' (speculation "
                             "blocks); generate the data with `python generate_data.py` (vocab model)")
        check_gamma(cfg.gamma, data)
    return cfg.gamma


class _SearchState:
    """Scoring, logbook and callbacks of one search, shared by :func:`generational` and :func:`nsga2`."""

    def __init__(self, cfg: RunConfig, train: EvalData, valid: EvalData, gamma: int | None,
                 on_generation: Callable[[dict[str, float]], None] | None,
                 should_stop: Callable[[], bool] | None):
        fit = cfg.acceptance_quality_fitness()
        self.cfg = cfg
        self.scorer = PopulationEvaluator(train, fit, gamma=gamma, cache_size=CACHE_LIMIT)
        self.valid_scorer = PopulationEvaluator(valid, fit, gamma=gamma, cache_size=CACHE_LIMIT)
        self.on_generation, self.should_stop = on_generation, should_stop
        self.evaluations, self.eval_seconds, self.new_programs = 0, 0.0, 0
        self.logbook: list[dict[str, float]] = []
        self.generations, self.interrupted = 0, False

    def objective(self, metrics: Metrics) -> float:
        return score(metrics, self.cfg.fitness, self.cfg.tv_budget)

    def assign(self, ind, m: Metrics) -> None:
        """Set ``ind.fitness.values`` from its train metrics (non-finite values become :data:`WORST`)."""
        cfg = self.cfg
        if cfg.fitness == "pareto":
            speed, tv, size = pareto_values(m, len(ind), cfg.tv_cap)
            ind.fitness.values = (speed if math.isfinite(speed) else -WORST, tv if math.isfinite(tv) else WORST,
                                  size)
        else:
            value = self.objective(m)
            floor = -WORST if cfg.fitness in BLOCK_FITNESS else 0.0
            ind.fitness.values = (value if math.isfinite(value) else floor,)

    def evaluate(self, individuals) -> int:
        """Score individuals without a valid fitness on train (one batched call; cached by expression)."""
        todo = [ind for ind in individuals if not ind.fitness.valid]
        before = self.scorer.stats.scored
        t0 = time.perf_counter()
        for ind, m in zip(todo, self.scorer.evaluate(todo)):
            self.assign(ind, m)
        self.eval_seconds = time.perf_counter() - t0
        self.evaluations += len(todo)
        self.new_programs = self.scorer.stats.scored - before
        return len(todo)

    def both_metrics(self, individuals) -> list[tuple[Metrics, Metrics]]:
        """(train, valid) metrics of each individual (batched, cached by expression)."""
        return list(zip(self.scorer.evaluate(individuals), self.valid_scorer.evaluate(individuals)))

    def best_valid(self, candidates) -> tuple[float, int]:
        """(best validation score, size of the smallest candidate reaching it)."""
        best = (-math.inf, 0)
        for member, (_, va) in zip(candidates, self.both_metrics(candidates)):
            v = self.objective(va)
            if v > best[0] or (v == best[0] and len(member) < best[1]):
                best = (v, len(member))
        return best

    def record(self, gen: int, population, candidates, nevals: int, t_start: float) -> None:
        """Append generation ``gen``'s logbook row and call ``on_generation`` (``random``'s state kept)."""
        fits = np.array([ind.fitness.values[0] for ind in population])
        sizes = np.array([len(ind) for ind in population])
        bv, bv_size = self.best_valid(candidates)
        eval_s = self.eval_seconds
        row = {
            "gen": gen, "nevals": nevals, "new_programs": self.new_programs,
            "train_max": float(fits.max()), "train_avg": float(fits.mean()),
            "train_median": float(np.median(fits)), "train_min": float(fits.min()),
            "train_std": float(fits.std()), "size_avg": float(sizes.mean()), "size_min": int(sizes.min()),
            "size_max": int(sizes.max()), "depth_max": int(max(ind.height for ind in population)),
            "best_valid": float(bv), "best_valid_size": int(bv_size), "eval_seconds": eval_s,
            "evals_per_s": self.new_programs / eval_s if eval_s > 0 else 0.0,
            "seconds": time.perf_counter() - t_start,
        }
        self.logbook.append(row)
        self.generations = gen
        if self.on_generation is not None:
            state = random.getstate()  # a callback (e.g. a progress bar) must not change the search
            self.on_generation(row)
            random.setstate(state)

    def stop_requested(self) -> bool:
        """Poll ``should_stop`` (``random``'s state kept); True marks the search interrupted."""
        if self.should_stop is None:
            return False
        state = random.getstate()
        stop = self.should_stop()
        random.setstate(state)
        self.interrupted = self.interrupted or bool(stop)
        return bool(stop)


def generational(state: _SearchState, tb, population: list, started: float) -> list:
    """Single-objective generational GP with elitism; returns the hall of fame (best first).

    Pseudocode (N = ``population``, e = ``elitism``, H = hall of fame of
    ``hall_of_fame`` members, :class:`evolve.search.individuals.HallOfFame`)::

        evaluate P on train; H.update(P); record generation 0
        for g in 1 .. generations, until a stop is requested:
            O <- double_tournament(P, N - e)           # tb.select
            O <- varAnd(O, crossover_prob, mutation_prob)
            evaluate the changed members of O
            O <- O + copies of the e best members of H
            H.update(O); P <- O; record generation g
        return the members of H

    ``started`` is the ``time.perf_counter()`` at which the initial population was drawn.
    """
    cfg = state.cfg
    hof = HallOfFame(cfg.hall_of_fame)
    nevals = state.evaluate(population)
    hof.update(population)
    state.record(0, population, list(hof), nevals, started)
    for gen in range(1, cfg.generations + 1):
        if state.stop_requested():
            break
        t_gen = time.perf_counter()
        n_elite = min(cfg.elitism, len(hof))
        offspring = tb.select(population, cfg.population - n_elite)
        offspring = varAnd(offspring, tb, cfg.crossover_prob, cfg.mutation_prob)
        nevals = state.evaluate(offspring)
        offspring.extend(tb.clone(hof[i]) for i in range(n_elite))
        hof.update(offspring)
        population = offspring
        state.record(gen, population, list(hof), nevals, t_gen)
    return list(hof)


def nsga2(state: _SearchState, tb, population: list, started: float) -> list:
    """NSGA-II (Deb et al. 2002, IEEE Trans. Evol. Comput. 6(2)); returns the final front.

    Pseudocode (N = ``population``)::

        evaluate P on train (objectives: pareto_values)
        P <- selNSGA2(P, N)                  # non-dominated sort + crowding distance
        record generation 0
        for g in 1 .. generations, until a stop is requested:
            M <- N binary tournaments on P     # dominance, then crowding distance
            O <- varAnd(M, crossover_prob, mutation_prob)
            evaluate the changed members of O
            P <- selNSGA2(distinct_first(P + O), N)
            record generation g
        return the first front of P (one per distinct expression)

    Mating is :func:`evolve.search.operators.dcd_tournament`; survivor
    selection is ``deap.tools.selNSGA2`` with DEAP's O(N log^(M-1) N)
    non-dominated sort (``nd="log"``), and duplicate expressions go last so
    they survive only when distinct ones run out. ``started`` is the
    ``time.perf_counter()`` at which the initial population was drawn.
    """
    cfg = state.cfg
    nevals = state.evaluate(population)
    population = tools.selNSGA2(population, cfg.population, nd="log")  # assigns the crowding distances
    state.record(0, population, first_front(population), nevals, started)
    for gen in range(1, cfg.generations + 1):
        if state.stop_requested():
            break
        t_gen = time.perf_counter()
        parents = dcd_tournament(population, cfg.population)
        offspring = varAnd(parents, tb, cfg.crossover_prob, cfg.mutation_prob)
        nevals = state.evaluate(offspring)
        population = tools.selNSGA2(distinct_first(population + offspring), cfg.population, nd="log")
        state.record(gen, population, first_front(population), nevals, t_gen)
    return first_front(population)


def search(cfg: RunConfig, train: EvalData, valid: EvalData, features: tuple[str, ...],
           on_generation: Callable[[dict[str, float]], None] | None = None,
           should_stop: Callable[[], bool] | None = None) -> SearchResult:
    """Evolve acceptance rules on ``train``; pick the champion on ``valid``.

    Args:
        cfg: run configuration (population, generations, random seed, operators, fitness).
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
    for data in (train, valid):
        missing = [f for f in features if f not in data.available]
        if missing:
            raise InputError(f"{data.source}: feature '{missing[0]}' is not a column of this split")
    gamma = _check_block_data(cfg, train, valid)
    pareto = cfg.fitness == "pareto"
    random.seed(cfg.seed)
    np.random.seed(cfg.seed % 2**32)
    pset = build_pset(features)
    tb = toolbox(cfg, pset)
    state = _SearchState(cfg, train, valid, gamma, on_generation, should_stop)

    started = time.perf_counter()
    population = [tb.individual() for _ in range(cfg.population)]
    warm, seeds = None, []
    if cfg.warm_start:
        warm = choose_seeds(cfg, tuple(features), train, gamma, state.objective)
        seeds = seed_individuals(warm, pset, deap_types(pareto)[1])
        population[:len(seeds)] = seeds
    members = (nsga2 if pareto else generational)(state, tb, population, started)

    entries = _entries(state, members)
    if pareto:  # the front, ascending TV per token on train (then more tokens, then smaller)
        entries.sort(key=lambda e: (e.train.tv_per_token, -e.train.tokens_per_call, e.size, e.expression))
    seeded = _entries(state, seeds)
    if warm is None:
        names: list[str | None] = [None] * len(entries)
    else:
        names = [warm.name_of(e.expression) for e in entries] + [s.name for s in warm.seeds]
    pool = entries + seeded
    candidates = [Candidate(e.train, e.valid, e.size, name) for e, name in zip(pool, names)]
    best = choose(candidates, state.objective, cfg.fitness, cfg.acceptance_quality_fitness(), guarded=warm is not None)
    source = f"seeded:{names[best]}" if names[best] is not None else "evolved"
    return SearchResult(cfg, tuple(features), pool[best], entries, state.logbook, state.generations,
                        state.interrupted, state.evaluations, state.scorer.stats.scored,
                        time.perf_counter() - started, front=entries if pareto else None, warm_start=warm,
                        champion_source=source, seeded=seeded)


def _entries(state: _SearchState, members) -> list[Entry]:
    """:class:`Entry` of each tree in ``members`` (train and valid metrics batched and cached)."""
    entries = []
    for member, (tr, va) in zip(members, state.both_metrics(members)):
        nodes = from_tree(member)
        entries.append(Entry(to_string(nodes), nodes, len(member), member.height, tr, va))
    return entries


__all__ = ["Entry", "SearchResult", "LOGBOOK_COLUMNS", "WORST", "CACHE_LIMIT", "score",
           "generational", "nsga2", "search"]

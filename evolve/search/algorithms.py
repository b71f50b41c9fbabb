"""The search: DEAP genetic programming of acceptance rules on train, champion chosen on valid.

:func:`search` draws an initial population of ramped half-and-half trees over
the primitive set (:mod:`evolve.gp.primitives`; terminals are the run's
features and ephemeral constants), with ``warm_start`` (the default) the known
rules of :mod:`evolve.search.warm_start` as its first members, and runs one of
two algorithms, one generation at a time:

* :func:`generational`: the single-objective generational loop with elitism
  and a hall of fame, for objectives with one value (:mod:`evolve.eval.objectives`:
  ``acceptance_quality``, the acceptance-quality fitness: acceptance rate times
  quality score, with the quality floor 0.95; ``expected``, its noise-free
  expected form; ``speed_at_tv``, expected tokens per target call with draft
  length ``gamma``, penalised steeply beyond ``tv_budget`` TV per emitted token);
* :func:`nsga2`: NSGA-II (Deb et al. 2002) for objectives with several values
  (:attr:`evolve.eval.objectives.Objective.multi`), such as ``pareto`` over
  (speed up, TV per token down, program size down), speed being tokens per
  call inside ``tv_cap`` (:func:`evolve.eval.objectives.pareto_values`).

The block objectives (``speed_at_tv``, ``pareto``) need ``draft_index`` in the
data. Each generation's new individuals are compiled to postfix programs and
scored on train in one batched call
(:class:`evolve.eval.population.PopulationEvaluator`, the same metrics as
:func:`evolve.eval.evaluator.evaluate`); scores are cached by expression string
within the run. The variation and selection operators are in
:mod:`evolve.search.operators`.

The generations are grouped in epochs of ``migration_interval`` generations;
after each epoch :func:`search` hands a :class:`evolve.search.checkpoint.Snapshot`
(population, hall of fame, logbook, random states, evaluator caches) to its
``on_epoch`` callback, and ``resume=`` continues from such a snapshot with
exactly the champion and logbook of the uninterrupted run (timing columns
aside). With ``islands`` > 1 the epochs run on Dask workers
(:mod:`evolve.search.islands`).

The champion is the candidate (hall-of-fame member, or member of the final
non-dominated front for ``pareto``) with the best validation score
(:func:`score`; for ``pareto`` the best ``speed_at_tv`` with budget
``tv_budget``); ties go to the smaller tree, then the better train score. With
the warm start the seeded rules are candidates too, a seeded rule wins ties,
and under the objectives with a quality floor the choice avoids
candidates on the floor (:mod:`evolve.search.champion`,
:func:`evolve.search.result.finish`).

Seeding Python's ``random`` (DEAP) and numpy with the random seed ``cfg.seed``
makes a search deterministic: same config, same data -> same champion.
"""
from __future__ import annotations

import random
import time
from typing import Callable

import numpy as np
from deap import tools
from deap.algorithms import varAnd

from evolve.errors import InputError
from evolve.eval.evaluator import EvalData
from evolve.gp.primitives import build_pset
from evolve.search.checkpoint import Island, Snapshot
from evolve.search.config import RunConfig
from evolve.search.individuals import HallOfFame, deap_types
from evolve.search.operators import dcd_tournament, distinct_first, first_front, toolbox
from evolve.search.result import SearchResult, finish
from evolve.search.state import (
    SearchState, check_block_data,
)
from evolve.search.warm_start import check_resumed_warm, initial_seeds
from evolve.search.warm_start import WarmStart, seed_individuals

#: The shared state of :func:`generational` and :func:`nsga2` (the name it had before it moved).
_SearchState = SearchState


def initial_population(cfg: RunConfig, tb, pset, train: EvalData, gamma: int | None,
                       objective: Callable, features: tuple[str, ...]) -> tuple[list, list, WarmStart | None]:
    """(population, seeds, warm start): ``cfg.population`` random trees, the seeded rules as their first members.

    Draws the random trees from Python's ``random`` (seed it first), then, with
    ``cfg.warm_start``, chooses the seeds on ``train``
    (:func:`evolve.search.warm_start.choose_seeds`); without it the seeds are
    empty and the warm start None.
    """
    population = [tb.individual() for _ in range(cfg.population)]
    if not cfg.warm_start:
        return population, [], None
    warm = initial_seeds(cfg, tuple(features), train, gamma, objective)
    seeds = seed_individuals(warm, pset, deap_types(cfg.objective_spec)[1])
    population[:len(seeds)] = seeds
    return population, seeds, warm


def begin(state: SearchState, population: list, started: float) -> Island:
    """Score the initial population on train and record generation 0; returns the island at generation 0.

    Single objective: the hall of fame (``hall_of_fame`` members,
    :class:`evolve.search.individuals.HallOfFame`) takes the population.
    ``pareto``: the population is ordered by ``deap.tools.selNSGA2``, which
    assigns the crowding distances. ``started`` is the ``time.perf_counter()``
    at which the population was drawn.
    """
    cfg = state.cfg
    nevals = state.evaluate(population)
    if cfg.objective_spec.multi:
        population = tools.selNSGA2(population, cfg.population, nd="log")
        hof = None
    else:
        hof = HallOfFame(cfg.hall_of_fame)
        hof.update(population)
    island = Island(population, hof, 0)
    state.record(0, population, candidates(island), nevals, started)
    return island


def candidates(island: Island) -> list:
    """The champion candidates of an island: its hall of fame (best first), or its first front (``pareto``)."""
    return list(island.hof) if island.hof is not None else first_front(island.population)


def generational(state: SearchState, tb, population: list, hof: HallOfFame, gen: int) -> list:
    """Generation ``gen`` of single-objective generational GP with elitism; returns the new population.

    Pseudocode (N = ``population``, e = ``elitism``, H = hall of fame of
    ``hall_of_fame`` members, :class:`evolve.search.individuals.HallOfFame`)::

        (generation 0, begin(): evaluate P on train; H.update(P))
        O <- double_tournament(P, N - e)           # tb.select
        O <- varAnd(O, crossover_prob, mutation_prob)
        evaluate the changed members of O
        O <- O + copies of the e best members of H
        H.update(O); P <- O; record generation gen
    """
    cfg = state.cfg
    t_gen = time.perf_counter()
    n_elite = min(cfg.elitism, len(hof))
    offspring = tb.select(population, cfg.population - n_elite)
    offspring = varAnd(offspring, tb, cfg.crossover_prob, cfg.mutation_prob)
    nevals = state.evaluate(offspring)
    offspring.extend(tb.clone(hof[i]) for i in range(n_elite))
    hof.update(offspring)
    state.record(gen, offspring, list(hof), nevals, t_gen)
    return offspring


def nsga2(state: SearchState, tb, population: list, gen: int) -> list:
    """Generation ``gen`` of NSGA-II (Deb et al. 2002, IEEE Trans. Evol. Comput. 6(2)); returns the new population.

    Pseudocode (N = ``population``)::

        (generation 0, begin(): evaluate P on train (objectives: pareto_values); P <- selNSGA2(P, N))
        M <- N binary tournaments on P     # dominance, then crowding distance
        O <- varAnd(M, crossover_prob, mutation_prob)
        evaluate the changed members of O
        P <- selNSGA2(distinct_first(P + O), N)
        record generation gen

    Mating is :func:`evolve.search.operators.dcd_tournament`; survivor
    selection is ``deap.tools.selNSGA2`` with DEAP's O(N log^(M-1) N)
    non-dominated sort (``nd="log"``), and duplicate expressions go last so
    they survive only when distinct ones run out. The final front is
    :func:`candidates` of the island.
    """
    cfg = state.cfg
    t_gen = time.perf_counter()
    parents = dcd_tournament(population, cfg.population)
    offspring = varAnd(parents, tb, cfg.crossover_prob, cfg.mutation_prob)
    nevals = state.evaluate(offspring)
    population = tools.selNSGA2(distinct_first(population + offspring), cfg.population, nd="log")
    state.record(gen, population, first_front(population), nevals, t_gen)
    return population


def advance(state: SearchState, tb, island: Island, stop: int) -> Island:
    """Evolve ``island`` through generation ``stop`` (in place), polling ``should_stop`` before each generation.

    Uses (and leaves) the global state of Python's ``random``; returns the island.
    """
    while island.generation < stop:
        if state.stop_requested():
            break
        gen = island.generation + 1
        if island.hof is None:
            island.population = nsga2(state, tb, island.population, gen)
        else:
            island.population = generational(state, tb, island.population, island.hof, gen)
        island.generation = gen
    return island


def epoch_end(generation: int, interval: int, generations: int) -> int:
    """The last generation of the epoch after ``generation``: the next multiple of ``interval``, at most ``generations``."""
    return min((generation // interval + 1) * interval, generations)


def search(cfg: RunConfig, train: EvalData, valid: EvalData, features: tuple[str, ...],
           on_generation: Callable[[dict[str, float]], None] | None = None,
           should_stop: Callable[[], bool] | None = None,
           on_epoch: Callable[[Snapshot], None] | None = None, resume: Snapshot | None = None) -> SearchResult:
    """Evolve acceptance rules on ``train`` (one population); pick the champion on ``valid``.

    Args:
        cfg: run configuration (population, generations, random seed, operators, objective).
        train, valid: prepared splits (:meth:`EvalData.from_traces`).
        features: terminal features; each must be available in both splits.
        on_generation: called after every generation (the initial one is 0)
            with that generation's logbook row. It runs in this thread and the
            state of Python's ``random`` is restored after it, so a callback
            cannot change the search (it must not start threads that draw
            from ``random`` while the search runs).
        should_stop: polled before every generation; True ends the run early
            (the result is complete up to that generation, ``interrupted``).
        on_epoch: called with a :class:`Snapshot` after every
            ``migration_interval`` generations, after the last one and after
            an interruption (a checkpoint writer,
            :func:`evolve.search.checkpoint.write_checkpoint`). The snapshot
            shares the live population: serialise it during the call.
        resume: a snapshot taken by ``on_epoch`` of a run with the same
            configuration and data: the search continues from it.

    Returns: :class:`SearchResult` (with ``front`` for ``pareto``).

    Raises: InputError if a feature is missing from a split, or (block
    objectives) the splits lack ``draft_index`` or ``gamma`` exceeds their
    block length.
    """
    check_features(train, valid, [f for f in features if f not in cfg.program_kind.derived_features])
    gamma = check_block_data(cfg, train, valid)
    pset = build_pset(features)
    tb = toolbox(cfg, pset)
    state = SearchState(cfg, train, valid, gamma, on_generation, should_stop)
    started = time.perf_counter()
    if resume is None:
        random.seed(cfg.seed)
        np.random.seed(cfg.seed % 2**32)
        population, seeds, warm = initial_population(cfg, tb, pset, train, gamma, state.objective, features)
        island = begin(state, population, started)
        before = 0.0
    else:
        island, warm, before = resume.islands[0], resume.warm, resume.seconds
        seeds = seed_individuals(warm, pset, deap_types(cfg.objective_spec)[1]) if warm is not None else []
        state.logbook, state.generations = list(resume.logbook), resume.generation
        state.evaluations = resume.evaluations
        state.check_resumed(island.population, island.hof, resume.caches, resume.source)
        if warm is not None:
            check_resumed_warm(warm, cfg, tuple(features), train, gamma, state.objective, resume.source)
        if resume.caches is not None:
            state.restore_cache(resume.caches)
        island.restore_rng()
        for row in state.logbook:
            state.notify(row)
    while island.generation < cfg.generations and not state.interrupted:
        advance(state, tb, island, epoch_end(island.generation, cfg.migration_interval, cfg.generations))
        if on_epoch is not None:
            island.keep_rng()
            on_epoch(Snapshot(island.generation, [island], list(state.logbook), state.evaluations,
                              state.scorer.stats.scored, before + time.perf_counter() - started, warm,
                              state.interrupted, state.cache_state()))
    return finish(state, features, candidates(island), seeds, warm, state.evaluations, state.scorer.stats.scored,
                  before + time.perf_counter() - started)


def check_features(train: EvalData, valid: EvalData, features: tuple[str, ...]) -> None:
    """Raise InputError naming the split and the first of ``features`` that is not one of its columns."""
    for data in (train, valid):
        missing = [f for f in features if f not in data.available]
        if missing:
            raise InputError(f"{data.source}: feature '{missing[0]}' is not a column of this split")


__all__ = ["initial_population", "begin", "candidates", "generational", "nsga2", "advance", "epoch_end", "search",
           "check_features"]

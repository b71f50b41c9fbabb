"""The island model: ``islands`` populations evolved as Dask tasks, with ring migration between epochs.

An island search (``islands`` > 1) keeps ``islands`` populations of
``population`` individuals each. Per epoch every island evolves
``migration_interval`` generations as one Dask task
(:func:`evolve.search.island_task.run_epoch`: island state in, island state
out, the dataset read once per worker); the client then

1. appends the epoch's logbook rows, one per generation over all islands
   (:func:`combine_rows`: fitness and size statistics of the union of the
   populations, evaluations and new programs summed, the best validation
   score of all islands, the wall time of the slowest island);
2. migrates (ring, Whitaker et al.'s island model as DEAP's ``migRing``): island
   i sends copies of its ``migrants`` best individuals to island i + 1
   (mod ``islands``), where they replace the worst (:func:`migrate`); not
   after the last epoch;
3. hands a :class:`evolve.search.checkpoint.Snapshot` to ``on_epoch`` (the
   run directory's checkpoint).

Best and worst: single objective, by train fitness, then size (smaller is
better), then position; ``pareto``, by NSGA-II rank (non-dominated front,
then crowding distance: ``deap.tools.selNSGA2``), and the receiving
population is re-ranked by NSGA-II after the exchange.

Every island's random seed derives from the run's
(:func:`evolve.search.island_task.island_seed`), the warm start's seeds go into
every island, and migration draws nothing at random, so the same
configuration gives the same champion whatever the number of workers and
whichever worker ran which task. The champion is chosen on valid among the
hall-of-fame members of all islands (``pareto``: the non-dominated front of
all islands' final populations) and the seeded rules
(:func:`evolve.search.result.finish`).
"""
from __future__ import annotations

import copy
import math
import os
import pickle
import time
import uuid
from typing import Callable

import numpy as np
from deap import tools

from evolve.cluster import ClusterOptions, dask_client
from evolve.eval.evaluator import EvalData
from evolve.gp.primitives import build_pset
from evolve.search.algorithms import check_features, epoch_end
from evolve.search.checkpoint import Island, Snapshot, held_pins
from evolve.search.config import RunConfig
from evolve.search.individuals import HallOfFame, deap_types
from evolve.search.island_task import EpochJob, EpochOutcome, run_epoch
from evolve.search.operators import first_front
from evolve.search.result import SearchResult, finish
from evolve.search.state import SearchState, check_block_data, population_row
from evolve.search.warm_start import check_resumed_warm, initial_seeds
from evolve.search.warm_start import seed_individuals

#: Times Dask re-runs a task that raised (a task lost with its worker is re-run regardless).
TASK_RETRIES = 1


def combine_rows(outcomes: list[EpochOutcome]) -> list[dict[str, float]]:
    """The run's logbook rows of one epoch: per generation, one row over all islands (see the module doc)."""
    rows = []
    for k, first in enumerate(outcomes[0].rows):
        per = [o.rows[k] for o in outcomes]
        fits = np.concatenate([o.fits[k] for o in outcomes])
        sizes = np.concatenate([o.sizes[k] for o in outcomes])
        best = max(((r["best_valid"], -r["best_valid_size"]) for r in per), default=(-math.inf, 0))
        eval_s = sum(r["eval_seconds"] for r in per)
        row = population_row(first["gen"], fits, sizes, max(r["depth_max"] for r in per),
                             sum(r["nevals"] for r in per), sum(r["new_programs"] for r in per),
                             (best[0], -best[1]), eval_s, max(r["seconds"] for r in per))
        rows.append(row)
    return rows


def _ranked(population: list, pareto: bool) -> list[int]:
    """Positions of ``population`` from best to worst (see the module doc)."""
    if pareto:
        order = {id(ind): k for k, ind in enumerate(tools.selNSGA2(list(population), len(population), nd="log"))}
        return sorted(range(len(population)), key=lambda j: order[id(population[j])])
    return sorted(range(len(population)),
                  key=lambda j: (-population[j].fitness.values[0], len(population[j]), j))


def migrate(islands: list[Island], migrants: int, pareto: bool) -> None:
    """Ring migration in place: island i's ``migrants`` best (copies) replace island i+1's worst.

    Receivers keep their order; their hall of fame takes the newcomers; a
    ``pareto`` receiver is re-ranked (``selNSGA2``, which sets the crowding
    distances the next mating tournaments read).
    """
    if migrants <= 0 or len(islands) < 2:
        return
    outgoing = []
    for island in islands:
        pop = [copy.deepcopy(ind) for ind in island.population]  # ranking must not touch crowding distances
        outgoing.append([pop[j] for j in _ranked(pop, pareto)[:migrants]])
    for k, island in enumerate(islands):
        incoming = outgoing[k - 1]
        worst = sorted(_ranked(island.population, pareto)[-len(incoming):])
        for j, ind in zip(worst, incoming):
            island.population[j] = ind
        if island.hof is not None:
            island.hof.update(incoming)
        if pareto:
            island.population = tools.selNSGA2(island.population, len(island.population), nd="log")


def members(islands: list[Island], cfg: RunConfig) -> list:
    """Champion candidates of all islands: their hall-of-fame members merged (distinct, best train first),
    or for ``pareto`` the first front of the union of their populations."""
    if cfg.objective_spec.multi:
        return first_front([ind for island in islands for ind in island.population])
    merged = HallOfFame(cfg.hall_of_fame * len(islands))
    for island in islands:
        merged.update(list(island.hof))
    return list(merged)


def island_search(cfg: RunConfig, train: EvalData, valid: EvalData, features: tuple[str, ...],
                  data_sha256: dict[str, str | None], cluster: ClusterOptions | None = None,
                  on_generation: Callable[[dict[str, float]], None] | None = None,
                  should_stop: Callable[[], bool] | None = None,
                  on_epoch: Callable[[Snapshot], None] | None = None,
                  resume: Snapshot | None = None) -> SearchResult:
    """Evolve ``cfg.islands`` populations on Dask workers; pick the champion on ``valid`` (see the module doc).

    Args:
        cfg, train, valid, features, on_generation, on_epoch, resume: as
            :func:`evolve.search.algorithms.search` (``train`` and ``valid``
            are the client's copies: the warm start and the champion choice
            use them; the workers read the dataset directory ``cfg.data``
            themselves, so it must be readable by every worker).
        data_sha256: {"train", "valid"} SHA-256 of the split files (workers check their copies).
        cluster: where the tasks run (None: an embedded LocalCluster).
        should_stop: polled between epochs; True ends the run after the current epoch.

    Returns: the :class:`evolve.search.result.SearchResult`, whose
    ``epoch_timings`` hold one dict per epoch of this call: ``generations``
    (of the epoch), ``seconds`` (client wall time from submitting the tasks
    to having all results), ``task_seconds`` (the slowest task's own wall
    time), ``task_seconds_total`` (all tasks') and ``client_seconds``
    (combining the rows, migration and the ``on_epoch`` callback).

    Raises: InputError as :func:`evolve.search.algorithms.search`, when a
    worker's copy of the data differs, or when the cluster cannot be reached.
    """
    check_features(train, valid, [f for f in features if f not in cfg.program_kind.derived_features])
    gamma = check_block_data(cfg, train, valid)
    pareto = cfg.objective_spec.multi
    pset = build_pset(features)
    state = SearchState(cfg, train, valid, gamma, on_generation, should_stop)
    started = time.perf_counter()
    if resume is None:
        warm = initial_seeds(cfg, tuple(features), train, gamma, state.objective) if cfg.warm_start else None
        islands: list[Island | None] = [None] * cfg.islands
        generation, before, evaluations, programs = None, 0.0, 0, 0
    else:
        warm, islands, generation, before = resume.warm, list(resume.islands), resume.generation, resume.seconds
        evaluations, programs = resume.evaluations, resume.programs
        state.logbook, state.generations = list(resume.logbook), resume.generation
        for k, island in enumerate(islands):  # every island's individuals re-scored
            state.check_resumed(island.population, island.hof, None, resume.source, k)
        if warm is not None:
            check_resumed_warm(warm, cfg, tuple(features), train, gamma, state.objective, resume.source)
        for row in state.logbook:
            state.notify(row)
    seeds = seed_individuals(warm, pset, deap_types(cfg.objective_spec)[1]) if warm is not None else []
    token = uuid.uuid4().hex[:8]
    inputs = held_pins(cfg)  # the digests the run recorded at its start (or resume), for the workers
    timings: list[dict[str, float]] = []
    with dask_client(cluster or ClusterOptions(), cfg.islands) as (client, threads):
        while generation is None or generation < cfg.generations:
            if generation is not None and state.stop_requested():
                break
            stop = epoch_end(generation if generation is not None else 0, cfg.migration_interval, cfg.generations)
            if generation is None and cfg.generations == 0:
                stop = 0
            t_submit = time.perf_counter()
            jobs = [EpochJob(cfg.to_dict(), tuple(features), os.path.abspath(cfg.data), data_sha256, i, stop,
                             b"" if island is None else pickle.dumps(island, protocol=pickle.HIGHEST_PROTOCOL),
                             warm, threads, inputs) for i, island in enumerate(islands)]
            futures = [client.submit(run_epoch, job, key=f"island-{job.island}-gen-{stop}-{token}",
                                     retries=TASK_RETRIES, pure=False) for job in jobs]
            outcomes: list[EpochOutcome] = client.gather(futures)
            t_gathered = time.perf_counter()
            first = generation
            for row in combine_rows(outcomes):
                state.logbook.append(row)
                state.notify(row)
            state.generations = generation = stop
            evaluations += sum(o.evaluations for o in outcomes)
            programs += sum(o.programs for o in outcomes)
            islands = [pickle.loads(o.state) for o in outcomes]
            if stop < cfg.generations:
                migrate(islands, cfg.migrants, pareto)
            if on_epoch is not None:
                on_epoch(Snapshot(stop, islands, list(state.logbook), evaluations, programs,
                                  before + time.perf_counter() - started, warm))
            timings.append({"generations": stop - (first if first is not None else -1),
                            "seconds": t_gathered - t_submit, "task_seconds": max(o.seconds for o in outcomes),
                            "task_seconds_total": sum(o.seconds for o in outcomes),
                            "client_seconds": time.perf_counter() - t_gathered})
    result = finish(state, features, members(islands, cfg), seeds, warm, evaluations, programs,
                    before + time.perf_counter() - started)
    result.epoch_timings = timings
    return result


__all__ = ["TASK_RETRIES", "combine_rows", "migrate", "members", "island_search"]

"""What one search process keeps while it evolves: scoring, the logbook, the callbacks.

:class:`SearchState` is shared by the generational loop and NSGA-II
(:mod:`evolve.search.algorithms`), by the island tasks run on Dask workers
(:mod:`evolve.search.island_task`) and by the client that picks the champion
(:mod:`evolve.search.result`). It scores individuals on train in batched,
cached calls (:class:`evolve.eval.population.PopulationEvaluator`), turns
train metrics into DEAP fitness values and appends one logbook row per
generation (:func:`population_row`).

:func:`score` is the value a run ranks programs by (train) and chooses its
champion by (valid).
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import replace
from typing import Callable

import numpy as np

from evolve.errors import InputError
from evolve.eval.evaluator import EvalData, Metrics, check_gamma
from evolve.eval.population import EvaluationStats
from evolve.kinds.base import KindContext
from evolve.search.config import RunConfig

#: Columns of the per-generation logbook, in order.
LOGBOOK_COLUMNS: tuple[str, ...] = (
    "gen", "nevals", "new_programs", "train_max", "train_avg", "train_median", "train_min", "train_std",
    "size_avg", "size_min", "size_max", "depth_max", "best_valid", "best_valid_size", "eval_seconds",
    "evals_per_s", "seconds",
)
#: Logbook columns that measure time (they differ between two runs that are otherwise identical).
TIMING_COLUMNS: tuple[str, ...] = ("eval_seconds", "evals_per_s", "seconds")
#: Distinct expressions whose train metrics are remembered (least recently used dropped; results unchanged).
CACHE_LIMIT = 200_000
#: Remembered programs of a resumed search re-scored afresh and compared with what its checkpoint says
#: (:meth:`SearchState.check_resumed`), besides those of the individuals held (all re-scored): this many per
#: evaluator cache.
RESCORED = 3
#: Relative tolerance of that comparison for floats (the scoring is deterministic: they agree exactly).
RESCORE_RTOL = 1e-9


def score(metrics: Metrics, cfg: RunConfig) -> float:
    """The value a run ranks programs by (on train) and picks its champion by (on valid): the run's
    objective's :attr:`evolve.eval.objectives.Objective.score` (for ``pareto``, ``speed_at_tv`` within
    ``tv_budget``). Raises ValueError for a block objective on metrics without block metrics.
    """
    return cfg.objective_spec.score(metrics, cfg)


def check_block_data(cfg: RunConfig, train: EvalData, valid: EvalData) -> int | None:
    """The draft length of the block objectives (None for the others, and for a kind whose scoring does not read
    it: a tree shape is bounded by its harvested trees). Raises InputError for unusable data."""
    if not cfg.objective_spec.needs_blocks or not cfg.program_kind.reads_gamma:
        return None
    for data in (train, valid):
        if data.depth is None:
            raise InputError(f"{data.source}: objective '{cfg.objective}' needs column 'draft_index' (speculation "
                             "blocks); generate the data with `python generate_data.py` (vocab model)")
        check_gamma(cfg.gamma, data)
    return cfg.gamma


def population_row(gen: int, fits: np.ndarray, sizes: np.ndarray, depth_max: int, nevals: int, new_programs: int,
                   best_valid: tuple[float, int], eval_seconds: float, seconds: float) -> dict[str, float]:
    """One logbook row (keys :data:`LOGBOOK_COLUMNS`) of generation ``gen``.

    Args:
        fits: float64 (N,), first fitness value of every individual (of all
            islands of an island run).
        sizes: int (N,), node counts.
        depth_max: tallest tree (a terminal has height 0).
        nevals, new_programs: individuals scored, and distinct programs run
            (the others came from the evaluator's cache).
        best_valid: (best validation score of the candidates, smallest size reaching it).
        eval_seconds, seconds: time spent scoring, and in the whole generation.
    """
    return {
        "gen": gen, "nevals": nevals, "new_programs": new_programs,
        "train_max": float(fits.max()), "train_avg": float(fits.mean()),
        "train_median": float(np.median(fits)), "train_min": float(fits.min()),
        "train_std": float(fits.std()), "size_avg": float(sizes.mean()), "size_min": int(sizes.min()),
        "size_max": int(sizes.max()), "depth_max": int(depth_max),
        "best_valid": float(best_valid[0]), "best_valid_size": int(best_valid[1]), "eval_seconds": eval_seconds,
        "evals_per_s": new_programs / eval_seconds if eval_seconds > 0 else 0.0,
        "seconds": seconds,
    }


class SearchState:
    """Scoring, logbook and callbacks of one search (or of one island task).

    Args:
        cfg: the run configuration.
        train, valid: prepared splits.
        gamma: draft length of the block metrics (None unless the objective needs them).
        on_generation: called with every logbook row (``random``'s state kept).
        should_stop: polled before every generation (``random``'s state kept).
        cache_size: distinct expressions whose metrics each evaluator remembers.
    """

    def __init__(self, cfg: RunConfig, train: EvalData, valid: EvalData, gamma: int | None,
                 on_generation: Callable[[dict[str, float]], None] | None = None,
                 should_stop: Callable[[], bool] | None = None, cache_size: int = CACHE_LIMIT):
        fit = cfg.acceptance_quality_fitness()
        self.cfg = cfg
        self.objective_spec = cfg.objective_spec
        context = KindContext(fitness=fit, gamma=gamma, costs=cfg.cost_model, settings=cfg.settings)
        make = cfg.program_kind.hook("population", "python -m evolve run", f"kind '{cfg.evolve}'")
        self.scorer = make(replace(context, data=train, cache_size=cache_size))
        self.valid_scorer = make(replace(context, data=valid, cache_size=cache_size))
        self._scoring = (make, {"train": train, "valid": valid}, context)
        self.on_generation, self.should_stop = on_generation, should_stop
        self.evaluations, self.eval_seconds, self.new_programs = 0, 0.0, 0
        self.logbook: list[dict[str, float]] = []
        self.generations, self.interrupted = 0, False

    @property
    def valid(self) -> EvalData:
        """The valid split the champion is chosen on."""
        return self._scoring[1]["valid"]

    def scorer_of(self, data: EvalData):
        """A population scorer of ``data`` with the run's settings and no cache (the champion guard's resamples,
        :mod:`evolve.search.guard`)."""
        make, _, context = self._scoring
        return make(replace(context, data=data))

    def objective(self, metrics: Metrics) -> float:
        """The run's score of ``metrics`` (:func:`score`)."""
        return self.objective_spec.score(metrics, self.cfg)

    def assign(self, ind, m: Metrics) -> None:
        """Set ``ind.fitness.values`` from its train metrics (the objective's
        :meth:`evolve.eval.objectives.Objective.fitness_values`; non-finite values become its worst)."""
        ind.fitness.values = self.objective_spec.fitness_values(m, len(ind), self.cfg)

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

    def record(self, gen: int, population, candidates, nevals: int, t_start: float) -> dict[str, float]:
        """Append generation ``gen``'s logbook row and call ``on_generation`` (``random``'s state kept).

        Returns the row.
        """
        fits = np.array([ind.fitness.values[0] for ind in population])
        sizes = np.array([len(ind) for ind in population])
        row = population_row(gen, fits, sizes, max(ind.height for ind in population), nevals, self.new_programs,
                             self.best_valid(candidates), self.eval_seconds, time.perf_counter() - t_start)
        self.logbook.append(row)
        self.generations = gen
        self.notify(row)
        return row

    def notify(self, row: dict[str, float]) -> None:
        """Call ``on_generation`` with ``row``, keeping the state of Python's ``random``."""
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

    def cache_state(self) -> dict:
        """The evaluators' remembered metrics and running totals (picklable; see :meth:`restore_cache`).

        A resumed search that restores them counts ``new_programs`` exactly as
        the uninterrupted one (the metrics themselves never depend on the cache).
        """
        return {name: (list(s._cache.items()), s.stats)  # noqa: SLF001 - the cache is state of the search
                for name, s in (("train", self.scorer), ("valid", self.valid_scorer))}

    def check_resumed(self, population, hof, caches: dict | None, where: str, island: int = 0) -> None:
        """Re-derive on resume what a checkpoint says of the programs it holds, and refuse it when they differ: every
        individual of ``population`` and of the hall of fame ``hof`` (None: none) is re-scored afresh (with
        evaluators that remember nothing) against its fitness values; of each evaluator cache (``caches``, as
        :meth:`cache_state`) the remembered programs of those individuals and :data:`RESCORED` others (the first,
        middle and last in least-recently-used order) are re-scored against their remembered metrics, every other
        remembered metric is bounded by what it can physically be and the evaluator's per-row counts re-derived
        (:func:`evolve.search.snapshot_sense.check_remembered`, :func:`~evolve.search.snapshot_sense.check_stats_rows`).
        Floats agree within :data:`RESCORE_RTOL` (the scoring is deterministic), the others exactly. ``island``
        names the island in messages. The states of ``random`` and ``numpy.random`` are kept.

        Raises: InputError naming ``where`` (the checkpoint file), the field, the program and both values.
        """
        from evolve.search.snapshot_sense import FITNESS_LIMIT, check_remembered, check_stats_rows

        make, splits, context = self._scoring
        kept = random.getstate(), np.random.get_state()
        prefix = f"islands[{island}]"
        try:
            people = [(f"{prefix}.population[{k}]", ind) for k, ind in enumerate(population)]
            people += [(f"{prefix}.hof.members[{k}][1]", ind) for k, ind in enumerate(hof or [])]
            people = [(field, ind) for field, ind in people if ind.fitness.valid]
            fresh = {"train": make(replace(context, data=splits["train"]))}
            scored = fresh["train"].evaluate([ind for _, ind in people])
            for (field, ind), m in zip(people, scored):
                want = self.objective_spec.fitness_values(m, len(ind), self.cfg)
                if not all(_close(a, b) for a, b in zip(ind.fitness.values, want)):
                    raise InputError(f"{where}: the checkpoint's field '{field}.wvalues' gives fitness "
                                     f"{list(ind.fitness.values)} to {str(ind)[:80]!r}, but it scores {list(want)}")
            held = {str(ind): m for (_, ind), m in zip(people, scored)}  # their train metrics, scored once
            for name, (items, stats) in (caches or {}).items():
                picks = sorted({0, len(items) // 2, len(items) - 1} if items else set())[:RESCORED]
                picks = sorted(set(picks) | {k for k, (key, _) in enumerate(items) if key in held})
                scorer = fresh.get(name) or make(replace(context, data=splits[name]))
                known = held if name == "train" else {}
                todo = [k for k in picks if items[k][0] not in known]
                got = dict(zip(todo, scorer.evaluate([items[k][0] for k in todo])))
                for k in picks:
                    m = got[k] if k in got else known[items[k][0]]
                    _compare_metrics(items[k][1], m, f"caches.{name}.keys[{k}]", items[k][0], where)
                if scorer.stats.nodes:  # the rows this evaluator reads, from its own count
                    rows = scorer.stats.node_evaluations // scorer.stats.nodes
                    check_remembered(items, f"caches.{name}", rows, context.costs, FITNESS_LIMIT, _Refusal(where),
                                     max(1.0, context.fitness.below_floor_scale))
                    check_stats_rows(stats, f"caches.{name}.stats", rows, _Refusal(where))
        finally:
            random.setstate(kept[0])
            np.random.set_state(kept[1])

    def restore_cache(self, saved: dict) -> None:
        """Put back what :meth:`cache_state` returned (same least-recently-used order)."""
        for name, scorer in (("train", self.scorer), ("valid", self.valid_scorer)):
            items, stats = saved[name]
            scorer._cache.clear()  # noqa: SLF001
            scorer._cache.update(items)  # noqa: SLF001
            scorer.stats = stats if isinstance(stats, EvaluationStats) else EvaluationStats(**stats)


class _Refusal:
    """The refusals of :mod:`evolve.search.snapshot_sense` on resume: one line naming the checkpoint and the field."""

    def __init__(self, where: str):
        self.where = where

    def fail(self, field: str, text: str) -> InputError:
        return InputError(f"{self.where}: the checkpoint's field '{field}' {text}")


def _close(a, b) -> bool:
    """Whether a remembered value ``a`` is the re-scored ``b``: equal, both NaN, or floats within RESCORE_RTOL."""
    if a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b):
        return True
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool) and math.isfinite(a) and math.isfinite(b):
        return abs(a - b) <= RESCORE_RTOL * max(1.0, abs(a), abs(b))
    return False


def _compare_metrics(saved, fresh, field: str, program: str, where: str) -> None:
    """Raise InputError when remembered metrics ``saved`` are not the re-scored ``fresh`` (field by field)."""
    for name in saved.__dataclass_fields__:
        a, b = getattr(saved, name), getattr(fresh, name)
        if not _close(a, b):
            raise InputError(f"{where}: the checkpoint's field '{field}' remembers {name} = {a!r} for "
                             f"{program[:80]!r}, but it scores {b!r} (re-scored on resume)")


__all__ = ["LOGBOOK_COLUMNS", "TIMING_COLUMNS", "CACHE_LIMIT", "RESCORED", "RESCORE_RTOL", "score", "check_block_data",
           "population_row", "SearchState"]

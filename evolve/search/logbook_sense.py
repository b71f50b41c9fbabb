"""Sense checks of a checkpoint's logbook (:mod:`evolve.search.snapshot`): every row what a generation can produce,
and the last row a description of the populations the checkpoint holds.

A row is recorded from the population of its generation (:func:`evolve.search.state.population_row`; for an
island run from all islands' populations, :func:`evolve.search.islands.combine_rows`), so a re-signed checkpoint
whose logbook disagrees with its populations is refused, one line naming the field. ``read`` is the snapshot
reader of :mod:`evolve.search.snapshot` (its ``fail(field, text)`` makes the refusal, ``fitness(value, field)``
checks a fitness value); ``snapshot`` a :class:`evolve.search.snapshot.Snapshot` being rebuilt.
"""
from __future__ import annotations

import math
from typing import Any

from evolve.search.config import RunConfig
from evolve.search.snapshot_sense import max_tree_nodes

#: Logbook columns that hold counts (integers >= 0).
COUNT_COLUMNS = ("gen", "nevals", "new_programs", "size_min", "size_max", "depth_max", "best_valid_size")
#: Logbook columns that are statistics of the population's fitness values.
FITNESS_COLUMNS = ("train_max", "train_avg", "train_median", "train_min", "train_std")


def check_row(row: dict[str, Any], field: str, cfg: RunConfig, read: Any) -> None:
    """One logbook row within what a generation can produce (:func:`evolve.search.state.population_row`)."""
    for c in COUNT_COLUMNS:
        v = row[c]
        if not (math.isfinite(v) and v == int(v) and v >= 0):
            raise read.fail(f"{field}.{c}", f"is {v!r}, expected an integer >= 0")
    for c in FITNESS_COLUMNS:
        read.fitness(row[c], f"{field}.{c}")
    if not (row["best_valid"] == -math.inf and row["best_valid_size"] == 0):  # -inf, 0: no candidate scored finitely
        read.fitness(row["best_valid"], f"{field}.best_valid")
    for c in ("eval_seconds", "evals_per_s", "seconds"):
        if not (math.isfinite(row[c]) and row[c] >= 0):
            raise read.fail(f"{field}.{c}", f"is {row[c]!r}, expected a finite number >= 0")
    everyone = cfg.population * cfg.islands
    if row["nevals"] > everyone:
        raise read.fail(f"{field}.nevals", f"is {row['nevals']}, more than the {everyone} individuals of the run")
    lo, hi = row["train_min"], row["train_max"]
    slack = 1e-9 * max(1.0, abs(lo), abs(hi))
    for c in ("train_avg", "train_median"):
        if not lo - slack <= row[c] <= hi + slack:
            raise read.fail(f"{field}.{c}", f"is {row[c]!r}, outside [train_min, train_max] = [{lo!r}, {hi!r}]")
    if not 0 <= row["train_std"] <= hi - lo + slack:
        raise read.fail(f"{field}.train_std", f"is {row['train_std']!r}, outside [0, train_max - train_min]")
    if row["size_min"] < 1:
        raise read.fail(f"{field}.size_min", f"is {row['size_min']!r}, but a program has at least 1 node")
    if not row["size_min"] <= row["size_avg"] <= row["size_max"]:
        raise read.fail(f"{field}.size_avg", f"is {row['size_avg']!r}; needs 1 <= size_min ({row['size_min']}) <= "
                                             f"size_avg <= size_max ({row['size_max']})")
    most = max_tree_nodes(cfg)
    for c in ("size_max", "best_valid_size"):
        if row[c] > most:
            raise read.fail(f"{field}.{c}", f"is {row[c]!r}, more than the {most} nodes a tree of the run can have")
    if row["depth_max"] >= row["size_max"]:
        raise read.fail(f"{field}.depth_max", f"is {row['depth_max']}, but the largest tree has {row['size_max']} "
                                              f"nodes (a tree of n nodes is at most n - 1 deep)")


def _check_last_row(snapshot: Any, read: Any) -> None:
    """A one-population run's last logbook row describes the population the checkpoint holds (the row is
    recorded from it: :meth:`evolve.search.state.SearchState.record`)."""
    _check_evaluations(snapshot, read)
    _check_row_describes(snapshot.islands[0].population, snapshot, read)


def _check_evaluations(snapshot: Any, read: Any) -> None:
    scored = sum(int(r["nevals"]) for r in snapshot.logbook)
    if snapshot.evaluations != scored:
        raise read.fail("evaluations", f"is {snapshot.evaluations}, but the logbook's nevals add up to {scored}")


def _check_row_describes(population: list, snapshot: Any, read: Any) -> None:
    """The last logbook row's extremes are those of ``population`` (the individuals it was recorded from)."""
    row, field = snapshot.logbook[-1], f"logbook[{len(snapshot.logbook) - 1}]"
    fits = [ind.fitness.values[0] for ind in population]
    sizes = [len(ind) for ind in population]
    for c, want in (("train_max", max(fits)), ("train_min", min(fits))):
        if abs(row[c] - want) > 1e-12 * max(1.0, abs(want)):
            raise read.fail(f"{field}.{c}", f"is {row[c]!r}, but the population's fitness values give {want!r}")
    for c, want in (("size_max", max(sizes)), ("size_min", min(sizes)),
                    ("depth_max", max(ind.height for ind in population))):
        if row[c] != want:
            raise read.fail(f"{field}.{c}", f"is {row[c]!r}, but the population gives {want}")


def _check_island_rows(snapshot: Any, cfg: RunConfig, read: Any) -> None:
    """An island run's last logbook row was recorded from all islands' populations before migration
    (:func:`evolve.search.islands.combine_rows`); the checkpoint holds them after it, when the run goes on. A
    migrant is a copy of an individual of the row, so every individual held lies within the row's fitness, size
    and depth ranges, and a single-objective run keeps its best (train_max exactly); the checkpoint of the last
    generation (no migration after it) holds exactly the populations of the row. ``evaluations`` is the sum of
    the rows' ``nevals``."""
    _check_evaluations(snapshot, read)
    population = [ind for island in snapshot.islands for ind in island.population]
    if snapshot.generation == cfg.generations or cfg.migrants == 0:
        _check_row_describes(population, snapshot, read)
        return
    row, field = snapshot.logbook[-1], f"logbook[{len(snapshot.logbook) - 1}]"
    lo, hi = row["train_min"], row["train_max"]
    slack = 1e-12 * max(1.0, abs(lo), abs(hi))
    for k, island in enumerate(snapshot.islands):
        for j, ind in enumerate(island.population):
            f, where = ind.fitness.values[0], f"islands[{k}].population[{j}]"
            if not lo - slack <= f <= hi + slack:
                raise read.fail(f"{field}.train_max", f"and train_min ({lo!r}, {hi!r}) do not hold {where}'s "
                                                      f"fitness {f!r} (the row describes the populations held)")
            if not row["size_min"] <= len(ind) <= row["size_max"] or ind.height > row["depth_max"]:
                raise read.fail(f"{field}.size_max", f"size_min and depth_max ({row['size_max']}, {row['size_min']}, "
                                                     f"{row['depth_max']}) do not hold {where} ({len(ind)} nodes, "
                                                     f"depth {ind.height})")
    best = max(ind.fitness.values[0] for ind in population)
    if not cfg.objective_spec.multi and abs(hi - best) > 1e-12 * max(1.0, abs(best)):
        raise read.fail(f"{field}.train_max", f"is {hi!r}, but the best of the populations held is {best!r} "
                                              "(migration copies the best, it never drops it)")


def check_rows_describe(snapshot: Any, cfg: RunConfig, read: Any) -> None:
    """The last row of ``snapshot.logbook`` describes the populations held (one population: exactly; islands: see
    :func:`_check_island_rows`), and ``evaluations`` is the sum of the rows' ``nevals``. Raises InputError
    through ``read.fail``."""
    if cfg.islands == 1:
        _check_last_row(snapshot, read)
    else:
        _check_island_rows(snapshot, cfg, read)


__all__ = ["COUNT_COLUMNS", "FITNESS_COLUMNS", "check_row", "check_rows_describe"]

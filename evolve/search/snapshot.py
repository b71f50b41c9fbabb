"""The state of a search between two epochs (:class:`Snapshot`), and its form as plain JSON data.

A checkpoint (:mod:`evolve.search.checkpoint`) stores a snapshot as data only, never as a pickle,
so loading one runs no code whoever wrote it. :func:`snapshot_to_data` turns a snapshot into
JSON-ready values, and :func:`snapshot_from_data` rebuilds it, checking every field by type and by
sense against the run's configuration first:

* programs are expressions in text (:func:`evolve.gp.compiler.to_string`, the format of DEAP and
  of the champion files), read back with the parser of :mod:`evolve.gp.compiler` (no ``eval``)
  into trees over the run's primitive set; constants are Python floats, whose ``repr`` reads
  back exactly;
* fitness values are DEAP's weighted values (``fitness.wvalues``) and NSGA-II's crowding
  distances, numbers; a non-finite number is written as the string ``"inf"``, ``"-inf"`` or
  ``"nan"`` (JSON has none);
* the states of Python's ``random`` (``random.getstate()``) and numpy's global generator
  (``np.random.get_state()``) are lists of integers;
* the hall of fame is its members with their arrival numbers; the logbook is its rows; the warm
  start is its seeds and skipped rules; the evaluator caches are, per split, the name of their
  metrics class (key ``metrics``; ``kind`` in checkpoints of earlier versions, still read), the
  remembered expressions (least recently used first), one column per field of their metrics and the
  evaluator's running totals. A column of floats or of integers is their little-endian binary
  form in base64 (``float64``/``int64``: exact, and far faster to write than numbers in text,
  for a cache of up to 200,000 expressions), a column of None is ``{"dtype": "null"}``, any
  other a JSON list.

Besides types, the values are checked for sense (a re-signed checkpoint can hold anything): fitness
values finite and within :data:`FITNESS_LIMIT`; every logbook row what a generation can produce (counts
that are integers >= 0, at most the population scored, the fitness statistics ordered min <= median,
mean <= max, non-negative times); for a one-population run the last row describes the population
held, for an island run the populations held (after migration: within the row's ranges, the best kept), and
``evaluations`` is the sum of the rows' ``nevals``; every cached time and count within what the run can physically
have spent or done (:mod:`evolve.search.snapshot_sense`: the wall time since the run started, the generations'
times within it, ``evals_per_s`` re-derived, ``programs`` the evaluator's, the evaluators' statistics); and a resume
re-scores every individual held and their remembered programs, bounds every other remembered metric, and re-derives
the warm start (:meth:`evolve.search.state.SearchState.check_resumed`). Each refusal names the file and the field.

A snapshot rebuilt from its data resumes to exactly the champion and logbook of the search that
made it.
"""
from __future__ import annotations

import base64
import binascii
import math
import random
import dataclasses
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from evolve.errors import InputError, json_type
from evolve.eval.population import EvaluationStats
from evolve.kinds.registry import KINDS
from evolve.gp.compiler import from_tree, parse, to_string
from evolve.gp.primitives import build_pset
from evolve.search.config import RunConfig
from evolve.search.individuals import HallOfFame, deap_types
from evolve.search.logbook_sense import check_row, check_rows_describe
from evolve.search.snapshot_sense import FITNESS_LIMIT, check_counts, check_times, gauss, max_arrivals
from evolve.search.state import CACHE_LIMIT, LOGBOOK_COLUMNS
from evolve.search.warm_start import Seed, Skipped, WarmStart


#: Non-finite floats as JSON strings.
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
#: Binary columns of the evaluator caches: little-endian numbers.
_DTYPES = {"float64": "<f8", "int64": "<i8"}
def _metrics_class(name: str) -> type:
    """The metrics class called ``name`` among the registered kinds' (what an evaluator cache may hold)."""
    return next(m for m in (k.hooks().metrics for k in KINDS.values()) if m is not None and m.__name__ == name)



#: Fields of a snapshot's data, of an island's, of an individual's.
_SNAPSHOT_KEYS = ("generation", "islands", "logbook", "evaluations", "programs", "seconds", "warm", "interrupted",
                  "caches")
_ISLAND_KEYS = ("generation", "population", "hof", "rng", "np_rng")


@dataclass
class Island:
    """One population between two generations.

    ``hof`` is the :class:`evolve.search.individuals.HallOfFame` (None for a
    ``pareto`` run, whose candidates are the first front of the population);
    ``generation`` the last generation completed (0: the initial population
    is scored); ``rng`` and ``np_rng`` the states of Python's ``random`` and of
    numpy's global generator at that point (None until :meth:`keep_rng`).
    """

    population: list
    hof: Any
    generation: int
    rng: Any = None
    np_rng: Any = None

    def keep_rng(self) -> None:
        """Store the current states of ``random`` and ``numpy.random`` in the island."""
        self.rng, self.np_rng = random.getstate(), np.random.get_state()

    def restore_rng(self) -> None:
        """Set ``random`` and ``numpy.random`` to the states the island holds."""
        random.setstate(self.rng)
        np.random.set_state(self.np_rng)


@dataclass
class Snapshot:
    """The state of a search after ``generation`` generations (every island has reached it).

    ``logbook``: rows so far; ``evaluations``, ``programs``: individuals
    scored and distinct programs run so far; ``seconds``: search wall time so
    far; ``warm``: the :class:`evolve.search.warm_start.WarmStart` (None when
    off); ``interrupted``: the snapshot was taken because a stop was
    requested (Ctrl-C); ``caches``: evaluator caches of a one-population
    search (:meth:`evolve.search.state.SearchState.cache_state`); ``source``: the checkpoint file it was
    read from ("" for one made in memory), named in the refusals of a resume.
    """

    generation: int
    islands: list[Island]
    logbook: list[dict[str, float]]
    evaluations: int
    programs: int
    seconds: float
    warm: Any = None
    interrupted: bool = False
    caches: Any = None
    source: str = dataclasses.field(default="", compare=False)


# --- to data ---------------------------------------------------------------------------------------

def _num(x: Any) -> Any:
    """A number as JSON data: ints stay ints, finite floats are floats, the others strings."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"not a number: {x!r}")
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _opt_num(x: Any) -> Any:
    return None if x is None else _num(x)


def _individual(ind) -> dict[str, Any]:
    out = {"tree": to_string(from_tree(ind)), "wvalues": [_num(v) for v in ind.fitness.wvalues]}
    if hasattr(ind.fitness, "crowding_dist"):
        out["crowding_dist"] = _num(ind.fitness.crowding_dist)
    return out


def _hof(hof: HallOfFame | None) -> dict[str, Any] | None:
    if hof is None:
        return None
    members = [[key[2], _individual(ind)] for key, ind in hof._ranked]  # noqa: SLF001 - state of the search
    return {"maxsize": int(hof.maxsize), "arrivals": int(hof._arrivals), "members": members}  # noqa: SLF001


def _rng(state) -> list:
    version, internal, gauss = state
    return [int(version), [int(v) for v in internal], _opt_num(gauss)]


def _np_rng(state) -> list:
    name, keys, pos, has_gauss, cached = state
    return [str(name), [int(v) for v in np.asarray(keys).tolist()], int(pos), int(has_gauss), _num(cached)]


def _column(values: list) -> dict[str, Any]:
    """One field of the remembered metrics, as a column: ``{"dtype": "float64"|"int64", "data": base64}``
    (little-endian binary: exact, and much faster than numbers in text), ``{"dtype": "null"}`` when every
    value is None, else ``{"values": [...]}`` (numbers as :func:`_num`)."""
    kinds = {type(v) for v in values}
    if kinds == {type(None)}:
        return {"dtype": "null"}
    if kinds == {float} or (kinds == {int} and all(-2**63 <= v < 2**63 for v in values)):
        dtype = "float64" if kinds == {float} else "int64"
        raw = np.array(values, dtype=_DTYPES[dtype]).tobytes()
        return {"dtype": dtype, "data": base64.b64encode(raw).decode("ascii")}
    return {"values": [_opt_num(v) for v in values]}


def _cache(items, stats) -> dict[str, Any]:
    metrics = type(items[0][1]).__name__ if items else None
    names = [f.name for f in fields(_metrics_class(metrics))] if metrics is not None else []
    columns = {n: _column([getattr(m, n) for _, m in items]) for n in names}
    stats = stats if isinstance(stats, EvaluationStats) else EvaluationStats(**stats)
    return {"metrics": metrics, "keys": [key for key, _ in items], "columns": columns,
            "stats": {f.name: _num(getattr(stats, f.name)) for f in fields(EvaluationStats)}}


def snapshot_to_data(snapshot: Snapshot) -> dict[str, Any]:
    """``snapshot`` as JSON-ready data (see the module doc); :func:`snapshot_from_data` reads it back."""
    warm = snapshot.warm
    return {
        "generation": int(snapshot.generation),
        "islands": [{"generation": int(island.generation),
                     "population": [_individual(ind) for ind in island.population],
                     "hof": _hof(island.hof), "rng": _rng(island.rng), "np_rng": _np_rng(island.np_rng)}
                    for island in snapshot.islands],
        "logbook": [{k: _num(v) for k, v in row.items()} for row in snapshot.logbook],
        "evaluations": int(snapshot.evaluations), "programs": int(snapshot.programs),
        "seconds": _num(snapshot.seconds),
        "warm": None if warm is None else {"seeds": [s.to_dict() for s in warm.seeds],
                                           "skipped": [s.to_dict() for s in warm.skipped]},
        "interrupted": bool(snapshot.interrupted),
        "caches": None if snapshot.caches is None else
        {name: _cache(items, stats) for name, (items, stats) in snapshot.caches.items()},
    }


# --- from data -------------------------------------------------------------------------------------

class _Reader:
    """Checks of the values of a checkpoint's data; every failure is one line naming the field."""

    def __init__(self, where: str):
        self.where = where

    def fail(self, field: str, text: str) -> InputError:
        return InputError(f"{self.where}: the checkpoint's field '{field}' {text}")

    def obj(self, value: Any, field: str, keys: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
        if not isinstance(value, dict):
            raise self.fail(field, f"must be a JSON object, found {json_type(value)}")
        for key in keys:
            if key not in value:
                raise self.fail(f"{field}.{key}" if field else key, "is missing")
        extra = sorted(set(value) - set(keys) - set(optional))
        if extra:
            raise self.fail(f"{field}.{extra[0]}" if field else extra[0], "is not a field of a checkpoint")
        return value

    def items(self, value: Any, field: str, length: int | None = None, most: int | None = None) -> list:
        if not isinstance(value, list):
            raise self.fail(field, f"must be a list, found {json_type(value)}")
        if length is not None and len(value) != length:
            raise self.fail(field, f"has {len(value)} entries, expected {length}")
        if most is not None and len(value) > most:
            raise self.fail(field, f"has {len(value)} entries, at most {most} expected")
        return value

    def integer(self, value: Any, field: str, low: int | None = None, high: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(field, f"must be an integer, found {json_type(value)}")
        if low is not None and value < low:
            raise self.fail(field, f"is {value}, less than {low}")
        if high is not None and value > high:
            raise self.fail(field, f"is {value}, more than {high}")
        return value

    def num(self, value: Any, field: str, finite: bool = False) -> int | float:
        if isinstance(value, str) and value in _NONFINITE and not finite:
            return _NONFINITE[value]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(field, f"must be a {'finite ' if finite else ''}number, found {json_type(value)}")
        try:
            ok = math.isfinite(float(value))
        except OverflowError:  # an integer beyond float range
            ok = False
        if not ok and (finite or isinstance(value, int)):
            raise self.fail(field, f"must be a finite number within float range (value {str(value)[:40]})")
        return value

    def fitness(self, value: Any, field: str) -> float:
        """A fitness value (or a statistic of them): finite, at most :data:`FITNESS_LIMIT` in magnitude."""
        v = self.num(value, field, finite=True)
        if abs(v) > FITNESS_LIMIT:
            raise self.fail(field, f"is {v!r}, beyond what a run's objective gives (|value| <= {FITNESS_LIMIT:g})")
        return v

    def opt_num(self, value: Any, field: str) -> int | float | None:
        return None if value is None else self.num(value, field)

    def text(self, value: Any, field: str) -> str:
        if not isinstance(value, str):
            raise self.fail(field, f"must be a string, found {json_type(value)}")
        return value

    def flag(self, value: Any, field: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(field, f"must be true or false, found {json_type(value)}")
        return value


class _Builder:
    """Turns expressions into individuals of the run's class over the run's primitive set."""

    def __init__(self, features: tuple[str, ...], individual: type, read: _Reader):
        from deap import gp

        pset = build_pset(features)
        self.features, self.individual, self.read = features, individual, read
        self.prims = {p.name: p for p in pset.primitives[pset.ret]}
        self.args = {t.value: t for t in pset.terminals[pset.ret]
                     if isinstance(t, gp.Terminal) and isinstance(t.value, str)}
        self.ephemeral = next(t for t in pset.terminals[pset.ret] if isinstance(t, type))
        self.weights = len(individual.fitness_class.weights)

    def tree(self, text: Any, field: str):
        nodes = parse(self.read.text(text, field), f"{self.read.where}: the checkpoint's field '{field}'",
                      self.features)
        out = []
        for node in nodes:
            if node.node_type == "prim":
                out.append(self.prims[node.value])
            elif node.node_type == "feature":
                out.append(self.args[node.value])
            else:  # a constant, made without drawing one (which would use ``random``)
                const = self.ephemeral.__new__(self.ephemeral)
                const.value = float(node.value)
                out.append(const)
        return self.individual(out)

    def individual_of(self, value: Any, field: str):
        data = self.read.obj(value, field, ("tree", "wvalues"), ("crowding_dist",))
        ind = self.tree(data["tree"], f"{field}.tree")
        wvalues = self.read.items(data["wvalues"], f"{field}.wvalues", self.weights)
        ind.fitness.wvalues = tuple(float(self.read.fitness(v, f"{field}.wvalues")) for v in wvalues)
        if "crowding_dist" in data:
            ind.fitness.crowding_dist = float(self.read.num(data["crowding_dist"], f"{field}.crowding_dist"))
        return ind


def _hof_from(value: Any, field: str, cfg: RunConfig, build: _Builder) -> HallOfFame | None:
    read = build.read
    if cfg.objective_spec.multi:
        if value is not None:
            raise read.fail(field, f"must be null for objective '{cfg.objective}' (its candidates are the front)")
        return None
    data = read.obj(value, field, ("maxsize", "arrivals", "members"))
    maxsize = read.integer(data["maxsize"], f"{field}.maxsize")
    if maxsize != cfg.hall_of_fame:
        raise read.fail(f"{field}.maxsize", f"is {maxsize}, but the run's hall_of_fame is {cfg.hall_of_fame}")
    arrivals = read.integer(data["arrivals"], f"{field}.arrivals", 0, max_arrivals(cfg))
    hof = HallOfFame(maxsize)
    seen: set[int] = set()
    for k, entry in enumerate(read.items(data["members"], f"{field}.members", most=maxsize)):
        where = f"{field}.members[{k}]"
        pair = read.items(entry, where, 2)
        arrival = read.integer(pair[0], f"{where}[0]", 1, arrivals)
        if arrival in seen:
            raise read.fail(f"{where}[0]", f"repeats the arrival number {arrival}")
        seen.add(arrival)
        ind = build.individual_of(pair[1], f"{where}[1]")
        key = str(ind)
        if key in hof._keys:  # noqa: SLF001
            raise read.fail(where, "repeats an expression of the hall of fame")
        rank = (-ind.fitness.values[0], len(ind), arrival)
        if hof._ranked and not hof._ranked[-1][0] < rank:  # noqa: SLF001
            raise read.fail(where, "is out of order (the hall of fame is ordered by fitness, then size)")
        hof._ranked.append((rank, ind))  # noqa: SLF001
        hof._keys.add(key)  # noqa: SLF001
    hof._arrivals = arrivals  # noqa: SLF001
    return hof


def _rng_from(value: Any, field: str, read: _Reader) -> tuple:
    data = read.items(value, field, 3)
    internal = read.items(data[1], f"{field}[1]", 625)
    state = (read.integer(data[0], f"{field}[0]"),
             tuple(read.integer(v, f"{field}[1]", 0, 2**32 - 1) for v in internal),
             None if data[2] is None else gauss(data[2], f"{field}[2]", read))
    try:
        random.Random().setstate(state)
    except (TypeError, ValueError, OverflowError) as exc:
        raise read.fail(field, f"is not a state of Python's random ({exc})") from None
    return state


def _np_rng_from(value: Any, field: str, read: _Reader) -> tuple:
    data = read.items(value, field, 5)
    if data[0] != "MT19937":
        raise read.fail(f"{field}[0]", f"must be \"MT19937\", found {data[0]!r}")
    keys = [read.integer(v, f"{field}[1]", 0, 2**32 - 1) for v in read.items(data[1], f"{field}[1]", 624)]
    state = ("MT19937", np.array(keys, dtype=np.uint32), read.integer(data[2], f"{field}[2]", 0, 624),
             read.integer(data[3], f"{field}[3]", 0, 1), gauss(data[4], f"{field}[4]", read))
    try:
        np.random.RandomState().set_state(state)
    except (TypeError, ValueError, OverflowError) as exc:
        raise read.fail(field, f"is not a state of numpy's generator ({exc})") from None
    return state


def _island_from(value: Any, field: str, generation: int, cfg: RunConfig, build: _Builder) -> Island:
    read = build.read
    data = read.obj(value, field, _ISLAND_KEYS)
    gen = read.integer(data["generation"], f"{field}.generation")
    if gen != generation:
        raise read.fail(f"{field}.generation", f"is {gen}, but the checkpoint is at generation {generation}")
    people = read.items(data["population"], f"{field}.population")
    if len(people) != cfg.population:
        raise read.fail(f"{field}.population", f"has {len(people)} individuals, but the run's population is "
                                               f"{cfg.population}")
    population = [build.individual_of(v, f"{field}.population[{k}]") for k, v in enumerate(people)]
    hof = _hof_from(data["hof"], f"{field}.hof", cfg, build)
    return Island(population, hof, gen, _rng_from(data["rng"], f"{field}.rng", read),
                  _np_rng_from(data["np_rng"], f"{field}.np_rng", read))


def _logbook_from(value: Any, generation: int, cfg: RunConfig, read: _Reader) -> list[dict[str, Any]]:
    rows = read.items(value, "logbook")
    if len(rows) != generation + 1:
        raise read.fail("logbook", f"has {len(rows)} rows, but generation {generation} needs {generation + 1} "
                                   "(one per generation, the initial one included)")
    out = []
    for k, row in enumerate(rows):
        data = read.obj(row, f"logbook[{k}]", LOGBOOK_COLUMNS)
        parsed = {c: read.num(data[c], f"logbook[{k}].{c}") for c in LOGBOOK_COLUMNS}
        if parsed["gen"] != k:
            raise read.fail(f"logbook[{k}].gen", f"is {parsed['gen']!r}, expected {k}")
        check_row(parsed, f"logbook[{k}]", cfg, read)
        out.append(parsed)
    return out


def _warm_from(value: Any, cfg: RunConfig, read: _Reader) -> WarmStart | None:
    if not cfg.warm_start:
        if value is not None:
            raise read.fail("warm", "must be null for a run without warm start")
        return None
    data = read.obj(value, "warm", ("seeds", "skipped"))
    seeds = []
    for k, s in enumerate(read.items(data["seeds"], "warm.seeds", most=cfg.population)):
        s = read.obj(s, f"warm.seeds[{k}]", ("name", "expression", "reason"))
        seeds.append(Seed(*(read.text(s[n], f"warm.seeds[{k}].{n}") for n in ("name", "expression", "reason"))))
    skipped = []
    for k, s in enumerate(read.items(data["skipped"], "warm.skipped")):
        s = read.obj(s, f"warm.skipped[{k}]", ("name", "reason"))
        skipped.append(Skipped(*(read.text(s[n], f"warm.skipped[{k}].{n}") for n in ("name", "reason"))))
    return WarmStart(seeds, skipped)


def _column_from(value: Any, field: str, n: int, read: _Reader) -> list:
    data = read.obj(value, field, (), ("dtype", "data", "values"))
    if "values" in data:
        if set(data) != {"values"}:
            raise read.fail(field, "must hold either dtype and data, or values")
        return [read.opt_num(v, f"{field}.values") for v in read.items(data["values"], f"{field}.values", n)]
    dtype = data.get("dtype")
    if dtype == "null" and set(data) == {"dtype"}:
        return [None] * n
    if dtype not in _DTYPES or set(data) != {"dtype", "data"}:
        raise read.fail(field, "must be {\"dtype\": \"float64\" or \"int64\", \"data\": base64}, {\"dtype\": "
                               "\"null\"} or {\"values\": [...]}")
    try:
        raw = base64.b64decode(read.text(data["data"], f"{field}.data"), validate=True)
    except (binascii.Error, ValueError):
        raise read.fail(f"{field}.data", "is not base64") from None
    if len(raw) != 8 * n:
        raise read.fail(f"{field}.data", f"holds {len(raw) // 8} values, expected {n}")
    return np.frombuffer(raw, dtype=_DTYPES[dtype]).tolist()


def _cache_from(value: Any, field: str, metrics: str, read: _Reader) -> tuple[list, EvaluationStats]:
    # the metrics class's name is under "metrics"; checkpoints written before it was renamed have "kind"
    legacy = isinstance(value, dict) and "kind" in value and "metrics" not in value
    name = "kind" if legacy else "metrics"
    data = read.obj(value, field, (name, "keys", "columns", "stats"))
    keys = read.items(data["keys"], f"{field}.keys", most=CACHE_LIMIT)
    if data[name] != (metrics if keys else None):
        raise read.fail(f"{field}.{name}", f"is {json_type(data[name]) if data[name] is None else repr(data[name])}, "
                                           f"expected {repr(metrics) if keys else 'null (no entries)'}")
    if not all(type(key) is str for key in keys):
        k = next(k for k, key in enumerate(keys) if type(key) is not str)
        read.text(keys[k], f"{field}.keys[{k}]")
    if len(set(keys)) != len(keys):
        raise read.fail(f"{field}.keys", "repeats an expression")
    names = [f.name for f in fields(_metrics_class(metrics))] if keys else []
    columns = read.obj(data["columns"], f"{field}.columns", tuple(names))
    cols = [_column_from(columns[n], f"{field}.columns.{n}", len(keys), read) for n in names]
    items = list(zip(keys, map(_metrics_class(metrics), *cols))) if keys else []
    stats = read.obj(data["stats"], f"{field}.stats", tuple(f.name for f in fields(EvaluationStats)))
    totals = {}
    for f in fields(EvaluationStats):
        n = read.num(stats[f.name], f"{field}.stats.{f.name}", finite=True)
        if n < 0:
            raise read.fail(f"{field}.stats.{f.name}", f"is {n}, less than 0")
        totals[f.name] = n
    return items, EvaluationStats(**totals)


def snapshot_from_data(data: Any, cfg: RunConfig, features: tuple[str, ...], generation: int,
                       where: str, created: str | None = None) -> Snapshot:
    """The :class:`Snapshot` of checkpoint data (:func:`snapshot_to_data`), checked against the run.

    Args:
        data: the decoded JSON data.
        cfg: the run's configuration (population, generations, islands, hall of fame, objective...).
        features: the run's terminal features (the trees may read no others).
        generation: the generation the checkpoint's header names.
        where: how the checkpoint is named in messages.
        created: the header's ISO time the run started (the wall time is at most the time since; None: unbounded).

    Raises: InputError (one line naming the field: ``the checkpoint's field 'islands[0].population'
    has 5 individuals, but the run's population is 20``) for a value of the wrong type or one that
    makes no sense for the run.
    """
    read = _Reader(where)
    data = read.obj(data, "", _SNAPSHOT_KEYS)
    gen = read.integer(data["generation"], "generation", 0, cfg.generations)
    if gen != generation:
        raise read.fail("generation", f"is {gen}, but the header says {generation}")
    build = _Builder(tuple(features), deap_types(cfg.objective_spec)[1], read)
    islands = read.items(data["islands"], "islands", cfg.islands)
    snapshot = Snapshot(
        gen, [_island_from(v, f"islands[{k}]", gen, cfg, build) for k, v in enumerate(islands)],
        _logbook_from(data["logbook"], gen, cfg, read),
        read.integer(data["evaluations"], "evaluations", 0), read.integer(data["programs"], "programs", 0),
        float(read.num(data["seconds"], "seconds", finite=True)), _warm_from(data["warm"], cfg, read),
        read.flag(data["interrupted"], "interrupted"), source=where)
    if snapshot.seconds < 0:
        raise read.fail("seconds", f"is {snapshot.seconds}, less than 0")
    check_rows_describe(snapshot, cfg, read)
    caches = data["caches"]
    if cfg.islands > 1:
        if caches is not None:
            raise read.fail("caches", "must be null for an island run (each island task scores afresh)")
    else:
        metrics = cfg.program_kind.hooks().metrics.__name__
        caches = read.obj(caches, "caches", ("train", "valid"))
        snapshot.caches = {name: _cache_from(caches[name], f"caches.{name}", metrics, read)
                           for name in ("train", "valid")}
    check_times(snapshot, cfg, read, created)
    check_counts(snapshot, cfg, read)
    return snapshot


__all__ = ["Island", "Snapshot", "snapshot_to_data", "snapshot_from_data"]

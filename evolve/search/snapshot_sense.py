"""Sense checks of the cached figures of a checkpoint that a resume reports: times, counts and the evaluator's
statistics, each re-derived from the rest of the checkpoint or bounded by what it can physically be.

A checkpoint's fields are checked by type first (:mod:`evolve.search.snapshot`); a re-signed checkpoint can still
hold any value of the right type, and a resume reports its figures as the run's own (the run directory's
``seconds``, ``evaluations``, ``programs_scored``, the logbook, the champion's metrics). So:

* times: the search's wall time (``seconds``) is at most the time since the run started (the header's ``created``,
  with :data:`CLOCK_SLACK` for clocks of two machines), and holds every generation's time (the sum of the logbook's
  ``seconds``; an island run's generations are the slowest island's, so at most ``islands`` times it); a
  generation's scoring time (``eval_seconds``) is within its time (the islands', summed, within ``islands`` times
  it); ``evals_per_s`` is ``new_programs / eval_seconds`` as the run computes it (:func:`evolve.search.state.population_row`);
* counts: a generation's ``new_programs`` are at most its ``nevals`` (a program runs only for an individual scored);
  ``programs`` of a one-population run is its train evaluator's ``scored`` (what a resume reports), of an island run
  at most the individuals its generations and candidates can have scored;
* the evaluator's statistics (one-population runs): calls at most a few per generation, the individuals of a call at
  most the population or the hall of fame, scored and remembered programs and cache hits within them, nodes within
  what trees of the run's depth limit hold, times within the wall time.

The remembered metrics, whose bounds depend on the data, are checked on resume (:meth:`evolve.search.state.SearchState.check_resumed`).
Each refusal is one line naming the file and the field (``read.fail``).
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from evolve.search.config import RunConfig

#: Largest magnitude of a fitness value (or a logbook statistic of them) a run can produce: an objective's finite
#: values (a non-finite one becomes :data:`evolve.eval.objectives.WORST`, 1e9); tokens per second under a cost
#: file's shortest time (1 ns) and many concurrent requests stay far below.
FITNESS_LIMIT = 1e15
#: Seconds a wall time may exceed the time since the run started (the clocks of the machine that started the run
#: and of the one resuming it may differ).
CLOCK_SLACK = 86400.0
#: Relative tolerance of a re-derived float (the run computes it from the same values).
RTOL = 1e-9
#: Calls an evaluator makes per generation, at most (the generation's individuals, the candidates of the best valid
#: score, the seeds; the valid evaluator fewer).
CALLS_PER_GENERATION = 4
#: The largest number of operands of a primitive (``if_gt``).
MAX_ARITY = 4


def _close_to(value: float, want: float) -> bool:
    return abs(value - want) <= RTOL * max(1.0, abs(want))


#: Depth of the deepest tree a run may hold whatever its ``max_depth`` (Koza's 17): the warm start's seeds are the
#: registry's rules, far shallower.
KOZA_DEPTH = 17
#: Largest magnitude of a standard normal draw a generator can cache (Box-Muller from doubles: below 40).
MAX_GAUSS = 40.0


def max_tree_nodes(cfg: RunConfig) -> int:
    """The most nodes a tree of the run can have: a full tree of the widest primitive to ``max_depth`` (at least
    :data:`KOZA_DEPTH`, for the seeds)."""
    depth = max(cfg.max_depth, KOZA_DEPTH)
    return (MAX_ARITY ** (depth + 1) - 1) // (MAX_ARITY - 1)


def gauss(value: Any, field: str, read: Any) -> float:
    """A generator's cached normal draw (of a checkpoint's random state): finite, below :data:`MAX_GAUSS` in
    magnitude."""
    v = float(read.num(value, field, finite=True))
    if abs(v) > MAX_GAUSS:
        raise read.fail(field, f"is {v!r}, not a normal draw a generator caches (|value| < {MAX_GAUSS:g})")
    return v


def max_arrivals(cfg: RunConfig) -> int:
    """The most individuals a hall of fame can have taken in: every individual of every generation, seeds and
    migrants included."""
    return 2 * (cfg.generations + 2) * cfg.population


def check_times(snapshot: Any, cfg: RunConfig, read: Any, created: str | None) -> None:
    """The wall time and the logbook's times (module doc)."""
    seconds = snapshot.seconds
    if created is not None:
        start = datetime.fromisoformat(created)
        start = start if start.tzinfo is not None else start.replace(tzinfo=timezone.utc)
        elapsed = (datetime.now(timezone.utc) - start).total_seconds()
        if seconds > max(elapsed, 0.0) + CLOCK_SLACK:
            raise read.fail("seconds", f"is {seconds!r}, more than the {max(elapsed, 0.0):.0f} s since the run "
                                       f"started ({created})")
    spread = float(cfg.islands)
    total = math.fsum(r["seconds"] for r in snapshot.logbook)
    if total > spread * seconds * (1 + RTOL) + 1e-6:
        raise read.fail("seconds", f"is {seconds!r}, less than the {total!r} s of the logbook's generations"
                                   + (f" over {cfg.islands} islands" if cfg.islands > 1 else ""))
    for k, row in enumerate(snapshot.logbook):
        field = f"logbook[{k}]"
        if row["eval_seconds"] > spread * row["seconds"] * (1 + RTOL) + 1e-6:
            raise read.fail(f"{field}.eval_seconds", f"is {row['eval_seconds']!r}, more than the generation's "
                                                     f"{row['seconds']!r} s" + (f" times {cfg.islands} islands"
                                                                                 if cfg.islands > 1 else ""))
        want = row["new_programs"] / row["eval_seconds"] if row["eval_seconds"] > 0 else 0.0
        if not _close_to(row["evals_per_s"], want):
            raise read.fail(f"{field}.evals_per_s", f"is {row['evals_per_s']!r}, but new_programs / eval_seconds "
                                                    f"is {want!r}")
        if row["new_programs"] > row["nevals"]:
            raise read.fail(f"{field}.new_programs", f"is {row['new_programs']!r}, more than the {row['nevals']!r} "
                                                     f"individuals the generation scored")


def candidates_per_generation(cfg: RunConfig) -> int:
    """The most individuals one evaluator call of the run scores: a population, or the hall of fame."""
    return max(cfg.population, cfg.hall_of_fame)


def check_counts(snapshot: Any, cfg: RunConfig, read: Any) -> None:
    """``programs`` and (one population) the evaluators' statistics (module doc)."""
    gens = snapshot.generation + 1
    per_call = candidates_per_generation(cfg)
    if snapshot.caches is None:  # an island run: programs summed over the islands' train evaluators
        most = cfg.islands * CALLS_PER_GENERATION * (gens + 1) * per_call
        if snapshot.programs > most:
            raise read.fail("programs", f"is {snapshot.programs}, more than the {most} programs {gens} generations "
                                        f"of {cfg.islands} islands can score")
        return
    scored = snapshot.caches["train"][1].scored
    if snapshot.programs != scored:
        raise read.fail("programs", f"is {snapshot.programs}, but the train evaluator's 'scored' is {scored}")
    for name, (items, stats) in snapshot.caches.items():
        _check_stats(stats, len(items), f"caches.{name}.stats", cfg, gens, snapshot.seconds, read)


def _check_stats(stats: Any, remembered: int, field: str, cfg: RunConfig, gens: int, seconds: float,
                 read: Any) -> None:
    """One evaluator's running totals (:class:`evolve.eval.population.EvaluationStats`)."""
    calls_most = CALLS_PER_GENERATION * (gens + 1)
    checks = (
        ("calls", stats.calls, calls_most, f"the {calls_most} calls {gens} generations make"),
        ("individuals", stats.individuals, stats.calls * (cfg.population + cfg.hall_of_fame),
         f"{stats.calls} calls of at most {cfg.population + cfg.hall_of_fame} individuals"),
        ("distinct", stats.distinct, stats.individuals, "the individuals asked for"),
        ("scored", stats.scored, stats.distinct, "the distinct individuals"),
        ("cache_hits", stats.cache_hits, stats.individuals - stats.scored, "the individuals not scored"),
        ("nodes", stats.nodes, stats.scored * max_tree_nodes(cfg),
         f"{stats.scored} programs of at most {max_tree_nodes(cfg)} nodes"),
        ("compile_seconds", stats.compile_seconds, seconds * (1 + RTOL) + 1e-6, "the search's wall time"),
        ("score_seconds", stats.score_seconds, seconds * (1 + RTOL) + 1e-6, "the search's wall time"),
    )
    for key, value, most, what in checks:
        if value > most:
            raise read.fail(f"{field}.{key}", f"is {value!r}, more than {most!r} ({what})")
    if remembered > stats.scored:
        raise read.fail(f"{field}.scored", f"is {stats.scored}, fewer than the {remembered} programs remembered")


# --- on resume, with the data: the remembered metrics and the evaluators' per-row counts -------------------------

#: Integers a program's metrics count on a split (records, blocks, trees, invalid values, calls without a draft) are
#: at most this many times the rows its evaluator reads (plus one).
COUNT_FACTOR = 16


def min_call_seconds(costs: Any) -> float:
    """The fewest seconds a target call can take under ``costs`` (:class:`evolve.eval.costs.Costs`): every call is
    a target forward or a step of plain decoding."""
    return min(min(costs.target_forward_s), costs.plain_token_s)


#: Metrics that are fractions (rates, expected rates, TV per token, a mean weight in [0, 1]).
FRACTIONS = ("acceptance_rate", "accuracy", "quality_score", "expected_acceptance", "expected_tv",
             "expected_false_reject", "expected_quality", "tv_per_token", "mean_weight")
#: Metrics that are the acceptance-quality fitness (acceptance times quality, or below the floor a fraction of the
#: quality: :class:`evolve.eval.evaluator.AcceptanceQualityFitness`).
FITNESSES = ("fitness", "expected_fitness")


def check_remembered(items: list, field: str, rows: int, costs: Any, limit: float, read: Any,
                     fitness_top: float = 1.0) -> None:
    """The remembered metrics of one evaluator cache (``items``: (expression, metrics) pairs; ``rows`` the rows its
    evaluator reads, re-derived from a fresh scoring), bounded by what they can physically be: numbers finite (or
    NaN, or None where a metric was not computed) within ``limit``, counts whole and at most
    :data:`COUNT_FACTOR` times ``rows``, ``tokens_per_call`` at most ``rows + 1``, ``seconds_per_call`` at least
    the cost model's shortest call, ``tokens_per_second`` their ratio, ``speedup`` at most ``rows + 1`` tokens per
    shortest call over plain decoding's, per-call means (``mean_*``) at most ``rows + 1``, fractions
    (:data:`FRACTIONS`) in [0, 1], the acceptance-quality fitness in [0, ``fitness_top``] (module doc).
    ``read.fail`` makes the refusal (naming ``field``, the entry and the value)."""
    fastest = min_call_seconds(costs)
    top_speedup = (rows + 1) * costs.plain_token_s / fastest
    for k, (key, m) in enumerate(items):
        where = f"{field}.keys[{k}]"
        values = {f: getattr(m, f) for f in m.__dataclass_fields__}
        for name, v in values.items():
            if v is None or (isinstance(v, float) and v != v):
                continue
            bad = None
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or abs(v) > limit:
                bad = f"a finite number within {limit:g}"
            elif isinstance(v, int) and not 0 <= v <= COUNT_FACTOR * (rows + 1):
                bad = f"a count in 0..{COUNT_FACTOR * (rows + 1)} ({COUNT_FACTOR} times the {rows} rows scored)"
            elif (name == "tokens_per_call" or name.startswith("mean_")) and name != "mean_weight" \
                    and not 0 <= v <= rows + 1:
                bad = f"a count per call in [0, {rows + 1}]"
            elif name in FRACTIONS and not -RTOL <= v <= 1 + RTOL:
                bad = "a fraction in [0, 1]"
            elif name in FITNESSES and not -RTOL <= v <= fitness_top * (1 + RTOL):
                bad = f"an acceptance-quality fitness in [0, {fitness_top:g}]"
            elif name == "speedup" and not 0 <= v <= top_speedup * (1 + RTOL):
                bad = f"a speedup in [0, {top_speedup:g}] ({rows + 1} tokens per shortest call)"
            elif name == "seconds_per_call" and v < fastest * (1 - RTOL):
                bad = f"at least the cost model's shortest call, {fastest!r} s"
            if bad is not None:
                raise read.fail(where, f"remembers {name} = {v!r} for {str(key)[:60]!r}, but it must be {bad}")
        tpc, spc, tps = (values.get(f) for f in ("tokens_per_call", "seconds_per_call", "tokens_per_second"))
        if None not in (tpc, spc, tps) and spc > 0 and tps == tps and not _close_to(tps, tpc / spc):
            raise read.fail(where, f"remembers tokens_per_second = {tps!r} for {str(key)[:60]!r}, but "
                                   f"tokens_per_call / seconds_per_call is {tpc / spc!r}")


def check_stats_rows(stats: Any, field: str, rows: int, read: Any) -> None:
    """An evaluator's ``node_evaluations`` are its ``nodes`` times the ``rows`` it reads (every node of a scored
    program is evaluated on every row); ``instructions`` at most ``nodes``; ``derived_rows`` at most two per
    feature (the log and exp of each)."""
    from evolve.gp.primitives import FEATURES

    if stats.node_evaluations != stats.nodes * rows:
        raise read.fail(f"{field}.node_evaluations", f"is {stats.node_evaluations}, but nodes x rows scored is "
                                                     f"{stats.nodes} x {rows} = {stats.nodes * rows}")
    if stats.instructions > stats.nodes:
        raise read.fail(f"{field}.instructions", f"is {stats.instructions}, more than the {stats.nodes} nodes scored")
    if stats.derived_rows > 2 * len(FEATURES):
        raise read.fail(f"{field}.derived_rows", f"is {stats.derived_rows}, more than the log and exp of each of "
                                                 f"the {len(FEATURES)} features")


__all__ = ["CLOCK_SLACK", "COUNT_FACTOR", "FITNESSES", "FITNESS_LIMIT", "FRACTIONS", "MAX_GAUSS", "check_counts", "check_remembered",
           "check_stats_rows", "check_times", "gauss", "max_arrivals", "max_tree_nodes", "min_call_seconds"]

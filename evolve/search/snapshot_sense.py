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


def max_tree_nodes(cfg: RunConfig) -> int:
    """The most nodes a tree of the run can have: a full tree of the widest primitive to ``max_depth``."""
    return (MAX_ARITY ** (cfg.max_depth + 1) - 1) // (MAX_ARITY - 1)


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
        ("individuals", stats.individuals, stats.calls * candidates_per_generation(cfg),
         f"{stats.calls} calls of at most {candidates_per_generation(cfg)} individuals"),
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


__all__ = ["CLOCK_SLACK", "check_counts", "check_times", "max_tree_nodes"]

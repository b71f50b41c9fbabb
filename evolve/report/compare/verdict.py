"""The verdict of ``benchmark.py``'s comparison: one line saying which rule wins, and by how much.

Measure: what the champions were evolved for. A champion is judged by its run's objective, as its champion file
records it (``objective``), else by its kind's first objective (:attr:`evolve.kinds.base.ProgramKind.objectives`),
through the objective's :attr:`evolve.eval.objectives.Objective.measure`: the acceptance-quality fitness (column
``Fitness``) for ``acceptance_quality`` and ``expected`` (its noise-free form), tokens per call for ``speed_at_tv``
and ``pareto``, tokens per second for ``tokens_per_second`` and ``pareto_tokens_per_second`` (the objectives of
verification-length policies and tree shapes; without a cost file, whose seconds are measured, the speedup under the
comparison's flat cost ratio: :func:`priced_measure`). Without champions the measure is the fitness, the measure the
acceptance-quality benchmark table is built on. Champions of different measures: the first champion's measure, and
the line names the others'.
Split: ``test`` when it was scored, else the last split scored. Rows: every rule with a value of the measure on
that split; for the fitness not ``block_verification``, nor a relaxation or policy champion (no per-token threshold,
hence no fitness); for a speed measure every row but the bounds (:data:`BOUNDS`, which know each block's outcome),
among those whose TV per token is within the champion's run's TV budget (recorded in its champion file; else the
champion's own TV per token), so a lossy rule does not win on speed it bought with damage.

Winner: the highest fitness. Ties go to ``standard_rejection`` (the reference), then to the
earlier row, so a champion wins only by scoring strictly higher than every registered rule.
The margin is against the reference; when the reference itself wins, against the next best rule.

When champions were compared and none wins, the line names the best of them (the last one on
ties: champion files given with ``--champion`` come after the promoted ones) and says why,
from what its champion file records (:attr:`Comparison.champions`, filled by
:func:`champion_records`): the seeded rule NAME (``champion_source`` ``seeded:NAME`` in the
provenance: evolution found nothing better on valid), the reference's own expression, a run
that optimised another objective, or an evolved rule whose gain on valid did not carry over.

A champion judged by speed: a row that never drafts (its metrics' ``mean_drafted`` is 0) is named plain decoding
(:func:`never_drafts`), a seeded champion is named by its rule, and when the champion does not win, or never
drafts, the verdict line is preceded by what to try next (:func:`speed_next_steps`).

What to try next (:data:`NEXT_STEPS`): when the best champion does not beat standard rejection and
its champion file (read by :func:`champion_records`) records a run under an acceptance-quality
objective, the verdict line is preceded by a few lines saying that this fitness cannot be beaten
(standard rejection is its optimum, docs/reference/math.md, section 3) and which runs optimise speed
instead. Every such line is at most 100 characters; the verdict line stays the last one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from evolve.eval.objectives import OBJECTIVES
from evolve.report.compare.rows import REFERENCE_RULE, VERIFIER, Comparison, ComparedRule, Row

#: The row metric the verdict compares without champions (the table's column ``Fitness``).
MEASURE = "fitness"
#: How the verdict line names a measure.
MEASURE_WORDS: dict[str, str] = {"fitness": "fitness", "expected_fitness": "expected fitness",
                                 "tokens_per_call": "tokens per call", "tokens_per_second": "tokens per second",
                                 "speedup": "speedup"}
#: Rows that are bounds, not rules (they know each block's outcome): never a winner.
BOUNDS: frozenset[str] = frozenset({"length_oracle", "shape_oracle"})
#: Slack of the TV-per-token filter of a speed measure (round-off of an exactly lossless row).
TV_SLACK = 1e-12
#: The lines printed before the verdict when a champion of a fitness run does not beat standard rejection.
NEXT_STEPS: tuple[str, ...] = (
    "next: standard rejection is the optimum of the acceptance-quality fitness, so no champion can beat",
    "  it there (docs/reference/math.md, section 3); to evolve for speed, optimise speed instead:",
    "  python -m evolve run --objective speed_at_tv --tv-budget 0.01   # tokens per call, TV <= 0.01",
    "  python -m evolve run --objective pareto                         # tokens per call against TV",
    "  python -m evolve run --evolve verify-length --objective tokens_per_second --costs FILE",
    "  (FILE: docs/costs/gpu_like.json, or one measured by `python benchmark.py perf --write-costs FILE`)",
)


@dataclass(frozen=True)
class Verdict:
    """Which rule wins on ``split`` by ``measure`` (see the module doc).

    ``value``/``reference_value``/``champion_value`` are the measure of the winner, of
    ``standard_rejection`` (None if it was not scored) and of the best champion (None without
    champions); ``runner_up`` is the next best rule when the reference wins (else None);
    ``champion_source`` is what the best champion's file records (``evolved``, ``seeded:NAME``
    or None); ``reason`` why that champion does not win (None when it wins or there is none);
    ``hint`` the lines on what to try next (:data:`NEXT_STEPS`, or empty); ``text`` what is
    printed: the hint lines, then the verdict line.
    """

    split: str
    measure: str
    winner: str
    winner_role: str
    value: float
    reference: str | None
    reference_value: float | None
    runner_up: str | None
    runner_up_value: float | None
    champion: str | None
    champion_value: float | None
    champion_source: str | None
    reason: str | None
    text: str
    hint: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the verdict (``delta``: winner minus reference; ``champion_delta``:
        best champion minus reference; None where a side is missing)."""
        def minus(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a - b

        return {"split": self.split, "measure": self.measure, "winner": self.winner,
                "winner_role": self.winner_role, "value": self.value, "reference": self.reference,
                "reference_value": self.reference_value, "delta": minus(self.value, self.reference_value),
                "runner_up": self.runner_up, "runner_up_value": self.runner_up_value,
                "champion": self.champion, "champion_value": self.champion_value,
                "champion_delta": minus(self.champion_value, self.reference_value),
                "champion_source": self.champion_source, "reason": self.reason, "hint": list(self.hint),
                "text": self.text}


def _value(row: Row, measure: str) -> float | None:
    """The row's ``measure`` as a finite float, or None."""
    value = row.value(measure)
    if value is None or not math.isfinite(float(value)):
        return None
    return float(value)


def _measure(row: Row) -> float | None:
    return _value(row, MEASURE)


def objective_measure(objective: Any) -> str | None:
    """The measure (:attr:`evolve.eval.objectives.Objective.measure`) of the registered objective named
    ``objective``; None for anything else."""
    found = OBJECTIVES.get(objective) if isinstance(objective, str) else None
    return found.measure if found is not None else None


def champion_measure(row: Row, info: Mapping[str, Any]) -> str:
    """The measure that judges the champion ``row`` (module doc): its recorded run objective's, else its kind's
    first objective's, else the fitness."""
    measure = objective_measure(info.get("objective"))
    if measure is not None:
        return measure
    from evolve.kinds.registry import KINDS

    kind = KINDS.get(row.program_kind) if isinstance(row.program_kind, str) else None
    measure = objective_measure(kind.objectives[0]) if kind is not None and kind.objectives else None
    return measure or MEASURE


def priced_measure(measure: str, comparison: Comparison) -> str:
    """``measure`` as the comparison's cost model can give it: tokens per second only under a cost file (seconds
    measured); under a flat cost ratio the speedup, which orders the rows as tokens per second would (one cost model
    prices every row), so a verdict never calls a speedup tokens per second."""
    if measure == "tokens_per_second" and not comparison.costs.measured:
        return "speedup"
    return measure


def verdict_split(comparison: Comparison) -> str | None:
    """The split the verdict is about: ``test`` if scored, else the last split scored (None: no rows)."""
    splits = list(comparison.splits) or list(dict.fromkeys(r.split for r in comparison.rows))
    if not splits:
        return None
    return "test" if "test" in splits else splits[-1]


def _seeded_name(source: str | None) -> str | None:
    """NAME of a champion source ``seeded:NAME`` (as :func:`evolve.search.run_documents.seeded_name`)."""
    return source[len("seeded:"):] if isinstance(source, str) and source.startswith("seeded:") else None


def seeded_why(info: Mapping[str, Any]) -> str:
    """Why a run's champion is one of its seeded rules, as its champion file records it (``info``:
    :func:`champion_records`, whose ``guard_kept`` is the champion guard's verdict): the guard kept the seeded rule
    (evolution's best was not ahead of it by more than the noise), or evolution found nothing better on valid."""
    if info.get("guard_kept") is False:
        return "the champion guard kept it: evolution's best was not ahead by more than the noise"
    return "evolution found nothing better on valid"


def _reason(champ: Row, winner: Row, ref: Row | None, info: Mapping[str, Any], split: str) -> tuple[bool, str]:
    """Why the champion ``champ`` does not beat ``winner`` (see the module doc): (True, "NAME itself ...")
    when the champion is the winning rule itself, else (False, the reason)."""
    source = info.get("champion_source")
    seeded = _seeded_name(source)
    nothing_better = seeded_why(info)
    if seeded is not None:
        if seeded == winner.heuristic:
            return True, f"{seeded} itself ({nothing_better})"
        return False, f"it is the seeded rule {seeded} ({nothing_better})"
    if champ.expression is not None and champ.expression == winner.expression:
        return True, f"{winner.heuristic} itself"
    if ref is not None and champ.expression is not None and champ.expression == ref.expression:
        return False, f"it is {ref.heuristic} itself"
    objective = info.get("objective")
    if isinstance(objective, str) and objective_measure(objective) != MEASURE:
        return False, f"its run optimised the {objective} objective, not fitness"
    if source == "evolved":
        if abs(_measure(champ) - _measure(winner)) <= TIE_RTOL * abs(_measure(winner)):
            return False, f"an evolved rule, tied with {winner.heuristic}"
        return False, f"an evolved rule whose lead on valid does not carry over to {split}"
    return False, f"behind {winner.heuristic} on {split}"


def compute_verdict(comparison: Comparison) -> Verdict | None:
    """The :class:`Verdict` of ``comparison`` (None when no row of the split has a value of the measure)."""
    split = verdict_split(comparison)
    if split is None:
        return None
    champions = [r for r in comparison.rows if r.split == split and r.role == "champion"]
    measures = list(dict.fromkeys(priced_measure(champion_measure(r, comparison.champions.get(r.heuristic, {})),
                                                 comparison) for r in champions))
    if measures and measures[0] != MEASURE:
        by_objective = _speed_verdict(comparison, split, measures)
        if by_objective is not None:  # else the rows lack the measure (no gamma): judged by the fitness
            return by_objective
    rows = [r for r in comparison.rows if r.split == split and r.role != VERIFIER and _measure(r) is not None]
    if not rows:
        return None
    ref = next((r for r in rows if r.role == "baseline" and r.heuristic == REFERENCE_RULE), None)
    ordered = ([ref] if ref is not None else []) + [r for r in rows if r is not ref]
    winner = ordered[0]
    for row in ordered[1:]:
        if _measure(row) > _measure(winner):
            winner = row
    value = _measure(winner)
    ref_value = _measure(ref) if ref is not None else None
    champs = [r for r in rows if r.role == "champion"]
    champ = None
    for row in champs:
        if champ is None or _measure(row) >= _measure(champ):  # ties: the last (``--champion`` files come last)
            champ = row
    info = comparison.champions.get(champ.heuristic, {}) if champ is not None else {}

    def name(row: Row) -> str:
        return "the champion" if row.heuristic == "champion" else (
            f"champion {row.heuristic}" if row.role == "champion" else row.heuristic)

    tied = _tied_with(winner, ordered, _measure)
    head = f"verdict: {_tie_head(winner, tied, name)} on {split} by {MEASURE}"
    runner_up = None
    if ref is None:
        text = f"{head} ({value:.3f}; {REFERENCE_RULE} was not scored)"
    elif winner is ref:
        others = [r for r in ordered[1:] if r is not champ]
        runner_up = max(others, key=_measure, default=None)
        text = f"{head} ({value:.3f})"
        if runner_up is not None and champ is None:
            text += f", {ref_value - _measure(runner_up):.3f} ahead of the next best, {runner_up.heuristic}"
    else:
        text = f"{head}: {value:.3f} against {REFERENCE_RULE}'s {ref_value:.3f} ({value - ref_value:+.3f})"
    reason = None
    hint: tuple[str, ...] = ()
    if champ is not None and champ is not winner:
        same, reason = _reason(champ, winner, ref, info, split)
        c_value = _measure(champ)
        if same:
            text += f"; {name(champ)} is {reason}"
        else:
            vs = f" ({c_value - ref_value:+.3f} against {REFERENCE_RULE})" if ref is not None else ""
            text += f"; {name(champ)} scores {c_value:.3f}{vs}: {reason}"
        if _needs_next_steps(champ, ref, info):
            hint = NEXT_STEPS
            text = "\n".join([*hint, text])
    return Verdict(split, MEASURE, winner.heuristic, winner.role, value, ref.heuristic if ref is not None else None,
                   ref_value, runner_up.heuristic if runner_up is not None else None,
                   _measure(runner_up) if runner_up is not None else None,
                   champ.heuristic if champ is not None else None, _measure(champ) if champ is not None else None,
                   info.get("champion_source") if champ is not None else None, reason, text, hint)


#: Rows whose values differ by at most this fraction tie (the same rule reached by two names, plain decoding rows).
TIE_RTOL = 1e-9


def _tied_with(winner: Row, rows: list[Row], value_of) -> list[Row]:
    """The rows of ``rows`` other than ``winner`` whose value (``value_of(row)``) equals the winner's up to
    :data:`TIE_RTOL`, a row of the winner's own rule (the same expression: a champion that is the winning rule)
    aside."""
    best = value_of(winner)
    return [r for r in rows if r is not winner and abs(value_of(r) - best) <= TIE_RTOL * abs(best)
            and (r.expression is None or r.expression != winner.expression)]


def _tie_head(winner: Row, tied: list[Row], name) -> str:
    """``X wins`` or, with ``tied`` rows, ``X and N others tie`` naming them (at most four named)."""
    if not tied:
        return f"{name(winner)} wins"
    named = ", ".join(name(r) for r in tied[:4]) + (f" and {len(tied) - 4} more" if len(tied) > 4 else "")
    return f"{name(winner)} ties with {named}: {len(tied) + 1} rows share the best value"


def _tv(row: Row) -> float:
    value = row.value("tv_per_token")
    return math.inf if value is None or math.isnan(float(value)) else float(value)


def _percent(value: float, reference: float) -> str:
    """``value`` against ``reference`` as a signed percentage (round-off below 0.05% shows as +0.0%)."""
    change = value / reference - 1.0
    return f"{0.0 if abs(change) < 5e-4 else change:+.1%}"


def _speed_verdict(comparison: Comparison, split: str, measures: list[str]) -> Verdict | None:
    """The verdict by a measure other than the fitness (``measures[0]``, the first champion's; module doc)."""
    measure = measures[0]
    words = MEASURE_WORDS.get(measure, measure)
    champs = [r for r in comparison.rows if r.split == split and r.role == "champion"
              and priced_measure(champion_measure(r, comparison.champions.get(r.heuristic, {})), comparison) == measure
              and _value(r, measure) is not None]
    if not champs:
        return None
    champ = champs[0]
    for row in champs[1:]:
        if _value(row, measure) >= _value(champ, measure):  # ties: the last (``--champion`` files come last)
            champ = row
    info = comparison.champions.get(champ.heuristic, {})
    budget = info.get("tv_budget")
    if isinstance(budget, (int, float)) and not isinstance(budget, bool) and math.isfinite(budget) and budget >= 0:
        limit, why = max(float(budget), _tv(champ)), "its run's TV budget"
    else:
        limit, why = _tv(champ), "the champion's own"
    rows = [r for r in comparison.rows if r.split == split and r.heuristic not in BOUNDS
            and _value(r, measure) is not None and (r is champ or _tv(r) <= limit + TV_SLACK)]
    ref = next((r for r in rows if r.role == "baseline" and r.heuristic == REFERENCE_RULE), None)
    ordered = ([ref] if ref is not None else []) + [r for r in rows if r is not ref]
    winner = ordered[0]
    for row in ordered[1:]:
        if _value(row, measure) > _value(winner, measure):
            winner = row
    value = _value(winner, measure)
    ref_value = _value(ref, measure) if ref is not None else None

    def name(row: Row) -> str:
        return "the champion" if row.heuristic == "champion" else (
            f"champion {row.heuristic}" if row.role == "champion" else row.heuristic)

    among = "lossless rules" if limit <= TV_SLACK else f"rules with TV per token <= {limit:.3g}, {why}"
    plain = PLAIN if never_drafts(winner) and winner is not champ else ""
    tied = _tied_with(winner, ordered, lambda r: _value(r, measure))
    text = f"verdict: {_tie_head(winner, tied, lambda r: name(r) + (plain if r is winner else ''))} on {split} by " \
           f"{words} ({value:.4g}, among {among})"
    reason = None
    seeded = _seeded_name(info.get("champion_source"))
    if champ is not winner:
        c_value = _value(champ, measure)
        vs = (f" ({_percent(c_value, ref_value)} against {REFERENCE_RULE})"
              if ref is not None and ref_value and ref is not champ else "")
        if champ in tied:
            reason = f"tied with {winner.heuristic}"
        else:
            reason = f"behind {winner.heuristic} ({_percent(c_value, value)})"
        if seeded is not None:
            reason += f"; it is the seeded rule {seeded} ({seeded_why(info)})"
        text += f"; {name(champ)} scores {c_value:.4g}{vs}: {reason}"
    if never_drafts(champ):
        text += f"; {name(champ)} is plain decoding (it never drafts)"
    if len(measures) > 1:
        others = ", ".join(MEASURE_WORDS.get(m, m) for m in measures[1:])
        text += f" (other champions optimise {others}: see their columns)"
    hint = speed_next_steps(champ, info) if measure in PRICED_MEASURES and (
        champ is not winner or never_drafts(champ)) else ()
    if hint:
        text = "\n".join([*hint, text])
    runner_up = None
    return Verdict(split, measure, winner.heuristic, winner.role, value, ref.heuristic if ref is not None else None,
                   ref_value, runner_up, None, champ.heuristic, _value(champ, measure),
                   info.get("champion_source"), reason, text, hint)


#: The speed measures whose champions (verification-length policies, tree shapes: evolved for tokens per second) get
#: what to try next (a per-token rule evolved for tokens per call gets none: its verdict names its objective).
PRICED_MEASURES = frozenset({"tokens_per_second", "speedup"})
#: What the verdict adds to the name of a row that never drafts.
PLAIN = " (plain decoding: it never drafts)"
#: The lines before a speed verdict whose champion never drafts.
PLAIN_NEXT_STEPS: tuple[str, ...] = (
    "next: the champion never drafts, so it is plain decoding: under its run's cost model no draft paid",
    "  for itself; a cheaper drafter, or the cost file measured on the backend you deploy",
    "  (python benchmark.py perf --write-costs FILE, then --costs FILE), can change that",
)


def never_drafts(row: Row) -> bool:
    """Whether ``row``'s rule drafts nothing in any call (its metrics' ``mean_drafted`` is 0: plain decoding)."""
    drafted = getattr(row.verifier, "mean_drafted", None)
    return isinstance(drafted, (int, float)) and not isinstance(drafted, bool) and drafted == 0


def speed_next_steps(champ: Row, info: Mapping[str, Any]) -> tuple[str, ...]:
    """What to try next when a champion judged by speed does not win or never drafts (each line at most 100
    characters but the paths): :data:`PLAIN_NEXT_STEPS` for a champion that never drafts, else a longer search of
    its own kind and objective on its run's dataset, at its run's gamma, under its run's cost file (``info``:
    :func:`champion_records`; a cost file measured on the backend deployed)."""
    if never_drafts(champ):
        return PLAIN_NEXT_STEPS
    kind = champ.program_kind if isinstance(champ.program_kind, str) else "KIND"
    objective = info.get("objective") if isinstance(info.get("objective"), str) else "tokens_per_second"
    from evolve.eval.objectives import OBJECTIVES

    run = [f"--{key.replace('_', '-')} {info[key]}" for key in ("data", "gamma") if info.get(key) is not None]
    priced = getattr(OBJECTIVES.get(objective), "reads_costs", False)
    costs = f"--costs {info.get('costs') or 'FILE'} " if priced else ""
    population, generations = longer_search(info.get("population"), info.get("generations"))
    return (
        "next: a longer search (more programs, more generations) may find a policy ahead of the winner:",
        f"  python -m evolve run --evolve {kind[:20]} --objective {objective[:30]} \\",
        *([f"    {' '.join(run)} \\"] if run else []),
        f"    {costs}--population {population} --generations {generations}",
        *(["  (a cost file measured on the backend you deploy: python benchmark.py perf --write-costs FILE)"]
          if priced else []),
    )


#: The search :func:`longer_search` suggests after a run of unknown size (the defaults' scale).
LONGER_SEARCH = (300, 30)


def longer_search(population: int | None, generations: int | None) -> tuple[int, int]:
    """(population, generations) of a search longer than the champion's own run (twice each of its recorded sizes,
    at least :data:`LONGER_SEARCH`), so the suggestion never asks for less than the run already did."""
    return (max(LONGER_SEARCH[0], 2 * population if population else 0),
            max(LONGER_SEARCH[1], 2 * generations if generations else 0))


def _needs_next_steps(champ: Row, ref: Row | None, info: Mapping[str, Any]) -> bool:
    """Whether the verdict says what to try next: ``champ`` does not beat standard rejection and its
    champion file (``info`` from :func:`champion_records`, which records the file's ``path``) was
    written by a run under an acceptance-quality objective."""
    if ref is None or "path" not in info or _measure(champ) > _measure(ref):
        return False
    return objective_measure(info.get("objective")) == MEASURE


def _run_settings(prov: Mapping[str, Any], config: Mapping[str, Any], reads_gamma: bool) -> dict[str, Any]:
    """The run's dataset (``data``), ``gamma`` (None for a kind that reads none) and cost file (``costs``; None: the
    built-in model) as its champion's provenance records them (None where it does not)."""
    data, costs = prov.get("data_dir"), config.get("costs")
    gamma = config.get("gamma") if reads_gamma else None
    sizes = {key: config.get(key) if type(config.get(key)) is int and config.get(key) > 0 else None
             for key in ("population", "generations")}
    return {"data": data if isinstance(data, str) and data else None,
            "gamma": gamma if type(gamma) is int else None,
            "costs": costs if isinstance(costs, str) and costs not in ("", "default") else None, **sizes}


def champion_records(labelled: Mapping[str, ComparedRule]) -> dict[str, dict[str, Any]]:
    """What the champion file of each champion entry records for the verdict, by row label.

    ``labelled`` maps row labels to entries; for each entry of role ``champion`` whose file can
    be found (a ``--champion`` file, or the file of that name in a champions directory) the result
    holds ``path``, ``objective``, ``champion_source`` (from its provenance: ``evolved`` or
    ``seeded:NAME``; None for files that do not record it), ``tv_budget`` (its run's, from the provenance's
    ``config``; None when not recorded) and its run's ``data``, ``gamma`` and ``costs`` (:func:`_run_settings`). A file that cannot be read again is
    left out: the verdict then reasons from the row alone.
    """
    from evolve.errors import InputError
    from heuristics.champions import champion_files, read_champion

    out: dict[str, dict[str, Any]] = {}
    listed: dict[Path, list[Path]] = {}
    for label, entry in labelled.items():
        if entry.role != "champion":
            continue
        origin = Path(entry.origin)
        try:
            if origin.is_dir():
                if origin not in listed:
                    listed[origin] = champion_files(origin)
                paths = listed[origin]
            else:
                paths = [origin]
            for path in paths:
                champ = read_champion(path)
                if champ.name == entry.rule.name:
                    prov = champ.provenance if isinstance(champ.provenance, dict) else {}
                    source = prov.get("champion_source")
                    config = prov.get("config") if isinstance(prov.get("config"), dict) else {}
                    budget = config.get("tv_budget")
                    guard = prov.get("champion_guard") if isinstance(prov.get("champion_guard"), dict) else {}
                    out[label] = {"path": str(path), "objective": champ.objective,
                                  "guard_kept": guard.get("kept") if isinstance(guard.get("kept"), bool) else None,
                                  "champion_source": source if isinstance(source, str) else None,
                                  "tv_budget": budget if isinstance(budget, (int, float))
                                  and not isinstance(budget, bool) else None,
                                  **_run_settings(prov, config, champ.program_kind.reads_gamma)}
                    break
        except (InputError, OSError, ValueError):
            continue
    return out


__all__ = ["BOUNDS", "LONGER_SEARCH", "MEASURE", "MEASURE_WORDS", "NEXT_STEPS", "PLAIN", "PLAIN_NEXT_STEPS",
           "PRICED_MEASURES", "TIE_RTOL", "Verdict", "champion_measure", "champion_records", "compute_verdict",
           "longer_search", "never_drafts", "objective_measure", "priced_measure", "seeded_why", "speed_next_steps",
           "verdict_split"]

"""The outcome of a search: scored entries, the champion among them, and :class:`SearchResult`.

:func:`finish` is the last step of every search (one population or many
islands): it scores the final candidates (hall-of-fame members, or the final
non-dominated front of a ``pareto`` run) and the seeded rules on train and
valid, and picks the champion with :func:`evolve.search.champion.choose`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evolve.eval.evaluator import Metrics
from evolve.gp.compiler import Node, from_tree, to_string
from evolve.search.champion import Candidate, choose
from evolve.search.config import RunConfig
from evolve.search.guard import GuardResult, guard
from evolve.search.operators import first_front
from evolve.search.state import SearchState
from evolve.search.warm_start import WarmStart


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
    """Outcome of :func:`evolve.search.algorithms.search` (or of an island search).

    ``logbook`` is one dict per generation (keys
    :data:`evolve.search.state.LOGBOOK_COLUMNS`; an island run's rows cover
    all islands); ``hall_of_fame`` is ordered best train fitness first (for a
    ``pareto`` run: the front, ascending TV per token on train);
    ``generations`` is the number of generations completed after the initial
    population; ``front`` is the final non-dominated front of a ``pareto`` run
    (None otherwise); ``warm_start`` the seeded and skipped rules (None when
    ``warm_start`` is off); ``champion_source`` is ``"evolved"``, or
    ``"seeded:NAME"`` when the champion is the seeded rule NAME (evolution
    found nothing better on valid); ``seeded`` holds the seeded rules'
    entries, in seed order; ``guard`` what the champion guard found
    (:mod:`evolve.search.guard`; None when it did not run); ``seconds`` is the search's wall time, summed
    over the sessions of a resumed run; ``epoch_timings`` an island search's
    timings, one dict per epoch of this session (see
    :func:`evolve.search.islands.island_search`; None for one population).
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
    guard: GuardResult | None = None
    epoch_timings: list[dict[str, float]] | None = None


def entries(state: SearchState, members) -> list[Entry]:
    """:class:`Entry` of each tree in ``members`` (train and valid metrics batched and cached)."""
    out = []
    for member, (tr, va) in zip(members, state.both_metrics(members)):
        nodes = from_tree(member)
        out.append(Entry(to_string(nodes), nodes, len(member), member.height, tr, va))
    return out


def finish(state: SearchState, features: tuple[str, ...], members: list, seeds: list, warm: WarmStart | None,
           evaluations: int, programs: int, seconds: float) -> SearchResult:
    """The :class:`SearchResult` of a search whose final candidates are ``members``.

    Args:
        state: the client's state (its evaluators score the candidates; its
            logbook, ``generations`` and ``interrupted`` go into the result).
        features: the run's terminal features.
        members: hall-of-fame members, best first (``pareto``: the final front;
            the front of the run is the first front of these members and the
            seeds, so a seeded rule that NSGA-II's crowding dropped comes back
            unless a member dominates it on train).
        seeds: the seeded individuals (empty without warm start), in seed order.
        warm: the warm start (None when off).
        evaluations, programs, seconds: totals of the whole search.
    """
    cfg = state.cfg
    pareto = cfg.objective_spec.multi
    if pareto and seeds:  # a seed lost to crowding comes back unless a final member dominates it on train
        state.evaluate(seeds)
        members = first_front(list(members) + list(seeds))
    found = entries(state, members)
    spec = cfg.objective_spec
    if pareto and spec.needs_blocks:  # the front, ascending TV per token on train (then more tokens, then smaller)
        found.sort(key=lambda e: (e.train.tv_per_token, -e.train.tokens_per_call, e.size, e.expression))
    elif pareto:  # another front: lexicographically by the objective's values on train, best first
        found.sort(key=lambda e: (tuple(-w * v for w, v in zip(spec.weights, spec.fitness_values(e.train, e.size, cfg))),
                                  e.size, e.expression))
    seeded = entries(state, seeds)
    if warm is None:
        names: list[str | None] = [None] * len(found)
    else:
        names = [warm.name_of(e.expression) for e in found] + [s.name for s in warm.seeds]
    pool = found + seeded
    candidates = [Candidate(e.train, e.valid, e.size, name) for e, name in zip(pool, names)]
    best = choose(candidates, state.objective, cfg.objective_spec, cfg, guarded=warm is not None)
    checked, rival = _guarded(state, pool, names, best) if warm is not None else (None, best)
    if checked is not None and not checked.kept:
        best = rival
    source = f"seeded:{names[best]}" if names[best] is not None else "evolved"
    return SearchResult(cfg, tuple(features), pool[best], found, state.logbook, state.generations,
                        state.interrupted, evaluations, programs, seconds, front=found if pareto else None,
                        warm_start=warm, champion_source=source, seeded=seeded, guard=checked)


def _guarded(state: SearchState, pool: list[Entry], names: list[str | None],
             best: int) -> tuple[GuardResult | None, int]:
    """(what the champion guard found, index of its seeded rival in ``pool``): :func:`evolve.search.guard.guard` of
    an evolved choice ``pool[best]`` against the best seeded entry on valid (the first of equals); (None, ``best``)
    when there is nothing to guard: the choice is a seeded rule, no rule was seeded, the kind's scorer cannot score
    a resample of the records (:attr:`evolve.kinds.base.ProgramKind.resamples`), valid has no text ids, or the run
    judges by cross-validation (``selection`` ``cv``: :mod:`evolve.search.crossval`, after the search)."""
    seeded = [i for i, name in enumerate(names) if name is not None]
    if names[best] is not None or not seeded or not state.cfg.program_kind.resamples or state.valid.text_runs is None:
        return None, best
    if state.cfg.selection == "cv":  # judged out of fold once the search is done (evolve.search.crossval)
        return None, best
    rival = max(seeded, key=lambda i: (state.objective(pool[i].valid), -i))
    found = guard(state.valid, state.scorer_of, state.objective, pool[best].nodes, pool[rival].nodes, names[rival])
    return found, rival


__all__ = ["Entry", "SearchResult", "entries", "finish"]

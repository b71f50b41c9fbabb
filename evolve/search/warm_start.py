"""The warm start of a search: which known rules the initial population starts with.

A search from random trees may miss a good rule that the registry holds all
along (under the acceptance-quality fitness standard rejection, min(1, p/q),
is a needle in a plateau), and a pareto search from random trees has to
rediscover what the published families already know. With ``warm_start`` (the
default) the initial population therefore contains known rules as parsed
expression trees:

1. the candidates: the registered rules (:func:`heuristics.registry.rules`: the
   baselines and the default rule of every published family; promoted
   champions are left out, so a run does not depend on the contents of the
   champions directory) and every grid member of every rule family
   (:func:`heuristics.registry.families`: the published rules and the relaxed
   rules inference engines ship), one per distinct expression;
2. a candidate is skipped, and recorded with the reason, when it is not an
   expression (a function rule) or reads a feature that is not among the run's
   features (e.g. ``overlap`` on data without that column);
3. all usable grid members are scored on train in one batched call
   (:class:`evolve.eval.population.PopulationEvaluator`, the run's evaluator
   settings) and the seeds are chosen by one mechanism, :func:`best_per_criterion`
   (for each criterion, the best candidate on train; ties go to the first in
   family and grid order):

   * single objective (``acceptance_quality``, ``expected``, ``speed_at_tv``):
     one criterion, the run's objective (:func:`evolve.search.state.score`),
     applied per family: each family's best grid member;
   * ``pareto``: one criterion per TV budget b of :data:`SEED_BUDGETS` plus the
     run's ``tv_budget`` and ``tv_cap`` (the member with the most tokens per
     call among those with TV per token <= b), applied three times:
     (a) to all families at once (the fastest member within each budget),
     (b) to each family (its fastest member within each budget), and
     (c) to each family's *depth-limited* members (:func:`depth_limited`,
     when ``draft_index`` is a feature): a member that relaxes acceptance only
     at the first depths of a block, ``if_gt(draft_index, k + 0.5, min(1, p/q),
     member)`` for k = 0 .. gamma - 2. That is the structure of the block
     oracle of ``benchmark.py pareto`` (:mod:`evolve.commands.pareto.oracle`):
     raising a threshold at depth k buys the token and every token after it,
     so a unit of damage is worth more at the start of a block than at its
     end, and the oracle accepts outright early rather than late;

4. the seeds, in this order: standard rejection, the chosen candidates (in
   the order (a), (b), (c) above, budgets ascending), the other registered
   rules; at most :data:`MAX_SEED_FRACTION` of the population (the rest stays
   random, for diversity). Seeds that do not fit are recorded as skipped.

So a pareto search starts with every family's best member at every budget,
and its final front is the first front of the final population together with
the seeds (:func:`evolve.search.result.finish`): every seed is on it unless an
evolved rule dominates it on train, so even a short search cannot fall below
the families on train.

The seeds replace the first members of the random initial population, so a
run with ``warm_start`` off draws exactly the population it drew before.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from evolve.errors import InputError
from evolve.eval.evaluator import EvalData, Metrics
from evolve.eval.objectives import block_values
from evolve.eval.population import PopulationEvaluator
from evolve.gp.compiler import parse, to_tree
from evolve.search.config import RunConfig
from heuristics.contract import Rule
from heuristics.registry import STANDARD_EXPRESSION, STANDARD_NAME, families, rules

#: TV-per-token budgets of the ``pareto`` seeds (those of ``benchmark.py pareto`` above 0; standard
#: rejection, always seeded, covers budget 0). The run's ``tv_budget`` and ``tv_cap`` are added.
SEED_BUDGETS: tuple[float, ...] = (0.005, 0.01, 0.02, 0.05)
#: At most this fraction of the initial population is seeded (at least one seed).
MAX_SEED_FRACTION = 0.5


@dataclass(frozen=True)
class Seed:
    """A rule put into the initial population: registry or grid name, expression and why it was chosen."""

    name: str
    expression: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        """``{"name", "expression", "reason"}``."""
        return {"name": self.name, "expression": self.expression, "reason": self.reason}


@dataclass(frozen=True)
class Skipped:
    """A rule (or a whole family, ``family NAME``) left out of the warm start, and why."""

    name: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        """``{"name", "reason"}``."""
        return {"name": self.name, "reason": self.reason}


@dataclass
class WarmStart:
    """The outcome of :func:`choose_seeds`: the seeds in population order and the skipped rules."""

    seeds: list[Seed] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """``{"seeded_rules": [...], "skipped_rules": [...]}`` (see :meth:`Seed.to_dict`, :meth:`Skipped.to_dict`)."""
        return {"seeded_rules": [s.to_dict() for s in self.seeds],
                "skipped_rules": [s.to_dict() for s in self.skipped]}

    def name_of(self, expression: str) -> str | None:
        """The name of the seed with this expression (as :func:`evolve.gp.compiler.to_string` writes it), or None."""
        return next((s.name for s in self.seeds if s.expression == expression), None)


def unusable(rule: Rule, features: tuple[str, ...]) -> str | None:
    """Why ``rule`` cannot be seeded into a search over ``features`` (None if it can).

    A function rule has no expression tree; an expression rule may read a
    feature that is not a terminal of the run.
    """
    if rule.expression is None:
        return "not an expression (a function rule)"
    missing = [f for f in rule.program.features if f not in features]
    if missing:
        return f"reads '{missing[0]}', which is not among the run's features"
    return None


def best_per_criterion(metrics: list[Metrics], groups: list[str],
                       criteria: dict[str, Callable[[Metrics], float]]) -> list[tuple[int, str, str]]:
    """For every criterion and every group, the index of the candidate with the highest finite value.

    Args:
        metrics: train metrics of the candidates, in candidate order.
        groups: the group of each candidate (a family name, or one shared name).
        criteria: name -> value of a candidate's metrics (higher is better;
            -inf or NaN excludes the candidate from that criterion).

    Returns: (index, criterion, group) per criterion and group that has a
    finite best, criteria in the given order, groups in order of first
    appearance; ties go to the lower index.
    """
    order = list(dict.fromkeys(groups))
    picks = []
    for name, value in criteria.items():
        for group in order:
            best, best_i = -math.inf, -1
            for i, (m, g) in enumerate(zip(metrics, groups)):
                if g != group:
                    continue
                v = value(m)
                if math.isfinite(v) and v > best:
                    best, best_i = v, i
            if best_i >= 0:
                picks.append((best_i, name, group))
    return picks


def _within(budget: float) -> Callable[[Metrics], float]:
    """Tokens per call when TV per token <= ``budget``, else -inf (the pareto seed criterion)."""
    def value(m: Metrics) -> float:
        tpc, tv = block_values(m)
        return tpc if tv <= budget else -math.inf
    return value


def seed_budgets(cfg: RunConfig) -> list[float]:
    """The TV-per-token budgets of the ``pareto`` seeds: :data:`SEED_BUDGETS`, ``tv_budget``, ``tv_cap``, ascending."""
    return sorted(set(SEED_BUDGETS) | {cfg.tv_budget, cfg.tv_cap})


def seeds_along_budgets(cfg: RunConfig) -> bool:
    """Whether the seeds are the fastest rules within TV budgets (an objective that keeps a front over the
    block metrics, such as ``pareto``) rather than the best of each family by the run's score."""
    spec = cfg.objective_spec
    return spec.multi and spec.needs_blocks


def criteria(cfg: RunConfig, objective: Callable[[Metrics], float]) -> dict[str, Callable[[Metrics], float]]:
    """The seed criteria of ``cfg`` (see the module doc): criterion name -> value of train metrics."""
    if not seeds_along_budgets(cfg):
        return {f"best {cfg.objective} on train": objective}
    return {f"most tokens per call on train with TV per token <= {b:g}": _within(b) for b in seed_budgets(cfg)}


def depth_limited(rule: Rule, depth: int) -> Rule:
    """``rule`` applied at draft_index <= ``depth`` only, standard rejection after it (see the module doc).

    The expression is ``if_gt(draft_index, depth + 0.5, min(1.0, div(target_prob,
    draft_prob)), E)`` with E the rule's expression; the name is
    ``"{rule.name}@draft_index<={depth}"``. Raises InputError if the rule has no expression that parses.
    """
    expression = f"if_gt(draft_index, {depth + 0.5}, {STANDARD_EXPRESSION}, {rule.expression})"
    return Rule(f"{rule.name}@draft_index<={depth}", f"{rule.description} at draft_index <= {depth}, else min(1, p/q)",
                rule.source, expression=expression)


def _family_picks(cfg: RunConfig, grid: list[Rule], families_of: list[str], metrics: list[Metrics],
                  what: str) -> list[Seed]:
    """Each family's fastest candidate within each seed budget on train, as seeds (``what``: how they were made)."""
    within = {b: _within(b) for b in seed_budgets(cfg)}
    picks = best_per_criterion(metrics, families_of, {f"{b:g}": value for b, value in within.items()})
    return [Seed(grid[i].name, grid[i].expression,
                 f"fastest {what}of family {group} on train within a TV per token of {budget}")
            for i, budget, group in sorted(picks, key=lambda p: (float(p[1]), families_of.index(p[2])))]


def choose_seeds(cfg: RunConfig, features: tuple[str, ...], train: EvalData, gamma: int | None,
                 objective: Callable[[Metrics], float]) -> WarmStart:
    """The seeds of a warm-started search over ``features`` (see the module doc).

    Args:
        cfg: the run's configuration (fitness, budgets, population size,
            acceptance-quality parameters).
        features: the run's terminal features.
        train: the train split the candidates are scored on.
        gamma: draft length of the block metrics (None unless the objective needs them).
        objective: the run's objective of a rule's train metrics (higher is better).

    Returns: :class:`WarmStart` (seeds in population order, skipped rules). (A relaxed block
    verification search is seeded by :mod:`evolve.kinds.relaxation.search_seeds` instead; the choice is
    :func:`initial_seeds`.)
    """
    warm = WarmStart()
    registered: list[Rule] = []
    for rule in rules():
        why = unusable(rule, features)
        if why is None:
            registered.append(rule)
        else:
            warm.skipped.append(Skipped(rule.name, why))
    grid: list[Rule] = []
    groups: list[str] = []
    families_of: list[str] = []
    along_budgets = seeds_along_budgets(cfg)
    for family in families().values():
        members = [rule for _, rule in family.rules()]
        reasons = [unusable(r, features) for r in members]
        bad = [w for w in reasons if w is not None]
        if bad:
            count = "every grid member" if len(bad) == len(members) else f"{len(bad)} of {len(members)} grid members"
            warm.skipped.append(Skipped(f"family {family.name}", f"{count}: {bad[0]}"))
        for rule, why in zip(members, reasons):
            if why is None:
                grid.append(rule)
                groups.append("all families" if along_budgets else family.name)
                families_of.append(family.name)
    scorer = PopulationEvaluator(train, cfg.acceptance_quality_fitness(), gamma=gamma, cache_size=0)
    metrics = scorer.evaluate(grid) if grid else []
    chosen: list[Seed] = []
    for i, criterion, group in best_per_criterion(metrics, groups, criteria(cfg, objective)):
        rule = grid[i]
        where = "" if along_budgets else f" in family {group}"
        chosen.append(Seed(rule.name, rule.expression, f"{criterion}{where}"))
    if along_budgets:
        chosen += _family_picks(cfg, grid, families_of, metrics, "")
        chosen += _depth_limited_picks(cfg, features, grid, families_of, metrics, scorer, gamma)
    standard = [r for r in registered if r.name == STANDARD_NAME]
    ordered = [Seed(r.name, r.expression, "registered rule (the lossless reference)") for r in standard]
    ordered += chosen
    ordered += [Seed(r.name, r.expression, "registered rule") for r in registered if r.name != STANDARD_NAME]
    return fill_seeds(warm, ordered, cfg.population)


def fill_seeds(warm: "WarmStart", ordered: list["Seed"], population: int) -> "WarmStart":
    """Add ``ordered`` to ``warm.seeds`` in order, skipping an expression already seeded and, once
    :data:`MAX_SEED_FRACTION` of ``population`` is seeded, recording the rest in ``warm.skipped``.
    Returns ``warm``."""
    room = max(1, int(population * MAX_SEED_FRACTION))
    for seed in ordered:
        if warm.name_of(seed.expression) is not None:
            continue  # the same expression chosen twice (e.g. a family default that is best of its grid)
        if len(warm.seeds) >= room:
            warm.skipped.append(Skipped(seed.name, f"no room: at most {room} of the population of "
                                                   f"{population} are seeded"))
            continue
        warm.seeds.append(seed)
    return warm


def _depth_limited_picks(cfg: RunConfig, features: tuple[str, ...], grid: list[Rule], families_of: list[str],
                         metrics: list[Metrics], scorer: PopulationEvaluator, gamma: int | None) -> list[Seed]:
    """The ``pareto`` seeds of step 3(c) of the module doc: each family's fastest depth-limited member per budget.

    Only lossy members (TV per token > 0 on train) are limited, at depths
    0 .. gamma - 2; nothing when ``draft_index`` is not a feature or gamma is None.
    """
    if "draft_index" not in features or gamma is None:
        return []
    limited, limited_families = [], []
    for rule, family, m in zip(grid, families_of, metrics):
        if block_values(m)[1] > 0.0:
            for depth in range(gamma - 1):
                limited.append(depth_limited(rule, depth))
                limited_families.append(family)
    if not limited:
        return []
    return _family_picks(cfg, limited, limited_families, scorer.evaluate(limited), "depth-limited member ")


def seed_individuals(warm: WarmStart, pset, individual: type) -> list:
    """The seeds as DEAP individuals of class ``individual`` over ``pset`` (constants become ephemerals).

    Raises: InputError if a seed reads a feature ``pset`` lacks (:func:`choose_seeds` skips those).
    """
    return [individual(to_tree(parse(s.expression, f"seeded rule {s.name}"), pset)) for s in warm.seeds]


def initial_seeds(cfg: RunConfig, features: tuple[str, ...], train: EvalData, gamma: int | None,
                  objective: Callable[[Metrics], float]) -> WarmStart:
    """The seeds of a warm-started search, by the kind of program it evolves (its ``seeds`` hook, arguments as
    :func:`choose_seeds`).

    Raises: InputError (param ``warm_start``) for a kind with no warm start (run it with warm_start off).
    """
    seeder = cfg.program_kind.hooks().seeds
    if seeder is None:
        raise InputError(f"no warm start for {cfg.evolve} programs; start from random trees", param="warm_start")
    return seeder(cfg, features, train, gamma, objective)


def check_resumed_warm(warm: WarmStart, cfg: RunConfig, features: tuple[str, ...], train: EvalData,
                       gamma: int | None, objective: Callable[[Metrics], float], where: str) -> None:
    """Refuse a resumed checkpoint's warm start unless it is the one the run makes: :func:`initial_seeds` is run
    again (on the same train split: its digest is checked on resume) and compared seed by seed, so every seed's name
    is the rule whose expression it holds (a champion described as "the seeded rule NAME" is that rule). The states
    of ``random`` and ``numpy.random`` are kept.

    Raises: InputError naming ``where``, the field (``warm.seeds[3]``) and both seeds.
    """
    import random

    import numpy as np

    kept = random.getstate(), np.random.get_state()
    try:
        again = initial_seeds(cfg, features, train, gamma, objective)
    finally:
        random.setstate(kept[0])
        np.random.set_state(kept[1])
    for part, held, made in (("seeds", warm.seeds, again.seeds), ("skipped", warm.skipped, again.skipped)):
        for k in range(max(len(held), len(made))):
            a = held[k] if k < len(held) else None
            b = made[k] if k < len(made) else None
            if a != b:
                said = "nothing" if a is None else f"{a.name!r} = {getattr(a, 'expression', a.reason)!r}"
                want = "nothing" if b is None else f"{b.name!r} = {getattr(b, 'expression', b.reason)!r}"
                raise InputError(f"{where}: the checkpoint's field 'warm.{part}[{k}]' holds {said[:120]}, but the "
                                 f"run's warm start has {want[:120]} there (a seed's name must be the rule whose "
                                 f"expression it holds)")


__all__ = ["check_resumed_warm", "initial_seeds", "SEED_BUDGETS", "MAX_SEED_FRACTION", "Seed", "Skipped", "WarmStart", "unusable", "best_per_criterion", "fill_seeds",
           "seed_budgets", "criteria", "depth_limited", "choose_seeds", "seed_individuals"]

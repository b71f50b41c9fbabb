"""Speed/damage curves: scored rules, non-dominated points, best tokens per call at a budget, hypervolume.

A curve holds scored rules, each a point (x = expected TV per emitted token,
the damage, lower is better; y = expected tokens per target call, the speed,
higher is better). Its ``points`` are the non-dominated pairs, ascending in TV.
``best_at_budget[b]`` is the largest tokens per call among its rules with
tv_per_token <= b (None when none qualifies); at b = 0 only rules that passed
the exact lossless check count (:func:`evolve.commands.pareto.command.lossless_violation`).

Hypervolume (:func:`hypervolume`): the area, in (tokens per call) x (TV per
token), dominated by the curve's points with tv_per_token <= the largest
budget, above the reference point (tv_per_token = largest budget,
tokens_per_call = 1): the integral over t in [0, max budget] of
max(0, best tokens per call with TV <= t, minus 1). 1 token per call is what
a target call emits with no draft accepted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from evolve.errors import InputError

#: Default TV-per-token budgets of the comparison.
DEFAULT_BUDGETS: tuple[float, ...] = (0.0, 0.005, 0.01, 0.02, 0.05)
#: Curve name of the evolved rules.
EVOLVED = "evolved"
#: Names of the references beside the curves: lossless block verification, the learned per-token rule.
BLOCK_VERIFICATION = "block_verification"
#: Categories of the per-token curves the comparison ranks (families, named rules, evolved rules); a curve of another
#: category (block verification, the learned rule, the relaxed curves) is a reference drawn beside them.
PER_TOKEN_CATEGORIES: tuple[str, ...] = ("family", "rule", "evolved")
LEARNED_CURVE = "learned"


@dataclass
class RulePoint:
    """One scored rule: its label (parameter value or expression), metrics and lossless check.

    ``lossless`` is True/False when the exact per-record check ran (rules with
    zero TV per token, or declared lossless), None otherwise; ``violation`` is
    the first record index where clamped tau > min(1, p/q), or None.
    """

    label: str
    tv_per_token: float
    tokens_per_call: float
    expression: str | None = None
    lossless: bool | None = None
    violation: int | None = None
    declared_lossless: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        d = {"label": self.label, "tv_per_token": self.tv_per_token, "tokens_per_call": self.tokens_per_call,
             "lossless": self.lossless}
        if self.expression is not None:
            d["expression"] = self.expression
        if self.violation is not None:
            d["first_violation_row"] = self.violation
        return d


@dataclass
class Curve:
    """A family's (or one named rule's, or the evolved rules') scored rules and what the comparison derives.

    The references beside the curves are curves too: ``block_verification``
    (category ``lossless``, one point at TV 0) and ``learned`` (category ``learned``).
    """

    name: str
    category: str  # "family", "rule", "evolved", "lossless", "learned" or a relaxed one (RELAXED_CATEGORIES)
    source: str
    parameter: str | None
    rules: list[RulePoint]
    points: list[tuple[float, float]] = field(default_factory=list)
    best_at_budget: dict[str, float | None] = field(default_factory=dict)
    best_rule: dict[str, str | None] = field(default_factory=dict)
    hypervolume: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def member(self, key: str) -> str | None:
        """The best rule at budget ``key`` as a name :func:`heuristics.registry.get_rule` resolves:
        ``FAMILY:VALUES`` for a family with a parameter (``fuzzy_sd:T=0.1125``), the family's name for
        one without; None when no rule fits the budget or the curve is no family."""
        label = self.best_rule.get(key)
        if label is None or self.category != "family":
            return None
        return self.name if self.parameter is None else f"{self.name}:{label}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: points, best_at_budget, hypervolume, then details (and ``extra``'s keys, if any)."""
        return {"points": [[tv, tpc] for tv, tpc in self.points], "best_at_budget": dict(self.best_at_budget),
                "hypervolume": self.hypervolume, "category": self.category, "source": self.source,
                "parameter": self.parameter, "best_rule": dict(self.best_rule),
                "lossless_at_0": any(r.lossless for r in self.rules),
                "rules": [r.to_dict() for r in self.rules], **self.extra}


def budget_key(budget: float) -> str:
    """The JSON key of a budget: ``format(budget, 'g')`` (``0``, ``0.005``, ``0.01``...)."""
    return format(float(budget), "g")


def check_budgets(budgets: Sequence[float], param: str = "budgets") -> tuple[float, ...]:
    """TV-per-token budgets in [0, 1] -> sorted tuple of floats without duplicates.

    Raises: InputError naming the parameter ``param`` and the first bad budget, or for an empty sequence.
    """
    out: set[float] = set()
    for raw in budgets:
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise InputError(f"not a number (value {raw!r})", param=param) from None
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise InputError(f"a budget is a TV per token in [0, 1] (value {raw!r})", param=param)
        out.add(value)
    if not out:
        raise InputError(f"no budget given (value {tuple(budgets)!r})", param=param)
    return tuple(sorted(out))


def nondominated(points: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (tv, tokens) pairs no other pair beats (TV down, tokens up), ascending in TV and tokens.

    Of equal pairs one is kept; NaN pairs are dropped.
    """
    pts = sorted(((float(tv), float(t)) for tv, t in points if not (math.isnan(tv) or math.isnan(t))),
                 key=lambda p: (p[0], -p[1]))
    out: list[tuple[float, float]] = []
    for tv, t in pts:
        if not out or t > out[-1][1]:
            if out and out[-1][0] == tv:
                continue
            out.append((tv, t))
    return out


def best_at_budget(rules: Sequence[RulePoint], budget: float) -> RulePoint | None:
    """The rule with the most tokens per call among those with tv_per_token <= ``budget``.

    At budget 0 only rules whose exact lossless check passed qualify (see the
    module doc). Ties: the first in order. None when no rule qualifies.
    """
    best = None
    for r in rules:
        if math.isnan(r.tokens_per_call) or math.isnan(r.tv_per_token):
            continue
        ok = r.lossless is True if budget == 0 else r.tv_per_token <= budget
        if ok and (best is None or r.tokens_per_call > best.tokens_per_call):
            best = r
    return best


def hypervolume(points: Iterable[tuple[float, float]], tv_ref: float, tokens_ref: float = 1.0) -> float:
    """2-D hypervolume of (tv_per_token, tokens_per_call) points against (tv_ref, tokens_ref).

    The area of {(x, y): some point has tv <= x <= tv_ref and tokens_ref <= y <= tokens},
    i.e. the integral over x in [0, tv_ref] of max(0, max{tokens : tv <= x} - tokens_ref).
    Points with tv > tv_ref or tokens <= tokens_ref add nothing. Units: tokens
    per call times TV per token.
    """
    front = [(tv, t) for tv, t in nondominated(points) if tv <= tv_ref and t > tokens_ref]
    area = 0.0
    for i, (tv, t) in enumerate(front):
        nxt = front[i + 1][0] if i + 1 < len(front) else tv_ref
        area += (nxt - max(tv, 0.0)) * (t - tokens_ref)
    return area


def finish_curve(curve: Curve, budgets: Sequence[float]) -> Curve:
    """Fill ``points``, ``best_at_budget``, ``best_rule`` and ``hypervolume`` of ``curve`` from its rules."""
    curve.points = nondominated((r.tv_per_token, r.tokens_per_call) for r in curve.rules)
    for b in budgets:
        best = best_at_budget(curve.rules, b)
        curve.best_at_budget[budget_key(b)] = None if best is None else best.tokens_per_call
        curve.best_rule[budget_key(b)] = None if best is None else best.label
    curve.hypervolume = hypervolume(curve.points, max(budgets))
    return curve


@dataclass
class ParetoComparison:
    """Result of :func:`evolve.commands.pareto.command.run_pareto`: curves (families in registry order, then the
    named rules, then ``evolved``), the oracle bound, notes, and the references beside the curves
    (``block_verification``, ``learned``), which the verdict does not rank but
    :meth:`versus_references` compares with."""

    split: str
    source: str
    tokens: int
    blocks: int
    gamma: int
    budgets: tuple[float, ...]
    curves: dict[str, Curve]
    bound: dict[str, Any]
    notes: list[str]
    runs: list[str]
    references: dict[str, Curve] = field(default_factory=dict)
    #: The cost file's model (:class:`evolve.eval.costs.Costs`) of ``--costs``, or None.
    costs: Any = None

    def families(self) -> list[Curve]:
        """The published-family curves."""
        return [c for c in self.curves.values() if c.category == "family"]

    def verdict(self) -> dict[str, Any]:
        """How the evolved curve compares with the best family at each budget above 0, and by hypervolume.

        Keys: ``margins`` {budget key: {"evolved", "best_family", "best_family_value",
        "best_family_rule" (the best point as a rule name, ``FAMILY:VALUES``), "margin"}}
        (margin = evolved / best family - 1, None when either is missing),
        ``beats_all_above_0`` (bool or None without an evolved curve),
        ``largest_hypervolume`` (the name of the curve, among the rule families and the evolved curve, with the
        largest hypervolume), ``largest_hypervolume_of_all`` (the same among every row of the table: the curves
        and the references, block verification, the learned rule and relaxed block verification).
        """
        evolved = self.curves.get(EVOLVED)
        margins = {}
        beats = None if evolved is None else True
        for b in self.budgets:
            if b == 0:
                continue
            key = budget_key(b)
            fam = [(c.best_at_budget[key], c.name) for c in self.families() if c.best_at_budget[key] is not None]
            best_val, best_name = max(fam) if fam else (None, None)
            ev = None if evolved is None else evolved.best_at_budget[key]
            margin = None if ev is None or best_val is None else ev / best_val - 1.0
            margins[key] = {"evolved": ev, "best_family": best_name, "best_family_value": best_val,
                            "best_family_rule": None if best_name is None else self.curves[best_name].member(key),
                            "margin": margin}
            if evolved is not None and (ev is None or (best_val is not None and ev <= best_val)):
                beats = False
        largest = max(self.curves.values(), key=lambda c: c.hypervolume).name if self.curves else None
        every = [*self.curves.values(), *self.references.values()]
        of_all = max(every, key=lambda c: c.hypervolume).name if every else None
        return {"margins": margins, "beats_all_above_0": beats, "largest_hypervolume": largest,
                "largest_hypervolume_of_all": of_all}

    def versus_references(self) -> dict[str, Any]:
        """How the evolved curve and every family compare with the references at each budget.

        Keys (present only with the reference): ``block_verification``
        {"tokens_per_call", "budgets": {budget key: {"evolved": bool or None
        (no evolved curve or no rule within the budget counts as not beating),
        "families": {family: bool}, "beaten_by": [curve names with more tokens
        per call]}}}; ``learned`` {budget key: {"learned", "evolved", "margin"
        (evolved / learned - 1), "evolved_rule", "evolved_size" (nodes)}}.
        "Beats" means strictly more tokens per call within the budget.
        """
        out: dict[str, Any] = {}
        evolved = self.curves.get(EVOLVED)
        bv = self.references.get(BLOCK_VERIFICATION)
        if bv is not None:
            value = bv.best_at_budget[budget_key(self.budgets[0])]
            per = {}
            for b in self.budgets:
                key = budget_key(b)
                beats = {c.name: c.best_at_budget[key] is not None and c.best_at_budget[key] > value
                         for c in self.families()}
                ev = None if evolved is None else (evolved.best_at_budget[key] is not None
                                                   and evolved.best_at_budget[key] > value)
                ahead = [c.name for c in self.curves.values()
                         if c.best_at_budget[key] is not None and c.best_at_budget[key] > value]
                per[key] = {"evolved": ev, "families": beats, "beaten_by": ahead}
            out[BLOCK_VERIFICATION] = {"tokens_per_call": value, "budgets": per}
        learned = self.references.get(LEARNED_CURVE)
        if learned is not None:
            per = {}
            for b in self.budgets:
                key = budget_key(b)
                lv = learned.best_at_budget[key]
                ev = None if evolved is None else evolved.best_at_budget[key]
                rule = None if evolved is None else evolved.best_rule[key]
                per[key] = {"learned": lv, "evolved": ev,
                            "margin": None if ev is None or lv is None else ev / lv - 1.0,
                            "evolved_rule": rule, "evolved_size": None if rule is None else expression_size(rule)}
            out[LEARNED_CURVE] = per
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (see :func:`evolve.report.pareto.format.format_json`)."""
        return {
            "split": self.split, "data": self.source, "tokens": self.tokens, "blocks": self.blocks,
            "gamma": self.gamma, "budgets": list(self.budgets),
            "reference_point": {"tv_per_token": max(self.budgets), "tokens_per_call": 1.0},
            "curves": {name: c.to_dict() for name, c in self.curves.items()},
            "references": {name: c.to_dict() for name, c in self.references.items()},
            "bound": self.bound, "verdict": self.verdict(), "versus_references": self.versus_references(),
            "runs": list(self.runs), "notes": list(self.notes),
        }


def expression_size(expression: str) -> int | None:
    """Nodes of an expression in prefix form, or None when it does not parse."""
    from evolve.gp.compiler import parse
    try:
        return len(parse(expression))
    except InputError:
        return None


__all__ = ["DEFAULT_BUDGETS", "EVOLVED", "BLOCK_VERIFICATION", "LEARNED_CURVE", "expression_size", "RulePoint", "Curve", "ParetoComparison", "budget_key", "check_budgets",
           "nondominated", "best_at_budget", "hypervolume", "finish_curve"]

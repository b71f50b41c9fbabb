"""Speed/damage trade-off curves: published rule families against evolved fronts (``benchmark.py pareto``).

    python benchmark.py pareto [--data DIR] [--split test] [--run RUN_DIR ...]
                               [--budgets 0,0.005,0.01,0.02,0.05] [--gamma N]
                               [--format table|json] [--output FILE] [--plot/--no-plot]

Every rule is scored on one split with the block metrics of
:mod:`evolve.eval.evaluator` (notes ``acceptance-math.md`` section 3): x = expected
TV per emitted token (damage, down), y = expected tokens per target call with
draft length gamma (speed, up).

Curves
    * one per published family of :data:`heuristics.published.FAMILIES`
      (``standard`` is the lossless point), every value of the family's grid;
      families that need a column the split lacks are skipped with a note;
    * ``evolved``: every rule of the ``--run`` directories (``front.json`` of a
      ``--fitness pareto`` run, else the run's ``hall_of_fame.json`` and
      ``champion.json``), all together;
    * ``bound`` (reported beside the curves, not one of them): what a block
      oracle achieves, and an upper bound no acceptance rule can exceed on the
      split (:func:`oracle_bound`).

A curve's ``points`` are its non-dominated (tv_per_token, tokens_per_call)
pairs, ascending in TV. ``best_at_budget[b]`` is the largest tokens per call
among its rules with tv_per_token <= b (None when none qualifies). At b = 0
only rules that pass the exact lossless check count: clamped tau <= min(1, p/q)
on every record of the split (:func:`lossless_violation`), which is stricter
than an expected TV of 0 (it covers depths >= gamma too); the table marks such
values with ``✓``.

Hypervolume (:func:`hypervolume`): the area, in (tokens per call) x (TV per
token), dominated by the curve's points with tv_per_token <= the largest
budget, above the reference point (tv_per_token = largest budget,
tokens_per_call = 1): the integral over t in [0, max budget] of
max(0, best tokens per call with TV <= t, minus 1). 1 token per call is what
a target call emits with no draft accepted.

The plot (PNG) shows every curve's staircase (TV per token on x, tokens per
call on y) with the budgets as vertical lines; it is written next to
``--output`` (suffix .png), else to ``results/pareto_<split>.png``.
"""
from __future__ import annotations

import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import click
import numpy as np

from data.errors import InputError
from data.io import SPLITS, load_split
from evolve.report.output import check_output, resolve_format, write_outputs
from evolve.gp.compiler import compile_nodes, parse, to_string
from evolve.eval.evaluator import EvalData, Metrics, check_gamma, thresholds
from evolve.eval.objectives import DEFAULT_GAMMA
from evolve.eval.population import PopulationEvaluator
from heuristics.contract import Rule

#: Default TV-per-token budgets of the comparison.
DEFAULT_BUDGETS: tuple[float, ...] = (0.0, 0.005, 0.01, 0.02, 0.05)
#: Values of ``--format``.
FORMATS: tuple[str, ...] = ("table", "json")
#: Curve name of the evolved rules.
EVOLVED = "evolved"
#: Where the plot goes without ``--output``.
DEFAULT_RESULTS_DIR = Path("results")
#: Lagrange multipliers swept by the oracle bound (per unit of block TV, in tokens).
ORACLE_LAMBDAS = 1601


# --- curves -------------------------------------------------------------------------------------

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
    """A family's (or the evolved rules') scored rules and what the comparison derives from them."""

    name: str
    kind: str  # "family" or "evolved"
    source: str
    parameter: str | None
    rules: list[RulePoint]
    points: list[tuple[float, float]] = field(default_factory=list)
    best_at_budget: dict[str, float | None] = field(default_factory=dict)
    best_rule: dict[str, str | None] = field(default_factory=dict)
    hypervolume: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: points, best_at_budget, hypervolume, then details."""
        return {"points": [[tv, tpc] for tv, tpc in self.points], "best_at_budget": dict(self.best_at_budget),
                "hypervolume": self.hypervolume, "kind": self.kind, "source": self.source,
                "parameter": self.parameter, "best_rule": dict(self.best_rule),
                "lossless_at_0": any(r.lossless for r in self.rules),
                "rules": [r.to_dict() for r in self.rules]}


def budget_key(budget: float) -> str:
    """The JSON key of a budget: ``format(budget, 'g')`` (``0``, ``0.005``, ``0.01``...)."""
    return format(float(budget), "g")


def parse_budgets(text: str | Sequence[float], option: str = "--budgets") -> tuple[float, ...]:
    """Comma-separated TV-per-token budgets in [0, 1] -> sorted tuple without duplicates.

    Raises: InputError naming ``option`` and the first bad item, or for an empty list.
    """
    items = text.split(",") if isinstance(text, str) else list(text)
    out: set[float] = set()
    for item in items:
        raw = item.strip() if isinstance(item, str) else item
        if raw == "":
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise InputError(f"option '{option}': not a number (value {raw!r})") from None
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise InputError(f"option '{option}': a budget is a TV per token in [0, 1] (value {raw!r})")
        out.add(value)
    if not out:
        raise InputError(f"option '{option}': no budget given (value {text!r})")
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


# --- lossless check -----------------------------------------------------------------------------

def lossless_violation(rule, data: EvalData) -> int | None:
    """First record where the rule's clamped threshold exceeds min(1, p/q), or None if there is none.

    ``rule`` is a :class:`heuristics.contract.Rule` or a compiled program. The
    output of speculative sampling is exactly the target's distribution iff
    tau(x) <= p(x)/q(x) for every token (notes section 1), so None means the
    rule is lossless on every record of the split (NaN/inf thresholds count as
    0, a rejection). Raises InputError if the rule needs a column the split lacks.
    """
    tau = thresholds(rule, data)
    t = np.where(np.isfinite(tau), np.clip(tau, 0.0, 1.0), 0.0)
    bad = np.flatnonzero(t > data.r)
    return int(bad[0]) if bad.size else None


def _score(rules: Sequence[Rule | str], labels: Sequence[str], data: EvalData, gamma: int,
           declared: Sequence[bool] | None = None) -> list[RulePoint]:
    """Score expression rules (or expression strings) in one batch; check lossless where TV is 0."""
    if not rules:
        return []
    metrics: list[Metrics] = PopulationEvaluator(data, gamma=gamma, cache_size=0).evaluate(rules)
    out = []
    for i, (rule, label, m) in enumerate(zip(rules, labels, metrics)):
        expr = rule if isinstance(rule, str) else rule.expression
        point = RulePoint(label, float(m.tv_per_token), float(m.tokens_per_call), expr,
                          declared_lossless=bool(declared[i]) if declared is not None else False)
        if m.tv_per_token == 0.0 or point.declared_lossless:
            program = compile_nodes(parse(rule, "rule")) if isinstance(rule, str) else rule
            point.violation = lossless_violation(program, data)
            point.lossless = point.violation is None
        out.append(point)
    return out


def family_curve(family, data: EvalData, gamma: int, budgets: Sequence[float]) -> tuple[Curve | None, str | None]:
    """Sweep a :class:`heuristics.published.Family` over its grid on ``data``.

    Returns (curve, None), or (None, note) when the split lacks a column the family needs.
    """
    missing = [c for c in family.columns if c not in data.available]
    if missing:
        return None, (f"skipped {family.name}: it needs column '{missing[0]}', which "
                      f"{data.source} lacks")
    pairs = family.rules()
    labels = [family.name if v is None else f"{family.parameter}={v:g}" for v, _ in pairs]
    rules = [r for _, r in pairs]
    points = _score(rules, labels, data, gamma, [r.lossless for r in rules])
    return finish_curve(Curve(family.name, "family", family.source, family.parameter, points), budgets), None


# --- evolved rules --------------------------------------------------------------------------------

def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"option '--run': {path}: cannot read ({' '.join(str(exc).split())})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"option '--run': {path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None


def _expressions(doc, path: Path, key: str | None) -> list[str]:
    items = doc.get(key) if key is not None and isinstance(doc, dict) else doc
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        raise InputError(f"option '--run': {path}: expected a list of rules"
                         + (f" under '{key}'" if key else "") + f" (found {type(items).__name__})")
    out = []
    for i, item in enumerate(items):
        expr = item.get("expression") if isinstance(item, dict) else None
        if not isinstance(expr, str):
            raise InputError(f"option '--run': {path}: rule {i} has no 'expression' string")
        out.append(expr)
    return out


def run_expressions(run_dir: str | os.PathLike) -> tuple[list[str], str]:
    """The evolved expressions of one run directory and the file(s) they came from.

    ``front.json`` (key ``front``, written by ``--fitness pareto`` runs) when
    present, else ``hall_of_fame.json`` plus ``champion.json``.
    Raises: InputError for a missing directory, no rule file, or malformed JSON.
    """
    d = Path(run_dir)
    if not d.is_dir():
        raise InputError(f"option '--run': {d}: no such run directory")
    front = d / "front.json"
    if front.is_file():
        return _expressions(_read_json(front), front, "front"), str(front)
    found, exprs = [], []
    for name, key in (("hall_of_fame.json", None), ("champion.json", None)):
        path = d / name
        if path.is_file():
            exprs += _expressions(_read_json(path), path, key)
            found.append(str(path))
    if not found:
        raise InputError(f"option '--run': {d}: no front.json, hall_of_fame.json or champion.json "
                         "(is it a run directory of `python -m evolve run`?)")
    return exprs, " + ".join(found)


def evolved_curve(run_dirs: Sequence[str | os.PathLike], data: EvalData, gamma: int,
                  budgets: Sequence[float]) -> tuple[Curve, list[str]]:
    """Score every distinct rule of the run directories on ``data`` as the ``evolved`` curve.

    Rules that read a column the split lacks are skipped with a note.
    Returns (curve, notes). Raises InputError for unreadable runs or unparsable expressions.
    """
    seen: dict[str, str] = {}
    sources, notes = [], []
    for run_dir in run_dirs:
        exprs, src = run_expressions(run_dir)
        sources.append(src)
        for i, text in enumerate(exprs):
            nodes = parse(text, f"{src}: rule {i}")
            key = to_string(nodes)
            if key in seen:
                continue
            needs = [n.value for n in nodes if n.kind == "feature" and n.value not in data.available]
            if needs:
                notes.append(f"skipped evolved rule {key[:60]}: it needs column '{needs[0]}', "
                             f"which {data.source} lacks")
                seen[key] = ""
                continue
            seen[key] = src
    exprs = [k for k, v in seen.items() if v]
    points = _score(exprs, exprs, data, gamma)
    curve = Curve(EVOLVED, "evolved", ", ".join(sources), None, points)
    return finish_curve(curve, budgets), notes


# --- oracle bound -------------------------------------------------------------------------------

def block_matrix(data: EvalData, gamma: int) -> tuple[np.ndarray, np.ndarray]:
    """(R, valid): R float64 (B, gamma) = min(1, p/q) of each block's depths, valid bool (B, gamma).

    Blocks start at rows with draft_index 0 (rows before the first start are
    ignored, as by the evaluator); depths >= gamma are ignored.
    """
    depth = data.depth
    if depth is None:
        raise InputError(f"{data.source}: the comparison needs column 'draft_index' (speculation blocks)")
    starts = np.flatnonzero(depth == 0)
    ends = np.append(starts[1:], data.n)
    B = starts.size
    R = np.zeros((B, gamma))
    valid = np.zeros((B, gamma), dtype=bool)
    for k in range(gamma):
        rows = starts + k
        ok = rows < ends
        ok[ok] &= depth[rows[ok]] == k
        valid[:, k] = ok
        R[ok, k] = data.r[rows[ok]]
    return R, valid


def _oracle_policy(R: np.ndarray, valid: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best block policy for T - lam*D: per block (tokens T, damage D, 1 + v_0) with tau_k in {r_k, 1}."""
    B, gamma = R.shape
    v = np.zeros(B)
    take = np.zeros((B, gamma), dtype=bool)
    for k in range(gamma - 1, -1, -1):
        r = R[:, k]
        one = (1.0 + v) - lam * (1.0 - r)
        std = r * (1.0 + v)
        take[:, k] = valid[:, k] & (one > std)
        v = np.where(valid[:, k], np.where(take[:, k], one, std), 0.0)
    reach = np.ones(B)
    T = np.ones(B)
    D = np.zeros(B)
    for k in range(gamma):
        tau = np.where(valid[:, k], np.where(take[:, k], 1.0, R[:, k]), 0.0)
        D += reach * np.where(valid[:, k], tau - R[:, k], 0.0)
        reach = reach * tau
        T += reach
    return T, D, 1.0 + v


def oracle_bound(data: EvalData, gamma: int, budgets: Sequence[float]) -> dict[str, Any]:
    """What any acceptance rule can reach on ``data``: block-oracle points and an upper bound per budget.

    Per block, tokens T = 1 + sum_k prod_{i<=k} tau_i and damage D = sum_k
    prod_{i<k} tau_i * max(0, tau_k - r_k) are multilinear in the thresholds,
    and T - lam*D is maximised by tau_k in {r_k, 1} (tau_k = 1 iff the tokens
    expected after depth k, 1 + v_{k+1}, exceed lam; found by backward
    induction per block). The *oracle* knows every r_k of the block in advance,
    which no rule does. For a rule with sum D <= b sum T (TV per token <= b),
    weak duality gives, for every lam in [0, 1/b),
    mean T <= mean_blocks max_tau (T - lam*D) / (1 - lam*b); the bound is the
    minimum over a grid of lam (any lam gives a valid bound). Rules with tau
    below r_k only lose tokens, so the bound holds for every rule.

    Returns: {"points": oracle (tv_per_token, tokens_per_call) pairs,
    "upper_bound": {budget key: tokens per call}, "hypervolume": of the points}.
    """
    R, valid = block_matrix(data, gamma)
    if R.shape[0] == 0:
        return {"points": [], "upper_bound": {budget_key(b): None for b in budgets}, "hypervolume": 0.0}
    lams = np.concatenate([[0.0], np.linspace(1.0, gamma + 1.0, ORACLE_LAMBDAS)])
    pts, bound = [], {budget_key(b): math.inf for b in budgets}
    for lam in lams:
        T, D, V = _oracle_policy(R, valid, float(lam))
        pts.append((float(D.sum() / T.sum()), float(T.mean())))
        value = float(V.mean())
        for b in budgets:
            if lam * b < 1.0:
                bound[budget_key(b)] = min(bound[budget_key(b)], value / (1.0 - lam * b))
    points = nondominated(pts)
    return {"points": [list(p) for p in points], "upper_bound": bound,
            "hypervolume": hypervolume(points, max(budgets))}


# --- the comparison -------------------------------------------------------------------------------

@dataclass
class ParetoComparison:
    """Result of :func:`run_pareto`: curves (families in registry order, then ``evolved``), bound, notes."""

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

    def families(self) -> list[Curve]:
        """The published-family curves."""
        return [c for c in self.curves.values() if c.kind == "family"]

    def verdict(self) -> dict[str, Any]:
        """How the evolved curve compares with the best family at each budget above 0, and by hypervolume.

        Keys: ``margins`` {budget key: {"evolved", "best_family", "best_family_value",
        "margin"}} (margin = evolved / best family - 1, None when either is missing),
        ``beats_all_above_0`` (bool or None without an evolved curve),
        ``largest_hypervolume`` (curve name).
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
                            "margin": margin}
            if evolved is not None and (ev is None or (best_val is not None and ev <= best_val)):
                beats = False
        largest = max(self.curves.values(), key=lambda c: c.hypervolume).name if self.curves else None
        return {"margins": margins, "beats_all_above_0": beats, "largest_hypervolume": largest}

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (see :func:`format_json`)."""
        return {
            "split": self.split, "data": self.source, "tokens": self.tokens, "blocks": self.blocks,
            "gamma": self.gamma, "budgets": list(self.budgets),
            "reference_point": {"tv_per_token": max(self.budgets), "tokens_per_call": 1.0},
            "curves": {name: c.to_dict() for name, c in self.curves.items()},
            "bound": self.bound, "verdict": self.verdict(), "runs": list(self.runs), "notes": list(self.notes),
        }


def run_pareto(data_dir: str | os.PathLike = "data", split: str = "test", runs: Sequence[str | os.PathLike] = (),
               budgets: Sequence[float] = DEFAULT_BUDGETS, gamma: int = DEFAULT_GAMMA,
               families: Sequence[str] | None = None) -> ParetoComparison:
    """Load ``split`` of ``data_dir``, sweep every family, score the runs' rules, compute the bound.

    Args:
        data_dir: dataset directory; the split needs ``draft_index``.
        split: one of train, valid, test.
        runs: run directories (``python -m evolve run``) whose rules form the evolved curve.
        budgets: TV-per-token budgets (>= 0; see :func:`parse_budgets`).
        gamma: draft length (1 <= gamma <= the split's block length).
        families: names of :data:`heuristics.published.FAMILIES` to sweep (default all).

    Raises: InputError for a bad option, dataset or run directory.
    """
    from heuristics.published import FAMILIES
    if split not in SPLITS:
        raise InputError(f"option '--split': unknown split '{split}' (choose from {', '.join(SPLITS)})")
    budgets = parse_budgets(list(budgets))
    for run_dir in runs:  # fail on a bad run before the (slower) scoring
        run_expressions(run_dir)
    names = list(FAMILIES) if families is None else list(families)
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise InputError(f"unknown family '{unknown[0]}' (known: {', '.join(FAMILIES)})")
    data = EvalData.from_traces(load_split(data_dir, split))
    if data.depth is None:
        raise InputError(f"{data.source}: the comparison needs column 'draft_index' (speculation blocks); "
                         "generate the data with `python generate_data.py` (vocab model)")
    g = check_gamma(gamma, data)
    curves: dict[str, Curve] = {}
    notes: list[str] = []
    for name in names:
        curve, note = family_curve(FAMILIES[name], data, g, budgets)
        if curve is None:
            notes.append(note)
        else:
            curves[name] = curve
    if runs:
        curve, more = evolved_curve(runs, data, g, budgets)
        curves[EVOLVED] = curve
        notes += more
    else:
        notes.append("no --run given: no evolved curve")
    for c in curves.values():
        for r in c.rules:
            if r.declared_lossless and r.lossless is False:
                notes.append(f"{c.name} {r.label} is declared lossless but its threshold exceeds min(1, p/q) "
                             f"at row {r.violation}")
    bound = oracle_bound(data, g, budgets)
    blocks = int((data.depth == 0).sum())
    return ParetoComparison(split, data.source, data.n, blocks, g, budgets, curves, bound, notes,
                            [str(r) for r in runs])


# --- output ---------------------------------------------------------------------------------------

def _cell(value: float | None, lossless: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:.4f}" + (" ✓" if lossless else "")


def format_table(comp: ParetoComparison) -> str:
    """Plain-text table: best tokens per call per budget and hypervolume of every curve, bound, verdict."""
    keys = [budget_key(b) for b in comp.budgets]
    header = ["curve", "rules"] + [f"TV<={k}" for k in keys] + ["hypervolume"]
    rows = []
    for c in comp.curves.values():
        cells = [c.name, str(len(c.rules))]
        for b, k in zip(comp.budgets, keys):
            cells.append(_cell(c.best_at_budget[k], lossless=(b == 0)))
        cells.append(f"{c.hypervolume:.5f}")
        rows.append(cells)
    bound_row = ["oracle bound", "-"] + [_cell(comp.bound["upper_bound"].get(k)) for k in keys] \
        + [f"{comp.bound['hypervolume']:.5f}"]
    widths = [max(len(r[i]) for r in rows + [header, bound_row]) for i in range(len(header))]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out = [f"Best tokens per target call with TV per emitted token <= budget: {comp.split} split, "
           f"{comp.tokens:,} tokens in {comp.blocks:,} blocks of {comp.source}, gamma {comp.gamma}",
           "", line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    out += [line(["-" * w for w in widths]), line(bound_row), ""]
    v = comp.verdict()
    if EVOLVED in comp.curves:
        parts = []
        for k, m in v["margins"].items():
            if m["margin"] is None:
                parts.append(f"{k}: n/a")
            else:
                parts.append(f"{k}: {100 * m['margin']:+.2f}% vs {m['best_family']}")
        out.append("evolved vs the best published family: " + "; ".join(parts))
        out.append(f"evolved beats every published family at every budget above 0: "
                   f"{'yes' if v['beats_all_above_0'] else 'no'}")
    out.append(f"largest hypervolume: {v['largest_hypervolume']}")
    out.append("")
    out.append("✓ = lossless, checked exactly: clamped tau <= min(1, p/q) on every record of the split (the "
               "budget-0 column counts only such rules; n/a = none of the curve's rules is lossless).")
    out.append(f"Hypervolume: area above tokens_per_call = 1 and left of tv_per_token = {max(comp.budgets):g} "
               "dominated by the curve (tokens per call x TV per token).")
    out.append("Oracle bound: no acceptance rule can exceed it on this split (a block oracle that knows every "
               "depth's min(1, p/q) in advance; weak duality), see evolve.report.pareto.oracle_bound.")
    out += [f"note: {n}" for n in comp.notes]
    return "\n".join(out) + "\n"


def format_json(comp: ParetoComparison) -> str:
    """JSON: ``budgets`` (list), ``curves`` {name: {points, best_at_budget, hypervolume, ...}}, ``bound``, ``verdict``."""
    return json.dumps(comp.to_dict(), indent=2) + "\n"


def plot_png(comp: ParetoComparison) -> bytes:
    """PNG (bytes): every curve's staircase, TV per emitted token on x, tokens per call on y."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    xmax = max(comp.budgets) if max(comp.budgets) > 0 else 0.05
    fig = Figure(figsize=(8, 5.5), dpi=100)
    ax = fig.subplots()

    def staircase(points):
        pts = [(tv, t) for tv, t in points if tv <= xmax * 1.05]
        if not pts:
            return [], []
        xs, yv = [], []
        for i, (tv, t) in enumerate(pts):
            xs.append(tv)
            yv.append(t)
            nxt = pts[i + 1][0] if i + 1 < len(pts) else xmax * 1.05
            xs.append(nxt)
            yv.append(t)
        return xs, yv

    bound_pts = [tuple(p) for p in comp.bound["points"] if p[0] <= xmax * 1.05]
    tops = [t for c in comp.curves.values() for tv, t in c.points if tv <= xmax * 1.05]
    tops += [t for _, t in bound_pts]
    lossless = [c.best_at_budget.get("0") for c in comp.curves.values() if c.best_at_budget.get("0") is not None]
    hi = max(tops) if tops else 2.0
    base = min(lossless) if lossless else (min(tops) if tops else 1.0)
    lo = max(1.0, base - 0.15 * max(hi - base, 1e-6))
    for c in comp.curves.values():
        xs, yv = staircase(c.points)
        if not xs:
            continue
        shown = any(y >= lo for y in yv)
        style = dict(linewidth=2.5, color="black", zorder=5) if c.kind == "evolved" else dict(linewidth=1.3)
        label = f"{c.name} (HV {c.hypervolume:.4f})" + ("" if shown else ", below the plot")
        ax.plot(xs, yv, label=label, **style)
        ax.scatter([p[0] for p in c.points if p[0] <= xmax * 1.05],
                   [p[1] for p in c.points if p[0] <= xmax * 1.05], s=8,
                   color=style.get("color"), zorder=style.get("zorder", 2))
    if bound_pts:
        ax.plot([p[0] for p in bound_pts], [p[1] for p in bound_pts], linestyle="--", color="gray",
                label="oracle bound (no rule exceeds)")
    for b in comp.budgets:
        ax.axvline(b, color="lightgray", linestyle=":", linewidth=1)
    ax.set_xlim(-0.02 * xmax, xmax * 1.05)
    ax.set_ylim(lo, hi + 0.05 * max(hi - lo, 1e-6))
    ax.set_xlabel("expected TV per emitted token")
    ax.set_ylabel(f"expected tokens per target call (gamma {comp.gamma})")
    ax.set_title(f"Speed vs damage, {comp.split} split ({comp.tokens:,} tokens)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()



def plot_path(output: str | os.PathLike | None, split: str) -> Path:
    """``--output`` with suffix .png, else ``results/pareto_<split>.png``."""
    if output is not None:
        return Path(output).with_suffix(".png")
    return DEFAULT_RESULTS_DIR / f"pareto_{split}.png"


def pareto_command(data_dir="data", split="test", runs=(), budgets="0,0.005,0.01,0.02,0.05",
                   gamma=DEFAULT_GAMMA, fmt=None, output=None, plot=True) -> tuple[ParetoComparison, str, Path | None]:
    """The whole command: validate, compute, render, write (atomically, only when everything succeeded).

    Returns (comparison, rendered text, PNG path or None). Raises InputError for any bad input.
    """
    fmt = resolve_format(fmt, output, FORMATS)
    budget_list = parse_budgets(budgets)
    if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
        raise InputError(f"option '--gamma': the draft length must be an integer >= 1 (value {gamma!r})")
    check_output(output, "plot" if plot else None)
    comp = run_pareto(data_dir, split, runs, budget_list, gamma)
    text = format_json(comp) if fmt == "json" else format_table(comp)
    png_path = write_outputs(text, output, plot_png(comp) if plot else None, plot_path(output, split), "--plot")
    return comp, text, png_path


__all__ = ["pareto_command", "run_pareto", "ParetoComparison", "Curve", "RulePoint", "parse_budgets",
           "budget_key", "nondominated", "best_at_budget", "hypervolume", "lossless_violation", "oracle_bound",
           "evolved_curve", "family_curve", "run_expressions", "format_table", "format_json", "plot_png",
           "DEFAULT_BUDGETS", "EVOLVED"]

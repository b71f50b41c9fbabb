"""Speed/damage trade-off curves: published rule families against evolved fronts (``benchmark.py pareto``).

    python benchmark.py pareto [--data DIR] [--split test] [--run RUN_DIR ...] [--rule NAME ...]
                               [--budgets 0,0.005,0.01,0.02,0.05] [--gamma N]
                               [--format table|json] [--output FILE] [--plot/--no-plot]

Every rule is scored on one split with the block metrics of
:mod:`evolve.eval.evaluator`: x = expected TV per emitted token (damage, down:
over the split's speculation blocks, the sum of P(depth k is reached) *
max(0, tau_k - min(1, p/q)) over the sum of the blocks' expected tokens),
y = expected tokens per target call with draft length gamma (speed, up:
1 + sum_k prod_{i<=k} tau_i per block).

Curves
    * one per published family of :func:`heuristics.registry.families`
      (``standard`` is the lossless point), every value of the family's grid;
      families that need a column the split lacks are skipped with a note;
    * one per ``--rule`` (a registered rule or promoted champion, resolved by
      :func:`heuristics.registry.get_rule`): that rule alone, a single point;
    * ``evolved``: every rule of the ``--run`` directories (``front.json`` of a
      ``--objective pareto`` run, else the run's ``hall_of_fame.json`` and
      ``champion.json``), all together;
    * ``bound`` (reported beside the curves, not one of them): what a block
      oracle achieves, and an upper bound no acceptance rule can exceed on the
      split (:func:`evolve.commands.pareto.oracle.oracle_bound`).

References (beside the curves; the verdict ranks only the curves, and
:meth:`ParetoComparison.versus_references` compares the curves with them)
    * ``block_verification``: lossless block verification (Sun et al. 2024,
      arXiv 2403.10444), one point at TV 0 with the expected tokens per call
      that follow from the split's ``block_residual_mass`` column
      (:mod:`evolve.eval.block_verification`); being lossless it is available
      at every budget, a horizontal line across the budgets. A split without
      the column gets a note instead;
    * ``learned``: a per-token rule fitted by gradient boosting on the train
      split, its threshold grid taken from the valid split
      (:mod:`evolve.commands.pareto.learned`); on by default when scikit-learn
      is importable (``learned=None``), off with ``learned=False``;
    * ``relaxed_block_fixed_w`` and ``evolved_relaxed_block``: relaxed block
      verification against (1 - w) p + w q with one w everywhere, and the
      weights w(features) of ``--evolve relaxation`` runs among ``--run``, on a
      split with ``block_residual_phi`` (:mod:`evolve.kinds.relaxation.pareto`,
      which also gives their verdict).

A curve's points, best tokens per call at each budget and hypervolume are
defined in :mod:`evolve.report.pareto.curves`. At budget 0 only rules that
pass the exact lossless check count: clamped tau <= min(1, p/q) on every
record of the split (:func:`lossless_violation`), which is stricter than an
expected TV of 0 (it covers depths >= gamma too); the table marks such values
with ``✓``. Rendering (table, JSON, plot): :mod:`evolve.report.pareto.format`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from evolve.eval.costs import FREE_DRAFTS, load_costs
from evolve.harvest.context import at_dataset_context
from evolve.errors import InputError
from evolve.traces.io import SPLITS, Traces, load_split
from evolve.eval.block_verification import RESIDUAL_COLUMN, block_verification_metrics
from evolve.eval.evaluator import EvalData, Metrics, check_gamma, thresholds
from evolve.eval.objectives import DEFAULT_GAMMA
from evolve.eval.population import PopulationEvaluator
from evolve.gp.compiler import compile_nodes, parse, to_string
from evolve.commands.options import naming_param
from evolve.report.output import check_output, resolve_format, write_outputs
from evolve.report.pareto.curves import (
    BLOCK_VERIFICATION, DEFAULT_BUDGETS, EVOLVED, PER_TOKEN_CATEGORIES, Curve, ParetoComparison, RulePoint,
    finish_curve, check_budgets,
)
from evolve.kinds.base import ProgramKind
from evolve.kinds.registry import DEFAULT_KIND, KINDS, kind_from_config
from evolve.commands.pareto.learned import learned_curve, sklearn_available
from evolve.report.pareto.format import FORMATS, format_json, format_table, plot_path, plot_png
from evolve.commands.pareto.oracle import oracle_bound
from heuristics import registry
from heuristics.contract import Rule


# --- lossless check -----------------------------------------------------------------------------

def lossless_violation(rule, data: EvalData) -> int | None:
    """First record where the rule's clamped threshold exceeds min(1, p/q), or None if there is none.

    ``rule`` is a :class:`heuristics.contract.Rule` or a compiled program. The
    output of speculative sampling is exactly the target's distribution iff
    tau(x) <= p(x)/q(x) for every token (Leviathan et al. 2023, arXiv
    2211.17192), so None means the rule is lossless on every record of the
    split (NaN/inf thresholds count as 0, a rejection). Raises InputError if
    the rule needs a column the split lacks.
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
    labels = [family.label(v) for v, _ in pairs]
    rules = [r for _, r in pairs]
    points = _score(rules, labels, data, gamma, [r.lossless for r in rules])
    return finish_curve(Curve(family.name, "family", family.source, family.parameter, points), budgets), None


def resolve_rules(names: Sequence[str]) -> list[Rule]:
    """The rules named ``names`` (registered rules or promoted champions), in order, without repeats.

    Raises: InputError for an unknown name (:func:`heuristics.registry.get_rule`)
    or a Python function rule (the comparison scores expression rules).
    """
    out: list[Rule] = []
    for name in dict.fromkeys(names):
        rule = registry.get_rule(name, champions=True)
        if rule.expression is None:
            raise InputError(f"rule '{name}' is a Python function rule; the comparison scores "
                             "expression rules and champions only", param="rules")
        out.append(rule)
    return out


def rule_curve(rule: Rule, data: EvalData, gamma: int, budgets: Sequence[float]) -> tuple[Curve | None, str | None]:
    """One rule as a curve of one point (category ``rule``).

    Returns (curve, None), or (None, note) when the split lacks a column the rule reads.
    """
    missing = [c for c in rule.columns_needed if c not in data.available]
    if missing:
        return None, f"skipped {rule.name}: it needs column '{missing[0]}', which {data.source} lacks"
    points = _score([rule], [rule.name], data, gamma, [rule.lossless])
    return finish_curve(Curve(rule.name, "rule", rule.source, None, points), budgets), None


# --- evolved rules --------------------------------------------------------------------------------

def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({' '.join(str(exc).split())})", param="runs") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})", param="runs") from None


def _expressions(doc, path: Path, key: str | None) -> list[str]:
    items = doc.get(key) if key is not None and isinstance(doc, dict) else doc
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        raise InputError(f"{path}: expected a list of rules" + (f" under '{key}'" if key else "")
                         + f" (found {type(items).__name__})", param="runs")
    out = []
    for i, item in enumerate(items):
        expr = item.get("expression") if isinstance(item, dict) else None
        if not isinstance(expr, str):
            raise InputError(f"{path}: rule {i} has no 'expression' string", param="runs")
        out.append(expr)
    return out


def run_expressions(run_dir: str | os.PathLike) -> tuple[list[str], str]:
    """The evolved expressions of one run directory and the file(s) they came from.

    ``front.json`` (key ``front``, written by ``--objective pareto`` runs) when
    present, else ``hall_of_fame.json`` plus ``champion.json``.
    Raises: InputError (parameter ``runs``) for a missing directory, no rule file, or malformed JSON.
    """
    d = Path(run_dir)
    if not d.is_dir():
        raise InputError(f"{d}: no such run directory", param="runs")
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
        raise InputError(f"{d}: no front.json, hall_of_fame.json or champion.json "
                         "(is it a run directory of `python -m evolve run`?)", param="runs")
    return exprs, " + ".join(found)


def run_kind(run_dir: str | os.PathLike) -> ProgramKind:
    """The kind of program a run directory evolved: its ``champion.json``'s kind (read and checked,
    :func:`heuristics.champions.read_champion`), else its ``run.json`` config's
    (:func:`evolve.kinds.registry.kind_from_config`, which also reads older runs' ``verify = "block"``); the default
    kind when the directory has neither (its loader then says what is missing).

    Raises: InputError naming ``run.json`` when it is there but cannot be read as a run's summary (so a damaged file
    never makes a run's programs another kind's), or as the champion loader.
    """
    from heuristics.champions import read_champion

    d = Path(run_dir)
    if (d / "champion.json").is_file():
        return read_champion(d / "champion.json").program_kind
    path = d / "run.json"
    if not path.exists():
        return DEFAULT_KIND
    doc = _read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("config", {}), dict):
        raise InputError(f"{path}: not a run's summary (a JSON object with its 'config')")
    return kind_from_config(doc.get("config", {}))


def runs_by_kind(runs: Sequence[str | os.PathLike]) -> dict[ProgramKind, list]:
    """The run directories ``runs`` grouped by the kind they evolved (:func:`run_kind`), each group in order, the
    groups in the order of their first run."""
    out: dict[ProgramKind, list] = {}
    for r in runs:
        out.setdefault(run_kind(r), []).append(r)
    return out


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
            needs = [n.value for n in nodes if n.node_type == "feature" and n.value not in data.available]
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


# --- references: block verification, the learned rule ------------------------------------------------

def block_verification_curve(traces: Traces, data: EvalData, gamma: int,
                             budgets: Sequence[float]) -> tuple[Curve | None, str | None]:
    """Block verification as a lossless reference (category ``lossless``): one point (0, tokens per call).

    Returns (curve, None), or (None, note) when the split lacks ``block_residual_mass``.
    Raises: InputError for a needed NaN or negative residual mass.
    """
    if not traces.has(RESIDUAL_COLUMN):
        return None, (f"no {BLOCK_VERIFICATION} reference: {data.source} lacks column '{RESIDUAL_COLUMN}' "
                      "(written by generators that know whole distributions)")
    bv = block_verification_metrics(traces["target_prob"], traces["draft_prob"], traces["draft_index"],
                                    traces[RESIDUAL_COLUMN], gamma, FREE_DRAFTS)
    point = RulePoint(BLOCK_VERIFICATION, 0.0, bv.tokens_per_call, lossless=True, declared_lossless=True)
    source = "block verification, Sun et al. 2024 (arXiv 2403.10444): lossless, from block_residual_mass"
    return finish_curve(Curve(BLOCK_VERIFICATION, "lossless", source, None, [point]), budgets), None


def learned_reference(data_dir: str | os.PathLike, split: str, data: EvalData, gamma: int, budgets: Sequence[float],
                      learned: bool | None) -> tuple[Curve | None, str | None]:
    """The ``learned`` reference (:func:`evolve.commands.pareto.learned.learned_curve`), fitted on train, thresholds
    from valid, scored on ``data``.

    ``learned``: True (fit it; errors are raised), False (no curve, no note) or
    None (fit it when scikit-learn is importable and the train and valid splits
    load; otherwise (None, note)).
    """
    if learned is False:
        return None, None
    if learned is None and not sklearn_available():
        return None, "no learned curve: scikit-learn is not installed"
    try:
        train = data if split == "train" else EvalData.from_traces(load_split(data_dir, "train"))
        valid = data if split == "valid" else EvalData.from_traces(load_split(data_dir, "valid"))
        return learned_curve(train, valid, data, gamma, budgets), None
    except InputError as exc:
        if learned:
            raise
        return None, f"no learned curve: {exc}"


def run_pareto(data_dir: str | os.PathLike = "data", split: str = "test", runs: Sequence[str | os.PathLike] = (),
               budgets: Sequence[float] = DEFAULT_BUDGETS, gamma: int = DEFAULT_GAMMA,
               families: Sequence[str] | None = None, rules: Sequence[str] = (),
               learned: bool | None = None) -> ParetoComparison:
    """Load ``split`` of ``data_dir``, sweep every family, score the named and the runs' rules, compute the bound
    and the references (block verification, the learned rule).

    Args:
        data_dir: dataset directory; the split needs ``draft_index``.
        split: one of train, valid, test.
        runs: run directories (``python -m evolve run``) whose rules form the evolved curve (those
            of ``--evolve relaxation`` runs the evolved relaxed block verification curve).
        budgets: TV-per-token budgets (in [0, 1]; see :func:`check_budgets`).
        gamma: draft length (1 <= gamma <= the split's block length).
        families: names of :func:`heuristics.registry.families` to sweep (default all).
        rules: names of registered rules or promoted champions, each scored as its own
            one-point curve (:func:`rule_curve`) after the families.
        learned: the learned reference: True, False, or None for "when scikit-learn
            is importable" (:func:`learned_reference`).

    Raises: InputError for a bad option, dataset, rule name or run directory.
    """
    if split not in SPLITS:
        raise InputError(f"unknown split '{split}' (choose from {', '.join(SPLITS)})", param="split")
    budgets = check_budgets(budgets)
    for run_dir in runs:  # fail on a bad run before the (slower) scoring
        run_expressions(run_dir)
    sweep = list(registry.families().values()) if families is None else [registry.get_family(n) for n in families]
    named = resolve_rules(rules)
    traces = load_split(data_dir, split)
    data = EvalData.from_traces(traces)
    if data.depth is None:
        raise InputError(f"{data.source}: the comparison needs column 'draft_index' (speculation blocks); "
                         "generate the data with `python generate_data.py` (vocab model)")
    g = naming_param("gamma", check_gamma, gamma, data)
    curves: dict[str, Curve] = {}
    notes: list[str] = []
    for family in sweep:
        curve, note = family_curve(family, data, g, budgets)
        if curve is None:
            notes.append(note)
        else:
            curves[family.name] = curve
    named_references: list[Curve] = []
    for rule in named:
        make = rule.program_kind.hook("pareto", "python benchmark.py pareto --rule", f"rule '{rule.name}'")
        curve, note = make(rule, traces, data, g, budgets)
        if curve is None:
            notes.append(note)
        elif curve.category not in PER_TOKEN_CATEGORIES:  # a reference (beside the curves of its category)
            named_references.append(curve)
        else:
            if curve.name in curves:  # a rule named like a family (e.g. greedy_match)
                curve.name = f"{rule.name} (rule)"
            curves[curve.name] = curve
    evolved_references: list[Curve] = []
    for kind, kind_runs in runs_by_kind(runs).items():
        make = kind.hook("pareto_runs", "python benchmark.py pareto --run", f"run {kind_runs[0]}")
        curve, more = make(kind_runs, traces, data, g, budgets)
        notes += more
        if curve is not None:
            (curves.__setitem__(curve.name, curve) if curve.category in PER_TOKEN_CATEGORIES
             else evolved_references.append(curve))
    if EVOLVED not in curves:
        notes.append("no --run of per-token rules given: no evolved curve" if runs else
                     "no --run given: no evolved curve")
    for c in curves.values():
        for r in c.rules:
            if r.declared_lossless and r.lossless is False:
                notes.append(f"{c.name} {r.label} is declared lossless but its threshold exceeds min(1, p/q) "
                             f"at row {r.violation}")
    references: dict[str, Curve] = {}
    kind_references = [k.hooks().pareto_references(traces, data, g, budgets) for k in KINDS.values()
                       if k.hooks().pareto_references is not None]
    for ref, note in (block_verification_curve(traces, data, g, budgets),
                      learned_reference(data_dir, split, data, g, budgets, learned), *kind_references):
        if ref is not None:
            references[ref.name] = ref
        if note is not None:
            notes.append(note)
    for curve in evolved_references:
        references[curve.name] = curve
    for curve in named_references:
        references[curve.name if curve.name not in references else f"{curve.name} (rule)"] = curve
    bound = oracle_bound(data, g, budgets)
    blocks = int((data.depth == 0).sum())
    return ParetoComparison(split, data.source, data.n, blocks, g, budgets, curves, bound, notes,
                            [str(r) for r in runs], references)


@dataclass(frozen=True)
class ParetoOptions:
    """Everything :func:`pareto_command` does, as the command line's options of the same names.

    ``data_dir`` and ``split``: the scored split; ``runs``: run directories whose rules form the
    evolved curves; ``rules``: rules scored as their own points; ``budgets``: the TV-per-token
    budgets; ``gamma``: the draft length; ``fmt`` (``--format``) and ``output``: the rendering and the
    file to write (None: the text is returned only); ``plot``: write the PNG plot; ``learned``: the
    learned reference on (True), off (False), or when scikit-learn is importable (None); ``costs``: a cost
    file for tokens per second (:mod:`evolve.report.pareto.speed`).
    """

    data_dir: str | os.PathLike = "data"
    split: str = "test"
    runs: tuple[str | os.PathLike, ...] = ()
    rules: tuple[str, ...] = ()
    budgets: tuple[float, ...] = DEFAULT_BUDGETS
    gamma: int = DEFAULT_GAMMA
    fmt: str | None = None
    output: str | os.PathLike | None = None
    plot: bool = True
    learned: bool | None = None
    costs: str | os.PathLike | None = None


def pareto_command(options: ParetoOptions = ParetoOptions()) -> tuple[ParetoComparison, str, Path | None]:
    """The whole command: validate, compute, render, write (atomically, only when everything succeeded).

    Returns (comparison, rendered text, PNG path or None). Raises InputError for any bad input.
    """
    o = options
    fmt = resolve_format(o.fmt, o.output, FORMATS)
    budgets = check_budgets(o.budgets)
    if o.learned and not sklearn_available():
        raise InputError("needs scikit-learn (pip install scikit-learn)", param="learned")
    png_path = plot_path(o.output, o.split)
    check_output(o.output, "plot" if o.plot else None, inputs=(o.data_dir, *o.runs, o.costs),
                 png_path=png_path)
    costs = at_dataset_context(load_costs(o.costs), o.data_dir) if o.costs is not None else None
    comp = run_pareto(o.data_dir, o.split, o.runs, budgets, o.gamma, rules=o.rules, learned=o.learned)
    comp.costs = costs
    text = format_json(comp) if fmt == "json" else format_table(comp)
    png_path = write_outputs(text, o.output, plot_png(comp) if o.plot else None, png_path, "plot")
    return comp, text, png_path


#: Re-exported from the modules the comparison is split into, so that ``evolve.commands.pareto.command``
#: names everything the command uses (curves, oracle bound, rendering).
__all__ = ["ParetoOptions", "pareto_command", "run_pareto", "lossless_violation", "evolved_curve", "family_curve",
           "rule_curve", "resolve_rules", "run_expressions", "block_verification_curve",
           "learned_reference"]

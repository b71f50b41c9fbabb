"""The relaxation kind in ``benchmark.py pareto``: the fixed-w family, the evolved front, a named relaxation rule
(its ``pareto``, ``pareto_runs`` and ``pareto_references`` hooks).

Relaxed block verification (:mod:`evolve.eval.relaxed_block`) runs block
verification against p~ = (1 - w) p + w q with a weight w chosen from the
prefix; its damage per emitted token is w (1 - overlap) at each emitted
position. On a split with ``block_residual_phi`` the comparison shows, beside
the per-token curves (references, not ranked by the per-token verdict):

* ``relaxed_block_fixed_w``: the fixed-w family
  (:data:`evolve.eval.relaxed_block.FIXED_WEIGHTS`; w = 0 is lossless block
  verification);
* ``evolved_relaxed_block``: every weight w(features) of the ``--run``
  directories made with ``python -m evolve run --objective pareto --evolve relaxation``
  (their ``front.json``, else hall of fame and champion; :func:`relaxed_runs_curve`).

:func:`evolve.report.pareto.relaxed.relaxed_verdict` states, at every budget above 0, whether the evolved
relaxed front beats lossless block verification, the fixed-w family, every
per-token curve (families, named rules, evolved per-token rules, the learned
rule) and the per-token oracle bound, with the margins (evolved / other - 1).
"""
from __future__ import annotations

import os
from typing import Sequence

from evolve.commands.pareto.command import run_expressions
from evolve.traces.io import Traces
from evolve.eval.evaluator import EvalData
from evolve.eval.relaxed_block import FIXED_WEIGHTS, PHI_COLUMN, RELAXED_COLUMNS, attach
from evolve.kinds.relaxation.eval_population import evaluate_relaxed
from evolve.gp.compiler import parse, to_string
from evolve.report.pareto.curves import Curve, RulePoint, finish_curve
from evolve.report.pareto.relaxed import RELAXED_EVOLVED, RELAXED_FAMILY

def _points(exprs: Sequence[str], labels: Sequence[str], data: EvalData, gamma: int) -> list[RulePoint]:
    metrics = evaluate_relaxed(list(exprs), data, gamma)
    out = []
    for e, label, m in zip(exprs, labels, metrics):
        point = RulePoint(label, float(m.tv_per_token), float(m.tokens_per_call), e)
        point.lossless = point.tv_per_token == 0.0 or None  # w = 0 everywhere: lossless block verification
        out.append(point)
    return out


def relaxed_family_curve(traces: Traces, data: EvalData, gamma: int,
                         budgets: Sequence[float]) -> tuple[Curve | None, str | None]:
    """The fixed-w family as a curve (category ``relaxed_family``), or (None, note) without the relaxed columns."""
    missing = [c for c in RELAXED_COLUMNS if not traces.has(c)]
    if missing:
        return None, (f"no relaxed block verification: {data.source} lacks column '{missing[0]}' (written by "
                      "generators that know whole distributions)")
    attach(data, traces)
    exprs = [repr(float(w)) for w in FIXED_WEIGHTS]
    points = _points(exprs, [f"w={w:g}" for w in FIXED_WEIGHTS], data, gamma)
    source = ("block verification (Sun et al. 2024, arXiv 2403.10444) against (1 - w) p + w q, one w everywhere "
              "(the mixture of speculative cascades, arXiv 2405.19261)")
    return finish_curve(Curve(RELAXED_FAMILY, "relaxed_family", source, "w", points), budgets), None


def relaxed_evolved_curve(runs: Sequence[tuple[list[str], str]], traces: Traces, data: EvalData, gamma: int,
                          budgets: Sequence[float]) -> tuple[Curve | None, list[str]]:
    """The weights of ``--evolve relaxation`` runs as one curve (category ``relaxed_evolved``); (None, notes) when the
    split lacks the relaxed columns.

    ``runs``: (expressions, source file) of each run
    (:func:`evolve.commands.pareto.command.run_expressions`). Raises: InputError for unparsable expressions.
    """
    if not traces.has(PHI_COLUMN):
        return None, [f"skipped the relaxation runs: {data.source} lacks column '{PHI_COLUMN}'"]
    attach(data, traces)
    seen: dict[str, None] = {}
    sources, notes = [], []
    for exprs, src in runs:
        sources.append(src)
        for i, text in enumerate(exprs):
            nodes = parse(text, f"{src}: weight {i}")
            needs = [n.value for n in nodes if n.node_type == "feature" and n.value not in data.available]
            if needs:
                notes.append(f"skipped relaxed weight {text[:60]}: it needs column '{needs[0]}', which "
                             f"{data.source} lacks")
                continue
            seen.setdefault(to_string(nodes), None)
    exprs = list(seen)
    curve = Curve(RELAXED_EVOLVED, "relaxed_evolved", ", ".join(sources), "w(features)",
                  _points(exprs, exprs, data, gamma))
    return finish_curve(curve, budgets), notes


def relaxed_runs_curve(run_dirs: Sequence[str | os.PathLike], traces: Traces, data: EvalData, gamma: int,
                       budgets: Sequence[float]) -> tuple[Curve | None, list[str]]:
    """The ``pareto_runs`` hook: :func:`relaxed_evolved_curve` of the run directories' expressions
    (:func:`evolve.commands.pareto.command.run_expressions`)."""
    return relaxed_evolved_curve([run_expressions(r) for r in run_dirs], traces, data, gamma, budgets)


def relaxed_rule_curve(rule, traces: Traces, data: EvalData, gamma: int,
                       budgets: Sequence[float]) -> tuple[Curve | None, str | None]:
    """A rule of kind ``relaxation`` (:mod:`evolve.kinds.registry`; a promoted relaxation champion named by
    ``--rule``) as a one-point curve of category ``relaxed_rule``, scored as relaxed block verification (a
    reference beside the relaxed curves, not a per-token curve); (None, note) when the split lacks a
    column it needs. Raises: InputError for a gamma above the split's block length."""
    missing = [c for c in dict.fromkeys((*RELAXED_COLUMNS, *rule.columns_needed)) if not traces.has(c)]
    if missing:
        return None, f"skipped {rule.name}: it needs column '{missing[0]}', which {data.source} lacks"
    attach(data, traces)
    points = _points([rule.expression], [rule.name], data, gamma)
    return finish_curve(Curve(rule.name, "relaxed_rule", rule.source, None, points), budgets), None


__all__ = ["relaxed_family_curve", "relaxed_rule_curve", "relaxed_evolved_curve", "relaxed_runs_curve"]

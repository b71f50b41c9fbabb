"""Rendering relaxed block verification in ``benchmark.py pareto``: the verdict of the evolved relaxed front against
lossless block verification, the fixed-w family, every per-token curve and the per-token oracle bound
(:func:`relaxed_verdict`), and its lines (:func:`relaxed_lines`); the curves are computed by
:mod:`evolve.kinds.relaxation.pareto`."""
from __future__ import annotations

from typing import Any

from evolve.report.pareto.curves import BLOCK_VERIFICATION, budget_key

#: Names of the relaxed block verification curves (references of the comparison).
RELAXED_FAMILY = "relaxed_block_fixed_w"
RELAXED_EVOLVED = "evolved_relaxed_block"
#: Kinds of the relaxed curves: the two above and a relaxation champion named by ``--rule``
#: (:func:`relaxed_rule_curve`).
RELAXED_CATEGORIES: tuple[str, ...] = ("relaxed_family", "relaxed_evolved", "relaxed_rule")



def relaxed_verdict(comp) -> dict[str, Any] | None:
    """How the evolved relaxed front compares with everything else at each budget above 0 (None without it).

    Keys: ``budgets`` {budget key: {"evolved_relaxed", "block_verification",
    "fixed_w", "best_per_token" (value), "best_per_token_curve", "per_token_bound",
    "margins" {"block_verification", "fixed_w", "best_per_token", "per_token_bound"}:
    evolved / other - 1, "beats" {same keys: bool}}}, ``beats_all_above_0``
    {same keys: bool, all budgets above 0}. Per-token curves: every curve of the
    comparison and the learned reference. "Beats": strictly more tokens per call
    within the budget.
    """
    refs = comp.references
    evolved = refs.get(RELAXED_EVOLVED)
    if evolved is None:
        return None
    bv = refs.get(BLOCK_VERIFICATION)
    fixed = refs.get(RELAXED_FAMILY)
    per_token = list(comp.curves.values()) + [c for name, c in refs.items()
                                              if c.category not in RELAXED_CATEGORIES and name != BLOCK_VERIFICATION]
    out: dict[str, Any] = {}
    beats_all = {"block_verification": True, "fixed_w": True, "best_per_token": True, "per_token_bound": True}
    for b in comp.budgets:
        if b == 0:
            continue
        key = budget_key(b)
        ev = evolved.best_at_budget.get(key)
        others = {"block_verification": None if bv is None else bv.best_at_budget.get(budget_key(0)),
                  "fixed_w": None if fixed is None else fixed.best_at_budget.get(key),
                  "per_token_bound": comp.bound.get("upper_bound", {}).get(key)}
        cands = [(c.best_at_budget.get(key), c.name) for c in per_token if c.best_at_budget.get(key) is not None]
        best, best_name = max(cands) if cands else (None, None)
        others["best_per_token"] = best
        margins = {k: (None if ev is None or v is None else float(ev / v - 1.0)) for k, v in others.items()}
        beats = {k: bool(ev is not None and v is not None and ev > v) for k, v in others.items()}
        for k in beats_all:
            beats_all[k] = beats_all[k] and beats[k]
        out[key] = {"evolved_relaxed": ev, **others, "best_per_token_curve": best_name,
                    "evolved_rule": evolved.best_rule.get(key), "margins": margins, "beats": beats}
    return {"budgets": out, "beats_all_above_0": beats_all}


def relaxed_lines(comp) -> list[str]:
    """Table lines of :func:`relaxed_verdict` (empty without an evolved relaxed front)."""
    v = relaxed_verdict(comp)
    lines = []
    if RELAXED_FAMILY in comp.references:
        lines.append("relaxed block verification: block verification against (1 - w) p + w q, w from prefix-level "
                     "features; damage w (1 - overlap) per emitted position (evolve.eval.relaxed_block).")
    if v is None:
        return lines
    lines.append("evolved_relaxed_block vs block_verification / relaxed_block_fixed_w / best per-token curve / "
                 "per-token oracle bound:")

    def pct(x):
        return "n/a" if x is None else f"{100 * x:+.2f}%"
    for key, m in v["budgets"].items():
        mg = m["margins"]
        lines.append(f"  TV<={key}: {pct(mg['block_verification'])} / {pct(mg['fixed_w'])} / "
                     f"{pct(mg['best_per_token'])} ({m['best_per_token_curve']}) / {pct(mg['per_token_bound'])}")
    ok = v["beats_all_above_0"]
    lines.append("  beats at every budget above 0: " + ", ".join(f"{k} {'yes' if x else 'no'}" for k, x in ok.items()))
    return lines


__all__ = ["RELAXED_FAMILY", "RELAXED_EVOLVED", "RELAXED_CATEGORIES", "relaxed_verdict", "relaxed_lines"]

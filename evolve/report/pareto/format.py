"""Rendering ``benchmark.py pareto``'s comparison: the table, the JSON document and the PNG plot.

The plot shows the staircase of every family and of the evolved rules, and
each ``--rule`` as a marker (TV per emitted token on x, tokens per target call
on y), with the budgets as vertical lines; lossless block verification is a
horizontal dotted line across the budgets and the learned rule a dash-dotted
staircase. It is written next to ``--output`` (suffix .png), else to
``results/pareto_<split>.png``.

The table lists the curves, then the references (block verification, the
learned rule) and the oracle bound, then the verdict: the evolved curve
against the best family at each budget, and at each budget whether the
evolved curve and each family beat block verification, and the evolved
curve against the learned rule with the size of the evolved rule used.
"""
from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

from evolve.report.finite import finite_tree
from evolve.report.width import fit_width
from evolve.report.pareto.speed import speed_lines, speed_summary
from evolve.report.pareto.curves import BLOCK_VERIFICATION, EVOLVED, LEARNED_CURVE, ParetoComparison, budget_key
from evolve.report.pareto.relaxed import RELAXED_EVOLVED, RELAXED_FAMILY, relaxed_lines, relaxed_verdict

#: Values of ``--format``.
FORMATS: tuple[str, ...] = ("table", "json")
#: Where the plot goes without ``--output``.
DEFAULT_RESULTS_DIR = Path("results")


def _cell(value: float | None, lossless: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:.4f}" + (" ✓" if lossless else "")


def format_table(comp: ParetoComparison) -> str:
    """Plain-text table: best tokens per call per budget and hypervolume of every curve, bound, verdict."""
    keys = [budget_key(b) for b in comp.budgets]
    header = ["curve", "rules"] + [f"TV<={k}" for k in keys] + ["hypervolume"]
    def cells_of(c) -> list[str]:
        cells = [c.name, str(len(c.rules))]
        for b, k in zip(comp.budgets, keys):
            cells.append(_cell(c.best_at_budget[k], lossless=(b == 0)))
        return cells + [f"{c.hypervolume:.5f}"]

    rows = [cells_of(c) for c in comp.curves.values()]
    refs = [cells_of(c) for c in comp.references.values()]
    bound_row = ["oracle bound", "-"] + [_cell(comp.bound["upper_bound"].get(k)) for k in keys] \
        + [f"{comp.bound['hypervolume']:.5f}"]
    widths = [max(len(r[i]) for r in rows + refs + [header, bound_row]) for i in range(len(header))]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out = [f"Best tokens per target call (mean acceptance length) with TV per emitted token <= budget: {comp.split} split, "
           f"{comp.tokens:,} tokens in {comp.blocks:,} blocks of {comp.source}, gamma {comp.gamma}",
           "", line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    if refs:
        out += [line(["-" * w for w in widths])] + [line(r) for r in refs]
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
    best = [f"{k}: {m['best_family_rule']}" for k, m in v["margins"].items() if m["best_family_rule"]]
    if best:
        out.append("best published point at each budget (a rule name for --rule): " + "; ".join(best))
    out += _hypervolume_lines(comp, v)
    out += _reference_lines(comp)
    out += relaxed_lines(comp)
    if comp.costs is not None:
        out += speed_lines(comp, comp.costs)
    out.append("")
    out.append("✓ = lossless, checked exactly: clamped tau <= min(1, p/q) on every record of the split (the "
               "budget-0 column counts only such rules; n/a = none of the curve's rules is lossless).")
    out.append(f"Hypervolume: area above tokens_per_call = 1 and left of tv_per_token = {max(comp.budgets):g} "
               "dominated by the curve (tokens per call x TV per token).")
    out.append("Oracle bound: no per-token acceptance rule can exceed it on this split (a block oracle that knows every "
               "depth's min(1, p/q) in advance; weak duality), see evolve.commands.pareto.oracle.oracle_bound.")
    if BLOCK_VERIFICATION in comp.references:
        out.append("block_verification: lossless block verification (Sun et al. 2024, arXiv 2403.10444), not a "
                   "per-token rule; being lossless it counts at every budget.")
    if LEARNED_CURVE in comp.references:
        out.append("learned: a per-token rule fitted by gradient boosting on train (accept outright where the "
                   "prediction exceeds a threshold, else min(1, p/q); thresholds from valid), see "
                   "evolve.commands.pareto.learned.")
    out += [f"note: {n}" for n in comp.notes]
    return fit_width("\n".join(out)) + "\n"


def _hypervolume_lines(comp: ParetoComparison, v: dict[str, Any]) -> list[str]:
    """Which row has the largest hypervolume: among the curves above the first dashed line, and among every row
    when a reference below it is larger (the references are no published family)."""
    name = v["largest_hypervolume"]
    if name is None:
        return []
    text = f"largest hypervolume of the curves above: {name} ({comp.curves[name].hypervolume:.5f})"
    of_all = v.get("largest_hypervolume_of_all")
    if of_all is not None and of_all != name:
        text += f"; of every row: {of_all} ({comp.references[of_all].hypervolume:.5f})"
    return [text]


def _reference_lines(comp: ParetoComparison) -> list[str]:
    """Verdict lines against block verification and the learned rule (empty without references)."""
    out = []
    versus = comp.versus_references()
    bv = versus.get(BLOCK_VERIFICATION)
    if bv is not None:
        value = bv["tokens_per_call"]
        out.append(f"vs block_verification ({value:.4f} tokens per call, lossless, at every budget):")
        for key, m in bv["budgets"].items():
            ahead = [name for name, ok in m["families"].items() if ok]
            behind = len(m["families"]) - len(ahead)
            ev = "" if m["evolved"] is None else f"evolved {'beats it' if m['evolved'] else 'does not beat it'}; "
            fams = ", ".join(ahead) if ahead else "none"
            out.append(f"  TV<={key}: {ev}families beating it: {fams} ({behind} of {len(m['families'])} do not)")
    learned = versus.get(LEARNED_CURVE)
    if learned is not None and EVOLVED in comp.curves:
        parts = []
        for key, m in learned.items():
            if m["margin"] is None:
                parts.append(f"{key}: n/a")
            else:
                size = "" if m["evolved_size"] is None else f", evolved rule {m['evolved_size']} nodes"
                parts.append(f"{key}: {100 * m['margin']:+.2f}%{size}")
        out.append("evolved vs learned: " + "; ".join(parts))
    return out


def format_json(comp: ParetoComparison) -> str:
    """JSON: ``budgets`` (list), ``curves`` {name: {points, best_at_budget, hypervolume, ...}}, ``bound``,
    ``verdict``, ``relaxed_verdict`` (:func:`evolve.report.pareto.relaxed.relaxed_verdict`; null
    without an evolved relaxed block verification front) and ``speed`` (tokens per second under the
    cost file, :func:`evolve.report.pareto.speed.speed_summary`; null without one)."""
    speed = speed_summary(comp, comp.costs) if comp.costs is not None else None
    return json.dumps(finite_tree({**comp.to_dict(), "relaxed_verdict": relaxed_verdict(comp), "speed": speed}),
                      indent=2, allow_nan=False) + "\n"


def plot_png(comp: ParetoComparison) -> bytes:
    """PNG (bytes): every curve's staircase (a marker for a named rule), TV per emitted token on x, tokens per
    call on y."""
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
    tops = [t for c in [*comp.curves.values(), *comp.references.values()] for tv, t in c.points if tv <= xmax * 1.05]
    tops += [t for _, t in bound_pts]
    lossless = [c.best_at_budget.get("0") for c in comp.curves.values() if c.best_at_budget.get("0") is not None]
    hi = max(tops) if tops else 2.0
    base = min(lossless) if lossless else (min(tops) if tops else 1.0)
    lo = max(1.0, base - 0.15 * max(hi - base, 1e-6))
    for c in comp.curves.values():
        if c.category == "rule":  # one named rule: a marker, not a staircase
            pts = [p for p in c.points if p[0] <= xmax * 1.05]
            label = c.name + ("" if pts and pts[0][1] >= lo else ", outside the plot")
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=30, marker="D", zorder=6, label=label)
            continue
        xs, yv = staircase(c.points)
        if not xs:
            continue
        shown = any(y >= lo for y in yv)
        style = dict(linewidth=2.5, color="black", zorder=5) if c.category == "evolved" else dict(linewidth=1.3)
        label = f"{c.name} (HV {c.hypervolume:.4f})" + ("" if shown else ", below the plot")
        ax.plot(xs, yv, label=label, **style)
        ax.scatter([p[0] for p in c.points if p[0] <= xmax * 1.05],
                   [p[1] for p in c.points if p[0] <= xmax * 1.05], s=8,
                   color=style.get("color"), zorder=style.get("zorder", 2))
    bv = comp.references.get(BLOCK_VERIFICATION)
    if bv is not None and bv.points:
        ax.hlines(bv.points[0][1], 0.0, xmax * 1.05, colors="black", linestyles=":", linewidth=2.0, zorder=4,
                  label=f"block verification (lossless, {bv.points[0][1]:.3f})")
    learned = comp.references.get(LEARNED_CURVE)
    if learned is not None:
        xs, yv = staircase(learned.points)
        if xs:
            ax.plot(xs, yv, linestyle="-.", color="darkcyan", linewidth=1.6, zorder=4,
                    label=f"learned per-token rule (HV {learned.hypervolume:.4f})")
    for name, style in ((RELAXED_FAMILY, dict(linestyle=":", color="purple", linewidth=1.6)),
                        (RELAXED_EVOLVED, dict(linestyle="-", color="crimson", linewidth=2.5))):
        relaxed = comp.references.get(name)
        if relaxed is not None:
            xs, yv = staircase(relaxed.points)
            if xs:
                ax.plot(xs, yv, zorder=5, label=f"{name} (HV {relaxed.hypervolume:.4f})", **style)
    if bound_pts:
        ax.plot([p[0] for p in bound_pts], [p[1] for p in bound_pts], linestyle="--", color="gray",
                label="oracle bound (no per-token rule exceeds)")
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


__all__ = ["FORMATS", "DEFAULT_RESULTS_DIR", "format_table", "format_json", "plot_png", "plot_path"]

"""Rendering ``benchmark.py simulate``: a finished :class:`Simulation` (computed by :mod:`evolve.commands.simulate`) as a
plain-text table with a text bar chart (:func:`format_table`), JSON (:func:`format_json`) and a PNG bar chart
(:func:`plot_png`, matplotlib's Agg backend)."""
from __future__ import annotations

import io
import json
from dataclasses import dataclass

from evolve.report.finite import finite_tree
from evolve.report.width import fit_width
from evolve.sim.decoding import DAMAGE_CONTEXTS, DAMAGE_DRAWS


FORMATS = ("table", "json")


#: Keys of one JSON object of the length sweep (the first nine are the sweep's core columns).
SWEEP_KEYS = ("length", "target_calls", "calls_per_token", "acceptance_rate", "tokens_per_call",
              "analytic_tokens_per_call", "speedup", "tv_empirical", "tv_expected", "autoregressive_calls",
              "autoregressive_time", "speculative_time", "expected_acceptance", "samples", "gamma", "cost_ratio",
              "vocab", "rule", "seed", "verification", "fly_window", "fly_threshold", "fly_top_k", "relaxation",
              "context_tv")


#: Keys of one JSON object of the tree comparison.
TREE_KEYS = ("budget", "draft", "shape", "verification", "nodes_per_call", "depth", "draft_steps_per_call",
             "tokens_per_call", "calls_per_token", "accepted_per_node", "speedup", "length", "samples",
             "cost_ratio", "vocab", "seed")


@dataclass
class Simulation:
    """A finished simulation: ``mode`` ``sweep`` or ``trees``, its JSON-ready ``rows`` and a caption;
    ``context_tv`` the damage measured at fixed contexts (sweeps of a lossy rule or FLy, else None)."""

    mode: str
    rows: list[dict]
    caption: str
    context_tv: float | None = None


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    return lines


def format_table(sim: Simulation) -> str:
    """Plain-text table (plus a text bar chart of the speedups for the sweep)."""
    lines = [sim.caption, ""]
    if sim.mode == "sweep":
        header = ["Length", "AR calls", "Spec calls", "Calls/token", "Accept", "Mean acc. len", "Analytic",
                  "AR time", "Spec time", "Speedup", "TV emp", "TV exp"]
        body = [[f"{r['length']}", f"{r['autoregressive_calls']:.1f}", f"{r['target_calls']:.1f}",
                 f"{r['calls_per_token']:.3f}", f"{100 * r['acceptance_rate']:.1f}%", f"{r['tokens_per_call']:.3f}",
                 f"{r['analytic_tokens_per_call']:.3f}", f"{r['autoregressive_time']:.1f}",
                 f"{r['speculative_time']:.2f}", f"{r['speedup']:.2f}x", f"{r['tv_empirical']:.4f}",
                 f"{r['tv_expected']:.4f}"] for r in sim.rows]
        lines += _table(header, body)
        lines += ["", "Speedup by generation length:"]
        top = max([r["speedup"] for r in sim.rows] + [1e-12])
        for r in sim.rows:
            bar = "#" * max(1, int(round(40 * r["speedup"] / top)))
            lines.append(f"  {r['length']:>7} tokens: {bar} {r['speedup']:.2f}x")
        lines += ["", "AR = plain autoregressive decoding (one target call per token). Time: target call = 1, "
                      "draft step = cost ratio.",
                  "Accept = accepted drafts / drafted tokens; Mean acc. len = mean acceptance length = tokens per "
                  "target call; Analytic = mean block formula 1 + sum_k prod_{i<=k} tau_i; TV = damage per emitted "
                  "token (0 = lossless)."]
        if sim.rows and sim.rows[0]["verification"] != "token":
            lines.append("Analytic = mean over blocks of the expected tokens given the drafts under this verification"
                         + ("; TV = deferred acceptances (FLy)." if sim.rows[0]["verification"] == "fly" else "."))
        if sim.context_tv is not None:
            lines.append(f"Damage at {DAMAGE_CONTEXTS} fixed contexts (first emitted token's TV from p, "
                         f"{DAMAGE_DRAWS} decodes each): {sim.context_tv:.4f}")
    else:
        header = ["Budget", "Draft", "Verify", "Nodes", "Depth", "Draft steps", "Mean acc. len", "Calls/token",
                  "Accepted/node", "Speedup"]
        body = [[f"{r['budget']}", r["shape"], r["verification"], f"{r['nodes_per_call']:.2f}", f"{r['depth']:.2f}",
                 f"{r['draft_steps_per_call']:.2f}", f"{r['tokens_per_call']:.3f}", f"{r['calls_per_token']:.3f}",
                 f"{r['accepted_per_node']:.3f}", f"{r['speedup']:.2f}x"] for r in sim.rows]
        lines += _table(header, body)
        lines += ["", "sample = lossless multi-draft recursive rejection sampling (SpecInfer); traversal = traversal "
                      "verification (lossless, leaf to root; on a chain it is block verification); greedy = greedy "
                      "match (output = greedy decoding).",
                  "Mean acc. len = mean acceptance length = tokens per target call; Draft steps: one per tree level "
                  "(chain, tree, adaptive), one per call for Medusa heads; speedup = length / (calls + c * draft "
                  "steps)."]
    return fit_width("\n".join(lines)) + "\n"


def format_json(sim: Simulation) -> str:
    """JSON array of the rows (keys :data:`SWEEP_KEYS` or :data:`TREE_KEYS`; a non-finite figure written as null)."""
    keys = SWEEP_KEYS if sim.mode == "sweep" else TREE_KEYS
    return json.dumps(finite_tree([{k: r[k] for k in keys} for r in sim.rows]), indent=2, allow_nan=False) + "\n"


def plot_png(sim: Simulation) -> bytes:
    """Bar chart (PNG bytes): speedup and tokens per call by length, or tokens per call by budget and draft."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if sim.mode == "sweep":
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        labels = [str(r["length"]) for r in sim.rows]
        x = np.arange(len(labels))
        axes[0].bar(x, [r["speedup"] for r in sim.rows], color="tab:blue")
        axes[0].axhline(1.0, color="grey", lw=0.8, ls="--")
        axes[0].set_ylabel("speedup over autoregressive")
        axes[1].bar(x - 0.2, [r["tokens_per_call"] for r in sim.rows], 0.4, label="simulated", color="tab:green")
        axes[1].bar(x + 0.2, [r["analytic_tokens_per_call"] for r in sim.rows], 0.4, label="block formula",
                    color="tab:olive")
        axes[1].set_ylabel("tokens per target call")
        axes[1].legend(loc="lower right")
        for ax in axes:
            ax.set_xticks(x, labels)
            ax.set_xlabel("generation length (tokens)")
    else:
        budgets = sorted({r["budget"] for r in sim.rows})
        series = []
        for r in sim.rows:
            key = (r["shape"], r["verification"])
            if key not in series:
                series.append(key)
        fig, ax = plt.subplots(figsize=(11, 4.5))
        x = np.arange(len(budgets))
        w = 0.8 / max(1, len(series))
        for i, key in enumerate(series):
            vals = [next((r["tokens_per_call"] for r in sim.rows if r["budget"] == b
                          and (r["shape"], r["verification"]) == key), 0.0) for b in budgets]
            ax.bar(x - 0.4 + (i + 0.5) * w, vals, w, label=f"{key[0]} ({key[1]})")
        ax.set_xticks(x, [f"{b} nodes" for b in budgets])
        ax.set_ylabel("tokens per target call")
        ax.legend(fontsize=7, ncol=2)
    fig.suptitle(sim.caption, fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


__all__ = ["FORMATS", "SWEEP_KEYS", "TREE_KEYS", "Simulation", "format_table", "format_json", "plot_png"]

"""Rendering ``benchmark.py trees``: a row of the table (:func:`tree_row`, from a
:class:`evolve.eval.tree_scoring.ShapeMetrics`), the plain-text table (:func:`format_table`) and the Markdown table
(:func:`format_markdown`) of the rows :mod:`evolve.commands.trees` scores, with the paired bootstrap column against
``fixed_width`` and its caveats."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from evolve.eval.bootstrap import interval_text
from evolve.eval.tree_scoring import ShapeMetrics
from evolve.report.headroom import headroom_lines
from evolve.report.markdown import markdown_table
from evolve.report.width import fit_width


#: Output formats of the command.
FORMATS: tuple[str, ...] = ("table", "markdown", "json", "csv")


#: Keys of a row (``--format json``), in order.
KEYS: tuple[str, ...] = ("split", "heuristic", "role", "setting", "trees", "tokens_per_call", "tv_per_token",
                         "mean_nodes", "mean_passes", "seconds_per_call", "tokens_per_second", "speedup")


#: Keys a row gains with ``--bootstrap N`` (:func:`tree_rows`).
BOOTSTRAP_KEYS: tuple[str, ...] = ("vs_fixed_width", "vs_fixed_width_low", "vs_fixed_width_high")
#: Keys the rows gain when a champion is compared: its headroom share and interval (None on the other rows).
HEADROOM_KEYS: tuple[str, ...] = ("headroom_share", "headroom_low", "headroom_high")


def tree_row(split: str, name: str, role: str, setting: str, m: ShapeMetrics,
         per_tree: np.ndarray | None = None) -> dict[str, Any]:
    """One row (``role``: ``verification``, ``shape``, ``bound``, ``champion`` or ``relaxation``); ``per_tree``
    float64 (trees, 2), each tree's expected tokens and seconds (None for a bound), is kept under ``_per_tree``
    for the bootstrap and never written."""
    return {"split": split, "heuristic": name, "role": role, "setting": setting, "trees": m.trees,
            "tokens_per_call": m.tokens_per_call, "tv_per_token": m.tv_per_token, "mean_nodes": m.mean_nodes,
            "mean_passes": m.mean_passes, "seconds_per_call": m.seconds_per_call,
            "tokens_per_second": m.tokens_per_second, "speedup": m.speedup, "_per_tree": per_tree}


def _versus(r: dict[str, Any]) -> list[str]:
    """The bootstrap cell of a row (none without ``--bootstrap``; blank for a bound)."""
    if "vs_fixed_width" not in r:
        return []
    if not math.isfinite(r["vs_fixed_width"]):
        return [""]
    return [f"{r['vs_fixed_width']:.3f} {interval_text(r['vs_fixed_width_low'], r['vs_fixed_width_high'])}"]


#: Header of the bootstrap column.
VERSUS_HEADER = "vs fixed_width [95%]"


_BOOTSTRAP_NOTE = (" vs fixed_width [95%]: tokens per second over the fixed_width row's, with a paired percentile "
                   "interval from resampling the split's texts (seeded).")


def bootstrap_caveats(rows: list[dict[str, Any]]) -> list[str]:
    """The distinct interval caveats of the rows' splits (:func:`tree_rows`), in row order."""
    return list(dict.fromkeys(r["_caveat"] for r in rows if r.get("_caveat")))


def _caveat_note(rows: list[dict[str, Any]]) -> str:
    """The footnote's sentence of the interval caveats ("" when none)."""
    caveats = bootstrap_caveats(rows)
    return "".join(f" Caveat, {c}." for c in caveats)


def _versus_header(rows: list[dict[str, Any]]) -> list[str]:
    """The bootstrap column's header when the rows were bootstrapped (``--bootstrap``), else none."""
    return [VERSUS_HEADER] if rows and "vs_fixed_width" in rows[0] else []


def format_table(rows: list[dict[str, Any]], caption: str) -> str:
    """Plain-text table of the rows under ``caption``."""
    header = ["Split", "Heuristic", "Setting", "Mean acc. len", "TV/token", "Nodes/call", "Passes/call", "s/call",
              "Tokens/s", "Speedup"] + _versus_header(rows)
    body = [[r["split"], r["heuristic"], r["setting"], f"{r['tokens_per_call']:.4f}", f"{r['tv_per_token']:.2e}",
             f"{r['mean_nodes']:.2f}",
             f"{r['mean_passes']:.2f}", f"{r['seconds_per_call']:.4f}", f"{r['tokens_per_second']:.3f}",
             f"{r['speedup']:.3f}x"] + _versus(r) for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]
    left = {0, 1, 2}
    fmt = lambda cells: "  ".join(c.ljust(w) if i in left else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    lines = [caption, "", fmt(header), "  ".join("-" * w for w in widths)] + [fmt(b) for b in body]
    lines += ["", "TV/token: exact expected TV per emitted token (0: lossless). Mean acc. len: mean acceptance length, "
                  "the exact expected tokens per target call; "
                  "Nodes/call: drafted nodes the target verifies; Passes/call: drafter passes the cost model charges "
                  "(one per depth with an expansion); Speedup: tokens per second over plain decoding's, under the "
                  "cost file. shape_oracle: a bound, not a shape (every subtree of every tree tried, knowing its "
                  "outcome)." + (_BOOTSTRAP_NOTE + _caveat_note(rows) if _versus_header(rows) else "")]
    lines += headroom_lines([r["_headroom"] for r in rows if "_headroom" in r])
    return fit_width("\n".join(lines)) + "\n"


def format_markdown(rows: list[dict[str, Any]], caption: str) -> str:
    """GitHub Markdown table of the rows, the caption above it."""
    body = [[r["split"], r["heuristic"], r["setting"], f"{r['tokens_per_call']:.4f}", f"{r['tv_per_token']:.2e}",
             f"{r['mean_nodes']:.2f}", f"{r['tokens_per_second']:.3f}", f"{r['speedup']:.3f}x"] + _versus(r)
            for r in rows]
    header = ["Split", "Heuristic", "Setting", "Mean acc. len", "TV/token", "Nodes/call", "Tokens/s", "Speedup"]
    header += _versus_header(rows)
    note = _caveat_note(rows)
    more = "".join(f"\n{line}\n" for line in headroom_lines([r["_headroom"] for r in rows if "_headroom" in r]))
    return caption + "\n\n" + markdown_table(header, body, right=set(range(3, len(header))), measured=True) + (
        "\n" + note.strip() + "\n" if note else "") + more


__all__ = ["FORMATS", "KEYS", "BOOTSTRAP_KEYS", "HEADROOM_KEYS", "VERSUS_HEADER", "tree_row", "bootstrap_caveats", "format_table",
           "format_markdown"]

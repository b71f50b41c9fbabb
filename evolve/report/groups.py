"""Rendering ``benchmark.py groups``: the table (plain text or Markdown) or JSON of one verification-length policy
for all task groups against one per group (:func:`format_groups`), with the line that prices all groups as one
workload (:func:`combined`) and each policy's share of the headroom (:mod:`evolve.eval.headroom`); the rows are read
by :mod:`evolve.commands.groups`. No NaN or infinity reaches the output (:mod:`evolve.report.finite`: ``n/a`` in a
table, null in JSON)."""
from __future__ import annotations

import json
import math
import textwrap
from typing import Any

from evolve.eval.headroom import headroom_share, share_text
from evolve.report.finite import finite_cell, finite_tree

#: The rows of the table, in order: column label -> how a group's benchmark row is found.
COLUMNS = ("single policy", "group policy", "best fixed", "confidence")


FORMATS = ("table", "markdown", "json")


def ratio(a: float, b: float) -> float:
    """``a / b``, NaN where ``b`` is 0 (shown as n/a, :mod:`evolve.report.finite`)."""
    return a / b if b else math.nan


def combined(groups: list[dict[str, Any]]) -> dict[str, float]:
    """Tokens per second of each column over all groups as one workload (module doc), and of plain decoding."""
    tokens = sum(g["tokens"] for g in groups)
    out = {c: ratio(tokens, sum(ratio(g["tokens"], g["tps"][c]) for g in groups)) for c in COLUMNS}
    out["plain"] = ratio(tokens, sum(ratio(g["tokens"], g["plain_tps"]) for g in groups))
    if all(g.get("bound_tps") for g in groups):
        out["bound"] = ratio(tokens, sum(ratio(g["tokens"], g["bound_tps"]) for g in groups))
    return out


#: The policies whose share of the headroom the table shows.
SHARED = COLUMNS[:2]


def combined_headroom(total: dict[str, float]) -> dict[str, dict | None]:
    """Each policy's share of the headroom of the groups as one workload: between the best fixed length of each group
    and the bound of each group, combined as the tokens per second are (no interval)."""
    if "bound" not in total:
        return {c: None for c in SHARED}
    return {c: {"share": headroom_share(total[c], total[COLUMNS[2]], total["bound"]), "low": None, "high": None}
            for c in SHARED}


def format_groups(groups: list[dict[str, Any]], fmt: str) -> str:
    """The table (``table`` or ``markdown``) or JSON of :func:`group_rows` with the :func:`combined` line."""
    total = combined(groups)
    shares = combined_headroom(total)
    if fmt == "json":
        return json.dumps(finite_tree({"groups": groups, "combined": total, "combined_headroom": shares}),
                          indent=2, allow_nan=False) + "\n"
    head = ["Task group", "tokens", *COLUMNS, "group/single"]
    room_head = ["Task group", *(f"headroom of the {c}" for c in SHARED)]

    def share(h) -> str:
        if h is None:
            return "-"
        return share_text(h)

    def cells(label, tokens, tps, plain, mark=""):
        return [label, str(tokens), *(finite_cell(f"{tps[c]:.2f} ({ratio(tps[c], plain):.2f}x)") +
                                     (mark if c == COLUMNS[1] else "") for c in COLUMNS),
                finite_cell(f"{ratio(tps[COLUMNS[1]], tps[COLUMNS[0]]):.3f}")]

    body = [cells(g["label"], g["tokens"], g["tps"], g["plain_tps"], " *" if g["seeded"] else "") for g in groups]
    body.append(cells("All groups", sum(g["tokens"] for g in groups), total, total["plain"]))
    room = [[g["label"], *(share((g.get("headroom") or {}).get(c)) for c in SHARED)] for g in groups]
    room.append(["All groups", *(share(shares[c]) for c in SHARED)])
    note = ("tokens: generated test tokens; single policy: the champion of the search on all groups; group policy: the "
            "champion of the group's own search; best fixed, confidence: the best fixed length and the confidence "
            "threshold tuned on the group's valid split; tokens per second under the cost file (speedup over plain decoding); * the group's search returned a "
            "seeded competitor (a fixed length or the confidence threshold: evolution found nothing better on valid, "
            "or the champion guard kept it); headroom: the policy's share of the room between the best fixed length and "
            "the length_oracle bound on the group's test split, (policy - best fixed) / (bound - best fixed) in tokens "
            "per second, with its 95% interval over the group's texts (All groups: from the combined figures, no "
            "interval)")
    if fmt == "markdown":
        tables = []
        for h, b in ((head, body), (room_head, room)):
            tables.append("\n".join(["| " + " | ".join(h) + " |", "|" + "---|" * len(h),
                                     *("| " + " | ".join(r) + " |" for r in b)]))
        return "\n\n".join(tables) + f"\n\n{note}\n"
    blocks = []
    for h, b in ((head, body), (room_head, room)):
        widths = [max(len(r[i]) for r in [h, *b]) for i in range(len(h))]
        blocks.append("\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [h, *b]))
    return "\n\n".join(blocks) + "\n" + textwrap.fill(note, 100) + "\n"


__all__ = ["COLUMNS", "FORMATS", "SHARED", "combined", "combined_headroom", "format_groups", "ratio"]

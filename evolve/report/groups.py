"""Rendering ``benchmark.py groups``: the table (plain text or Markdown) or JSON of one verification-length policy
for all task groups against one per group (:func:`format_groups`), with the line that prices all groups as one
workload (:func:`combined`); the rows are read by :mod:`evolve.commands.groups`. No NaN or infinity reaches the
output (:mod:`evolve.report.finite`: ``n/a`` in a table, null in JSON)."""
from __future__ import annotations

import json
import math
import textwrap
from typing import Any

from evolve.report.finite import finite_cell, finite_value


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
    return out


def format_groups(groups: list[dict[str, Any]], fmt: str) -> str:
    """The table (``table`` or ``markdown``) or JSON of :func:`group_rows` with the :func:`combined` line."""
    total = combined(groups)
    if fmt == "json":
        clean = [{**g, "tps": {c: finite_value(v) for c, v in g["tps"].items()},
                  "plain_tps": finite_value(g["plain_tps"])} for g in groups]
        return json.dumps({"groups": clean, "combined": {k: finite_value(v) for k, v in total.items()}},
                          indent=2) + "\n"
    head = ["Task group", "tokens", *COLUMNS, "group/single"]

    def cells(label, tokens, tps, plain, mark=""):
        return [label, str(tokens), *(finite_cell(f"{tps[c]:.2f} ({ratio(tps[c], plain):.2f}x)") +
                                     (mark if c == COLUMNS[1] else "") for c in COLUMNS),
                finite_cell(f"{ratio(tps[COLUMNS[1]], tps[COLUMNS[0]]):.3f}")]

    body = [cells(g["label"], g["tokens"], g["tps"], g["plain_tps"], " *" if g["seeded"] else "") for g in groups]
    body.append(cells("All groups", sum(g["tokens"] for g in groups), total, total["plain"]))
    note = ("tokens: generated test tokens; single policy: the champion of the search on all groups; group policy: the "
            "champion of the group's own search; best fixed, confidence: the best fixed length and the confidence "
            "threshold tuned on the group's valid split; tokens per second under the cost file (speedup over plain decoding); * the group's search returned a "
            "seeded competitor (a fixed length or the confidence threshold: evolution found nothing better on valid, "
            "or the champion guard kept it)")
    if fmt == "markdown":
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines) + f"\n\n{note}\n"
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *body]]
    return "\n".join(lines) + "\n" + textwrap.fill(note, 100) + "\n"


__all__ = ["COLUMNS", "FORMATS", "combined", "format_groups", "ratio"]

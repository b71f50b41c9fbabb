"""How every verification-length and tree-shape table states the headroom a champion captures.

A record (from a kind's ``compare`` hook, :func:`evolve.kinds.verify_length.eval_headroom.standing`, or the trees
command) holds ``champion``, ``split``, ``headroom`` (:meth:`evolve.eval.headroom.Headroom.to_dict`) and ``rivals``
(each competitor's ``name`` and the champion's tokens per second over it, ``ratio`` with the 95% interval
``low``/``high`` over texts), and its figures' ``unit`` (``tok/s`` when absent). :func:`headroom_line` writes one
line per record: the share of the headroom with its interval and the three figures it comes from, then the
competitors the champion is behind (the whole interval below 1: by more than the spread; the learned stopping rules
named as such), then those ahead of it inside the spread (a tie), each with its ratio and interval.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from evolve.eval.headroom import share_text

#: What the lines say the share is.
DEFINITION = ("headroom share = (champion - best fixed) / (bound - best fixed) in tokens per second (per target step "
              "without a cost file), with its 95% interval from a paired bootstrap over texts (evolve.eval.headroom)")


def _num(x: Any, spec: str) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


#: Rows whose names start so are learned baselines (the table says when one beats the champion).
LEARNED_PREFIX = "learned_"


def rival_text(r: dict[str, Any]) -> str:
    """``learned_gbm 0.970x [0.930, 1.010]`` (the champion over the rival), marked when the whole interval is
    below 1."""
    below = r.get("high") is not None and r["high"] < 1.0
    return (f"{r['name']} {_num(r['ratio'], '.3f')}x [{_num(r.get('low'), '.3f')}, {_num(r.get('high'), '.3f')}]"
            + (" (by more than the spread)" if below else ""))


def headroom_line(rec: dict[str, Any]) -> str:
    """One line of a record (module doc); its ``fixed_name`` and ``bound_name`` name the rows the share is measured
    between."""
    h = rec["headroom"]
    line = (f"headroom, {rec['split']}: {rec['champion']} captures {share_text(h)} of it "
            f"({rec.get('fixed_name', 'best fixed')} {_num(h.get('fixed'), '.4g')} {rec.get('unit', 'tok/s')}, "
            f"champion {_num(h.get('champion'), '.4g')}, "
            f"{rec.get('bound_name', 'bound')} {_num(h.get('bound'), '.4g')})")
    rivals = [r for r in rec.get("rivals", ()) if r.get("ratio") is not None]
    behind = [r for r in rivals if r.get("high") is not None and r["high"] < 1.0]
    tied = [r for r in rivals if r["ratio"] < 1.0 and r not in behind]
    if behind:
        line += "; behind " + ", ".join(rival_text(r) for r in sorted(behind, key=lambda r: r["ratio"]))
        if any(r["name"].startswith(LEARNED_PREFIX) for r in behind):
            line += "; the learned baseline beats it"
    if tied:
        line += ("; tied with " + ", ".join(rival_text(r) for r in sorted(tied, key=lambda r: r["ratio"]))
                 + " (ahead of it, inside the spread)")
    if not behind and not tied and rivals:
        closest = min(rivals, key=lambda r: r["ratio"])
        line += f"; behind no competitor (closest: {rival_text(closest)})"
    if h.get("caveat"):
        line += f" (caveat: {h['caveat']})"
    return line + "."


def headroom_lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """:func:`headroom_line` of every record, after one line defining the share (none without records)."""
    if not records:
        return []
    return [f"{DEFINITION}:", *(headroom_line(r) for r in records)]


__all__ = ["DEFINITION", "LEARNED_PREFIX", "share_text", "rival_text", "headroom_line", "headroom_lines"]

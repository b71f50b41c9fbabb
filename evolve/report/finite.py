"""No NaN or infinity in a printed table: a number that could not be measured is shown as ``n/a``.

A report computes some figures that may be undefined on a given split (a ratio over zero calls, a rate of no
records); Python formats them as ``nan``, ``inf`` or ``-inf`` (``f"{x:.3f}"``, ``f"{x:.2f}x"``), which reads as a
measurement. The shared table helpers pass every cell through :func:`finite_cell` (plain-text tables through
:func:`evolve.report.width.fit_width`, Markdown tables of measurements through
:func:`evolve.report.markdown.markdown_table`), so such a token in a measured cell becomes ``n/a``, right-aligned in
the cell's width where the token was wider; :func:`finite_value` turns a
non-finite float into None for the CSV and JSON outputs (an empty CSV cell, a JSON null).
"""
from __future__ import annotations

import math
import re
from typing import Any

#: What a table shows for a number that is not finite (or was not measured).
NOT_A_NUMBER = "n/a"
#: A non-finite float as Python formats it, with a unit letter or percent sign glued after it (``nanx``, ``inf%``),
#: not inside a word (``info``, ``financial``).
_NON_FINITE = re.compile(r"(?<![A-Za-z0-9_.])[-+]?(?:nan|inf(?:inity)?)(?:x|%)?(?![A-Za-z0-9_])", re.IGNORECASE)


#: What may stand beside the numbers of a measured cell: digits, signs, points, brackets, separators, units.
_NUMERIC_REST = re.compile(r"[\d\s.,;:+\-\[\]()x%/±*eE]*")


def finite_cell(text: str) -> str:
    """``text`` (one cell of a table) with every non-finite number token replaced by :data:`NOT_A_NUMBER`, padded
    on the left to the token's width so columns stay aligned. Only a measured cell is changed: one holding numbers
    alone (with brackets, separators and unit signs), not a setting in words (``T=inf``, ``keep inf children``)."""
    if not _NON_FINITE.search(text) or not _NUMERIC_REST.fullmatch(_NON_FINITE.sub("", text)):
        return text
    return _NON_FINITE.sub(lambda m: NOT_A_NUMBER.rjust(len(m.group(0))), text)


def finite_row(line: str, spans: list[tuple[int, int]]) -> str:
    """One line of a plain-text table whose columns start where the runs of dashes of its rule line start
    (``spans``: (start, end) of each run), each cell through :func:`finite_cell`."""
    starts = [a for a, _ in spans] + [max(len(line), spans[-1][1])]
    cells = [line[:starts[0]]] + [finite_cell(line[a:b]) for a, b in zip(starts, starts[1:])]
    return "".join(cells) + line[starts[-1]:]


def finite_value(value: Any) -> Any:
    """``value``, or None when it is a float (or numpy float) that is NaN or infinite."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def finite_tree(value: Any) -> Any:
    """``value`` with :func:`finite_value` applied to every number inside its dicts, lists and tuples (tuples become
    lists), for a JSON document that has no NaN or infinity (``json.dumps(..., allow_nan=False)`` accepts it)."""
    if isinstance(value, dict):
        return {k: finite_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_tree(v) for v in value]
    return finite_value(value)


def has_non_finite(text: str) -> bool:
    """Whether ``text`` holds a token :func:`finite_cell` would replace."""
    return _NON_FINITE.search(text) is not None


__all__ = ["NOT_A_NUMBER", "finite_cell", "finite_row", "finite_tree", "finite_value", "has_non_finite"]

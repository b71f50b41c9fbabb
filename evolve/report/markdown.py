"""GitHub Markdown output: tables (:func:`markdown_table`), fenced plain-text blocks (:func:`fenced`) and a table
without some columns (:func:`drop_columns`), for ``--format markdown`` and the documented tables."""
from __future__ import annotations

import re

from evolve.report.finite import finite_cell


def fenced(text: str) -> str:
    """``text`` as a fenced plain-text code block (trailing spaces and blank lines removed)."""
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    return "```text\n" + "\n".join(lines) + "\n```\n"


def markdown_table(header: list[str], rows: list[list[str]], right: set[int] = frozenset(),
                   measured: bool = False) -> str:
    """A GitHub Markdown table; columns whose index is in ``right`` are right-aligned; ``|`` is escaped. A table of
    ``measured`` figures shows a non-finite number as ``n/a`` (:func:`evolve.report.finite.finite_cell`; a reference
    table keeps a range such as ``[0, inf)`` as written)."""
    def cell(text: str) -> str:
        return (finite_cell(str(text)) if measured else str(text)).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def drop_columns(markdown: str, names: set[str]) -> str:
    """The Markdown table lines of ``markdown`` (lines starting with ``|``) without the columns ``names``.

    Only the first table's header decides which columns go; other lines are dropped.
    """
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    if not rows:
        return ""
    def cells(line: str) -> list[str]:
        return re.split(r"(?<!\\)\|", line.strip())[1:-1]
    header = [c.strip() for c in cells(rows[0])]
    keep = [i for i, h in enumerate(header) if h not in names]
    return "\n".join("|" + "|".join(cells(line)[i] for i in keep) + "|" for line in rows) + "\n"


__all__ = ["fenced", "markdown_table", "drop_columns"]

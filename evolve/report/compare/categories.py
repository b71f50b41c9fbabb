"""Rendering ``benchmark.py``'s per-category tables (Spec-Bench's leaderboard layout): the figures of one split
(:class:`CategoryFigures`, computed by :mod:`evolve.commands.compare.categories`) as plain text
(:func:`format_categories`) and JSON (:func:`figures_json`)."""
from __future__ import annotations

import dataclasses

import numpy as np

from evolve.report.compare.rows import Row
from evolve.eval.headroom import share_text
from evolve.report.headroom import DEFINITION
from evolve.report.width import fit_width


#: Label of the column of the whole split.
OVERALL = "Overall"


@dataclasses.dataclass
class CategoryFigures:
    """The per-category comparison of one split: ``columns`` (header labels) in order, ``rows`` (rule name ->
    the :class:`Row` of each column, None where the rule has no row there) and ``acceptance`` (column label ->
    per-position acceptance rates of the harvested blocks, float64 (gamma,)), ``headroom`` (champion -> its headroom
    figures of each column, :meth:`evolve.eval.headroom.Headroom.to_dict`, None where not measured), ``notes`` (why
    a row is missing from a column: a competitor that could not be computed there)."""

    split: str
    columns: list[str]
    rows: dict[str, list[Row | None]]
    acceptance: dict[str, np.ndarray]
    costs: bool
    by_category: bool = False
    headroom: dict[str, list[dict | None]] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)


def _table(title: str, header: list[str], body: list[list[str]]) -> list[str]:
    """A plain-text table (first column left-aligned, the others right-aligned, two spaces apart) under ``title``."""
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return ["", title, "", line(header), "  ".join("-" * w for w in widths), *map(line, body)]


def format_categories(fig: CategoryFigures) -> str:
    """The tables of :func:`category_figures` as plain text (fitted to 100 columns, :mod:`evolve.report.width`)."""
    header = ["Rule", *fig.columns]

    def cells(fmt) -> list[list[str]]:
        return [[name, *("-" if r is None or fmt(r) is None else fmt(r) for r in rows)]
                for name, rows in fig.rows.items()]

    def tau_speedup(r: Row) -> str | None:
        tpc, speedup = r.value("tokens_per_call"), r.value("speedup")
        return None if tpc is None or speedup is None else f"{tpc:.2f} {speedup:.2f}x"

    what = "Per category and task group" if fig.by_category else "Per task group"
    lines = _table(f"{what}, split {fig.split} (Spec-Bench's layout): mean acceptance length (tokens per "
                   f"target call) and speedup ({'cost file' if fig.costs else 'cost ratio'})", header,
                   cells(tau_speedup))
    if fig.costs:
        lines += _table(f"Tokens per second (cost file), split {fig.split}", header,
                        cells(lambda r: None if r.value("tokens_per_second") is None
                              else f"{r.value('tokens_per_second'):.1f}"))
    if fig.headroom:
        body = [[name, *("-" if h is None else share_text(h) for h in cells_)] for name, cells_ in fig.headroom.items()]
        lines += _table(f"Share of the headroom each champion captures, split {fig.split}: {DEFINITION}", header, body)
        caveats: dict[str, dict[str, None]] = {}  # caveat -> the columns it applies to, in order
        for cells_ in fig.headroom.values():
            for label, h in zip(fig.columns, cells_):
                if h is not None and h.get("caveat"):
                    caveats.setdefault(h["caveat"], {})[label] = None
        # a paragraph of its own under the table (not a row of it, which a table too wide would cut into columns)
        lines += ["", *(f"caveat ({', '.join(labels)}): {c}" for c, labels in caveats.items())] if caveats else []
    if fig.acceptance:
        gamma = len(next(iter(fig.acceptance.values())))
        body = [[label, *(f"{a:.3f}" for a in rates)] for label, rates in fig.acceptance.items()]
        lines += _table(f"Standard rule's expected acceptance rate per draft position of the harvested blocks, split "
                        f"{fig.split}", ["Group", *(f"pos {k + 1}" for k in range(gamma))], body)
    lines += ["", *(f"note: {n}" for n in fig.notes)] if fig.notes else []
    return fit_width("\n".join(lines)) + "\n"


def figures_json(fig: CategoryFigures) -> dict:
    """The figures as plain JSON values: ``columns`` (labels), ``rows`` (rule -> per column an object with
    ``tokens_per_call``, ``speedup`` and ``tokens_per_second``, or null), ``headroom`` (champion -> per column its
    headroom figures, or null), ``notes``, ``acceptance`` (label -> rates per draft position)."""
    def cell(r: Row | None) -> dict | None:
        if r is None:
            return None
        return {k: r.value(k) for k in ("tokens_per_call", "speedup", "tokens_per_second")}

    return {"columns": fig.columns, "rows": {name: [cell(r) for r in rows] for name, rows in fig.rows.items()},
            "headroom": fig.headroom, "notes": fig.notes,
            "acceptance": {label: rates.tolist() for label, rates in fig.acceptance.items()}}


__all__ = ["CategoryFigures", "OVERALL", "figures_json", "format_categories"]

"""Rendering ``benchmark.py``'s comparison: the rich table, Markdown, CSV and JSON.

``table`` (rich, plain text) and ``markdown`` (a GitHub table) show the
acceptance-quality columns (Heuristic, Accept%, Accuracy, Quality, Fitness,
Time), the expected metrics, the block metrics (on data with speculation
blocks) and the champions' deltas, followed by a caption and the notes;
``csv`` and ``json`` hold one record per row with the keys
:data:`evolve.report.compare.rows.ROW_KEYS`. A cell a row has no value for
(the per-token columns of ``block_verification``) is ``-``.
"""
from __future__ import annotations

import csv
import io
import json

from evolve.report.compare.rows import FORMATS, REFERENCE_RULE, ROW_KEYS, VERIFIER, Comparison
from evolve.report.output import resolve_format

def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ms(x: float) -> str:
    return f"{x:.2f}ms" if x < 100 else f"{x:.0f}ms"


def _num(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _signed_pp(x: float | None) -> str:
    return "" if x is None else f"{100 * x:+.1f}pp"


def _signed(x: float | None) -> str:
    return "" if x is None else f"{x:+.3f}"


def _display_columns(comparison: Comparison) -> list[tuple[str, bool, callable]]:
    """(header, right-aligned, cell function of a Row) of the human-readable table."""
    cols: list[tuple[str, bool, callable]] = []
    if len(comparison.splits) > 1:
        cols.append(("Split", False, lambda r: r.split))
    cols += [
        ("Heuristic", False, lambda r: r.heuristic),
        ("Accept%", True, lambda r: _pct(r.value("acceptance_rate"))),
        ("Accuracy", True, lambda r: _pct(r.value("accuracy"))),
        ("Quality", True, lambda r: _num(r.value("quality_score"), ".3f")),
        ("Fitness", True, lambda r: _num(r.value("fitness"), ".3f")),
        ("Time", True, lambda r: _ms(r.time_ms)),
        ("E[accept]", True, lambda r: _pct(r.value("expected_acceptance"))),
        ("E[TV]", True, lambda r: _num(r.value("expected_tv"), ".4f")),
        ("E[fitness]", True, lambda r: _num(r.value("expected_fitness"), ".3f")),
    ]
    if any(r.value("tokens_per_call") is not None for r in comparison.rows):
        def block(name: str, spec: str):
            return lambda r: "n/a" if r.value(name) is None else format(r.value(name), spec)
        cols += [("Tok/call", True, block("tokens_per_call", ".3f")), ("Speedup", True, block("speedup", ".3f")),
                 ("TV/tok", True, block("tv_per_token", ".4f"))]
    if any(r.value("n_invalid") for r in comparison.rows):
        cols.append(("Invalid", True, lambda r: _num(r.value("n_invalid"), "d")))
    if any(r.kind == "champion" for r in comparison.rows):
        cols += [
            ("ΔFitness", True, lambda r: _signed(r.delta_fitness)),
            ("ΔAccept", True, lambda r: _signed_pp(r.delta_acceptance)),
            ("ΔE[fitness]", True, lambda r: _signed(r.delta_expected_fitness)),
            ("ΔE[TV]", True, lambda r: "" if r.delta_expected_tv is None else f"{r.delta_expected_tv:+.4f}"),
        ]
    return cols


def _caption(comparison: Comparison) -> list[str]:
    lines = [f"{s}: {comparison.tokens[s]:,} tokens from {comparison.sources[s]}" for s in comparison.splits]
    text = (f"Time: best of {comparison.repeats} timed evaluations after a warm-up. E[accept] = mean tau, "
            "E[TV] = mean max(0, tau - min(1, p/q)), E[fitness] = acceptance-quality fitness on those.")
    gammas = {g for g in comparison.gamma.values() if g}
    if gammas:
        text += (f" Tok/call = expected tokens per target call with gamma {', '.join(map(str, sorted(gammas)))}"
                 f" (1 + sum_k prod_(i<=k) tau_i per block), Speedup = Tok/call / (gamma*c + 1) with draft/target"
                 f" cost ratio c = {comparison.cost_ratio:g}, TV/tok = expected TV per emitted token.")
    if any(r.kind == "champion" for r in comparison.rows):
        text += f" Δ = champion minus {REFERENCE_RULE} on the same split (pp: percentage points)."
    if any(r.kind == VERIFIER for r in comparison.rows):
        text += (" block_verification: lossless block verification (Sun et al. 2024, arXiv 2403.10444), tokens per"
                 " call from the records' block_residual_mass; it has no per-token threshold (-), its TV is 0.")
    lines.append(text)
    return lines


def format_table(comparison: Comparison) -> str:
    """Plain-text table rendered with rich (the benchmark table's columns plus expected metrics and deltas)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    cols = _display_columns(comparison)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header, right, _ in cols:
        table.add_column(header, justify="right" if right else "left", no_wrap=True)
    prev = None
    for row in comparison.rows:
        key = (row.split, row.kind)
        if prev is not None and key != prev:
            table.add_section()
        prev = key
        table.add_row(*(cell(row) for _, _, cell in cols))
    buf = io.StringIO()
    console = Console(file=buf, width=400, color_system=None, highlight=False, emoji=False, markup=False,
                      soft_wrap=True)
    console.print(table)
    text = "\n".join(line.rstrip() for line in buf.getvalue().splitlines())
    footer = _caption(comparison) + [f"note: {n}" for n in comparison.notes]
    return text + "\n\n" + "\n".join(footer) + "\n"


def format_markdown(comparison: Comparison) -> str:
    """A GitHub-flavoured Markdown table, followed by the caption and notes."""
    cols = _display_columns(comparison)

    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(h for h, _, _ in cols) + " |",
             "|" + "|".join("---:" if right else "---" for _, right, _ in cols) + "|"]
    for row in comparison.rows:
        lines.append("| " + " | ".join(esc(cell(row)) for _, _, cell in cols) + " |")
    footer = _caption(comparison) + [f"Note: {n}" for n in comparison.notes]
    return "\n".join(lines) + "\n\n" + "\n\n".join(footer) + "\n"


def format_csv(comparison: Comparison) -> str:
    """CSV with a header of :data:`ROW_KEYS`; floats at full precision, missing values empty."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(ROW_KEYS), lineterminator="\n")
    writer.writeheader()
    for row in comparison.rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.to_dict().items()})
    return buf.getvalue()


def format_json(comparison: Comparison) -> str:
    """A JSON array of objects with the keys :data:`ROW_KEYS` (rates as fractions, time in ms)."""
    return json.dumps([row.to_dict() for row in comparison.rows], indent=2) + "\n"


FORMATTERS = {"table": format_table, "csv": format_csv, "json": format_json, "markdown": format_markdown}


def format_comparison(comparison: Comparison, fmt: str = "table") -> str:
    """Render ``comparison`` in ``fmt`` (one of :data:`FORMATS`). Raises InputError for an unknown format."""
    return FORMATTERS[resolve_format(fmt, None, FORMATS)](comparison)


__all__ = ["FORMATTERS", "format_comparison", "format_csv", "format_json", "format_markdown", "format_table"]

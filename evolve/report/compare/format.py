"""Rendering ``benchmark.py``'s comparison: the rich table, Markdown, CSV and JSON.

``markdown`` (a GitHub table) shows every column: the acceptance-quality columns (Heuristic,
Accept%, Accuracy, Quality, Fitness, Time), the expected metrics, the block metrics (on data with
speculation blocks) and the champions' deltas, followed by a caption, the notes and the verdict.
``table`` (rich, plain text, the default) shows the essential columns only (:func:`_table_columns`:
Heuristic, Accept%, Fitness, then Mean acc. len (tokens per call), Speedup and TV/tok on data with blocks or E[TV] without,
and ΔFitness with champions), so that it fits in :data:`TABLE_WIDTH` columns; its caption and notes
are wrapped to that width and its last paragraph is the verdict (wrapped too, its continuation lines indented). ``csv`` holds one record per row with
the keys :data:`evolve.report.compare.rows.ROW_KEYS`; ``json`` is an object with ``rows`` (those
records) and ``verdict`` (:meth:`evolve.report.compare.verdict.Verdict.to_dict`, or null). A cell a
row has no value for (the per-token columns of ``block_verification``) is ``-``. The verdict
(:mod:`evolve.report.compare.verdict`) says which rule wins on the scored split by fitness.
"""
from __future__ import annotations

import csv
import io
import json
import textwrap

from evolve.report.compare.concurrency import concurrency_lines, schedule_lines
from evolve.kinds.registry import KINDS
from evolve.report.compare.rows import FORMATS, REFERENCE_RULE, ROW_KEYS, VERIFIER, Comparison
from evolve.report.compare.verdict import compute_verdict
from evolve.report.finite import finite_cell, finite_tree, finite_value
from evolve.report.headroom import headroom_lines
from evolve.report.output import resolve_format

#: Width (characters) the default ``table`` format fits in: its table, caption, notes (the verdict
#: line excepted: it is one line, however long).
TABLE_WIDTH = 100


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
        cols += [("Mean acc. len", True, block("tokens_per_call", ".3f")), ("Speedup", True, block("speedup", ".3f")),
                 ("TV/tok", True, block("tv_per_token", ".4f"))]
        if any(r.value("tokens_per_second") is not None for r in comparison.rows):
            cols.append(("Tok/s", True, block("tokens_per_second", ".2f")))
    if any(r.value("n_invalid") for r in comparison.rows):
        cols.append(("Invalid", True, lambda r: _num(r.value("n_invalid"), "d")))
    if any(r.role == "champion" for r in comparison.rows):
        cols += [
            ("ΔFitness", True, lambda r: _signed(r.delta_fitness)),
            ("ΔAccept", True, lambda r: _signed_pp(r.delta_acceptance)),
            ("ΔE[fitness]", True, lambda r: _signed(r.delta_expected_fitness)),
            ("ΔE[TV]", True, lambda r: "" if r.delta_expected_tv is None else f"{r.delta_expected_tv:+.4f}"),
        ]
    return cols


def _table_columns(comparison: Comparison) -> list[tuple[str, bool, callable]]:
    """The essential columns of :func:`_display_columns`, the default table's: Split (several splits),
    Heuristic, Accept%, Fitness, the block columns (Mean acc. len, Speedup, TV/tok) or, on data without
    blocks, E[TV], Invalid (when a rule has invalid values) and ΔFitness (with champions)."""
    cols = _display_columns(comparison)
    headers = {h for h, _, _ in cols}
    keep = {"Split", "Heuristic", "Accept%", "Fitness", "Mean acc. len", "Speedup", "TV/tok", "Tok/s", "Invalid",
            "ΔFitness"}
    if "TV/tok" not in headers:
        keep.add("E[TV]")
    return [c for c in cols if c[0] in keep]


def _caption(comparison: Comparison, shown: set[str] | None = None) -> list[str]:
    """The caption lines: tokens per split, then what the columns mean (only the ``shown`` headers;
    None: every column of :func:`_display_columns`)."""
    lines = [f"{s}: {comparison.tokens[s]:,} tokens from {comparison.sources[s]}" for s in comparison.splits]
    parts = [f"Time: best of {comparison.repeats} timed evaluations after a warm-up."] if (
        shown is None or "Time" in shown) else []
    expected = [text for header, text in (("E[accept]", "E[accept] = mean tau"),
                                          ("E[TV]", "E[TV] = mean max(0, tau - min(1, p/q))"),
                                          ("E[fitness]", "E[fitness] = acceptance-quality fitness on those"))
                if shown is None or header in shown]
    if expected:
        parts.append(", ".join(expected) + ".")
    text = " ".join(parts)
    gammas = {g for g in comparison.gamma.values() if g}
    if gammas and not comparison.costs.measured:
        text += (f" Mean acc. len = mean acceptance length = expected tokens per target call with gamma"
                 f" {', '.join(map(str, sorted(gammas)))} (1 + sum_k prod_(i<=k) tau_i per block), Speedup ="
                 f" Mean acc. len / (gamma*c + 1) with draft/target"
                 f" cost ratio c = {comparison.costs.cost_ratio:g}, TV/tok = expected TV per emitted token.")
    elif gammas:
        text += (f" Mean acc. len = mean acceptance length = expected tokens per target call with gamma"
                 f" {', '.join(map(str, sorted(gammas)))}, Tok/s = Mean acc. len / (target_forward_s(gamma + 1) +"
                 f" gamma * draft_token_s) of the cost file"
                 f" {comparison.costs.source}{_priced_context(comparison.costs)}, Speedup = Tok/s * plain_token_s,"
                 f" TV/tok = expected TV per emitted token.")
    if any(r.role == "champion" for r in comparison.rows):
        pp = " (pp: percentage points)" if shown is None or "ΔAccept" in shown else ""
        text += f" Δ = champion minus {REFERENCE_RULE} on the same split{pp}."
    if any(r.role == VERIFIER for r in comparison.rows):
        text += (" block_verification: lossless block verification (Sun et al. 2024, arXiv 2403.10444), tokens per"
                 " call from the records' block_residual_mass; it has no per-token threshold (-), its TV is 0.")
    for kind in KINDS.values():
        caption = kind.hooks().caption
        names = list(dict.fromkeys(r.heuristic for r in comparison.rows if r.program_kind == kind.name))
        if names and caption:
            text += " " + caption.format(names=", ".join(names))
    for note in comparison.notes_of_kinds:
        text += f" {note}"
    lines.append(text.strip())
    return lines


def _verdict_line(comparison: Comparison) -> str | None:
    verdict = compute_verdict(comparison)
    return None if verdict is None else verdict.text


def printed_verdict(text: str, width: int = TABLE_WIDTH) -> str:
    """A verdict's ``text`` (:attr:`evolve.report.compare.verdict.Verdict.text`: hint lines, then the verdict line)
    as printed: the verdict line wrapped to ``width``, its continuation lines indented by two spaces, so the
    paragraph starting ``verdict:`` is the last one."""
    *hint, line = text.split("\n")
    return "\n".join([*hint, *textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False,
                                             break_on_hyphens=False)])


def _wrap(line: str, width: int = TABLE_WIDTH) -> list[str]:
    """``line`` wrapped to ``width`` (paths are not broken; a longer word stays whole)."""
    return textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False) or [""]


def format_table(comparison: Comparison) -> str:
    """Plain-text table rendered with rich: the essential columns (:func:`_table_columns`) in at most
    :data:`TABLE_WIDTH` characters (a long rule name is folded onto a second line), the caption and
    notes wrapped to that width, and the verdict as the last line."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    cols = _table_columns(comparison)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header, right, _ in cols:
        folds = header == "Heuristic"
        table.add_column(header, justify="right" if right else "left", no_wrap=not folds,
                         overflow="fold" if folds else "ellipsis")
    prev = None
    for row in comparison.rows:
        key = (row.split, row.role)
        if prev is not None and key != prev:
            table.add_section()
        prev = key
        table.add_row(*(finite_cell(cell(row)) for _, _, cell in cols))
    buf = io.StringIO()
    console = Console(file=buf, width=TABLE_WIDTH, color_system=None, highlight=False, emoji=False, markup=False)
    console.print(table)
    text = "\n".join(line.rstrip() for line in buf.getvalue().splitlines())
    shown = {h for h, _, _ in cols}
    more = [h for h, _, _ in _display_columns(comparison) if h not in shown]
    footer = _caption(comparison, shown)
    if more:
        footer.append(f"More columns ({', '.join(more)}): --format markdown, csv or json.")
    footer += [f"note: {n}" for n in comparison.notes]
    footer += headroom_lines(comparison.headroom)
    lines = [wrapped for line in footer for wrapped in _wrap(line)]
    if comparison.concurrency:
        requests = list(comparison.concurrency[0]["speedup"])
        lines += ["", *concurrency_lines(comparison.concurrency, requests),
                  *_wrap("Concurrency: R requests decoded together, each step verifying every request's drafts in "
                         "one target call (the cost file's batch curve); speedup over plain decoding of R requests "
                         "(evolve.commands.compare.concurrency).")]
        lines += [wrapped for line in schedule_lines(comparison) for wrapped in _wrap(line)]
    verdict = _verdict_line(comparison)
    return text + "\n\n" + "\n".join(lines) + "\n" + (f"\n{printed_verdict(verdict)}\n" if verdict else "")


def format_markdown(comparison: Comparison) -> str:
    """A GitHub-flavoured Markdown table (every column), followed by the caption, the notes and the verdict."""
    cols = _display_columns(comparison)

    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(h for h, _, _ in cols) + " |",
             "|" + "|".join("---:" if right else "---" for _, right, _ in cols) + "|"]
    for row in comparison.rows:
        lines.append("| " + " | ".join(esc(finite_cell(cell(row))) for _, _, cell in cols) + " |")
    footer = _caption(comparison) + [f"Note: {n}" for n in comparison.notes]
    footer += [esc(line) for line in headroom_lines(comparison.headroom)]
    verdict = _verdict_line(comparison)
    if verdict:
        footer.append(f"**Verdict:** {esc(verdict.removeprefix('verdict: '))}")
    return "\n".join(lines) + "\n\n" + "\n\n".join(footer) + "\n"


def format_csv(comparison: Comparison) -> str:
    """CSV with a header of :data:`ROW_KEYS`; floats at full precision, missing and non-finite values empty."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(ROW_KEYS), lineterminator="\n")
    writer.writeheader()
    for row in comparison.rows:
        writer.writerow({k: ("" if finite_value(v) is None else v) for k, v in row.to_dict().items()})
    return buf.getvalue()


def format_json(comparison: Comparison) -> str:
    """A JSON object: ``rows``, an array of objects with the keys :data:`ROW_KEYS` (rates as fractions,
    time in ms), ``verdict`` (:meth:`evolve.report.compare.verdict.Verdict.to_dict`; null when no
    rule has a fitness), ``concurrency`` (:func:`evolve.commands.compare.concurrency.concurrency_rows`;
    null without ``--concurrency``) and ``schedules`` (per split, the per-batch-size schedule of fixed lengths:
    ``ranges`` as [start, end, draft length], end null for no upper end, and the split it was ``tuned_on``;
    empty without ``--concurrency``), ``headroom`` (per champion of a kind that measures it and split: the share of
    the headroom it captures and its standing against each competitor, :mod:`evolve.report.headroom`) and ``data``
    (per split scored, its records file ``source`` and that file's ``sha256``, so a reader of the file can tell which
    dataset it scored)."""
    verdict = compute_verdict(comparison)
    schedules = {split: {"ranges": [list(r) for r in found["schedule"]], "tuned_on": found["tuned_on"]}
                 for split, found in comparison.schedules.items()}
    data = {s: {"source": comparison.sources.get(s), "sha256": comparison.digests.get(s)} for s in comparison.splits}
    return json.dumps(finite_tree({"rows": [row.to_dict() for row in comparison.rows],
                                   "verdict": None if verdict is None else verdict.to_dict(),
                                   "concurrency": comparison.concurrency, "schedules": schedules,
                                   "headroom": comparison.headroom, "data": data}), indent=2, allow_nan=False) + "\n"


FORMATTERS = {"table": format_table, "csv": format_csv, "json": format_json, "markdown": format_markdown}


def format_comparison(comparison: Comparison, fmt: str = "table") -> str:
    """Render ``comparison`` in ``fmt`` (one of :data:`FORMATS`). Raises InputError for an unknown format."""
    return FORMATTERS[resolve_format(fmt, None, FORMATS)](comparison)



def _priced_context(costs) -> str:
    """The caption's words on the context the cost file prices calls at (none for a file timed at one context)."""
    at = costs.priced_context
    return "" if at is None else f" priced at {at:.0f} tokens of context (the dataset's mean)"


__all__ = ["FORMATTERS", "TABLE_WIDTH", "printed_verdict", "format_comparison", "format_csv", "format_json", "format_markdown", "format_table"]

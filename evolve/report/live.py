"""Rendering ``benchmark.py live``: its report (:class:`LiveReport`, measured by :mod:`evolve.commands.live`) as a
plain-text table with the caption above it (:func:`format_table`, with the per-task-group table of
:func:`category_lines` for prompts with categories) or JSON (:func:`format_json`)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from evolve.eval.bootstrap import COVERAGE, interval_text
from evolve.live.decoding import LiveCounts
from evolve.report.finite import finite_tree
from evolve.report.spec_bench import groups_of
from evolve.report.width import fit_width


FORMATS: tuple[str, ...] = ("table", "json")


#: Keys of a row (the JSON output's objects, in this order).
KEYS: tuple[str, ...] = ("rule", "tokens", "target_calls", "tokens_per_call", "tokens_per_s", "ar_tokens_per_s",
                         "speedup", "tv_per_token", "tokens_per_call_se", "expected_tokens_per_call",
                         "mean_drafted", "predicted_tokens_per_s", "predicted_speedup", "predicted_context_tokens",
                         "engine", "repeats",
                         "tokens_per_s_min", "tokens_per_s_max", "tokens_per_s_mad", "speedup_min", "speedup_max",
                         "speedup_low", "speedup_high", "same_text", "fastest_over", "fastest_over_low",
                         "fastest_over_high", "engine_fastest_over", "engine_fastest_over_low",
                         "engine_fastest_over_high")


#: The engine of this project's rows (a peer's rows name its library).
OURS = "evolve"


@dataclass
class LiveReport:
    """Rows (dicts with :data:`KEYS`) in rule order, the plain-decoding totals, a one-line caption, each rule's
    counts and, for prompts with categories, the counts per category."""

    rows: list[dict]
    autoregressive: LiveCounts
    caption: str
    counts: list[LiveCounts] = field(default_factory=list)
    #: category -> [plain decoding's counts, then each rule's], for prompts with categories (sorted by name).
    by_category: dict[str, list[LiveCounts]] = field(default_factory=dict)
    #: The peers' rows' counts (:mod:`evolve.live.peers`), in their order after this project's rows.
    peer_counts: list[LiveCounts] = field(default_factory=list)
    #: The champions' live headroom shares (``champion``, ``fixed``, ``bound_tokens_per_s``, ``priced``,
    #: ``measured``: :func:`evolve.kinds.verify_length.report_live.live_headroom`); empty when not measured.
    headroom: list[dict] = field(default_factory=list)


def format_table(report: LiveReport) -> str:
    """Plain-text table of the rows, the caption above it."""
    header = ["Rule", "Tokens", "Calls", "Drafted/call", "Mean acc. len", "E[acc. len]", "Tokens/s", "AR tokens/s",
              "Speedup", "TV/token"]
    body = [[r["rule"], f"{r['tokens']}", f"{r['target_calls']}", f"{r['mean_drafted']:.2f}",
             f"{r['tokens_per_call']:.3f} ± {r['tokens_per_call_se']:.3f}", f"{r['expected_tokens_per_call']:.3f}",
             f"{r['tokens_per_s']:.2f}", f"{r['ar_tokens_per_s']:.2f}", f"{r['speedup']:.2f}x",
             f"{r['tv_per_token']:.2e}"] for r in report.rows]
    extended = any(r.get("repeats", 1) > 1 or r.get("engine", OURS) != OURS for r in report.rows)
    if extended:
        engines = len({r.get("engine", OURS) for r in report.rows}) > 1
        header = ["Rule", "Engine", "Tokens", "Calls", "Mean acc. len", "Tokens/s [min-max]", "Plain tokens/s",
                  "Speedup [min-max]", f"Speedup {COVERAGE:.0%} CI", f"Fastest/row [{COVERAGE:.0%} CI]",
                  *([f"Engine's fastest/row [{COVERAGE:.0%} CI]"] if engines else []), "Same text", "TV/token"]
        body = [[r["rule"], r["engine"], f"{r['tokens']}", f"{r['target_calls']}", f"{r['tokens_per_call']:.3f}",
                 f"{r['tokens_per_s']:.2f} [{r['tokens_per_s_min']:.2f}-{r['tokens_per_s_max']:.2f}]",
                 f"{r['ar_tokens_per_s']:.2f}", f"{r['speedup']:.3f}x [{r['speedup_min']:.3f}-{r['speedup_max']:.3f}]",
                 interval_text(r["speedup_low"], r["speedup_high"]), _fastest_text(r),
                 *([_fastest_text(r, "engine_fastest_over")] if engines else []), f"{r['same_text']:.0%}",
                 f"{r['tv_per_token']:.2e}"] for r in report.rows]
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]
    lines = [report.caption, *headroom_caption(report), "", "  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                                           for i, (h, w) in enumerate(zip(header, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
              for row in body]
    predicted = [r for r in report.rows if r.get("predicted_tokens_per_s") is not None]
    if predicted:
        context = predicted[0].get("predicted_context_tokens")
        lines += ["", "predicted by the cost file (tokens emitted here / the cost file's seconds of the calls made "
                      "here, each by its drafted tokens"
                  + (f", priced at {context:.0f} tokens of context, the mean before each token plain decoding emitted"
                     if context is not None else "") + "): "
                  + "; ".join(f"{r['rule']} {r['predicted_tokens_per_s']:.2f} tok/s ({r['predicted_speedup']:.2f}x; "
                              f"measured/predicted tokens/s {r['tokens_per_s'] / r['predicted_tokens_per_s']:.3f}, "
                              f"speedup {r['speedup'] / r['predicted_speedup']:.3f})"
                              for r in predicted)]
    lines += category_lines(report)
    if extended:
        lines += ["", "Tokens/s = median over repeats [min-max]; Plain tokens/s = the same engine's plain decoding "
                      "(median); Speedup = median over repeats of the repeat's ratio [min-max], and its paired "
                      "bootstrap interval over texts; Fastest/row = the fastest configuration's tokens/s (the caption "
                      "names it) over this row's (each text's repeats summed) with its paired bootstrap interval over "
                      "texts (an interval above 1: the fastest is ahead of this row beyond the spread of the texts); "
                      + ("Engine's fastest/row = the same with the fastest configuration of the row's own engine (its "
                         "plain decoding among them): an engine's exported policy against its own speculation; "
                         if engines else "") +
                      "Same text = share of the decodes equal to the same engine's plain decoding of the same prompt "
                      "and repeat (1 for a lossless rule under greedy decoding); Mean acc. len = tokens per target "
                      "call."]
    lines += ["", "AR = plain autoregressive decoding of the target; Drafted/call = drafted tokens verified per target "
                  "call; Speedup = Tokens/s / AR tokens/s (wall clock); "
                  "TV/token = exact expected damage per emitted token (0 = lossless); Mean acc. len = mean acceptance "
                  "length = tokens per target call, ± its standard error; E[acc. len] = 1 + sum_d prod_(i<=d) tau_i "
                  "per call, given the drafts."]
    return fit_width("\n".join(lines)) + "\n"


def _fastest_text(row: dict, key: str = "fastest_over") -> str:
    """The Fastest/row cell (``key``: ``fastest_over`` or ``engine_fastest_over``): "fastest" for the fastest row
    itself, else the ratio and its interval."""
    if key not in row:
        return ""
    if row[key] is None:
        return "fastest"
    return f"{row[key]:.3f} {interval_text(row[f'{key}_low'], row[f'{key}_high'])}"


def headroom_caption(report: LiveReport) -> list[str]:
    """The caption's lines on the headroom each champion captures live (none when it was not measured)."""
    def num(x) -> str:
        return "n/a (no headroom)" if x is None or not math.isfinite(x) else f"{x:.2f}"

    return [f"headroom, live: {h['champion']} captures {num(h['priced'])} of it with its calls priced by the cost file, "
            f"{num(h['measured'])} measured (between {h['fixed']}, the best fixed row, and the bound of the split's "
            f"records, {h['bound_tokens_per_s']:.4g} tok/s; point estimates; evolve.eval.headroom)"
            for h in report.headroom]


def category_lines(report: LiveReport) -> list[str]:
    """Lines of the per-task-group table of a report whose prompts have categories (empty otherwise): per rule, the
    mean acceptance length (tokens per target call) and the measured speedup over plain decoding of each of
    Spec-Bench's task groups present (:mod:`evolve.report.spec_bench`) and overall, in Spec-Bench's layout."""
    if not report.by_category:
        return []
    columns: list[tuple[str, list[LiveCounts]]] = []
    for group in groups_of(report.by_category):
        totals = [LiveCounts() for _ in report.by_category[group.categories[0]]]
        for category in group.categories:
            for total, counts in zip(totals, report.by_category[category]):
                total.add(counts)
        columns.append((group.label, totals))
    columns.append(("Overall", [report.autoregressive, *report.counts]))
    header = ["Rule", *(label for label, _ in columns)]
    body = [[row["rule"], *(f"{c[r + 1].tokens_per_call:.2f} {c[r + 1].tokens_per_s / c[0].tokens_per_s:.2f}x"
                            for _, c in columns)] for r, row in enumerate(report.rows[:len(report.counts)])]
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]
    return ["", "Per task group (Spec-Bench's layout): mean acceptance length and measured speedup", "",
            "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))),
            "  ".join("-" * w for w in widths),
            *("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
              for row in body)]


def format_json(report: LiveReport) -> str:
    """JSON array of the rows (keys :data:`KEYS`; NaN written as null; a champion's live headroom shares, when
    measured, as ``headroom_priced``, ``headroom_measured``, ``bound_tokens_per_s``)."""
    shares = {h["champion"]: h for h in report.headroom}
    rows = [{**{k: r[k] for k in KEYS},
             **({f"headroom_{k}": shares[r["rule"]][k] for k in ("priced", "measured")}
                | {"bound_tokens_per_s": shares[r["rule"]]["bound_tokens_per_s"]} if r["rule"] in shares else {})}
            for r in report.rows]
    return json.dumps(finite_tree(rows), indent=2, allow_nan=False) + "\n"


__all__ = ["FORMATS", "KEYS", "OURS", "LiveReport", "format_table", "headroom_caption", "category_lines",
           "format_json"]

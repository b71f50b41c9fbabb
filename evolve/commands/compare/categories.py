"""``benchmark.py`` per question category: Spec-Bench's leaderboard layout for data with a ``category`` column.

When a scored split has the optional record column ``category`` (a harvest of a Spec-Bench-style prompts file,
:mod:`evolve.harvest.prompts`), the comparison's text (formats ``table`` and ``markdown``; JSON: the key
``categories``) ends with tables in
the field's terms, per task group of Spec-Bench (:mod:`evolve.report.spec_bench`: multi-turn conversation,
translation, summarization, question answering, mathematical reasoning, retrieval-augmented generation) and
overall, or per category (``--by-category``: the categories, then the groups of several categories, e.g.
Spec-Bench's multi-turn conversation, and overall):

* mean acceptance length and speedup of each row: ``standard_rejection``, every champion, and the competitor
  policies of the kinds that give them (:class:`evolve.commands.compare.table.KindScorer` ``competitors``, bounds
  left out: for verification-length policies the best fixed length and the confidence threshold tuned on the
  valid split, :mod:`evolve.kinds.verify_length.report_compare`). The mean acceptance length is the tokens
  emitted per target call (vLLM's mean acceptance length: 1 + accepted drafts per verification), the speedup
  the comparison's (the cost file's under ``--costs``, else the ratio model of ``--cost-ratio``);
* tokens per second of each row (with a cost file);
* each champion's share of the headroom there (:mod:`evolve.eval.headroom`: between the best fixed length tuned on
  valid and the ``length_oracle`` bound, with its interval over the group's texts);
* the acceptance rate per draft position of the harvested (standard-rule) blocks: the share of blocks whose
  first k + 1 drafts were all accepted, k = 0..gamma-1 (vLLM's per-position acceptance rate: accepted at
  position k / drafts).

A group's or category's figures are those of the comparison computed on its records alone (every block
belongs to one text, every text to one category). The overall column is the whole split, as in the main
table; a group or category counts its target calls without a draft (a prompt-lookup miss, the target-only step
that ends a text at its token budget) from the texts' target calls in ``texts.jsonl``, so its figures are
priced as the overall column's are (without that file: its speculation blocks only).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from evolve.eval.costs import Costs
from evolve.harvest.resume import TEXTS_FILE
from evolve.harvest.subset import check_texts_match, read_texts
from evolve.eval.evaluator import EvalData
from evolve.kinds.registry import KINDS
from evolve.report.compare.categories import OVERALL, CategoryFigures, figures_json, format_categories
from evolve.report.compare.rows import REFERENCE_RULE, ComparedRule, Comparison, Row
from evolve.commands.compare.speed import price_rows
from evolve.commands.compare.table import (
    BenchmarkOptions, _tuning_split, block_gamma, score_split, training_split,
)
from evolve.report.finite import finite_tree
from evolve.report.output import check_output, resolve_format, write_output
from evolve.report.spec_bench import category_order, groups_of
from evolve.traces.io import Traces, load_split
from evolve.verification.tokenwise import standard_threshold


def subset(traces: Traces, mask: np.ndarray) -> Traces:
    """The records of ``traces`` where ``mask`` (bool (n,)) holds, as a split of their own (no metadata)."""
    return Traces({k: v[mask] for k, v in traces.columns.items()}, traces.source, traces.split)


def position_acceptance(traces: Traces, gamma: int) -> np.ndarray:
    """The standard rule's expected acceptance rate per draft position of the harvested blocks (float64
    (gamma,)): for k = 0..gamma-1 the mean over blocks (``draft_index`` 0 starts one) of prod_(i<=k) min(1, p_i /
    q_i), the probability that drafts 0..k are all accepted (vLLM's accepted tokens per position / drafts, in
    expectation); a block shorter than k + 1 adds 0 there. So 1 + their sum is the standard rule's mean
    acceptance length on full blocks, as the comparison computes it."""
    depth = traces["draft_index"]
    tau = standard_threshold(traces["target_prob"], traces["draft_prob"])
    block = np.cumsum(depth == 0) - 1
    blocks = int(block[-1]) + 1 if block.size else 0
    reach = np.ones(blocks)
    out = np.zeros(gamma)
    for k in range(gamma):
        at = depth == k
        now = np.zeros(blocks)
        now[block[at]] = reach[block[at]] * tau[at]
        reach = now
        out[k] = now.sum() / blocks if blocks else np.nan
    return out


def _text_calls(data_dir, split: str, traces) -> list[tuple[str, int]] | None:
    """(category, target calls) of every text of ``split`` in the dataset's ``texts.jsonl`` (a harvest of a
    structured prompts file writes both), or None when it has no such file or its texts lack the target calls (an
    older harvest). Raises InputError for a malformed ``texts.jsonl``, one the dataset was not written with
    (:func:`evolve.harvest.subset.read_texts`), or one that disagrees with the split's records ``traces``
    (:func:`evolve.harvest.subset.check_texts_match`)."""
    if not (Path(data_dir) / TEXTS_FILE).is_file():
        return None
    listed = read_texts(data_dir)
    check_texts_match(listed, traces, Path(data_dir) / TEXTS_FILE)
    texts = [t for t in listed if t["split"] == split]
    if any("target_calls" not in t for t in texts):
        return None
    return [(t["category"], t["target_calls"]) for t in texts]


def _scored(entries: Sequence[ComparedRule], data: EvalData, traces: Traces, gamma: int | None, costs: Costs,
            tune, train=None) -> tuple[list[Row], list[dict], list[str]]:
    """The rows of one group or category: the reference rule and the champions, then the kinds' competitors (bounds
    left out: with a cost file, or when a rule of the kind is compared), priced under ``costs``; and the headroom
    records of the champions there (the kinds' ``headroom`` hooks, which read the bounds); and the notes on the
    competitors that could not be computed there."""
    rows, _ = score_split(entries, data, 1, gamma=gamma, costs=costs, traces=traces)
    bounds: list[str] = []
    used = []
    notes: list[str] = []
    for kind in KINDS.values():
        scorer = kind.hooks().compare
        if getattr(scorer, "competitors", None) is None:
            continue
        rules = [e.rule for e in entries if e.rule.program_kind is kind]
        if not costs.measured and not rules:
            continue
        added, left_out = scorer.competitors(rules, data, gamma, costs, *(tune or (None, data.split)), train=train)
        rows += added
        notes += left_out
        bounds += scorer.bounds
        used.append((scorer, rules))
    rows = price_rows(rows, costs, data)
    headroom = [rec for scorer, rules in used if scorer.headroom is not None
                for rec in scorer.headroom(rules, rows, data, gamma, costs)]
    return [r for r in rows if r.heuristic not in bounds], headroom, notes


def category_figures(options: BenchmarkOptions, split: str, entries: Sequence[ComparedRule], costs: Costs,
                     by_category: bool = False) -> CategoryFigures | None:
    """The per-group (``by_category``: per-category, then per-group) comparison of ``split`` of
    ``options.data_dir`` (module doc); None when the split has no ``category`` column.

    Raises: InputError as :func:`evolve.traces.io.load_split` and the comparison's scoring.
    """
    traces = load_split(options.data_dir, split)
    if not traces.has("category"):
        return None
    chosen = [e for e in entries if e.role == "champion" or e.rule.name == REFERENCE_RULE]
    gamma = block_gamma(EvalData.from_traces(traces, share=False), options.gamma)
    tune = _tuning_split(options.data_dir, (split,), {})
    train = training_split(options.data_dir, {})
    present = set(traces["category"].tolist())
    parts: list[tuple[str, tuple[str, ...] | None]] = []
    if by_category:
        parts += [(c, (c,)) for c in category_order(present)]
    parts += [(g.label, g.categories) for g in groups_of(present)
              if not by_category or len(g.categories) > 1]  # a one-category group repeats its category
    parts.append((OVERALL, None))
    texts = _text_calls(options.data_dir, split, traces)
    rows: dict[str, list[Row | None]] = {}
    shares: dict[str, list[dict | None]] = {}
    acceptance: dict[str, np.ndarray] = {}
    notes: list[str] = []
    for i, (label, categories) in enumerate(parts):
        part = traces if categories is None else subset(traces, np.isin(traces["category"], categories))
        data = EvalData.from_traces(part, share=False)
        if categories is not None and texts is not None and data.depth is not None:
            calls = sum(n for category, n in texts if category in categories)
            data.no_draft_calls = max(0, calls - int(np.count_nonzero(data.depth == 0)))
        scored, headroom, left_out = _scored(chosen, data, part, gamma, costs, tune, train)
        notes += [f"{label}: {n}" for n in left_out]
        for row in scored:
            rows.setdefault(row.heuristic, [None] * len(parts))[i] = row
        for rec in headroom:
            shares.setdefault(rec["champion"], [None] * len(parts))[i] = rec["headroom"]
        if gamma is not None and part.has("draft_index"):
            acceptance[label] = position_acceptance(part, gamma)
    return CategoryFigures(split, [label for label, _ in parts], rows, acceptance, costs.measured, by_category,
                           shares, notes)


def category_benchmark(options: BenchmarkOptions, by_category: bool = False) -> tuple[Comparison, str]:
    """:func:`evolve.commands.compare.table.benchmark` (in the champions' run context,
    :func:`evolve.commands.compare.table.in_run_context`), and for every scored split with a ``category`` column the
    per-category tables (module doc) after its text (formats ``table`` and ``markdown``; a fenced block in
    Markdown; in JSON the key ``categories``: split -> :func:`figures_json`). Writes ``options.output`` when
    given, after everything is computed.

    Returns: (comparison, text). Raises: InputError for any bad input.
    """
    from evolve.commands.compare.promoted import own_data_entries
    from evolve.commands.compare.table import (benchmark_in_context, collect_entries, cost_model,
                                               default_champions_dir, in_run_context, resolve_splits)

    fmt = resolve_format(options.fmt, options.output, ("table", "csv", "json", "markdown"))
    check_output(options.output, inputs=(options.data_dir, *options.champions, options.costs),
                 champion_dirs=(options.champions_dir or default_champions_dir(),))
    options = in_run_context(options)
    comparison, text = benchmark_in_context(dataclasses.replace(options, output=None, fmt=fmt))
    if fmt in ("table", "markdown", "json"):
        entries = own_data_entries(collect_entries(list(options.champions), options.champions_dir), options.data_dir,
                                   options.champions_dir)[0]
        costs = cost_model(options)
        found = {}
        for split in resolve_splits(options.split):
            fig = category_figures(options, split, entries, costs, by_category)
            if fig is None:
                continue
            found[split] = figures_json(fig)
            if fmt != "json":
                extra = format_categories(fig)
                text = text.rstrip("\n") + "\n" + (f"\n```\n{extra.strip()}\n```\n" if fmt == "markdown" else extra)
        if fmt == "json" and found:
            text = json.dumps({**json.loads(text), "categories": finite_tree(found)}, indent=2, allow_nan=False) + "\n"
    if options.output is not None:
        write_output(text, options.output)
    return comparison, text


__all__ = ["category_benchmark", "category_figures", "position_acceptance", "subset"]

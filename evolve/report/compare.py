"""Scoring every rule on a split and formatting the comparison (``benchmark.py``).

The acceptance-quality benchmark table: Heuristic, Accept%, Accuracy, Quality,
Fitness and Time of every rule (the acceptance-quality fitness of
:class:`evolve.eval.evaluator.AcceptanceQualityFitness` on the split's sampled
accept/reject outcomes), with the expected metrics of
:mod:`evolve.eval.evaluator` beside it (E[accept] = mean clamped tau; E[TV] =
mean max(0, tau - min(1, p/q)), the rule's total-variation damage per drafted
token; E[fitness] = the same fitness computed on those expectations) and, for
every champion, its change against ``standard_rejection`` on the same split.

Rules compared: every rule of the registry (:func:`heuristics.registry.rules`:
the baselines, then the default of every published rule family; rules that
need an optional column the split lacks are skipped with a note), every
promoted champion of the champions directory (``heuristics/champions/*.json``,
:func:`heuristics.registry.champion_rules`) and every champion file given
explicitly (:func:`heuristics.champions.load_champion`; expressions are parsed,
never evaluated as Python).

Time: wall time (``time.perf_counter``) of one :func:`evolve.eval.evaluator.evaluate`
call on the prepared split, in milliseconds. Each rule is evaluated once first
(warm-up: Numba compilation or cache loading, not timed), then ``repeats`` more
times; the best (smallest) of those is reported, as the least disturbed by
other processes. Loading the split and preparing its arrays are not included.

Output formats: ``table`` (rich, plain text), ``markdown`` (a GitHub table),
``csv`` and ``json`` (one record per rule and split, keys :data:`ROW_KEYS`).
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from data.errors import InputError
from data.io import SPLITS, load_split
from evolve.eval.evaluator import (
    BLOCK_FIELDS, DEFAULT_COST_RATIO, AcceptanceQualityFitness, EvalData, Metrics, check_gamma, evaluate,
)
from evolve.report.options import naming_option
from evolve.report.output import check_output, resolve_format, write_output
from heuristics import champions, registry
from heuristics.contract import Rule

#: Values of ``--format``.
FORMATS: tuple[str, ...] = ("table", "csv", "json", "markdown")
#: Values of ``--split``; ``all`` means every split in :data:`data.io.SPLITS` order.
SPLIT_CHOICES: tuple[str, ...] = SPLITS + ("all",)
#: The rule champions are compared with.
REFERENCE_RULE = registry.STANDARD_NAME
#: Default number of timed evaluations per rule (after one warm-up).
DEFAULT_REPEATS = 3
#: Keys of one JSON record / CSV row, in order.
ROW_KEYS: tuple[str, ...] = (
    "heuristic", "kind", "split", "tokens", "acceptance_rate", "accuracy", "quality_score", "fitness",
    "false_accepts", "false_rejects", "expected_acceptance", "expected_tv", "expected_false_reject",
    "expected_quality", "expected_fitness", "n_invalid", "time_ms", "delta_fitness", "delta_acceptance",
    "delta_expected_fitness", "delta_expected_acceptance", "delta_expected_tv", "expression", "data",
    "tokens_per_call", "speedup", "tv_per_token", "gamma", "cost_ratio",
)


@dataclass(frozen=True)
class ComparedRule:
    """A rule to score in the table: ``kind`` is ``baseline`` (from the registry) or
    ``champion``; ``origin`` is ``registry`` or the champion's file/directory."""

    rule: Rule
    kind: str
    origin: str


@dataclass(frozen=True)
class Row:
    """One rule scored on one split.

    ``time_ms`` is the best wall time of one evaluation in milliseconds (see the
    module doc). The ``delta_*`` fields are the champion's metric minus
    ``standard_rejection``'s on the same split (None for baselines).
    """

    heuristic: str
    kind: str
    split: str
    data: str
    metrics: Metrics
    time_ms: float
    expression: str | None = None
    delta_fitness: float | None = None
    delta_acceptance: float | None = None
    delta_expected_fitness: float | None = None
    delta_expected_acceptance: float | None = None
    delta_expected_tv: float | None = None
    gamma: int | None = None
    cost_ratio: float | None = None

    def to_dict(self) -> dict:
        """Plain dict with exactly the keys :data:`ROW_KEYS`, in that order."""
        m = {**dict.fromkeys(BLOCK_FIELDS), **self.metrics.to_dict()}
        values = {**m, "gamma": self.gamma, "cost_ratio": self.cost_ratio if self.gamma else None,
                  **{k: getattr(self, k) for k in (
            "heuristic", "kind", "split", "data", "time_ms", "expression", "delta_fitness", "delta_acceptance",
            "delta_expected_fitness", "delta_expected_acceptance", "delta_expected_tv")}}
        return {k: values[k] for k in ROW_KEYS}


@dataclass
class Comparison:
    """Rows of every scored (rule, split), in split then rule order, and notes on skipped rules."""

    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    repeats: int = DEFAULT_REPEATS
    splits: tuple[str, ...] = ()
    tokens: dict[str, int] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    gamma: dict[str, int | None] = field(default_factory=dict)
    cost_ratio: float = DEFAULT_COST_RATIO


# --- which rules ------------------------------------------------------------------------------

def resolve_splits(split: str) -> tuple[str, ...]:
    """``('test',)`` for ``test``, every split for ``all``. Raises InputError for an unknown name."""
    if split == "all":
        return SPLITS
    if split not in SPLITS:
        raise InputError(f"option '--split': unknown split '{split}' (choose from {', '.join(SPLIT_CHOICES)})")
    return (split,)


def baseline_entries() -> list[ComparedRule]:
    """Every registered rule (:func:`heuristics.registry.rules`: the baselines first, then the
    published families' defaults), as entries of kind ``baseline``."""
    return [ComparedRule(rule, "baseline", "registry") for rule in registry.rules()]


def champion_module():
    """:mod:`heuristics.champions`, which reads, validates and writes champion files."""
    return champions


def default_champions_dir() -> Path:
    """The champions directory: ``$SPECDEC_CHAMPIONS_DIR`` if set, else ``heuristics/champions/``
    (:func:`heuristics.champions.champions_dir`)."""
    return Path(champions.champions_dir())


def _call_loader(fn, arg, what: str):
    """Call a champion loader; unexpected exceptions from a hostile file become one-line InputErrors."""
    try:
        return fn(arg)
    except InputError:
        raise
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError, MemoryError) as exc:
        text = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise InputError(f"{what}: invalid champion ({text})") from None


def champion_entries(files: Sequence[str | os.PathLike] = (),
                     champions_dir: str | os.PathLike | None = None) -> list[ComparedRule]:
    """Champions of ``champions_dir`` (``*.json``) and of the given ``files``, as entries of kind ``champion``.

    Args:
        files: champion JSON files (``--champion``).
        champions_dir: directory of promoted champions; None means
            :func:`default_champions_dir`. A missing directory holds no champions.

    Raises:
        InputError: a given file does not exist, or a champion file is
            malformed or hostile (message from :mod:`heuristics.champions`,
            naming the file).
    """
    cdir = Path(champions_dir) if champions_dir is not None else default_champions_dir()
    entries = [ComparedRule(rule, "champion", str(cdir))
               for rule in _call_loader(registry.champion_rules, cdir, str(cdir))]
    entries += [ComparedRule(champion_from_file(f), "champion", str(Path(f))) for f in files]
    return entries


def champion_from_file(path: str | os.PathLike) -> Rule:
    """The champion of a ``--champion`` file as a rule.

    Raises: InputError naming ``--champion`` for a missing file, or naming the
    file for a malformed or hostile one.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"option '--champion': {path}: no such file")
    return _call_loader(champions.load_champion, path, str(path))


def collect_entries(champion_files: Sequence[str | os.PathLike] = (),
                    champions_dir: str | os.PathLike | None = None) -> list[ComparedRule]:
    """Registered rules then champions (:func:`baseline_entries`, :func:`champion_entries`), without duplicates.

    A champion identical (same name and expression) to an entry already listed
    is dropped (e.g. a promoted champion also given with ``--champion``).
    Champions cannot take a built-in rule's name
    (:data:`heuristics.champions.RESERVED_NAMES`); champions that share a name
    but differ are all kept (labelled by origin in the output).
    """
    entries = baseline_entries()
    for entry in champion_entries(champion_files, champions_dir):
        if not any(e.rule.name == entry.rule.name and e.rule.expression is not None
                   and e.rule.expression == entry.rule.expression for e in entries):
            entries.append(entry)
    return entries


def _label(entries: list[ComparedRule]) -> list[str]:
    """Display names: the rule's name, disambiguated by origin when two entries share it."""
    labels, used = [], set()
    for e in entries:
        name = e.rule.name
        if name in used:
            name = f"{e.rule.name} ({Path(e.origin).name})"
            k = 2
            while name in used:
                name, k = f"{e.rule.name} ({Path(e.origin).name} #{k})", k + 1
        used.add(name)
        labels.append(name)
    return labels


# --- scoring ----------------------------------------------------------------------------------

def timed_evaluate(rule: Rule, data: EvalData, repeats: int = DEFAULT_REPEATS,
                   fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(), gamma: int | None = None,
                   cost_ratio: float = DEFAULT_COST_RATIO) -> tuple[Metrics, float]:
    """Metrics of ``rule`` on ``data`` and the best wall time of one evaluation, in milliseconds.

    One untimed warm-up evaluation (compilation), then ``repeats`` (>= 1) timed ones.
    With ``gamma`` the block-level metrics (tokens per target call, speedup under
    draft/target cost ratio ``cost_ratio``, TV per emitted token) are computed too.

    Raises: InputError if the rule needs a column the split lacks; ValueError for repeats < 1.
    """
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    metrics = evaluate(rule, data, fitness, gamma=gamma, cost_ratio=cost_ratio)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        evaluate(rule, data, fitness, gamma=gamma, cost_ratio=cost_ratio)
        best = min(best, time.perf_counter() - t0)
    return metrics, best * 1e3


def missing_columns(rule: Rule, data: EvalData) -> list[str]:
    """Optional columns ``rule`` reads that ``data`` lacks (empty if it can be scored)."""
    return [c for c in rule.columns_needed if c not in data.available]


def score_split(entries: Sequence[ComparedRule], data: EvalData, repeats: int = DEFAULT_REPEATS,
                fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(), gamma: int | None = None,
                cost_ratio: float = DEFAULT_COST_RATIO) -> tuple[list[Row], list[str]]:
    """Score every entry on one prepared split.

    Returns (rows in entry order, notes): a rule needing an optional column the
    split lacks is skipped with a note. Champions get deltas against
    :data:`REFERENCE_RULE` when it was scored.
    """
    scored: list[tuple[ComparedRule, str, Metrics, float]] = []
    notes: list[str] = []
    for entry, label in zip(entries, _label(list(entries))):
        missing = missing_columns(entry.rule, data)
        if missing:
            notes.append(f"skipped {label} on {data.split or 'split'}: it needs column '{missing[0]}', "
                         f"which {data.source} lacks")
            continue
        metrics, ms = timed_evaluate(entry.rule, data, repeats, fitness, gamma, cost_ratio)
        scored.append((entry, label, metrics, ms))
    ref = next((m for e, label, m, _ in scored if e.kind == "baseline" and e.rule.name == REFERENCE_RULE), None)
    rows = []
    for entry, label, m, ms in scored:
        deltas = {}
        if entry.kind == "champion" and ref is not None:
            deltas = dict(
                delta_fitness=m.fitness - ref.fitness,
                delta_acceptance=m.acceptance_rate - ref.acceptance_rate,
                delta_expected_fitness=m.expected_fitness - ref.expected_fitness,
                delta_expected_acceptance=m.expected_acceptance - ref.expected_acceptance,
                delta_expected_tv=m.expected_tv - ref.expected_tv,
            )
        rows.append(Row(label, entry.kind, data.split, data.source, m, ms, entry.rule.expression, **deltas,
                        gamma=gamma, cost_ratio=cost_ratio))
    return rows, notes


def block_gamma(data: EvalData, gamma: int | None) -> int | None:
    """The draft length for block-level metrics on ``data``.

    ``gamma`` if given; otherwise the split's own block length (max draft_index + 1)
    when it has ``draft_index``, else None (no block-level metrics).
    """
    if gamma is not None or "draft_index" not in data.available or data.n == 0:
        return gamma
    return int(data.feature("draft_index").max()) + 1


def run_comparison(data_dir: str | os.PathLike, split: str = "test", entries: Sequence[ComparedRule] | None = None,
                   repeats: int = DEFAULT_REPEATS, fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(),
                   gamma: int | None = None, cost_ratio: float = DEFAULT_COST_RATIO) -> Comparison:
    """Load the split(s) of ``data_dir`` and score every entry on each.

    Every split is loaded and validated before any rule is scored.

    Args:
        data_dir: dataset directory (``generate_data.py --out``).
        split: ``train``, ``valid``, ``test`` or ``all``.
        entries: rules to score; default :func:`collect_entries` ().
        repeats: timed evaluations per rule (>= 1).
        gamma: draft length for the block-level metrics (default: each split's
            block length, see :func:`block_gamma`); an InputError naming --gamma
            if it exceeds the split's block length.
        cost_ratio: draft/target cost ratio c for the speedup (Leviathan et al. 2023).

    Raises: InputError for a missing or invalid dataset (see :func:`data.io.load_split`)
    or an unknown split.
    """
    splits = resolve_splits(split)
    if repeats < 1:
        raise InputError(f"option '--repeats': must be at least 1 (value {repeats})")
    loaded = {s: EvalData.from_traces(load_split(data_dir, s)) for s in splits}
    if entries is None:
        entries = collect_entries()
    result = Comparison([], repeats=repeats, splits=splits, cost_ratio=cost_ratio)
    for s, data in loaded.items():
        result.gamma[s] = block_gamma(data, gamma)
        if gamma is not None:
            naming_option("--gamma", check_gamma, gamma, data)
    for s, data in loaded.items():
        rows, notes = score_split(entries, data, repeats, fitness, result.gamma[s], cost_ratio)
        result.rows += rows
        result.notes += notes
        result.tokens[s] = data.n
        result.sources[s] = data.source
    return result


# --- formatting -------------------------------------------------------------------------------

def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ms(x: float) -> str:
    return f"{x:.2f}ms" if x < 100 else f"{x:.0f}ms"


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
        ("Accept%", True, lambda r: _pct(r.metrics.acceptance_rate)),
        ("Accuracy", True, lambda r: _pct(r.metrics.accuracy)),
        ("Quality", True, lambda r: f"{r.metrics.quality_score:.3f}"),
        ("Fitness", True, lambda r: f"{r.metrics.fitness:.3f}"),
        ("Time", True, lambda r: _ms(r.time_ms)),
        ("E[accept]", True, lambda r: _pct(r.metrics.expected_acceptance)),
        ("E[TV]", True, lambda r: f"{r.metrics.expected_tv:.4f}"),
        ("E[fitness]", True, lambda r: f"{r.metrics.expected_fitness:.3f}"),
    ]
    if any(r.metrics.tokens_per_call is not None for r in comparison.rows):
        def block(name: str, spec: str):
            return lambda r: "n/a" if getattr(r.metrics, name) is None else format(getattr(r.metrics, name), spec)
        cols += [("Tok/call", True, block("tokens_per_call", ".3f")), ("Speedup", True, block("speedup", ".3f")),
                 ("TV/tok", True, block("tv_per_token", ".4f"))]
    if any(r.metrics.n_invalid for r in comparison.rows):
        cols.append(("Invalid", True, lambda r: str(r.metrics.n_invalid)))
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


def benchmark(data_dir: str | os.PathLike = "data", split: str = "test",
              champion_files: Iterable[str | os.PathLike] = (),
              champions_dir: str | os.PathLike | None = None,
              fmt: str | None = None, output: str | os.PathLike | None = None,
              repeats: int = DEFAULT_REPEATS, gamma: int | None = None,
              cost_ratio: float = DEFAULT_COST_RATIO) -> tuple[Comparison, str]:
    """The whole comparison command: validate options, load, score, render, write.

    Everything is validated and computed before anything is written; with
    ``output`` the text is written atomically, otherwise the caller prints it.

    Returns: (comparison, rendered text). Raises: InputError for any bad input.
    """
    fmt = resolve_format(fmt, output, FORMATS)
    resolve_splits(split)
    if repeats < 1:
        raise InputError(f"option '--repeats': must be at least 1 (value {repeats})")
    check_output(output)
    entries = collect_entries(list(champion_files), champions_dir)
    comparison = run_comparison(data_dir, split, entries, repeats, gamma=gamma, cost_ratio=cost_ratio)
    text = format_comparison(comparison, fmt)
    if output is not None:
        write_output(text, output)
    return comparison, text

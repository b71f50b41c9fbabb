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

Block verification: on a split with the optional column ``block_residual_mass``
(and ``draft_index``) a row ``block_verification`` (role ``verifier``) follows
the rules of the split: the lossless block verification of Sun et al. 2024
(arXiv 2403.10444), whose expected tokens per call follow from the records
alone (:mod:`evolve.eval.block_verification`), with the speedup under the same
cost model as the rules and TV 0. It has no per-token threshold, so the
per-token columns are empty. Its Time is the best of ``repeats`` computations
of its tokens per call. On a split without the column a note says so.

Kinds of program (:mod:`evolve.kinds`): every rule is scored by its kind through the kind's
``compare`` hook. A champion of kind ``relaxation`` (the weight w of relaxed block
verification, ``python -m evolve run --evolve relaxation``) is not a per-token threshold: its row
holds relaxed block verification's tokens per call, speedup and TV per emitted token on the split
with the split's gamma (:mod:`evolve.eval.relaxed_block`: block verification against (1 - w) p + w q,
the same records and formula the run's own valid figures come from), and its per-token columns
are empty as the ``block_verification`` row's; on a split without the block columns
(the relaxation kind's ``columns``) it is skipped with a note.

Rows, their JSON/CSV keys (:data:`ROW_KEYS`) and the comparison are defined in
:mod:`evolve.report.compare.rows`; the output formats ``table`` (rich, plain
text, the essential columns in 100 characters), ``markdown`` (a GitHub table of
every column), ``csv`` (one record per row) and ``json`` (the records and the
verdict) in :mod:`evolve.report.compare.format`. Both are re-exported here. The
verdict (which rule wins on the scored split by fitness, and why a champion does
not) is :mod:`evolve.report.compare.verdict`; :func:`run_comparison` records what
the champion files say for it (``Comparison.champions``).
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from evolve.errors import InputError
from evolve.traces.io import SPLITS, Traces, load_split
from evolve.eval.block_verification import RESIDUAL_COLUMN, block_verification_metrics
from evolve.eval.evaluator import (
    AcceptanceQualityFitness, EvalData, Metrics, check_gamma, evaluate,
)
from evolve.harvest.context import at_dataset_context
from evolve.eval.costs import DEFAULT_COST_RATIO, DEFAULT_COSTS, Costs, load_costs, ratio_costs
from evolve.kinds.base import KindContext
from evolve.kinds.registry import KINDS
from evolve.report.compare.format import (
    format_comparison,
)
from evolve.report.compare.rows import (
    BLOCK_VERIFICATION, DEFAULT_REPEATS, FORMATS, REFERENCE_RULE, SPLIT_CHOICES, VERIFIER, Comparison,
    ComparedRule, Row,
)
from evolve.commands.compare.concurrency import concurrency_rows
from evolve.commands.compare.promoted import own_data_entries
from evolve.commands.compare.speed import price_rows
from evolve.report.compare.verdict import champion_records
from evolve.commands.options import naming_param
from evolve.report.output import check_output, resolve_format, write_output
from heuristics import champions, registry
from heuristics.contract import Rule

# --- which rules ------------------------------------------------------------------------------

def resolve_splits(split: str) -> tuple[str, ...]:
    """``('test',)`` for ``test``, every split for ``all``. Raises InputError (parameter ``split``) for an
    unknown name."""
    if split == "all":
        return SPLITS
    if split not in SPLITS:
        raise InputError(f"unknown split '{split}' (choose from {', '.join(SPLIT_CHOICES)})", param="split")
    return (split,)


def baseline_entries() -> list[ComparedRule]:
    """Every registered rule (:func:`heuristics.registry.rules`: the baselines first, then the
    published families' defaults), as entries of role ``baseline``."""
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
    """Champions of ``champions_dir`` (``*.json``) and of the given ``files``, as entries of role ``champion``.

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
    """The champion of a champion file as a rule.

    Raises: InputError naming the parameter ``champion`` for a missing file, or naming the
    file for a malformed or hostile one.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file", param="champion")
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

def timed_evaluate(rule: Rule, context: KindContext, repeats: int = DEFAULT_REPEATS) -> tuple[Metrics, float]:
    """Metrics of ``rule`` on the context's split and the best wall time of one evaluation, in milliseconds.

    One untimed warm-up evaluation (compilation), then ``repeats`` (>= 1) timed ones.
    With the context's ``gamma`` the block-level metrics (tokens per target call, speedup under
    its ``costs``, TV per emitted token) are computed too.

    Raises: InputError if the rule needs a column the split lacks; ValueError for repeats < 1.
    """
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    data = context.split_data()
    metrics = evaluate(rule, data, context.fitness, gamma=context.gamma, costs=context.costs)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        evaluate(rule, data, context.fitness, gamma=context.gamma, costs=context.costs)
        best = min(best, time.perf_counter() - t0)
    return metrics, best * 1e3


def missing_columns(rule: Rule, data: EvalData) -> list[str]:
    """Optional columns ``rule`` reads that ``data`` lacks (empty if it can be scored)."""
    return [c for c in rule.columns_needed if c not in data.available]


@dataclass(frozen=True)
class KindScorer:
    """How the comparison scores a rule of one kind of program: ``missing(rule, data, traces)`` the columns
    it needs that the split lacks (the rule is then skipped with a note); ``score(rule, context, traces, repeats)``
    -> (the :class:`Row` fields of its scores, best time in ms; ``context`` a :class:`evolve.kinds.base.KindContext`
    of the split, its fitness, gamma and the comparison's one cost model);
    ``competitors(rules, data, gamma, costs, tuned_on, tuned_name, train=...)`` (or None): (the kind's competitor rows
    of one split, notes on the rows it could not compute there), added when a rule of the kind is compared or a cost file is given (``rules``: the kind's rules
    compared, in order; ``tuned_on``: the split their settings are tuned on, None: the scored one, named
    ``tuned_name``; ``train``: a function giving the train split, or None, for competitors trained on it);
    ``note(rules)``: what the caption adds about them (None: nothing); ``bounds``: the names of
    competitor rows that are bounds rather than rules (left out of the concurrency table); ``schedule(data, tune,
    gamma, requests, costs)`` (or None): the kind's per-batch-size schedule of one split, the concurrency table's
    schedule row (:func:`evolve.kinds.verify_length.eval_schedule.split_schedule`); ``headroom(rules, rows, data,
    gamma, costs)`` (or None): per champion row of the kind among the split's ``rows``, the share of the headroom it
    captures and its standing against the competitors (dicts, :func:`evolve.kinds.verify_length.report_compare.split_headroom`),
    printed under the table (:attr:`evolve.report.compare.rows.Comparison.headroom`); ``live_headroom(rules, rows,
    counts, champions, data, gamma, costs)`` (or None): the same measured live (``benchmark.py live``, the last
    ``champions`` rules being champion files), :func:`evolve.kinds.verify_length.report_live.live_headroom`."""

    missing: Callable[[Rule, EvalData, Traces | None], list[str]]
    score: Callable[..., tuple[dict, float]]
    competitors: Callable[..., tuple[list[Row], list[str]]] | None = None
    note: Callable[[Sequence[Rule]], str | None] | None = None
    bounds: tuple[str, ...] = ()
    schedule: Callable[..., dict] | None = None
    headroom: Callable[..., list[dict]] | None = None
    live_headroom: Callable[..., list[dict]] | None = None


def score_split(entries: Sequence[ComparedRule], data: EvalData, repeats: int = DEFAULT_REPEATS,
                fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(), gamma: int | None = None,
                costs: Costs = DEFAULT_COSTS, traces: Traces | None = None) -> tuple[list[Row], list[str]]:
    """Score every entry on one prepared split, each by its kind of program (its ``compare`` hook).

    Returns (rows in entry order, notes): a rule needing an optional column the
    split lacks is skipped with a note. Champions of kind threshold get deltas
    against :data:`REFERENCE_RULE` when it was scored. ``traces``: the split's
    columns (relaxation rules read its block columns; None: from its file). ``costs``: the one cost model of
    the speedups and tokens per second.
    Raises: InputError (:meth:`evolve.kinds.base.ProgramKind.refuse`) for a kind the comparison cannot score (a
    promoted champion of such a kind, from the champions directory, is skipped with a note instead).
    """
    scored: list[tuple[ComparedRule, str, dict, float]] = []
    notes: list[str] = []
    for entry, label in zip(entries, _label(list(entries))):
        kind = entry.rule.program_kind
        scorer = kind.hooks().compare
        if scorer is None:
            if entry.role == "champion" and Path(entry.origin).is_dir():  # promoted: the table goes on without it
                notes.append(f"skipped {label}: a {kind.name} program ({kind.title}); run it with: "
                             f"{'; '.join(kind.commands)}")
                continue
            raise kind.refuse("python benchmark.py", f"rule '{label}'")
        missing = scorer.missing(entry.rule, data, traces)
        if missing:
            notes.append(f"skipped {label} on {data.split or 'split'}: it needs column '{missing[0]}', "
                         f"which {data.source} lacks")
            continue
        scores, ms = scorer.score(entry.rule, KindContext(data, fitness, gamma, costs), traces, repeats)
        scored.append((entry, label, {**scores, "program_kind": kind.name}, ms))
    ref = next((f["metrics"] for e, label, f, _ in scored if e.role == "baseline" and e.rule.name == REFERENCE_RULE),
               None)
    rows = []
    for entry, label, scores, ms in scored:
        m = scores.pop("metrics")
        deltas = {}
        if entry.role == "champion" and ref is not None and m is not None:
            deltas = dict(
                delta_fitness=m.fitness - ref.fitness,
                delta_acceptance=m.acceptance_rate - ref.acceptance_rate,
                delta_expected_fitness=m.expected_fitness - ref.expected_fitness,
                delta_expected_acceptance=m.expected_acceptance - ref.expected_acceptance,
                delta_expected_tv=m.expected_tv - ref.expected_tv,
            )
        rows.append(Row(label, entry.role, data.split, data.source, m, ms, entry.rule.expression, **deltas,
                        gamma=gamma, cost_ratio=costs.cost_ratio, **scores))
    return rows, notes


def block_gamma(data: EvalData, gamma: int | None) -> int | None:
    """The draft length for block-level metrics on ``data``.

    ``gamma`` if given; otherwise the split's own block length (max draft_index + 1)
    when it has ``draft_index``, else None (no block-level metrics).
    """
    if gamma is not None or "draft_index" not in data.available or data.n == 0:
        return gamma
    return int(data.feature("draft_index").max()) + 1


def block_verification_row(traces: Traces, data: EvalData, gamma: int | None, costs: Costs = DEFAULT_COSTS,
                           repeats: int = DEFAULT_REPEATS) -> tuple[Row | None, str | None]:
    """The ``block_verification`` row of one split, or (None, note) when the split cannot give it.

    Needs block metrics (``gamma`` not None: a split with ``draft_index``) and the
    column ``block_residual_mass``; without block metrics there is neither a
    row nor a note. Time: best of ``repeats`` computations after a warm-up, in ms.

    Raises: InputError when a needed ``block_residual_mass`` value is NaN or
    negative (:func:`evolve.eval.block_verification.block_verification_tokens`).
    """
    if gamma is None:
        return None, None
    if not traces.has(RESIDUAL_COLUMN):
        return None, (f"no {BLOCK_VERIFICATION} row on {data.split or 'split'}: {data.source} lacks column "
                      f"'{RESIDUAL_COLUMN}' (written by generators that know whole distributions)")
    args = (traces["target_prob"], traces["draft_prob"], traces["draft_index"], traces[RESIDUAL_COLUMN], gamma, costs)
    result = block_verification_metrics(*args)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        block_verification_metrics(*args)
        best = min(best, time.perf_counter() - t0)
    return Row(BLOCK_VERIFICATION, VERIFIER, data.split, data.source, None, best * 1e3, gamma=gamma,
               cost_ratio=costs.cost_ratio, verifier=result, records=data.n), None


def run_comparison(data_dir: str | os.PathLike, split: str = "test", entries: Sequence[ComparedRule] | None = None,
                   repeats: int = DEFAULT_REPEATS, fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(),
                   gamma: int | None = None, costs: Costs = DEFAULT_COSTS, block_verification: bool = True,
                   concurrency: Sequence[int] = ()) -> Comparison:
    """Load the split(s) of ``data_dir`` and score every entry on each.

    Every split is loaded and validated before any rule is scored. With
    ``block_verification`` each split's rows end with the ``block_verification``
    row where the split has block metrics and ``block_residual_mass``
    (:func:`block_verification_row`; a note where it lacks the column).

    Args:
        data_dir: dataset directory (``generate_data.py --out``).
        split: ``train``, ``valid``, ``test`` or ``all``.
        entries: rules to score; default :func:`collect_entries` ().
        repeats: timed evaluations per rule (>= 1).
        gamma: draft length for the block-level metrics (default: each split's
            block length, see :func:`block_gamma`); an InputError naming the parameter
            ``gamma`` if it exceeds the split's block length.
        costs: the one cost model of every figure (:mod:`evolve.eval.costs`): a draft/target cost ratio c's
            (:func:`evolve.eval.costs.ratio_costs`: speedup = tokens_per_call / (gamma c + 1), Leviathan et al.
            2023), or a cost file's (``measured``): then every row gets tokens per second and the cost file's
            speedup, and the kinds' competitors follow each split's rows (:mod:`evolve.commands.compare.speed`;
            otherwise only when a rule of a kind with competitors is compared).
        concurrency: numbers of concurrent requests (with a cost file): the comparison's concurrency table
            (:func:`evolve.commands.compare.concurrency.concurrency_rows`) and, on splits with block metrics, the
            per-batch-size schedule of the kind that gives one, tuned on the tuning split
            (:attr:`KindScorer.schedule`).

    Raises: InputError for a missing or invalid dataset (see :func:`evolve.traces.io.load_split`)
    or an unknown split.
    """
    splits = resolve_splits(split)
    if repeats < 1:
        raise InputError(f"must be at least 1 (value {repeats})", param="repeats")
    traces = {s: load_split(data_dir, s) for s in splits}
    loaded = {s: EvalData.from_traces(t) for s, t in traces.items()}
    if entries is None:
        entries = collect_entries()
    result = Comparison([], repeats=repeats, splits=splits, costs=costs)
    competing = {k.name: (k.hooks().compare, [e.rule for e in entries if e.rule.program_kind is k])
                 for k in KINDS.values() if getattr(k.hooks().compare, "competitors", None) is not None}
    policies = costs.measured or any(rules for _, rules in competing.values())
    if policies:
        result.notes_of_kinds = [n for scorer, rules in competing.values() if scorer.note is not None
                                 for n in [scorer.note(rules)] if n]
    tune = _tuning_split(data_dir, splits, loaded) if policies else None
    train = training_split(data_dir, loaded)
    for s, data in loaded.items():
        result.gamma[s] = block_gamma(data, gamma)
        if gamma is not None:
            naming_param("gamma", check_gamma, gamma, data)
    for s, data in loaded.items():
        rows, notes = score_split(entries, data, repeats, fitness, result.gamma[s], costs, traces[s])
        if block_verification:
            row, note = block_verification_row(traces[s], data, result.gamma[s], costs, repeats)
            rows += [row] if row is not None else []
            notes += [note] if note is not None else []
        if policies:
            for scorer, rules in competing.values():
                added, left_out = scorer.competitors(rules, data, result.gamma[s], costs, *(tune or (None, s)),
                                                     train=train)
                rows += added
                notes += left_out
        rows = price_rows(rows, costs, data)
        if policies:
            for scorer, rules in competing.values():
                if scorer.headroom is not None:
                    result.headroom += scorer.headroom(rules, rows, data, result.gamma[s], costs)
        result.rows += rows
        result.notes += notes
        result.tokens[s] = data.n
        result.sources[s] = data.source
        result.digests[s] = traces[s].sha256
        schedule = next((k.hooks().compare.schedule for k in KINDS.values()
                         if getattr(k.hooks().compare, "schedule", None) is not None), None)
        if costs.measured and concurrency and result.gamma[s] is not None and schedule is not None:
            result.schedules[s] = schedule(data, tune or (data, s), result.gamma[s], concurrency, costs)
    if costs.measured and concurrency:
        result.concurrency = concurrency_rows(result, concurrency, costs)
    result.champions = champion_records(dict(zip(_label(list(entries)), entries)))
    return result


def training_split(data_dir, loaded: dict[str, EvalData]):
    """A function giving the dataset's train split (loaded on the first call, then kept; None when the dataset has
    none): what competitors trained on train read (:attr:`KindScorer.competitors`)."""
    kept: list = []

    def train() -> EvalData | None:
        if not kept:
            if "train" in loaded:
                kept.append(loaded["train"])
            else:
                try:
                    kept.append(EvalData.from_traces(load_split(data_dir, "train")))
                except InputError:
                    kept.append(None)
        return kept[0]

    return train


def _tuning_split(data_dir, splits, loaded) -> tuple[EvalData, str] | None:
    """(the valid split, "valid") to tune the competitors on, when the dataset has one; None: tune on each
    scored split itself."""
    if "valid" in loaded:
        return loaded["valid"], "valid"
    try:
        return EvalData.from_traces(load_split(data_dir, "valid")), "valid"
    except InputError:
        return None


#: The dataset directory ``benchmark.py`` scores when neither ``--data`` nor a champion's run names one.
DEFAULT_DATA = "data"


@dataclass(frozen=True)
class BenchmarkOptions:
    """Everything :func:`benchmark` does, as the command line's options of the same names.

    ``data_dir``: the dataset directory (None: the one the ``champions`` were evolved on, else :data:`DEFAULT_DATA`;
    :func:`in_run_context`); ``split``: a split or ``all``; ``champions``: champion
    files compared as well; ``champions_dir``: the promoted champions (None:
    :func:`default_champions_dir`); ``fmt`` (``--format``) and ``output``: the rendering and the file
    to write (None: the text is returned only); ``repeats``: timed evaluations per rule; ``gamma``:
    the draft length of the block metrics (None: each split's block length); ``cost_ratio``: the draft/target cost
    ratio c of the flat cost model (:func:`evolve.eval.costs.ratio_costs`) used without ``costs`` (None: not given,
    :data:`evolve.eval.costs.DEFAULT_COST_RATIO`), a cost file
    (JSON, :mod:`evolve.eval.costs`): the one cost model of every figure (:func:`cost_model`);
    ``concurrency``: numbers of concurrent requests to report throughput at (needs ``costs``).
    """

    data_dir: str | os.PathLike | None = DEFAULT_DATA
    split: str = "test"
    champions: tuple[str | os.PathLike, ...] = ()
    champions_dir: str | os.PathLike | None = None
    fmt: str | None = None
    output: str | os.PathLike | None = None
    repeats: int = DEFAULT_REPEATS
    gamma: int | None = None
    cost_ratio: float | None = None
    costs: str | os.PathLike | None = None
    concurrency: tuple[int, ...] = ()


def cost_model(options: BenchmarkOptions) -> Costs:
    """The one cost model of a comparison: the cost file ``options.costs`` when given, else the flat model of
    ``options.cost_ratio`` (the default ratio when not given). Raises: InputError (parameter ``cost_ratio``) when
    both are given (any cost ratio beside a cost file), or as :func:`evolve.eval.costs.load_costs`. A file timed at
    two contexts is priced at the dataset's mean context (:func:`evolve.harvest.context.mean_context`)."""
    if options.costs is None:
        return ratio_costs(DEFAULT_COST_RATIO if options.cost_ratio is None else options.cost_ratio)
    if options.cost_ratio is not None:
        raise InputError(f"a cost file ({options.costs}) prices every figure; give it or a cost ratio, not both "
                         f"(value {options.cost_ratio!r})", param="cost_ratio")
    return at_dataset_context(load_costs(options.costs), options.data_dir)


def in_run_context(options: BenchmarkOptions) -> BenchmarkOptions:
    """``options`` with the dataset, gamma and cost file of the champion files' runs where none is given, each
    checked against every champion's run (:mod:`evolve.commands.run_context`: a dataset that is not the champion's
    nor a subset of it, another gamma, a cost file of other measurements, or a flat cost ratio given beside a
    champion evolved under a cost file are refused naming both). The champion files are read (and checked) first.

    Raises: InputError naming the parameter (``data_dir``, ``gamma``, ``costs``, ``cost_ratio``) and both sides.
    """
    from evolve.commands.run_context import contexts, resolve_costs, resolve_data, resolve_gamma

    for f in options.champions:
        champion_from_file(f)
    found = contexts(options.champions)
    return dataclasses.replace(
        options, data_dir=resolve_data(options.data_dir, found, DEFAULT_DATA),
        gamma=resolve_gamma(options.gamma, found),
        costs=resolve_costs(options.costs, found, ratio_given=options.cost_ratio is not None))


def benchmark(options: BenchmarkOptions = BenchmarkOptions()) -> tuple[Comparison, str]:
    """The whole comparison command: validate options, put them in the champions' run context
    (:func:`in_run_context`), load, score, render, write.

    Everything is validated and computed before anything is written; with
    ``output`` the text is written atomically, otherwise the caller prints it.

    Returns: (comparison, rendered text). Raises: InputError for any bad input.
    """
    return benchmark_in_context(in_run_context(options))


def benchmark_in_context(options: BenchmarkOptions) -> tuple[Comparison, str]:
    """:func:`benchmark` of options already in their run context (:func:`in_run_context`)."""
    o = options
    fmt = resolve_format(o.fmt, o.output, FORMATS)
    resolve_splits(o.split)
    champion_files = list(o.champions)
    check_output(o.output, inputs=(o.data_dir, *champion_files, o.costs),
                 champion_dirs=(o.champions_dir or default_champions_dir(),))
    entries, left_out = own_data_entries(collect_entries(champion_files, o.champions_dir), o.data_dir,
                                         o.champions_dir)
    costs = cost_model(o)
    if o.concurrency and not costs.measured:
        raise InputError("throughput against concurrent requests needs a cost file", param="concurrency")
    comparison = run_comparison(o.data_dir, o.split, entries, o.repeats, gamma=o.gamma, costs=costs,
                                concurrency=o.concurrency)
    comparison.notes = left_out + comparison.notes
    text = format_comparison(comparison, fmt)
    if o.output is not None:
        write_output(text, o.output)
    return comparison, text


#: The rows and formats are defined in their own modules and re-exported here (see the module doc).
__all__ = ["BenchmarkOptions", "DEFAULT_DATA", "baseline_entries", "benchmark", "benchmark_in_context", "block_gamma", "block_verification_row",
           "champion_entries", "champion_from_file", "champion_module", "collect_entries", "cost_model",
           "default_champions_dir", "in_run_context",
           "KindScorer", "missing_columns", "resolve_splits", "run_comparison", "training_split",
           "score_split", "timed_evaluate"]

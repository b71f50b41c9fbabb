"""The public Python API: load a trace dataset, score acceptance rules, evolve one, read champions.

A rule gives each drafted token x a threshold tau and the token is accepted iff u < tau with
u ~ U[0, 1); standard rejection, tau = min(1, p(x)/q(x)), is lossless (Leviathan et al. 2023,
arXiv 2211.17192). Five functions cover what the command lines do, returning pandas frames and
plain dataclasses:

* :func:`load_frames`: a dataset directory as ``{split: pandas.DataFrame}``;
* :func:`evaluate_rule`: one rule (a registry name, an expression or a loaded rule) on one split,
  as :class:`evolve.eval.evaluator.Metrics`;
* :func:`metrics_frame`: several rules on one split, one row per rule;
* :func:`run_search`: an evolution run (``python -m evolve run``), with the champion, the hall of
  fame and (for a ``pareto`` run) the front as frames;
* :func:`load_champion`: a champion file or run directory as a rule.

Errors in the arguments raise :class:`evolve.errors.InputError` with one line naming the parameter and the
value: every function checks its arguments' types before it reads or writes anything. A rule is named as the
command lines name it (:func:`heuristics.registry.get_rule`: a registered rule, a family member
``FAMILY:VALUES`` such as ``fixed_gamma:gamma=2``, or a promoted champion); anything else is an expression.

Example (a tiny dataset of the vocab model, which records speculation blocks, so block metrics
apply)::

    >>> import tempfile
    >>> from pathlib import Path
    >>> from evolve.traces.synth import generate
    >>> from evolve import api
    >>> tmp = tempfile.TemporaryDirectory()
    >>> work = Path(tmp.name)
    >>> files = generate.write(generate.generate_dataset("vocab", seed=1, sequences=10), work / "data")
    >>> splits = api.load_frames(work / "data")
    >>> sorted(splits), list(splits["test"].columns[:4])
    (['test', 'train', 'valid'], ['seq_id', 'position', 'draft_prob', 'target_prob'])
    >>> standard = api.evaluate_rule("standard_rejection", work / "data", gamma=4)
    >>> standard.expected_tv, standard.tokens_per_call > 1
    (0.0, True)
    >>> floor = api.evaluate_rule("max(div(target_prob, draft_prob), 0.3)", work / "data", gamma=4)
    >>> floor.expected_acceptance > standard.expected_acceptance and floor.expected_tv > 0
    True
    >>> table = api.metrics_frame(["standard_rejection", "max(div(target_prob, draft_prob), 0.3)"],
    ...                           work / "data", gamma=4)
    >>> table[["rule", "expected_tv"]].shape
    (2, 2)
    >>> run = api.run_search({"data": work / "data", "out": work / "results", "population": 20,
    ...                       "generations": 2, "seed": 0})
    >>> hof = run.hall_of_fame_frame()
    >>> list(hof.columns[:5]), bool(hof["valid_fitness"].notna().all())
    (['expression', 'size', 'depth', 'sympy', 'latex'], True)
    >>> champion = api.load_champion(run.run_dir)
    >>> champion.expression == run.champion.expression
    True
    >>> api.evaluate_rule(champion, work / "data", split="valid") == run.champion.valid
    True
    >>> tmp.cleanup()
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from evolve.errors import InputError
from evolve.traces.io import SPLITS, Traces, load_split, split_path
from evolve.eval.evaluator import AcceptanceQualityFitness, EvalData, Metrics, evaluate
from evolve.eval.costs import DEFAULT_COST_RATIO, Costs, finite_number, load_costs, ratio_costs
from evolve.harvest.context import at_dataset_context
from evolve.gp.compiler import Node, Program, parse, to_sympy
from evolve.gp.primitives import FEATURES
from evolve.kinds.base import KindContext
from evolve.search.config import RunConfig, resolve
from heuristics import champions as _champions
from heuristics.champions import Champion
from heuristics.contract import Rule
from heuristics.registry import get_rule

__all__ = ["load_frames", "evaluate_rule", "metrics_frame", "run_search", "load_champion", "read_champion",
           "SearchRun", "Metrics", "RunConfig", "Rule", "InputError", "SYMPY_MAX_NODES"]

#: Expressions with more nodes than this get no ``sympy``/``latex`` rendering in the frames (None):
#: sympy folds nested Min, Max and Piecewise (if_gt) as it builds them, which takes seconds on larger trees
#: (about 10 ms per expression up to this size).
SYMPY_MAX_NODES = 40
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


# --- argument checks -----------------------------------------------------------------------------

def _show(value: Any) -> str:
    """A value as an error message shows it (its repr, cut at 60 characters, and its type)."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def _check(parameter: str, value: Any, ok: bool, want: str) -> None:
    """InputError ``parameter=value: want`` (one line) unless ``ok``."""
    if not ok:
        raise InputError(f"{parameter}={_show(value)}: {want}")


def _check_path(parameter: str, value: Any, what: str) -> None:
    """A path argument: a str or os.PathLike, not empty."""
    _check(parameter, value, isinstance(value, (str, os.PathLike)) and os.fspath(value) != "",
           f"must be the path of {what} (a str or pathlib.Path)")


def _check_split(parameter: str, value: Any) -> None:
    """A split name: one of :data:`evolve.traces.io.SPLITS`."""
    _check(parameter, value, isinstance(value, str), f"must be a split name, one of {', '.join(SPLITS)}")
    _check(parameter, value, value in SPLITS, f"unknown split (known: {', '.join(SPLITS)})")


def _check_options(gamma: Any, fitness: Any, cost_ratio: Any) -> None:
    """The options :func:`evaluate_rule` and :func:`metrics_frame` share."""
    _check("gamma", gamma, gamma is None or (isinstance(gamma, (int, np.integer)) and not isinstance(gamma, bool)
                                             and gamma >= 1), "must be None or an integer >= 1")
    _check("fitness", fitness, fitness is None or isinstance(fitness, AcceptanceQualityFitness),
           "must be None or an evolve.eval.evaluator.AcceptanceQualityFitness")
    _check("cost_ratio", cost_ratio, cost_ratio is None or (
        isinstance(cost_ratio, (int, float, np.floating)) and not isinstance(cost_ratio, bool)
        and finite_number(cost_ratio) and cost_ratio >= 0), "must be None or a finite number >= 0")


# --- datasets ----------------------------------------------------------------------------------

def load_frames(path: str | os.PathLike, splits: Iterable[str] | None = None) -> dict[str, pd.DataFrame]:
    """The splits of a dataset directory as validated DataFrames.

    Args:
        path: a directory written by ``generate_data.py`` (``train``/``valid``/``test`` as
            ``.parquet`` or ``.json``, plus ``metadata.json``).
        splits: names to load (a list, or one name as a str); None loads every split the directory has.

    Returns: ``{split: DataFrame}`` in the order train, valid, test; one row per drafted token, the
    schema's columns (:mod:`evolve.traces.schema`: int64 ``seq_id`` and ``position``, float64
    probabilities and entropies in nats, bool ``top_token_match`` and ``baseline_accepts``, float64
    ``rand_value``, and the optional columns the files have).

    Raises: InputError for a ``path`` that is no str or path, a split name not among train/valid/test, a
    missing directory or split, an unreadable file or any schema violation (the message names the file and
    the column).
    """
    _check_path("path", path, "a dataset directory")
    if isinstance(splits, str):
        splits = [splits]
    elif splits is not None:
        _check("splits", splits, isinstance(splits, Iterable) and not isinstance(splits, (bytes, Mapping)),
               f"must be None, a split name or a list of them ({', '.join(SPLITS)})")
        splits = list(splits)
        for name in splits:
            _check("splits", name, isinstance(name, str) and name in SPLITS,
                   f"unknown split (known: {', '.join(SPLITS)})")
    if splits is None:
        splits = [s for s in SPLITS if split_path(path, s) is not None]
        if not splits:
            load_split(path, "train")  # raises the loader's own message (no directory / no split file)
    return {s: load_split(path, s).to_frame() for s in splits}


def _eval_data(data: Any, split: str) -> EvalData:
    """One split of ``data`` (a dataset directory, a {split: DataFrame} dict, a DataFrame, Traces or
    EvalData) ready for the evaluator."""
    if isinstance(data, EvalData):
        return data
    if isinstance(data, Traces):
        return EvalData.from_traces(data)
    if isinstance(data, pd.DataFrame):
        return EvalData.from_traces(Traces.from_frame(data, split=split))
    if isinstance(data, Mapping):
        if split not in data:
            raise InputError(f"split '{split}' is not among the given splits ({', '.join(map(str, data))})")
        return _eval_data(data[split], split)
    if isinstance(data, (str, os.PathLike)):
        _check_split("split", split)
        return EvalData.from_traces(load_split(data, split))
    raise InputError(f"data={_show(data)}: must be a dataset directory, the dict load_frames returns, a "
                     f"DataFrame, Traces or EvalData")


# --- rules -------------------------------------------------------------------------------------

def _rule(rule: Any) -> Rule | Program:
    """A rule from a registry name, an expression, a champion file path, a Rule or a Program."""
    if isinstance(rule, (Rule, Program)):
        return rule
    if isinstance(rule, os.PathLike):
        return load_champion(rule)
    if not isinstance(rule, str) or not rule.strip():
        raise InputError(f"rule={_show(rule)}: must be a rule name, an expression, a champion path "
                         f"(pathlib.Path) or a Rule")
    text = rule.strip()
    if ":" in text or (_NAME.fullmatch(text) and text not in FEATURES):  # named as the command lines name it
        return get_rule(text, champions=True)
    parse(text, "expression")  # one-line InputError naming the offending name or character
    return Rule(text, expression=text)


def _eval_data_check(data: Any, split: str) -> None:
    """InputError unless ``data`` is a kind :func:`_eval_data` takes (checked before a rule is resolved)."""
    if isinstance(data, (str, os.PathLike)):
        _check_path("data", data, "a dataset directory")
        _check_split("split", split)
        return
    _eval_data(data, split)  # raises the one-line error for every other type


def _label(rule: Rule | Program) -> tuple[str, str | None]:
    """(name, expression) of a rule or program for a frame row."""
    if isinstance(rule, Program):
        return "program", None
    return rule.name, rule.expression


def evaluate_rule(rule: Any, data: Any, split: str = "test", gamma: int | None = None, *,
                  fitness: AcceptanceQualityFitness | None = None,
                  cost_ratio: float | None = None, costs: Any = None) -> Any:
    """Metrics of one rule of any kind of program on one split.

    Args:
        rule: a rule name (``"standard_rejection"``, a published rule or a promoted champion), a
            prefix expression over the primitive set (``"min(1.0, div(target_prob, draft_prob))"``),
            a :class:`heuristics.contract.Rule`, a compiled :class:`evolve.gp.compiler.Program`, or
            the path (``pathlib.Path``) of a champion file or run directory.
        data: a dataset directory, the dict :func:`load_frames` returns, one split as a DataFrame,
            :class:`evolve.traces.io.Traces` or :class:`evolve.eval.evaluator.EvalData`.
        split: the split read from a directory or dict (``"test"`` by default: searches never read it).
        gamma: draft length for the block metrics (``tokens_per_call``, ``speedup``,
            ``tv_per_token``), on splits with ``draft_index``; None leaves them None.
        fitness: parameters of the acceptance-quality fitness (default weights 10 and 0.1, floor
            0.95, scale 0.5).
        cost_ratio: draft/target cost ratio c of the flat cost model used when ``costs`` is None: ``speedup`` =
            tokens_per_call / (gamma c + 1) (:func:`evolve.eval.costs.ratio_costs`); None:
            :data:`evolve.eval.costs.DEFAULT_COST_RATIO`.
        costs: the cost model (a cost file's path, or a :class:`evolve.eval.costs.Costs`) that prices every figure
            of the rule: the speedup at a fixed draft length, and tokens per second (verification-length policies,
            tree shapes); None: the flat model of ``cost_ratio``. Giving both is refused (one cost model). A file
            timed at two contexts prices calls at a dataset directory's mean context
            (:func:`evolve.harvest.context.at_dataset_context`).

    Returns: the metrics of the rule's kind (its ``score`` hook, :mod:`evolve.kinds`): for a threshold
    :class:`evolve.eval.evaluator.Metrics` (rates are fractions of tokens; the formulas are in
    :mod:`evolve.eval.evaluator`); for a relaxation weight relaxed block verification's
    :class:`evolve.eval.relaxed_block.RelaxedMetrics` (``gamma`` needed); for a verification-length
    policy :class:`evolve.kinds.verify_length.eval_policy.LengthMetrics` (``gamma``: the longest draft); for a
    tree shape :class:`evolve.eval.tree_scoring.ShapeMetrics` (``data`` a dataset directory with tree
    tables).

    Raises: InputError for an argument of the wrong type (naming the parameter and value), an unknown rule
    name, a malformed expression, a rule needing a column the split lacks, a gamma outside [1, the split's
    block length], or any data error of :func:`load_frames`.
    """
    _check_options(gamma, fitness, cost_ratio)
    _check("split", split, isinstance(split, str), f"must be a split name, one of {', '.join(SPLITS)}")
    if not isinstance(data, (EvalData, Traces, pd.DataFrame, Mapping)):
        _eval_data_check(data, split)
    rule = _rule(rule)
    fitness = fitness or AcceptanceQualityFitness()
    directory = data if isinstance(data, (str, os.PathLike)) else None
    model = at_dataset_context(_cost_model(costs, cost_ratio), directory)
    if isinstance(rule, Program):
        return evaluate(rule, _eval_data(data, split), fitness, gamma=gamma, costs=model)
    score = rule.program_kind.hook("score", "evolve.api.evaluate_rule", f"rule '{rule.name}'")
    return score(rule, KindContext(lambda: _eval_data(data, split), fitness, gamma, model, directory=directory,
                                   split=split))


def _cost_model(costs: Any, cost_ratio: float | None) -> Costs:
    """The one cost model of a call: ``costs`` (a :class:`evolve.eval.costs.Costs` or a cost file's path), else the
    flat model of the draft/target cost ratio ``cost_ratio`` (:func:`evolve.eval.costs.ratio_costs`).

    Raises: InputError for a value of another type, or both given (any ``cost_ratio`` that is not None)."""
    if costs is None:
        return ratio_costs(DEFAULT_COST_RATIO if cost_ratio is None else cost_ratio)
    if cost_ratio is not None:
        raise InputError("give costs (a cost file) or cost_ratio, not both: one cost model prices every figure")
    if isinstance(costs, Costs):
        return costs
    if isinstance(costs, (str, os.PathLike)):
        return load_costs(costs)
    raise InputError(f"costs must be a cost file path or Costs (got {type(costs).__name__})")


def metrics_frame(rules: Iterable[Any] | Mapping[str, Any], data: Any, split: str = "test",
                  gamma: int | None = None, *, fitness: AcceptanceQualityFitness | None = None,
                  cost_ratio: float | None = None) -> pd.DataFrame:
    """Several rules on one split: one row per rule, in the order given.

    Args:
        rules: anything :func:`evaluate_rule` takes, as a list, or a mapping ``{label: rule}``
            whose labels name the rows.
        data, split, gamma, fitness, cost_ratio: as :func:`evaluate_rule` (the split is loaded once).

    Returns: DataFrame with columns ``rule`` (the label or rule name), ``expression`` (None for a
    function rule) and the :class:`Metrics` fields (the block metrics only with ``gamma``; NaN
    where a split lacks ``draft_index``).

    Raises: InputError as :func:`evaluate_rule` (for the first rule that fails), or for ``rules`` that is
    neither a list nor a dict of rules (a str is one rule).
    """
    if isinstance(rules, (str, os.PathLike, Rule, Program)):
        rules = [rules]
    _check("rules", rules, isinstance(rules, Iterable) and not isinstance(rules, bytes),
           "must be a list of rules or a dict {label: rule}")
    _check_options(gamma, fitness, cost_ratio)
    _check("split", split, isinstance(split, str), f"must be a split name, one of {', '.join(SPLITS)}")
    split_data = _eval_data(data, split)
    items = rules.items() if isinstance(rules, Mapping) else ((None, r) for r in rules)
    rows = []
    for label, given in items:
        rule = _rule(given)
        name, expression = _label(rule)
        metrics = evaluate_rule(rule, split_data, split, gamma, fitness=fitness, cost_ratio=cost_ratio)
        rows.append({"rule": name if label is None else label, "expression": expression, **metrics.to_dict()})
    return pd.DataFrame.from_records(rows, columns=_columns(rows, ["rule", "expression"]))


def _columns(rows: list[dict], first: list[str]) -> list[str]:
    """``first``, then the other keys in order of first appearance (empty rows keep ``first``)."""
    seen = dict.fromkeys(first)
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


# --- search ------------------------------------------------------------------------------------

def _render(nodes: list[Node]) -> tuple[str | None, str | None]:
    """(sympy string, LaTeX) of an expression, or (None, None) above :data:`SYMPY_MAX_NODES` nodes
    or when sympy fails on it."""
    if len(nodes) > SYMPY_MAX_NODES:
        return None, None
    try:
        import sympy as sp
        expr = to_sympy(nodes)
        return str(expr), sp.latex(expr)
    except Exception:  # sympy raises assorted types on odd inputs: the expression column stays exact
        return None, None


def entries_frame(entries: Iterable[Any]) -> pd.DataFrame:
    """Scored expressions (search entries with ``expression``, ``nodes``, ``size``, ``depth``,
    ``train`` and ``valid`` metrics) as a DataFrame: columns ``expression``, ``size``, ``depth``,
    ``sympy``, ``latex``, then ``train_<metric>`` and ``valid_<metric>`` for every
    :class:`Metrics` field computed."""
    rows = []
    for e in entries:
        sympy_text, latex = _render(e.nodes)
        row = {"expression": e.expression, "size": e.size, "depth": e.depth, "sympy": sympy_text, "latex": latex}
        for split in ("train", "valid"):
            row.update({f"{split}_{k}": v for k, v in getattr(e, split).to_dict().items()})
        rows.append(row)
    return pd.DataFrame.from_records(rows, columns=_columns(rows, ["expression", "size", "depth", "sympy", "latex"]))


@dataclass
class SearchRun:
    """The outcome of :func:`run_search`.

    Attributes:
        config: the resolved :class:`evolve.search.config.RunConfig`.
        run_dir: the run directory written (``champion.json``, ``hall_of_fame.json``, ``run.json``,
            ``logbook.csv``, ``config.toml``, ``fitness.png`` and, for ``pareto``, ``front.json``).
        result: the search's full result (logbook, counts, timing).
    """

    config: RunConfig
    run_dir: Path
    result: Any

    @property
    def champion(self):
        """The champion: ``expression``, ``nodes``, ``size``, ``depth``, ``train`` and ``valid``
        :class:`Metrics` (chosen on valid; see :mod:`evolve.search.algorithms`)."""
        return self.result.champion

    def champion_rule(self) -> Rule:
        """The champion as a rule, read back from ``run_dir`` (:func:`load_champion`)."""
        return load_champion(self.run_dir)

    def hall_of_fame_frame(self) -> pd.DataFrame:
        """The hall of fame (best train fitness first; for a ``pareto`` run the front) as a
        DataFrame (columns of :func:`entries_frame`)."""
        return entries_frame(self.result.hall_of_fame)

    def front_frame(self) -> pd.DataFrame:
        """The final non-dominated front of a ``pareto`` run, ascending TV per token on train
        (columns of :func:`entries_frame`).

        Raises: InputError for a run with another fitness (it keeps no front).
        """
        if self.result.front is None:
            raise InputError(f"objective '{self.config.objective}' keeps no front: only a multi-objective run (objective "
                             f"'pareto') does")
        return entries_frame(self.result.front)

    def logbook_frame(self) -> pd.DataFrame:
        """One row per generation (the columns of ``logbook.csv``)."""
        return pd.DataFrame.from_records(self.result.logbook)


def run_search(config: RunConfig | Mapping[str, Any], progress: Callable[[dict[str, float]], None] | None = None
               ) -> SearchRun:
    """Evolve an acceptance rule and write a run directory, as ``python -m evolve run`` does.

    Args:
        config: a :class:`evolve.search.config.RunConfig`, or a dict of its field names (``data``,
            ``out``, ``population``, ``generations``, ``seed``, ``fitness``...; missing ones take
            the defaults; paths may be ``pathlib.Path``). Only the ``train`` and ``valid`` splits of
            ``data`` are read.
        progress: None, or a callable called with each generation's logbook row (a dict of floats).

    Returns: :class:`SearchRun`. Same config and data give the same champion.

    Raises: InputError for a ``config`` or ``progress`` of the wrong type, an invalid config value (naming the
    field), missing or invalid data, or an output directory that cannot be written (nothing is written then:
    every argument is checked before the run starts).
    """
    _check("progress", progress, progress is None or callable(progress),
           "must be None or a callable taking each generation's logbook row")
    if isinstance(config, RunConfig):
        config = config.to_dict()
    _check("config", config, isinstance(config, Mapping), "must be a RunConfig or a dict of its field names")
    _check("config", config, all(isinstance(k, str) for k in config), "its keys must be RunConfig field names (str)")
    cfg = resolve({k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in config.items()})
    from evolve.report.runplot import plot_logbook
    from evolve.search.rundir import run

    plot = {"fitness.png": lambda result: plot_logbook(result.logbook, result.config.objective)}
    info = run(cfg, progress=progress, extra_files=plot)
    return SearchRun(cfg, info.run_dir, info.result)


# --- champions ---------------------------------------------------------------------------------

def load_champion(path: str | os.PathLike) -> Rule:
    """The champion in ``path`` (a champion file or a run directory holding ``champion.json``) as a rule, parsed
    and checked without ``eval`` (:func:`heuristics.champions.load_champion`).

    Raises: InputError for a ``path`` that is no str or path (naming it), or naming the file for a missing,
    malformed or unsafe champion.
    """
    _check_path("path", path, "a champion file or run directory")
    return _champions.load_champion(path)


def read_champion(path: str | os.PathLike) -> Champion:
    """The whole champion file in ``path`` (kind, expression, features, objective, metrics, provenance) as
    :class:`heuristics.champions.Champion` (:func:`heuristics.champions.read_champion`).

    Raises: InputError as :func:`load_champion`.
    """
    _check_path("path", path, "a champion file or run directory")
    return _champions.read_champion(path)

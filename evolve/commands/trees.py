"""``benchmark.py trees``: draft-tree verification and tree shapes on a dataset's tree tables.

For each split asked for, from ``DIR/{split}.trees.parquet`` (:mod:`evolve.traces.tree_tables`), one row per:

* ``specinfer`` and ``traversal``: every harvested tree verified whole, by SpecInfer's recursive
  rejection sampling (Miao et al. 2024, arXiv 2305.09781) and by traversal verification (Weng et al.
  2025, arXiv 2505.12398); exact expected tokens computed at harvest from the full distributions;
* the named shapes of :func:`evolve.eval.tree_competitors.competitors` (``chain``: the first path, whole;
  ``best_chain``, ``fixed_width``, ``eagle2``, ``eagle2_full``, ``eagle2_topk``, ``medusa_static``,
  ``adaptive_width``), their settings tuned on the tuning split (valid by default) by tokens per second,
  verified by SpecInfer;
* each ``--champion`` of kind ``tree-shape`` (an evolved shape), verified by SpecInfer, with the share of the
  headroom between the best fixed setting (``fixed_width`` or ``best_chain``, whichever is faster on the tuning
  split: :func:`best_fixed`) and the bound ``shape_oracle`` it captures (:mod:`evolve.eval.headroom`, its
  interval over the split's texts; ``--bootstrap`` replicates, else 200) and its standing against every named shape;
* each ``--champion`` of kind ``relaxation`` (a weight w evolved on the chains): every harvested tree
  verified by SpecInfer against the mixture (1 - w) p + w q at each context (w rounded down to the
  grid of the table's ``relaxed_residual_prob``; :func:`evolve.eval.tree_scoring.relaxed_accept`), with its
  exact TV per token, and the ``fixed_w`` row: the largest constant w whose TV per token on the tuning
  split is at most the champion's (an equal-damage comparison).

Every other row is lossless (TV per token 0). Tokens per second and speedup use the cost file (``--costs``;
the default flat cost model otherwise): a call on n nodes costs a target forward of n + 1 tokens plus
the drafter's passes (:mod:`evolve.eval.tree_scoring`). A champion is scored in its run's context
(:mod:`evolve.commands.run_context`): on its run's dataset (or a subset of it) and under its run's cost file when
none is given, and another one given is refused naming both.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from evolve.eval.costs import Costs, load_costs
from evolve.harvest.context import at_dataset_context
from evolve.eval.tree_competitors import competitors
from evolve.eval.tree_scoring import (
    BOUNDS, ShapeData, shape_data, whole_tree_metrics,
)
from evolve.eval.bootstrap import check_replicates, group_weights, interval_caveat, ratio_interval
from evolve.eval.headroom import HEADROOM_REPLICATES, headroom
from evolve.commands.run_context import contexts, resolve_costs, resolve_data
from evolve.report.finite import finite_tree
from evolve.report.output import check_output, resolve_format, write_output
from evolve.report.trees import (BOOTSTRAP_KEYS, FORMATS, HEADROOM_KEYS, KEYS, format_markdown,
                                 format_table, tree_row)
from evolve.traces.tree_tables import load_trees
from heuristics.champions import read_champion

#: Splits of ``--split all``.
ALL_SPLITS: tuple[str, ...] = ("train", "valid", "test")


@dataclass(frozen=True)
class TreesOptions:
    """What :func:`trees_command` does (the command line's options of the same names).

    ``data_dir``: dataset directory with tree tables (None: the one the ``champions`` were evolved on, else
    ``data``; :mod:`evolve.commands.run_context`); ``split``: ``train``/``valid``/``test``/``all``;
    ``tune_split``: the split the named shapes' settings are chosen on; ``champions``: champion files of kind
    ``tree-shape`` or ``relaxation``; ``costs``: cost file or None (the champions' run's, else the flat model); ``bootstrap``: replicates of the paired
    bootstrap against ``fixed_width`` (0: none, else at least
    :data:`evolve.eval.bootstrap.MIN_REPLICATES`); ``fmt``, ``output``: as every table command.
    """

    data_dir: Path | None
    split: str = "test"
    tune_split: str = "valid"
    champions: tuple[Path, ...] = ()
    costs: Path | None = None
    bootstrap: int = 0
    fmt: str | None = None
    output: Path | None = None


def champion_label(path: Path) -> str:
    """A champion row's label: the file's name without ``.json`` (``.champion`` dropped too), or the run
    directory's name for a run's ``champion.json``."""
    path = Path(path)
    if path.is_dir():
        return path.name
    stem = path.name[: -len(".json")] if path.name.endswith(".json") else path.name
    stem = stem[: -len(".champion")] if stem.endswith(".champion") else stem
    return path.parent.name if stem == "champion" else stem


def _champion_programs(paths: Sequence[Path]) -> list[tuple[str, str, Any]]:
    """(label, kind, program) of each champion file; InputError for another kind or a bad file."""
    out = []
    for path in paths:
        champ = read_champion(path)
        rows = champ.program_kind.hook("trees", "python benchmark.py trees", str(path))
        out.append((champion_label(path), rows, champ.rule().program))
    return out


def tree_rows(data: dict[str, ShapeData], tune: ShapeData, costs: Costs,
              champions: Sequence[tuple[str, str, Any]] = (), bootstrap: int = 0) -> list[dict[str, Any]]:
    """The rows of every split in ``data`` (see the module doc), named shapes tuned on ``tune``. With
    ``bootstrap`` > 0 replicates, every row but the bound gets ``vs_fixed_width`` (its tokens per second over the
    split's ``fixed_width`` row) and the 95% interval ``vs_fixed_width_low``/``_high`` from a paired bootstrap over
    the split's texts (:mod:`evolve.eval.bootstrap`; InputError for fewer than its ``MIN_REPLICATES``), and the
    split's caveat under ``_caveat`` (:func:`evolve.eval.bootstrap.interval_caveat`; None when the split has texts
    enough), never written."""
    if bootstrap > 0:
        check_replicates(bootstrap)
    rows = []
    fixed = best_fixed(tune, costs) if champions else FIXED_SHAPES[0]
    for split, d in data.items():
        first = len(rows)
        for name, column in (("specinfer", "specinfer_tokens"), ("traversal", "traversal_tokens")):
            trees = np.zeros((d.trees, 2))
            rows.append(tree_row(split, name, "verification", "whole tree", whole_tree_metrics(d, column, costs, trees),
                             trees))
        per_tree: dict[str, np.ndarray] = {}
        for name, (setting, m) in competitors(d, costs, tuned_on=tune, per_tree=per_tree).items():
            rows.append(tree_row(split, name, "bound" if name in BOUNDS else "shape", setting, m,
                                 None if name in BOUNDS else per_tree.get(name)))
        for name, champion_rows, program in champions:
            rows += champion_rows(split, name, program, d, tune, costs)
        add_headroom(rows[first:], d, per_tree, bootstrap or HEADROOM_REPLICATES, fixed)
        if bootstrap > 0:
            texts = d.table.per_tree("seq_id")
            weights = group_weights(texts, bootstrap)
            reference = per_tree["fixed_width"]
            caveat = interval_caveat(texts)
            for row in rows[first:]:
                row["_caveat"] = None if caveat is None else f"{split}: {caveat}"
                point = low = high = math.nan
                if row["_per_tree"] is not None:
                    point, low, high = ratio_interval(weights, row["_per_tree"], reference)
                row.update(vs_fixed_width=point, vs_fixed_width_low=low, vs_fixed_width_high=high)
    return rows


#: The rows a tree champion's headroom share is measured between (:mod:`evolve.eval.headroom`): the best fixed setting,
#: the faster on the tuning split of a tuned fixed top-K tree and a tuned chain depth (depth 0: plain decoding, so a
#: champion that does not draft takes no share where drafting does not pay), and the bound.
FIXED_SHAPES, BOUND_SHAPE = ("fixed_width", "best_chain"), "shape_oracle"


def best_fixed(tune: ShapeData, costs: Costs) -> str:
    """The name among :data:`FIXED_SHAPES` whose tuned setting is faster on ``tune`` (tokens per second under
    ``costs``; the first on a tie)."""
    found = competitors(tune, costs, tuned_on=tune)
    return max(FIXED_SHAPES, key=lambda name: (found[name][1].tokens_per_second, -FIXED_SHAPES.index(name)))


def add_headroom(rows: list[dict[str, Any]], d: ShapeData, per_tree: dict[str, np.ndarray], replicates: int,
                 fixed: str = FIXED_SHAPES[0]) -> None:
    """Give every champion row of one split (role ``champion``, with per-tree figures) its headroom share between
    the best fixed setting ``fixed`` (:func:`best_fixed`) and the bound ``shape_oracle`` and the 95% interval over the
    split's texts (the bound's per-tree choices kept in every replicate), as ``headroom_share``/``_low``/``_high``,
    and under ``_headroom`` the record :mod:`evolve.report.headroom` prints (with each named shape as a rival)."""
    texts = d.table.per_tree("seq_id")
    weights = None
    for row in rows:
        if row["role"] != "champion" or row["_per_tree"] is None:
            continue
        found = headroom(row["_per_tree"], per_tree[fixed], per_tree[BOUND_SHAPE], texts, replicates)
        weights = group_weights(texts, replicates) if weights is None else weights
        rivals = []
        for other in rows:
            if other["role"] == "shape" and other["_per_tree"] is not None:
                ratio, low, high = ratio_interval(weights, row["_per_tree"], other["_per_tree"])
                rivals.append({"name": other["heuristic"], "ratio": ratio, "low": low, "high": high})
        row.update(headroom_share=found.share, headroom_low=found.low, headroom_high=found.high,
                   _headroom={"champion": row["heuristic"], "split": row["split"], "fixed_name": fixed,
                              "bound_name": BOUND_SHAPE, "headroom": found.to_dict(), "rivals": rivals})


def trees_command(opts: TreesOptions) -> tuple[list[dict[str, Any]], str]:
    """Run ``benchmark.py trees``: (rows, the text written or printed).

    Raises: InputError for a missing or damaged tree table (naming the file, column and row), a champion of
    another kind, a bad cost file, or a bad output path.
    """
    fmt = resolve_format(opts.fmt, opts.output, FORMATS)
    check_output(opts.output, inputs=(opts.data_dir, *opts.champions, opts.costs))
    if opts.bootstrap != 0:
        check_replicates(opts.bootstrap)
    champions = _champion_programs(opts.champions)
    found = contexts(opts.champions)  # a champion is scored on its run's dataset and under its run's cost file
    opts = dataclasses.replace(opts, data_dir=resolve_data(opts.data_dir, found, "data"),
                               costs=resolve_costs(opts.costs, found))
    check_output(opts.output, inputs=(opts.data_dir, *opts.champions, opts.costs))
    costs = at_dataset_context(load_costs(opts.costs), opts.data_dir)
    splits = ALL_SPLITS if opts.split == "all" else (opts.split,)
    data = {s: shape_data(load_trees(opts.data_dir, s)) for s in splits}
    tune = data.get(opts.tune_split) or shape_data(load_trees(opts.data_dir, opts.tune_split))
    rows = tree_rows(data, tune, costs, champions, opts.bootstrap)
    caption = (f"draft trees of {opts.data_dir} ({', '.join(f'{s}: {d.trees} trees' for s, d in data.items())}); "
               f"named shapes tuned on {opts.tune_split}; costs: {costs.source}; " + (
                   "deterministic trees (suffix decoding, q one-hot; shapes ranked by the suffix trees' estimated "
                   "probabilities): every row verified by SpecInfer, whose walk takes the most any lossless "
                   "verification can (specinfer and traversal the same)"
                   if tune.table.deterministic else
                   "every row but traversal verified by SpecInfer (against the target, or against (1 - w) p + w q for "
                   "relaxation and fixed_w)"))
    keys = KEYS + (BOOTSTRAP_KEYS if opts.bootstrap > 0 else ()) + (
        HEADROOM_KEYS if any("_headroom" in r for r in rows) else ())
    if opts.bootstrap > 0:
        caption += f"; vs fixed_width: {opts.bootstrap} bootstrap replicates over texts"
    if fmt == "json":
        text = json.dumps(finite_tree([{k: r.get(k) for k in keys} for r in rows]), indent=2, allow_nan=False) + "\n"
    elif fmt == "csv":
        import pandas as pd
        text = pd.DataFrame([{k: r.get(k) for k in keys} for r in rows], columns=list(keys)).to_csv(index=False)
    elif fmt == "markdown":
        text = format_markdown(rows, caption)
    else:
        text = format_table(rows, caption)
    if opts.output is not None:
        write_output(text, opts.output)
    return rows, text


__all__ = ["ALL_SPLITS", "FIXED_SHAPES", "BOUND_SHAPE", "best_fixed", "TreesOptions", "add_headroom", "champion_label",
           "tree_rows", "trees_command"]

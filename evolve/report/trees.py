"""``benchmark.py trees``: draft-tree verification and tree shapes on a dataset's tree tables.

For each split asked for, from ``DIR/{split}.trees.parquet`` (:mod:`evolve.traces.trees`), one row per:

* ``specinfer`` and ``traversal``: every harvested tree verified whole, by SpecInfer's recursive
  rejection sampling (Miao et al. 2024, arXiv 2305.09781) and by traversal verification (Weng et al.
  2025, arXiv 2505.12398); exact expected tokens computed at harvest from the full distributions;
* the named shapes of :func:`evolve.kinds.tree_shape.eval_competitors.competitors` (``chain``: the first path, whole;
  ``best_chain``, ``fixed_width``, ``eagle2``, ``eagle2_full``, ``eagle2_topk``, ``medusa_static``,
  ``adaptive_width``), their settings tuned on the tuning split (valid by default) by tokens per second,
  verified by SpecInfer;
* each ``--champion`` of kind ``tree-shape`` (an evolved shape), verified by SpecInfer;
* each ``--champion`` of kind ``relaxation`` (a weight w evolved on the chains): every harvested tree
  verified by SpecInfer against the mixture (1 - w) p + w q at each context (w rounded down to the
  grid of the table's ``relaxed_residual_prob``; :func:`evolve.kinds.tree_shape.eval_shape.relaxed_accept`), with its
  exact TV per token, and the ``fixed_w`` row: the largest constant w whose TV per token on the tuning
  split is at most the champion's (an equal-damage comparison).

Every other row is lossless (TV per token 0). Tokens per second and speedup use the cost file (``--costs``;
the default flat cost model otherwise): a call on n nodes costs a target forward of n + 1 tokens plus
the drafter's passes (:mod:`evolve.kinds.tree_shape.eval_shape`).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from evolve.report.width import fit_width
from evolve.eval.costs import Costs, load_costs
from evolve.kinds.tree_shape.eval_competitors import competitors
from evolve.kinds.tree_shape.eval_shape import (
    BOUNDS, ShapeData, ShapeMetrics, shape_data, whole_tree_metrics,
)
from evolve.eval.bootstrap import check_replicates, group_weights, interval_caveat, interval_text, ratio_interval
from evolve.report.output import check_output, resolve_format, write_output
from evolve.traces.trees import load_trees
from heuristics.champions import read_champion

#: Output formats of the command.
FORMATS: tuple[str, ...] = ("table", "markdown", "json", "csv")
#: Keys of a row (``--format json``), in order.
KEYS: tuple[str, ...] = ("split", "heuristic", "role", "setting", "trees", "tokens_per_call", "tv_per_token",
                         "mean_nodes", "mean_passes", "seconds_per_call", "tokens_per_second", "speedup")
#: Keys a row gains with ``--bootstrap N`` (:func:`tree_rows`).
BOOTSTRAP_KEYS: tuple[str, ...] = ("vs_fixed_width", "vs_fixed_width_low", "vs_fixed_width_high")
#: Splits of ``--split all``.
ALL_SPLITS: tuple[str, ...] = ("train", "valid", "test")


@dataclass(frozen=True)
class TreesOptions:
    """What :func:`trees_command` does (the command line's options of the same names).

    ``data_dir``: dataset directory with tree tables; ``split``: ``train``/``valid``/``test``/``all``;
    ``tune_split``: the split the named shapes' settings are chosen on; ``champions``: champion files of kind
    ``tree-shape`` or ``relaxation``; ``costs``: cost file or None; ``bootstrap``: replicates of the paired
    bootstrap against ``fixed_width`` (0: none, else at least
    :data:`evolve.eval.bootstrap.MIN_REPLICATES`); ``fmt``, ``output``: as every table command.
    """

    data_dir: Path
    split: str = "test"
    tune_split: str = "valid"
    champions: tuple[Path, ...] = ()
    costs: Path | None = None
    bootstrap: int = 0
    fmt: str | None = None
    output: Path | None = None


def tree_row(split: str, name: str, role: str, setting: str, m: ShapeMetrics,
         per_tree: np.ndarray | None = None) -> dict[str, Any]:
    """One row (``role``: ``verification``, ``shape``, ``bound``, ``champion`` or ``relaxation``); ``per_tree``
    float64 (trees, 2), each tree's expected tokens and seconds (None for a bound), is kept under ``_per_tree``
    for the bootstrap and never written."""
    return {"split": split, "heuristic": name, "role": role, "setting": setting, "trees": m.trees,
            "tokens_per_call": m.tokens_per_call, "tv_per_token": m.tv_per_token, "mean_nodes": m.mean_nodes,
            "mean_passes": m.mean_passes, "seconds_per_call": m.seconds_per_call,
            "tokens_per_second": m.tokens_per_second, "speedup": m.speedup, "_per_tree": per_tree}


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
    for split, d in data.items():
        first = len(rows)
        for name, column in (("specinfer", "specinfer_tokens"), ("traversal", "traversal_tokens")):
            trees = np.zeros((d.trees, 2))
            rows.append(tree_row(split, name, "verification", "whole tree", whole_tree_metrics(d, column, costs, trees),
                             trees))
        per_tree: dict[str, np.ndarray] = {}
        for name, (setting, m) in competitors(d, costs, tuned_on=tune, per_tree=per_tree).items():
            rows.append(tree_row(split, name, "bound" if name in BOUNDS else "shape", setting, m, per_tree.get(name)))
        for name, champion_rows, program in champions:
            rows += champion_rows(split, name, program, d, tune, costs)
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


def _versus(r: dict[str, Any]) -> list[str]:
    """The bootstrap cell of a row (none without ``--bootstrap``; blank for a bound)."""
    if "vs_fixed_width" not in r:
        return []
    if not math.isfinite(r["vs_fixed_width"]):
        return [""]
    return [f"{r['vs_fixed_width']:.3f} {interval_text(r['vs_fixed_width_low'], r['vs_fixed_width_high'])}"]


#: Header of the bootstrap column.
VERSUS_HEADER = "vs fixed_width [95%]"
_BOOTSTRAP_NOTE = (" vs fixed_width [95%]: tokens per second over the fixed_width row's, with a paired percentile "
                   "interval from resampling the split's texts (seeded).")


def bootstrap_caveats(rows: list[dict[str, Any]]) -> list[str]:
    """The distinct interval caveats of the rows' splits (:func:`tree_rows`), in row order."""
    return list(dict.fromkeys(r["_caveat"] for r in rows if r.get("_caveat")))


def _caveat_note(rows: list[dict[str, Any]]) -> str:
    """The footnote's sentence of the interval caveats ("" when none)."""
    caveats = bootstrap_caveats(rows)
    return "".join(f" Caveat, {c}." for c in caveats)


def _versus_header(rows: list[dict[str, Any]]) -> list[str]:
    """The bootstrap column's header when the rows were bootstrapped (``--bootstrap``), else none."""
    return [VERSUS_HEADER] if rows and "vs_fixed_width" in rows[0] else []


def format_table(rows: list[dict[str, Any]], caption: str) -> str:
    """Plain-text table of the rows under ``caption``."""
    header = ["Split", "Heuristic", "Setting", "Mean acc. len", "TV/token", "Nodes/call", "Passes/call", "s/call",
              "Tokens/s", "Speedup"] + _versus_header(rows)
    body = [[r["split"], r["heuristic"], r["setting"], f"{r['tokens_per_call']:.4f}", f"{r['tv_per_token']:.2e}",
             f"{r['mean_nodes']:.2f}",
             f"{r['mean_passes']:.2f}", f"{r['seconds_per_call']:.4f}", f"{r['tokens_per_second']:.3f}",
             f"{r['speedup']:.3f}x"] + _versus(r) for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]
    left = {0, 1, 2}
    fmt = lambda cells: "  ".join(c.ljust(w) if i in left else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    lines = [caption, "", fmt(header), "  ".join("-" * w for w in widths)] + [fmt(b) for b in body]
    lines += ["", "TV/token: exact expected TV per emitted token (0: lossless). Mean acc. len: mean acceptance length, "
                  "the exact expected tokens per target call; "
                  "Nodes/call: drafted nodes the target verifies; Passes/call: drafter passes the cost model charges "
                  "(one per depth with an expansion); Speedup: tokens per second over plain decoding's, under the "
                  "cost file. shape_oracle: a bound, not a shape (every subtree of every tree tried, knowing its "
                  "outcome)." + (_BOOTSTRAP_NOTE + _caveat_note(rows) if _versus_header(rows) else "")]
    return fit_width("\n".join(lines)) + "\n"


def format_markdown(rows: list[dict[str, Any]], caption: str) -> str:
    """GitHub Markdown table of the rows, the caption above it."""
    from evolve.report.doctables import markdown_table

    body = [[r["split"], r["heuristic"], r["setting"], f"{r['tokens_per_call']:.4f}", f"{r['tv_per_token']:.2e}",
             f"{r['mean_nodes']:.2f}", f"{r['tokens_per_second']:.3f}", f"{r['speedup']:.3f}x"] + _versus(r)
            for r in rows]
    header = ["Split", "Heuristic", "Setting", "Mean acc. len", "TV/token", "Nodes/call", "Tokens/s", "Speedup"]
    header += _versus_header(rows)
    note = _caveat_note(rows)
    return caption + "\n\n" + markdown_table(header, body, right=set(range(3, len(header))), measured=True) + (
        "\n" + note.strip() + "\n" if note else "")


def _clean(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def trees_command(opts: TreesOptions) -> tuple[list[dict[str, Any]], str]:
    """Run ``benchmark.py trees``: (rows, the text written or printed).

    Raises: InputError for a missing or damaged tree table (naming the file, column and row), a champion of
    another kind, a bad cost file, or a bad output path.
    """
    fmt = resolve_format(opts.fmt, opts.output, FORMATS)
    check_output(opts.output, inputs=(opts.data_dir, *opts.champions, opts.costs))
    if opts.bootstrap != 0:
        check_replicates(opts.bootstrap)
    costs = load_costs(opts.costs)
    champions = _champion_programs(opts.champions)
    splits = ALL_SPLITS if opts.split == "all" else (opts.split,)
    data = {s: shape_data(load_trees(opts.data_dir, s)) for s in splits}
    tune = data.get(opts.tune_split) or shape_data(load_trees(opts.data_dir, opts.tune_split))
    rows = tree_rows(data, tune, costs, champions, opts.bootstrap)
    caption = (f"draft trees of {opts.data_dir} ({', '.join(f'{s}: {d.trees} trees' for s, d in data.items())}); "
               f"named shapes tuned on {opts.tune_split}; costs: {costs.source}; every row but traversal verified by "
               f"SpecInfer (against the target, or against (1 - w) p + w q for relaxation and fixed_w)")
    keys = KEYS + (BOOTSTRAP_KEYS if opts.bootstrap > 0 else ())
    if opts.bootstrap > 0:
        caption += f"; vs fixed_width: {opts.bootstrap} bootstrap replicates over texts"
    if fmt == "json":
        text = json.dumps([{k: _clean(r[k]) for k in keys} for r in rows], indent=2) + "\n"
    elif fmt == "csv":
        import pandas as pd
        text = pd.DataFrame(rows, columns=list(keys)).to_csv(index=False)
    elif fmt == "markdown":
        text = format_markdown(rows, caption)
    else:
        text = format_table(rows, caption)
    if opts.output is not None:
        write_output(text, opts.output)
    return rows, text


__all__ = ["FORMATS", "KEYS", "BOOTSTRAP_KEYS", "ALL_SPLITS", "TreesOptions", "bootstrap_caveats", "champion_label",
           "tree_rows", "format_table", "format_markdown", "trees_command"]

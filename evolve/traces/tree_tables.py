"""Draft-tree tables: one row per drafted node of every draft tree of a split (``DIR/{split}.trees.parquet``).

A tree harvest (``generate_data.py harvest --tree-nodes N``, docs/reference/trees.md) writes, beside the chain
records of each split, a table of the draft trees it grew: at every decoding step a tree of at most N
drafted nodes whose children were drawn i.i.d. (with replacement) from the drafter's distribution at
their parent, or, for a deterministic drafter (suffix decoding), distinct children each proposed with
certainty (q one-hot; :mod:`evolve.engine.suffix_tree`, with the optional :data:`SUFFIX_TREE_COLUMNS`). This
module names the table's columns (:data:`TREE_COLUMNS`), reads a table and checks it for what it means
(:func:`load_trees`), and gives it to the scorers as arrays (:class:`TreeTable`).

Rows are grouped by tree (``seq_id``, ``tree``), the rows of a tree contiguous and ordered by ``node``
0..n-1; a node's parent is an earlier node (or -1, the root: the text so far), and the children of a
node are contiguous rows in draw order (``sibling`` 0, 1, ...). That order is what lets a scorer keep
any shape whose children at every node are a prefix of the drawn ones in draw order, and score it
exactly with SpecInfer's recursive rejection sampling from the rows alone (``residual_prob``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from evolve.errors import InputError
from evolve.files.guard import register_dataset_files
from evolve.files.pins import read_bytes
from evolve.traces.binding import check_bound
from evolve.files.digest import sha256_bytes
from evolve.files.parquet import read_parquet_bytes
from evolve.traces.io import SPLITS, load_metadata, load_split, split_path
from evolve.traces.schema import text_columns_of

#: File name of a split's tree table inside a dataset directory.
TREE_FILE = "{split}.trees.parquet"
register_dataset_files(TREE_FILE.format(split=s) for s in SPLITS)
#: Relative tolerance of the ``draft_cumprob`` check (a product of float64 probabilities).
CUMPROB_RTOL = 1e-6
#: Tolerance of probabilities outside [0, 1] from round-off.
PROB_TOL = 1e-9


@dataclass(frozen=True)
class TreeColumn:
    """One column of a tree table: name, dtype (``int64``/``float64``) and meaning."""

    name: str
    dtype: str
    meaning: str


#: The columns of a tree table, in file order. Probabilities in [0, 1]; entropies in nats.
TREE_COLUMNS: tuple[TreeColumn, ...] = (
    TreeColumn("seq_id", "int64", "text index (0-based among the prompts file's non-blank lines; every turn of every "
                                     "question of a JSON Lines file)"),
    TreeColumn("tree", "int64", "step of that text the tree was grown at (0-based)"),
    TreeColumn("position", "int64", "tokens of the continuation generated before this step"),
    TreeColumn("node", "int64", "the node's index in its tree, 0..n-1 (parents before children)"),
    TreeColumn("parent", "int64", "index of the parent node; -1 for a child of the root (the text so far)"),
    TreeColumn("depth", "int64", "1 for a child of the root, the parent's depth + 1 otherwise"),
    TreeColumn("sibling", "int64", "draw index among the parent's children (0-based); siblings are contiguous"),
    TreeColumn("token", "int64", "the drafted token id"),
    TreeColumn("draft_prob", "float64", "q(x | parent): the drafter's probability of the token where it was drawn"),
    TreeColumn("target_prob", "float64", "p(x | parent): the target's probability of the token there"),
    TreeColumn("residual_prob", "float64", "R_s(x): SpecInfer's target residual at the parent after s = sibling "
               "earlier children were rejected (R_0 = p, R_{i+1} = normalise(max(0, R_i - q))); the node is "
               "accepted with probability min(1, residual_prob / draft_prob) when it is tried"),
    TreeColumn("draft_cumprob", "float64", "product of draft_prob from the root's child down to this node"),
    TreeColumn("node_draft_top_prob", "float64", "largest probability of q(. | node), the drafter's distribution "
               "at this node"),
    TreeColumn("node_draft_entropy", "float64", "entropy of q(. | node), nats"),
    TreeColumn("node_target_top_prob", "float64", "largest probability of p(. | node)"),
    TreeColumn("children", "int64", "children the harvest drew at this node (0 for a leaf)"),
    TreeColumn("tree_nodes", "int64", "per tree: its number of nodes n"),
    TreeColumn("root_draft_top_prob", "float64", "per tree: largest probability of q at the root"),
    TreeColumn("root_draft_entropy", "float64", "per tree: entropy of q at the root, nats"),
    TreeColumn("root_children", "int64", "per tree: children the harvest drew at the root"),
    TreeColumn("specinfer_tokens", "float64", "per tree: exact expected tokens of one SpecInfer verification of "
               "the whole tree (accepted nodes + 1), from the full distributions"),
    TreeColumn("traversal_tokens", "float64", "per tree: exact expected tokens of one traversal verification of "
               "the whole tree, from the full distributions"),
)
TREE_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in TREE_COLUMNS)
_PROBS = ("draft_prob", "target_prob", "residual_prob", "draft_cumprob", "node_draft_top_prob",
          "node_target_top_prob", "root_draft_top_prob")
#: Relaxation weights w at which ``relaxed_residual_prob`` is stored: 0, 0.05, ..., 1.
RELAX_GRID: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(21))
#: Optional columns: what relaxed verification of the trees needs (SpecInfer against the mixture target
#: (1 - w) p + w q at every context). Datasets without them score lossless verification only.
RELAX_COLUMNS: tuple[TreeColumn, ...] = (
    TreeColumn("node_target_entropy", "float64", "entropy of p(. | node), nats"),
    TreeColumn("node_overlap", "float64", "sum_v min(p(v | node), q(v | node)) = 1 - TV(p, q) at the node"),
    TreeColumn("node_top_token_match", "int64", "1 if argmax p(. | node) = argmax q(. | node), else 0"),
    TreeColumn("relaxed_residual_prob", "list<float64>", "R~_s(x) at each w of RELAX_GRID: residual_prob with "
               "the mixture (1 - w) p + w q in place of p at the parent"),
    TreeColumn("root_target_entropy", "float64", "per tree: entropy of p at the root, nats"),
    TreeColumn("root_target_top_prob", "float64", "per tree: largest probability of p at the root"),
    TreeColumn("root_overlap", "float64", "per tree: sum_v min(p(v), q(v)) at the root"),
    TreeColumn("root_top_token_match", "int64", "per tree: 1 if argmax p = argmax q at the root, else 0"),
)
RELAX_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in RELAX_COLUMNS)
#: Optional columns of a suffix-decoding tree harvest (deterministic trees: q one-hot, :mod:`evolve.engine.suffix_tree`):
#: the suffix trees' estimates, which the drafter knows before the node is drafted.
SUFFIX_TREE_COLUMNS: tuple[TreeColumn, ...] = (
    TreeColumn("suffix_prob", "float64", "the suffix trees' estimated probability of the token given its parent "
               "(the ratio of path probabilities)"),
    TreeColumn("suffix_cumprob", "float64", "the estimated probability of the node's path (arctic-inference's probs)"),
    TreeColumn("suffix_match_len", "int64", "per tree: how many of the text's last tokens the suffix tree matched"),
    TreeColumn("suffix_score", "float64", "per tree: the draft's score (arctic-inference's)"),
    TreeColumn("suffix_from_cache", "int64", "per tree: 1 if the tree came from the global cache (earlier "
               "responses), 0 from the request's own prompt and response"),
)
SUFFIX_TREE_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in SUFFIX_TREE_COLUMNS)
#: Columns constant over the rows of one tree.
PER_TREE: tuple[str, ...] = ("seq_id", "tree", "position", "tree_nodes", "root_draft_top_prob", "root_draft_entropy",
                             "root_children", "specinfer_tokens", "traversal_tokens", "root_target_entropy",
                             "root_target_top_prob", "root_overlap", "root_top_token_match", "suffix_match_len",
                             "suffix_score", "suffix_from_cache")


@dataclass(frozen=True)
class TreeTable:
    """A checked tree table as arrays (one entry per row unless said otherwise).

    ``columns``: name -> array (int64 or float64, (rows,)) for every column of :data:`TREE_COLUMNS`, and of
    :data:`RELAX_COLUMNS` when the table has them (``relaxed_residual_prob`` float64 (rows, len(RELAX_GRID))),
    and of the text columns ``category`` (object, strings) and ``question_id`` (int64) when the table has them
    (:data:`evolve.traces.schema.TEXT_COLUMNS`);
    ``starts`` int64 (trees + 1,): row offsets of the trees (tree t is rows starts[t]..starts[t+1]-1);
    ``source``: the file; ``split``: the split's name.
    """

    columns: dict[str, np.ndarray]
    starts: np.ndarray
    source: str = "<memory>"
    split: str = ""

    @property
    def trees(self) -> int:
        """Number of trees."""
        return int(self.starts.size - 1)

    @property
    def relaxable(self) -> bool:
        """Whether the table has the columns of relaxed verification (:data:`RELAX_COLUMNS`)."""
        return all(c in self.columns for c in RELAX_COLUMN_NAMES)

    @property
    def deterministic(self) -> bool:
        """Whether the trees are a deterministic drafter's: q one-hot, with the suffix trees' estimates
        (:data:`SUFFIX_TREE_COLUMNS`; :mod:`evolve.engine.suffix_tree`)."""
        return all(c in self.columns for c in SUFFIX_TREE_COLUMN_NAMES)

    @property
    def rows(self) -> int:
        """Number of nodes over all trees."""
        return int(self.starts[-1])

    def per_tree(self, name: str) -> np.ndarray:
        """A per-tree column's values, one per tree ((trees,))."""
        return self.columns[name][self.starts[:-1]]


def tree_path(data_dir: str | os.PathLike, split: str) -> Path:
    """The tree table of ``split`` in dataset directory ``data_dir``."""
    return Path(data_dir) / TREE_FILE.format(split=split)


def _bad(source: str, column: str, row: int, what: str) -> InputError:
    return InputError(f"{source}: column '{column}', row {row}: {what}")


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def trees_from_frame(df: pd.DataFrame, source: str = "<memory>", split: str = "") -> TreeTable:
    """Check a tree table's frame for what it means and return it as a :class:`TreeTable`.

    Checked: every column of :data:`TREE_COLUMNS` present with an integer or float dtype, no NaN; rows
    grouped by tree with ``node`` = 0..n-1 in order; ``parent`` in -1..node-1; ``depth`` = parent's + 1;
    children of a node contiguous with ``sibling`` 0, 1, ... and ``children`` their number; probabilities
    in [0, 1] with ``draft_prob`` > 0 (the token was drawn from q); ``draft_cumprob`` the product along the
    path; per-tree columns constant within a tree and ``tree_nodes`` = n; expected tokens in [1, depth + 1];
    and the invariants SpecInfer's verification relies on (:func:`_check_meaning`): a first child's
    ``residual_prob`` is its ``target_prob`` (R_0 = p), and with the relaxation columns its
    ``relaxed_residual_prob`` the mixture (1 - w) p + w q of the two; no probability of a child above its parent's
    top probability (``node_draft_top_prob`` / ``node_target_top_prob``, at the root ``root_draft_top_prob`` /
    ``root_target_top_prob``); entropies >= 0 and at least the min-entropy -log(top probability); no tree
    (``seq_id``, ``tree``) twice.
    Raises: InputError naming ``source``, the column, the first offending row and its value.
    """
    missing = [c for c in TREE_COLUMN_NAMES if c not in df.columns]
    if missing:
        raise InputError(f"{source}: missing column '{missing[0]}' (a tree table has: {', '.join(TREE_COLUMN_NAMES)})")
    if len(df) == 0:
        raise InputError(f"{source}: no rows (a tree table holds at least one drafted node)")
    cols: dict[str, np.ndarray] = {}
    for c in TREE_COLUMNS:
        v = df[c.name].to_numpy()
        if c.dtype == "int64":
            if not np.issubdtype(v.dtype, np.integer):
                raise InputError(f"{source}: column '{c.name}': expected integers, got {v.dtype}")
            cols[c.name] = np.ascontiguousarray(v, dtype=np.int64)
        else:
            if not (np.issubdtype(v.dtype, np.floating) or np.issubdtype(v.dtype, np.integer)):
                raise InputError(f"{source}: column '{c.name}': expected numbers, got {v.dtype}")
            f = np.ascontiguousarray(v, dtype=np.float64)
            if not np.isfinite(f).all():
                raise _bad(source, c.name, _first(~np.isfinite(f)), f"not a finite number ({f[_first(~np.isfinite(f))]})")
            cols[c.name] = f
    _check_first_residual(cols, source)
    _read_relax_columns(df, cols, source)
    _read_suffix_columns(df, cols, source)
    cols.update(text_columns_of(df, source))
    for name in _PROBS + tuple(c for c in ("node_overlap", "root_overlap", "root_target_top_prob") if c in cols):
        v = cols[name]
        bad = (v < -PROB_TOL) | (v > 1 + PROB_TOL)
        if bad.any():
            i = _first(bad)
            raise _bad(source, name, i, f"{v[i]} is not a probability in [0, 1]")
    for name in ("position", "seq_id", "tree", "token"):
        if (cols[name] < 0).any():
            i = _first(cols[name] < 0)
            raise _bad(source, name, i, f"is {cols[name][i]}, expected >= 0")
    if (cols["draft_prob"] <= 0).any():
        i = _first(cols["draft_prob"] <= 0)
        raise _bad(source, "draft_prob", i, "is 0, but every node's token was drawn from the drafter's q")
    n = len(df)
    node, parent, depth = cols["node"], cols["parent"], cols["depth"]
    new_tree = np.ones(n, dtype=bool)
    new_tree[1:] = (cols["seq_id"][1:] != cols["seq_id"][:-1]) | (cols["tree"][1:] != cols["tree"][:-1])
    starts = np.append(np.flatnonzero(new_tree), n).astype(np.int64)
    tree_of = np.cumsum(new_tree) - 1
    expect_node = np.arange(n) - starts[tree_of]
    if (node != expect_node).any():
        i = _first(node != expect_node)
        raise _bad(source, "node", i, f"is {node[i]}, expected {expect_node[i]} (a tree's rows are its nodes "
                                      f"0..n-1 in order, trees contiguous)")
    if ((parent < -1) | (parent >= node)).any():
        i = _first((parent < -1) | (parent >= node))
        raise _bad(source, "parent", i, f"is {parent[i]}; needs -1 <= parent < node ({node[i]})")
    base = starts[tree_of]
    prow = np.where(parent >= 0, base + parent, -1)
    expect_depth = np.where(parent >= 0, depth[np.maximum(prow, 0)] + 1, 1)
    if (depth != expect_depth).any():
        i = _first(depth != expect_depth)
        raise _bad(source, "depth", i, f"is {depth[i]}, expected {expect_depth[i]} (the parent's depth + 1)")
    _check_siblings(cols, starts, source)
    parent_cum = np.where(prow >= 0, cols["draft_cumprob"][np.maximum(prow, 0)], 1.0)
    want = parent_cum * cols["draft_prob"]
    bad = np.abs(cols["draft_cumprob"] - want) > CUMPROB_RTOL * np.maximum(want, 1e-300) + 1e-300
    if bad.any():
        i = _first(bad)
        raise _bad(source, "draft_cumprob", i, f"is {cols['draft_cumprob'][i]}, expected {want[i]} (the product of "
                                               f"draft_prob along the path)")
    for name in (c for c in PER_TREE if c in cols):
        v = cols[name]
        bad = v != v[starts[tree_of]]
        if bad.any():
            i = _first(bad)
            raise _bad(source, name, i, f"differs within one tree ({v[i]} against {v[starts[tree_of][i]]})")
    sizes = np.diff(starts)[tree_of]
    if (cols["tree_nodes"] != sizes).any():
        i = _first(cols["tree_nodes"] != sizes)
        raise _bad(source, "tree_nodes", i, f"is {cols['tree_nodes'][i]}, but the tree has {sizes[i]} rows")
    max_depth = np.maximum.reduceat(depth, starts[:-1])[tree_of]
    for name in ("specinfer_tokens", "traversal_tokens"):
        v = cols[name]
        bad = (v < 1 - 1e-9) | (v > max_depth + 1 + 1e-9)
        if bad.any():
            i = _first(bad)
            raise _bad(source, name, i, f"{v[i]} is outside [1, depth + 1] (1 to {max_depth[i] + 1} tokens per call)")
    _check_meaning(cols, starts, prow, source)
    return TreeTable(cols, starts, source=source, split=split)


#: Absolute tolerance of the identities between stored probabilities (R_0 = p; a child's probability at most its
#: parent's top probability): the harvest computes both sides from one float64 distribution.
IDENTITY_TOL = 1e-9
#: Tolerance (nats) of entropy >= min-entropy -log(top probability).
ENTROPY_TOL = 1e-6


def _check_first_residual(cols: dict[str, np.ndarray], source: str) -> None:
    """A first child's residual is the target's probability (R_0 = p): checked before the relaxation columns,
    so that a bad ``residual_prob`` is reported under its own name."""
    first = cols["sibling"] == 0
    bad = first & (np.abs(cols["residual_prob"] - cols["target_prob"]) > IDENTITY_TOL)
    if bad.any():
        i = _first(bad)
        raise _bad(source, "residual_prob", i, f"is {cols['residual_prob'][i]}, but this node is its parent's first "
                                               f"child (sibling 0), whose residual is target_prob "
                                               f"({cols['target_prob'][i]}; SpecInfer's R_0 = p)")


def _check_meaning(cols: dict[str, np.ndarray], starts: np.ndarray, prow: np.ndarray, source: str) -> None:
    """The invariants of :func:`trees_from_frame` that relate columns across rows (``prow``: each row's parent
    row, -1 for a child of the root)."""
    has_parent = prow >= 0
    parent = np.maximum(prow, 0)
    for child, node_top, root_top in (("draft_prob", "node_draft_top_prob", "root_draft_top_prob"),
                                      ("target_prob", "node_target_top_prob", "root_target_top_prob")):
        if root_top not in cols:
            top = np.where(has_parent, cols[node_top][parent], np.inf)
        else:
            top = np.where(has_parent, cols[node_top][parent], cols[root_top])
        bad = cols[child] > top + IDENTITY_TOL
        if bad.any():
            i = _first(bad)
            where = f"{node_top} of its parent (row {prow[i]})" if has_parent[i] else root_top
            raise _bad(source, child, i, f"{cols[child][i]} exceeds {where}, {top[i]}: a token's probability cannot "
                                         f"exceed the largest probability of the distribution it was drawn from")
    for entropy, top in (("node_draft_entropy", "node_draft_top_prob"), ("root_draft_entropy", "root_draft_top_prob"),
                         ("node_target_entropy", "node_target_top_prob"),
                         ("root_target_entropy", "root_target_top_prob")):
        if entropy not in cols:
            continue
        h = cols[entropy]
        with np.errstate(divide="ignore"):
            floor = -np.log(cols[top])
        bad = (h < -ENTROPY_TOL) | (h < floor - ENTROPY_TOL)
        if bad.any():
            i = _first(bad)
            raise _bad(source, entropy, i, f"{h[i]} nats is below 0 or below the min-entropy -log({top}) = {floor[i]}")
    if "relaxed_residual_prob" in cols:
        first = cols["sibling"] == 0
        w = np.asarray(RELAX_GRID)
        mix = (1.0 - w)[None, :] * cols["target_prob"][:, None] + w[None, :] * cols["draft_prob"][:, None]
        bad = first & (np.abs(cols["relaxed_residual_prob"] - mix) > 1e-7).any(1)
        if bad.any():
            i = _first(bad)
            k = int(np.flatnonzero(np.abs(cols["relaxed_residual_prob"][i] - mix[i]) > 1e-7)[0])
            raise _bad(source, "relaxed_residual_prob", i, f"is {cols['relaxed_residual_prob'][i, k]} at w = {w[k]}, but "
                                                           f"this node is a first child, whose relaxed residual is "
                                                           f"(1 - w) target_prob + w draft_prob = {mix[i, k]}")
    keys = np.stack([cols["seq_id"][starts[:-1]], cols["tree"][starts[:-1]]], axis=1)
    _, index, counts = np.unique(keys, axis=0, return_index=True, return_counts=True)
    if (counts > 1).any():
        twice = keys[index[_first(counts > 1)]]
        later = int(starts[np.flatnonzero((keys == twice).all(1))[1]])
        raise _bad(source, "tree", later, f"tree {twice[1]} of seq_id {twice[0]} appears twice (each step of a text "
                                          f"grows one tree)")


def _group_present(df: pd.DataFrame, names: tuple[str, ...], source: str, why: str) -> bool:
    """Whether the frame has the optional columns ``names``: all of them (True) or none (False). Raises: InputError
    naming the first present and the first missing column when it has some only (``why`` all of them)."""
    present = [c for c in names if c in df.columns]
    if present and len(present) != len(names):
        missing = next(c for c in names if c not in df.columns)
        raise InputError(f"{source}: has column '{present[0]}' but not '{missing}' ({why} all of {', '.join(names)})")
    return bool(present)


def _read_relax_columns(df: pd.DataFrame, cols: dict[str, np.ndarray], source: str) -> None:
    """Add the optional :data:`RELAX_COLUMNS` to ``cols`` when the frame has all of them (checked)."""
    if not _group_present(df, RELAX_COLUMN_NAMES, source, "relaxed verification needs"):
        return
    for c in RELAX_COLUMNS:
        if c.name == "relaxed_residual_prob":
            rows = []
            for i, x in enumerate(df[c.name]):
                try:
                    row = np.asarray(x, dtype=np.float64)
                except (TypeError, ValueError):
                    row = None
                if row is None or row.shape != (len(RELAX_GRID),):
                    raise _bad(source, c.name, i, f"expected {len(RELAX_GRID)} numbers (one per w of "
                                                  f"{RELAX_GRID[0]}..{RELAX_GRID[-1]})")
                rows.append(row)
            v = np.stack(rows) if rows else np.zeros((0, len(RELAX_GRID)))
            bad = ~np.isfinite(v).all(1) | (v < -PROB_TOL).any(1) | (v > 1 + PROB_TOL).any(1)
            if bad.any():
                raise _bad(source, c.name, _first(bad), "not probabilities in [0, 1]")
            cols[c.name] = np.ascontiguousarray(v)
            continue
        v = df[c.name].to_numpy()
        if not (np.issubdtype(v.dtype, np.floating) or np.issubdtype(v.dtype, np.integer)
                or np.issubdtype(v.dtype, np.bool_)):
            raise InputError(f"{source}: column '{c.name}': expected numbers, got {v.dtype}")
        f = np.ascontiguousarray(v, dtype=np.float64)
        if not np.isfinite(f).all():
            raise _bad(source, c.name, _first(~np.isfinite(f)), "not a finite number")
        if c.dtype == "int64" and not np.isin(f, (0.0, 1.0)).all():
            raise _bad(source, c.name, _first(~np.isin(f, (0.0, 1.0))), f"{f[_first(~np.isin(f, (0.0, 1.0)))]} is not "
                                                                         f"0 or 1")
        cols[c.name] = f.astype(np.int64) if c.dtype == "int64" else f
    gap = np.abs(cols["relaxed_residual_prob"][:, 0] - cols["residual_prob"]) > 1e-9
    if gap.any():
        i = _first(gap)
        raise _bad(source, "relaxed_residual_prob", i, f"its value at w = 0 ({cols['relaxed_residual_prob'][i, 0]}) "
                                                       f"is not residual_prob ({cols['residual_prob'][i]})")


def _read_suffix_columns(df: pd.DataFrame, cols: dict[str, np.ndarray], source: str) -> None:
    """Add the optional :data:`SUFFIX_TREE_COLUMNS` to ``cols`` when the frame has all of them (checked: finite,
    probabilities in [0, 1], a match length >= 0, the source 0 or 1)."""
    if not _group_present(df, SUFFIX_TREE_COLUMN_NAMES, source, "a suffix tree table has"):
        return
    for c in SUFFIX_TREE_COLUMNS:
        v = df[c.name].to_numpy()
        if not (np.issubdtype(v.dtype, np.floating) or np.issubdtype(v.dtype, np.integer)):
            raise InputError(f"{source}: column '{c.name}': expected numbers, got {v.dtype}")
        f = np.ascontiguousarray(v, dtype=np.float64)
        low, high = {"suffix_prob": (0.0, 1.0), "suffix_cumprob": (0.0, 1.0), "suffix_from_cache": (0.0, 1.0),
                     "suffix_match_len": (0.0, np.inf), "suffix_score": (0.0, np.inf)}[c.name]
        bad = ~np.isfinite(f) | (f < low - PROB_TOL) | (f > high + PROB_TOL)
        if c.dtype == "int64":
            bad |= f != np.round(f)
        if bad.any():
            i = _first(bad)
            whole = " a whole number" if c.dtype == "int64" else ""
            raise _bad(source, c.name, i, f"{f[i]} is not{whole} in [{low:g}, {high:g}]")
        cols[c.name] = f.astype(np.int64) if c.dtype == "int64" else f


def _check_siblings(cols: dict[str, np.ndarray], starts: np.ndarray, source: str) -> None:
    """Children of every node (and of the root) contiguous, in draw order, counted by ``children``."""
    parent, sibling, children = cols["parent"], cols["sibling"], cols["children"]
    for t in range(starts.size - 1):
        a, b = int(starts[t]), int(starts[t + 1])
        count = np.zeros(b - a + 1, dtype=np.int64)  # index 0: the root, i + 1: node i
        last = np.full(b - a + 1, -2, dtype=np.int64)
        for r in range(a, b):
            p = int(parent[r]) + 1
            if sibling[r] != count[p]:
                raise _bad(source, "sibling", r, f"is {sibling[r]}, expected {count[p]} (children are numbered "
                                                 f"0, 1, ... in draw order)")
            if count[p] and last[p] != r - a - 1:
                raise _bad(source, "parent", r, "this node's siblings are not contiguous rows")
            count[p] += 1
            last[p] = r - a
        got = children[a:b]
        if (got != count[1:]).any():
            i = a + _first(got != count[1:])
            raise _bad(source, "children", i, f"is {children[i]}, but {count[i - a + 1]} rows name it as parent")
        if cols["root_children"][a] != count[0]:
            raise _bad(source, "root_children", a, f"is {cols['root_children'][a]}, but {count[0]} rows have "
                                                   f"parent -1")


def load_trees(data_dir: str | os.PathLike, split: str) -> TreeTable:
    """Read and check ``DIR/{split}.trees.parquet`` (:func:`trees_from_frame`).

    Raises: InputError when the file is missing (the dataset holds no trees: only a tree harvest writes them),
    unreadable, or fails a check, when it or the split's records are not the files the dataset's metadata.json was
    written with (:func:`evolve.traces.binding.check_bound`; a table left beside records written again), or when a
    run pinned it (:func:`evolve.files.pins.pin`, the digest its dataset's SHA-256 holds) and its content changed
    since.
    """
    path = tree_path(data_dir, split)
    if not path.is_file():
        raise InputError(f"{path}: no tree table for split '{split}' (the dataset holds no draft trees: only a "
                         f"tree harvest writes them, docs/reference/trees.md)")
    try:
        raw, digest = read_bytes(path, "tree table")  # one read: the bytes parsed are the bytes a run pinned
        df = read_parquet_bytes(raw)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure is a damaged file to the user
        raise InputError(f"{path}: cannot read the tree table ({type(exc).__name__}: {exc})") from None
    table = trees_from_frame(df, source=str(path), split=split)
    meta = load_metadata(data_dir)
    check_bound(path, digest, meta, {f"statistics.{split}.trees.nodes": table.rows,
                                     f"statistics.{split}.trees.trees": table.trees}, "tree table")
    _check_records(table, Path(data_dir), split, meta)
    _check_other_splits(table, df, Path(data_dir), split)
    return table


def _check_records(table: TreeTable, data_dir: Path, split: str, meta: dict) -> None:
    """The split's records are the ones written with the tree table (:func:`evolve.traces.binding.check_bound`),
    and every tree belongs to a text of the split: its ``seq_id`` is one of the split's records' (the records of
    a tree harvest are each tree's first path, so every text with a tree has records)."""
    records = split_path(data_dir, split)
    if records is None:
        return
    if records.suffix == ".parquet":
        try:
            raw = records.read_bytes()
        except OSError:
            return  # the split's own loader reports an unreadable split
        check_bound(records, sha256_bytes(raw), meta, None, "split file")
        try:
            seq = read_parquet_bytes(raw, columns=["seq_id"])["seq_id"].to_numpy()
        except Exception:  # noqa: BLE001 - the split's own loader reports a damaged split
            return
    else:
        seq = load_split(data_dir, split)["seq_id"]  # checks the records against the metadata itself
    seq_ids = table.per_tree("seq_id")
    orphan = ~np.isin(seq_ids, seq)
    if orphan.any():
        t = _first(orphan)
        raise _bad(table.source, "seq_id", int(table.starts[t]), f"{seq_ids[t]} is no text of {records} (the tree "
                                                                  f"table of split '{split}' holds trees of other texts)")


def _check_other_splits(table: TreeTable, df: pd.DataFrame, data_dir: Path, split: str) -> None:
    """Different splits hold different texts: a split's tree table with the same rows as another split's (a copy)
    is refused."""
    import pyarrow.parquet as pq

    for other in ("train", "valid", "test"):
        path = tree_path(data_dir, other)
        if other == split or not path.is_file():
            continue
        try:
            if pq.ParquetFile(path).metadata.num_rows != len(df):
                continue
            theirs = pd.read_parquet(path, columns=["seq_id", "tree", "token", "draft_prob", "residual_prob"])
        except Exception:  # noqa: BLE001 - that split's own load reports a damaged file
            continue
        if all(np.array_equal(theirs[c].to_numpy(), table.columns[c]) for c in theirs.columns):
            raise InputError(f"{table.source}: the same draft trees as {path} (split '{other}'); the splits hold "
                             f"different texts, so their tree tables differ")


__all__ = ["TREE_FILE", "TREE_COLUMNS", "TREE_COLUMN_NAMES", "RELAX_GRID", "RELAX_COLUMNS", "RELAX_COLUMN_NAMES", "SUFFIX_TREE_COLUMNS",
           "SUFFIX_TREE_COLUMN_NAMES", "PER_TREE", "TreeColumn", "TreeTable", "tree_path",
           "trees_from_frame", "load_trees"]

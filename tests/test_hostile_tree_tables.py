"""Hostile tree tables (``{split}.trees.parquet``): tables that pass the structural checks but break what
SpecInfer's verification relies on, trees of no text of the split, a tree twice, and splits whose tables are
copies of each other; each refused in one line naming the file, the column, the row and the value, by the
loader and by the commands that score trees (exit 2, no traceback, no file touched).
"""
from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from evolve.errors import InputError
from evolve.traces.tree_tables import RELAX_COLUMN_NAMES, load_trees, tree_path, trees_from_frame
from hostile_helpers import check
from tree_helpers import record_files


def _frame(ws, split="test") -> pd.DataFrame:
    return pd.read_parquet(tree_path(ws.data, split))


def _save(ws, df, split="test") -> None:
    """Write a (hostile) tree table as part of the dataset: recorded in its metadata, so the checks of meaning are
    what refuses it (a table written on its own is refused before, by the binding of the dataset's files)."""
    df.to_parquet(tree_path(ws.data, split), index=False)
    record_files(ws.data)


def _row(df, mask) -> int:
    return int(np.flatnonzero(mask)[0])


def _child_row(df) -> int:
    """The first row whose parent is a node (not the root)."""
    return _row(df, df["parent"].to_numpy() >= 0)


def first_residual(df):
    i = _row(df, (df["sibling"] == 0).to_numpy() & (df["target_prob"] < 0.9).to_numpy())
    df.loc[i, "residual_prob"] = df.loc[i, "target_prob"] + 0.05
    return i, "residual_prob"


def first_residual_plain(df):
    for name in RELAX_COLUMN_NAMES:
        del df[name]
    return first_residual(df)


def first_residual_in_relaxed_too(df):
    """residual_prob and relaxed_residual_prob at w = 0 both changed: still reported under residual_prob."""
    i, col = first_residual(df)
    rel = [np.asarray(x, dtype=float).copy() for x in df["relaxed_residual_prob"]]
    rel[i][0] = df.loc[i, "residual_prob"]
    df["relaxed_residual_prob"] = rel
    return i, col


def relaxed_first_not_mixture(df):
    i = _row(df, (df["sibling"] == 0).to_numpy())
    rel = [np.asarray(x, dtype=float).copy() for x in df["relaxed_residual_prob"]]
    rel[i][10] = min(1.0, rel[i][10] + 0.1) if rel[i][10] < 0.9 else rel[i][10] - 0.1
    df["relaxed_residual_prob"] = rel
    return i, "relaxed_residual_prob"


def node_entropy_negative(df):
    df.loc[3, "node_draft_entropy"] = -0.5
    return 3, "node_draft_entropy"


def node_target_entropy_negative(df):
    df.loc[2, "node_target_entropy"] = -1e-3
    return 2, "node_target_entropy"


def root_entropy_negative(df):
    rows = (df["seq_id"] == df.loc[0, "seq_id"]) & (df["tree"] == df.loc[0, "tree"])
    df.loc[rows, "root_draft_entropy"] = -0.1
    return 0, "root_draft_entropy"


def entropy_below_min_entropy(df):
    df.loc[4, "node_draft_top_prob"] = 0.2
    df.loc[4, "node_draft_entropy"] = 0.5  # -log(0.2) = 1.61 > 0.5
    # keep the children's draft_prob below the new top probability
    kids = (df["parent"] == df.loc[4, "node"]).to_numpy() & (df["tree"] == df.loc[4, "tree"]).to_numpy() & \
        (df["seq_id"] == df.loc[4, "seq_id"]).to_numpy()
    if kids.any():
        df.loc[4, "node_draft_top_prob"] = float(df.loc[kids, "draft_prob"].max())
        df.loc[4, "node_draft_entropy"] = -np.log(df.loc[4, "node_draft_top_prob"]) - 0.01
    return 4, "node_draft_entropy"


def child_above_parent_top(df):
    i = _child_row(df)
    parent_row = i - df.loc[i, "node"] + df.loc[i, "parent"]
    df.loc[parent_row, "node_draft_top_prob"] = df.loc[i, "draft_prob"] / 2
    return i, "draft_prob"


def child_target_above_parent_top(df):
    i = _child_row(df)
    parent_row = i - df.loc[i, "node"] + df.loc[i, "parent"]
    df.loc[parent_row, "node_target_top_prob"] = df.loc[i, "target_prob"] / 2
    return i, "target_prob"


def root_child_above_root_top(df):
    rows = (df["seq_id"] == df.loc[0, "seq_id"]) & (df["tree"] == df.loc[0, "tree"])
    df.loc[rows, "root_draft_top_prob"] = df.loc[0, "draft_prob"] / 2
    return 0, "draft_prob"


def repeated_tree(df):
    """The first tree appended again at the end (handled by :func:`_apply`: it changes the row count)."""
    raise AssertionError("not called")


def orphan_seq_id(df):
    df["seq_id"] = df["seq_id"] + 1000
    return 0, "seq_id"


# (case, edit of the test split's frame returning (row, column), value text or None)
CASES = [first_residual, first_residual_plain, first_residual_in_relaxed_too, relaxed_first_not_mixture,
         node_entropy_negative, node_target_entropy_negative, root_entropy_negative, entropy_below_min_entropy,
         child_above_parent_top, child_target_above_parent_top, root_child_above_root_top, repeated_tree,
         orphan_seq_id]


def _apply(ws, edit):
    df = _frame(ws).reset_index(drop=True)
    if edit is repeated_tree:
        first = df[(df["seq_id"] == df.loc[0, "seq_id"]) & (df["tree"] == df.loc[0, "tree"])]
        df = pd.concat([df, first], ignore_index=True)
        row, col = len(df) - len(first), "tree"
    else:
        row, col = edit(df)
    _save(ws, df)
    return row, col


@pytest.mark.parametrize("edit", CASES, ids=[e.__name__ for e in CASES])
def test_meaningless_tree_table_is_refused_by_the_loader(vocab_ws, edit):
    row, col = _apply(vocab_ws, edit)
    with pytest.raises(InputError) as err:
        load_trees(vocab_ws.data, "test")
    message = str(err.value)
    assert "\n" not in message and "test.trees.parquet" in message, message
    assert f"column '{col}', row {row}:" in message, message


@pytest.mark.parametrize("edit", CASES, ids=[e.__name__ for e in CASES])
def test_meaningless_tree_table_is_refused_by_benchmark_trees(vocab_ws, edit):
    row, col = _apply(vocab_ws, edit)
    check(vocab_ws, "benchmark", ["trees", "--data", vocab_ws.data, "--bootstrap", 0, "--split", "test"], 2,
          ("test.trees.parquet", f"column '{col}', row {row}"))


@pytest.mark.parametrize("copy", ["bytes", "rewritten"])
@pytest.mark.parametrize("target", ["train", "valid"])
def test_a_split_whose_tree_table_is_a_copy_of_another_is_refused(vocab_ws, copy, target):
    if copy == "bytes":
        shutil.copy(tree_path(vocab_ws.data, "test"), tree_path(vocab_ws.data, target))
        record_files(vocab_ws.data)  # recorded as written with the dataset: the copy check is what refuses it
    else:
        _save(vocab_ws, _frame(vocab_ws, "test"), target)
    with pytest.raises(InputError, match=rf"{target}\.trees\.parquet: the same draft trees as .*test\.trees\.parquet"):
        load_trees(vocab_ws.data, target)
    check(vocab_ws, "benchmark", ["trees", "--data", vocab_ws.data, "--bootstrap", 0], 2,
          ("the same draft trees as",))


def test_trees_of_another_splits_texts_are_refused(vocab_ws):
    """seq_ids beyond the split's texts (valid has 12 texts, train 40): train's trees of texts 30..34 in valid."""
    df = _frame(vocab_ws, "train")
    df["seq_id"] = df["seq_id"] + 30
    _save(vocab_ws, df, "valid")
    with pytest.raises(InputError, match=r"valid\.trees\.parquet: column 'seq_id', row 0: 30 is no text of"):
        load_trees(vocab_ws.data, "valid")


def test_the_helpers_tables_pass(vocab_ws):
    for split in ("train", "valid", "test"):
        table = load_trees(vocab_ws.data, split)
        assert table.trees == 60 // 5 * 5
    trees_from_frame(_frame(vocab_ws).drop(columns=list(RELAX_COLUMN_NAMES)), "mem")

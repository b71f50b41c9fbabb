"""Tree shapes scored from tree-table rows (evolve/eval/tree_scoring.py) against the full-distribution computation.

Small random trees (vocabulary 6, Dirichlet p and q at every node, children drawn i.i.d. from q) are
written as tree-table rows; every kept subtree's expected tokens from the rows must equal SpecInfer's
exact expected tokens computed from the full distributions of that subtree
(:func:`evolve.engine.tree_verify.specinfer_expected_tokens`).
"""
from __future__ import annotations

import numpy as np
import pytest

from evolve.engine import tree_verify as tv
from evolve.errors import InputError
from evolve.eval.costs import Costs
from evolve.eval.tree_competitors import competitors, fixed_width_values, shape_expressions
from evolve.eval.tree_scoring import shape_data, shape_metrics, whole_tree_metrics
from evolve.traces.tree_tables import trees_from_frame
from tree_helpers import random_tree, tree_frame


@pytest.fixture(scope="module")
def forest():
    rng = np.random.default_rng(7)
    trees = [random_tree(rng) for _ in range(40)]
    return trees, shape_data(trees_from_frame(tree_frame(trees), "mem"))


def kept_subtree(tree, kept_nodes):
    """The subtree of ``tree`` on ``kept_nodes`` (sorted node indices), as (parents, tokens, p, q)."""
    P, T, p, q, _ = tree
    idx = {old: i for i, old in enumerate(kept_nodes)}
    P2 = np.array([-1 if P[o] < 0 else idx[P[o]] for o in kept_nodes], dtype=np.int64)
    rows = [0] + [o + 1 for o in kept_nodes]
    return P2, T[kept_nodes], p[rows], q[rows]


def kept_by_widths(tree, widths):
    """Nodes kept when node row r (0 root) keeps its first widths[r] children (no budget)."""
    P = tree[0]
    kept, todo = [], [0]
    while todo:
        r = todo.pop()
        kids = [i for i in range(len(P)) if P[i] == r - 1][: widths[r]]
        kept += kids
        todo += [c + 1 for c in kids]
    return sorted(kept)


def test_whole_tree_from_rows_equals_specinfer_from_distributions(forest):
    trees, data = forest
    full = shape_metrics(np.full(data.decisions.n, np.inf), data)
    assert full.tokens_per_call == pytest.approx(np.mean([tv.specinfer_expected_tokens(*t[:4]) for t in trees]),
                                                 abs=1e-12)
    assert whole_tree_metrics(data, "specinfer_tokens").tokens_per_call == pytest.approx(full.tokens_per_call)


def test_every_kept_subtree_is_exact_and_a_wrong_residual_is_caught(forest):
    trees, data = forest
    rng = np.random.default_rng(3)
    wrong_differs = False
    for trial in range(30):
        values = rng.integers(0, 4, data.decisions.n).astype(np.float64) - rng.random(data.decisions.n) * 0.9
        widths = np.maximum(np.ceil(values), 0).astype(int)
        want = []
        for t, tree in enumerate(trees):
            base = int(data.starts[t])
            kept = kept_by_widths(tree, widths[base:base + len(tree[1]) + 1])
            want.append(tv.specinfer_expected_tokens(*kept_subtree(tree, kept)) if kept else 1.0)
        got = shape_metrics(values, data)
        assert got.tokens_per_call == pytest.approx(np.mean(want), abs=1e-12)
        # the same kernel with the target's probability in place of the residual is not exact
        accept = data.accept.copy()
        rows = data.parent_row >= 0
        data.accept[rows] = np.minimum(1.0, data.table.columns["target_prob"] / data.table.columns["draft_prob"])
        wrong = shape_metrics(values, data)
        data.accept[:] = accept
        wrong_differs |= abs(wrong.tokens_per_call - np.mean(want)) > 1e-6
    assert wrong_differs


def test_budget_keeps_the_best_first_nodes(forest):
    trees, data = forest
    every = np.full(data.decisions.n, np.inf)
    one = shape_metrics(every, data, budget=1)
    assert one.mean_nodes == 1.0 and one.mean_passes == 1.0
    # budget 1: the root's first child only, accepted with min(1, p/q)
    first = [min(1.0, t[2][0][t[1][0]] / t[3][0][t[1][0]]) for t in trees]
    assert one.tokens_per_call == pytest.approx(1 + np.mean(first), abs=1e-12)
    sizes = [shape_metrics(every, data, budget=b).mean_nodes for b in range(1, 10)]
    assert sizes == sorted(sizes) and sizes[-1] == np.mean([len(t[1]) for t in trees])


def test_costs_of_a_chain_and_of_plain_decoding(forest):
    _, data = forest
    costs = Costs((0.1, 0.12, 0.15, 0.2), 0.03, 0.1)
    plain = shape_metrics(fixed_width_values(data, 1, 0), data, costs)
    assert plain.tokens_per_call == 1.0 and plain.seconds_per_call == pytest.approx(0.1) and plain.speedup == pytest.approx(1.0)
    one = shape_metrics(fixed_width_values(data, 1, 1), data, costs)
    assert one.seconds_per_call == pytest.approx(0.12 + 0.03) and one.mean_passes == 1.0
    two = shape_metrics(fixed_width_values(data, 2, 1), data, costs)
    # up to two children of the root: a verification over them and the last token, one drafter pass over the root
    kids = np.minimum(data.table.per_tree("root_children"), 2)
    assert two.seconds_per_call == pytest.approx(np.mean(np.where(kids == 2, 0.15, 0.12)) + 0.03)
    assert two.mean_nodes == pytest.approx(kids.mean()) and 1 < two.mean_nodes < 2


def test_competitors_are_tuned_on_the_given_split(forest):
    trees, data = forest
    costs = Costs((1.0, 1.0, 1.0, 1.0), 0.0, 1.0)  # free drafting, flat verification: the whole tree wins
    rows = competitors(data, costs)
    assert rows["eagle2"][1].tokens_per_call == pytest.approx(rows["eagle2_full"][1].tokens_per_call)
    assert rows["chain"][1].tokens_per_call <= rows["eagle2"][1].tokens_per_call + 1e-12
    expensive = competitors(data, Costs((1.0, 3.0), 1.0, 1.0))  # any draft loses: plain decoding
    assert expensive["best_chain"][0] == "depth=0" and expensive["best_chain"][1].speedup == pytest.approx(1.0)
    # chain: the first path, whole, verified token-wise: 1 + sum_j prod_{i<=j} min(1, p_i / q_i)
    want = []
    for P, T, p, q, _ in trees:
        tokens, reach, row = 1.0, 1.0, 0
        while True:
            kids = [i for i in range(len(T)) if P[i] == row - 1]
            if not kids:
                break
            c = kids[0]
            reach *= min(1.0, p[row][T[c]] / q[row][T[c]])
            tokens += reach
            row = c + 1
        want.append(tokens)
    assert rows["chain"] == ("first path", shape_metrics(fixed_width_values(data, 1, 99), data, costs))
    assert rows["chain"][1].tokens_per_call == pytest.approx(np.mean(want), abs=1e-12)


def test_shape_expressions_match_their_numpy_values(forest):
    from evolve.eval.evaluator import thresholds
    from evolve.gp.compiler import compile_expression

    _, data = forest
    for name, expr in shape_expressions(3, 3):
        if not name.startswith("fixed_width"):
            continue
        k, d = (int(part.split("=")[1]) for part in name.split(":")[1].split(","))
        got = thresholds(compile_expression(expr), data.decisions)
        assert np.array_equal(np.maximum(np.ceil(got), 0), fixed_width_values(data, k, d)), name


@pytest.mark.parametrize("column, value, message", [
    ("sibling", 5, "column 'sibling', row 1"),
    ("draft_cumprob", 0.999, "column 'draft_cumprob', row 0"),
    ("children", 7, "column 'children', row 0"),
    ("draft_prob", 0.0, "column 'draft_prob', row 0"),
    ("specinfer_tokens", 0.5, "column 'specinfer_tokens', row 0"),
])
def test_a_table_that_means_something_else_is_refused(forest, column, value, message):
    trees, _ = forest
    df = tree_frame(trees[:3])
    row = 1 if column == "sibling" else 0
    if column == "sibling":
        df.loc[df.index[df["parent"] == -1][1], column] = value
        row = int(df.index[df["parent"] == -1][1])
        message = f"column 'sibling', row {row}"
    elif column == "specinfer_tokens":
        df.loc[df["tree"] == 0, column] = value
    else:
        df.loc[row, column] = value
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        trees_from_frame(df, "t.parquet")


@pytest.mark.parametrize("w", [0.0, 0.05, 0.35, 1.0])
def test_relaxed_trees_are_specinfer_against_the_mixture_exactly(forest, w):
    """At a grid weight w everywhere, tokens per call from the rows equal SpecInfer's exact expected tokens
    against the mixture (1 - w) p + w q computed from the full distributions; damage w (1 - overlap) per
    token emitted at each reached context with drafts (a leaf's token is drawn from p), 0 at w = 0."""
    trees, data = forest
    every = np.full(data.decisions.n, np.inf)
    got = shape_metrics(every, data, relaxation=np.full(data.decisions.n, w))
    want = [tv.specinfer_expected_tokens(P, T, (1 - w) * p + w * q, q) for P, T, p, q, _ in trees]
    assert got.tokens_per_call == pytest.approx(np.mean(want), abs=1e-12)
    if w == 0.0:
        assert got.tv_per_token == 0.0 and got == shape_metrics(every, data)
    else:  # E[sum over emitted tokens of TV(mixture, p) at their context] / E[tokens]
        damage = []
        for P, T, p, q, _ in trees:
            outcomes = tv.specinfer_outcomes(P, T, (1 - w) * p + w * q, q)
            tvs = w * (1 - np.minimum(p, q).sum(1))
            drafts = np.zeros(len(T) + 1, dtype=bool)  # contexts (0 the root, i + 1 node i) with a drafted child
            drafts[P + 1] = True
            damage.append(sum(prob * sum(tvs[r] for r in [0, *(i + 1 for i in path)] if drafts[r])
                              for path, prob, _ in outcomes))
        assert got.tv_per_token == pytest.approx(np.sum(damage) / np.sum(np.array(want)), rel=1e-12)


def test_relaxation_weights_round_down_to_the_grid(forest):
    _, data = forest
    every = np.full(data.decisions.n, np.inf)
    a = shape_metrics(every, data, relaxation=np.full(data.decisions.n, 0.349))
    b = shape_metrics(every, data, relaxation=np.full(data.decisions.n, 0.30))
    assert a == b and a.tv_per_token > 0


def test_the_harvests_columns_equal_this_tests_own_implementation():
    """evolve.engine.tree_draft.node_columns (what the harvest writes) against tree_helpers.tree_frame, written
    separately from the definitions, on random trees: every column, the relaxation grid included."""
    from evolve.engine.tree_draft import node_columns

    rng = np.random.default_rng(11)
    for _ in range(10):
        tree = random_tree(rng)
        P, T, p, q, _ = tree
        want = tree_frame([tree])
        got = node_columns(P, T, p, q, -(q * np.log(q)).sum(1), -(p * np.log(p)).sum(1))
        assert set(want.columns) - {"seq_id", "tree", "position"} == set(got)
        for name, values in got.items():
            expected = np.stack(want[name].to_numpy()) if name == "relaxed_residual_prob" else want[name].to_numpy()
            np.testing.assert_allclose(values, expected, rtol=1e-12, atol=1e-15, err_msg=name)


def test_a_changed_tree_table_is_a_changed_split(vocab_dataset, tmp_path):
    """A run records each split's digest with its tree table folded in, so a resume refuses a changed table."""
    import shutil

    from evolve.search.checkpoint import file_sha256, split_sha256
    from tree_helpers import write_tree_tables

    d = tmp_path / "d"
    shutil.copytree(vocab_dataset, d)
    train = d / "train.parquet"
    with_trees = split_sha256(train, "train")
    assert with_trees != file_sha256(train)
    write_tree_tables(d, seed=6)
    assert split_sha256(train, "train") not in (with_trees, None)
    (d / "train.trees.parquet").unlink()
    assert split_sha256(train, "train") == file_sha256(train)  # datasets without trees keep their digests


def _best_first(tree, values, budget):
    """A plain-Python best-first expansion (by draft_cumprob, ties by row) of the tree under shape values
    (decision rows: 0 the root, i + 1 node i) and a node budget: (kept nodes, nodes expanded per depth)."""
    P, T, p, q, _ = tree
    n = len(T)
    kids = {r: [i for i in range(n) if P[i] == r - 1] for r in range(n + 1)}
    cum, dep = np.ones(n + 1), np.zeros(n + 1, dtype=int)
    for i in range(n):
        cum[i + 1] = cum[P[i] + 1] * q[P[i] + 1][T[i]]
        dep[i + 1] = dep[P[i] + 1] + 1
    frontier, kept, per_depth = [0], [], {}
    while frontier and len(kept) < budget:
        best = min(frontier, key=lambda r: (-cum[r], r))
        frontier.remove(best)
        k = min(int(np.ceil(values[best])) if values[best] > 0 else 0, len(kids[best]), budget - len(kept))
        if k > 0:
            per_depth[dep[best]] = per_depth.get(dep[best], 0) + 1
            kept += kids[best][:k]
            frontier += [c + 1 for c in kids[best][:k]]
    return sorted(kept), per_depth


def test_creation_order_and_binding_budgets_against_a_brute_force():
    """Trees numbered in creation order (as the harvest numbers them) under random shapes and budgets: tokens
    per call equal SpecInfer's on the kept subtree from the full distributions, and seconds the documented
    cost (a forward over kept + 1 tokens, one drafter pass per depth with an expansion)."""
    rng = np.random.default_rng(5)
    trees = [random_tree(rng, 10, 3, bfs=False) for _ in range(40)]
    data = shape_data(trees_from_frame(tree_frame(trees), "mem"))
    depth = data.depth[data.parent_row >= 0]
    assert (np.diff(depth) < 0).sum() > len(trees)  # depth falls inside trees: not breadth-first
    costs = Costs((0.1, 0.12, 0.15, 0.2, 0.26), 0.03, 0.1)
    for _ in range(30):
        values = rng.integers(0, 4, data.decisions.n).astype(float) - rng.random(data.decisions.n) * 0.9
        budget = int(rng.integers(1, 11))
        tokens, seconds = [], []
        for t, tree in enumerate(trees):
            a = int(data.starts[t])
            kept, per_depth = _best_first(tree, values[a:a + len(tree[1]) + 1], budget)
            tokens.append(tv.specinfer_expected_tokens(*kept_subtree(tree, kept)) if kept else 1.0)
            seconds.append(costs.verify_seconds(len(kept)) + sum(
                costs.draft_token_s * costs.forward_seconds(m) / costs.forward_seconds(1) for m in per_depth.values()))
        got = shape_metrics(values, data, costs, budget=budget)
        assert got.tokens_per_call == pytest.approx(np.mean(tokens), abs=1e-12)
        assert got.seconds_per_call == pytest.approx(np.mean(seconds), abs=1e-12)


def test_relaxation_columns_that_mean_something_else_are_refused(forest):
    trees, _ = forest
    cases = [("relaxed_residual_prob", [0.5] * 20, "expected 21 numbers"),
             ("relaxed_residual_prob", None, "its value at w = 0"),
             ("node_top_token_match", 2, "is not 0 or 1"),
             ("position", -1, "expected >= 0")]
    for column, value, message in cases:
        df = tree_frame(trees[:3])
        if column == "relaxed_residual_prob":
            row = list(df.at[2, column])
            df.at[2, column] = value if value is not None else [row[0] + 0.01] + row[1:]
        else:
            df.loc[df["tree"] == 0, column] = value
        with pytest.raises(InputError, match=f"column '{column}', row .*{message}"):
            trees_from_frame(df, "t.parquet")
    df = tree_frame(trees[:3]).drop(columns=["node_overlap"])
    with pytest.raises(InputError, match="but not 'node_overlap'"):
        trees_from_frame(df, "t.parquet")


def test_the_shape_oracle_is_the_best_subtree_of_every_tree(forest):
    """On single trees the bound equals the best of every kept-children choice scored by shape_metrics (an
    independent path); on the forest it is at least every named shape and random shape values."""
    import itertools

    from evolve.eval.tree_scoring import shape_oracle
    trees, data = forest
    costs = Costs((1.0, 1.1, 1.2, 1.3, 1.5, 1.7, 1.9, 2.1, 2.3, 2.5), 0.2, 1.0)
    for t in range(6):
        one = shape_data(trees_from_frame(tree_frame([trees[t]]), "mem"))
        rows = range(one.decisions.n)
        best = 0.0
        for widths in itertools.product(*[range(int(one.n_children[r]) + 1) for r in rows]):
            best = max(best, shape_metrics(np.array(widths, dtype=float), one, costs).tokens_per_second)
        assert shape_oracle(one, costs).tokens_per_second == pytest.approx(best, rel=1e-12)
    bound = shape_oracle(data, costs).tokens_per_second
    found = competitors(data, costs)
    assert found["shape_oracle"][1].tokens_per_second == bound
    assert all(m.tokens_per_second <= bound * (1 + 1e-12) for _, m in found.values())
    rng = np.random.default_rng(2)
    for _ in range(20):
        v = rng.integers(0, 4, data.decisions.n).astype(float)
        assert shape_metrics(v, data, costs).tokens_per_second <= bound * (1 + 1e-12)


def test_a_tree_shape_run_refuses_a_draft_length_it_would_never_read():
    from evolve.search.config import resolve

    with pytest.raises(InputError, match="tree-shape run does not read the draft length \\(value 7\\)") as err:
        resolve({"evolve": "tree-shape", "gamma": 7})
    assert err.value.param == "gamma"
    assert resolve({"evolve": "tree-shape"}).gamma == 5  # the default is recorded, never read

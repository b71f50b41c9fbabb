"""Level features of tree shapes (``level_cumprob``, ``level_rank``; evolve/eval/tree_scoring.py) against a brute force.

A shape reading them is evaluated level by level: the nodes it keeps at one depth of one tree form the level,
``level_cumprob`` is their largest draft_cumprob and ``level_rank`` a node's rank among them by draft_cumprob
(ties in draw order). The reference below walks every tree level by level with plain loops.
"""
from __future__ import annotations

import numpy as np
import pytest

from evolve.errors import InputError
from evolve.eval.costs import Costs
from evolve.eval.evaluator import lowered_program
from evolve.kinds.tree_shape.eval_population import TreeShapePopulationEvaluator
from evolve.eval.tree_competitors import (
    competitors, eagle2_topk_expression, eagle2_topk_values, fixed_width_values, shape_expressions,
)
from evolve.eval.tree_levels import program_values, reads_levels
from evolve.eval.tree_scoring import shape_data, shape_metrics
from evolve.gp.compiler import compile_expression
from evolve.traces.tree_tables import trees_from_frame
from tree_helpers import random_tree, tree_frame

#: Keeps 3 - rank children at a level whose best draft_cumprob beats 0.3 per depth, none elsewhere.
RANKED = "if_gt(level_cumprob, mul(0.3, draft_index), sub(3.0, level_rank), 0.0)"


def ranked(best: float, rank: int, depth: int) -> float:
    return 3.0 - rank if best > 0.3 * depth else 0.0


@pytest.fixture(scope="module", params=[True, False], ids=["breadth-first", "creation-order"])
def forest(request):
    """40 random trees (vocabulary 6, so siblings often share a token: ties in draft_cumprob), numbered
    breadth-first or in the harvest's creation order."""
    rng = np.random.default_rng(11)
    trees = [random_tree(rng, bfs=request.param) for _ in range(40)]
    data = shape_data(trees_from_frame(tree_frame(trees), "mem"))
    assert any(np.unique(data.priority[data.starts[t]:data.starts[t + 1]]).size
               < data.starts[t + 1] - data.starts[t] for t in range(data.trees))  # ties occur
    return data


def reference_values(data, rule, sign: float = -1.0) -> np.ndarray:
    """Values of ``rule(best, rank, depth)`` walked level by level with loops (0 where never kept); ranks by
    draft_cumprob descending (``sign`` -1) or ascending (+1), ties in row order."""
    values = np.zeros(data.decisions.n)
    for t in range(data.trees):
        level = [int(data.starts[t])]
        while level:
            best = max(data.priority[r] for r in level)
            order = sorted(level, key=lambda r: (sign * data.priority[r], r))
            nxt = []
            for r in level:
                v = rule(best, order.index(r), int(data.depth[r]))
                values[r] = v
                k = min(int(np.ceil(min(v, 1e9))) if v > 0 else 0, int(data.n_children[r]))
                nxt += range(int(data.first_child[r]), int(data.first_child[r]) + k)
            level = sorted(nxt)
    return values


def test_level_features_equal_a_level_by_level_walk(forest):
    data = forest
    got = program_values(compile_expression(RANKED), data)
    want = reference_values(data, ranked)
    assert np.array_equal(got, want)
    assert (want > 2).any() and ((want > 0) & (want < 3)).any() and (want == 0).any()  # every branch is taken
    # the population scorer gives the same metrics as the values above
    scorer = TreeShapePopulationEvaluator(None, shapes=data, costs=Costs((0.1, 0.11, 0.12, 0.13), 0.02, 0.1))
    assert scorer.evaluate([RANKED])[0] == shape_metrics(want, data, scorer.costs)
    # huge, negative and NaN values: the population scorer and the level walk keep the same children
    for expr in ("mul(sub(1.0, level_rank), 1e300)", "sub(level_cumprob, mul(0.5, add(level_rank, draft_index)))",
                 "div(sub(level_rank, level_rank), sub(level_rank, level_rank))", "exp(mul(60.0, level_cumprob))"):
        want = shape_metrics(program_values(compile_expression(expr), data), data, scorer.costs)
        assert scorer.evaluate([expr])[0] == want, expr


def test_a_wrong_rank_order_is_caught(forest):
    """Ranks counted from the least probable node give other values: the test above can fail."""
    got = program_values(compile_expression(RANKED), forest)
    assert not np.array_equal(got, reference_values(forest, ranked, sign=1.0))


def test_a_shape_without_level_features_is_evaluated_once(forest):
    data = forest
    for expr in ("if_gt(1.5, draft_index, 2.0, 0.0)", "add(draft_prob, draft_entropy)"):
        program = compile_expression(expr)
        lo, _ = lowered_program(program, data.decisions)
        assert not reads_levels(lo, data.decisions)
    assert np.array_equal(program_values(compile_expression("if_gt(1.5, draft_index, 2.0, 0.0)"), data),
                          fixed_width_values(data, 2, 2))
    for expr in ("level_rank", "level_cumprob", RANKED):
        lo, _ = lowered_program(compile_expression(expr), data.decisions)
        assert reads_levels(lo, data.decisions), expr


def test_eagle2_topk_expands_the_best_nodes_of_each_level(forest):
    data = forest
    widest = int(data.n_children.max())
    for top, depth in ((1, 3), (2, 2), (3, 4)):
        values = eagle2_topk_values(data, top, depth)
        expr = program_values(compile_expression(eagle2_topk_expression(top, depth, widest)), data)
        assert shape_metrics(values, data) == shape_metrics(expr, data)
        want = reference_values(data, lambda best, rank, d: np.inf if d < depth and rank < top else 0.0)
        assert np.array_equal(np.isinf(values), np.isinf(want))
    # every node of every level expanded: the fixed tree keeping every drawn child to that depth
    assert shape_metrics(eagle2_topk_values(data, 10 ** 6, 3), data) == \
        shape_metrics(fixed_width_values(data, widest, 3), data)
    # top 1: one node expanded per level, so at most one drafter pass per depth over one node
    one = shape_metrics(eagle2_topk_values(data, 1, 3), data)
    assert one.mean_passes <= 3 and one.mean_nodes <= 3 * widest
    assert "eagle2_topk" in competitors(data)
    assert any(name.startswith("eagle2_topk") for name, _ in shape_expressions(widest, 3))
    assert any(name.startswith("level_gate") for name, _ in shape_expressions(widest, 3))


def test_a_binding_node_budget_is_refused_for_level_features(forest):
    data = forest
    scorer = TreeShapePopulationEvaluator(None, shapes=data, budget=2)
    with pytest.raises(InputError, match="without a node budget"):
        scorer.evaluate([RANKED])
    assert scorer.evaluate(["if_gt(1.5, draft_index, 2.0, 0.0)"])[0].mean_nodes <= 2
    # a budget as large as the largest tree never binds: accepted, the same metrics as without one
    whole = TreeShapePopulationEvaluator(None, shapes=data, budget=data.max_nodes).evaluate([RANKED])[0]
    assert whole == TreeShapePopulationEvaluator(None, shapes=data).evaluate([RANKED])[0]


def test_an_exported_shape_applied_level_by_level_gives_the_scored_counts(forest):
    from evolve.export.exporter import TARGETS, layout
    from evolve.eval.tree_levels import shape_values
    from evolve.gp.primitives import FEATURES
    from heuristics.contract import Rule

    data = forest
    rule = Rule("ranked", expression=RANKED, kind="tree-shape")
    module: dict = {}
    exec(compile(TARGETS["numpy"](rule.name, rule.nodes, layout(rule), "test"), "<exported>", "exec"), module)
    assert {"level_cumprob", "level_rank"} <= set(module["COLUMNS"])
    rows = {f: data.decisions.feature_rows[FEATURES.index(f)] for f in module["COLUMNS"]}
    counts = shape_values(data, lambda X, _: module["tree_children"](**{f: X[r] for f, r in rows.items()}), True)
    v = program_values(rule.program, data)
    assert np.array_equal(counts, np.where(v > 0, np.ceil(v), 0.0))


@pytest.mark.parametrize("features, skipped", [("auto", False), (
    "draft_prob,position,draft_entropy,draft_index,draft_top_prob,draft_cumprob", True)])
def test_a_search_without_level_features_skips_the_level_seeds(vocab_dataset, tmp_path, features, skipped):
    import json

    from click.testing import CliRunner

    from evolve.cli.evolve import cli as evolve_cli

    res = CliRunner().invoke(evolve_cli, ["run", "--data", str(vocab_dataset), "--out", str(tmp_path),
                                          "--evolve", "tree-shape", "--objective", "tokens_per_second",
                                          "--population", "30", "--generations", "2", "--features", features,
                                          "--no-progress"])
    assert res.exit_code == 0, res.output
    run = json.loads((tmp_path.glob("run-*").__next__() / "run.json").read_text())
    assert ("level_cumprob" in run["features"]) is not skipped
    names = [s["name"] for s in run["skipped_rules"] if "not among the run's features" in s["reason"]]
    assert any(n.startswith("level_gate") for n in names) is skipped
    assert any(n.startswith("eagle2_topk") for n in names) is skipped
    if skipped:
        assert not {"level_cumprob", "level_rank"} & set(compile_expression(run["champion"]["expression"]).features)

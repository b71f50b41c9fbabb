"""Draft trees (evolve/sim/tree_sim.py, evolve/sim/tree_kernels.py): masks, adaptive width, greedy and multi-draft sampling verification."""
from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from scipy import stats

from evolve.errors import InputError
from evolve.sim.chain import S_CALLS, S_EMITTED
from evolve.sim import tree_kernels, tree_sim as trees
from evolve.verification import traversal
from evolve.sim.decoding import autoregressive, simulate_chain
from evolve.sim.models import Context, SyntheticModel, distributions_at, random_context
from evolve.sim.tree_kernels import T_CALLS, T_EMITTED, adaptive_width
from evolve.sim.tree_sim import (
    TreeConfig, draft_tree, medusa_head, simulate_tree, tree_at_context, tree_attention_mask, tree_shape, tree_tokens,
)
from heuristics.registry import get_rule

from helpers import chi_square_pvalue, rebind

V = 48
DRAWS = 100_000


@pytest.fixture(scope="module")
def context(model) -> Context:
    return random_context(model, key=1, position=7)


def _next_context(ctx: Context, token: int, d: float) -> Context:
    return Context(np.append(ctx.window[1:], token).astype(np.int64), ctx.position + 1, d)


# --- structure ----------------------------------------------------------------------------------

def test_attention_mask_of_a_chain():
    mask = tree_attention_mask([-1, 0, 1], prefix_len=2)
    assert mask.shape == (3, 5) and mask.dtype == np.bool_
    expected = np.array([[1, 1, 1, 0, 0],
                         [1, 1, 1, 1, 0],
                         [1, 1, 1, 1, 1]], dtype=bool)
    assert np.array_equal(mask, expected)


def test_attention_mask_of_a_branching_tree():
    #        prefix
    #       /      \
    #      0        1
    #     / \       |
    #    2   3      4
    #    |
    #    5
    mask = tree_attention_mask(np.array([-1, -1, 0, 0, 1, 2]), prefix_len=3)
    ancestors_or_self = {0: {0}, 1: {1}, 2: {0, 2}, 3: {0, 3}, 4: {1, 4}, 5: {0, 2, 5}}
    expected = np.zeros((6, 9), dtype=bool)
    expected[:, :3] = True
    for i, anc in ancestors_or_self.items():
        for a in anc:
            expected[i, 3 + a] = True
    assert np.array_equal(mask, expected)
    assert np.array_equal(tree_attention_mask([], 4), np.zeros((0, 4), dtype=bool))
    assert tree_attention_mask([-1, -1], 0).tolist() == [[True, False], [False, True]]


def test_attention_mask_refuses_bad_parents():
    with pytest.raises(ValueError, match="node 1"):
        tree_attention_mask([-1, 1], 2)
    with pytest.raises(ValueError, match="node 2"):
        tree_attention_mask([-1, 0, 5], 2)
    with pytest.raises(ValueError, match="prefix_len"):
        tree_attention_mask([-1], -1)


def test_tree_shape_follows_the_width_schedule():
    assert tree_shape((3, 1), 8).tolist() == [-1, -1, -1, 0, 1, 2, 3, 4]
    assert tree_shape((2,), 6).tolist() == [-1, -1, 0, 0, 1, 1]
    assert tree_shape((1,), 4).tolist() == [-1, 0, 1, 2]
    assert tree_shape((2,), 10, max_depth=2).tolist() == [-1, -1, 0, 0, 1, 1]


def test_adaptive_width_bands():
    # adaptive width by draft confidence: >= 0.9 narrow, 0.6-0.9 normal, 0.3-0.6 wider, < 0.3 minimal
    assert [adaptive_width(c, 3) for c in (0.95, 0.9, 0.75, 0.6, 0.45, 0.3, 0.2)] == [1, 1, 2, 2, 3, 3, 1]
    assert [adaptive_width(c, 4) for c in (0.95, 0.7, 0.5, 0.1)] == [1, 2, 4, 1]
    assert [adaptive_width(c, 1) for c in (0.95, 0.7, 0.5, 0.1)] == [1, 1, 1, 1]


def test_drafted_tree_matches_the_shape_and_the_mask(model, context):
    parents, tokens, levels = draft_tree(model, TreeConfig("tree", 8, (3, 1)), context, seed=4)
    assert parents.tolist() == tree_shape((3, 1), 8).tolist()
    assert levels.tolist() == [1, 1, 1, 2, 2, 2, 3, 3]
    assert tokens.min() >= 0 and tokens.max() < V
    mask = tree_attention_mask(parents, 5)
    assert mask.sum(axis=1).tolist() == [5 + lv for lv in levels]  # prefix + ancestors + self
    # adaptive trees: widths follow the draft's confidence at each node
    parents, tokens, levels = draft_tree(model, TreeConfig("adaptive", 12, max_width=3), context, seed=4)
    q = distributions_at(model, context)["q"]
    assert (parents == -1).sum() == adaptive_width(q.max(), 3)


def test_medusa_heads_do_not_condition_on_earlier_drafts(model, context):
    dist = distributions_at(model, context)
    assert np.array_equal(medusa_head(model, context, 0), dist["q"])
    after = distributions_at(model, _next_context(context, 3, dist["d"]), depth=1)["q"]
    assert not np.array_equal(medusa_head(model, context, 1), after)
    # greedy Medusa tree: every node of a level holds the same token (top of that level's head)
    parents, tokens, levels = draft_tree(model, TreeConfig("medusa", 6, (2, 1), verification="greedy"), context)
    assert levels.tolist() == [1, 1, 2, 2, 3, 3]
    for lv in (2, 3):
        assert len(set(tokens[levels == lv].tolist())) == 1
        assert tokens[levels == lv][0] == int(np.argmax(medusa_head(model, context, lv - 1)))
    # while the chain draft's second-level proposals depend on their parent
    _, tokens_c, levels_c = draft_tree(model, TreeConfig("tree", 6, (2, 1), verification="greedy"), context)
    q_first = [distributions_at(model, _next_context(context, int(x), dist["d"]), depth=1)["q"]
               for x in tokens_c[levels_c == 1]]
    assert tokens_c[levels_c == 2].tolist() == [int(np.argmax(qq)) for qq in q_first]


# --- exactness ----------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [TreeConfig("tree", 6, (3, 1)), TreeConfig("adaptive", 6, max_width=3),
                                    TreeConfig("medusa", 6, (2, 1)),
                                    TreeConfig("tree", 6, (3, 1), verification="traversal"),
                                    TreeConfig("tree", 7, (2, 2), verification="traversal"),
                                    TreeConfig("medusa", 6, (2, 1), verification="traversal")],
                         ids=lambda c: f"{c.label} {c.verification}")
def test_sampling_verification_of_trees_emits_exactly_p(model, context, config):
    dist = distributions_at(model, context)
    p = dist["p"]
    tokens = tree_at_context(model, config, context, DRAWS, n_tokens=2, seed=9)
    pv1 = chi_square_pvalue(np.bincount(tokens[:, 0], minlength=V), p)
    p2 = sum(p[x] * distributions_at(model, _next_context(context, x, dist["d"]))["p"] for x in range(V))
    pv2 = chi_square_pvalue(np.bincount(tokens[:, 1], minlength=V), p2)
    print(f"{config.label} sampling verification: chi-square p-values first token {pv1:.3f}, second {pv2:.3f}")
    assert pv1 > 0.01 and pv2 > 0.01


@njit
def _keep_residual(weight, resid, qrow):
    """Deliberately wrong stand-in for ``evolve.verification.tree.residual_update``: R stays p after a rejected
    child."""
    return 0.0


def test_tree_verification_without_residual_update_is_detected(model, context, monkeypatch):
    p = distributions_at(model, context)["p"]
    call = rebind(tree_kernels.tree_call, residual_update=_keep_residual)
    monkeypatch.setattr(trees, "tree_batch", rebind(tree_kernels.tree_batch,
                                                    tree_run=rebind(tree_kernels.tree_run, tree_call=call)))
    tokens = tree_at_context(model, TreeConfig("tree", 6, (3, 1)), context, DRAWS, seed=9)
    pv = chi_square_pvalue(np.bincount(tokens[:, 0], minlength=V), p)
    print(f"tree without residual update: chi-square p-value {pv:.3g}")
    assert pv < 0.01


@njit
def _keep_target(w, prow, qrow, resid):
    """Deliberately wrong stand-in for ``evolve.verification.traversal.traversal_delete``: the parent keeps P, its
    weight drops."""
    return 1.0 - w


def test_traversal_verification_with_a_wrong_update_is_detected(model, context, monkeypatch):
    p = distributions_at(model, context)["p"]
    pick = rebind(tree_kernels._traversal_pick,
                  traversal_reject=rebind(traversal.traversal_reject, traversal_delete=_keep_target))
    call = rebind(tree_kernels.tree_call, _traversal_pick=pick)
    monkeypatch.setattr(trees, "tree_batch", rebind(tree_kernels.tree_batch,
                                                    tree_run=rebind(tree_kernels.tree_run, tree_call=call)))
    tokens = tree_at_context(model, TreeConfig("tree", 6, (3, 1), verification="traversal"), context, DRAWS, seed=9)
    pv = chi_square_pvalue(np.bincount(tokens[:, 0], minlength=V), p)
    print(f"traversal with a wrong update: chi-square p-value {pv:.3g}")
    assert pv < 0.01


def test_traversal_accepts_at_least_as_much_as_specinfer_in_expectation():
    """Same model, same tree configuration: traversal verification's tokens per call are not below SpecInfer's
    beyond the noise of the run (the paper's comparison, in expectation over the drafted trees)."""
    m = SyntheticModel(vocab_size=64, seed=4)
    for config in (TreeConfig("tree", 6, (2, 1)), TreeConfig("chain", 4)):
        rows = {}
        for verification in ("sample", "traversal"):
            res = simulate_tree(m, TreeConfig(config.draft, config.budget, config.widths, verification=verification),
                                200, 40)
            per_call = res.per_sequence[:, T_EMITTED] / res.per_sequence[:, T_CALLS]
            rows[verification] = (per_call.mean(), per_call.std(ddof=1) / np.sqrt(per_call.size))
        (a, sa), (b, sb) = rows["sample"], rows["traversal"]
        print(f"{config.label}: tokens per call SpecInfer {a:.4f} +- {sa:.4f}, traversal {b:.4f} +- {sb:.4f}")
        assert b > a - 3 * np.hypot(sa, sb)


@pytest.mark.parametrize("config", [TreeConfig("chain", 5, verification="greedy"),
                                    TreeConfig("tree", 8, (3, 1), verification="greedy"),
                                    TreeConfig("adaptive", 8, max_width=3, verification="greedy"),
                                    TreeConfig("medusa", 6, (2, 1), verification="greedy")], ids=lambda c: c.label)
def test_greedy_verification_equals_greedy_decoding(config):
    m = SyntheticModel(vocab_size=200, seed=3)
    reference = autoregressive(m, 80, 3, greedy=True)
    for s in range(3):
        tokens, st = tree_tokens(m, config, 80, sample=s)
        assert np.array_equal(tokens, reference[s])
        assert st[T_CALLS] < 80  # fewer target calls than tokens


# --- block level --------------------------------------------------------------------------------

def test_chain_through_the_tree_code_matches_chain_decoding():
    """Width-1 trees with sampling verification are standard chain speculative decoding."""
    m = SyntheticModel(vocab_size=100, seed=8)
    tree = simulate_tree(m, TreeConfig("chain", 4), 1000, 24)
    chain = simulate_chain(m, get_rule("standard_rejection"), [1000], 24, gamma=4)[0]
    # same prompts, independent decoding: compare per-sequence tokens per call (sequences are independent,
    # blocks inside one are not: the latent difficulty drifts slowly)
    a = tree.per_sequence[:, T_EMITTED] / tree.per_sequence[:, T_CALLS]
    b = chain.per_sequence[:, S_EMITTED] / chain.per_sequence[:, S_CALLS]
    t = stats.ttest_rel(a, b)
    print(f"chain gamma 4: tree code {tree.tokens_per_call:.4f}, chain loop {chain.tokens_per_call:.4f} "
          f"(paired t-test p = {t.pvalue:.3f})")
    assert t.pvalue > 0.001
    assert abs(tree.tokens_per_call / chain.tokens_per_call - 1) < 0.03
    assert tree.nodes_per_call == 4.0 and tree.depth == 4.0 and tree.draft_steps_per_call == 4.0


def test_tree_budgets_and_costs():
    m = SyntheticModel(vocab_size=100, seed=8)
    fixed = simulate_tree(m, TreeConfig("tree", 8, (3, 1)), 300, 4)
    assert fixed.nodes_per_call == 8.0 and fixed.depth == 3.0 and fixed.draft_steps_per_call == 3.0
    medusa = simulate_tree(m, TreeConfig("medusa", 8, (3, 1)), 300, 4)
    assert medusa.nodes_per_call == 8.0 and medusa.draft_steps_per_call == 1.0
    adaptive = simulate_tree(m, TreeConfig("adaptive", 8, max_width=3), 300, 4)
    assert adaptive.nodes_per_call == 8.0 and 1.0 <= adaptive.depth <= 8.0
    capped = simulate_tree(m, TreeConfig("tree", 16, (2,), max_depth=2), 300, 4)
    assert capped.nodes_per_call == 6.0 and capped.depth == 2.0
    for r in (fixed, medusa, adaptive):
        assert 1.0 < r.tokens_per_call <= r.depth + 1
        assert r.speedup == pytest.approx(r.stats[5] / (r.calls + 0.05 * r.stats[4]))
    again = simulate_tree(m, TreeConfig("tree", 8, (3, 1)), 300, 4)
    assert np.array_equal(again.stats, fixed.stats)


def test_bad_tree_configs_are_refused():
    with pytest.raises(InputError, match="draft"):
        TreeConfig("forest")
    with pytest.raises(InputError, match="^budget: a node budget"):
        TreeConfig("tree", 0)
    with pytest.raises(InputError, match="^widths: "):
        TreeConfig("tree", 4, (0,))
    with pytest.raises(InputError, match="verification"):
        TreeConfig("tree", 4, verification="beam")

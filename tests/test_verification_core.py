"""One copy of each verification algorithm: every caller agrees with the core to the last bit.

The token-wise block expectation (:mod:`evolve.verification.tokenwise_block`) against the evaluator's
reference path and fast-path kernel, the simulator's chain, the verification-length prefix tables, live
decoding's damage and the oracle of ``benchmark.py pareto``; traversal verification
(:mod:`evolve.verification.traversal`) in the engine (:mod:`evolve.engine.tree_verify`) against the
simulator's tree kernel (:mod:`evolve.sim.tree_kernels`). Floats are compared with ``==`` (or their
bytes), never approximately; random blocks and trees come from seeded numpy generators.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evolve.engine.tree_verify import _traversal_steps, traversal_expected_tokens, traversal_verify
from evolve.eval.evaluator import metrics_from_counts, reference_metrics
from evolve.eval.fastpath.kernels import reduce_block_counts
from evolve.eval.fastpath.layouts import N_COUNTS, Count
from evolve.kinds.verify_length.eval_policy import threshold_prefix_tables
from evolve.commands.pareto.oracle import _oracle_policy
from evolve.sim import tree_kernels
from evolve.sim.chain import ChainMode, VerifyScratch, _verify
from evolve.sim.tree_kernels import DRAFT_CHAIN, DRAFT_MEDUSA, tree_arrays
from evolve.sim.verification import VERIFY_TOKEN
from evolve.traces.io import Traces
from evolve.traces.synth.rng import next_double, seed_state
from evolve.verification.summation import pairwise_sum
from evolve.verification.tokenwise_block import (
    block_expectation, block_expectation_tv, blocks_expectation, clamp_threshold, threshold_excess,
)
from evolve.verification.traversal import TraversalTree, traversal_run, traversal_state
from heuristics.contract import Rule

ROOT = Path(__file__).resolve().parent.parent


def _block_traces(blocks: list[np.ndarray]) -> Traces:
    """Records of one sequence per block, block b's depth k with target_prob r = blocks[b][k] and draft_prob 1."""
    rows = [dict(seq_id=b, position=k, draft_prob=1.0, target_prob=float(x), draft_entropy=1.0, target_entropy=1.0,
                 top_token_match=False, rand_value=0.5, draft_index=k, baseline_accepts=0.5 < x)
            for b, block in enumerate(blocks) for k, x in enumerate(block)]
    return Traces.from_frame(pd.DataFrame(rows), source="blocks.json")


def _bits(x) -> bytes:
    return np.asarray(x, dtype=np.float64).tobytes()


def _thresholds(rng, n: int) -> np.ndarray:
    """Raw thresholds float64 (n,): in and out of [0, 1], exact 0 and 1, NaN and +-inf."""
    t = rng.uniform(-0.3, 1.3, n)
    kind = rng.random(n)
    t[kind < 0.05] = np.nan
    t[(kind >= 0.05) & (kind < 0.08)] = np.inf
    t[(kind >= 0.08) & (kind < 0.1)] = -np.inf
    t[(kind >= 0.1) & (kind < 0.15)] = 1.0
    t[(kind >= 0.15) & (kind < 0.18)] = 0.0
    return t


def _blocks(rng, count: int, gamma_max: int = 7) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random blocks: (raw thresholds, r = min(1, p/q)) float64 (L,) each, 1 <= L <= gamma_max."""
    out = []
    for _ in range(count):
        L = int(rng.integers(1, gamma_max + 1))
        r = np.minimum(1.0, rng.random(L) / (rng.random(L) + 1e-3))
        r[rng.random(L) < 0.2] = 1.0
        out.append((_thresholds(rng, L), r))
    return out


# ---------------------------------------------------------------------------------------------------------------
# The token-wise block expectation


def test_the_core_is_the_formula():
    rng = np.random.default_rng(0)
    for tau, r in _blocks(rng, 300):
        t = np.array([clamp_threshold(x) for x in tau])
        want_tokens = 1.0 + sum(np.prod(t[:j + 1]) for j in range(t.size))
        want_damage = sum(np.prod(t[:j]) * max(0.0, t[j] - r[j]) for j in range(t.size))
        tokens, damage = block_expectation(tau, r)
        assert tokens == pytest.approx(want_tokens, rel=1e-13) and damage == pytest.approx(want_damage, rel=1e-13,
                                                                                           abs=1e-300)
    # by hand: tau = (0.5, 1, 0.25), r = (0.25, 1, 0.5): T = 1 + .5 + .5 + .125, D = 1 * .25 + .5 * 0 + .5 * 0
    assert block_expectation(np.array([0.5, 1.0, 0.25]), np.array([0.25, 1.0, 0.5])) == (2.125, 0.25)
    assert clamp_threshold(np.nan) == 0.0 and clamp_threshold(-np.inf) == 0.0 and clamp_threshold(2.0) == 1.0
    assert threshold_excess(0.25, 0.75) == 0.0 and threshold_excess(0.75, 0.25) == 0.5


def test_evaluator_reference_path_equals_the_core():
    rng = np.random.default_rng(1)
    blocks = _blocks(rng, 60)
    traces = _block_traces([rb for _, rb in blocks])  # p = r, q = 1: min(1, p/q) = r exactly
    tau = np.concatenate([t for t, _ in blocks])
    for gamma in (1, 3, 7):
        got = reference_metrics(tau, traces, gamma=gamma)
        counts = np.zeros(N_COUNTS)
        for t, r in blocks:
            tokens, damage = block_expectation(t[:gamma], r)
            counts[Count.BLOCKS] += 1
            counts[Count.SUM_TOKENS] += tokens
            counts[Count.SUM_BLOCK_TV] += damage
        want = metrics_from_counts(counts, traces.n, gamma=gamma)
        assert _bits([got.tokens_per_call, got.tv_per_token, got.speedup]) == \
            _bits([want.tokens_per_call, want.tv_per_token, want.speedup])


def test_fast_path_block_counts_equal_the_core():
    rng = np.random.default_rng(2)
    for tau, r in _blocks(rng, 400):
        depth = np.arange(tau.size, dtype=np.float64)
        for gamma in (1, 2, 7):
            acc = np.zeros(N_COUNTS)
            reduce_block_counts(tau, r, depth, tau.size, float(gamma), 1.0, acc)
            tokens, damage = block_expectation(tau[:gamma], r)
            assert acc[Count.BLOCKS] == 1.0
            assert _bits([acc[Count.SUM_TOKENS], acc[Count.SUM_BLOCK_TV]]) == _bits([tokens, damage])


def test_simulator_chain_equals_the_core():
    rng = np.random.default_rng(3)
    for tau, r in _blocks(rng, 300):
        gamma = tau.size
        t = np.array([clamp_threshold(x) for x in tau])  # the chain clamps its thresholds first
        vs = VerifyScratch(np.empty(gamma), np.zeros(gamma, dtype=np.bool_), np.zeros(gamma, dtype=np.bool_),
                           np.zeros(gamma, dtype=np.bool_), np.empty(gamma + 1), np.empty(gamma + 1))
        accepted, analytic, tv = _verify(ChainMode(gamma, VERIFY_TOKEN, 0, 0.0, 1), np.zeros((gamma, 2)), r, r, t,
                                         rng.random(gamma), np.empty(gamma), np.empty(gamma), vs)
        assert _bits([analytic, tv]) == _bits(block_expectation(tau, r))


def test_verification_length_prefix_tables_equal_the_core():
    rng = np.random.default_rng(4)
    blocks = _blocks(rng, 200)
    tau = np.concatenate([t for t, _ in blocks])
    r = np.concatenate([rb for _, rb in blocks])
    depth = np.concatenate([np.arange(t.size, dtype=np.float64) for t, _ in blocks])
    tok, dmg = np.empty(tau.size), np.empty(tau.size)
    threshold_prefix_tables(tau, r, depth, tok, dmg)
    start = 0
    for t, rb in blocks:
        for d in range(t.size):  # each record holds the expectation of its block's prefix
            assert _bits([tok[start + d], dmg[start + d]]) == _bits(block_expectation(t[:d + 1], rb))
        start += t.size


def test_live_decoding_damage_equals_the_core():
    from evolve.live.decoding import LiveCounts, _add_damage

    rng = np.random.default_rng(5)
    rule = Rule("constant_0.9", expression="0.9")
    for trial in range(20):
        k, V = int(rng.integers(1, 6)), int(rng.integers(2, 30))
        p = rng.random((k, V)) ** 2
        q = rng.random((k, V)) ** 2
        p /= p.sum(1, keepdims=True)
        q /= q.sum(1, keepdims=True)
        tau_x = np.array([clamp_threshold(x) for x in _thresholds(rng, k)])
        counts = LiveCounts()
        tokens = _add_damage(rule, (), p, q, np.ones(k), np.ones(k), 3, tau_x, counts)
        tv = np.zeros(k)  # each depth's exact TV, as live decoding sums it (over the tokens with q > p)
        for d in range(k):
            ids = np.flatnonzero(q[d] > p[d])
            tv[d] = np.maximum(q[d, ids] * 0.9 - p[d, ids], 0.0).sum()
        want_tokens, want_damage = block_expectation_tv(tau_x, tv)
        assert _bits([tokens, counts.block_tv]) == _bits([want_tokens, want_damage])


def _vectorised_oracle(R, valid, lam):
    """The oracle's policy with the recursion vectorised over blocks, numpy's order (its form before the core)."""
    B, gamma = R.shape
    v = np.zeros(B)
    take = np.zeros((B, gamma), dtype=bool)
    for k in range(gamma - 1, -1, -1):
        r = R[:, k]
        one = (1.0 + v) - lam * (1.0 - r)
        std = r * (1.0 + v)
        take[:, k] = valid[:, k] & (one > std)
        v = np.where(valid[:, k], np.where(take[:, k], one, std), 0.0)
    reach, T, D = np.ones(B), np.ones(B), np.zeros(B)
    for k in range(gamma):
        tau = np.where(valid[:, k], np.where(take[:, k], 1.0, R[:, k]), 0.0)
        D += reach * np.where(valid[:, k], tau - R[:, k], 0.0)
        reach = reach * tau
        T += reach
    return T, D, 1.0 + v


def test_pareto_oracle_equals_the_core_and_its_vectorised_form():
    rng = np.random.default_rng(6)
    for gamma in (1, 3, 5):
        lengths = rng.integers(1, gamma + 1, 500)
        valid = np.arange(gamma)[None, :] < lengths[:, None]
        R = np.where(valid, np.minimum(1.0, rng.random((500, gamma)) / (rng.random((500, gamma)) + 1e-3)), 0.0)
        for lam in (0.0, 0.5, 1.7, 4.0):
            T, D, V = _oracle_policy(R, valid, lam)
            assert _bits([T, D, V]) == _bits(_vectorised_oracle(R, valid, lam))
            tokens, damage = np.empty(500), np.empty(500)
            tau = np.where(rng.random(R.shape) < 0.4, 1.0, R)  # the core over a matrix, row by row
            blocks_expectation(tau, R, lengths, tokens, damage)
            for b in range(0, 500, 37):
                assert _bits([tokens[b], damage[b]]) == _bits(block_expectation(tau[b, :lengths[b]], R[b]))


def test_the_recursion_is_written_only_in_the_core():
    """``grep -rnE "reach \\*=|reach = reach \\*" --include=*.py evolve heuristics scripts`` finds the token-wise
    block expectation's recursion only under evolve/verification/.

    One other match is a different quantity and stays: evolve/eval/outright_gain.py computes, per depth d, the
    closed-form gain and damage of raising tau_d alone to 1 with every other threshold standard (its reach is
    the standard rule's prod_{i<d} r_i, and no damage is summed over the block), not the block expectation.
    """
    pattern = re.compile(r"reach \*=|reach = reach \*")
    allowed = {"evolve/eval/outright_gain.py"}
    found = set()
    for top in ("evolve", "heuristics", "scripts"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if pattern.search(path.read_text()):
                found.add(rel)
    assert "evolve/verification/tokenwise_block.py" in found  # the pattern matches the core itself
    assert {f for f in found if not f.startswith("evolve/verification/")} == allowed


# ---------------------------------------------------------------------------------------------------------------
# numpy's pairwise summation and traversal verification


def test_pairwise_sum_is_numpys_sum():
    rng = np.random.default_rng(7)
    for n in list(range(0, 300)) + [1023, 1024, 1025, 4097, 8192, 8193, 32000, 50257]:
        x = rng.random(n) ** 3
        x[rng.random(n) < 0.3] = 0.0
        assert _bits(pairwise_sum(x)) == _bits(np.sum(x))


class _Uniforms:
    """A numpy-Generator stand-in whose ``random()`` replays the simulator's stream (xoshiro256++ state)."""

    def __init__(self, state: np.ndarray):
        self.state = state.copy()

    def random(self) -> float:
        return next_double(self.state)


def _random_tree(rng, draft: int):
    """A simulator tree (:func:`evolve.sim.tree_kernels.tree_arrays`) with random rows, and the engine's view of it."""
    n = int(rng.integers(2, 10))
    V = int(rng.choice([3, 9, 40, 300]))
    tree, ts = tree_arrays(n - 1, V, 1)
    parent, token, level = tree.parent, tree.token, tree.level
    parent[0], token[0], level[0] = -1, -1, 0
    for u in range(1, n):
        parent[u] = int(rng.integers(0, u))
        level[u] = level[parent[u]] + 1

    def rows(m):
        a = rng.random((m, V)) ** 3
        a[rng.random((m, V)) < 0.3] = 0.0
        a[:, 0] += 1e-3
        return a / a.sum(1, keepdims=True)

    tree.P[:n] = rows(n)
    tree.Q[:n] = rows(n) if rng.random() < 0.8 else tree.P[:n]
    qrow = np.array([tree_kernels._children_row(u, level, draft) for u in range(n)])
    for u in range(1, n):
        token[u] = int(rng.choice(V, p=tree.Q[qrow[parent[u]]]))
    # the engine's layout: node i = row i + 1; its q row at node i is the row its children were drafted from
    engine = (parent[1:n] - 1, token[1:n].copy(), tree.P[:n].copy(), tree.Q[qrow].copy())
    return tree, ts, n, qrow, engine


@pytest.mark.parametrize("draft", [DRAFT_CHAIN, DRAFT_MEDUSA], ids=["chain", "medusa"])
def test_engine_and_simulator_traversal_take_the_same_decisions(draft):
    rng = np.random.default_rng(8 + draft)
    for trial in range(40):
        tree, ts, n, qrow, (parents, tokens, p, q) = _random_tree(rng, draft)
        steps = list(_traversal_steps(parents, tokens, p, q))
        # the same tests, weights and distributions through the simulator's layout
        st = traversal_state(n, p.shape[1])
        a = np.empty(n - 1)
        traversal_run(TraversalTree(tree.parent, tree.token, qrow, tree.P, tree.Q), n, st, a)
        assert [s[0] + 1 for s in steps[:-1]] == list(st.order[:n - 1])
        assert _bits([s[1] for s in steps[:-1]]) == _bits(a)
        survive, expected = 1.0, 0.0  # the engine's expected tokens from the simulator's weights
        for k, (node, _, _) in enumerate(steps):
            prob = survive * (a[k] if node >= 0 else 1.0)
            expected += prob * (int(tree.level[node + 1]) + 1)
            survive *= 1.0 - (a[k] if node >= 0 else 1.0)
            if survive <= 0.0:
                break
        assert _bits(traversal_expected_tokens(parents, tokens, p, q)) == _bits(expected)
        for seed in range(12):  # same uniforms: same accepted node, same next-token distribution
            state = seed_state(seed, trial, 3)
            engine_path, _ = traversal_verify(parents, tokens, p, q, _Uniforms(state))
            u = tree_kernels._traversal_pick(state.copy(), n, draft, tree, ts)
            assert (engine_path[-1] + 1 if engine_path else 0) == u
            dist = next(s[2] for s in steps if s[0] == u - 1)
            assert _bits(ts.traversal.Pt[u]) == _bits(dist)

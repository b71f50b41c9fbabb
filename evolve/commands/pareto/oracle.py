"""The oracle bound of ``benchmark.py pareto``: what no per-token acceptance rule can exceed on a split.

See :func:`oracle_bound` for the argument (block-wise backward induction and
weak duality); the bound is reported beside the curves, not as one of them.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from evolve.errors import InputError
from evolve.eval.evaluator import EvalData
from evolve.report.pareto.curves import budget_key, hypervolume, nondominated
from evolve.verification.tokenwise_block import blocks_expectation

#: Lagrange multipliers swept by the oracle bound (per unit of block TV, in tokens).
ORACLE_LAMBDAS = 1601


def block_matrix(data: EvalData, gamma: int) -> tuple[np.ndarray, np.ndarray]:
    """(R, valid): R float64 (B, gamma) = min(1, p/q) of each block's depths, valid bool (B, gamma).

    Blocks start at rows with draft_index 0 (rows before the first start are
    ignored, as by the evaluator); depths >= gamma are ignored.
    """
    depth = data.depth
    if depth is None:
        raise InputError(f"{data.source}: the comparison needs column 'draft_index' (speculation blocks)")
    starts = np.flatnonzero(depth == 0)
    ends = np.append(starts[1:], data.n)
    B = starts.size
    R = np.zeros((B, gamma))
    valid = np.zeros((B, gamma), dtype=bool)
    for k in range(gamma):
        rows = starts + k
        ok = rows < ends
        ok[ok] &= depth[rows[ok]] == k
        valid[:, k] = ok
        R[ok, k] = data.r[rows[ok]]
    return R, valid


def _oracle_policy(R: np.ndarray, valid: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best block policy for T - lam*D: per block (tokens T, damage D, 1 + v_0) with tau_k in {r_k, 1}."""
    B, gamma = R.shape
    v = np.zeros(B)
    take = np.zeros((B, gamma), dtype=bool)
    for k in range(gamma - 1, -1, -1):
        r = R[:, k]
        one = (1.0 + v) - lam * (1.0 - r)
        std = r * (1.0 + v)
        take[:, k] = valid[:, k] & (one > std)
        v = np.where(valid[:, k], np.where(take[:, k], one, std), 0.0)
    # a block ends at its first invalid depth (tau 0 there: nothing after it is reached)
    length = np.where(valid.all(axis=1), gamma, np.argmin(valid, axis=1))
    T, D = np.empty(B), np.empty(B)
    blocks_expectation(np.where(take, 1.0, R), R, length, T, D)
    return T, D, 1.0 + v


def oracle_bound(data: EvalData, gamma: int, budgets: Sequence[float]) -> dict[str, Any]:
    """What any acceptance rule can reach on ``data``: block-oracle points and an upper bound per budget.

    Per block, tokens T = 1 + sum_k prod_{i<=k} tau_i and damage D = sum_k
    prod_{i<k} tau_i * max(0, tau_k - r_k) are multilinear in the thresholds,
    and T - lam*D is maximised by tau_k in {r_k, 1} (tau_k = 1 iff the tokens
    expected after depth k, 1 + v_{k+1}, exceed lam; found by backward
    induction per block). The *oracle* knows every r_k of the block in advance,
    which no rule does. For a rule with sum D <= b sum T (TV per token <= b),
    weak duality gives, for every lam in [0, 1/b),
    mean T <= mean_blocks max_tau (T - lam*D) / (1 - lam*b); the bound is the
    minimum over a grid of lam (any lam gives a valid bound). Rules with tau
    below r_k only lose tokens, so the bound holds for every rule.

    Returns: {"points": oracle (tv_per_token, tokens_per_call) pairs,
    "upper_bound": {budget key: tokens per call}, "hypervolume": of the points}.
    """
    R, valid = block_matrix(data, gamma)
    if R.shape[0] == 0:
        return {"points": [], "upper_bound": {budget_key(b): None for b in budgets}, "hypervolume": 0.0}
    lams = np.concatenate([[0.0], np.linspace(1.0, gamma + 1.0, ORACLE_LAMBDAS)])
    pts, bound = [], {budget_key(b): math.inf for b in budgets}
    for lam in lams:
        T, D, V = _oracle_policy(R, valid, float(lam))
        pts.append((float(D.sum() / T.sum()), float(T.mean())))
        value = float(V.mean())
        for b in budgets:
            if lam * b < 1.0:
                bound[budget_key(b)] = min(bound[budget_key(b)], value / (1.0 - lam * b))
    points = nondominated(pts)
    return {"points": [list(p) for p in points], "upper_bound": bound,
            "hypervolume": hypervolume(points, max(budgets))}


__all__ = ["ORACLE_LAMBDAS", "block_matrix", "oracle_bound"]

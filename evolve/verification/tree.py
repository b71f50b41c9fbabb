"""Verification of a draft tree: SpecInfer's and traversal verification's acceptance and residual updates.

Terms as in :mod:`evolve.verification`. A draft tree's nodes each hold a drafted token x; a node's
children were drawn i.i.d. from the drafter's q at that node (SpecInfer's naive multi-draft
sampling), and each node has the target's p at its context. The rules, stated in full in
:mod:`evolve.engine.tree_verify` (the engine's exact outcome enumeration, whose tests check them):

* SpecInfer's recursive rejection sampling (Miao et al. 2024, arXiv 2305.09781): at a node with
  residual R (first p), child x is accepted with probability min(1, R(x)/q(x))
  (:func:`accept_weight` with weight 1); after a rejection R <- norm(max(0, R - q))
  (:func:`residual_update` with weight 1); when every child is rejected the recovered token is
  drawn from R, after a leaf the bonus token from p.
* Traversal verification (Weng et al. 2025, arXiv 2505.12398): every node has an acceptance
  weight a_v = min(1, a_parent P(x|parent) / Q(x|parent)) (:func:`accept_weight`, a_root = 1: the
  block weights of block verification along each path); the nodes are tested leaf first
  (depth-first post-order); a rejected node is deleted and its parent beta updated:
  P(.|beta) <- norm(max(0, a_beta P(.|beta) - Q(.|beta))) and a_beta <- its stopping probability
  m / (m + 1 - a_beta) (:func:`evolve.verification.block.stopping_probability`). The whole algorithm,
  written once for the engine and the simulator, is :mod:`evolve.verification.traversal`.

The functions are ``@njit(cache=True)`` (the simulator's tree kernels call them, and the engine calls
:func:`accept_weight` as it is); rows are float64 (V,).
"""
from __future__ import annotations

from numba import njit



@njit(cache=True)
def accept_weight(weight, prow, qrow, x):
    """min(1, weight P(x) / Q(x)): a child's acceptance probability (SpecInfer with weight 1, traversal's a_v).

    Args: ``weight`` the parent's weight in [0, 1] (1 for SpecInfer); ``prow`` the parent's current
    target (or residual) float64 (V,); ``qrow`` the distribution its children were drafted from,
    float64 (V,); ``x`` the child's token id. Returns a float in [0, 1]: 1 (or 0 when weight P(x) = 0)
    where Q(x) = 0.
    """
    num = weight * prow[x]
    if qrow[x] <= 0.0:
        return 1.0 if num > 0.0 else 0.0
    return min(1.0, num / qrow[x])


@njit(cache=True)
def residual_update(weight, prow, qrow):
    """prow <- norm(max(0, weight prow - qrow)) in place, unchanged when the mass is 0; returns the mass m.

    Args: ``weight`` in [0, 1] (1: SpecInfer's residual after a rejected child, R <- norm(max(0, R - q)));
    ``prow``, ``qrow`` float64 (V,). Returns m = sum_v max(0, weight prow(v) - qrow(v)) (sequential sum),
    a float in [0, weight]. With m = 0 (R == q for SpecInfer) the next child is accepted surely.
    """
    m = 0.0
    for v in range(prow.shape[0]):
        m += max(0.0, weight * prow[v] - qrow[v])
    if m > 0.0:
        inv = 1.0 / m
        for v in range(prow.shape[0]):
            prow[v] = max(0.0, weight * prow[v] - qrow[v]) * inv
    return m


__all__ = ["accept_weight", "residual_update"]

"""Traversal verification of a draft tree (Weng et al. 2025, arXiv 2505.12398), written once.

Terms as in :mod:`evolve.verification` and :mod:`evolve.verification.tree`; the rules are stated in full
(and checked exactly lossless) in :mod:`evolve.engine.tree_verify`. The engine (its sampler, its exact
outcomes and the ``traversal_tokens`` column of tree harvests) and the simulator's tree kernels
(:mod:`evolve.sim.tree_kernels`) both run these functions, so for the same tree and the same uniforms
they take the same decisions from the same bits.

The tree, as the functions here take it (:data:`TraversalTree`): rows 0..n-1, row 0 the root (the
verified context), ``parent`` int64 (n,) each row's parent row (parent[0] = -1, parent[u] < u),
``token`` int64 (n,) each row's drafted token (token[0] unused), ``P`` float64 (n, V) the target's
distribution at each row's context, ``Q`` float64 (m, V) the drafter's distributions and ``qsel`` int64
(n,) the row of ``Q`` a row's children were drafted from (u for a chain drafter; its level for Medusa
heads). A row's children are the rows with that parent, taken in index order.

The algorithm:

* every row has an acceptance weight a_u = min(1, a_parent P(x_u|parent) / Q(x_u|parent)) (a_root = 1;
  :func:`evolve.verification.tree.accept_weight`), recomputed parents first after every deletion for the
  rows neither deleted nor updated (:func:`traversal_refresh`);
* the rows are tested in depth-first post-order (:func:`traversal_order`; the order does not depend on
  the outcomes); with a uniform eta, row u is accepted iff eta < a_u, and the call emits the path
  root..u and one token from the current P(.|u);
* a rejected row is deleted and its parent beta updated (:func:`traversal_delete`):
  P(.|beta) <- norm(max(0, a_beta P(.|beta) - Q(.|beta))) (unchanged when the mass m is 0) and
  a_beta <- m / (m + 1 - a_beta) (:func:`evolve.verification.block.stopping_probability`); Q stays
  (children drawn i.i.d. with replacement);
* when every row is deleted the root is accepted (a_root is then 1) with its current P(.|root).

A row's P is changed only by the deletion of one of its children, all of which come before it in the
post-order, and its weight is not changed after it is tested: so the weights and distributions left by
:func:`traversal_run` (every row rejected) are the ones each test saw, and Pr(accept at the k-th test)
= a_k prod_{j<k} (1 - a_j). The mass m is summed in numpy's pairwise order
(:func:`evolve.verification.summation.pairwise_sum`) and the residual divided by it, the numpy form
:func:`evolve.verification.block.normalised_block_residual` that the engine recorded.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from evolve.verification.block import stopping_probability
from evolve.verification.summation import pairwise_sum
from evolve.verification.tree import accept_weight

#: A draft tree (module doc): ``parent``, ``token``, ``qsel`` int64 (n,), ``P`` float64 (n, V), ``Q`` float64 (m, V).
TraversalTree = namedtuple("TraversalTree", ["parent", "token", "qsel", "P", "Q"])
#: The verification's state and scratch for trees of up to N rows over V tokens (:func:`traversal_state`):
#: ``Pt`` float64 (N, V) the current P(.|u); ``acc`` float64 (N,) the weights a_u; ``gone`` (deleted) and
#: ``touched`` (a child deleted) bool (N,); ``order`` int64 (N,) the post-order (rows 1..n-1, the root
#: not included); ``first_child``, ``next_sibling``, ``stack`` int64 (N,); ``resid`` float64 (V,).
TraversalState = namedtuple("TraversalState", ["Pt", "acc", "gone", "touched", "order", "first_child", "next_sibling",
                                               "stack", "resid"])


@njit(cache=True)
def traversal_state(rows, V):
    """A :class:`TraversalState` for trees of up to ``rows`` rows (the root included) over ``V`` tokens."""
    return TraversalState(np.empty((rows, V)), np.empty(rows), np.empty(rows, dtype=np.bool_),
                          np.empty(rows, dtype=np.bool_), np.empty(rows, dtype=np.int64), np.empty(rows, dtype=np.int64),
                          np.empty(rows, dtype=np.int64), np.empty(rows, dtype=np.int64), np.empty(V))


@njit(cache=True)
def traversal_delete(weight, prow, qrow, resid):
    """The update of a row whose child was deleted (module doc), in place; returns its new weight.

    Args: ``weight`` the row's a in [0, 1]; ``prow`` its current target float64 (V,), updated to
    norm(max(0, a P - Q)) (unchanged when the mass m is 0); ``qrow`` its children's draft float64 (V,);
    ``resid`` float64 (V,) scratch. Returns m / (m + 1 - a) (1 when m + 1 - a <= 0), m summed in numpy's
    pairwise order. Weng et al. 2025, arXiv 2505.12398; Sun et al. 2024, arXiv 2403.10444 for h.
    """
    for v in range(prow.shape[0]):
        resid[v] = max(weight * prow[v] - qrow[v], 0.0)
    m = pairwise_sum(resid)
    if m > 0.0:
        for v in range(prow.shape[0]):
            prow[v] = resid[v] / m
    return stopping_probability(weight, m)


@njit(cache=True)
def traversal_order(parent, n, order, first_child, next_sibling, stack):
    """Rows 1..n-1 in depth-first post-order from the root, children in index order, into ``order[:n - 1]``.

    Args: ``parent`` int64 (>= n,) (module doc); ``order``, ``first_child``, ``next_sibling``, ``stack`` int64
    (>= n,) (the last three scratch). Returns n - 1, the number of rows written.
    """
    for u in range(n):
        first_child[u] = -1
    for u in range(n - 1, 0, -1):  # prepend from the last child: the lists are in index order
        next_sibling[u] = first_child[parent[u]]
        first_child[parent[u]] = u
    k = 0
    top = 0
    stack[0] = 0
    while top >= 0:
        u = stack[top]
        c = first_child[u]
        if c >= 0:  # descend into the first child not yet visited
            first_child[u] = next_sibling[c]
            top += 1
            stack[top] = c
            continue
        top -= 1
        if u > 0:
            order[k] = u
            k += 1
    return k


@njit(cache=True)
def traversal_refresh(tree, n, st):
    """a_u = min(1, a_parent P_parent(x_u) / Q_parent(x_u)) for rows 1..n-1 neither deleted nor updated, parents
    first (``tree`` a :data:`TraversalTree`, ``st`` a :data:`TraversalState`)."""
    parent, token, qsel, Q = tree.parent, tree.token, tree.qsel, tree.Q
    Pt, acc, gone, touched = st.Pt, st.acc, st.gone, st.touched
    for u in range(1, n):
        if not (gone[u] or touched[u]):
            pr = parent[u]
            acc[u] = accept_weight(acc[pr], Pt[pr], Q[qsel[pr]], token[u])


@njit(cache=True)
def traversal_begin(tree, n, st):
    """Start verifying rows 0..n-1 of ``tree``: Pt = P, every weight a_u, the post-order; returns n - 1, the
    number of tests before the root (``st.order[:n - 1]``)."""
    P, Pt = tree.P, st.Pt
    for u in range(n):
        for v in range(P.shape[1]):
            Pt[u, v] = P[u, v]
        st.acc[u] = 1.0
        st.gone[u] = False
        st.touched[u] = False
    k = traversal_order(tree.parent, n, st.order, st.first_child, st.next_sibling, st.stack)
    traversal_refresh(tree, n, st)
    return k


@njit(cache=True)
def traversal_reject(tree, u, n, st):
    """Row u (the next in the post-order) was rejected: delete it, update its parent, refresh the weights."""
    st.gone[u] = True
    pr = tree.parent[u]
    st.acc[pr] = traversal_delete(st.acc[pr], st.Pt[pr], tree.Q[tree.qsel[pr]], st.resid)
    st.touched[pr] = True
    traversal_refresh(tree, n, st)


@njit(cache=True)
def traversal_run(tree, n, st, a):
    """Every test of a traversal verification, assuming each one rejects (module doc).

    Args: ``tree`` a :data:`TraversalTree` of n rows, ``st`` a :data:`TraversalState` of at least n rows,
    ``a`` float64 (>= n - 1,) written: a[k] the weight of the k-th tested row ``st.order[k]``. Afterwards
    ``st.Pt[u]`` is the distribution of the token emitted after u if u is accepted (the root's: row 0).
    Returns n - 1, the number of tests before the root.
    """
    k = traversal_begin(tree, n, st)
    for i in range(k):
        u = st.order[i]
        a[i] = st.acc[u]
        traversal_reject(tree, u, n, st)
    return k


__all__ = ["TraversalState", "TraversalTree", "traversal_begin", "traversal_delete", "traversal_order",
           "traversal_refresh", "traversal_reject", "traversal_run", "traversal_state"]

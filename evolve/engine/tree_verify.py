"""Lossless verification of a draft tree: SpecInfer's recursive rejection sampling and traversal verification.

Two verification algorithms for one target call on a tree of drafted tokens, each as a sampler (one
verification, uniforms from a numpy Generator) and as an exact computation of the call's outcomes
(accepted path, its probability and the next token's distribution) and expected tokens (no sampling).

The tree, in plain words
------------------------
* The tree has n drafted nodes (the root, the current context, is not a node), numbered in
  breadth-first order: ``parents`` int64 (n,) gives each node's parent, an earlier node
  (parents[i] < i) or -1 for a child of the root. The children of a node are taken in index order.
  Only parents[i] < i is required; breadth-first order is the usual case.
* ``tokens`` int64 (n,) is each node's token id in [0, V).
* ``p`` float64 (n + 1, V) holds the target's next-token distributions (probabilities): row 0 at the
  root's context, row i + 1 at the context extended by the path from the root to node i (the last
  token of that path being node i's). ``q`` float64 (n + 1, V) holds the drafter's distributions at
  the same contexts. So node i's token was drafted from row parents[i] + 1 of q.
* The children of a node are drawn independently from the drafter's q at that node, with
  replacement (two children may carry the same token and are then separate nodes): SpecInfer's
  naive multi-draft sampling. Both algorithms are lossless for this construction: the tokens
  emitted by a call, continued by the target, are distributed as the target's own sampling.
* One call emits the accepted path's tokens and one more token (from a residual distribution, or the
  target's p after the accepted node), so tokens per call = accepted nodes + 1.

(1) SpecInfer's recursive rejection sampling (Miao et al. 2024, "SpecInfer", arXiv 2305.09781,
multi-step speculative sampling): start at the root with residual R = p(root); try the children in
order; a child with token x is accepted with probability min(1, R(x) / q(x)), q the node's drafter
distribution; after a rejection R <- normalise(max(0, R - q)); an accepted child becomes the current
node with R = its own p; when every child is rejected (or the node is a leaf) one token is drawn from
R and the call ends.

(2) Traversal verification (Weng et al., NeurIPS 2025, "Traversal Verification for Speculative Tree
Decoding", arXiv 2505.12398): a leaf-to-root, sequence-level verification. What is implemented:

* Every node keeps a target distribution P(.|v), a drafter distribution Q(.|v) (initially its rows of
  p and q) and an acceptance probability a_v: a_root = 1 and, for a node alpha with parent beta and
  token x, a_alpha = min(1, a_beta P(x|beta) / Q(x|beta)) (the block weights of block verification
  along every root-to-node path).
* The nodes are tested in depth-first post-order (children in index order), i.e. always the first
  leaf of the remaining tree: with a uniform eta, if eta < a_alpha the whole path root..alpha is
  accepted and the next token is drawn from the current P(.|alpha); the call ends.
* Otherwise alpha is deleted and its parent beta is updated, in this order:
  r = max(0, a_beta P(.|beta) - Q(.|beta)), m = sum(r);
  P(.|beta) <- r / m (unchanged when m = 0: then a_beta is 1 and P = Q, or a_beta becomes 0);
  a_beta <- m / (m + 1 - a_beta) (1 when the denominator is 0): the stopping probability h of block
  verification; Q(.|beta) is left unchanged (see below); then a_v is recomputed, with the formula
  above, for every node of beta's remaining subtree (beta's later children and their descendants).
* When every child of the root is deleted the root is the accepted path (no drafted token accepted,
  a_root is then 1) and the next token is drawn from the root's current P(.|root).

On a chain (every node at most one child) this is exactly block verification (Sun et al. 2024, "Block
verification accelerates speculative decoding", arXiv 2403.10444): a_i is the block weight P_i, the
updated a is h_i, the updated P is normalise(max(0, P_i p_{i+1} - q_{i+1})), and testing the
deepest node first with fresh uniforms accepts the longest prefix i with eta_i <= h_i (see
:func:`evolve.live.decoding.block_decision`); the sampler consumes the uniforms leaf first, then one for
the next token. On a root with k leaf children it is SpecInfer's recursive rejection sampling.

The drafter distribution Q(.|beta) after a deletion: whether it must change depends on how the
siblings were drawn. Drawn without replacement, the later siblings come from Q with the rejected
token removed and renormalised, and Q(.|beta) must be updated so. With the i.i.d. (with replacement)
children assumed here, the later siblings are still independent draws from the unchanged q, so
Q(.|beta) stays q. The exact losslessness tests (tests/test_tree_verify.py, every drafted tree of
several shapes enumerated) confirm this version is lossless and that the without-replacement update
of Q is NOT lossless for i.i.d. children; the same holds for SpecInfer's residual (its q never
changes). SpecInfer's choice goes through :func:`_sibling_draft`; traversal verification runs in the
verification core (:mod:`evolve.verification.traversal`, shared with the simulator), which leaves Q as it is. The rules above are our statement of the
paper's algorithm for i.i.d. children, derived and checked here (exactly lossless on every tree of the
tested shapes), not a transcription of its pseudo-code.

Expected tokens: the order of traversal's tests does not depend on the outcomes (only rejections let
the call go on and they always delete the next node of the post-order), so its outcome probabilities
are a single pass: Pr(accept at the k-th test) = a_k prod_{j<k} (1 - a_j). SpecInfer's are computed
by recursion over the accepted child at each node. Traversal's expected tokens are at least
SpecInfer's in expectation over the drafted tree (the paper's comparison; checked exactly on small
shapes by the tests, not proved here), but NOT for every drafted tree: as block verification on a
chain (optimal only in expectation over the drafts, Sun et al. 2024), it can be below SpecInfer's
(token-by-token) on a given tree.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from evolve.verification.block import normalised_block_residual
from evolve.verification.traversal import TraversalTree, traversal_run, traversal_state
from evolve.verification.tree import accept_weight

#: Tolerance on the sum of each row of p and q (probabilities).
ROW_SUM_TOL = 1e-6


def _check_tree(parents, tokens, p, q) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validated copies: parents, tokens int64 (n,), p, q float64 (n + 1, V). Raises ValueError (module doc)."""
    parents = np.asarray(parents)
    tokens = np.asarray(tokens)
    if parents.ndim != 1:
        raise ValueError(f"parents must be one-dimensional (shape {parents.shape})")
    n = parents.shape[0]
    if n and not np.issubdtype(parents.dtype, np.integer):
        raise ValueError(f"parents must be integers (dtype {parents.dtype})")
    parents = parents.astype(np.int64)
    bad = (parents < -1) | (parents >= np.arange(n))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"parents, node {i}: parent must be -1 or an earlier node (value {int(parents[i])})")
    if tokens.shape != (n,):
        raise ValueError(f"tokens must have shape ({n},) like parents (shape {tokens.shape})")
    if n and not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be integers (dtype {tokens.dtype})")
    tokens = tokens.astype(np.int64)
    p = np.array(p, dtype=np.float64)
    q = np.array(q, dtype=np.float64)
    for name, a in (("p", p), ("q", q)):
        if a.ndim != 2 or a.shape[0] != n + 1 or a.shape[1] < 1:
            raise ValueError(f"{name} must have shape (n + 1, V) = ({n + 1}, V) (shape {a.shape})")
        if not np.all(np.isfinite(a)) or (a < 0).any():
            raise ValueError(f"{name} must hold finite probabilities >= 0")
        sums = a.sum(axis=1)
        if np.any(np.abs(sums - 1.0) > ROW_SUM_TOL):
            r = int(np.flatnonzero(np.abs(sums - 1.0) > ROW_SUM_TOL)[0])
            raise ValueError(f"{name}, row {r}: probabilities sum to {float(sums[r])!r}, not 1")
    if p.shape != q.shape:
        raise ValueError(f"p and q differ in shape ({p.shape} and {q.shape})")
    V = p.shape[1]
    if n and ((tokens < 0) | (tokens >= V)).any():
        i = int(np.flatnonzero((tokens < 0) | (tokens >= V))[0])
        raise ValueError(f"tokens, node {i}: token id must be in [0, {V}) (value {int(tokens[i])})")
    if n and (q[parents + 1, tokens] <= 0).any():
        i = int(np.flatnonzero(q[parents + 1, tokens] <= 0)[0])
        raise ValueError(f"node {i}: its token {int(tokens[i])} has drafter probability 0 at its parent, "
                         f"so it cannot have been drafted")
    return parents, tokens, p, q


def _children(parents: np.ndarray) -> list[list[int]]:
    """children[r]: the nodes whose parent has row r (row 0 = root, row i + 1 = node i), in index order."""
    children: list[list[int]] = [[] for _ in range(parents.shape[0] + 1)]
    for i, par in enumerate(parents):
        children[int(par) + 1].append(i)
    return children


def _path_to(parents: np.ndarray, node: int) -> list[int]:
    """The nodes from the root's child down to ``node`` (empty for the root, -1)."""
    path = []
    while node >= 0:
        path.append(int(node))
        node = int(parents[node])
    return path[::-1]


def _sibling_draft(Q: np.ndarray, x: int) -> np.ndarray:
    """The drafter distribution of a node's later children after a child with token x is rejected.

    Children are drawn i.i.d. with replacement, so it is Q unchanged (module doc); sampling without
    replacement would need Q with x removed and renormalised.
    """
    return Q


def _sample(dist: np.ndarray, u: float) -> int:
    """Inverse-CDF draw of a token from ``dist`` (V,) (probabilities, normalised here) with a uniform u in [0, 1)."""
    c = np.cumsum(dist)
    idx = int(np.searchsorted(c, u * c[-1], side="right"))
    return min(idx, dist.shape[0] - 1)


# ----------------------------------------------------------------------------------------------------------------
# SpecInfer: recursive rejection sampling, top-down


def specinfer_verify(parents, tokens, p, q, rng: np.random.Generator) -> tuple[list[int], int]:
    """One verification of a draft tree by SpecInfer's recursive rejection sampling (Miao et al. 2024, arXiv 2305.09781).

    Args: ``parents`` int64 (n,), ``tokens`` int64 (n,), ``p``, ``q`` float64 (n + 1, V) (probabilities),
    as in the module doc; ``rng`` a numpy Generator supplying the uniforms (one per tested child, then
    one for the emitted token).

    Returns: (path, next_token): the accepted node indices from the root down (possibly empty) and the
    token emitted after them (drawn from the residual where every child was rejected, or from p after a
    leaf). Tokens emitted = len(path) + 1.

    Raises: ValueError for malformed parents (not -1 or an earlier node), tokens out of [0, V) or with
    drafter probability 0 at their parent, or p, q not (n + 1, V) probability rows.
    """
    parents, tokens, p, q = _check_tree(parents, tokens, p, q)
    children = _children(parents)
    path: list[int] = []
    row = 0
    while True:
        R, Q = p[row], q[row]
        accepted = -1
        for c in children[row]:
            x = int(tokens[c])
            if rng.random() < accept_weight(1.0, R, Q, x):
                accepted = c
                break
            R, _ = normalised_block_residual(1.0, R, Q)
            Q = _sibling_draft(Q, x)
        if accepted < 0:
            return path, _sample(R, rng.random())
        path.append(accepted)
        row = accepted + 1


def specinfer_outcomes(parents, tokens, p, q) -> list[tuple[list[int], float, np.ndarray]]:
    """Every outcome of :func:`specinfer_verify` on this tree, exactly.

    Args as :func:`specinfer_verify` (without rng). Returns a list of (path, probability, next-token
    distribution float64 (V,), normalised): one entry per node where the call can stop (the root
    included, path []), the probabilities summing to 1. Raises ValueError as :func:`specinfer_verify`.
    """
    parents, tokens, p, q = _check_tree(parents, tokens, p, q)
    children = _children(parents)
    outcomes: list[tuple[list[int], float, np.ndarray]] = []
    stack: list[tuple[int, list[int], float]] = [(0, [], 1.0)]
    while stack:
        row, path, reach = stack.pop()
        R, Q = p[row], q[row]
        rejected = 1.0  # probability that every child tried so far was rejected
        for c in children[row]:
            x = int(tokens[c])
            a = accept_weight(1.0, R, Q, x)
            if a > 0.0:
                stack.append((c + 1, path + [c], reach * rejected * a))
            rejected *= 1.0 - a
            R, _ = normalised_block_residual(1.0, R, Q)
            Q = _sibling_draft(Q, x)
        outcomes.append((path, reach * rejected, R / R.sum()))
    return outcomes


def specinfer_expected_tokens(parents, tokens, p, q) -> float:
    """Exact expected tokens of one SpecInfer verification of this tree: E[accepted nodes] + 1, in [1, depth + 1].

    Args and errors as :func:`specinfer_outcomes` (from whose outcome probabilities it is computed).
    """
    return float(sum(prob * (len(path) + 1) for path, prob, _ in specinfer_outcomes(parents, tokens, p, q)))


# ----------------------------------------------------------------------------------------------------------------
# Traversal verification: leaf to root, sequence level


def _traversal_steps(parents, tokens, p, q) -> Iterator[tuple[int, float, np.ndarray]]:
    """The tests of traversal verification in order (module doc), assuming every earlier test rejected.

    Yields (node, acceptance probability a, next-token distribution if accepted (V,), normalised);
    node -1 (the root, a = 1) last. Inputs already validated. The tests are
    :func:`evolve.verification.traversal.traversal_run`'s (rows: 0 the root, i + 1 node i).
    """
    n = parents.shape[0]
    tree = TraversalTree(np.concatenate(([-1], parents + 1)), np.concatenate(([-1], tokens)),
                         np.arange(n + 1), p, q)
    st = traversal_state(n + 1, p.shape[1])
    a = np.empty(n)
    traversal_run(tree, n + 1, st, a)
    for k in range(n):
        r = int(st.order[k])
        yield r - 1, float(a[k]), st.Pt[r].copy()
    yield -1, 1.0, st.Pt[0].copy()


def traversal_verify(parents, tokens, p, q, rng: np.random.Generator) -> tuple[list[int], int]:
    """One traversal verification of a draft tree (Weng et al. 2025, arXiv 2505.12398; module doc).

    Args as :func:`specinfer_verify`; ``rng`` supplies one uniform per tested node, in depth-first
    post-order (the deepest node first on a chain), then one for the emitted token (none is used to
    test the root, accepted with probability 1).

    Returns: (path, next_token): the accepted node indices from the root down (possibly empty) and the
    token drawn from the accepted node's current target distribution. Tokens emitted = len(path) + 1.

    Raises: ValueError as :func:`specinfer_verify`.
    """
    parents, tokens, p, q = _check_tree(parents, tokens, p, q)
    for node, a, dist in _traversal_steps(parents, tokens, p, q):
        if node < 0 or rng.random() < a:
            return _path_to(parents, node), _sample(dist, rng.random())
    raise AssertionError("unreachable: the root is always accepted")


def traversal_outcomes(parents, tokens, p, q) -> list[tuple[list[int], float, np.ndarray]]:
    """Every outcome of :func:`traversal_verify` on this tree, exactly.

    Args and errors as :func:`specinfer_outcomes`. Returns a list of (path, probability, next-token
    distribution float64 (V,), normalised) in test order (post-order, the root last), the probabilities
    summing to 1: Pr(accept at the k-th test) = a_k prod_{j<k} (1 - a_j).
    """
    parents, tokens, p, q = _check_tree(parents, tokens, p, q)
    outcomes: list[tuple[list[int], float, np.ndarray]] = []
    survive = 1.0
    for node, a, dist in _traversal_steps(parents, tokens, p, q):
        outcomes.append((_path_to(parents, node), survive * a, dist))
        survive *= 1.0 - a
        if survive <= 0.0:
            break
    return outcomes


def traversal_expected_tokens(parents, tokens, p, q) -> float:
    """Exact expected tokens of one traversal verification of this tree: E[accepted nodes] + 1, in [1, depth + 1].

    Args and errors as :func:`traversal_outcomes`. On a chain it equals block verification's 1 + E[tau]
    (Sun et al. 2024, arXiv 2403.10444).
    """
    return float(sum(prob * (len(path) + 1) for path, prob, _ in traversal_outcomes(parents, tokens, p, q)))


__all__ = ["ROW_SUM_TOL", "specinfer_expected_tokens", "specinfer_outcomes", "specinfer_verify",
           "traversal_expected_tokens", "traversal_outcomes", "traversal_verify"]

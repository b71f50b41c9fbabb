"""Draft trees in jitted kernels: building a tree per target call and verifying it, greedily or by sampling.

A draft tree holds the tokens a draft proposes for the next positions: the
root is the verified context (position t), a node at level j (1-based) holds a
candidate for position t + j - 1, and one target call scores every node at
once (its p at each node's context). Nodes are stored in breadth-first order,
``parent[i] < i`` (-1 = a child of the root), so a node's ancestors come
before it. A chain of gamma drafts is the tree with width 1.

Building a tree (:func:`tree_call`, one target call)
----------------------------------------------------
Nodes are expanded breadth first until the *node budget* N (drafted tokens per
call) is spent or ``max_depth`` is reached; a node at level j gets w children:

* ``widths`` schedule: w = widths[j] (the last entry repeats), e.g. (3, 1) =
  three branches at the root, then one chain below each;
* adaptive width (:func:`adaptive_width`): from the draft's confidence
  c = max_v q(v) at the node, with the maximal width W: c >= 0.9 -> 1 (narrow:
  the draft is sure), 0.6 <= c < 0.9 -> ceil(W/2) (normal), 0.3 <= c < 0.6 -> W
  (wider: explore), c < 0.3 -> 1 (minimal: a flat draft's extra branches are
  rarely accepted). With W = 3 the widths are 1, 2, 3, 1.

Children come from one of two drafts:

* ``DRAFT_CHAIN`` (SpecInfer/EAGLE-style): a node's children are drafted from
  q(.|context + path to the node, depth = level), the chain draft of
  :mod:`evolve.sim.models`; one draft step per tree level;
* ``DRAFT_MEDUSA`` (Medusa heads, Cai et al. 2024, arXiv 2401.10774):
  head j proposes position t + j from a distribution that depends only on the
  verified context and j, never on the tokens drafted at depths < j: q_j =
  the draft of :func:`evolve.sim.models.position_pair` at position t + j with the
  verified window (head 0 is the chain draft). All heads run in one draft step.

and two ways of choosing them:

* sampling (for lossless sampling verification): w tokens i.i.d. from the
  node's q, duplicates kept as separate nodes (SpecInfer's naive sampling);
* top-w (for greedy verification): the w most probable tokens of q.

Verification
------------
* ``VERIFY_SAMPLE``, multi-draft recursive rejection sampling (SpecInfer, Miao
  et al. 2024, arXiv 2305.09781): at the current node with target p, residual
  R = p; try its children in order, child x accepted with probability
  min(1, R(x)/q(x)); after a rejection R <- norm(max(0, R - q)); on acceptance
  emit x and move to that child; if every child is rejected (or the node is a
  leaf), emit a token from R (the bonus token when R = p) and stop. The output
  is distributed exactly as p at every step (lossless), whatever q is, because
  the children are i.i.d. from q.
* ``VERIFY_GREEDY``: emit g = argmax p at the current node; move to the child
  holding g if there is one, else stop. The output equals greedy
  autoregressive decoding token for token.
* ``VERIFY_TRAVERSAL``, traversal verification (Weng et al. 2025, arXiv 2505.12398):
  leaf to root, sequence level, on the sampled tree; lossless and at least as many
  accepted tokens as SpecInfer's in expectation over the drafted tree. The rules (the
  acceptance weights a_v, the deletion of a rejected node and its parent's update) are
  :mod:`evolve.verification.tree`'s, stated in :mod:`evolve.engine.tree_verify`, whose exact
  enumeration tests check them;
  here every node's p is computed first, then the nodes are tested in depth-first
  post-order, one uniform each, then one uniform draws the token after the accepted path.

A call emits (accepted nodes) + 1 tokens; the statistics of a run are the
columns of :class:`TreeStat` (the flat names ``T_*`` are the same members).
"""
from __future__ import annotations

from collections import namedtuple
from enum import IntEnum

import numpy as np
from numba import njit, prange

from evolve.traces.synth.rng import next_double, sample_index, sample_normalised, seed_state
from evolve.eval.fastpath.layouts import record_layout, record_size
from evolve.sim.models import STREAM_DECODE, KernelModel, position_pair, start_buffers, target_at
from evolve.verification.traversal import TraversalTree, traversal_begin, traversal_reject, traversal_state
from evolve.verification.tree import residual_update

DRAFT_CHAIN = 0
DRAFT_MEDUSA = 1
VERIFY_SAMPLE = 0
VERIFY_GREEDY = 1
VERIFY_TRAVERSAL = 2

#: Draft-confidence thresholds of the adaptive width.
NARROW_CONFIDENCE = 0.9
NORMAL_CONFIDENCE = 0.6
WIDE_CONFIDENCE = 0.3

#: Offset of tree decoding's stream from ``STREAM_DECODE``.
TREE_STREAM_OFFSET = 200


@record_layout
class TreeStat(IntEnum):
    """Per-sequence statistics of tree decoding (float64 rows of length ``N_TREE_STATS``)."""

    CALLS = 0        # target calls
    EMITTED = 1      # tokens emitted (the last call not truncated)
    ACCEPTED = 2     # accepted nodes
    NODES = 3        # drafted nodes
    DRAFT_STEPS = 4  # sequential draft steps
    LENGTH = 5       # tokens asked for
    DEPTH = 6        # sum over calls of the tree's depth (levels)


N_TREE_STATS = record_size(TreeStat)
# Flat names of the same members (unpacking fails at import if the layout gains a member).
T_CALLS, T_EMITTED, T_ACCEPTED, T_NODES, T_DRAFT_STEPS, T_LENGTH, T_DEPTH = TreeStat


#: How trees are drafted and verified, the kernels' program: the node budget N, the width schedule ``widths``
#: int64 (L,), the adaptive maximum width, ``adaptive`` (bool), the maximal depth, DRAFT_CHAIN or DRAFT_MEDUSA,
#: VERIFY_SAMPLE, VERIFY_GREEDY or VERIFY_TRAVERSAL (the order of :meth:`evolve.sim.tree_sim.TreeConfig.kernel_args`).
#: ``draft`` is :attr:`evolve.sim.tree_sim.TreeConfig.draft` as a code.
TreeDims = namedtuple("TreeDims", ["budget", "widths", "max_width", "adaptive", "max_depth", "draft", "verify"])
#: One call's draft tree, nodes 0..N (node 0 the root): P, Q float64 (N + 1, V) the target's and the draft's
#: distributions at each node; parent, token, level, child_start, child_count, argp int64 (N + 1,); dn float64
#: (N + 1,) the latent difficulty after each node; ready bool (N + 1,): P, dn, argp computed.
Tree = namedtuple("Tree", ["P", "Q", "parent", "token", "level", "child_start", "child_count", "dn", "argp",
                           "ready"])
#: Scratch of one call: path int64 (N + 1,), win int64 (K,), resid, work, scratch float64 (V,), picks int64
#: (N + 1,); traversal verification's state ``traversal`` (:data:`evolve.verification.traversal.TraversalState`,
#: N + 1 rows) and the Q row of each node's children ``qsel`` int64 (N + 1,).
TreeScratch = namedtuple("TreeScratch", ["path", "win", "resid", "work", "scratch", "picks", "traversal", "qsel"])


@njit(cache=True)
def tree_arrays(budget, V, window_len):
    """A :class:`Tree` and a :class:`TreeScratch` for trees of ``budget`` nodes over V tokens (uninitialised)."""
    m = budget + 1
    tree = Tree(np.empty((m, V)), np.empty((m, V)), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64),
                np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64), np.empty(m),
                np.empty(m, dtype=np.int64), np.empty(m, dtype=np.bool_))
    ts = TreeScratch(np.empty(m, dtype=np.int64), np.empty(window_len, dtype=np.int64), np.empty(V), np.empty(V),
                     np.empty(V), np.empty(m, dtype=np.int64), traversal_state(m, V), np.empty(m, dtype=np.int64))
    return tree, ts


@njit(cache=True)
def adaptive_width(confidence, max_width):
    """Children of a node from the draft's confidence max_v q(v) (module doc).

    >= 0.9: 1; [0.6, 0.9): ceil(max_width/2); [0.3, 0.6): max_width; < 0.3: 1.
    """
    if confidence >= NARROW_CONFIDENCE:
        return 1
    if confidence >= NORMAL_CONFIDENCE:
        return max(1, (max_width + 1) // 2)
    if confidence >= WIDE_CONFIDENCE:
        return max(1, max_width)
    return 1


# ---------------------------------------------------------------------------------------------
# One target call with a draft tree
# ---------------------------------------------------------------------------------------------

@njit(cache=True)
def _node_window(buf, window_len, t, u, parent, token, level, path, win):
    """The K tokens before node u's next position (prefix tokens, then the path's tokens)."""
    lv = level[u]
    a = u
    while a > 0:
        path[level[a] - 1] = token[a]
        a = parent[a]
    for i in range(window_len):
        s = t + lv - window_len + i
        win[i] = buf[window_len + s] if s < t else path[s - t]


@njit(cache=True)
def _top_tokens(q, w, out):
    """The w most probable tokens of q (first index on ties), into out[:w]."""
    for j in range(w):
        best = -1
        for v in range(q.shape[0]):
            taken = False
            for i in range(j):
                if out[i] == v:
                    taken = True
                    break
            if taken:
                continue
            if best < 0 or q[v] > q[best]:
                best = v
        out[j] = best


@njit(cache=True)
def build_tree(model, rng, buf, t, window_len, d_prev, dims, tree, ts):
    """Draft one tree at position t breadth first (module doc); returns (nodes + 1, depth).

    Node 0 is the root (the verified context, d_{t-1} = ``d_prev``); for the
    chain draft, P[u], Q[u], dn[u], argp[u] of every expanded node are filled
    (``ready[u]``); for Medusa heads Q[j] is head j's distribution. Args as
    :func:`tree_call`.
    """
    model_seed, params, log_rank = model
    budget, widths, max_width, adaptive, max_depth, draft, verify = dims
    P, Q, parent, token, level, child_start, child_count, dn, argp, ready = tree
    path, win, work, scratch, picks = ts.path, ts.win, ts.work, ts.scratch, ts.picks
    n = 1
    parent[0] = -1
    token[0] = -1
    level[0] = 0
    ready[0] = False
    heads = 0  # Medusa head distributions computed so far (Q rows 0..heads-1)
    u = 0
    depth = 0
    while u < n:
        lv = level[u]
        child_start[u] = n
        child_count[u] = 0
        if lv < max_depth and n < budget + 1:
            if draft == DRAFT_CHAIN:
                _node_window(buf, window_len, t, u, parent, token, level, path, win)
                d_par = d_prev if u == 0 else dn[parent[u]]
                d, hp, hq, tp, tq, ap, aq, ov = position_pair(model_seed, t + lv, win, d_par, lv, params, log_rank,
                                                             P[u], Q[u], work)
                dn[u] = d
                argp[u] = ap
                ready[u] = True
                qrow = Q[u]
                conf = tq
            else:
                while heads <= lv:
                    _node_window(buf, window_len, t, 0, parent, token, level, path, win)
                    d, hp, hq, tp, tq, ap, aq, ov = position_pair(model_seed, t + heads, win, d_prev, heads,
                                                                 params, log_rank, scratch, Q[heads], work)
                    heads += 1
                qrow = Q[lv]
                conf = 0.0
                for v in range(qrow.shape[0]):
                    conf = max(conf, qrow[v])
            if adaptive:
                w = adaptive_width(conf, max_width)
            else:
                w = widths[min(lv, widths.shape[0] - 1)]
            w = min(w, budget + 1 - n)
            if verify == VERIFY_GREEDY:
                _top_tokens(qrow, w, picks)
            else:
                for j in range(w):
                    picks[j] = sample_index(rng, qrow)
            for j in range(w):
                parent[n] = u
                token[n] = picks[j]
                level[n] = lv + 1
                ready[n] = False
                depth = max(depth, lv + 1)
                n += 1
            child_count[u] = w
        u += 1
    return n, depth


@njit(cache=True)
def _children_row(u, level, draft):
    """The row of Q node u's children were drawn from: its own (chain draft) or its level's head."""
    return u if draft == DRAFT_CHAIN else level[u]


@njit(cache=True)
def _children_q(Q, u, level, draft):
    """The distribution node u's children were drawn from (:func:`_children_row`)."""
    return Q[_children_row(u, level, draft)]


@njit(cache=True)
def _traversal_pick(rng, n, draft, tree, ts):
    """Traversal verification (:mod:`evolve.verification.traversal`) of the tree's nodes 1..n-1 (node 0 the root;
    every P row computed), one uniform per tested node: returns the accepted node (0: the root, nothing accepted);
    ``ts.traversal.Pt[node]`` then holds the distribution of the token emitted after it."""
    qsel = ts.qsel
    for u in range(n):
        qsel[u] = _children_row(u, tree.level, draft)
    tt = TraversalTree(tree.parent, tree.token, qsel, tree.P, tree.Q)
    st = ts.traversal
    k = traversal_begin(tt, n, st)
    for i in range(k):
        u = st.order[i]
        if next_double(rng) < st.acc[u]:
            return u
        traversal_reject(tt, u, n, st)
    return 0


@njit(cache=True)
def tree_call(model, rng, buf, dpath, t, window_len, dims, tree, ts):
    """One target call at position t with a draft tree (module doc); writes the emitted tokens into ``buf``.

    Args (N = the budget):
        model: :class:`evolve.sim.models.KernelModel` (the synthetic model's seed, parameters, Zipf logits).
        rng: the decoding stream's state (:func:`evolve.traces.synth.rng.seed_state`).
        buf, dpath: as :func:`evolve.sim.chain.chain_run` (room for N + 1 tokens past t); window_len K.
        dims: :class:`TreeDims`; tree: :class:`Tree` and ts: :class:`TreeScratch`, preallocated
        (:func:`tree_arrays`).

    Returns: (emitted, accepted, nodes drafted, tree depth, draft steps).
    """
    model_seed, params, log_rank = model
    draft, verify = dims.draft, dims.verify
    P, Q, parent, token, level, child_start, child_count, dn, argp, ready = tree
    path, win, resid, work, scratch, Pt = ts.path, ts.win, ts.resid, ts.work, ts.scratch, ts.traversal.Pt
    n, depth = build_tree(model, rng, buf, t, window_len, dpath[t], dims, tree, ts)
    steps = depth if draft == DRAFT_CHAIN else (1 if depth > 0 else 0)
    if verify == VERIFY_TRAVERSAL:
        for u in range(n):  # every node's p (breadth-first: a parent's latent difficulty comes first)
            if not ready[u]:
                _node_window(buf, window_len, t, u, parent, token, level, path, win)
                d, ap = target_at(model_seed, t + level[u], win, dpath[t] if u == 0 else dn[parent[u]], params,
                                  log_rank, P[u], scratch, work)
                dn[u] = d
                argp[u] = ap
                ready[u] = True
        last = _traversal_pick(rng, n, draft, tree, ts)
        k = level[last]
        u = last
        for i in range(k, 0, -1):  # the accepted path, root side first
            path[i] = u
            u = parent[u]
        path[0] = 0
        for i in range(k + 1):
            c = path[i]
            dpath[t + i + 1] = dn[c]
            if i < k:
                buf[window_len + t + i] = token[path[i + 1]]
            else:
                y = sample_normalised(rng, Pt[last])
                buf[window_len + t + i] = y if y >= 0 else sample_index(rng, P[last])
        return k + 1, k, n - 1, depth, steps
    # verification
    u = 0
    accepted = 0
    while True:
        lv = level[u]
        if not ready[u]:
            _node_window(buf, window_len, t, u, parent, token, level, path, win)
            d_par = dpath[t] if u == 0 else dn[parent[u]]
            d, ap = target_at(model_seed, t + lv, win, d_par, params, log_rank, P[u], scratch, work)
            dn[u] = d
            argp[u] = ap
            ready[u] = True
        pos = t + lv
        dpath[pos + 1] = dn[u]
        cs = child_start[u]
        cc = child_count[u]
        nxt = -1
        if verify == VERIFY_GREEDY:
            g = argp[u]
            for c in range(cs, cs + cc):
                if token[c] == g:
                    nxt = c
                    break
            buf[window_len + pos] = g
        else:
            qrow = _children_q(Q, u, level, draft)
            pu = P[u]
            for v in range(pu.shape[0]):
                resid[v] = pu[v]
            for c in range(cs, cs + cc):
                x = token[c]
                if next_double(rng) * qrow[x] < resid[x]:  # u < min(1, R(x)/q(x)), q(x) > 0
                    nxt = c
                    break
                residual_update(1.0, resid, qrow)  # R <- norm(max(0, R - q))
            if nxt >= 0:
                buf[window_len + pos] = token[nxt]
            else:
                y = sample_normalised(rng, resid)
                buf[window_len + pos] = y if y >= 0 else sample_index(rng, pu)
        if nxt < 0:
            break
        accepted += 1
        u = nxt
    return accepted + 1, accepted, n - 1, depth, steps


@njit(cache=True)
def tree_run(model, rng, buf, dpath, t0, length, window_len, dims, stats):
    """Decode ``length`` tokens from position t0 with one draft tree per target call; adds to ``stats``.

    ``model`` a :class:`evolve.sim.models.KernelModel`, ``dims`` a :class:`TreeDims`; ``buf`` needs
    window_len + t0 + length + budget + 1 entries, ``dpath`` t0 + length + budget + 2 (layout as
    :func:`evolve.sim.chain.chain_run`); ``stats`` float64 (N_TREE_STATS,).
    """
    tree, ts = tree_arrays(dims.budget, model.log_rank.shape[0], window_len)
    t = t0
    while t < t0 + length:
        emitted, accepted, nodes, depth, steps = tree_call(model, rng, buf, dpath, t, window_len, dims, tree, ts)
        stats[TreeStat.CALLS] += 1.0
        stats[TreeStat.EMITTED] += emitted
        stats[TreeStat.ACCEPTED] += accepted
        stats[TreeStat.NODES] += nodes
        stats[TreeStat.DRAFT_STEPS] += steps
        stats[TreeStat.DEPTH] += depth
        t += emitted
    stats[TreeStat.LENGTH] += length


@njit(cache=True, parallel=True)
def tree_batch(model_seed, params, log_rank, decode_seed, jobs, dims, stats_out, tokens_out):
    """Independent tree decodes (jobs as :func:`evolve.sim.chain.chain_batch`), in parallel.

    ``model_seed``, ``params``, ``log_rank`` the fields of a :class:`evolve.sim.models.KernelModel` (Numba's
    parallel loop does not take a record holding a record; pass ``*model.kernel``), ``jobs`` a :class:`evolve.sim.models.Jobs`, ``dims`` a
    :class:`TreeDims`. Job j decodes ``jobs.lengths[j]`` tokens from ``jobs.t0s[j]`` after ``jobs.windows[j]``
    on the stream (decode_seed, jobs.keys[j], STREAM_DECODE + TREE_STREAM_OFFSET); ``stats_out`` float64
    (J, N_TREE_STATS), the first tokens into ``tokens_out`` int64 (J, T).
    """
    keys, windows, t0s, d_prevs, lengths = jobs
    budget = dims.budget
    for j in prange(keys.shape[0]):
        K = windows.shape[1]
        t0 = t0s[j]
        buf, dpath = start_buffers(windows[j], t0, d_prevs[j], lengths[j] + budget + 1)
        rng = seed_state(decode_seed, keys[j], STREAM_DECODE + TREE_STREAM_OFFSET)
        tree_run(KernelModel(model_seed, params, log_rank), rng, buf, dpath, t0, lengths[j], K, dims, stats_out[j])
        for k in range(min(tokens_out.shape[1], lengths[j])):
            tokens_out[j, k] = buf[K + t0 + k]

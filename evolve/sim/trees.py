"""Draft trees: shapes, adaptive width, tree attention masks, greedy and multi-draft verification.

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
* adaptive width (seed 000): from the draft's confidence c = max_v q(v) at the
  node, with the maximal width W: c >= 0.9 -> 1 (narrow: the draft is sure),
  0.6 <= c < 0.9 -> ceil(W/2) (normal), 0.3 <= c < 0.6 -> W (wider: explore),
  c < 0.3 -> 1 (minimal: a flat draft's extra branches are rarely accepted).
  With W = 3 the widths are 1, 2, 3, 1 (seed 000's ``tree_width: 3``).

Children come from one of two drafts:

* ``DRAFT_CHAIN`` (SpecInfer/EAGLE-style): a node's children are drafted from
  q(.|context + path to the node, depth = level), the chain draft of
  :mod:`evolve.sim.decoding`; one draft step per tree level;
* ``DRAFT_MEDUSA`` (Medusa heads, seed 001; Cai et al. 2024, arXiv 2401.10774):
  head j proposes position t + j from a distribution that depends only on the
  verified context and j, never on the tokens drafted at depths < j: q_j =
  the draft of :func:`evolve.sim.decoding.position_pair` at position t + j with the
  verified window (head 0 is the chain draft). All heads run in one draft step.

and two ways of choosing them:

* sampling (for lossless sampling verification): w tokens i.i.d. from the
  node's q, duplicates kept as separate nodes (SpecInfer's naive sampling);
* top-w (for greedy verification, seed 003): the w most probable tokens of q.

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
* ``VERIFY_GREEDY`` (seed 003): emit g = argmax p at the current node; move to
  the child holding g if there is one, else stop. The output equals greedy
  autoregressive decoding token for token.

A call emits (accepted nodes) + 1 tokens. Cost model: a target call costs 1,
a draft step c; chain drafts and chain-draft trees need one step per level,
Medusa heads one step per call; speedup = length / (calls + c * draft steps).

Tree attention (:func:`tree_attention_mask`): node i attends to the whole
prefix and to its ancestors and itself, mask shape [n_nodes, prefix_len +
n_nodes], bool (seed 000's "each token can attend to all ancestors in its path").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from data.errors import InputError
from data.synth.vocab_model import next_double, sample_index, seed_state
from evolve.sim.decoding import (
    STREAM_DECODE, Context, SyntheticModel, check_cost_ratio, context_jobs, position_pair, sample_normalised,
    sequence_jobs, start_buffers, target_at,
)

DRAFT_CHAIN = 0
DRAFT_MEDUSA = 1
VERIFY_SAMPLE = 0
VERIFY_GREEDY = 1

#: Draft-confidence thresholds of the adaptive width (seed 000).
NARROW_CONFIDENCE = 0.9
NORMAL_CONFIDENCE = 0.6
WIDE_CONFIDENCE = 0.3

# per-sequence statistics of tree decoding
T_CALLS = 0
T_EMITTED = 1
T_ACCEPTED = 2
T_NODES = 3
T_DRAFT_STEPS = 4
T_LENGTH = 5
T_DEPTH = 6   # sum over calls of the tree's depth (levels)
N_TREE_STATS = 7


@njit(cache=True)
def adaptive_width(confidence, max_width):
    """Children of a node from the draft's confidence max_v q(v) (seed 000; module doc).

    >= 0.9: 1; [0.6, 0.9): ceil(max_width/2); [0.3, 0.6): max_width; < 0.3: 1.
    """
    if confidence >= NARROW_CONFIDENCE:
        return 1
    if confidence >= NORMAL_CONFIDENCE:
        return max(1, (max_width + 1) // 2)
    if confidence >= WIDE_CONFIDENCE:
        return max(1, max_width)
    return 1


@njit(cache=True)
def _attention_mask(parents, prefix_len, mask):
    n = parents.shape[0]
    for i in range(n):
        for j in range(prefix_len):
            mask[i, j] = True
        a = i
        while a >= 0:
            mask[i, prefix_len + a] = True
            a = parents[a]


def tree_attention_mask(parents, prefix_len: int) -> np.ndarray:
    """Tree attention mask: bool (n_nodes, prefix_len + n_nodes).

    Row i is node i's query: True for every prefix position and for node i's
    ancestors and itself (columns prefix_len + a), False for every other node.

    Args: parents int (n_nodes,), parents[i] < i, -1 for children of the root;
    prefix_len >= 0. Raises ValueError for a parent that is not an earlier node.
    """
    parents = np.asarray(parents, dtype=np.int64)
    if parents.ndim != 1:
        raise ValueError("parents must be one-dimensional")
    bad = (parents < -1) | (parents >= np.arange(parents.size))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"parents, node {i}: parent must be -1 or an earlier node (value {int(parents[i])})")
    if prefix_len < 0:
        raise ValueError(f"prefix_len must be >= 0 (value {prefix_len})")
    mask = np.zeros((parents.size, prefix_len + parents.size), dtype=np.bool_)
    _attention_mask(parents, int(prefix_len), mask)
    return mask


def tree_shape(widths, budget: int, max_depth: int | None = None) -> np.ndarray:
    """Parents (int64 (n,), -1 = root child) of the breadth-first tree a ``widths`` schedule builds.

    The same rule as :func:`tree_call` without drafting: a node at level j
    (root = 0) gets widths[min(j, len-1)] children until ``budget`` nodes exist
    or ``max_depth`` levels are filled.
    """
    widths = [int(w) for w in widths]
    max_depth = budget if max_depth is None else max_depth
    parents: list[int] = []
    levels: list[int] = []
    queue = [(-1, 0)]
    qi = 0
    while qi < len(queue) and len(parents) < budget:
        node, level = queue[qi]
        qi += 1
        if level >= max_depth:
            continue
        for _ in range(widths[min(level, len(widths) - 1)]):
            if len(parents) >= budget:
                break
            parents.append(node)
            levels.append(level + 1)
            queue.append((len(parents) - 1, level + 1))
    return np.asarray(parents, dtype=np.int64)


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
def build_tree(model_seed, rng, buf, t, window_len, d_prev, params, log_rank, budget, widths, max_width, adaptive,
               max_depth, draft_kind, verify, P, Q, parent, token, level, child_start, child_count, dn, argp, ready,
               path, win, work, scratch, picks):
    """Draft one tree at position t breadth first (module doc); returns (nodes + 1, depth).

    Node 0 is the root (the verified context, d_{t-1} = ``d_prev``); for the
    chain draft, P[u], Q[u], dn[u], argp[u] of every expanded node are filled
    (``ready[u]``); for Medusa heads Q[j] is head j's distribution. Arrays as
    :func:`tree_call`.
    """
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
            if draft_kind == DRAFT_CHAIN:
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
def tree_call(model_seed, rng, buf, dpath, t, window_len, params, log_rank, budget, widths, max_width,
              adaptive, max_depth, draft_kind, verify, broken, P, Q, parent, token, level, child_start,
              child_count, dn, argp, ready, path, win, resid, work, scratch, picks):
    """One target call at position t with a draft tree (module doc); writes the emitted tokens into ``buf``.

    Args (arrays are preallocated scratch, N = budget):
        buf, dpath: as :func:`evolve.sim.decoding.chain_run` (room for N + 1 tokens past t).
        widths: int64 (L,) width schedule (used unless ``adaptive``); max_width: adaptive maximum.
        draft_kind: DRAFT_CHAIN or DRAFT_MEDUSA; verify: VERIFY_SAMPLE or VERIFY_GREEDY.
        broken: tests only: sampling verification without the residual update.
        P, Q: float64 (N + 1, V); parent, token, level, child_start, child_count, argp: int64 (N + 1,);
        dn: float64 (N + 1,); ready: bool (N + 1,); path, win, picks: int64 (N + 1,), (K,), (N + 1,);
        resid, work, scratch: float64 (V,).

    Returns: (emitted, accepted, nodes drafted, tree depth, draft steps).
    """
    n, depth = build_tree(model_seed, rng, buf, t, window_len, dpath[t], params, log_rank, budget, widths, max_width,
                          adaptive, max_depth, draft_kind, verify, P, Q, parent, token, level, child_start,
                          child_count, dn, argp, ready, path, win, work, scratch, picks)
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
            qrow = Q[u] if draft_kind == DRAFT_CHAIN else Q[lv]
            pu = P[u]
            for v in range(pu.shape[0]):
                resid[v] = pu[v]
            for c in range(cs, cs + cc):
                x = token[c]
                if next_double(rng) * qrow[x] < resid[x]:  # u < min(1, R(x)/q(x)), q(x) > 0
                    nxt = c
                    break
                if not broken:
                    total = 0.0
                    for v in range(resid.shape[0]):
                        total += max(0.0, resid[v] - qrow[v])
                    if total > 0.0:  # else R == q: the next child is accepted surely
                        inv = 1.0 / total
                        for v in range(resid.shape[0]):
                            resid[v] = max(0.0, resid[v] - qrow[v]) * inv
            if nxt >= 0:
                buf[window_len + pos] = token[nxt]
            else:
                y = sample_normalised(rng, resid)
                buf[window_len + pos] = y if y >= 0 else sample_index(rng, pu)
        if nxt < 0:
            break
        accepted += 1
        u = nxt
    steps = depth if draft_kind == DRAFT_CHAIN else (1 if depth > 0 else 0)
    return accepted + 1, accepted, n - 1, depth, steps


@njit(cache=True)
def tree_run(model_seed, rng, buf, dpath, t0, length, window_len, params, log_rank, budget, widths, max_width,
             adaptive, max_depth, draft_kind, verify, broken, stats):
    """Decode ``length`` tokens from position t0 with one draft tree per target call; adds to ``stats``.

    ``buf`` needs window_len + t0 + length + budget + 1 entries, ``dpath``
    t0 + length + budget + 2 (layout as :func:`evolve.sim.decoding.chain_run`);
    ``stats`` float64 (N_TREE_STATS,).
    """
    V = log_rank.shape[0]
    m = budget + 1
    P = np.empty((m, V))
    Q = np.empty((m, V))
    parent = np.empty(m, dtype=np.int64)
    token = np.empty(m, dtype=np.int64)
    level = np.empty(m, dtype=np.int64)
    child_start = np.empty(m, dtype=np.int64)
    child_count = np.empty(m, dtype=np.int64)
    dn = np.empty(m)
    argp = np.empty(m, dtype=np.int64)
    ready = np.empty(m, dtype=np.bool_)
    path = np.empty(m, dtype=np.int64)
    win = np.empty(window_len, dtype=np.int64)
    picks = np.empty(m, dtype=np.int64)
    resid = np.empty(V)
    work = np.empty(V)
    scratch = np.empty(V)
    t = t0
    while t < t0 + length:
        emitted, accepted, nodes, depth, steps = tree_call(
            model_seed, rng, buf, dpath, t, window_len, params, log_rank, budget, widths, max_width, adaptive,
            max_depth, draft_kind, verify, broken, P, Q, parent, token, level, child_start, child_count, dn, argp,
            ready, path, win, resid, work, scratch, picks)
        stats[T_CALLS] += 1.0
        stats[T_EMITTED] += emitted
        stats[T_ACCEPTED] += accepted
        stats[T_NODES] += nodes
        stats[T_DRAFT_STEPS] += steps
        stats[T_DEPTH] += depth
        t += emitted
    stats[T_LENGTH] += length


@njit(cache=True, parallel=True)
def tree_batch(model_seed, decode_seed, keys, windows, t0s, d_prevs, lengths, params, log_rank, budget, widths,
               max_width, adaptive, max_depth, draft_kind, verify, broken, stats_out, tokens_out):
    """Independent tree decodes (jobs as :func:`evolve.sim.decoding.chain_batch`), in parallel.

    Job j decodes ``lengths[j]`` tokens from ``t0s[j]`` after ``windows[j]`` on the
    stream (decode_seed, keys[j], STREAM_DECODE + 200); ``stats_out`` float64
    (J, N_TREE_STATS), the first tokens into ``tokens_out`` int64 (J, T).
    """
    for j in prange(keys.shape[0]):
        K = windows.shape[1]
        t0 = t0s[j]
        buf, dpath = start_buffers(windows[j], t0, d_prevs[j], lengths[j] + budget + 1)
        rng = seed_state(decode_seed, keys[j], STREAM_DECODE + 200)
        tree_run(model_seed, rng, buf, dpath, t0, lengths[j], K, params, log_rank, budget, widths, max_width,
                 adaptive, max_depth, draft_kind, verify, broken, stats_out[j])
        for k in range(min(tokens_out.shape[1], lengths[j])):
            tokens_out[j, k] = buf[K + t0 + k]


# ---------------------------------------------------------------------------------------------
# Python API
# ---------------------------------------------------------------------------------------------

DRAFTS = {"chain": DRAFT_CHAIN, "tree": DRAFT_CHAIN, "adaptive": DRAFT_CHAIN, "medusa": DRAFT_MEDUSA}
VERIFICATIONS = {"sample": VERIFY_SAMPLE, "greedy": VERIFY_GREEDY}


@dataclass(frozen=True)
class TreeConfig:
    """How one target call's draft tree is built and verified (module doc).

    kind: ``chain`` (width 1), ``tree`` (the ``widths`` schedule), ``adaptive``
    (seed 000's width from confidence, maximum ``max_width``) or ``medusa``
    (per-depth heads, ``widths`` schedule); budget: drafted nodes per call;
    verification: ``sample`` (lossless multi-draft rejection sampling) or
    ``greedy``; max_depth: level cap (default: the budget).
    """

    kind: str = "tree"
    budget: int = 8
    widths: tuple[int, ...] = (3, 1)
    max_width: int = 3
    verification: str = "sample"
    max_depth: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in DRAFTS:
            raise InputError(f"tree kind: must be one of {', '.join(DRAFTS)} (value {self.kind!r})")
        if self.verification not in VERIFICATIONS:
            raise InputError(f"tree verification: must be sample or greedy (value {self.verification!r})")
        if isinstance(self.budget, bool) or not isinstance(self.budget, (int, np.integer)) \
                or not 1 <= self.budget <= 256:
            raise InputError(f"option '--budgets': a node budget must be an integer in [1, 256] "
                             f"(value {self.budget!r})")
        if not self.widths or any(isinstance(w, bool) or not isinstance(w, (int, np.integer)) or not 1 <= w <= 64
                                  for w in self.widths):
            raise InputError(f"option '--widths': widths must be integers in [1, 64] (value {self.widths!r})")
        if isinstance(self.max_width, bool) or not isinstance(self.max_width, (int, np.integer)) \
                or not 1 <= self.max_width <= 64:
            raise InputError(f"option '--max-width': must be an integer in [1, 64] (value {self.max_width!r})")
        if self.max_depth is not None and (not isinstance(self.max_depth, (int, np.integer)) or self.max_depth < 1):
            raise InputError(f"tree max_depth: must be an integer >= 1 (value {self.max_depth!r})")

    @property
    def label(self) -> str:
        """Short description, e.g. ``tree 3,1`` or ``adaptive <=3``."""
        if self.kind == "chain":
            return "chain"
        if self.kind == "adaptive":
            return f"adaptive <={self.max_width}"
        return f"{self.kind} {','.join(str(w) for w in self.widths)}"

    def kernel_args(self) -> tuple:
        """(budget, widths int64, max_width, adaptive, max_depth, draft_kind, verify) for the kernels."""
        widths = (1,) if self.kind == "chain" else self.widths
        return (int(self.budget), np.asarray(widths, dtype=np.int64), int(self.max_width), self.kind == "adaptive",
                int(self.max_depth if self.max_depth is not None else self.budget), DRAFTS[self.kind],
                VERIFICATIONS[self.verification])


@dataclass(frozen=True)
class TreeResult:
    """Totals of tree decoding over ``sequences`` sequences of ``length`` tokens.

    ``stats`` float64 (N_TREE_STATS,) the T_* statistics summed over sequences;
    ``per_sequence`` float64 (sequences, N_TREE_STATS) the same per sequence.
    """

    config: TreeConfig
    length: int
    sequences: int
    cost_ratio: float
    stats: np.ndarray
    per_sequence: np.ndarray | None = None

    @property
    def calls(self) -> float:
        """Total target calls."""
        return float(self.stats[T_CALLS])

    @property
    def tokens_per_call(self) -> float:
        """Emitted tokens / target calls (the last call not truncated)."""
        return float(self.stats[T_EMITTED] / self.stats[T_CALLS])

    @property
    def nodes_per_call(self) -> float:
        """Drafted nodes per call (the budget, unless ``max_depth`` stops the tree earlier)."""
        return float(self.stats[T_NODES] / self.stats[T_CALLS])

    @property
    def depth(self) -> float:
        """Mean tree depth (levels) per call."""
        return float(self.stats[T_DEPTH] / self.stats[T_CALLS])

    @property
    def draft_steps_per_call(self) -> float:
        """Sequential draft steps per call (levels; 1 for Medusa heads)."""
        return float(self.stats[T_DRAFT_STEPS] / self.stats[T_CALLS])

    @property
    def accepted_per_node(self) -> float:
        """Accepted nodes / drafted nodes."""
        return float(self.stats[T_ACCEPTED] / self.stats[T_NODES])

    @property
    def calls_per_token(self) -> float:
        """Target calls / generated tokens."""
        return float(self.stats[T_CALLS] / self.stats[T_LENGTH])

    @property
    def speedup(self) -> float:
        """length / (calls + c * draft steps): autoregressive time over tree time."""
        return float(self.stats[T_LENGTH] / (self.stats[T_CALLS] + self.cost_ratio * self.stats[T_DRAFT_STEPS]))


def simulate_tree(model: SyntheticModel, config: TreeConfig, length: int, samples: int,
                  cost_ratio: float = 0.05) -> TreeResult:
    """Decode ``samples`` sequences of ``length`` tokens with draft trees (parallel over sequences).

    Sequence i starts from the same prompt as :func:`evolve.sim.decoding.simulate_chain`'s
    sequence i of that length. Raises InputError for bad options.
    """
    cost_ratio = check_cost_ratio(cost_ratio)
    jobs = sequence_jobs(model, [int(length)], int(samples))
    out = np.zeros((samples, N_TREE_STATS))
    tree_batch(model.useed, model.useed, jobs["keys"], jobs["windows"], jobs["t0s"], jobs["d_prevs"], jobs["lengths"],
               model.params, model.log_rank, *config.kernel_args(), False, out, np.zeros((samples, 0), np.int64))
    return TreeResult(config, int(length), int(samples), cost_ratio, out.sum(axis=0), out)


def tree_at_context(model: SyntheticModel, config: TreeConfig, context: Context, n: int, n_tokens: int = 1,
                    seed: int = 0, _broken: bool = False) -> np.ndarray:
    """``n`` independent tree decodes of ``n_tokens`` tokens from one fixed context: int64 (n, n_tokens).

    ``_broken`` (tests only) skips the residual update of sampling verification.
    """
    jobs = context_jobs(context, int(n), int(n_tokens))
    out = np.zeros((n, n_tokens), dtype=np.int64)
    tree_batch(model.useed, np.uint64(seed), jobs["keys"], jobs["windows"], jobs["t0s"], jobs["d_prevs"],
               jobs["lengths"], model.params, model.log_rank, *config.kernel_args(), bool(_broken),
               np.zeros((n, N_TREE_STATS)), out)
    return out


def medusa_head(model: SyntheticModel, context: Context, k: int) -> np.ndarray:
    """Head k's proposal distribution (float64 (V,)) at a verified context: position t + k, verified window only.

    It never sees the tokens drafted at depths < k; head 0 equals the chain draft q at depth 0.
    """
    V = int(model.vocab_size)
    p, q, work = np.empty(V), np.empty(V), np.empty(V)
    position_pair(model.useed, int(context.position) + int(k), np.ascontiguousarray(context.window, np.int64),
                  float(context.d_prev), int(k), model.params, model.log_rank, p, q, work)
    return q


def draft_tree(model: SyntheticModel, config: TreeConfig, context: Context,
               seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The draft tree one call builds at a fixed context: (parents, tokens, levels), int64 (n_nodes,) each.

    Parents index the returned nodes (-1 = child of the root), in breadth-first
    order, ready for :func:`tree_attention_mask`.
    """
    budget, widths, max_width, adaptive, max_depth, kind, verify = config.kernel_args()
    V, K = int(model.vocab_size), int(model.window)
    m = budget + 1
    buf = np.zeros(K + context.position + m + 1, dtype=np.int64)
    buf[context.position:context.position + K] = context.window
    P, Q = np.empty((m, V)), np.empty((m, V))
    ints = [np.empty(m, dtype=np.int64) for _ in range(7)]
    parent, token, level, child_start, child_count, argp, picks = ints
    rng = seed_state(np.uint64(seed), np.uint64(0), STREAM_DECODE + 200)
    n, _ = build_tree(model.useed, rng, buf, int(context.position), K, float(context.d_prev), model.params,
                      model.log_rank, budget, widths, max_width, adaptive, max_depth, kind, verify, P, Q, parent,
                      token, level, child_start, child_count, np.empty(m), argp, np.empty(m, dtype=np.bool_),
                      np.empty(m, dtype=np.int64), np.empty(K, dtype=np.int64), np.empty(V), np.empty(V), picks)
    parents = parent[1:n] - 1  # kernel node k is returned node k - 1; the root (0) becomes -1
    return parents, token[1:n].copy(), level[1:n].copy()


def tree_tokens(model: SyntheticModel, config: TreeConfig, length: int, sample: int = 0,
                key_length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Tokens (int64 (length,)) and stats of one tree-decoded sequence from prompt job_key(key_length, sample)."""
    jobs = sequence_jobs(model, [int(key_length if key_length is not None else length)], 1, int(sample))
    jobs["lengths"][:] = int(length)
    out = np.zeros((1, int(length)), dtype=np.int64)
    stats = np.zeros((1, N_TREE_STATS))
    tree_batch(model.useed, model.useed, jobs["keys"], jobs["windows"], jobs["t0s"], jobs["d_prevs"], jobs["lengths"],
               model.params, model.log_rank, *config.kernel_args(), False, stats, out)
    return out[0], stats[0]

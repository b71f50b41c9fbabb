"""Draft trees of the harvest (``--tree-nodes N --tree-width K``): growing a tree, its per-node columns, one tree step.

A tree step (:func:`tree_step`) of one text, batch of one row:

1. Growth (:func:`grow_tree`), best-first as EAGLE-2 (Li et al. 2024, arXiv 2406.16858) but with
   children drawn i.i.d. *with replacement* from the drafter's distribution, so that SpecInfer's
   recursive rejection sampling (Miao et al. 2024, arXiv 2305.09781) is lossless on the tree
   (:mod:`evolve.engine.tree_verify`). Drafter pass 0 gives q at the root; expanding a node draws
   min(K, budget left) children from q(.|node), one uniform each (inverse CDF,
   :func:`evolve.engine.distributions.sample_index`). The root is expanded first; then each round
   runs one drafter pass over the tree built so far (q at every new node) and expands, among the
   nodes not expanded yet, the K with the highest cumulative draft probability (product of q(x)
   along the path; ties by node index), best first, until N nodes exist or no node can be
   expanded. A node whose token is an end-of-sequence id, or at the depth limit (the text's
   remaining budget minus one), is never expanded. How many children a node gets depends only on
   what was drawn before them, never on their own tokens. One more drafter pass gives q at the
   nodes of the last round (the features of the leaves), unless the last round added nothing.
2. One target pass over the context and all nodes (tree attention,
   :meth:`evolve.engine.runner.Runner.tree`) gives p at the root and at every node.
3. The chain records: the tree's first path (sibling 0 at every depth) recorded as one ordinary
   block (:func:`evolve.engine.distributions.block_records`) with fresh acceptance uniforms.
4. The text advances by SpecInfer's recursive rejection sampling on the whole tree
   (:func:`evolve.engine.tree_verify.specinfer_verify`): the accepted path plus one token.

Random draws of a step, in this order from the text's stream: one uniform per drawn child in
creation order (the root's children, then each round's expansions best first), one acceptance
uniform per node of the first path, then SpecInfer's (one per tested child in verification order,
then one for the emitted token).

Nodes are numbered in creation order: a parent comes before its children, and the children of one
node are contiguous and in draw order (SpecInfer tries them in that order). Probabilities are
float64 from :func:`evolve.engine.distributions.distributions`, entropies in nats.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from evolve.engine.distributions import block_records, sample_index
from evolve.engine.tree_verify import specinfer_expected_tokens, specinfer_verify, traversal_expected_tokens
from evolve.traces.tree_tables import RELAX_COLUMNS, RELAX_GRID, TREE_COLUMNS
from evolve.verification.block import relaxed_target
from evolve.verification.tokenwise import residual_distribution

#: The growth rule, as written into a tree harvest's metadata.
GROWTH_RULE = ("best-first (EAGLE-2 style): drafter pass at the root, expand the root; then per round one drafter "
               "pass over the tree and expand the K unexpanded nodes of highest cumulative draft probability "
               "(ties by node index), best first, each with min(K, budget left) children drawn i.i.d. with "
               "replacement from q(.|node) by inverse CDF; never expand an end-of-sequence node or a node at the "
               "depth limit (max_new_tokens - generated - 1); stop at N nodes or when nothing can be expanded")
#: The order of a tree step's random draws, as written into the metadata.
DRAW_ORDER = ("per tree step: one uniform per drawn child in creation order; then one acceptance uniform per node "
              "of the first path (the chain records' rand_value); then SpecInfer's uniforms (one per tested child, "
              "one for the emitted token); a last step with one token left: one uniform (the target's token)")

#: ``draft_pass(parents, tokens) -> (q float64 (n + 1, V), entropies float64 (n + 1,))``: the drafter's
#: distributions at the root (row 0) and after every node i (row i + 1) of the tree given so far.
DraftPass = Callable[[Sequence[int], Sequence[int]], tuple[np.ndarray, np.ndarray]]


@dataclass
class DraftTree:
    """A grown draft tree of n nodes (creation order: parents first, siblings contiguous in draw order).

    ``parents``, ``tokens``, ``depth`` (1 for a child of the root), ``sibling`` (draw index among its
    parent's children), ``children`` (children drawn at the node): int lists of length n;
    ``cumprob`` float list (product of q(x) from the root); ``root_children``; ``q`` and ``q_ent``:
    per row (0 the root, i + 1 node i) the drafter's float64 (V,) distribution and its entropy (nats),
    from the first drafter pass that computed it (None while unknown); ``passes``: drafter passes run.
    """

    parents: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)
    sibling: list[int] = field(default_factory=list)
    children: list[int] = field(default_factory=list)
    cumprob: list[float] = field(default_factory=list)
    root_children: int = 0
    q: list = field(default_factory=list)
    q_ent: list = field(default_factory=list)
    passes: int = 0

    @property
    def n(self) -> int:
        """Number of drafted nodes."""
        return len(self.tokens)

    def q_rows(self) -> np.ndarray:
        """The drafter's distributions, float64 (n + 1, V). Raises ValueError while a row is unknown."""
        if any(r is None for r in self.q):
            raise ValueError("DraftTree.q_rows: a node's drafter distribution is not known yet")
        return np.stack(self.q)

    def first_path(self) -> list[int]:
        """The nodes of sibling 0 at every depth from the root, down to the first node without children."""
        first_child: dict[int, int] = {}
        for i, par in enumerate(self.parents):
            first_child.setdefault(par, i)
        path, node = [], first_child.get(-1)
        while node is not None:
            path.append(node)
            node = first_child.get(node)
        return path

    def _learn(self, q: np.ndarray, ent: np.ndarray) -> None:
        """Keep the rows of a drafter pass for the rows not known yet (rows 0..n)."""
        for r in range(len(self.q)):
            if self.q[r] is None:
                self.q[r], self.q_ent[r] = q[r], float(ent[r])

    def _expand(self, node: int, k: int, uniform: Callable[[], float]) -> None:
        """Draw ``k`` children of ``node`` (-1: the root) i.i.d. from its q, one uniform each."""
        row = self.q[node + 1]
        base_depth = self.depth[node] if node >= 0 else 0
        base_prob = self.cumprob[node] if node >= 0 else 1.0
        for s in range(k):
            x = sample_index(row, uniform())
            self.parents.append(node)
            self.tokens.append(int(x))
            self.depth.append(base_depth + 1)
            self.sibling.append(s)
            self.children.append(0)
            self.cumprob.append(base_prob * float(row[x]))
            self.q.append(None)
            self.q_ent.append(None)
        if node >= 0:
            self.children[node] = k
        else:
            self.root_children = k


def grow_tree(draft_pass: DraftPass, nodes: int, width: int, max_depth: int, eos: set[int] | frozenset[int],
              uniform: Callable[[], float], leaves: bool = True) -> DraftTree:
    """Grow a draft tree by the best-first rule of the module doc.

    Args:
        draft_pass: the drafter over a tree (:data:`DraftPass`); called once with no nodes (the root),
            once per round, and once more when the last round's nodes have no q yet.
        nodes: N >= 1, the node budget; width: K >= 1, children per expansion and expansions per round.
        max_depth: D >= 1, the deepest a node may be (a node at depth D is never expanded).
        eos: end-of-sequence ids (never expanded).
        uniform: a uniform in [0, 1) per drawn child (the text's random stream).
        leaves: run the last pass (q at the last round's nodes, which are leaves: only their features need it);
            without it those rows stay None (live decoding, :mod:`evolve.live.tree_decoding`). It draws no uniform.

    Returns: the :class:`DraftTree` (1 <= n <= N nodes), with q known at every row (with ``leaves``).
    Raises: ValueError for N, K or D below 1.
    """
    if nodes < 1 or width < 1 or max_depth < 1:
        raise ValueError(f"grow_tree: nodes, width and max_depth must be >= 1 (got {nodes}, {width}, {max_depth})")
    tree = DraftTree(q=[None], q_ent=[None])

    def run_pass() -> None:
        q, ent = draft_pass(tree.parents, tree.tokens)
        tree.passes += 1
        tree._learn(q, ent)

    run_pass()
    tree._expand(-1, min(width, nodes), uniform)
    while tree.n < nodes:
        run_pass()
        candidates = [i for i in range(tree.n) if tree.children[i] == 0 and tree.tokens[i] not in eos
                      and tree.depth[i] < max_depth]
        if not candidates:
            break
        for i in sorted(candidates, key=lambda i: (-tree.cumprob[i], i))[:width]:
            k = min(width, nodes - tree.n)
            if k <= 0:
                break
            tree._expand(i, k, uniform)
    if leaves and any(r is None for r in tree.q):
        run_pass()
    return tree


def node_columns(parents: Sequence[int], tokens: Sequence[int], p: np.ndarray, q: np.ndarray,
                 q_ent: np.ndarray, p_ent: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The per-node columns of ``{split}.trees.parquet`` (all but ``seq_id``, ``tree``, ``position``).

    Args: ``parents`` (n,) (-1 or an earlier node), ``tokens`` (n,) ids, ``p`` and ``q`` float64 (n + 1, V)
    the target's and drafter's distributions (row 0 the root, row i + 1 after node i), ``q_ent`` float64
    (n + 1,) the drafter's entropies (nats).

    Returns: {column: array (n,)}, int64 or float64 (:data:`evolve.traces.tree_tables.TREE_COLUMNS`): ``node``, ``parent``, ``depth``,
    ``sibling``, ``token``, ``draft_prob`` q(x|parent), ``target_prob`` p(x|parent), ``residual_prob``
    R_s(x) (R_0 = p(.|parent), R_{i+1} = normalise(max(0, R_i - q(.|parent))), s = sibling),
    ``draft_cumprob``, ``node_draft_top_prob``, ``node_draft_entropy``, ``node_target_top_prob`` (at the
    node), ``children``; and per tree, repeated: ``tree_nodes``, ``root_draft_top_prob``,
    ``root_draft_entropy``, ``root_children``, ``specinfer_tokens`` and ``traversal_tokens`` (exact
    expected tokens of one call on the tree, :mod:`evolve.engine.tree_verify`).

    Raises: ValueError for malformed inputs (as :func:`evolve.engine.tree_verify.specinfer_expected_tokens`).
    """
    par = np.asarray(parents, dtype=np.int64)
    x = np.asarray(tokens, dtype=np.int64)
    n = int(x.shape[0])
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape or p.ndim != 2 or p.shape[0] != n + 1 or par.shape != (n,):
        raise ValueError(f"node_columns: p, q must be (n + 1, V) = ({n + 1}, V) and parents (n,) "
                         f"(shapes {p.shape}, {q.shape}, {par.shape})")
    rows = par + 1
    draft_prob, target_prob = q[rows, x], p[rows, x]
    depth = np.zeros(n, dtype=np.int64)
    sibling = np.zeros(n, dtype=np.int64)
    cum = np.zeros(n, dtype=np.float64)
    counts = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        r = int(rows[i])
        if r > i:
            raise ValueError(f"node_columns: node {i} has parent {r - 1} (needs -1 <= parent < {i})")
        depth[i] = 1 if r == 0 else depth[r - 1] + 1
        cum[i] = draft_prob[i] * (1.0 if r == 0 else cum[r - 1])
        sibling[i] = counts[r]
        counts[r] += 1
    relaxed = _relaxed_residuals(rows, x, p, q)
    residual = relaxed[:, 0].copy()  # w = 0: the mixture is p, so this is SpecInfer's R_s(x)
    si = specinfer_expected_tokens(par, x, p, q)
    tv = traversal_expected_tokens(par, x, p, q)
    q_ent = np.asarray(q_ent, dtype=np.float64)
    return {
        "node": np.arange(n, dtype=np.int64), "parent": par, "depth": depth, "sibling": sibling, "token": x,
        "draft_prob": draft_prob, "target_prob": target_prob, "residual_prob": residual, "draft_cumprob": cum,
        "node_draft_top_prob": q[1:].max(axis=1), "node_draft_entropy": q_ent[1:],
        "node_target_top_prob": p[1:].max(axis=1), "children": counts[1:].copy(),
        "tree_nodes": np.full(n, n, dtype=np.int64), "root_draft_top_prob": np.full(n, float(q[0].max())),
        "root_draft_entropy": np.full(n, float(q_ent[0])), "root_children": np.full(n, counts[0], dtype=np.int64),
        "specinfer_tokens": np.full(n, si), "traversal_tokens": np.full(n, tv),
        **_relax_columns(p, q, p_ent, relaxed, n),
    }


def _relaxed_residuals(rows: np.ndarray, x: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """float64 (n, len(RELAX_GRID)): R~_s(x) of every node at every w of the grid, R~_0 = (1 - w) p + w q at the
    parent (:func:`evolve.verification.block.relaxed_target`) and R~_{i+1} = normalise(max(0, R~_i - q)) after
    each earlier sibling, unchanged when its mass is 0 (:func:`evolve.verification.tokenwise.residual_distribution`
    with tau = 1).
    Column 0 (w = 0, the mixture is p) is SpecInfer's residual, the column ``residual_prob``."""
    grid = np.asarray(RELAX_GRID)
    out = np.zeros((x.shape[0], grid.size))
    current: dict[int, np.ndarray] = {}
    for i in range(x.shape[0]):
        r = int(rows[i])
        if r not in current:
            current[r] = relaxed_target(p[r], q[r], grid)  # (G, V): one relaxed target per w of the grid
        else:  # SpecInfer's residual update of every row, the standard rule's residual (tau = 1)
            current[r] = residual_distribution(current[r], q[r][None, :], 1.0)
        out[i] = current[r][:, x[i]]
    return out


def _entropy_rows(d: np.ndarray) -> np.ndarray:
    """Entropy (nats) of every row of probabilities d (m, V)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(d > 0.0, d * np.log(np.where(d > 0.0, d, 1.0)), 0.0).sum(axis=1)


def _relax_columns(p: np.ndarray, q: np.ndarray, p_ent: np.ndarray | None, relaxed: np.ndarray,
                   n: int) -> dict[str, np.ndarray]:
    """The columns of :data:`evolve.traces.tree_tables.RELAX_COLUMNS` (target entropies from ``p_ent`` when given)."""
    h = np.asarray(p_ent, dtype=np.float64) if p_ent is not None else _entropy_rows(p)
    overlap = np.minimum(p, q).sum(axis=1)
    match = (p.argmax(axis=1) == q.argmax(axis=1)).astype(np.int64)
    return {"node_target_entropy": h[1:], "node_overlap": overlap[1:], "node_top_token_match": match[1:],
            "relaxed_residual_prob": relaxed, "root_target_entropy": np.full(n, float(h[0])),
            "root_target_top_prob": np.full(n, float(p[0].max())), "root_overlap": np.full(n, float(overlap[0])),
            "root_top_token_match": np.full(n, int(match[0]), dtype=np.int64)}


@dataclass
class TreeStep:
    """One tree step of a text: the tree, the target's rows (p float64 (n + 1, V), entropies (n + 1,)),
    the first path (nodes) and its chain records (:func:`block_records` columns, None without a path),
    SpecInfer's accepted path (nodes) and the emitted tokens, and the per-node columns
    (:func:`node_columns`)."""

    tree: DraftTree
    p: np.ndarray
    p_ent: np.ndarray
    chain: list[int]
    chain_records: dict[str, np.ndarray] | None
    accepted: list[int]
    emitted: list[int]
    columns: dict[str, np.ndarray]


def drafter_pass(engine, draft_kv, ctx: Sequence[int]) -> DraftPass:
    """The :data:`DraftPass` of a text's tree step: one tree pass of the engine's drafter (``engine.drafter.run.tree``)
    over ``ctx`` and the tree given, on the drafter's own one-row cache ``draft_kv`` (holding a prefix of
    ``ctx[:-1]``, left holding ``ctx[:-1]`` after every pass: the root's token is fed again by the next pass);
    distributions by ``engine.distributions`` (float64 rows, :class:`evolve.engine.onehot.OneHot` at temperature 0)."""
    drafter_run = engine.drafter.run
    keep = len(ctx) - 1

    def draft_pass(parents, tokens):
        logits = drafter_run.tree(draft_kv, ctx[draft_kv.lengths[0]:], parents, tokens)
        draft_kv.truncate(0, keep)  # keep ctx[:-1]: the root's token is fed again by the next pass
        draft_kv.compact()
        return engine.distributions(logits)

    return draft_pass


def tree_step(engine, kv, draft_kv, ctx: Sequence[int], rng: np.random.Generator, nodes: int, width: int,
              max_depth: int) -> TreeStep:
    """One tree step of a text (module doc): grow, verify with the target, record, advance by SpecInfer.

    Args:
        engine: the :class:`evolve.harvest.loop.SpeculativeEngine` (its target runner ``run``, its
            drafter's runner ``drafter.run``, ``distributions`` and ``eos``).
        kv: the target's :class:`evolve.engine.runner.BatchKV` of one row holding a prefix of ``ctx``
            (at least its last token uncached); afterwards it holds all of ``ctx`` and the accepted path
            (:func:`keep_emitted_path`): all but the last emitted token of the text the step leaves.
        draft_kv: the drafter's own one-row cache, holding ``ctx[:-1]`` (or a shorter prefix); afterwards
            it holds ``ctx[:-1]``.
        ctx: the text so far (prompt + generated ids); not modified.
        rng: the text's random stream (draws in the module doc's order).
        nodes, width: N >= 1 and K >= 1; max_depth: D >= 1, the text's remaining budget minus one.

    Returns: the :class:`TreeStep`; its ``emitted`` tokens (1..D + 1 ids) are to be appended to ``ctx``.
    Raises: ValueError for N, K or D below 1.
    """
    tree = grow_tree(drafter_pass(engine, draft_kv, ctx), nodes, width, max_depth, engine.eos, rng.random)
    q, q_ent = tree.q_rows(), np.asarray(tree.q_ent, dtype=np.float64)
    p, p_ent = engine.distributions(engine.run.tree(kv, ctx[kv.lengths[0]:], tree.parents, tree.tokens, keep=True))
    p, p_ent = np.asarray(p, dtype=np.float64), np.asarray(p_ent, dtype=np.float64)
    chain = tree.first_path()
    records = None
    if chain:
        rows = [tree.parents[i] + 1 for i in chain]
        u = rng.random(len(chain))
        records = block_records(p[rows], q[rows], p_ent[rows], q_ent[rows], [tree.tokens[i] for i in chain], u)
    accepted, nxt = specinfer_verify(tree.parents, tree.tokens, p, q, rng)
    emitted = emitted_tokens(tree.tokens, accepted, nxt, engine.eos, max_depth)
    keep_emitted_path(kv, tree.n, accepted, emitted)
    columns = node_columns(tree.parents, tree.tokens, p, q, q_ent, p_ent)
    return TreeStep(tree, p, p_ent, chain, records, accepted, emitted, columns)


def emitted_tokens(tokens: Sequence[int], accepted: Sequence[int], nxt: int, eos, max_depth: int) -> list[int]:
    """The tokens a tree step emits: the accepted nodes' ``tokens`` (root down), then the verification's next token
    ``nxt`` unless the last accepted token is an end-of-sequence id, at most ``max_depth`` + 1 of them (the text's
    remaining budget)."""
    emitted = [int(tokens[i]) for i in accepted]
    if not (accepted and emitted[-1] in eos):
        emitted.append(int(nxt))
    return emitted[:max_depth + 1]


def keep_emitted_path(kv, nodes: int, accepted: Sequence[int], emitted: Sequence[int]) -> None:
    """After a target tree pass with ``keep`` over ``nodes`` nodes (:meth:`evolve.engine.runner.Runner.tree`): keep
    the accepted nodes' keys and values that the step emitted, all but the last emitted token, which the next pass
    feeds (:meth:`evolve.engine.runner.BatchKV.keep_path`), so a pass is over the kept nodes + 1 tokens."""
    kv.keep_path(nodes, list(accepted)[:len(emitted) - 1])


def tree_settings(nodes: int, width: int) -> dict:
    """The ``tree`` entry of a tree harvest's metadata: N, K, the growth rule, the order of the random draws,
    the verification and the table's file name."""
    return {"nodes": int(nodes), "width": int(width), "growth": GROWTH_RULE, "draws": DRAW_ORDER,
            "verification": "SpecInfer recursive rejection sampling (lossless), arXiv 2305.09781",
            "chain": "the first path (sibling 0 at every depth) recorded as one block per tree step",
            "table": "{split}.trees.parquet", "columns": {c.name: c.dtype for c in TREE_COLUMNS + RELAX_COLUMNS}}


__all__ = ["DRAW_ORDER", "DraftPass", "DraftTree", "GROWTH_RULE", "TreeStep", "drafter_pass", "emitted_tokens",
           "grow_tree", "keep_emitted_path", "node_columns", "tree_settings", "tree_step"]

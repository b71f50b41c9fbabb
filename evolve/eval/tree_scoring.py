"""Tree shapes from records: which subtree of each harvested draft tree to verify, scored in tokens per second.

A harvested draft tree (:mod:`evolve.traces.tree_tables`) holds, at every node the harvest expanded, children
drawn i.i.d. from the drafter. A *tree shape* decides, node by node, how many of those children to keep:
a program of kind ``tree-shape`` (:mod:`evolve.kinds.registry`) or a named shape
(:mod:`evolve.eval.tree_competitors`) gives a value v at every decision point (the root and every kept
node) and the node keeps its first k = min(ceil(v), children drawn) children in draw order (v <= 0 or
NaN: none). The decision reads only what is known before the node's children are drawn, the drafter's
side of the node and of its level:

* ``draft_prob``: q(x | parent) of the node's token (1 at the root);
* ``draft_top_prob``, ``draft_entropy``: largest probability and entropy (nats) of the drafter's
  distribution the node was drawn from (at the root: 1 and 0, nothing drafted yet);
* ``draft_cumprob``: the product of draft_prob from the root down to the node (1 at the root);
* ``draft_index``: the node's depth (0 at the root); ``position``: the text position of the node's
  children (tokens generated before the step + depth), as a chain record's position of its drafted token;
* ``level_cumprob``, ``level_rank`` (:data:`evolve.gp.primitives.LEVEL_FEATURES`): the node's *level* is the
  set of nodes the shape keeps at its depth in its tree; ``level_cumprob`` is the largest draft_cumprob
  there and ``level_rank`` the node's rank there by draft_cumprob (0 = the most probable, ties in draw
  order): EAGLE-2 expands the top-k nodes of each level (Li et al. 2024, arXiv 2406.16858). Both are known
  once the level above has been expanded and its children drawn, before any node of the level is expanded,
  so a program reading them is evaluated level by level (:mod:`evolve.eval.tree_levels`); the level is
  the shape's own tree before the node budget, so such a program is scored without a binding budget.

A deterministic tree (suffix decoding, :mod:`evolve.engine.suffix_tree`: distinct children each proposed with
certainty, q one-hot) has no distribution to draw from; there the drafter's side of a node is the suffix trees'
estimate: ``draft_prob`` is the token's estimated probability given its parent (``suffix_prob``) and
``draft_cumprob`` its path's (``suffix_cumprob``, also the expansion priority below); ``draft_top_prob`` and
``draft_entropy`` stay those of the one-hot q (1 and 0). A kept child's acceptance is the one-hot q's,
a = R_s(x).

So a shape never looks at a child's own token to keep it, and every kept child is one of the node's
i.i.d. draws: SpecInfer's recursive rejection sampling (Miao et al. 2024, arXiv 2305.09781) on the kept
tree is lossless, and its expected tokens are exact from the rows: a kept child with sibling index s is
accepted, when tried, with probability a = min(1, R_s(x) / q(x)) (``residual_prob``, which depends on s
only, not on the earlier siblings' tokens), so

    P(node accepted) = P(parent accepted) * prod_{kept earlier siblings} (1 - a_sib) * a_node,
    tokens per call = 1 + sum over kept nodes of P(node accepted).

Expansion order and node budget: kept nodes are expanded best first by ``draft_cumprob`` (EAGLE-2's
value, Li et al. 2024, arXiv 2406.16858), ties by row, until ``budget`` nodes are kept; children past
the budget are dropped. Nodes the harvest did not expand are leaves for every shape (the harvest's own
tree, ``--tree-nodes N``, bounds every shape scored on it).

Cost of one call (:mod:`evolve.eval.costs`): the target verifies the n kept nodes in one forward over
n + 1 tokens (``verify_seconds(n)``; a plain step for n = 0); the drafter runs one pass per depth at which
some node is expanded, over the m nodes expanded there, costing ``draft_token_s`` times the target's
relative cost of an m-token forward (``forward_seconds(m) / forward_seconds(1)``: the drafter's cost is
assumed to grow with m as the target's does; exact for a chain, m = 1). Tokens per second = sum of
expected tokens / sum of seconds over the split's trees; speedup = tokens per second * plain_token_s.

Scope: shapes are compared within the harvested trees (same draws, same target), under SpecInfer's
verification; traversal verification (Weng et al. 2025, arXiv 2505.12398) is scored for the whole
harvested tree only (``traversal_tokens``, computed at harvest from the full distributions), since its
outcome on a subtree needs the distributions, not just the rows.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.eval.evaluator import EvalData
from evolve.gp.primitives import FEATURES, LEVEL_FEATURES
from evolve.errors import InputError
from evolve.traces.tree_tables import RELAX_COLUMN_NAMES, RELAX_GRID, TreeTable
from evolve.verification.tokenwise import standard_threshold

#: Features a tree-shape program reads (:data:`evolve.kinds.tree_shape.KIND`).
SHAPE_FEATURES: tuple[str, ...] = ("draft_prob", "position", "draft_entropy", "draft_index", "draft_top_prob",
                                   "draft_cumprob") + LEVEL_FEATURES
#: Length of the counts record of :func:`shape_counts`.
N_SHAPE_COUNTS = 6
#: The ``per_tree`` argument of :func:`shape_counts` when no per-tree figures are wanted.
NO_TREES = np.zeros((0, 2))


@dataclass(frozen=True)
class ShapeMetrics:
    """A tree shape's metrics on one split (per target call; expectations exact from the rows).

    ``trees``: calls scored; ``tokens_per_call``: expected tokens per call; ``seconds_per_call`` under the cost
    file; ``tokens_per_second`` = their ratio; ``speedup`` = tokens per second * plain_token_s; ``mean_nodes``:
    drafted nodes verified per call; ``mean_passes``: drafter passes per call; ``tv_per_token``: expected TV
    per emitted token (0 for SpecInfer against the target; w (1 - overlap) per token emitted at a context
    verified against the mixture (1 - w) p + w q, :func:`relaxed_accept`).
    """

    trees: int
    tokens_per_call: float
    seconds_per_call: float
    tokens_per_second: float
    speedup: float
    mean_nodes: float
    mean_passes: float
    tv_per_token: float = 0.0

    def to_dict(self) -> dict:
        """Plain dict of the fields."""
        return asdict(self)

    @property
    def mean_verified(self) -> float:
        """Drafted tokens the target verifies per call (the kept nodes), as a verification-length policy's."""
        return self.mean_nodes

    @property
    def mean_drafted(self) -> float:
        """Drafter steps per call, as a concurrency model counts them (one batched step each): the drafter
        passes (one per depth with an expansion), not the nodes."""
        return self.mean_passes


class TreeRows(NamedTuple):
    """The tree structure :func:`shape_counts` walks (a Numba-compatible record, :attr:`ShapeData.tree_rows`):
    ``starts`` int64 (trees + 1,), ``first_child``, ``n_children`` int64 (rows,), ``priority`` float64 (rows,),
    ``depth`` int64 (rows,), as in :class:`ShapeData`."""

    starts: np.ndarray
    first_child: np.ndarray
    n_children: np.ndarray
    priority: np.ndarray
    depth: np.ndarray


@dataclass(frozen=True)
class ShapeData:
    """The decision rows of a tree table: per tree, the root's row then one row per node (rows of tree t:
    ``starts[t]..starts[t+1]-1``, the root first).

    ``decisions``: an :class:`EvalData` whose features are :data:`SHAPE_FEATURES` (the target's core
    features NaN: a shape may not read them; the level features NaN until
    :func:`evolve.eval.tree_levels.shape_values` fills them); ``starts`` int64 (trees + 1,); ``parent_row``
    int64 (-1 at roots); ``first_child`` int64 (row of the first child drawn, -1 for none); ``n_children``
    int64 (children drawn); ``accept`` float64 (SpecInfer's acceptance probability when tried; 0 at roots); ``priority``
    float64 (draft_cumprob, 1 at roots); ``depth`` int64 (0 at roots); ``table``: the :class:`TreeTable`.
    With the table's relaxation columns: ``contexts``, an :class:`EvalData` of what a relaxation program reads
    at every decision row's context (the drafter's and target's entropies and top probabilities, ``overlap``,
    ``top_token_match``, ``draft_index`` = depth, ``position``; the drafted token's probabilities NaN);
    ``relaxed`` float64 (rows, len(RELAX_GRID)) (``relaxed_residual_prob``, zeros at roots); ``overlap``
    float64 (rows,) at each context. None without them.
    """

    decisions: EvalData
    starts: np.ndarray
    parent_row: np.ndarray
    first_child: np.ndarray
    n_children: np.ndarray
    accept: np.ndarray
    priority: np.ndarray
    depth: np.ndarray
    table: TreeTable
    contexts: EvalData | None = None
    relaxed: np.ndarray | None = None
    overlap: np.ndarray | None = None

    @property
    def trees(self) -> int:
        """Number of trees (calls)."""
        return int(self.starts.size - 1)

    @property
    def max_nodes(self) -> int:
        """The largest harvested tree's node count."""
        return int(np.diff(self.starts).max()) - 1

    @property
    def tree_rows(self) -> TreeRows:
        """The tree structure as the record :func:`shape_counts` takes."""
        return TreeRows(self.starts, self.first_child, self.n_children, self.priority, self.depth)


def shape_data(table: TreeTable) -> ShapeData:
    """The decision rows of ``table`` (see :class:`ShapeData`)."""
    c = table.columns
    T, n = table.trees, table.rows
    tree_of = np.repeat(np.arange(T), np.diff(table.starts))
    row_of_node = np.arange(n) + tree_of + 1  # node row r -> decision row (the tree's root row comes first)
    starts = table.starts + np.arange(T + 1)
    root_rows = starts[:-1]
    m = n + T
    parent_row = np.full(m, -1, dtype=np.int64)
    parent_row[row_of_node] = np.where(c["parent"] >= 0, root_rows[tree_of] + 1 + c["parent"], root_rows[tree_of])
    n_children = np.zeros(m, dtype=np.int64)
    n_children[row_of_node] = c["children"]
    n_children[root_rows] = table.per_tree("root_children")
    first_child = np.full(m, -1, dtype=np.int64)
    first = row_of_node[c["sibling"] == 0]
    first_child[parent_row[first]] = first
    accept = np.zeros(m)
    accept[row_of_node] = standard_threshold(c["residual_prob"], c["draft_prob"])  # SpecInfer: min(1, R(x)/q(x))
    estimated = table.deterministic  # a deterministic tree (q one-hot): the drafter's side is its estimate
    priority = np.ones(m)
    priority[row_of_node] = c["suffix_cumprob"] if estimated else c["draft_cumprob"]
    depth = np.zeros(m, dtype=np.int64)
    depth[row_of_node] = c["depth"]
    # the drafter's distribution each node was drawn from: its parent's (the root's for depth 1)
    top_at = np.ones(m)
    ent_at = np.zeros(m)
    top_at[row_of_node] = c["node_draft_top_prob"]
    ent_at[row_of_node] = c["node_draft_entropy"]
    top_at[root_rows] = table.per_tree("root_draft_top_prob")
    ent_at[root_rows] = table.per_tree("root_draft_entropy")
    rows = {"draft_prob": np.ones(m), "draft_top_prob": np.ones(m), "draft_entropy": np.zeros(m),
            "draft_cumprob": priority.copy(), "draft_index": depth.astype(np.float64),
            "position": np.repeat(table.per_tree("position"), np.diff(starts)) + depth.astype(np.float64)}
    rows["draft_prob"][row_of_node] = c["suffix_prob"] if estimated else c["draft_prob"]
    rows["draft_top_prob"][row_of_node] = top_at[parent_row[row_of_node]]
    rows["draft_entropy"][row_of_node] = ent_at[parent_row[row_of_node]]
    rows.update({f: np.full(m, np.nan) for f in LEVEL_FEATURES})
    available = [f for f in FEATURES if f in rows or f in ("target_prob", "target_entropy", "top_token_match")]
    X = np.stack([rows.get(f, np.full(m, np.nan)) for f in available])
    ones = np.ones(m)
    decisions = EvalData(X, ones, np.zeros(m), np.ones(m, dtype=bool), tuple(available), source=table.source,
                         split=table.split)
    contexts = relaxed = overlap = None
    if table.relaxable:
        def at(node_col: str, root_col: str) -> np.ndarray:
            v = np.empty(m)
            v[row_of_node] = c[node_col]
            v[root_rows] = table.per_tree(root_col)
            return v

        overlap = at("node_overlap", "root_overlap")
        ctx = {"draft_entropy": ent_at, "target_entropy": at("node_target_entropy", "root_target_entropy"),
               "overlap": overlap, "top_token_match": at("node_top_token_match", "root_top_token_match"),
               "draft_top_prob": top_at, "target_top_prob": at("node_target_top_prob", "root_target_top_prob"),
               "draft_index": rows["draft_index"], "position": rows["position"]}
        names = [f for f in FEATURES if f in ctx or f in ("draft_prob", "target_prob")]
        contexts = EvalData(np.stack([ctx.get(f, np.full(m, np.nan)) for f in names]), ones, np.zeros(m),
                            np.ones(m, dtype=bool), tuple(names), source=table.source, split=table.split)
        relaxed = np.zeros((m, c["relaxed_residual_prob"].shape[1]))
        relaxed[row_of_node] = c["relaxed_residual_prob"]
    return ShapeData(decisions, starts.astype(np.int64), parent_row, first_child, n_children, accept, priority,
                     depth, table, contexts, relaxed, overlap)


@njit(cache=True)
def _width(v: float) -> int:
    """Children a value keeps: ceil(v) for v > 0, else 0 (NaN included)."""
    if not (v > 0.0):
        return 0
    if v > 1e9:
        return 1_000_000_000
    return int(math.ceil(v))


@njit(cache=True)
def kept_children(values, n_children):
    """Children each value keeps: int64 (k,), min(ceil(v), children drawn) for v > 0, else 0 (NaN included);
    ``values`` float64 (k,), ``n_children`` int64 (k,) the children drawn at those rows (the rule of
    :func:`shape_counts`, before its node budget)."""
    out = np.empty(values.size, dtype=np.int64)
    for i in range(values.size):
        out[i] = min(_width(values[i]), n_children[i])
    return out


@njit(cache=True)
def _call_seconds(forward, draft_pass, expanded, nodes):
    """(seconds, drafter passes) of a call verifying ``nodes`` nodes whose tree expands ``expanded[d]`` nodes at
    each depth d: the target's forward plus one drafter pass per depth with an expansion."""
    seconds = forward[nodes]
    passes = 0
    for d in range(expanded.size):
        if expanded[d] > 0:
            seconds += draft_pass[expanded[d]]
            passes += 1
    return seconds, passes


@njit(cache=True)
def shape_counts(values, trees, accept, damage, budget, forward, draft_pass, out, per_tree):
    """Keep, score and cost every tree under shape values (see the module doc).

    Args: ``values`` float64 (rows,) the shape's value at every decision row; ``trees`` the :class:`TreeRows`
    of a :class:`ShapeData`; ``accept`` float64 (rows,) the acceptance probability of each row when tried (as
    :class:`ShapeData`, or relaxed); ``damage`` float64 (rows,) the expected TV of the token emitted at each context when it is
    reached and has a kept child (zeros for SpecInfer against the target; a context without a kept child draws its
    token from p, no damage); ``budget`` most nodes kept per tree; ``forward`` float64 (>= budget + 1,): seconds of
    the target's call verifying 0, 1, ... nodes; ``draft_pass`` float64 (>= budget + 1,): seconds of one
    drafter pass over m = 0, 1, ... nodes. Adds to ``out`` float64 (:data:`N_SHAPE_COUNTS`,): calls,
    sum of expected tokens, sum of seconds, sum of kept nodes, sum of drafter passes, sum of expected damage;
    writes each tree's expected tokens and seconds into ``per_tree`` float64 (trees, 2) unless it has no rows
    (:data:`NO_TREES`).
    """
    starts, first_child, n_children, priority, depth = (trees.starts, trees.first_child, trees.n_children,
                                                        trees.priority, trees.depth)
    m = values.size
    kept = np.zeros(m, dtype=np.bool_)
    reach = np.zeros(m)
    for t in range(starts.size - 1):
        a, b = starts[t], starts[t + 1]
        size = b - a
        frontier = np.empty(size, dtype=np.int64)
        nf = 1
        frontier[0] = a
        expanded = np.zeros(size, dtype=np.int64)  # nodes expanded at each depth
        kept[a:b] = False
        kept[a] = True
        used = 0
        while nf > 0 and used < budget:
            best = 0
            for j in range(1, nf):
                r, s = frontier[j], frontier[best]
                if priority[r] > priority[s] or (priority[r] == priority[s] and r < s):
                    best = j
            v = frontier[best]
            frontier[best] = frontier[nf - 1]
            nf -= 1
            k = min(_width(values[v]), n_children[v], budget - used)
            if k <= 0:
                continue
            expanded[depth[v]] += 1
            for c in range(first_child[v], first_child[v] + k):
                kept[c] = True
                frontier[nf] = c
                nf += 1
            used += k
        tokens = 1.0
        harm = 0.0
        reach[a] = 1.0
        for r in range(a, b):
            if not kept[r] or n_children[r] == 0 or not kept[first_child[r]]:
                continue  # no draft is tested here: the emitted token is drawn from p (no damage)
            harm += reach[r] * damage[r]
            rejected = 1.0
            for c in range(first_child[r], first_child[r] + n_children[r]):
                if not kept[c]:
                    break
                p = reach[r] * rejected * accept[c]
                reach[c] = p
                tokens += p
                rejected *= 1.0 - accept[c]
        seconds, passes = _call_seconds(forward, draft_pass, expanded, used)
        out[0] += 1.0
        out[1] += tokens
        out[2] += seconds
        out[3] += used
        out[4] += passes
        out[5] += harm
        if per_tree.shape[0] > 0:
            per_tree[t, 0] = tokens
            per_tree[t, 1] = seconds


#: The rows of :func:`evolve.eval.tree_competitors.competitors` that are bounds, not shapes.
BOUNDS: tuple[str, ...] = ("shape_oracle",)
#: Most subtree shapes :func:`oracle_shape_counts` enumerates per tree (prod over expanded nodes of children + 1).
MAX_ORACLE_SHAPES = 2_000_000


@njit(cache=True)
def oracle_shape_counts(tree, forward, draft_pass, lam, out, per_tree):
    """The ``shape_oracle`` bound at rate ``lam`` (tokens per second): every tree keeps the subtree (each node a
    prefix, in draw order, of its drawn children; no node budget) maximising tokens - lam * seconds, enumerated
    exhaustively with the outcome probabilities known (:func:`shape_oracle`). ``tree``: the table's
    (starts, parent_row, first_child, n_children, accept, depth) as :class:`ShapeData` holds them. Adds its counts to
    ``out`` as :func:`shape_counts` (and each tree's expected tokens and seconds to ``per_tree`` float64 (trees, 2)
    when it has rows); returns -1, or the first tree with more than :data:`MAX_ORACLE_SHAPES` shapes."""
    starts, parent_row, first_child, n_children, accept, depth = tree
    m = parent_row.size
    kept = np.zeros(m, dtype=np.bool_)
    reach = np.zeros(m)
    for t in range(starts.size - 1):
        a, b = starts[t], starts[t + 1]
        size = b - a
        radix = np.zeros(size, dtype=np.int64)
        total = 1
        for r in range(a, b):
            radix[r - a] = n_children[r] + 1
            total *= radix[r - a]
            if total > MAX_ORACLE_SHAPES:
                return t
        k = np.zeros(size, dtype=np.int64)  # children kept at each row (mixed-radix counter)
        expanded = np.zeros(size, dtype=np.int64)
        best_v, best_t, best_s, best_n, best_p = -np.inf, 0.0, 0.0, 0, 0
        for _ in range(total):
            kept[a:b] = False
            kept[a] = True
            reach[a] = 1.0
            tokens = 1.0
            n = 0
            expanded[:] = 0
            for r in range(a, b):  # parents come before their children in a tree's rows
                if not kept[r] or k[r - a] == 0:
                    continue
                expanded[depth[r]] += 1
                rejected = 1.0
                for c in range(first_child[r], first_child[r] + k[r - a]):
                    kept[c] = True
                    reach[c] = reach[r] * rejected * accept[c]
                    tokens += reach[c]
                    rejected *= 1.0 - accept[c]
                    n += 1
            seconds, passes = _call_seconds(forward, draft_pass, expanded, n)
            value = tokens - lam * seconds
            if value > best_v:
                best_v, best_t, best_s, best_n, best_p = value, tokens, seconds, n, passes
            j = 0  # next shape: increment the counter
            while j < size:
                k[j] += 1
                if k[j] < radix[j]:
                    break
                k[j] = 0
                j += 1
        out[0] += 1.0
        out[1] += best_t
        out[2] += best_s
        out[3] += best_n
        out[4] += best_p
        if per_tree.shape[0]:
            per_tree[t, 0] = best_t
            per_tree[t, 1] = best_s
    return -1


def shape_oracle(data: ShapeData, costs: Costs = DEFAULT_COSTS, per_tree: np.ndarray | None = None) -> ShapeMetrics:
    """An upper bound, not a shape: the most tokens per second any choice of subtrees (at every node a prefix, in
    draw order, of its drawn children; no node budget) gives on ``data``'s trees under ``costs``, each tree's
    subtree chosen knowing its outcome probabilities (it reads the target), verified by SpecInfer.

    Exact: every subtree of every tree is enumerated, the ratio of sums maximised by Dinkelbach's iteration
    (Dinkelbach 1967). No tree-shape program, nor any of the named shapes, can exceed it on these trees (traversal
    verification, a relaxation or the harvest's node budget are outside it: it bounds SpecInfer on subtrees).
    With ``per_tree`` (float64 (trees, 2)), each tree's expected tokens and seconds under the bound's choice are
    written into it (the headroom's bootstrap over texts keeps these choices in every replicate).
    Raises: InputError naming the tree when a tree has more than :data:`MAX_ORACLE_SHAPES` subtrees.
    """
    forward, draft = cost_tables(costs, data.max_nodes)
    lam, best = 1.0 / forward[0], None
    for _ in range(100):
        out = np.zeros(N_SHAPE_COUNTS)
        trees = np.zeros((data.trees if per_tree is not None else 0, 2))
        bad = oracle_shape_counts((data.starts, data.parent_row, data.first_child, data.n_children, data.accept,
                                   data.depth), forward, draft, lam, out, trees)
        if bad >= 0:
            raise InputError(f"{data.table.source}: tree {bad} has more than {MAX_ORACLE_SHAPES} subtrees; the shape "
                             f"bound enumerates them all")
        if best is None or out[1] * best[2] > best[1] * out[2]:
            best = out
            if per_tree is not None:
                per_tree[:] = trees
        if not out[1] / out[2] > lam * (1.0 + 1e-12):
            break
        lam = out[1] / out[2]
    return metrics_from_shape_counts(best, costs)


def cost_tables(costs: Costs, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """(forward, draft_pass) float64 (nodes + 1,) of :func:`shape_counts` under ``costs``: the target's call
    verifying 0..nodes drafted nodes (``verify_seconds``), and one drafter pass over 0..nodes nodes
    (``draft_token_s * forward_seconds(m) / forward_seconds(1)``; 0 for m = 0)."""
    forward = np.array([costs.verify_seconds(n) for n in range(nodes + 1)])
    one = costs.forward_seconds(1)
    draft = np.array([0.0] + [costs.draft_token_s * costs.forward_seconds(m) / one for m in range(1, nodes + 1)])
    return forward, draft


def metrics_from_shape_counts(c: np.ndarray, costs: Costs) -> ShapeMetrics:
    """:class:`ShapeMetrics` from the counts of :func:`shape_counts`."""
    calls = int(c[0])
    if calls == 0:
        return ShapeMetrics(0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)
    tps = c[1] / c[2]
    return ShapeMetrics(calls, c[1] / calls, c[2] / calls, tps, tps * costs.plain_token_s, c[3] / calls,
                        c[4] / calls, c[5] / c[1])


def shape_metrics(values: np.ndarray, data: ShapeData, costs: Costs = DEFAULT_COSTS,
                  budget: int | None = None, relaxation: np.ndarray | None = None,
                  per_tree: np.ndarray | None = None) -> ShapeMetrics:
    """Metrics of shape values ``values`` float64 (decision rows,) on ``data`` with at most ``budget`` nodes
    per tree (None: the largest harvested tree's size), verified by SpecInfer against the target, or with
    ``relaxation`` (float64 (decision rows,), a weight w per context) against the mixture target
    (:func:`relaxed_accept`). ``per_tree``: if given, float64 (trees, 2) filled with each tree's expected
    tokens and seconds."""
    nodes = data.max_nodes
    budget = nodes if budget is None else min(int(budget), nodes)
    forward, draft = cost_tables(costs, nodes)
    if relaxation is None:
        accept, damage = data.accept, np.zeros(data.accept.size)
    else:
        accept, damage = relaxed_accept(data, relaxation)
    out = np.zeros(N_SHAPE_COUNTS)
    shape_counts(np.ascontiguousarray(values, dtype=np.float64), data.tree_rows, accept, damage, int(budget), forward,
                 draft, out, NO_TREES if per_tree is None else per_tree)
    return metrics_from_shape_counts(out, costs)


def require_relaxable(data: ShapeData) -> None:
    """Raise InputError naming the tree table unless it has the columns of relaxed verification."""
    if data.relaxed is None:
        raise InputError(f"{data.table.source}: relaxed verification of trees needs the columns "
                         f"{', '.join(RELAX_COLUMN_NAMES)}, which this tree table lacks")


def relaxed_accept(data: ShapeData, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SpecInfer against the mixture target (1 - w) p + w q at every context (speculative cascades' mixture,
    Narasimhan et al. 2024, arXiv 2405.19261, as the ``relaxation`` kind uses it on chains): (accept, damage)
    float64 (rows,) for :func:`shape_counts`.

    ``weights`` float64 (rows,): w at each decision row's context (NaN -> 0, clamped to [0, 1], then rounded
    DOWN to the grid :data:`evolve.traces.tree_tables.RELAX_GRID`, where the rows store the residuals: exact at
    the grid's points). A child tried with sibling index s at a context of weight w is accepted with
    probability min(1, R~_s(x) / q(x)); RRS is lossless with respect to its target, so the token emitted at
    a reached context with drafts is distributed as the mixture there, whose TV from p is w (1 - overlap):
    that is the context's damage (:func:`shape_counts` charges it only where the context has a kept child;
    elsewhere the token is drawn from p). Raises: InputError when the table lacks the relaxation columns.
    """
    require_relaxable(data)
    w = np.asarray(weights, dtype=np.float64)
    w = np.clip(np.where(np.isfinite(w), w, 0.0), 0.0, 1.0)
    steps = len(RELAX_GRID) - 1
    g = np.minimum(np.floor(w * steps + 1e-9).astype(np.int64), steps)
    grid = np.asarray(RELAX_GRID)
    node = data.parent_row >= 0
    accept = np.zeros(w.size)
    gp = g[data.parent_row[node]]
    q = data.decisions.feature("draft_prob")[node]
    accept[node] = standard_threshold(data.relaxed[np.flatnonzero(node), gp], q)
    damage = grid[g] * (1.0 - data.overlap)
    return accept, damage


def whole_tree_metrics(data: ShapeData, column: str, costs: Costs = DEFAULT_COSTS,
                       per_tree: np.ndarray | None = None) -> ShapeMetrics:
    """Metrics of verifying every harvested tree whole, its expected tokens read from the per-tree ``column``
    (``specinfer_tokens`` or ``traversal_tokens``); cost as :func:`shape_counts` with every node kept.
    ``per_tree`` as :func:`shape_metrics`."""
    full = shape_metrics(np.full(data.decisions.n, np.inf), data, costs, per_tree=per_tree)
    tokens = data.table.per_tree(column)
    if per_tree is not None:
        per_tree[:, 0] = tokens
    spc = full.seconds_per_call
    tpc = float(tokens.mean())
    tps = tpc / spc
    return ShapeMetrics(full.trees, tpc, spc, tps, tps * costs.plain_token_s, full.mean_nodes, full.mean_passes)


__all__ = ["SHAPE_FEATURES", "N_SHAPE_COUNTS", "NO_TREES", "ShapeMetrics", "TreeRows", "ShapeData", "shape_data", "shape_counts", "cost_tables",
           "metrics_from_shape_counts", "kept_children", "shape_metrics", "shape_oracle", "oracle_shape_counts", "MAX_ORACLE_SHAPES",
           "BOUNDS", "whole_tree_metrics", "require_relaxable", "relaxed_accept"]

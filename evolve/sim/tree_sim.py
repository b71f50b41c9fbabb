"""Draft trees, Python side: tree shapes, tree attention masks, configurations and simulation runs.

The kernels that build and verify one tree per target call, and the meaning of
widths, adaptive widths, chain or Medusa drafts and sampling or greedy
verification, are in :mod:`evolve.sim.tree_kernels`.

Cost model: a target call costs 1, a draft step c; chain drafts and chain-draft
trees need one step per level, Medusa heads one step per call; speedup =
length / (calls + c * draft steps).

Tree attention (:func:`tree_attention_mask`): node i attends to the whole
prefix and to its ancestors and itself (each token sees every ancestor on its
path), mask shape [n_nodes, prefix_len + n_nodes], bool.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from evolve.errors import InputError
from evolve.traces.synth.rng import seed_state
from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.sim.models import STREAM_DECODE, Context, Jobs, SyntheticModel, context_jobs, position_pair, sequence_jobs
from evolve.sim.tree_kernels import (
    DRAFT_CHAIN, DRAFT_MEDUSA, N_TREE_STATS, TREE_STREAM_OFFSET, VERIFY_GREEDY, VERIFY_SAMPLE, VERIFY_TRAVERSAL, TreeStat,
    TreeDims, build_tree, tree_arrays, tree_batch,
)


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
# Python API
# ---------------------------------------------------------------------------------------------

DRAFTS = {"chain": DRAFT_CHAIN, "tree": DRAFT_CHAIN, "adaptive": DRAFT_CHAIN, "medusa": DRAFT_MEDUSA}
VERIFICATIONS = {"sample": VERIFY_SAMPLE, "greedy": VERIFY_GREEDY, "traversal": VERIFY_TRAVERSAL}


@dataclass(frozen=True)
class TreeConfig:
    """How one target call's draft tree is built and verified (module doc).

    draft: ``chain`` (width 1), ``tree`` (the ``widths`` schedule), ``adaptive``
    (width from the draft's confidence, maximum ``max_width``) or ``medusa``
    (per-depth heads, ``widths`` schedule); budget: drafted nodes per call;
    verification: ``sample`` (lossless multi-draft rejection sampling, SpecInfer), ``traversal``
    (traversal verification, lossless) or ``greedy``; max_depth: level cap (default: the budget).
    """

    draft: str = "tree"
    budget: int = 8
    widths: tuple[int, ...] = (3, 1)
    max_width: int = 3
    verification: str = "sample"
    max_depth: int | None = None

    def __post_init__(self) -> None:
        if self.draft not in DRAFTS:
            raise InputError(f"tree draft: must be one of {', '.join(DRAFTS)} (value {self.draft!r})")
        if self.verification not in VERIFICATIONS:
            raise InputError(f"tree verification: must be one of {', '.join(VERIFICATIONS)} "
                             f"(value {self.verification!r})")
        if isinstance(self.budget, bool) or not isinstance(self.budget, (int, np.integer)) \
                or not 1 <= self.budget <= 256:
            raise InputError(f"a node budget must be an integer in [1, 256] (value {self.budget!r})",
                             param="budget")
        if not self.widths or any(isinstance(w, bool) or not isinstance(w, (int, np.integer)) or not 1 <= w <= 64
                                  for w in self.widths):
            raise InputError(f"widths must be integers in [1, 64] (value {self.widths!r})", param="widths")
        if isinstance(self.max_width, bool) or not isinstance(self.max_width, (int, np.integer)) \
                or not 1 <= self.max_width <= 64:
            raise InputError(f"must be an integer in [1, 64] (value {self.max_width!r})", param="max_width")
        if self.max_depth is not None and (not isinstance(self.max_depth, (int, np.integer)) or self.max_depth < 1):
            raise InputError(f"tree max_depth: must be an integer >= 1 (value {self.max_depth!r})")

    @property
    def label(self) -> str:
        """Short description, e.g. ``tree 3,1`` or ``adaptive <=3``."""
        if self.draft == "chain":
            return "chain"
        if self.draft == "adaptive":
            return f"adaptive <={self.max_width}"
        return f"{self.draft} {','.join(str(w) for w in self.widths)}"

    def kernel_args(self) -> tuple:
        """(budget, widths int64, max_width, adaptive, max_depth, draft, verify) for the kernels."""
        widths = (1,) if self.draft == "chain" else self.widths
        return (int(self.budget), np.asarray(widths, dtype=np.int64), int(self.max_width), self.draft == "adaptive",
                int(self.max_depth if self.max_depth is not None else self.budget), DRAFTS[self.draft],
                VERIFICATIONS[self.verification])


@dataclass(frozen=True)
class TreeResult:
    """Totals of tree decoding over ``sequences`` sequences of ``length`` tokens.

    ``stats`` float64 (N_TREE_STATS,) the :class:`TreeStat` statistics summed over sequences;
    ``per_sequence`` float64 (sequences, N_TREE_STATS) the same per sequence.
    """

    config: TreeConfig
    length: int
    sequences: int
    costs: Costs
    stats: np.ndarray
    per_sequence: np.ndarray | None = None

    @property
    def calls(self) -> float:
        """Total target calls."""
        return float(self.stats[TreeStat.CALLS])

    @property
    def tokens_per_call(self) -> float:
        """Emitted tokens / target calls (the last call not truncated)."""
        return float(self.stats[TreeStat.EMITTED] / self.stats[TreeStat.CALLS])

    @property
    def nodes_per_call(self) -> float:
        """Drafted nodes per call (the budget, unless ``max_depth`` stops the tree earlier)."""
        return float(self.stats[TreeStat.NODES] / self.stats[TreeStat.CALLS])

    @property
    def depth(self) -> float:
        """Mean tree depth (levels) per call."""
        return float(self.stats[TreeStat.DEPTH] / self.stats[TreeStat.CALLS])

    @property
    def draft_steps_per_call(self) -> float:
        """Sequential draft steps per call (levels; 1 for Medusa heads)."""
        return float(self.stats[TreeStat.DRAFT_STEPS] / self.stats[TreeStat.CALLS])

    @property
    def accepted_per_node(self) -> float:
        """Accepted nodes / drafted nodes."""
        return float(self.stats[TreeStat.ACCEPTED] / self.stats[TreeStat.NODES])

    @property
    def calls_per_token(self) -> float:
        """Target calls / generated tokens."""
        return float(self.stats[TreeStat.CALLS] / self.stats[TreeStat.LENGTH])

    @property
    def speedup(self) -> float:
        """length / (calls + c * draft steps): autoregressive time over tree time (c = ``costs.draft_token_s``)."""
        s = self.stats
        return float(s[TreeStat.LENGTH] / (s[TreeStat.CALLS] + self.costs.draft_token_s * s[TreeStat.DRAFT_STEPS]))


def simulate_tree(model: SyntheticModel, config: TreeConfig, length: int, samples: int,
                  costs: Costs = DEFAULT_COSTS) -> TreeResult:
    """Decode ``samples`` sequences of ``length`` tokens with draft trees (parallel over sequences).

    Sequence i starts from the same prompt as :func:`evolve.sim.decoding.simulate_chain`'s
    sequence i of that length. Raises InputError for bad options.
    """
    jobs = sequence_jobs(model, [int(length)], int(samples))
    out = np.zeros((samples, N_TREE_STATS))
    tree_batch(*model.kernel, model.useed, Jobs(**jobs), TreeDims(*config.kernel_args()), out,
               np.zeros((samples, 0), np.int64))
    return TreeResult(config, int(length), int(samples), costs, out.sum(axis=0), out)


def tree_at_context(model: SyntheticModel, config: TreeConfig, context: Context, n: int, n_tokens: int = 1,
                    seed: int = 0) -> np.ndarray:
    """``n`` independent tree decodes of ``n_tokens`` tokens from one fixed context: int64 (n, n_tokens)."""
    jobs = context_jobs(context, int(n), int(n_tokens))
    out = np.zeros((n, n_tokens), dtype=np.int64)
    tree_batch(*model.kernel, np.uint64(seed), Jobs(**jobs), TreeDims(*config.kernel_args()),
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
    dims = TreeDims(*config.kernel_args())
    V, K = int(model.vocab_size), int(model.window)
    m = dims.budget + 1
    buf = np.zeros(K + context.position + m + 1, dtype=np.int64)
    buf[context.position:context.position + K] = context.window
    tree, ts = tree_arrays(dims.budget, V, K)
    rng = seed_state(np.uint64(seed), np.uint64(0), STREAM_DECODE + TREE_STREAM_OFFSET)
    n, _ = build_tree(model.kernel, rng, buf, int(context.position), K, float(context.d_prev), dims, tree, ts)
    parents = tree.parent[1:n] - 1  # kernel node k is returned node k - 1; the root (0) becomes -1
    return parents, tree.token[1:n].copy(), tree.level[1:n].copy()


def tree_tokens(model: SyntheticModel, config: TreeConfig, length: int, sample: int = 0,
                key_length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Tokens (int64 (length,)) and stats of one tree-decoded sequence from prompt job_key(key_length, sample)."""
    jobs = sequence_jobs(model, [int(key_length if key_length is not None else length)], 1, int(sample))
    jobs["lengths"][:] = int(length)
    out = np.zeros((1, int(length)), dtype=np.int64)
    stats = np.zeros((1, N_TREE_STATS))
    tree_batch(*model.kernel, model.useed, Jobs(**jobs), TreeDims(*config.kernel_args()), stats, out)
    return out[0], stats[0]

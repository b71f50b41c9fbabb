"""Live decoding with draft trees (``benchmark.py live --tree-nodes N [--tree-width K]``): the fixed tree and tree shapes.

A tree row decodes a text by tree steps, one target call each (:func:`tree_text`). One step, with the text's
random stream and its caches as the tree harvest keeps them (:mod:`evolve.harvest.tree_harvest`):

1. Growth: the harvest's (:func:`evolve.engine.tree_draft.grow_tree` with the drafter's tree pass,
   :func:`evolve.engine.tree_draft.drafter_pass`): best first, as EAGLE-2 (Li et al. 2024, arXiv 2406.16858), N
   nodes at most, K children drawn i.i.d. per expanded node, the depth limited by the text's remaining budget. The
   growth's last drafter pass (q at the last round's nodes, leaves whose q no decision and no SpecInfer test reads)
   is skipped; it draws no uniform.
2. The kept tree (:func:`kept_nodes`): the fixed tree (row ``eagle2_full``, the name ``benchmark.py trees`` gives
   every harvested node verified whole) keeps every node; a tree shape (a program deciding the children kept,
   :class:`TreeDecoder`) gives a value v at the root and at every kept node, and the node keeps its first
   min(ceil(v), drawn) children in draw order (none for v <= 0 or NaN), exactly as the offline scorer
   (:mod:`evolve.eval.tree_scoring`; its values by :func:`evolve.eval.tree_levels.program_values`,
   level by level for a program reading level features) on the decision rows of :func:`decision_data`, built from
   the grown tree as :func:`evolve.eval.tree_scoring.shape_data` builds them from a tree table. The node
   budget N never binds (the kept tree is a subtree of a tree of at most N nodes), as offline.
3. One uniform per node of the grown tree's first path, unused: the draws of the harvest's chain records, so that
   the fixed tree's texts are the tree harvest's texts (:data:`evolve.engine.tree_draft.DRAW_ORDER`).
4. One target pass over the last step's emitted token and the kept nodes (tree attention,
   :meth:`evolve.engine.runner.Runner.tree`), then SpecInfer's recursive rejection sampling on the kept tree (Miao
   et al. 2024, arXiv 2305.09781; :func:`evolve.engine.tree_verify.specinfer_verify`): lossless, so under greedy
   decoding (temperature 0: the siblings repeat one token) a tree row's text is plain decoding's. The accepted
   path's keys and values stay in the cache (:meth:`evolve.engine.runner.BatchKV.keep_path`), as a chain's accepted
   drafts do, so a pass is over kept nodes + 1 tokens, as priced. With one token of budget left the target samples
   it alone.

Suffix decoding's trees (``--draft-suffix``, :mod:`evolve.engine.suffix_tree`): growth is the library's tree as the
harvest shapes it (:func:`evolve.engine.suffix_tree.draft_tree`, no uniform drawn; the row's suffix cache opened at
the text's start and closed at its end, its response left in the row's global cache), a shape reads the trees'
estimates (:func:`decision_data`), and the kept tree is verified by the walk
(:func:`evolve.engine.suffix_tree.walk_verify`; siblings are distinct, q one-hot), the same draws as the harvest's.

Counts (:class:`evolve.live.decoding.LiveCounts`): per call the emitted tokens, the kept nodes (``drafted``), the
exact expected tokens of SpecInfer on the kept tree given the drafts
(:func:`evolve.engine.tree_verify.specinfer_expected_tokens`, computed outside the timed decoding) and the nodes
expanded per depth of the kept tree, from which the cost file prices the call as the offline tree scorer does
(:func:`evolve.live.decoding.tree_call_seconds`: a target forward over kept nodes + 1 tokens and one drafter pass per
depth with an expansion, over the m kept nodes expanded there).

Cost paid live against cost priced offline: the offline scorer prices the drafting of the kept tree only, one pass
per depth. Live, the whole N-node tree is grown first, whatever a shape keeps, by the harvest's rounds (a root
pass, then one pass per round of K expansions over the tree so far), and pruned afterwards; so a shape that keeps a
small tree pays the drafting of the full tree live (the target pass is over the kept nodes only, as priced).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np

from evolve.engine.distributions import sample_index
from evolve.engine.onehot import densify
from evolve.engine.runner import BatchKV
from evolve.engine.suffix_tree import deterministic_node_columns, draft_tree, suffix_tree_columns, walk_verify
from evolve.engine.tree_draft import DraftPass, DraftTree, drafter_pass, emitted_tokens, grow_tree, keep_emitted_path
from evolve.engine.tree_verify import specinfer_expected_tokens, specinfer_verify
from evolve.errors import InputError
from evolve.eval.evaluator import EvalData
from evolve.gp.primitives import FEATURES, LEVEL_FEATURES
from evolve.eval.tree_levels import program_values
from evolve.eval.tree_scoring import ShapeData, kept_children
from evolve.live.decoding import LiveCounts

#: The row of the fixed tree (every grown node verified), named as ``benchmark.py trees`` names it.
FIXED_TREE = "eagle2_full"


@dataclass(frozen=True)
class TreeDecoder:
    """A tree row of live decoding: ``name`` labels it; ``program`` (a :class:`evolve.gp.compiler.Program` whose value
    at a node is its number of children kept, as a tree shape's, :mod:`evolve.eval.tree_scoring`) decides the kept
    tree, None keeps every grown node (the fixed tree). The tree-shape kind's ``live`` hook returns one; the commands
    call :meth:`text` alone."""

    name: str
    program: Any = None
    #: Whether the row decodes draft trees (it does: it needs their size).
    tree: ClassVar[bool] = True
    #: Drafter columns it reads (none).
    lookahead: ClassVar[tuple[str, ...]] = ()

    def text(self, engine, prompt_ids: Sequence[int], max_new_tokens: int, rng: np.random.Generator, gamma: int,
             tree: tuple[int, int] | None = None) -> tuple[list[int], LiveCounts]:
        """:func:`tree_text` of this row with ``tree`` (N nodes, K children per expansion; ``gamma`` is not read).
        Raises InputError (parameter ``tree_nodes``) without a tree size."""
        if tree is None:
            raise InputError(f"'{self.name}' decodes draft trees: give their size", param="tree_nodes")
        return tree_text(engine, self, prompt_ids, tree, max_new_tokens, rng)


#: The fixed tree's row.
FIXED = TreeDecoder(FIXED_TREE)


def with_fixed_tree(rules: list, trees: bool, fixed: bool = True) -> list:
    """``rules`` (the rows live decoding decodes with) with the fixed tree's row :data:`FIXED` before the first
    draft-tree row (its ``tree`` attribute true; at the end without one) when ``trees`` (and ``fixed``). Raises
    InputError (``tree_nodes``) for a draft-tree row without ``trees`` (no tree size given)."""
    shapes = [r for r in rules if r.tree]
    if shapes and not trees:
        raise InputError(f"'{shapes[0].name}' is a tree shape, which decodes draft trees: give their size",
                         param="tree_nodes")
    if not (trees and fixed):
        return list(rules)
    i = rules.index(shapes[0]) if shapes else len(rules)
    return [*rules[:i], FIXED, *rules[i:]]


def check_tree_drafter(engine) -> None:
    """Raise InputError (its ``param`` the drafter's field) when the engine's drafter cannot grow a draft tree."""
    drafter = engine.drafter
    if not getattr(drafter, "grows_trees", False):
        raise InputError(f"this drafter ({getattr(drafter, 'name', type(drafter).__name__)}) cannot grow a draft tree",
                         param=getattr(drafter, "field", None))


def decision_data(tree: DraftTree, position: int, estimates: dict | None = None) -> ShapeData:
    """The decision rows of one grown tree: row 0 the root, row i + 1 node i, with the features of
    :data:`evolve.eval.tree_scoring.SHAPE_FEATURES` as :func:`evolve.eval.tree_scoring.shape_data`
    computes them from the tree table's columns (draft_prob = q(x | parent); draft_top_prob and draft_entropy of
    the distribution the node was drawn from, 1 and 0 at the root; draft_cumprob; draft_index = depth; position =
    ``position`` (tokens generated before the step) + depth; the level features NaN until
    :func:`evolve.eval.tree_levels.shape_values` fills them; the target's features NaN). ``accept`` is
    zeros (not known before the target's pass) and ``table`` None. ``estimates``: a deterministic tree's estimates
    (suffix decoding: the dict :func:`evolve.engine.suffix_tree.draft_tree` returns), which then give draft_prob
    (given the parent) and draft_cumprob in place of q's, as the tree scorer reads them from the suffix columns.
    """
    n = tree.n
    m = n + 1
    parents = np.asarray(tree.parents, dtype=np.int64)
    tokens = np.asarray(tree.tokens, dtype=np.int64)
    parent_row = np.concatenate([[-1], parents + 1]).astype(np.int64)
    n_children = np.array([tree.root_children, *tree.children], dtype=np.int64)
    first_child = np.full(m, -1, dtype=np.int64)
    sibling = np.asarray(tree.sibling, dtype=np.int64)
    first = np.flatnonzero(sibling == 0) + 1
    first_child[parent_row[first]] = first
    priority = np.concatenate([[1.0], np.asarray(tree.cumprob, dtype=np.float64)])
    depth = np.concatenate([[0], np.asarray(tree.depth, dtype=np.int64)]).astype(np.int64)
    rows = {"draft_prob": np.ones(m), "draft_top_prob": np.ones(m), "draft_entropy": np.zeros(m),
            "draft_cumprob": priority.copy(), "draft_index": depth.astype(np.float64),
            "position": float(position) + depth.astype(np.float64)}
    if estimates is not None:  # the suffix trees' estimates, as the tree table's suffix columns hold them
        cols = suffix_tree_columns(tree.parents, estimates)
        rows["draft_prob"][1:] = cols["suffix_prob"]
        rows["draft_cumprob"][1:] = cols["suffix_cumprob"]
        priority = rows["draft_cumprob"].copy()
    else:
        for i in range(n):
            row = tree.q[parents[i] + 1]  # the parent's q, known: the parent was expanded
            rows["draft_prob"][i + 1] = row[tokens[i]]
            rows["draft_top_prob"][i + 1] = row.max()
            rows["draft_entropy"][i + 1] = tree.q_ent[parents[i] + 1]
    rows.update({f: np.full(m, np.nan) for f in LEVEL_FEATURES})
    available = [f for f in FEATURES if f in rows or f in ("target_prob", "target_entropy", "top_token_match")]
    X = np.stack([rows.get(f, np.full(m, np.nan)) for f in available])
    ones = np.ones(m)
    decisions = EvalData(X, ones, np.zeros(m), np.ones(m, dtype=bool), tuple(available), source="live decoding")
    return ShapeData(decisions, np.array([0, m], dtype=np.int64), parent_row, first_child, n_children, np.zeros(m),
                     priority, depth, None)


def kept_nodes(tree: DraftTree, shape: TreeDecoder, position: int, estimates: dict | None = None) -> list[int]:
    """The nodes of ``tree`` that ``shape`` keeps (module doc, step 2), in creation order (parents first, siblings
    contiguous in draw order); ``position``: tokens generated before the step; ``estimates`` as
    :func:`decision_data`'s."""
    if shape.program is None:
        return list(range(tree.n))
    data = decision_data(tree, position, estimates)
    k = kept_children(program_values(shape.program, data), data.n_children)
    kept_row = np.zeros(tree.n + 1, dtype=bool)
    kept_row[0] = True
    for i in range(tree.n):
        r = tree.parents[i] + 1
        kept_row[i + 1] = kept_row[r] and tree.sibling[i] < k[r]
    return [int(i) for i in np.flatnonzero(kept_row[1:])]


def _dense(draft_pass: DraftPass) -> DraftPass:
    """``draft_pass`` with dense float64 rows (one-hot rows at temperature 0 made dense for the growth)."""
    def run(parents, tokens):
        q, ent = draft_pass(parents, tokens)
        return np.asarray(densify(q), dtype=np.float64), ent
    return run


def _verify(engine, tree: DraftTree, keep: list[int], kv, ctx, rng, max_depth: int, counts: LiveCounts,
            deterministic: bool = False) -> list[int]:
    """Step 4 of the module doc on the kept nodes ``keep`` of ``tree``; adds the call to ``counts``. ``deterministic``:
    a deterministic tree (suffix decoding), verified by the walk."""
    index = {-1: -1, **{node: j for j, node in enumerate(keep)}}
    parents = [index[tree.parents[i]] for i in keep]
    tokens = [tree.tokens[i] for i in keep]
    p, _ = engine.distributions(engine.run.tree(kv, ctx[kv.lengths[0]:], parents, tokens, keep=True))
    p = np.asarray(densify(p), dtype=np.float64)
    if deterministic:
        accepted, nxt = walk_verify(parents, tokens, p, rng)
    else:
        q = np.stack([tree.q[0]] + [tree.q[i + 1] if tree.q[i + 1] is not None else p[j + 1]  # a leaf's q: never read
                                    for j, i in enumerate(keep)])
        accepted, nxt = specinfer_verify(parents, tokens, p, q, rng)
    emitted = emitted_tokens(tokens, accepted, nxt, engine.eos, max_depth)
    keep_emitted_path(kv, len(keep), accepted, emitted)
    t0 = time.perf_counter()
    if deterministic:
        expected = float(deterministic_node_columns(parents, tokens, p, np.zeros(len(p)))["specinfer_tokens"][0]
                         if keep else 1.0)
    else:
        expected = specinfer_expected_tokens(parents, tokens, p, q)
    depth = [tree.depth[i] for i in keep]
    expanded = [0] * (max(depth, default=0) + 1)
    for r in {par + 1 for par in parents}:  # rows with a kept child: the root 0, node j's row j + 1
        expanded[0 if r == 0 else depth[r - 1]] += 1
    counts.seconds -= time.perf_counter() - t0
    counts.add_tree_call(len(emitted), expected, expanded if keep else [], len(keep))
    return emitted


def tree_text(engine, shape: TreeDecoder, prompt_ids: Sequence[int], tree: tuple[int, int], max_new_tokens: int,
              rng: np.random.Generator) -> tuple[list[int], LiveCounts]:
    """Decode one text of at most ``max_new_tokens`` tokens by tree steps of ``shape`` (module doc); ``tree``: (N
    nodes, K children per expansion). The prefills (target and drafter, the prompt minus its last token) are not
    timed; a text stops after an end-of-sequence token.

    Returns (the generated ids, the text's :class:`evolve.live.decoding.LiveCounts`). Raises InputError for a drafter
    that cannot grow a tree (:func:`check_tree_drafter`).
    """
    import torch

    check_tree_drafter(engine)
    drafter = engine.drafter
    deterministic = getattr(drafter, "deterministic_trees", False)
    counts = LiveCounts()
    with torch.inference_mode():
        ctx = [int(t) for t in prompt_ids]
        prompt_len = len(ctx)
        kv = BatchKV(1, engine.device)
        kv.place(0, engine.run.prefill(ctx[:-1]), len(ctx) - 1)
        if deterministic:
            drafter.open_text(ctx)
        else:
            draft_kv = BatchKV(1, engine.device)
            draft_kv.place(0, drafter.run.prefill(ctx[:-1]), len(ctx) - 1)
        t0 = time.perf_counter()
        while len(ctx) - prompt_len < max_new_tokens:
            generated = len(ctx) - prompt_len
            max_depth = max_new_tokens - generated - 1
            if max_depth >= 1:
                estimates = None
                if deterministic:
                    grown, estimates = draft_tree(drafter, ctx, tree[0], tree[1], max_depth, engine.eos)
                else:
                    grown = grow_tree(_dense(drafter_pass(engine, draft_kv, ctx)), tree[0], tree[1], max_depth,
                                      engine.eos, rng.random, leaves=False)
                chain = grown.first_path()
                if chain:
                    rng.random(len(chain))  # the harvest's chain-record uniforms (module doc, step 3)
                keep = kept_nodes(grown, shape, generated, estimates)
                emitted = _verify(engine, grown, keep, kv, ctx, rng, max_depth, counts, deterministic)
            else:  # one token left: the target samples it alone
                p, _ = engine.distributions(engine.run.tree(kv, ctx[kv.lengths[0]:], [], []))
                emitted = [sample_index(p[0], rng.random())]
                counts.add_call(1)
            ctx.extend(emitted)
            if emitted[-1] in engine.eos:
                break
        if deterministic:
            drafter.close_text(ctx)
    counts.seconds += time.perf_counter() - t0
    return ctx[prompt_len:], counts


__all__ = ["FIXED", "FIXED_TREE", "TreeDecoder", "check_tree_drafter", "decision_data", "kept_nodes", "tree_text",
           "with_fixed_tree"]

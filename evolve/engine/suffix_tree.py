"""Suffix decoding's draft trees (``--draft-suffix DEPTH --tree-nodes N [--tree-width K]``): deterministic trees.

SuffixDecoding (Oliaro et al. 2024, arXiv 2411.04975) can draft a tree instead of a chain: arctic-inference's tree
speculation (``use_tree_spec``) returns the N continuation nodes of highest estimated path probability, best first,
from the request's own suffix tree or the global one (:func:`evolve.engine.suffix.ask_trees`, asked through the
drafter, :meth:`evolve.engine.suffix.SuffixDrafter.ask_tree`, so that this module imports nothing of
:mod:`evolve.engine.suffix`, whose drafter steps through it). vLLM 0.33.0's
``method: suffix`` drafts chains only; this module gives the tree harvest the trees the library grows, so that the
draft-tree commands can price them against the chains.

Growth (:func:`shape_tree`): the library's N nodes (``max_spec_tokens`` N, the harvest's ``max_spec_factor`` and no
probability floor), then at most K children per node (the K most probable), none below an end-of-sequence token or
deeper than the text's remaining budget minus one; renumbered so that parents come first and the children of a node
are contiguous, most probable first (ties by the library's order). Siblings are distinct tokens.

Verification: each drafted token is proposed with certainty (q is one-hot at it), so SpecInfer's recursive rejection
sampling (Miao et al. 2024, arXiv 2305.09781) tries the children of a node in order, accepting the child s with
probability R_s(x_s) = p(x_s) / (1 - sum of p over the earlier siblings' tokens) (the residual after each rejected
one-hot proposal); equivalently (:func:`walk_verify`) the target samples its token y ~ p at the node, the child whose
token is y is accepted and the walk goes on from it, and where no child is y the walk emits y. Lossless: every emitted
token is the target's sample. A node is accepted with the product of p along its path, which no lossless verification
exceeds (a node's path is accepted at most as often as the target emits it), so the table's ``specinfer_tokens`` and
``traversal_tokens`` both hold 1 + the sum of those products.

Columns (:func:`deterministic_node_columns`): those of :data:`evolve.traces.tree_tables.TREE_COLUMNS` with q one-hot
(``draft_prob``, ``draft_cumprob``, the drafter's top probabilities 1, its entropies 0), no relaxation columns (a
relaxed target needs one q per node), and the drafter's estimates as :data:`evolve.traces.tree_tables.SUFFIX_TREE_COLUMNS`.
The step's first path (the most probable child at every depth) is recorded as one chain block with the suffix columns
of :func:`evolve.engine.suffix.suffix_columns` (the drafter's ``path_columns``).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from evolve.engine.distributions import block_records, sample_index
from evolve.engine.onehot import OneHot, densify
from evolve.engine.tree_draft import DraftTree, TreeStep, emitted_tokens, keep_emitted_path
from evolve.traces.tree_tables import SUFFIX_TREE_COLUMNS, TREE_COLUMNS

#: The growth rule, as written into a suffix tree harvest's metadata.
SUFFIX_GROWTH_RULE = ("arctic-inference's tree speculation (use_tree_spec): from the request's own suffix tree or the "
                      "global one (the higher score; the request's own wins a tie), the N continuation nodes of "
                      "highest estimated path probability (max_spec_tokens N, the harvest's max_spec_factor: no cap by "
                      "the match length, no offset, min_token_prob 0); then at most K children per node (the K most "
                      "probable), none below an end-of-sequence token or deeper than max_new_tokens - generated - 1; "
                      "renumbered parents first, each node's children contiguous and most probable first")
#: The order of a suffix tree step's random draws, as written into the metadata.
SUFFIX_DRAW_ORDER = ("per tree step: one acceptance uniform per node of the first path (the chain records' "
                     "rand_value); then one uniform per level the walk reaches (the target's token there, by inverse "
                     "CDF); a last step with one token left: one uniform (the target's token)")
#: How a suffix tree is verified, as written into the metadata.
SUFFIX_VERIFICATION = ("SpecInfer's recursive rejection sampling with one-hot proposals (lossless), run as its "
                       "equivalent walk: the target samples its token at each node, the child with that token is "
                       "accepted (arXiv 2305.09781)")


def suffix_tree_settings(nodes: int, width: int) -> dict:
    """The ``tree`` entry of a suffix tree harvest's metadata (as :func:`evolve.engine.tree_draft.tree_settings`):
    N, K, the growth rule, the order of the random draws, the verification and the table's columns."""
    return {"nodes": int(nodes), "width": int(width), "growth": SUFFIX_GROWTH_RULE, "draws": SUFFIX_DRAW_ORDER,
            "verification": SUFFIX_VERIFICATION, "deterministic": True,
            "chain": "the first path (the most probable child at every depth) recorded as one block per tree step",
            "table": "{split}.trees.parquet",
            "columns": {c.name: c.dtype for c in TREE_COLUMNS + SUFFIX_TREE_COLUMNS}}


def shape_tree(parents: Sequence[int], tokens: Sequence[int], probs: Sequence[float], width: int, max_depth: int,
               eos) -> list[int]:
    """The library's nodes a tree keeps, in the tree's order (module doc).

    Args: the library's ``parents`` (n,) (-1 or an earlier node), ``tokens`` (n,), ``probs`` float (n,) estimated path
    probabilities; ``width`` K >= 1 children per node; ``max_depth`` D >= 1; ``eos`` end-of-sequence ids.
    Returns: the library's indices of the kept nodes, parents first, each node's children contiguous in order of
    decreasing probability (ties by index). Raises: ValueError for a parent that is not -1 or an earlier node, or
    K, D below 1.
    """
    if width < 1 or max_depth < 1:
        raise ValueError(f"shape_tree: width and max_depth must be >= 1 (got {width}, {max_depth})")
    kids: dict[int, list[int]] = {}
    for i, par in enumerate(parents):
        if not -1 <= par < i:
            raise ValueError(f"shape_tree: node {i} has parent {par} (needs -1 <= parent < {i})")
        kids.setdefault(int(par), []).append(i)
    order, frontier, depth = [], [-1], 0
    while frontier and depth < max_depth:
        nxt = []
        for node in frontier:
            if node >= 0 and int(tokens[node]) in eos:
                continue
            chosen = sorted(kids.get(node, []), key=lambda i: (-float(probs[i]), i))[:width]
            order.extend(chosen)
            nxt.extend(chosen)
        frontier, depth = nxt, depth + 1
    return order


def draft_tree(drafter, ctx: Sequence[int], nodes: int, width: int, max_depth: int, eos) -> tuple[DraftTree, dict]:
    """A suffix drafter's tree after ``ctx`` (module doc), the drafter's request given the text's new tokens first.

    Args: ``drafter`` a :class:`evolve.engine.suffix.SuffixDrafter` decoding one text (:meth:`open_text`),
    ``ctx`` the text so far, N, K, D as :func:`shape_tree` (N the library's ``max_spec_tokens``).
    Returns: (the :class:`DraftTree` in the tree's order: parents, tokens, depth, sibling, children; ``cumprob`` 1
    (q one-hot); no drafter distributions), {``path_probs`` float64 (n,) estimated path probabilities, ``match``
    the match length, ``score`` the draft's score, ``from_cache`` 1 for the global cache}).
    """
    drafter.sync(ctx)
    found, from_cache = drafter.ask_tree(ctx, nodes)
    parents, tokens = list(found.parents), list(found.token_ids)
    probs = np.asarray(found.probs, dtype=np.float64)
    keep = shape_tree(parents, tokens, probs, width, max_depth, eos)
    new = {old: j for j, old in enumerate(keep)}
    tree = DraftTree()
    for old in keep:
        par = new[parents[old]] if parents[old] >= 0 else -1
        tree.parents.append(par)
        tree.tokens.append(int(tokens[old]))
        tree.depth.append(tree.depth[par] + 1 if par >= 0 else 1)
        tree.children.append(0)
        tree.cumprob.append(1.0)
        if par >= 0:  # a child's sibling index: its parent's children so far
            tree.sibling.append(tree.children[par])
            tree.children[par] += 1
        else:
            tree.sibling.append(tree.root_children)
            tree.root_children += 1
    est = {"path_probs": probs[keep] if keep else np.zeros(0), "match": int(found.match_len),
           "score": float(found.score), "from_cache": int(from_cache)}
    return tree, est


def walk_verify(parents: Sequence[int], tokens: Sequence[int], p: np.ndarray,
                rng: np.random.Generator) -> tuple[list[int], int]:
    """Verify a deterministic tree (distinct siblings) by the walk of the module doc.

    Args: ``parents``, ``tokens`` (n,); ``p`` float64 (n + 1, V), the target's distributions at the root (row 0) and
    after node i (row i + 1); ``rng`` supplies one uniform per level reached.
    Returns: (the accepted nodes from the root down, the token emitted after them); tokens emitted = len(path) + 1.
    """
    kids: dict[int, dict[int, int]] = {}
    for i, par in enumerate(parents):
        kids.setdefault(int(par), {})[int(tokens[i])] = i
    path, node = [], -1
    while True:
        y = sample_index(p[node + 1], rng.random())
        child = kids.get(node, {}).get(y)
        if child is None:
            return path, y
        path.append(child)
        node = child


def deterministic_node_columns(parents: Sequence[int], tokens: Sequence[int], p: np.ndarray,
                               p_ent: np.ndarray) -> dict[str, np.ndarray]:
    """The per-node columns of a deterministic tree's rows (all but ``seq_id``, ``tree``, ``position``).

    Args: ``parents``, ``tokens`` (n,) in the tree's order (siblings contiguous, distinct tokens); ``p`` float64
    (n + 1, V) and ``p_ent`` (n + 1,) the target's distributions and entropies (nats), row 0 the root.
    Returns: {column: array (n,)} for every column of :data:`evolve.traces.tree_tables.TREE_COLUMNS` (module doc:
    q one-hot; ``residual_prob`` R_s(x) = p(x) / (1 - the earlier siblings' p), 0 where they hold all of p).
    """
    par = np.asarray(parents, dtype=np.int64)
    x = np.asarray(tokens, dtype=np.int64)
    n = int(x.size)
    rows = par + 1
    target = p[rows, x] if n else np.zeros(0)
    depth = np.zeros(n, dtype=np.int64)
    sibling = np.zeros(n, dtype=np.int64)
    residual = np.zeros(n)
    reach = np.zeros(n)  # probability the walk accepts the node: the product of p along its path
    counts = np.zeros(n + 1, dtype=np.int64)
    taken = np.zeros(n + 1)  # p of the earlier siblings' tokens, per parent row
    for i in range(n):
        r = int(rows[i])
        depth[i] = 1 if r == 0 else depth[r - 1] + 1
        sibling[i] = counts[r]
        counts[r] += 1
        left = 1.0 - taken[r]
        residual[i] = min(1.0, target[i] / left) if left > 0 else 0.0
        taken[r] += target[i]
        reach[i] = target[i] * (1.0 if r == 0 else reach[r - 1])
    expected = 1.0 + float(reach.sum())
    ones = np.ones(n)
    return {
        "node": np.arange(n, dtype=np.int64), "parent": par, "depth": depth, "sibling": sibling, "token": x,
        "draft_prob": ones, "target_prob": target, "residual_prob": residual, "draft_cumprob": ones.copy(),
        "node_draft_top_prob": ones.copy(), "node_draft_entropy": np.zeros(n),
        "node_target_top_prob": p[1:].max(axis=1), "children": counts[1:].copy(),
        "tree_nodes": np.full(n, n, dtype=np.int64), "root_draft_top_prob": ones.copy(),
        "root_draft_entropy": np.zeros(n), "root_children": np.full(n, counts[0], dtype=np.int64),
        "specinfer_tokens": np.full(n, expected), "traversal_tokens": np.full(n, expected),
    }


def suffix_tree_step(engine, kv, drafter, ctx: Sequence[int], rng: np.random.Generator, nodes: int, width: int,
                     max_depth: int) -> TreeStep:
    """One tree step of a text with suffix decoding's tree (module doc): draft, one target pass, record, walk.

    Args: as :func:`evolve.engine.tree_draft.tree_step`, with the suffix ``drafter`` in place of the drafter's cache.
    Returns: the :class:`TreeStep` (``p`` dense float64 (n + 1, V); the columns of
    :func:`deterministic_node_columns` and the suffix tree columns; the first path's chain records with the suffix
    columns); its ``emitted`` tokens (1..D + 1 ids) are to be appended to ``ctx``.
    """
    tree, est = draft_tree(drafter, ctx, nodes, width, max_depth, engine.eos)
    p, p_ent = engine.distributions(engine.run.tree(kv, ctx[kv.lengths[0]:], tree.parents, tree.tokens, keep=True))
    p, p_ent = np.asarray(densify(p), dtype=np.float64), np.asarray(p_ent, dtype=np.float64)
    chain = tree.first_path()
    records = None
    if chain:
        rows = [tree.parents[i] + 1 for i in chain]
        drafts = [tree.tokens[i] for i in chain]
        u = rng.random(len(chain))
        records = block_records(p[rows], OneHot(np.asarray(drafts, dtype=np.int64), p.shape[1]), p_ent[rows],
                                np.zeros(len(chain)), drafts, u)
        records.update(drafter.path_columns(est["path_probs"][chain], est["match"], est["score"], est["from_cache"]))
    accepted, nxt = walk_verify(tree.parents, tree.tokens, p, rng)
    emitted = emitted_tokens(tree.tokens, accepted, nxt, engine.eos, max_depth)
    keep_emitted_path(kv, tree.n, accepted, emitted)
    columns = deterministic_node_columns(tree.parents, tree.tokens, p, p_ent)
    columns.update(suffix_tree_columns(tree.parents, est))
    return TreeStep(tree, p, p_ent, chain, records, accepted, emitted, columns)


def suffix_tree_columns(parents: Sequence[int], est: dict) -> dict[str, np.ndarray]:
    """The suffix columns of a tree's nodes (:data:`evolve.traces.tree_tables.SUFFIX_TREE_COLUMNS`): each node's
    estimated probability given its parent, its path probability, and the tree's match length, score and source."""
    n = len(parents)
    path = np.asarray(est["path_probs"], dtype=np.float64)
    above = np.array([path[j] if j >= 0 else 1.0 for j in parents]) if n else np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.where(above > 0, path / above, 0.0)
    return {"suffix_prob": np.clip(step, 0.0, 1.0), "suffix_cumprob": np.clip(path, 0.0, 1.0),
            "suffix_match_len": np.full(n, est["match"], dtype=np.int64),
            "suffix_score": np.full(n, est["score"]), "suffix_from_cache": np.full(n, est["from_cache"], dtype=np.int64)}


__all__ = ["SUFFIX_DRAW_ORDER", "SUFFIX_GROWTH_RULE", "SUFFIX_VERIFICATION", "deterministic_node_columns", "draft_tree",
           "shape_tree", "suffix_tree_columns", "suffix_tree_settings", "suffix_tree_step", "walk_verify"]

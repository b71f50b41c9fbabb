"""Small random draft trees as tree-table rows, for tests (vocabulary 6, Dirichlet p and q at every node).

:func:`random_tree` grows a tree by expanding random nodes with 1..width children drawn i.i.d. from q;
:func:`tree_frame` computes every column of :data:`evolve.traces.tree_tables.TREE_COLUMNS` and ``RELAX_COLUMNS`` from the full
distributions (SpecInfer's and traversal's expected tokens by :mod:`evolve.engine.tree_verify`);
:func:`write_tree_tables` writes ``{split}.trees.parquet`` for train/valid/test into a dataset directory.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from evolve.engine import tree_verify as tv
from evolve.traces.tree_tables import RELAX_COLUMN_NAMES, RELAX_GRID, TREE_COLUMN_NAMES, tree_path

V = 6


def _entropy(d):
    nz = d[d > 0]
    return float(-(nz * np.log(nz)).sum())


def random_tree(rng, max_nodes=9, width=3, bfs=True):
    """(parents, tokens, p, q, children) of a random tree grown by expanding random nodes with i.i.d. children,
    numbered breadth-first (``bfs``) or in creation order (parents first, siblings contiguous, depth not
    monotonic in the index: the harvest's numbering)."""
    parents, tokens, children = [], [], [0]
    p = [rng.dirichlet(np.full(V, 0.6))]
    q = [rng.dirichlet(np.full(V, 0.6))]
    open_rows = [0]  # rows (0 root, i + 1 node i) not yet expanded
    while open_rows and len(tokens) < max_nodes:
        row = open_rows.pop(int(rng.integers(len(open_rows))))
        k = min(int(rng.integers(1, width + 1)), max_nodes - len(tokens))
        for _ in range(k):
            x = int(rng.choice(V, p=q[row]))
            parents.append(row - 1)
            tokens.append(x)
            children.append(0)
            children[row] += 1
            p.append(rng.dirichlet(np.full(V, 0.6)))
            q.append(rng.dirichlet(np.full(V, 0.6)))
            open_rows.append(len(tokens))
    if not bfs:
        return np.array(parents), np.array(tokens), np.array(p), np.array(q), children
    # renumber so that children are contiguous, parents first (BFS order)
    order, queue = [], [-1]
    while queue:
        r = queue.pop(0)
        kids = [i for i, pa in enumerate(parents) if pa == r]
        order += kids
        queue += kids
    new = {old: i for i, old in enumerate(order)}
    P = np.array([-1 if parents[o] < 0 else new[parents[o]] for o in order])
    T = np.array([tokens[o] for o in order])
    rows = [0] + [o + 1 for o in order]
    return P, T, np.array([p[r] for r in rows]), np.array([q[r] for r in rows]), [children[r] for r in rows]


def tree_frame(trees, seq_id=0):
    """Tree-table rows of ``trees`` [(parents, tokens, p, q, children)] (one text, trees 0, 1, ...)."""
    out = []
    for t, (P, T, p, q, children) in enumerate(trees):
        n = len(T)
        resid = np.zeros(n)
        sib = np.zeros(n, dtype=np.int64)
        for r in range(n + 1):
            kids = [i for i in range(n) if P[i] == r - 1]
            R = p[r].copy()
            for s, c in enumerate(kids):
                resid[c], sib[c] = R[T[c]], s
                m = np.maximum(R - q[r], 0.0)
                R = m / m.sum() if m.sum() > 0 else R
        grid = np.asarray(RELAX_GRID)
        relaxed = np.zeros((n, grid.size))
        for r in range(n + 1):
            kids = [i for i in range(n) if P[i] == r - 1]
            for g, w in enumerate(grid):
                R = (1 - w) * p[r] + w * q[r]
                for c in kids:
                    relaxed[c, g] = R[T[c]]
                    m = np.maximum(R - q[r], 0.0)
                    R = m / m.sum() if m.sum() > 0 else R
        overlap = np.minimum(p, q).sum(1)
        match = (p.argmax(1) == q.argmax(1)).astype(np.int64)
        depth = np.zeros(n, dtype=np.int64)
        cum = np.zeros(n)
        for i in range(n):
            depth[i] = 1 if P[i] < 0 else depth[P[i]] + 1
            cum[i] = q[P[i] + 1][T[i]] * (1.0 if P[i] < 0 else cum[P[i]])
        out.append(pd.DataFrame({
            "seq_id": seq_id, "tree": t, "position": 3 * t, "node": np.arange(n), "parent": P, "depth": depth,
            "sibling": sib, "token": T, "draft_prob": [q[P[i] + 1][T[i]] for i in range(n)],
            "target_prob": [p[P[i] + 1][T[i]] for i in range(n)], "residual_prob": resid, "draft_cumprob": cum,
            "node_draft_top_prob": q[1:].max(1), "node_draft_entropy": [_entropy(q[i + 1]) for i in range(n)],
            "node_target_top_prob": p[1:].max(1), "children": children[1:], "tree_nodes": n,
            "root_draft_top_prob": q[0].max(), "root_draft_entropy": _entropy(q[0]), "root_children": children[0],
            "specinfer_tokens": tv.specinfer_expected_tokens(P, T, p, q),
            "traversal_tokens": tv.traversal_expected_tokens(P, T, p, q),
            "node_target_entropy": [_entropy(p[i + 1]) for i in range(n)], "node_overlap": overlap[1:],
            "node_top_token_match": match[1:], "relaxed_residual_prob": list(relaxed),
            "root_target_entropy": _entropy(p[0]), "root_target_top_prob": p[0].max(), "root_overlap": overlap[0],
            "root_top_token_match": match[0]}))
    return pd.concat(out, ignore_index=True)[list(TREE_COLUMN_NAMES + RELAX_COLUMN_NAMES)]


def write_tree_tables(directory, seed: int = 0, trees: int = 60, max_nodes: int = 9, width: int = 3) -> None:
    """Write ``trees`` random trees per split (5 texts) as ``DIR/{split}.trees.parquet``, recorded in the dataset's
    metadata as written with its records (:func:`record_files`), as a tree harvest writes them."""
    for k, split in enumerate(("train", "valid", "test")):
        rng = np.random.default_rng([seed, k])
        frames = [tree_frame([random_tree(rng, max_nodes, width) for _ in range(trees // 5)], seq_id=s)
                  for s in range(5)]
        pd.concat(frames, ignore_index=True).to_parquet(tree_path(Path(directory), split))
    record_files(directory)


def record_files(directory) -> None:
    """Record every file of the dataset in ``directory`` (records, tree tables, texts.jsonl) in its metadata.json
    as written together (:mod:`evolve.traces.binding`): what writing the whole dataset again does, for a test that
    writes or edits a file on its own and means it as part of the dataset."""
    import json

    import pyarrow.parquet as pq

    from evolve.traces.binding import FILES_KEY, file_record

    directory = Path(directory)
    meta_path = directory / "metadata.json"
    if not meta_path.exists():
        return
    meta = json.loads(meta_path.read_text())
    files = {}
    for path in sorted(directory.iterdir()):
        if path.suffix == ".parquet":
            files[path.name] = file_record(path, pq.ParquetFile(path).metadata.num_rows)
        elif path.name == "texts.jsonl" or (path.suffix == ".json" and path.name != "metadata.json"):
            files[path.name] = file_record(path, 0)
    meta[FILES_KEY] = files
    meta_path.write_text(json.dumps(meta, indent=2))

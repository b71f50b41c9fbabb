"""Named draft-tree shapes, the competitors of an evolved shape, and their programs (the seeds of a search).

Each named shape gives a value at every decision row of :class:`evolve.eval.tree_scoring.ShapeData` (kept
children = ceil(value)); :func:`competitors` tunes their settings on one split and scores another, and
:func:`shape_expressions` writes them as tree-shape programs.
"""
from __future__ import annotations

import numpy as np

from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.eval.tree_levels import shape_values
from evolve.eval.tree_scoring import ShapeData, ShapeMetrics, shape_metrics, shape_oracle
from evolve.gp.primitives import FEATURES

#: Grid of the entropy slope c of the ``adaptive_width`` shape (children = ceil(1 + c * entropy), nats).
ADAPTIVE_GRID: tuple[float, ...] = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)


def fixed_width_values(data: ShapeData, width: int, depth: int) -> np.ndarray:
    """Values of the fixed-width shape: ``width`` children at every node shallower than ``depth`` (the root
    at depth 0), none below; width 1 is a chain of ``depth`` drafts. Expression:
    ``if_gt(depth - 0.5, draft_index, width, 0)``."""
    return np.where(data.depth < depth, float(width), 0.0)


def static_values(data: ShapeData, widths: tuple[int, ...]) -> np.ndarray:
    """Values of a static tree given as children per depth (``widths[d]`` children at every node of depth d;
    none past the tuple): Medusa's fixed sparse trees (Cai et al. 2024, arXiv 2401.10774) in our terms."""
    w = np.asarray(list(widths) + [0], dtype=np.float64)
    return w[np.minimum(data.depth, len(widths))]


def adaptive_values(data: ShapeData, slope: float, depth: int) -> np.ndarray:
    """Values of the adaptive-width shape: children = ceil(1 + ``slope`` * H) at every node shallower than
    ``depth``, H the entropy (nats) of the drafter's distribution the node was drawn from (0 at the root):
    wider where the drafter is unsure. Expression:
    ``if_gt(depth - 0.5, draft_index, add(1, mul(slope, draft_entropy)), 0)``."""
    h = data.decisions.feature("draft_entropy")
    return np.where(data.depth < depth, 1.0 + slope * h, 0.0)


#: Grid of the slope c of the ``level_gate`` seeds (a level is expanded while its best draft_cumprob > c * depth).
LEVEL_GATE_GRID: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)


def eagle2_topk_expression(top: int, depth: int, widest: int) -> str:
    """Program of EAGLE-2's per-level expansion: at every depth shallower than ``depth``, the ``top`` nodes of
    the level with the largest draft_cumprob keep all their drawn children (``widest``), the others none
    (Li et al. 2024, arXiv 2406.16858, expanding the top-k nodes of each layer by value)."""
    return f"if_gt({depth - 0.5!r}, draft_index, if_gt({top - 0.5!r}, level_rank, {float(widest)!r}, 0.0), 0.0)"


def eagle2_topk_values(data: ShapeData, top: int, depth: int) -> np.ndarray:
    """Values of :func:`eagle2_topk_expression` (every drawn child where the expression gives ``widest``)."""
    rank = data.decisions.feature_rows[FEATURES.index("level_rank")]
    return shape_values(data, lambda X, rows: np.where((data.depth[rows] < depth) & (X[rank] < top - 0.5),
                                                       np.inf, 0.0), True)


def shape_expressions(widest: int, deepest: int) -> list[tuple[str, str]]:
    """(name, expression) of the named shapes above as programs (the seeds of a tree-shape search): every chain
    and fixed width up to ``widest`` children and ``deepest`` depths, the adaptive widths, EAGLE-2's per-level
    top-k (:func:`eagle2_topk_expression`) and the level gates (every drawn child while the level's best
    draft_cumprob exceeds c times the depth: deeper levels need more confidence)."""
    out = [(f"fixed_width:width={k},depth={d}", f"if_gt({d - 0.5!r}, draft_index, {float(k)!r}, 0.0)")
           for k in range(1, widest + 1) for d in range(1, deepest + 1)]
    out += [(f"adaptive_width:c={c:g},depth={d}",
             f"if_gt({d - 0.5!r}, draft_index, add(1.0, mul({c!r}, draft_entropy)), 0.0)")
            for c in ADAPTIVE_GRID for d in range(1, deepest + 1)]
    out += [(f"eagle2_topk:top={k},depth={d}", eagle2_topk_expression(k, d, widest))
            for k in range(1, widest ** 2 + 1) for d in range(1, deepest + 1)]
    out += [(f"level_gate:c={c:g}", f"if_gt(level_cumprob, mul({c!r}, draft_index), {float(widest)!r}, 0.0)")
            for c in LEVEL_GATE_GRID]
    return out


def competitors(data: ShapeData, costs: Costs = DEFAULT_COSTS, tuned_on: ShapeData | None = None,
                score=None, per_tree: dict[str, np.ndarray] | None = None) -> dict[str, tuple[str, ShapeMetrics]]:
    """The named shapes on ``data``, each with its setting tuned on ``tuned_on`` (default ``data``; pass the
    valid split to score test honestly) by ``score(metrics)`` (default tokens per second): {name: (setting,
    metrics)}. With a dict ``per_tree``, each shape's expected tokens and seconds per tree of ``data`` (float64
    (trees, 2)) are stored in it under the shape's name (not the bound's).

    * ``chain``: the tree's first path (the first drawn child at every node, to the harvested depth),
      verified token-wise (SpecInfer on a chain is the standard rule); ``best_chain``: the same cut at a
      depth tuned (0 = plain decoding .. deepest harvested);
    * ``fixed_width``: k children per node to a depth, both tuned (k >= 2): a fixed top-K tree;
    * ``eagle2``: every drawn child, expanded best first by draft_cumprob under a node budget, the budget
      tuned (EAGLE-2's dynamic expansion, Li et al. 2024, arXiv 2406.16858); ``eagle2_full``: every
      harvested node (the harvest's own budget);
    * ``eagle2_topk``: at every level the ``top`` nodes by draft_cumprob keep every drawn child, to a depth,
      both tuned (EAGLE-2's per-layer expansion, :func:`eagle2_topk_expression`);
    * ``medusa_static``: a static tree wide at the root and narrowing by one child per depth (K, K-1, ..., 1,
      1, ...) to a tuned depth (Medusa's sparse trees, Cai et al. 2024, arXiv 2401.10774);
    * ``adaptive_width``: ceil(1 + c H) children (H the drafter's entropy), c and depth tuned;

    and the bound ``shape_oracle`` (:func:`shape_oracle`; not a shape: each tree's best subtree knowing its
    outcome).
    """
    tune = tuned_on if tuned_on is not None else data
    score = score or (lambda m: m.tokens_per_second)
    widest = int(max(tune.n_children.max(), data.n_children.max(), 1))
    deepest = int(max(tune.depth.max(), data.depth.max(), 1))
    nodes = max(tune.max_nodes, data.max_nodes)

    def run(d: ShapeData, make, budget=None, name=None) -> ShapeMetrics:
        trees = None
        if name is not None and per_tree is not None:
            trees = per_tree[name] = np.zeros((d.trees, 2))
        return shape_metrics(make(d), d, costs, budget, per_tree=trees)

    def pick(name, cands):
        setting, make, budget = max(cands, key=lambda c: score(run(tune, c[1], c[2])))  # the first on ties
        return setting, run(data, make, budget, name)

    out: dict[str, tuple[str, ShapeMetrics]] = {}
    out["chain"] = ("first path", run(data, lambda x: fixed_width_values(x, 1, deepest + 1), name="chain"))
    out["best_chain"] = pick("best_chain", [(f"depth={d}", lambda x, d=d: fixed_width_values(x, 1, d), None)
                                            for d in range(0, deepest + 1)])
    out["fixed_width"] = pick("fixed_width", [
        (f"width={k},depth={d}", lambda x, k=k, d=d: fixed_width_values(x, k, d), None)
        for k in range(2, widest + 1) for d in range(1, deepest + 1)]
        or [("width=1,depth=1", lambda x: fixed_width_values(x, 1, 1), None)])
    every = lambda x: np.full(x.decisions.n, np.inf)  # noqa: E731 - every drawn child
    out["eagle2"] = pick("eagle2", [(f"budget={b}", every, b) for b in range(1, nodes + 1)])
    out["eagle2_full"] = (f"budget={nodes}", run(data, every, name="eagle2_full"))
    out["eagle2_topk"] = pick("eagle2_topk", [
        (f"top={k},depth={d}", lambda x, k=k, d=d: eagle2_topk_values(x, k, d), None)
        for k in range(1, widest ** 2 + 1) for d in range(1, deepest + 1)])
    out["medusa_static"] = pick("medusa_static", [
        (f"widths={','.join(str(max(1, widest - i)) for i in range(d))}",
         lambda x, d=d: static_values(x, tuple(max(1, widest - i) for i in range(d))), None)
        for d in range(1, deepest + 1)])
    out["adaptive_width"] = pick("adaptive_width", [
        (f"c={c:g},depth={d}", lambda x, c=c, d=d: adaptive_values(x, c, d), None)
        for c in ADAPTIVE_GRID for d in range(1, deepest + 1)])
    bound = None
    if per_tree is not None:
        bound = per_tree["shape_oracle"] = np.zeros((data.trees, 2))
    out["shape_oracle"] = ("bound: each tree's best subtree knowing its outcome", shape_oracle(data, costs, bound))
    return out


__all__ = ["ADAPTIVE_GRID", "LEVEL_GATE_GRID", "fixed_width_values", "static_values", "adaptive_values",
           "eagle2_topk_expression", "eagle2_topk_values", "shape_expressions", "competitors"]

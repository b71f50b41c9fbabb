"""Level features of draft-tree shapes: a program reading them is evaluated level by level.

A node's *level* is the set of nodes a shape keeps at its depth in its tree (:mod:`evolve.eval.tree_scoring`).
``level_cumprob`` is the largest draft_cumprob there and ``level_rank`` the node's rank there by draft_cumprob
(0 = the most probable, ties in draw order; :data:`evolve.gp.primitives.LEVEL_FEATURES`): EAGLE-2 expands the
top-k nodes of each level by this value (Li et al. 2024, arXiv 2406.16858). Both are known once the level
above has been expanded and its children drawn, before any node of the level is expanded; they read only the
drafter's side, so SpecInfer on the kept tree stays lossless. Since the level depends on the shape's own
choices above it, :func:`shape_values` evaluates such a program one depth at a time; a program without them is
evaluated once over every decision row. The level is the shape's tree before any node budget, so a program
reading level features is scored without a binding budget.
"""
from __future__ import annotations

import numpy as np

from evolve.eval.evaluator import EvalData, check_features, lowered_program
from evolve.eval.fastpath.layouts import WIDTH, Instr
from evolve.eval.fastpath.lowering import Lowered
from evolve.eval.fastpath.scoring import packed_thresholds
from evolve.eval.tree_scoring import ShapeData, kept_children
from evolve.gp.primitives import FEATURES, LEVEL_FEATURES


def level_features(data: ShapeData, rows: np.ndarray) -> dict[str, np.ndarray]:
    """The level features (:data:`evolve.gp.primitives.LEVEL_FEATURES`) of ``rows`` int64 (k,): kept decision
    rows, the rows of one tree at one depth forming a level (see the module doc). Returns {name: float64 (k,)}."""
    level = (np.searchsorted(data.starts, rows, side="right") - 1) * (int(data.depth.max()) + 1) + data.depth[rows]
    prio = data.priority[rows]
    order = np.lexsort((rows, -prio, level))  # by level, then draft_cumprob descending, then draw order
    first = np.r_[0, np.flatnonzero(np.diff(level[order])) + 1]
    group = np.repeat(np.arange(first.size), np.diff(np.r_[first, rows.size]))
    rank = np.empty(rows.size)
    rank[order] = np.arange(rows.size) - first[group]
    best = np.empty(rows.size)
    best[order] = prio[order][first][group]
    return {"level_cumprob": best, "level_rank": rank}


def reads_levels(lowered: Lowered, data: EvalData) -> bool:
    """Whether a program lowered against ``data``'s feature rows reads a level feature (an operand of an
    instruction, or its result, is one of their rows; operand encoding of :mod:`evolve.eval.fastpath.lowering`)."""
    rows = [data.feature_rows[FEATURES.index(f)] for f in LEVEL_FEATURES]
    codes = [-1 - r for r in rows if r >= 0]
    operands = lowered.code.reshape(-1, WIDTH)[:, Instr.ARG0:]
    return bool(np.isin(operands, codes).any()) or lowered.result in codes


def one_chunk(X: np.ndarray) -> np.ndarray:
    """Work-item bounds int64 (2,) covering every column of ``X`` (one chunk, for small row subsets)."""
    return np.array([0, X.shape[1]], dtype=np.int64)


def program_values(program, data: ShapeData) -> np.ndarray:
    """The values float64 (decision rows,) of a tree-shape :class:`evolve.gp.compiler.Program` on ``data``
    (level by level when it reads a level feature, :func:`shape_values`).
    Raises: InputError when it reads a feature the decision rows lack."""
    check_features(program, data.decisions, "shape")
    lo, _ = lowered_program(program, data.decisions)
    return shape_values(data, lambda X, rows: packed_thresholds(lo, X, one_chunk(X)),
                        reads_levels(lo, data.decisions))


def shape_values(data: ShapeData, evaluate, levels: bool) -> np.ndarray:
    """A shape program's values float64 (decision rows,) on ``data``.

    ``evaluate(X, rows)`` returns the program's values float64 (k,) on the feature matrix ``X`` float64
    (features, k) (the rows of ``data.decisions.X`` at decision rows ``rows`` int64 (k,)). Without ``levels``
    (the program reads no level feature) it is called once on every row. With them, level by level from the
    root: the rows the shape keeps at depth d get their level features (:func:`level_features`), are
    evaluated, and keep their first ceil(v) children for depth d + 1; rows the shape never keeps get 0.
    """
    X = data.decisions.X
    if not levels:
        return np.asarray(evaluate(X, np.arange(X.shape[1])), dtype=np.float64)
    idx = {f: data.decisions.feature_rows[FEATURES.index(f)] for f in LEVEL_FEATURES}
    values = np.zeros(X.shape[1])
    rows = data.starts[:-1].astype(np.int64)
    while rows.size:
        sub = np.ascontiguousarray(X[:, rows])
        for f, v in level_features(data, rows).items():
            sub[idx[f]] = v
        v = np.asarray(evaluate(sub, rows), dtype=np.float64)
        values[rows] = v
        k = kept_children(v, data.n_children[rows])
        parents = np.flatnonzero(k > 0)
        if parents.size == 0:
            break
        counts = k[parents]
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        rows = np.sort(np.repeat(data.first_child[rows[parents]], counts) + offsets)
    return values


__all__ = ["level_features", "reads_levels", "one_chunk", "program_values", "shape_values"]

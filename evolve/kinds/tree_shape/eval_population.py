"""Scoring populations of tree-shape programs (kind ``tree-shape``) on a split's draft trees.

:class:`TreeShapePopulationEvaluator` is the :class:`evolve.eval.population.PopulationEvaluator` of
the kind: it reads the split's tree table beside its chain records (``DIR/{split}.trees.parquet``,
:mod:`evolve.traces.tree_tables`), runs every program on the table's decision rows
(:func:`evolve.eval.tree_scoring.shape_data`) and reduces the values with
:func:`evolve.eval.tree_scoring.shape_counts` under the run's cost file. Same caching and statistics as the
other scorers.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from evolve.errors import InputError
from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.eval.evaluator import AcceptanceQualityFitness, EvalData, check_features
from evolve.eval.population import PopulationEvaluator
from evolve.eval.fastpath.scoring import packed_thresholds
from evolve.eval.tree_levels import one_chunk, reads_levels, shape_values
from evolve.eval.tree_scoring import (
    N_SHAPE_COUNTS, NO_TREES, ShapeData, cost_tables, metrics_from_shape_counts, shape_counts, shape_data,
)
from evolve.traces.tree_tables import TreeTable, load_trees


def trees_beside(data: EvalData) -> TreeTable:
    """The tree table of ``data``'s split in the directory of its records file (``data.source``).

    Raises: InputError when ``data`` was not read from a dataset file, or the directory holds no tree table
    for the split (or a damaged one).
    """
    source = Path(data.source)
    if not data.split or not source.exists():
        raise InputError(f"{data.source}: a tree-shape program is scored on the split's tree table "
                         f"(DIR/SPLIT.trees.parquet); these records were not read from a dataset directory")
    return load_trees(source.parent, data.split)


class TreeShapePopulationEvaluator(PopulationEvaluator):
    """Scores tree-shape programs on the trees beside ``data`` (or on ``shapes`` when given) in tokens per second
    under ``costs`` (:mod:`evolve.eval.tree_scoring`); ``budget``: most nodes kept per tree (None: every
    harvested node may be kept).

    Raises (constructor): InputError when the split has no tree table (:func:`trees_beside`); (evaluate)
    InputError for a program reading a feature a shape may not read.
    """

    def __init__(self, data: EvalData | None, fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(),
                 gamma: int | None = None, cache_size: int = 0, costs: Costs = DEFAULT_COSTS,
                 shapes: ShapeData | None = None, budget: int | None = None, **kw):
        shapes = shapes if shapes is not None else shape_data(trees_beside(data))
        # no derived rows: they would be computed from the level features' NaN rows, which shape_values fills
        # level by level
        super().__init__(shapes.decisions, fitness, gamma=None, cache_size=cache_size, derive=False, **kw)
        self.shapes = shapes
        self.costs = costs
        self.budget = shapes.max_nodes if budget is None else min(int(budget), shapes.max_nodes)
        self._forward, self._draft = cost_tables(costs, shapes.max_nodes)
        self._damage = np.zeros(shapes.accept.size)

    def _check(self, program) -> None:
        from evolve.kinds.tree_shape import KIND
        KIND.check_features(program.features, "shape")
        check_features(program, self.data, "shape")

    def _counts(self, packed, D, lowered=()):
        s = self.shapes
        out = np.zeros((len(lowered), N_SHAPE_COUNTS))
        for i, lo in enumerate(lowered):
            if reads_levels(lo, self.data):
                if self.budget < s.max_nodes:
                    raise InputError(f"{s.table.source}: a shape reading level features is scored without a node "
                                     f"budget (its levels are the shape's own tree before the budget)")
                v = shape_values(s, lambda X, rows, lo=lo: packed_thresholds(lo, X, one_chunk(X)), True)
            else:
                v = packed_thresholds(lo, self.data.X, self.data.bounds, D)
            shape_counts(v, s.tree_rows, s.accept, self._damage, self.budget, self._forward, self._draft, out[i],
                         NO_TREES)
        return out

    def _metrics(self, counts):
        return metrics_from_shape_counts(counts, self.costs)


__all__ = ["trees_beside", "TreeShapePopulationEvaluator"]

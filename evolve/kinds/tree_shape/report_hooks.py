"""What a draft-tree shape does in ``benchmark.py trees`` (its row, the kept subtrees verified by SpecInfer) and in
``benchmark.py live`` (a tree row, :mod:`evolve.live.tree_decoding`): the kind's report hooks, :mod:`evolve.kinds.tree_shape.plugin`."""
from __future__ import annotations

from typing import Any

import numpy as np

from evolve.eval.costs import Costs
from evolve.eval.tree_levels import program_values
from evolve.eval.tree_scoring import ShapeData, shape_metrics
from evolve.live.tree_decoding import TreeDecoder
from evolve.report.trees import tree_row


def tree_rows(split: str, name: str, program, d: ShapeData, tune: ShapeData, costs: Costs) -> list[dict[str, Any]]:
    """The tree-shape champion's row: its kept subtrees verified by SpecInfer."""
    trees = np.zeros((d.trees, 2))
    return [tree_row(split, name, "champion", "evolved shape",
                 shape_metrics(program_values(program, d), d, costs, per_tree=trees), trees)]


def live_decoder(rule) -> TreeDecoder:
    """A tree shape decodes live as a tree row: the grown tree pruned by its program, verified by SpecInfer."""
    return TreeDecoder(rule.name, rule.program)


__all__ = ["live_decoder", "tree_rows"]

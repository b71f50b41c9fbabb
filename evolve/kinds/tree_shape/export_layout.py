"""The exported module of a draft-tree shape (``python -m evolve export``): ``tree_children``."""
from __future__ import annotations

from evolve.export.codegen import Layout, shown
from evolve.kinds.tree_shape import KIND


def _tree_docstring(name: str, library: str) -> str:
    return f'''"""Draft-tree shape {shown(name)}, exported for {library} by specdec-evolve (`python -m evolve export`).

Generated; do not edit. Standalone: imports only math and {library}.

tree_children(**columns) returns, per element of the broadcast columns, how many children to draw at a
node of a draft tree (float64: ceil(v) where the shape's value v > 0, else 0; NaN gives 0, inf every
child the engine allows): at the root and at every kept node, before drawing its children, draw that many
independently (with replacement) from the drafter's distribution there, then verify the tree with
SpecInfer's recursive rejection sampling (Miao et al. 2024, arXiv 2305.09781), which keeps the output
distributed as the target's. Never choose the count after seeing those children's tokens. Its columns
describe the node: draft_prob (the drafter's probability of the node's token; 1 at the root),
draft_top_prob and draft_entropy (largest probability and entropy, nats, of the drafter's distribution
the node was drawn from; 1 and 0 at the root), draft_cumprob (the product of the drafter's probabilities
from the root down to the node; 1 at the root), draft_index (the node's depth, 0 at the root),
position (tokens generated before the step), and the node's level (the nodes kept at its depth):
level_cumprob (the largest draft_cumprob there; 1 at the root) and level_rank (the node's rank there by
draft_cumprob, 0 = the most probable, ties to the node drawn first). COLUMNS lists those this shape
reads. A shape reading no level column: cap the tree at the engine's node budget and expand nodes best
first by draft_cumprob (EAGLE-2's order, Li et al. 2024, arXiv 2406.16858), as it was scored. A shape
reading one: expand level by level (draw the children of every node of a level, then compute the next
level's columns and counts), with no node budget below the tree it keeps, as it was scored.
"""'''


#: A draft-tree shape: ``tree_children``.
TREE_LAYOUT = Layout(KIND, "v", lambda name, library: _tree_docstring(name, library),
                     lambda target: "\n".join([target.columns, target.operators]),
                     "Children to keep (float64 counts: ceil(v) where the shape's value v > 0, else 0) at every node; "
                     "see the module doc.", (f"KIND = {KIND.name!r}",), children=True)


__all__ = ["TREE_LAYOUT"]

"""Kind ``tree-shape``: a draft-tree shape.

At the root and at every kept node of a harvested draft tree, from the drafter's side of the node, the program
says how many of its drawn children to keep (ceil(v), none for v <= 0); the kept tree is verified by SpecInfer's
recursive rejection sampling, so it is lossless; scored in tokens per second under a cost file on the dataset's
tree tables (the draft-tree scoring every tree command shares: :mod:`evolve.eval.tree_scoring`,
:mod:`evolve.eval.tree_levels`, the named shapes of :mod:`evolve.eval.tree_competitors`). The package holds the rest of
what the kind is: its population scorer (``eval_population``), warm start (``search_seeds``), command rows and live
row (``report_hooks``), exported layout (``export_layout``), what the engines can express of it
(``export_engines``) and its hooks (``plugin``).
"""
from evolve.gp.primitives import DERIVED_FEATURES, HISTORY_FEATURES, LEVEL_FEATURES, LOOKUP_FEATURES, SUFFIX_FEATURES
from evolve.kinds.base import TARGET_FEATURES, ProgramKind

KIND = ProgramKind(
    name="tree-shape", title="draft-tree shape",
    output="v per tree node (the root included), from the drafter's side of the node; keep its first ceil(v) "
           "drawn children (none for v <= 0), then verify the kept tree with SpecInfer's recursive rejection sampling",
    function_name="tree_children", plugin="evolve.kinds.tree_shape.plugin",
    excluded_features=TARGET_FEATURES + LOOKUP_FEATURES + HISTORY_FEATURES + SUFFIX_FEATURES,
    excluded_reason="the target's quantities are not known before the target is called; lookup_len and "
                    "lookup_freq describe a prompt-lookup draft, and the suffix_ columns a suffix-decoding draft, "
                    "for a verification-length policy; the history features "
                    "(prev_verified, prev_accepted, accept_ewma, first_hit_ewma, since_reject) describe a "
                    "verification-length policy's earlier calls",
    derived_features=DERIVED_FEATURES + LEVEL_FEATURES,
    objectives=("tokens_per_second",),
    needs="the tree tables of a tree harvest (DIR/SPLIT.trees.parquet)",
    source="draft trees: SpecInfer (Miao et al. 2024, arXiv 2305.09781); EAGLE-2's dynamic trees (Li et al. "
           "2024, arXiv 2406.16858)",
    reads_gamma=False,
    resamples=False,
)

__all__ = ["KIND"]

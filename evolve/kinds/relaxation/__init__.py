"""Kind ``relaxation``: the weight w in [0, 1] of relaxed block verification.

A block is verified with the lossless block verification of Sun et al. 2024 (arXiv 2403.10444) against the
mixture target p~ = (1 - w) p + w q (the mixture of speculative cascades, Narasimhan et al. 2024, arXiv
2405.19261). w may read prefix-level features only (never the drafted token), so the relaxed target is a
function of the prefix and block verification against it stays exact (relaxed block verification from records,
:mod:`evolve.eval.relaxed_block`, shared with the kinds that verify with it). The package holds its population
scorer (``eval_population``), warm start (``search_seeds``), command rows (``report_hooks``), live row
(``live``), ``benchmark.py pareto``'s curves (``pareto``), exported layout (``export_layout``), what the engines
can express of it (``export_engines``) and its hooks (``plugin``).
"""
from evolve.gp.primitives import DERIVED_FEATURES, HISTORY_FEATURES, LEVEL_FEATURES, LOOKUP_FEATURES, SUFFIX_FEATURES
from evolve.kinds.base import TOKEN_FEATURES, ProgramKind

KIND = ProgramKind(
    name="relaxation", title="relaxation weight",
    output="w in [0, 1] per block position; the block is verified against (1 - w) p + w q",
    function_name="relaxation_weight", plugin="evolve.kinds.relaxation.plugin",
    excluded_features=(TOKEN_FEATURES + DERIVED_FEATURES + LOOKUP_FEATURES + LEVEL_FEATURES + HISTORY_FEATURES
                       + SUFFIX_FEATURES),
    excluded_reason="draft_prob, target_prob and target_rank depend on the drafted token; draft_cumprob is the "
                    "survival estimate of a verification-length policy, not a record column; lookup_len and "
                    "lookup_freq describe a prompt-lookup draft, and the suffix_ columns a suffix-decoding draft, "
                    "for a verification-length policy; level_cumprob "
                    "and level_rank describe a draft tree's level for a tree-shape program; the history features "
                    "(prev_verified, prev_accepted, accept_ewma, first_hit_ewma, since_reject) describe a "
                    "verification-length policy's earlier calls",
    columns=("draft_index", "overlap", "block_residual_mass", "block_residual_phi"),
    objectives=("speed_at_tv", "pareto"), verifies="block",
    source="block verification: Sun et al. 2024 (arXiv 2403.10444), against the mixture target of "
           "Narasimhan et al. 2024 (arXiv 2405.19261)",
    resamples=False,
)

__all__ = ["KIND"]

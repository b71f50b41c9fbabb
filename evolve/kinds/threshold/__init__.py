"""Kind ``threshold``: the per-token acceptance threshold tau of speculative sampling.

The drafted token x is accepted iff u < tau with u ~ U[0, 1); tau = min(1, p(x)/q(x)) is the lossless standard
rule (Leviathan et al. 2023, arXiv 2211.17192; Chen et al. 2023, arXiv 2302.01318). Scoring is the shared
per-token evaluator (:mod:`evolve.eval.evaluator`, :mod:`evolve.eval.population`); this package holds the rest
of what is the kind's own: its command rows (``report_hooks``), its exported layout (``export_layout``) and its
hooks (``plugin``).
"""
from evolve.gp.primitives import DERIVED_FEATURES, HISTORY_FEATURES, LEVEL_FEATURES, LOOKUP_FEATURES, SUFFIX_FEATURES
from evolve.kinds.base import ProgramKind

_DERIVED = "draft_cumprob is the survival estimate of a verification-length policy, not a record column"
_LOOKUP = ("lookup_len and lookup_freq describe a prompt-lookup draft, and the suffix_ columns a suffix-decoding "
           "draft, for a verification-length policy")
_LEVEL = "level_cumprob and level_rank describe a draft tree's level for a tree-shape program"

_HISTORY = ("the history features (prev_verified, prev_accepted, accept_ewma, first_hit_ewma, since_reject) describe "
            "a verification-length policy's earlier calls")

KIND = ProgramKind(
    name="threshold", title="acceptance threshold",
    output="tau in [0, 1] per drafted token; the token is accepted iff u < tau (u ~ U[0, 1))",
    function_name="acceptance_threshold", plugin="evolve.kinds.threshold.plugin",
    excluded_features=DERIVED_FEATURES + LOOKUP_FEATURES + LEVEL_FEATURES + HISTORY_FEATURES + SUFFIX_FEATURES,
    excluded_reason=f"{_DERIVED}; {_LOOKUP}; {_LEVEL}; {_HISTORY}",
    objectives=("acceptance_quality", "expected", "speed_at_tv", "pareto"), verifies="token",
    source="speculative sampling: Leviathan et al. 2023 (arXiv 2211.17192); Chen et al. 2023 (arXiv 2302.01318)",
)

__all__ = ["KIND"]

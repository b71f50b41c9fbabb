"""Kind ``verify-length``: a verification-length policy.

Before each draft step, from the drafter's side of the last drafted token (its probability, top probability,
entropy, the cumulative product of the drafter's probabilities, the draft index) and the request so far (the history
features of :mod:`evolve.kinds.verify_length.history`), the policy decides whether to draft one more token; every drafted token is verified with the standard rule (or the run's ``verify_with``), so
with the standard rule it is lossless; scored in tokens per second under a cost file (``eval_policy``,
:mod:`evolve.eval.costs`). The package holds its scoring (``eval_policy``), warm start (``search_seeds``),
command rows (``report_hooks``), exported layout (``export_layout``) and hooks (``plugin``).
"""
from evolve.gp.primitives import DERIVED_FEATURES, HISTORY_FEATURES, LEVEL_FEATURES
from evolve.kinds.base import TARGET_FEATURES, ProgramKind
from evolve.kinds.verify_length.settings import LengthSettings

KIND = ProgramKind(
    name="verify-length", title="verification-length policy",
    output="v per draft step, from the drafter's side of the last drafted token (and, for prompt lookup, the "
           "next token's match); draft one more token iff v > 0, then verify every drafted token with the standard rule",
    function_name="keep_drafting", plugin="evolve.kinds.verify_length.plugin",
    excluded_features=TARGET_FEATURES + LEVEL_FEATURES,
    excluded_reason="the target's quantities are not known before the target is called; level_cumprob and "
                    "level_rank describe a draft tree's level for a tree-shape program",
    derived_features=DERIVED_FEATURES + HISTORY_FEATURES,
    columns=("draft_index",),
    objectives=("tokens_per_second", "pareto_tokens_per_second"),
    source="when to stop drafting: SpecDec++ (Huang et al. 2024, arXiv 2405.19715); confidence-scheduled "
           "verification of DSpark (Cheng et al. 2026, arXiv 2607.05147)",
    settings=LengthSettings,
)

__all__ = ["KIND"]

"""What a verification-length policy does in ``benchmark.py``: its rows (tokens per second, with the competitor
policies) and the per-batch-size schedule of the concurrency table (the kind's compare hook,
:mod:`evolve.kinds.verify_length.plugin`; live decoding is :mod:`evolve.kinds.verify_length.live`)."""
from __future__ import annotations

from evolve.eval.evaluator import EvalData
from evolve.kinds.base import KindContext
from evolve.kinds.verify_length import KIND
from evolve.kinds.verify_length.eval_schedule import split_schedule
from evolve.kinds.verify_length.report_live import live_headroom
from evolve.kinds.verify_length.report_compare import (NOTES, comparison_competitors, length_scores, split_headroom,
                                                       weighting_note)
from evolve.commands.compare.table import KindScorer
from evolve.traces.io import Traces
from heuristics.contract import Rule


def scores(rule: Rule, context: KindContext, traces: Traces | None, repeats: int):
    """A verification-length policy: its tokens per second under the context's costs
    (:mod:`evolve.commands.compare.speed`)."""
    return length_scores(rule, context.split_data(), repeats, context.gamma, context.costs)


def missing(rule: Rule, data: EvalData, traces: Traces | None) -> list[str]:
    """The columns a verification-length policy needs (the kind's and those its program reads, less the derived
    features) that ``data`` lacks, in order; empty when it can be scored."""
    needed = (*KIND.columns, *(c for c in rule.columns_needed if c not in KIND.derived_features))
    return [c for c in dict.fromkeys(needed) if c not in data.available]


COMPARE = KindScorer(missing, scores, competitors=comparison_competitors, note=weighting_note, bounds=tuple(NOTES),
                     schedule=split_schedule, headroom=split_headroom, live_headroom=live_headroom)
#: What ``benchmark.py``'s caption says about verification-length rows.
CAPTION = ("Verification-length policies (rows of role policy: best_fixed_gamma, confidence_threshold,"
           " survival_prefix, the engines' controllers llama_cpp_p_min, sglang_adaptive, dynamic_sd_goodput and"
           " acceptance_band, on a suffix-decoding harvest suffix decoding's own rule at vLLM's defaults"
           " (suffix_vllm_default) and with its knobs tuned (suffix_tuned), the learned stopping rules"
           " learned_logistic and learned_gbm trained on train, and"
           " verify-length champions) verify a variable number of drafts per call;"
           " their Speedup (and Tok/s under a cost file) uses their own expected seconds per call;"
           " length_oracle is a bound, not a"
           " policy (the best lengths knowing each block's outcome). {names}: drafts verified by the"
           " verifier of their run (a champion's verify_with; the competitors: the first policy's,"
           " else the standard rule).")


__all__ = ["COMPARE", "CAPTION", "scores", "missing"]

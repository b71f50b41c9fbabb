"""The exported module of a threshold (``python -m evolve export``): ``acceptance_threshold`` and
``residual_distribution``."""
from __future__ import annotations

from evolve.export.codegen import SEMANTICS, Layout, shown
from evolve.kinds.threshold import KIND


def _docstring(name: str, library: str) -> str:
    return f'''"""Acceptance rule {shown(name)}, exported for {library} by specdec-evolve (`python -m evolve export`).

Generated; do not edit. Standalone: imports only math and {library}.

acceptance_threshold(**columns) returns tau, float64, one threshold per element of the
broadcast columns: accept a drafted token x iff u < tau(x) with u ~ U[0, 1). Columns are
named as in the trace schema (draft_prob = q(x), target_prob = p(x), entropies in nats,
position and draft_index as numbers, top_token_match as 0/1 or bool, ...); COLUMNS lists
those this rule reads, others are accepted and only take part in the broadcast.

{SEMANTICS} The threshold is 0 where it is NaN or infinite, then clamped to [0, 1].

residual_distribution(target_probs, draft_probs, tau) is the distribution to sample from
after a rejection, norm(max(0, p - q * tau)) over the last axis (the vocabulary), with tau
this rule's threshold of every token of the vocabulary at that position.
"""'''


#: A per-token acceptance threshold: ``acceptance_threshold`` and ``residual_distribution``.
THRESHOLD_LAYOUT = Layout(KIND, "tau", _docstring, lambda target: target.helpers,
                          "Thresholds tau (float64, the broadcast shape of the columns) of every element; see the "
                          "module doc.")


__all__ = ["THRESHOLD_LAYOUT"]

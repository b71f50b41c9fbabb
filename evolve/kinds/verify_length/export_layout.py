"""The exported module of a verification-length policy (``python -m evolve export``): ``keep_drafting``."""
from __future__ import annotations

from evolve.export.codegen import SEMANTICS, Layout, core_source, shown
from evolve.gp.primitives import HISTORY_FEATURES
from evolve.kinds.verify_length import KIND
from evolve.kinds.verify_length.history import ALPHA, START, advance_history, outcome_of


def _length_docstring(name: str, library: str) -> str:
    return f'''"""Verification-length policy {shown(name)}, exported for {library} by specdec-evolve (`python -m evolve export`).

Generated; do not edit. Standalone: imports only math and {library}.

keep_drafting(**columns) returns 1.0 or 0.0 (float64), one per element of the broadcast columns:
before each draft step, draft one more token where it is 1.0 (the policy's value v > 0), then send every drafted token
to the target and verify them with the rule VERIFIER names, the one its run used (standard_rejection: the standard
rule, lossless; block_verification: block verification, lossless; else a rule or relaxation of that name, lossy
unless it says otherwise). Its columns describe the
drafter's side of the last drafted token, known before the target is called: draft_prob (its
probability under the drafter; 1 before the first draft), draft_top_prob (the drafter's largest
probability there; 1 before the first draft), draft_entropy (nats; 0 before the first draft),
draft_cumprob (the product of the drafter's probabilities of the tokens drafted so far; 1 before
the first draft), draft_index (the number of tokens drafted so far) and position (the position
of the token about to be drafted); with n-gram prompt lookup also lookup_len (the matched n-gram's
length) and lookup_freq (the share of the earlier occurrences of the matched n-gram, followed by the
tokens drafted so far, that the token about to be drafted follows), both of the token about to be
drafted, which a lookup knows before drafting it. The request so far (known before a block's first
draft, the same at every draft step of the block): prev_verified and prev_accepted (the drafts the
request's previous target call verified and the target accepted; 0 when it drafted none),
accept_ewma (the running acceptance rate accepted / verified of its calls, weight ALPHA on the
newest; 1 before the first call), first_hit_ewma (the same average of whether each call's first
draft was accepted) and since_reject (the drafts accepted since the request's last rejected draft):
keep one History per request, pass **history.columns() with the other columns, and call
history.update(verified, accepted) after every target call that verified drafts (and
history.update(0, 0) after a call where keep_drafting stopped before the first draft). COLUMNS lists
the columns this policy reads.

{SEMANTICS} A NaN value stops drafting. Stop at the engine's longest draft length too. Where it comes from: SpecDec++ (Huang
et al. 2024, arXiv 2405.19715) stops drafting on a predicted rejection; DSpark's
confidence-scheduled verification (Cheng et al. 2026, arXiv 2607.05147) sets the verification
length from the drafter's confidences; this policy was evolved for tokens per second under a
cost file.
"""'''


#: The request's history in an exported module: the scorer's own update (:mod:`evolve.kinds.verify_length.history`),
#: its source text, and a small class that keeps one request's state.
HISTORY_HELPERS = f'''
ALPHA = {ALPHA!r}
HISTORY_COLUMNS = {HISTORY_FEATURES!r}
HISTORY_START = {START!r}
{core_source(advance_history)}
{core_source(outcome_of)}

class History:
    """One request's history columns (see the module doc): columns() to read them, update() after each call."""

    def __init__(self):
        self.state = list(HISTORY_START)

    def columns(self):
        return dict(zip(HISTORY_COLUMNS, self.state))

    def update(self, verified, accepted):
        advance_history(self.state, float(verified), float(accepted), *outcome_of(verified, accepted))
'''


#: A verification-length policy: ``keep_drafting``.
LENGTH_LAYOUT = Layout(KIND, "v", _length_docstring,
                       lambda target: "\n".join([target.columns, target.operators, HISTORY_HELPERS]),
                       "1.0 where the policy drafts one more token (its value > 0), else 0.0; see the module doc.",
                       (f"KIND = {KIND.name!r}",), decision=True,
                       setting_headers=(("VERIFIER", "verify_with"),))


__all__ = ["HISTORY_HELPERS", "LENGTH_LAYOUT"]

"""The request so far: the history features of a verification-length policy, and how a text's calls advance them.

A verification-length policy decides before each draft step whether to draft one more token
(:mod:`evolve.kinds.verify_length.eval_policy`). The history features (:data:`evolve.gp.primitives.HISTORY_FEATURES`)
describe what happened at the text's earlier target calls, so they are known before a block's first draft and stay
the same at every draft step of the block:

* ``prev_verified``: the drafts the text's previous call verified (0: it drafted none, or there was none);
* ``prev_accepted``: how many of them the target accepted;
* ``accept_ewma``: the exponentially weighted running acceptance rate of the text's calls that verified drafts:
  after a call with L > 0 drafts of which a were accepted, ``accept_ewma = (1 - ALPHA) accept_ewma + ALPHA a / L``
  (the draft acceptance rate vLLM logs, accepted / drafted, vllm 0.33.0 ``vllm/v1/spec_decode/metrics.py``, and the
  exponential moving average SGLang's adaptive speculation keeps, sglang 0.5.23
  ``sglang/srt/speculative/adaptive_spec_params.py``, ``ema_alpha`` 0.2);
* ``first_hit_ewma``: the same running average of whether each call's first draft was accepted (for n-gram prompt
  lookup: how often a lookup's continuation held at all);
* ``since_reject``: the drafts accepted since the text's last rejected draft (a call that accepts all L drafts adds
  L; a call with a rejection resets it to 0).

A text starts at :data:`START` (no call yet: both averages at 1, the optimistic start; counts 0). A call that verifies
no draft because the policy stopped before the first one sets ``prev_verified`` and ``prev_accepted`` to 0 and
leaves the rest, so a policy can tell that it did not draft last time. :func:`advance_history` is the one definition
of the update: the scorer runs it compiled (:mod:`evolve.kinds.verify_length.eval_history`), live decoding
(:mod:`evolve.kinds.verify_length.live`) calls it in Python, and an exported module carries its source text
(:mod:`evolve.kinds.verify_length.export_layout`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from evolve.gp.primitives import HISTORY_FEATURES

#: Weight of the newest call in the running averages (SGLang's ``ema_alpha`` default).
ALPHA = 0.2
#: The history of a text before its first call, in :data:`evolve.gp.primitives.HISTORY_FEATURES` order.
START: tuple[float, ...] = (0.0, 0.0, 1.0, 1.0, 0.0)
#: Length of a history state (one value per history feature).
N_HISTORY = len(HISTORY_FEATURES)


def advance_history(state, verified, accepted, first_hit, all_accepted):
    """Advance the history ``state`` by one call that verified ``verified`` drafts, ``accepted`` of them accepted.

    ``state``: the five history features (prev_verified, prev_accepted, accept_ewma, first_hit_ewma, since_reject),
    a float64 array or list changed in place. ``first_hit``: 1.0 if the first draft was accepted, else 0.0;
    ``all_accepted``: 1.0 if every verified draft was accepted, else 0.0 (expectations in [0, 1] where the outcome
    is known only in expectation). A call with ``verified`` 0 sets the counts to 0 and keeps the rest.
    """
    state[0] = verified
    state[1] = accepted
    if verified > 0:
        state[2] = (1.0 - ALPHA) * state[2] + ALPHA * (accepted / verified)
        state[3] = (1.0 - ALPHA) * state[3] + ALPHA * first_hit
        state[4] = all_accepted * (state[4] + verified)


#: :func:`advance_history` compiled for the scorer's kernels.
advance_history_jit = njit(cache=True)(advance_history)


def start_history() -> np.ndarray:
    """A text's history before its first call: float64 (N_HISTORY,) of :data:`START`."""
    return np.array(START)


def outcome_of(verified: int, accepted: int) -> tuple[float, float]:
    """(first_hit, all_accepted) of a call that verified ``verified`` drafts and accepted ``accepted`` of them."""
    return (1.0 if accepted > 0 else 0.0), (1.0 if accepted >= verified else 0.0)


__all__ = ["ALPHA", "START", "N_HISTORY", "advance_history", "advance_history_jit", "start_history", "outcome_of"]

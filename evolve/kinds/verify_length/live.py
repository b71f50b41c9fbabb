"""A verification-length policy decoded live: before each draft step it decides, from the drafter's side of the last
drafted token (:func:`policy_features`, the features :func:`evolve.kinds.verify_length.eval_policy.decision_data`
gives the records), whether to draft one more token (:func:`policy_keep`; the drafter stops at once, so tokens not
sent are never drafted); a step with no draft is a plain decoding step. The drafts are then verified by the
policy's verifier (its run's ``verify_with``: the standard rule, a per-token rule, block verification, relaxed or
not), itself decoded as that rule's kind decodes it (:func:`live_decoder`). A policy that reads the request so far
(the history features, :mod:`evolve.kinds.verify_length.history`) keeps one :class:`PolicyHistory` per text, told
every call's outcome, as the scorer's walk does (:mod:`evolve.kinds.verify_length.eval_history`).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from evolve.eval.evaluator import EvalData, thresholds
from evolve.gp.primitives import CORE_FEATURES, FEATURES, HISTORY_FEATURES, LOOKUP_FEATURES, SUFFIX_FEATURES
from evolve.kinds.verify_length.eval_policy import POLICY_FEATURES
from evolve.kinds.verify_length.history import advance_history, outcome_of, start_history
from evolve.live.decoding import BLOCK_VERIFICATION, ChainDecoder, tokenwise_decoder
from heuristics.registry import get_rule
from heuristics.verifiers import verifier_parts


def policy_features(probs: Sequence[float], tops: Sequence[float], entropies: Sequence[float],
                    start: int, lookahead: dict[str, float] | None = None,
                    history: Sequence[float] | None = None) -> np.ndarray:
    """The decision features before drafting token k = len(probs) of a block, as
    :func:`evolve.kinds.verify_length.eval_policy.decision_data` builds them from records: float64
    (len(POLICY_AVAILABLE), 1), rows in :data:`POLICY_AVAILABLE` order (the target's NaN).

    ``probs``, ``tops``: q_i(x_i) and max q_i of the drafts so far (probabilities); ``entropies``: their
    drafter entropies (nats); ``start``: the text position of the block's first draft; ``lookahead``: the
    drafter's columns of token k, known before drafting it (prompt lookup's ``lookup_len``, ``lookup_freq``, suffix
    decoding's ``suffix_*`` columns;
    :meth:`evolve.engine.drafter_base.Drafter.lookahead`), NaN where not given; ``history``: the text's history
    features (:mod:`evolve.kinds.verify_length.history`; None: a text's start).
    """
    k = len(probs)
    values = {"draft_prob": probs[-1] if k else 1.0, "draft_top_prob": tops[-1] if k else 1.0,
              "draft_entropy": float(entropies[k - 1]) if k else 0.0,
              "draft_cumprob": float(np.prod(probs)) if k else 1.0, "draft_index": float(k),
              "position": float(start + k), **(lookahead or {}),
              **dict(zip(HISTORY_FEATURES, map(float, start_history() if history is None else history)))}
    return np.array([[values.get(f, np.nan)] for f in POLICY_AVAILABLE])


#: The features :func:`policy_features` gives, in :data:`evolve.gp.primitives.FEATURES` order.
POLICY_AVAILABLE: tuple[str, ...] = tuple(f for f in FEATURES if f in POLICY_FEATURES or f in CORE_FEATURES)


def policy_value(policy, X: np.ndarray) -> float:
    """The policy's value v on one decision (``X`` from :func:`policy_features`); NaN or infinite -> -1 (stop)."""
    one = np.ones(1)
    v = float(thresholds(policy, EvalData(X, one, one, one < one, POLICY_AVAILABLE, source="live decoding"))[0])
    return v if math.isfinite(v) else -1.0


def policy_keep(policy, start: int, history: Sequence[float] | None = None):
    """``keep(row, probs, tops, entropies, lookahead=None)`` for :meth:`evolve.engine.drafter_base.Drafter.propose`:
    draft one more token iff the policy's value on :func:`policy_features` (with the text's ``history``) is > 0 (the
    decision after each draft). Its attribute ``lookahead`` says whether the policy reads a drafter's lookahead
    columns (else a drafter need not compute them)."""
    def keep(_row, probs, tops, entropies, lookahead=None) -> bool:
        return policy_value(policy, policy_features(probs, tops, entropies, start, lookahead, history)) > 0.0
    keep.lookahead = any(f in LOOKUP_FEATURES + SUFFIX_FEATURES for f in policy.program.features)
    return keep


class PolicyHistory:
    """One text's history of a policy decoded live (:class:`evolve.live.decoding.ChainDecoder`'s ``history``): its
    blocks' decisions read :attr:`state`, and every call's outcome advances it
    (:func:`evolve.kinds.verify_length.history.advance_history`, the scorer's update)."""

    def __init__(self, policy):
        self.policy = policy
        self.state = start_history()

    def keep(self, start: int):
        """The block's decision (:func:`policy_keep`) with the text's history so far."""
        return policy_keep(self.policy, start, self.state.copy())

    def observe(self, verified: int, accepted: int) -> None:
        """Advance the history by a call that verified ``verified`` drafts, ``accepted`` of them accepted."""
        advance_history(self.state, float(verified), float(accepted), *outcome_of(verified, accepted))


def live_decoder(rule) -> ChainDecoder:
    """A verification-length policy decides live how many tokens to draft, one draft step at a time
    (:func:`policy_keep`); the drafts are verified by the verifier of its run (its setting ``verify_with``:
    :func:`heuristics.verifiers.verifier_parts`; the standard rule without one), decoded as its kind's ``live`` hook
    decodes it (block verification: :data:`evolve.live.decoding.BLOCK_VERIFICATION`).

    Raises: InputError for a verifier no kind decodes live, or one reading a feature live decoding does not compute.
    """
    _, verifier, block = verifier_parts(rule.setting("verify_with"))
    if verifier is not None:
        verifying = verifier.program_kind.hook("live", "python benchmark.py live", f"rule '{verifier.name}'")(verifier)
    elif block:
        verifying = BLOCK_VERIFICATION
    else:
        verifying = tokenwise_decoder(get_rule("standard_rejection"))
    lookahead = tuple(f for f in rule.program.features if f in LOOKUP_FEATURES + SUFFIX_FEATURES)
    history = (lambda: PolicyHistory(rule)) if any(f in HISTORY_FEATURES for f in rule.program.features) else None
    return ChainDecoder(rule.name, verifying.verify, verifying.needed, lambda start: policy_keep(rule, start), lookahead,
                        history)


__all__ = ["POLICY_AVAILABLE", "PolicyHistory", "live_decoder", "policy_features", "policy_keep", "policy_value"]

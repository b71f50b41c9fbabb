"""The exported module of a relaxation weight (``python -m evolve export``): ``relaxation_weight`` and
``relaxed_target``, to be used with block verification against (1 - w) p + w q (Sun et al. 2024, arXiv 2403.10444)."""
from __future__ import annotations

from evolve.export.codegen import SEMANTICS, Layout, Target, core_source, shown
from evolve.kinds.relaxation import KIND
from evolve.verification.block import TORCH_RELAXED_TARGET, relaxed_target


def _relaxation_docstring(name: str, library: str) -> str:
    return f'''"""Relaxation weight {shown(name)}, exported for {library} by specdec-evolve (`python -m evolve export`).

Generated; do not edit. Standalone: imports only math and {library}.

relaxation_weight(**columns) returns w, float64 in [0, 1], one weight per element of the
broadcast columns: the weight of relaxed block verification at one drafted position. Its
columns are prefix-level features of the position, named as in the trace schema (position,
draft_index, draft_entropy and target_entropy in nats of the whole draft and target
distributions there, draft_top_prob, target_top_prob, overlap = sum_v min(p(v), q(v)),
top_token_match as 0/1 or bool); never a feature of the drafted token, so w is a function
of the prefix. COLUMNS lists those this weight reads, others are accepted and only take part
in the broadcast.

{SEMANTICS} The weight is 0 where it is NaN or infinite, then clamped to [0, 1].

relaxed_target(target_probs, draft_probs, w) returns the relaxed target
p~ = (1 - w) p + w q over the last axis (the vocabulary), float64, with w one weight per
position (its shape is that of p without the last axis, or broadcasts to it).

How to deploy it: relaxed block verification. For a block of drafted tokens X_1..X_gamma,
compute w_i = relaxation_weight(...) from position i's prefix-level features and verify the
block with lossless block verification (Ziteng Sun et al. 2024, "Block verification
accelerates speculative decoding", arXiv 2403.10444) against p~_i = relaxed_target(p_i, q_i,
w_i) in place of the target's p_i: block weights min(1, P~_(i-1) p~_i(X_i) / q_i(X_i)),
residual masses, stopping probabilities and the residual distribution
norm(max(0, P~_i p~_(i+1) - q_(i+1))) all use p~. After a fully accepted block the bonus token
is drawn from p itself (w = 0 at the bonus position). Since w does not depend on the drafted
token, block verification against p~ stays exact for p~ (the mixture target of speculative
cascades, Narasimhan et al. 2024, arXiv 2405.19261): position i's token follows p~_i, at total
variation w_i TV(p_i, q_i) = w_i (1 - overlap_i) from p_i. w = 0 everywhere is lossless block
verification. Do not use w as a per-token acceptance threshold.
"""'''


#: ``relaxed_target`` of each library's module: the verification core's function (numpy, word for word) and its
#: torch text (:mod:`evolve.verification.block`).
RELAXED_TARGET = {"numpy": core_source(relaxed_target), "torch": TORCH_RELAXED_TARGET}


def _relaxed_target(target: Target) -> str:
    """``relaxed_target`` for ``target``'s library."""
    return RELAXED_TARGET[target.library]


#: A relaxation weight: ``relaxation_weight`` and ``relaxed_target``.
RELAXATION_LAYOUT = Layout(KIND, "w", _relaxation_docstring,
                           lambda target: "\n".join([target.columns, target.operators, _relaxed_target(target)]),
                           "Weights w (float64 in [0, 1], the broadcast shape of the columns) of every element; "
                           "see the module doc.", (f"KIND = {KIND.name!r}",))


__all__ = ["RELAXATION_LAYOUT"]

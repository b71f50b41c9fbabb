"""The competitors of a verification-length policy, and the bound: what an evolved policy has to beat.

Every competitor chooses, at each harvested block, how many drafts to verify (and how many it drafted); its calls
are then priced exactly as a policy's (:mod:`evolve.kinds.verify_length.eval_rows`: the drafts verified by the same
verifier, the blocks weighted by the same weighting), block by block, so every row can be resampled by text (:mod:`evolve.kinds.verify_length.eval_headroom`). :func:`competitors`
tunes each family's setting on one split (valid, when scoring test) and scores another:

* ``best_fixed_gamma``: the fixed draft length (0..gamma) with the most tokens per second;
* ``confidence_threshold``: stop when the drafter's top probability of the last drafted token is below h
  (SpecDec++, Huang et al. 2024, arXiv 2405.19715, stops on a predicted rejection probability; the confidence
  early exit proposed for vLLM as ``draft_confidence_threshold`` reads the draft's top probability: not in vLLM
  0.33.0's code), h tuned;
* ``survival_prefix``: draft ``gamma`` tokens, then verify the prefix L that maximises expected tokens per second
  with the cumulative product of the drafter's probabilities as the survival estimate (confidence-scheduled
  verification of DSpark, Cheng et al. 2026, arXiv 2607.05147);
* the engines' controllers (:mod:`evolve.kinds.verify_length.eval_controllers`): llama.cpp's ``--spec-draft-p-min``,
  SGLang's adaptive speculation, vLLM Dynamic SD's goodput pick and the acceptance-band controller proposed for
  vLLM;
* the learned stopping rules (:mod:`evolve.kinds.verify_length.eval_learned`): an acceptance predictor trained on
  train (logistic regression, gradient-boosted trees) with the stop on its predicted survival tuned;
* on a suffix-decoding harvest, suffix decoding's own rule (:mod:`evolve.kinds.verify_length.eval_suffix`): at vLLM's
  defaults, and with its four knobs tuned.

And one bound, not a policy: ``length_oracle`` (:func:`length_oracle`), the most tokens per second any per-block
choice of lengths gives when each block's outcome is known (it reads the target); a policy's distance to it is
what better features could still win, and where it equals plain decoding no policy can speed decoding up.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.eval.evaluator import EvalData
from evolve.eval.headroom import dinkelbach
from evolve.kinds.verify_length.eval_controllers import controller_rows
from evolve.kinds.verify_length.eval_history import block_end
from evolve.kinds.verify_length.eval_learned import learned_rows
from evolve.kinds.verify_length.eval_policy import LengthMetrics, length_choices
from evolve.kinds.verify_length.eval_rows import Scored, Scoring, block_calls, scored, tuned
from evolve.kinds.verify_length.eval_suffix import suffix_rows
from heuristics.length_policies import CONFIDENCE_GRID
from evolve.kinds.verify_length.settings import DEFAULT_WEIGHTING, STANDARD_VERIFIER, LengthVerifier

@njit(cache=True)
def survival_choices(q, depth, gamma, forward, draft_s, verified, drafted):
    """The ``survival_prefix`` competitor: draft ``gamma`` tokens (or the block's rows), then verify the prefix L
    maximising (1 + sum_{k<=L} S_k) / (forward[L] + drafted * draft_s), S_k = prod_{i<=k} q_i; writes each block's
    L and drafted tokens into ``verified`` and ``drafted`` (int64 (blocks,))."""
    i, b = 0, 0
    while i < q.size:
        j = block_end(depth, i)
        g = min(j - i, gamma)
        best_L, best, est, surv = 0, 1.0 / (forward[0] + g * draft_s), 1.0, 1.0
        for k in range(g):
            surv *= q[i + k]
            est += surv
            value = est / (forward[k + 1] + g * draft_s)
            if value > best:
                best, best_L = value, k + 1
        verified[b], drafted[b] = best_L, g
        i, b = j, b + 1


def block_options(s: Scoring) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, seconds) float64 (blocks, gamma + 1): each block's call verifying L = 0..gamma drafts (NaN past the
    block's records), weighted as :func:`block_calls` weights it: the options of the ``length_oracle`` bound."""
    B, G = s.starts.size, s.gamma + 1
    tokens, seconds = np.full((B, G), np.nan), np.full((B, G), np.nan)
    for L in range(G):
        ok = s.lengths >= L
        calls = block_calls(s, np.where(ok, L, 0))
        tokens[ok, L], seconds[ok, L] = calls[ok, 1], calls[ok, 2]
    return tokens, seconds


def oracle_row(s: Scoring) -> Scored:
    """The :class:`Scored` row of :func:`length_oracle` on a prepared split (its per-block choices)."""
    tokens, seconds = block_options(s)
    calls = float(s.data.no_draft_calls)
    _, choice = dinkelbach(tokens, seconds, extra=(calls, calls * s.forward[0]))
    return scored(s, "bound", choice)


def length_oracle(data: EvalData, gamma: int, costs: Costs = DEFAULT_COSTS,
                  verifier: LengthVerifier = STANDARD_VERIFIER, weighting: str = DEFAULT_WEIGHTING) -> LengthMetrics:
    """An upper bound, not a policy: the most tokens per second any choice of verification lengths (0..gamma per
    block, chosen knowing each block's expected tokens, i.e. reading the target) gives on ``data`` under ``costs``.

    Maximises (sum of tokens) / (sum of seconds) over per-block lengths exactly by Dinkelbach's iteration
    (Dinkelbach 1967; :func:`evolve.eval.headroom.dinkelbach`, the calls without a draft a constant of both sums).
    No policy that reads only what is known before the target is called can exceed it, so a policy's distance to
    it is the room left for better features; the drafting cost is charged only for the verified drafts, as for a
    policy. TV is not constrained (for a lossy verifier, the bound of the unconstrained problem). Under position
    weighting (:func:`evolve.kinds.verify_length.eval_policy.block_cover`) each block stands for fixed positions, so
    it simply takes the length with the most tokens per second.
    """
    return oracle_row(Scoring(data, gamma, costs, verifier, weighting)).metrics


def competitors(data: EvalData, gamma: int, costs: Costs = DEFAULT_COSTS, tuned_on: EvalData | None = None,
                verifier: LengthVerifier = STANDARD_VERIFIER, score=None, weighting: str = DEFAULT_WEIGHTING,
                per_block: dict[str, np.ndarray] | None = None, train: EvalData | None = None,
                left_out: dict[str, str] | None = None) -> dict[str, tuple[str, LengthMetrics]]:
    """The competitors of the module doc on ``data``, their drafts verified by ``verifier``, the blocks weighted by
    ``weighting``: {name: (setting, metrics)}, the bound ``length_oracle`` last. With a dict ``per_block``, each row's
    per-block calls (float64 (blocks, 6), :func:`block_calls`) are stored in it under the row's name.

    Tuned settings are picked on ``tuned_on`` (default ``data``: pass the valid split to score the test split
    honestly) by ``score(metrics)`` (default: tokens per second; a run's objective for a lossy verifier). The learned
    rows train their predictor on ``train`` (default: the tuning split; none without block-level columns).
    ``confidence_threshold`` reads ``draft_top_prob`` when the data has it, else ``draft_prob``. Rows that cannot be
    computed on this data (the learned rows where nothing can be learned) are left out; with a dict ``left_out``, why
    is stored in it under each such row's name.
    """
    score = score or (lambda m: m.tokens_per_second)
    d = Scoring(data, gamma, costs, verifier, weighting)
    t = d if tuned_on is None or tuned_on is data else Scoring(tuned_on, gamma, costs, verifier, weighting)
    rows: dict[str, Scored] = {}
    rows["best_fixed_gamma"] = tuned(t, d, range(gamma + 1), lambda s, g: (np.minimum(s.lengths, g), None),
                                     lambda g: f"gamma={g}", score)
    column = "draft_top_prob" if "draft_top_prob" in d.decisions.available else "draft_prob"
    rows["confidence_threshold"] = tuned(
        t, d, CONFIDENCE_GRID,
        lambda s, h: (length_choices(s.decisions.feature(column) - h, s.depth, s.gamma), None),
        lambda h: f"h={h:g}", score)
    verified, drafted = np.zeros(d.starts.size, np.int64), np.zeros(d.starts.size, np.int64)
    survival_choices(d.data.feature("draft_prob"), d.depth, int(gamma), d.forward, float(costs.draft_token_s),
                     verified, drafted)
    rows["survival_prefix"] = scored(d, "", verified, drafted)
    rows.update(controller_rows(t, d, score))
    rows.update(suffix_rows(t, d, score))
    learned, why = learned_rows(train if train is not None else t.data, t, d, score)
    rows.update(learned)
    if why is not None and left_out is not None:
        left_out.update({"learned_logistic": why, "learned_gbm": why})
    rows["length_oracle"] = oracle_row(d)
    if per_block is not None:
        per_block.update({name: row.per_block for name, row in rows.items()})
    return {name: (row.setting, row.metrics) for name, row in rows.items()}


__all__ = ["survival_choices", "block_options", "oracle_row", "length_oracle", "competitors"]

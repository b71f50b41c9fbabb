"""A competitor of a verification-length policy as per-block choices, and its row priced as a policy's.

Every competitor (:mod:`evolve.kinds.verify_length.eval_competitors`, the engines' controllers of
:mod:`evolve.kinds.verify_length.eval_controllers`, the learned rules of :mod:`evolve.kinds.verify_length.eval_learned`)
chooses, at each harvested block of a split prepared once (:class:`Scoring`), how many drafts to verify and how
many it drafted; :func:`scored` prices those calls exactly as a policy's
(:func:`evolve.kinds.verify_length.eval_history.add_call`), block by block, and :func:`tuned` picks a family's setting
on one split and scores it on another.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from evolve.eval.costs import Costs
from evolve.eval.evaluator import EvalData
from evolve.kinds.verify_length.eval_history import choice_counts, outcome_tables, text_starts
from evolve.kinds.verify_length.eval_policy import (N_LENGTH_COUNTS, LengthMetrics, add_no_draft_calls, block_cover,
                                                    decision_data, forward_table, metrics_from_length_counts,
                                                    prefix_tables)
from evolve.kinds.verify_length.settings import LengthVerifier



@dataclass
class Scoring:
    """What pricing a block's call needs, for one split under one verifier, cost model and weighting: ``data`` the
    records, ``decisions`` their decision rows (:func:`evolve.kinds.verify_length.eval_policy.decision_data`),
    ``tok``/``dmg`` the verifier's prefix tables, ``cover`` the block weights, ``forward`` the target's seconds,
    ``gamma`` the longest verification, ``costs``, ``verifier`` and ``weighting``; ``tau``, ``u``, ``sampled`` the
    outcome of a call (:func:`evolve.kinds.verify_length.eval_history.outcome_tables`), ``text_start`` where each
    text starts, ``starts`` each block's first record and ``lengths`` its drafts (at most gamma)."""

    data: EvalData
    gamma: int
    costs: Costs
    verifier: LengthVerifier
    weighting: str

    def __post_init__(self) -> None:
        self.decisions = decision_data(self.data)
        self.tok, self.dmg = prefix_tables(self.data, self.verifier)
        self.cover = block_cover(self.data, self.weighting)
        self.forward = forward_table(self.costs, self.gamma)
        self.depth = self.data.depth.astype(np.float64)
        self.starts = np.flatnonzero(self.depth == 0)
        self.lengths = np.minimum(np.diff(np.append(self.starts, self.data.n)), self.gamma)
        self.tau, self.u, self.sampled = outcome_tables(self.data, self.verifier)
        self.text_start = text_starts(self.data)


@dataclass(frozen=True)
class Scored:
    """One row: ``setting`` in words, ``metrics`` (:class:`LengthMetrics`) and ``per_block`` float64 (blocks, 6), each
    block's call as :func:`block_calls` counts it (the records' calls without a draft are in the metrics only)."""

    setting: str
    metrics: LengthMetrics
    per_block: np.ndarray


def block_calls(s: Scoring, verified: np.ndarray, drafted: np.ndarray | None = None) -> np.ndarray:
    """float64 (blocks, 6): each block's call verifying ``verified[b]`` drafts after drafting ``drafted[b]`` (default:
    as many), counted as :func:`evolve.kinds.verify_length.eval_policy.length_counts` counts a call."""
    verified = np.ascontiguousarray(verified, dtype=np.int64)
    drafted = verified if drafted is None else np.ascontiguousarray(drafted, dtype=np.int64)
    out = np.zeros((s.starts.size, N_LENGTH_COUNTS))
    choice_counts(verified, drafted, s.depth, s.tok, s.dmg, s.forward, float(s.costs.draft_token_s), s.cover, out)
    return out


def scored(s: Scoring, setting: str, verified: np.ndarray, drafted: np.ndarray | None = None) -> Scored:
    """The :class:`Scored` row of per-block choices: the blocks' calls summed in block order (the same sums as
    :func:`evolve.kinds.verify_length.eval_policy.length_counts`) and the calls without a draft."""
    per_block = block_calls(s, verified, drafted)
    total = per_block.cumsum(axis=0)[-1].copy() if per_block.size else np.zeros(N_LENGTH_COUNTS)
    add_no_draft_calls(total, s.data.no_draft_calls, s.forward)
    return Scored(setting, metrics_from_length_counts(total, s.data.n, s.costs), per_block)


def tuned(tune: Scoring, data: Scoring, grid, choose: Callable[[Scoring, object], tuple], label, score) -> Scored:
    """The member of ``grid`` whose choices (``choose(scoring, member)`` -> (verified, drafted or None)) score best
    on ``tune`` by ``score(metrics)`` (the first of equals), scored on ``data``; ``label(member)`` its setting."""
    best = max(grid, key=lambda g: score(scored(tune, "", *choose(tune, g)).metrics))
    return scored(data, label(best), *choose(data, best))



__all__ = ["Scoring", "Scored", "block_calls", "scored", "tuned"]

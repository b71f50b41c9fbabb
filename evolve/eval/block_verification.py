"""Block verification's expected tokens per target call, from the records of a split alone.

Block verification (Ziteng Sun, Uri Mendlovic, Yaniv Leviathan, Asaf Aharoni,
Ahmad Beirami, Jae Hun Ro, Ananda Theertha Suresh 2024, "Block verification
accelerates speculative decoding", arXiv 2403.10444) verifies a block of
drafted tokens X_1..X_gamma jointly instead of token by token, and is lossless.
In our words: with q_i and p_i the draft's and the target's distributions at
position i of the block,

* the block weights are P_0 = 1, P_i = min(1, P_{i-1} p_i(X_i) / q_i(X_i));
* the residual mass after i tokens is m_i = sum_x max(0, P_i p_{i+1}(x) - q_{i+1}(x))
  for i < gamma;
* the stopping probabilities are h_i = m_i / (m_i + 1 - P_i) for i < gamma
  (1 when the denominator is 0) and h_gamma = P_gamma;
* with independent eta_i ~ U[0, 1), the accepted length tau is the largest i
  with eta_i <= h_i (0 if none), so

      E[tau] = sum_{i=1..gamma} i h_i prod_{j>i} (1 - h_j),

  and a target call emits 1 + tau tokens (the accepted prefix plus one token
  from a residual, or the bonus token after a full block).

The records hold p_i(X_i) (``target_prob``), q_i(X_i) (``draft_prob``), the depth
(``draft_index`` = i - 1) and, on the record at depth d < gamma_data - 1, m_{d+1}
(``block_residual_mass``, which needs the next position's whole distributions and
is written by generators that know them; NaN at the block's last depth). So the
expected tokens per call follow in one pass over the records of each block, with
the recurrence A_0 = 0, A_k = k h_k + (1 - h_k) A_{k-1} (the largest success among
the first k levels is k with probability h_k, else the largest among the first
k - 1), E[tau] = A_L for a block of L = min(gamma, rows) records.

A draft length ``gamma`` below the data's block length truncates every block
after its first gamma records (their last one then uses h = P, as a block of
gamma drafted tokens would), so the value is comparable with the evaluator's
token-wise tokens per call at the same gamma (:mod:`evolve.eval.evaluator`).
Blocks are the rows from one ``draft_index`` 0 to the next; rows before the
first block start are ignored, as by the evaluator. The output is distributed
exactly as the target's (the damage, TV per token, is 0).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from evolve.errors import InputError
from evolve.verification.block import block_weight_ratio, expected_accepted_step, stopping_probability
from evolve.eval.costs import Costs

#: The optional column holding m_{d+1} on the record at depth d.
RESIDUAL_COLUMN = "block_residual_mass"


@njit(cache=True)
def block_tokens_kernel(target_prob, draft_prob, depth, residual_mass, gamma, out):
    """Expected tokens per call of every block under block verification (see the module doc).

    Args: ``target_prob``, ``draft_prob``, ``residual_mass`` float64 (n,),
    ``depth`` int64 or float64 (n,) (``draft_index``), ``gamma`` >= 1,
    ``out`` float64 (>= number of blocks,).

    Returns: (number of blocks B written to ``out[:B]``, first row whose
    residual mass is needed but NaN, negative or infinite, or -1).
    """
    n = target_prob.shape[0]
    blocks = 0
    i = 0
    while i < n and depth[i] != 0:  # rows before the first block start
        i += 1
    while i < n:
        s = i
        e = i + 1
        while e < n and depth[e] != 0:
            e += 1
        length = min(e - s, gamma)
        weight = 1.0
        acc = 0.0
        for k in range(1, length + 1):
            row = s + k - 1
            weight = block_weight_ratio(weight, target_prob[row] / draft_prob[row])
            if k == length:
                h = weight
            else:
                m = residual_mass[row]
                if not (m >= 0.0 and m < np.inf):
                    return blocks, row
                h = stopping_probability(weight, m)
            acc = expected_accepted_step(acc, k, h)
        out[blocks] = 1.0 + acc
        blocks += 1
        i = e
    return blocks, -1


def block_verification_tokens(target_prob: np.ndarray, draft_prob: np.ndarray, draft_index: np.ndarray,
                              residual_mass: np.ndarray, gamma: int) -> np.ndarray:
    """Expected tokens per target call of each block under block verification (Sun et al. 2024, arXiv 2403.10444).

    Args:
        target_prob: p(x) of every record, float64 (n,).
        draft_prob: q(x) of every record, float64 (n,), > 0.
        draft_index: depth of every record in its block, int (n,), 0 at block starts.
        residual_mass: ``block_residual_mass`` of every record, float64 (n,)
            (m_{d+1} at depth d; NaN allowed where it is not needed: at a block's
            last record used, i.e. depth gamma - 1 or the block's last row).
        gamma: draft length >= 1; deeper records are ignored.

    Returns: float64 (B,), 1 + E[accepted tokens] per block (B = number of
    blocks), each in [1, gamma + 1].

    Raises: InputError naming ``block_residual_mass`` and the first row where a
    needed value is NaN, negative or infinite; ValueError for arrays of
    different lengths or gamma < 1.
    """
    n = len(target_prob)
    if not (len(draft_prob) == len(draft_index) == len(residual_mass) == n):
        raise ValueError("target_prob, draft_prob, draft_index and residual_mass differ in length")
    if isinstance(gamma, bool) or int(gamma) != gamma or gamma < 1:
        raise ValueError(f"gamma must be an integer >= 1 (value {gamma!r})")
    out = np.empty(max(n, 1))
    blocks, bad = block_tokens_kernel(np.ascontiguousarray(target_prob, dtype=np.float64),
                                      np.ascontiguousarray(draft_prob, dtype=np.float64),
                                      np.ascontiguousarray(draft_index), np.ascontiguousarray(residual_mass,
                                                                                               dtype=np.float64),
                                      int(gamma), out)
    if bad >= 0:
        raise InputError(f"column '{RESIDUAL_COLUMN}', row {bad}: needed by block verification but NaN, negative "
                         f"or infinite (value {float(residual_mass[bad])!r})")
    return out[:blocks].copy()


@dataclass(frozen=True)
class BlockVerificationMetrics:
    """Block verification's block metrics on one split (the evaluator's block metrics, for a verifier).

    ``tokens_per_call`` = mean over blocks of 1 + E[tau]; ``speedup`` =
    tokens_per_call / (gamma c + 1) for draft/target cost ratio c (the cost
    model of :func:`evolve.eval.evaluator.metrics_from_counts`); ``tv_per_token``
    = 0 (lossless); ``blocks`` the number of blocks.
    """

    tokens_per_call: float
    speedup: float
    tv_per_token: float
    blocks: int
    gamma: int


def block_verification_metrics(target_prob: np.ndarray, draft_prob: np.ndarray, draft_index: np.ndarray,
                               residual_mass: np.ndarray, gamma: int, costs: Costs) -> BlockVerificationMetrics:
    """Mean tokens per call and speedup (under ``costs``, :meth:`evolve.eval.costs.Costs.speedup`) of block
    verification (:func:`block_verification_tokens`).

    Raises: as :func:`block_verification_tokens`; InputError for a split without any block.
    """
    tokens = block_verification_tokens(target_prob, draft_prob, draft_index, residual_mass, gamma)
    if tokens.size == 0:
        raise InputError("block verification needs at least one block (a row with draft_index 0)")
    tpc = float(tokens.mean())
    return BlockVerificationMetrics(tpc, costs.speedup(tpc, gamma), 0.0, int(tokens.size), int(gamma))


__all__ = ["RESIDUAL_COLUMN", "BlockVerificationMetrics", "block_tokens_kernel", "block_verification_tokens",
           "block_verification_metrics"]

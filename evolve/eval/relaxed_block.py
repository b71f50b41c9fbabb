"""Relaxed block verification from records: block verification against a mixture target p~.

Lossless block verification (Ziteng Sun, Uri Mendlovic, Yaniv Leviathan, Asaf
Aharoni, Ahmad Beirami, Jae Hun Ro, Ananda Theertha Suresh 2024, "Block
verification accelerates speculative decoding", arXiv 2403.10444;
:mod:`evolve.eval.block_verification`) verifies a block of drafted tokens
against the target p. A lossy rule keeps its gain only if it stays a block
verifier: here the target of position i is replaced by the mixture

    p~_i = (1 - w_i) p_i + w_i q_i,      w_i in [0, 1],

(the mixture of speculative cascades, Harikrishna Narasimhan et al. 2024,
arXiv 2405.19261, and of DIVERSED's static ensemble, arXiv 2604.07622), with a
weight w_i chosen from the *prefix* only, never from the drafted token X_i:
w_i is a function of the record's prefix-level features
(:data:`WEIGHT_FEATURES`). Block verification against p~ emits, given the
prefix, what block verification guarantees for any target: its first token is
distributed exactly as p~_1, and the block with its continuation follows the
autoregressive law of p~ (the bonus token after a fully accepted block is drawn
from p itself, w = 0 there).

Quantities (1-based positions i of a block of L = min(gamma, rows) records; r_i =
p_i(X_i) / q_i(X_i) unclamped, the records' ``target_prob / draft_prob``):

* relaxed block weights P~_0 = 1, P~_i = min(1, P~_{i-1} ((1 - w_i) r_i + w_i)),
  since p~_i(X_i) / q_i(X_i) = (1 - w_i) r_i + w_i;
* residual masses, i < L: m~_i = sum_x max(0, P~_i p~_{i+1}(x) - q_{i+1}(x))
  = (1 - P~_i w_{i+1}) phi_{i+1}(a) with a = P~_i (1 - w_{i+1}) / (1 - P~_i w_{i+1})
  in [0, 1] (0 when P~_i w_{i+1} = 1) and phi_{i+1}(a) = sum_x max(0, a p_{i+1}(x)
  - q_{i+1}(x)), held on the record of position i in ``block_residual_phi`` (a
  grid of a, :mod:`evolve.verification.block`; linear interpolation, anchored at
  the exact value ``block_residual_mass`` = phi_{i+1}(P_i) at the lossless block
  weight P_i, so w = 0 everywhere is exactly lossless block verification);
* stopping probabilities h_i = m~_i / (m~_i + 1 - P~_i) (1 when the denominator
  is 0), h_L = P~_L; accepted length tau = the largest i with eta_i <= h_i;
  E[tau] by the recurrence A_k = k h_k + (1 - h_k) A_{k-1}, tokens per call 1 + E[tau];
* damage: position i is emitted iff tau >= i - 1, and its target p~_i is at total
  variation TV(p~_i, p_i) = w_i TV(p_i, q_i) = w_i (1 - overlap_i) from p_i. The
  block's expected damage is E[C_{tau + 1}] with C_j = sum_{i <= j} w_i (1 -
  overlap_i) (C_{L+1} = C_L: the bonus token is drawn from p), by the recurrence
  F_0 = C_1, F_k = h_k C_{k+1} + (1 - h_k) F_{k-1}. ``tv_per_token`` = sum of the
  blocks' damages / sum of their expected tokens.

Scope of the damage: per emitted token it is the exact total variation of that
position's target from p, the same accounting as the per-token rules'
``tv_per_token`` (each depth's TV weighted by the probability that it is
emitted). For the whole generated sequence it is a bound, not an equality:
when p~ depends on the text prefix alone (w does not read ``draft_index``)
the sequence's distance from p's law is at most the expected sum of the
per-position TVs (a hybrid argument over positions); with a depth-dependent
w each call is still exact for its own targets, and its contribution is
bounded by the sum over all its drafted positions (docs/reference/relaxed.md).

Interpolation: phi is convex and piecewise linear, so a chord lies above it by at
most h (s_+ - s_-) / 4 (h the grid step, s_- and s_+ the slopes at the ends, in
[0, 1]); the interpolated residual mass is never below the true one and at most
(1 - P~ w) / (4 * 32) above it (:data:`evolve.verification.block.PHI_ERROR_BOUND`).

The per-record formulas (the relaxed and lossless block weights, the residual mass from phi, the
recursions for E[tau] and the damage) are the verification core's (:mod:`evolve.verification.block`);
this module runs them over a split's records. Kernels are ``@njit(cache=True)``; the population scorer fusing them with the
program interpreter is :mod:`evolve.kinds.relaxation.eval_population`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import IntEnum
from typing import NamedTuple

import numpy as np
from numba import njit

from evolve.errors import InputError
from evolve.eval.block_verification import RESIDUAL_COLUMN
from evolve.eval.costs import FREE_DRAFTS, Costs
from evolve.eval.fastpath.layouts import record_layout, record_size
from evolve.kinds.base import TOKEN_FEATURES
from evolve.verification.block import (
    block_weight_ratio, expected_accepted_step, expected_damage_step, relaxed_block_weight, relaxed_residual_mass,
    stopping_probability,
)

#: The optional column holding phi of the next depth on a grid of a (:mod:`evolve.verification.block`).
PHI_COLUMN = "block_residual_phi"
#: Columns relaxed block verification needs besides the schema's required ones.
RELAXED_COLUMNS: tuple[str, ...] = ("draft_index", "overlap", RESIDUAL_COLUMN, PHI_COLUMN)
#: Features the weight w may read: they describe the position's distributions p_i, q_i (functions of the
#: prefix), or where the position lies (``position``, ``draft_index``).
WEIGHT_FEATURES: tuple[str, ...] = ("position", "draft_entropy", "target_entropy", "top_token_match", "draft_index",
                                    "draft_top_prob", "target_top_prob", "overlap")
#: The fixed-w family: relaxed block verification with one weight everywhere (w = 0 is lossless block
#: verification). Its damage per emitted token is w times the mean TV(p, q) of the emitted positions.
FIXED_WEIGHTS: tuple[float, ...] = (0.0, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06,
                                    0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)


@record_layout
class RelaxedCount(IntEnum):
    """Counts of one weight program over a split: float64 (:data:`N_RELAXED`,)."""

    #: speculation blocks
    BLOCKS = 0
    #: sum over blocks of the expected tokens per call 1 + E[tau]
    SUM_TOKENS = 1
    #: sum over blocks of the expected damage E[C_{tau+1}]
    SUM_TV = 2
    #: weights that were NaN or infinite (used as 0)
    INVALID = 3
    #: sum of the clamped weights of the records used
    SUM_W = 4
    #: records used (depth < gamma, inside a block)
    RECORDS = 5


N_RELAXED = record_size(RelaxedCount)


@record_layout
class Carry(IntEnum):
    """State of the block under way, carried from tile to tile of a chunk: float64 (:data:`N_CARRY`,)."""

    LEVEL = 0     # positions of the open block seen so far (0: no block open)
    ACC = 1       # A_{level-1}: E[tau] over the levels whose h is known
    DAMAGE = 2    # F_{level-1}
    CUM = 3       # C_level: damage of positions 1..level
    WEIGHT = 4    # P~_level
    LOSSLESS = 5  # P_level, the lossless block weight (anchor of the interpolation)
    PREV = 6      # row of the record of position ``level``


N_CARRY = record_size(Carry)


class RelaxedColumns(NamedTuple):
    """The split record the compiled kernels read (Numba-compatible, built by :meth:`RelaxedData.columns`):
    ``ratio`` p(x)/q(x), ``depth`` (draft_index), ``overlap``, ``mass`` (block_residual_mass) float64 (n,);
    ``phi`` float64 (n, K) (block_residual_phi); ``bounds`` int64 (C+1,) chunk boundaries at block starts;
    ``gamma`` the draft length as a float (deeper records are ignored)."""

    ratio: np.ndarray
    depth: np.ndarray
    overlap: np.ndarray
    mass: np.ndarray
    phi: np.ndarray
    bounds: np.ndarray
    gamma: float


@njit(cache=True)
def close_block(st, acc):
    """Finish the open block of ``st`` (:class:`Carry`): h_L = P~_L; add its counts to ``acc``."""
    level = st[Carry.LEVEL]
    if level > 0.0:
        h = st[Carry.WEIGHT]
        st[Carry.ACC] = expected_accepted_step(st[Carry.ACC], level, h)
        st[Carry.DAMAGE] = expected_damage_step(st[Carry.DAMAGE], st[Carry.CUM], h)
        acc[RelaxedCount.BLOCKS] += 1.0
        acc[RelaxedCount.SUM_TOKENS] += 1.0 + st[Carry.ACC]
        acc[RelaxedCount.SUM_TV] += st[Carry.DAMAGE]
        st[Carry.LEVEL] = 0.0


@njit(cache=True)
def block_level(d, wj, overlap, rho, phi_prev, mass_prev, state):
    """One record of the (relaxed) block recursion of the module doc, at depth ``d`` with the clamped weight
    ``wj``, the record's ``overlap`` and ``rho`` = p(x)/q(x), and the previous record's phi row (float64 (K,))
    and block_residual_mass (read only when d > 0). Takes and returns the state, a tuple of floats (e_tau =
    A_{level-1}, f = F_{level-1}, cum = C_level, pt = P~, pl = P): at d = 0 a new block starts."""
    e_tau, f, cum, pt, pl = state
    damage = wj * (1.0 - overlap)
    if d == 0.0:
        e_tau, cum, f, pt, pl = 0.0, damage, damage, 1.0, 1.0
    else:
        h = stopping_probability(pt, relaxed_residual_mass(pt, wj, phi_prev, pl, mass_prev))
        cum += damage
        e_tau = expected_accepted_step(e_tau, d, h)
        f = expected_damage_step(f, cum, h)
    return e_tau, f, cum, relaxed_block_weight(pt, rho, wj), block_weight_ratio(pl, rho)


@njit(cache=True)
def reduce_relaxed(w, s, m, cols, st, acc):
    """Feed records ``s:s+m`` with raw weights ``w[:m]`` into the block recursion (module doc).

    Args: ``cols`` the split's :data:`RelaxedColumns` (its ``bounds`` are not
    read; records at depth >= ``gamma`` are ignored); ``st`` the :class:`Carry`
    state (a chunk starts with zeros); ``acc`` a :class:`RelaxedCount` record.
    A block is closed when the next block starts; call :func:`close_block` at
    the end of a chunk. Weights: NaN/inf -> 0 (counted invalid), clamped to [0, 1].
    """
    ratio, depth, overlap, mass, phi, gamma = cols.ratio, cols.depth, cols.overlap, cols.mass, cols.phi, cols.gamma
    level, e_tau, f, cum = st[Carry.LEVEL], st[Carry.ACC], st[Carry.DAMAGE], st[Carry.CUM]
    pt, pl, prev = st[Carry.WEIGHT], st[Carry.LOSSLESS], int(st[Carry.PREV])
    blocks = 0.0
    tokens = 0.0
    tv = 0.0
    invalid = 0.0
    s_w = 0.0
    records = 0.0
    for j in range(m):
        row = s + j
        d = depth[row]
        if d >= gamma:
            continue
        if d == 0.0:
            if level > 0.0:  # close the previous block: h_L = P~_L
                e_tau = expected_accepted_step(e_tau, level, pt)
                f = expected_damage_step(f, cum, pt)
                blocks += 1.0
                tokens += 1.0 + e_tau
                tv += f
        elif level == 0.0:
            continue  # rows before the first block start
        wj = w[j]
        if not (abs(wj) < np.inf):
            invalid += 1.0
            wj = 0.0
        wj = min(max(wj, 0.0), 1.0)
        s_w += wj
        records += 1.0
        rho = ratio[row]
        e_tau, f, cum, pt, pl = block_level(d, wj, overlap[row], rho, phi[prev if d > 0.0 else row],
                                            mass[prev if d > 0.0 else row], (e_tau, f, cum, pt, pl))
        prev = row
        level = d + 1.0
    st[Carry.LEVEL], st[Carry.ACC], st[Carry.DAMAGE], st[Carry.CUM] = level, e_tau, f, cum
    st[Carry.WEIGHT], st[Carry.LOSSLESS], st[Carry.PREV] = pt, pl, prev
    acc[RelaxedCount.BLOCKS] += blocks
    acc[RelaxedCount.SUM_TOKENS] += tokens
    acc[RelaxedCount.SUM_TV] += tv
    acc[RelaxedCount.INVALID] += invalid
    acc[RelaxedCount.SUM_W] += s_w
    acc[RelaxedCount.RECORDS] += records


@njit(cache=True)
def relaxed_chunks(w, cols):
    """Counts float64 (C, N_RELAXED) of given weights ``w`` (n,), one row per chunk of ``cols.bounds`` (C+1,)
    (``cols`` the split's :data:`RelaxedColumns`)."""
    bounds = cols.bounds
    out = np.zeros((bounds.size - 1, N_RELAXED))
    st = np.zeros(N_CARRY)
    for c in range(bounds.size - 1):
        st[:] = 0.0
        lo, hi = bounds[c], bounds[c + 1]
        reduce_relaxed(w[lo:hi], lo, hi - lo, cols, st, out[c])
        close_block(st, out[c])
    return out


@dataclass
class RelaxedData:
    """What relaxed block verification reads of a split, besides the weight's features.

    ``ratio`` float64 (n,) p(x)/q(x) (``target_prob / draft_prob``, unclamped);
    ``depth`` float64 (n,) draft_index; ``overlap`` float64 (n,); ``mass``
    float64 (n,) block_residual_mass; ``phi`` float64 (n, K) block_residual_phi;
    ``bounds`` int64 (C+1,) chunk boundaries at block starts (those of the
    split's :class:`evolve.eval.evaluator.EvalData`).
    """

    ratio: np.ndarray
    depth: np.ndarray
    overlap: np.ndarray
    mass: np.ndarray
    phi: np.ndarray
    bounds: np.ndarray
    source: str = "<memory>"

    @property
    def n(self) -> int:
        """Number of records."""
        return int(self.ratio.size)

    @property
    def block_length(self) -> int:
        """The split's draft length (max draft_index + 1)."""
        return int(self.depth.max()) + 1 if self.depth.size else 0

    def columns(self, gamma: int) -> RelaxedColumns:
        """The split's arrays and draft length ``gamma`` (as a float) as the kernels' :data:`RelaxedColumns`."""
        return RelaxedColumns(self.ratio, self.depth, self.overlap, self.mass, self.phi, self.bounds, float(gamma))


#: Attribute of an :class:`evolve.eval.evaluator.EvalData` holding its :class:`RelaxedData` once attached.
_ATTRIBUTE = "relaxed_block"


def attach(data, traces) -> RelaxedData:
    """Build the :class:`RelaxedData` of a split from its ``traces`` and keep it on ``data`` (an EvalData).

    Raises: InputError naming the split and the first missing column of
    :data:`RELAXED_COLUMNS`.
    """
    missing = [c for c in RELAXED_COLUMNS if not traces.has(c)]
    if missing:
        raise InputError(f"{data.source}: relaxed block verification needs column '{missing[0]}', which this split "
                         "lacks (written by generators that know whole distributions: the vocab model, the "
                         "harvester, the simulator's traces)")
    rd = RelaxedData(np.ascontiguousarray(data.feature("target_prob") / data.feature("draft_prob")),
                     np.ascontiguousarray(data.depth, dtype=np.float64), np.ascontiguousarray(data.feature("overlap")),
                     np.ascontiguousarray(traces[RESIDUAL_COLUMN], dtype=np.float64),
                     np.ascontiguousarray(traces[PHI_COLUMN], dtype=np.float64), data.bounds, data.source)
    setattr(data, _ATTRIBUTE, rd)
    return rd


def relaxed_of(data) -> RelaxedData:
    """The :class:`RelaxedData` of an EvalData: attached (:func:`attach`), else read from its split file.

    Raises: InputError when the split lacks a needed column, or was not read
    from a file and nothing was attached.
    """
    rd = getattr(data, _ATTRIBUTE, None)
    if rd is not None:
        return rd
    from pathlib import Path

    from evolve.traces.io import load_split
    path = Path(data.source)
    if not data.split or not path.is_file():
        raise InputError(f"{data.source}: relaxed block verification needs the split's columns "
                         f"{', '.join(RELAXED_COLUMNS)} (attach them with evolve.eval.relaxed_block.attach)")
    return attach(data, load_split(path.parent, data.split))


def check_weight_features(features, what: str = "weight") -> None:
    """Raise InputError if a feature of ``features`` depends on the drafted token (:data:`TOKEN_FEATURES`)."""
    bad = [f for f in features if f in TOKEN_FEATURES]
    if bad:
        raise InputError(f"{what}: reads '{bad[0]}', which depends on the drafted token; the relaxation weight w "
                         f"may read only prefix-level features ({', '.join(WEIGHT_FEATURES)})")


@dataclass(frozen=True)
class RelaxedMetrics:
    """Relaxed block verification's block metrics on one split (duck-compatible with the block fields of
    :class:`evolve.eval.evaluator.Metrics`).

    ``tokens_per_call`` = mean over blocks of 1 + E[tau]; ``speedup`` =
    tokens_per_call / (gamma c + 1); ``tv_per_token`` = sum of the blocks'
    expected damage / sum of their expected tokens; ``mean_weight`` the mean
    clamped w over the records used; ``n_invalid`` weights that were NaN or
    infinite; ``tokens`` the split's records; ``blocks`` the blocks scored.
    """

    tokens: int
    tokens_per_call: float | None
    speedup: float | None
    tv_per_token: float | None
    mean_weight: float
    n_invalid: int
    blocks: int

    @property
    def fitness(self) -> float | None:
        """The value champion files keep as ``fitness``: tokens per call (there is no acceptance-quality fitness)."""
        return self.tokens_per_call

    def to_dict(self) -> dict:
        """Plain dict of the fields (numbers or None), with ``fitness`` = tokens per call and
        ``relaxed_block`` = 1 (these are relaxed block verification's metrics)."""
        return {"relaxed_block": 1, "fitness": self.tokens_per_call, **asdict(self)}


def metrics_from_relaxed(counts: np.ndarray, n: int, gamma: int, costs: Costs) -> RelaxedMetrics:
    """:class:`RelaxedMetrics` from a :class:`RelaxedCount` record over a split of ``n`` records (the speedup under
    ``costs``, :meth:`evolve.eval.costs.Costs.speedup`)."""
    blocks, tok, tv, invalid, s_w, records = (float(v) for v in counts[:N_RELAXED])
    if blocks <= 0:
        return RelaxedMetrics(n, None, None, None, 0.0, int(invalid), 0)
    tpc = tok / blocks
    return RelaxedMetrics(n, tpc, costs.speedup(tpc, gamma), tv / tok, s_w / max(records, 1.0),
                          int(invalid), int(blocks))


def relaxed_counts(w: np.ndarray, rd: RelaxedData, gamma: int) -> np.ndarray:
    """Counts (float64 (N_RELAXED,)) of raw weights ``w`` float64 (n,) (one per record), chunk by chunk.

    Raises: ValueError for a wrong shape or gamma < 1.
    """
    w = np.ascontiguousarray(w, dtype=np.float64)
    if w.shape != (rd.n,):
        raise ValueError(f"w has shape {w.shape}, expected ({rd.n},)")
    if isinstance(gamma, bool) or int(gamma) != gamma or gamma < 1:
        raise ValueError(f"gamma must be an integer >= 1 (value {gamma!r})")
    return relaxed_chunks(w, rd.columns(gamma)).sum(axis=0)


def relaxed_metrics(w, rd: RelaxedData, gamma: int, costs: Costs = FREE_DRAFTS) -> RelaxedMetrics:
    """Metrics of relaxed block verification with weights ``w``: a float (the same w everywhere) or float64 (n,);
    the speedup under ``costs``.

    Raises: InputError for a gamma above the split's block length; ValueError as :func:`relaxed_counts`.
    """
    if gamma > rd.block_length:
        raise InputError(f"gamma (the draft length) is larger than the block length {rd.block_length} of "
                         f"{rd.source} (value {gamma})")
    if np.ndim(w) == 0:
        w = np.full(rd.n, float(w))
    return metrics_from_relaxed(relaxed_counts(w, rd, gamma), rd.n, gamma, costs)


__all__ = ["PHI_COLUMN", "RELAXED_COLUMNS", "block_level", "WEIGHT_FEATURES", "TOKEN_FEATURES", "FIXED_WEIGHTS", "RelaxedCount", "N_RELAXED",
           "Carry", "N_CARRY", "RelaxedColumns", "close_block", "reduce_relaxed", "relaxed_chunks", "RelaxedData", "attach",
           "relaxed_of", "check_weight_features", "RelaxedMetrics", "metrics_from_relaxed", "relaxed_counts",
           "relaxed_metrics"]

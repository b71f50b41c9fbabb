"""Vocabulary trace model (``--model vocab``): whole draft and target distributions per position.

Unlike the independent-features model (:mod:`evolve.traces.synth.independent`), whose
features are drawn independently, every record here is derived from a pair of full distributions
p (target) and q (draft) over a vocabulary of ``V`` tokens, so all columns are
mutually consistent: ``draft_prob = q(x)``, ``target_prob = p(x)`` for a drafted
token x ~ q, entropies are H(q) and H(p) in nats, ``top_token_match`` is
argmax q == argmax p, ``overlap = sum_v min(p(v), q(v))`` = 1 - TV(p, q), which is
also E_{x~q}[min(1, p(x)/q(x))], the standard rule's acceptance probability
(Leviathan et al. 2023, arXiv 2211.17192).

The distribution model (one position)
-------------------------------------
A latent *difficulty* ``d`` (unit normal marginal) drifts along the text as an
AR(1) process, d[t+1] = phi*d[t] + delta*eps with delta = ``difficulty_drift``
and phi = sqrt(1 - delta^2): neighbouring positions, and so the depths of one
speculation block, are easy or hard together. At context position ``t`` with
difficulty ``d`` and block depth ``k`` (``draft_index``):

* hardness h = logistic(difficulty_slope*d + sharpness_jitter*z), z ~ N(0, 1)
  drawn per position, so sharpness also varies between neighbours;
* Zipf exponent (inverse temperature) s = sharpness_max - (sharpness_max -
  sharpness_min) * h: easy positions are sharp (low entropy), hard ones flat;
* shared context perturbation g_v ~ N(0, 1) and draft noise e_v ~ N(0, 1) per token v;
* target logits  l_p(v) = s * (-log(v + 1) + logit_jitter * g_v);
* draft logits   l_q(v) = (s / draft_temperature) * (-log(v + 1) + logit_jitter * g_v + sigma * e_v),
  sigma = sigma_0 * exp(difficulty_noise*d) * (1 + depth_decay*k) *
  (1 - early_boost*exp(-t/early_scale)), where sigma_0 = logit_jitter *
  sqrt(1/draft_quality^2 - 1), i.e. ``draft_quality`` is the correlation between
  the draft's and the target's context perturbations at average difficulty,
  depth 0 and late positions (1 = perfect draft up to temperature);
* p = softmax(l_p), q = softmax(l_q).

So acceptance falls with depth (the draft conditions on its own guesses) and is
higher on the first few tokens, and hard stretches have both high entropy and
low acceptance.

Block emulation (one sequence)
------------------------------
A sequence has ``avg_length//2 + U{0..avg_length-1}`` rows rounded to whole
blocks (at least one) of ``gamma`` rows, the same length rule as the
independent-features model (``position`` is the drafted token's index in the
text). A block starts at context position t; depth k drafts position t+k;
each row draws its own (p, q), x ~ q, rand_value u ~ U[0, 1) and
baseline_accepts = u < min(1, p(x)/q(x)). The standard rule's outcome on the
block decides how far the context advances: by the accepted prefix plus one
(the corrected or bonus token). All gamma drafts are recorded, including those
past the first rejection, consecutively with draft_index 0..gamma-1. So
``position`` values repeat inside a sequence when the positions after a
rejection are drafted again (by a new block, from a new context); the latent
difficulty belongs to the text position and is shared by such redrafts.
Each record also gets ``target_rank`` (rank of x under p),
``block_residual_mass`` (block verification's residual mass with the block
weight after x and the next depth's (p, q) of the same block, NaN at depth
gamma - 1) and ``block_residual_phi`` (phi of the next depth's (p, q) on a grid,
the residual masses of relaxed block verification, NaN at depth gamma - 1;
:mod:`evolve.verification.block`); they are computed without random draws, so
every other column is what it was before they existed.

Randomness and threads
----------------------
Each sequence has its own xoshiro256++ stream seeded with splitmix64 from
(seed, sequence index, stream id); normal variates come from a 256-layer
ziggurat on that stream. Sequences are generated in parallel with ``prange``,
so the output depends only on the seed, never on the thread count.

Jitted building blocks (for the decode-loop simulator)
------------------------------------------------------
The functions below are ``@njit(cache=True)`` and callable from other jitted
code; the random streams they take come from :mod:`evolve.traces.synth.rng`, the softmax
and overlap from :mod:`evolve.traces.synth.softmax`. ``state`` is a uint64 array of shape
(4,), advanced in place; ``params`` is a :class:`VocabParams` (a numba-compatible
NamedTuple of floats, from :meth:`VocabModelConfig.params`); ``log_rank`` =
:func:`zipf_log_rank` (V) = -log(1..V), float64 (V,); ``p``, ``q``, ``work`` are
float64 (V,) buffers.

``difficulty_step(state, d, params) -> d'``
    one AR(1) step of the latent difficulty (start with ``d0 = next_normal(state)``).
``draw_logits(state, difficulty, depth, position, params, log_rank, lp, lq) -> (max_lp, argmax_p, max_lq, argmax_q)``
    writes the target and draft logits; a simulator may add context-dependent
    terms to them before normalising (then use :func:`evolve.traces.synth.softmax.softmax_inplace`).
``draw_pair(state, difficulty, depth, position, params, log_rank, p, q, work)
-> (target_entropy, draft_entropy, target_top_prob, draft_top_prob, target_argmax, draft_argmax, overlap)``
    draw_logits + both softmaxes + overlap: one position's (p, q), about 2V
    normal draws and 2V exponentials (vectorised).

A decode loop draws x = sample_index(state, q), accepts with
next_double(state) < min(1, p[x]/q[x]) and on rejection samples the residual
norm(max(0, p - q)) (the standard rule's residual, Leviathan et al. 2023,
arXiv 2211.17192) from a buffer it fills itself.

Python API: :func:`generate_split` (a DataFrame of the schema's required and
optional columns), :func:`block_distributions` (the whole distributions of one
block, for checks), :func:`measure_throughput`.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field, fields
from typing import NamedTuple

import numba
import numpy as np
import pandas as pd
from numba import njit, prange

from evolve.errors import InputError
from evolve.traces.schema import RESIDUAL_PHI_POINTS
from evolve.verification.block import block_weight, residual_mass, residual_phi, target_rank
from evolve.verification.tokenwise import acceptance_ratio
from evolve.traces.synth.rng import next_double, next_normal, normal_s, sample_index, seed_state
from evolve.traces.synth.softmax import overlap, softmax_given_max

GENERATOR_NAME = "vocab"
GENERATOR_VERSION = 1

# Configuration
# ---------------------------------------------------------------------------------------------


class VocabParams(NamedTuple):
    """Numba-friendly model parameters (floats); see the module doc for their roles.

    ``draft_noise`` is sigma_0 (derived from ``draft_quality``); the others are
    the :class:`VocabModelConfig` knobs of the same name.
    """

    sharpness_min: float
    sharpness_max: float
    sharpness_jitter: float
    difficulty_slope: float
    logit_jitter: float
    draft_noise: float
    draft_temperature: float
    difficulty_noise: float
    depth_decay: float
    early_boost: float
    early_scale: float
    difficulty_drift: float


def _opt(help_text: str) -> dict:
    return {"help": help_text}


#: The largest value of each integer knob of the trace models (the command line states them as its bounds).
INT_LIMITS: dict[str, int] = {"vocab_size": 1_000_000, "gamma": 64, "avg_length": 100_000}


@dataclass(frozen=True)
class VocabModelConfig:
    """Knobs of the vocabulary model. Each becomes a ``generate_data.py`` option ``--field-name``.

    The defaults are calibrated (tests/test_vocab_model.py) to the statistics of the
    independent-features model: standard-rule acceptance about 0.785, top-token
    match about 0.72, median target entropy in 2-6 nats.
    """

    vocab_size: int = field(default=1000, metadata=_opt("vocabulary size V"))
    gamma: int = field(default=5, metadata=_opt("draft length (rows per speculation block)"))
    avg_length: int = field(default=50, metadata=_opt(
        "average rows per sequence; a sequence has avg/2 + U{0..avg-1} rows rounded to whole blocks"))
    draft_quality: float = field(default=0.944, metadata=_opt(
        "correlation of the draft's and the target's logit perturbations at average difficulty, depth 0, "
        "late positions, in (0, 1]; 1 = perfect draft"))
    draft_temperature: float = field(default=1.1, metadata=_opt(
        "draft temperature relative to the target's (> 1: flatter draft)"))
    sharpness_min: float = field(default=0.9, metadata=_opt(
        "Zipf exponent of the target at the hardest positions (lower = higher entropy)"))
    sharpness_max: float = field(default=2.1, metadata=_opt(
        "Zipf exponent of the target at the easiest positions"))
    sharpness_jitter: float = field(default=1.0, metadata=_opt(
        "per-position noise of the hardness, in logistic units (independent between neighbours)"))
    difficulty_slope: float = field(default=1.5, metadata=_opt(
        "weight of the latent difficulty in the hardness (sharpness) of a position"))
    logit_jitter: float = field(default=1.0, metadata=_opt(
        "std of the context perturbation of the log-rank logits shared by draft and target"))
    difficulty_noise: float = field(default=0.5, metadata=_opt(
        "draft noise grows by exp(difficulty_noise * d) with the latent difficulty d"))
    difficulty_drift: float = field(default=0.3, metadata=_opt(
        "innovation std of the AR(1) difficulty per token, in (0, 1]; small = slow drift, 1 = independent"))
    depth_decay: float = field(default=0.12, metadata=_opt(
        "draft noise grows by (1 + depth_decay * draft_index) inside a block"))
    early_boost: float = field(default=0.5, metadata=_opt(
        "draft noise shrinks by (1 - early_boost * exp(-position / early_scale)) on early tokens, in [0, 1)"))
    early_scale: float = field(default=5.0, metadata=_opt("decay length, in tokens, of the early-position boost"))

    def to_dict(self) -> dict:
        """JSON-serialisable dict of the knobs."""
        return asdict(self)

    def validate(self) -> "VocabModelConfig":
        """Check every knob; returns self.

        Raises: InputError naming the knob (``param``, the field's name) and the value.
        """
        def bad(name, why):
            value = getattr(self, name)
            return InputError(f"{why} (value {value!r})", param=name)

        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(f.default, int) and not isinstance(v, bool):
                if not isinstance(v, (int, np.integer)):
                    raise bad(f.name, "must be an integer")
            elif not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool) \
                    or not math.isfinite(v):
                raise bad(f.name, "must be a finite number")
        if not 2 <= self.vocab_size <= INT_LIMITS["vocab_size"]:
            raise bad("vocab_size", f"must be in [2, {INT_LIMITS['vocab_size']}]")
        if not 1 <= self.gamma <= INT_LIMITS["gamma"]:
            raise bad("gamma", f"must be in [1, {INT_LIMITS['gamma']}]")
        if not 1 <= self.avg_length <= INT_LIMITS["avg_length"]:
            raise bad("avg_length", f"must be in [1, {INT_LIMITS['avg_length']}]")
        if not 0.0 < self.draft_quality <= 1.0:
            raise bad("draft_quality", "must be in (0, 1]")
        if not self.draft_temperature > 0.0:
            raise bad("draft_temperature", "must be > 0")
        if not self.sharpness_min > 0.0:
            raise bad("sharpness_min", "must be > 0")
        if not self.sharpness_max >= self.sharpness_min:
            raise bad("sharpness_max", f"must be >= sharpness_min = {self.sharpness_min!r}")
        for name in ("sharpness_jitter", "difficulty_slope", "logit_jitter", "difficulty_noise", "depth_decay"):
            if getattr(self, name) < 0.0:
                raise bad(name, "must be >= 0")
        if not 0.0 < self.difficulty_drift <= 1.0:
            raise bad("difficulty_drift", "must be in (0, 1]")
        if not 0.0 <= self.early_boost < 1.0:
            raise bad("early_boost", "must be in [0, 1)")
        if not self.early_scale > 0.0:
            raise bad("early_scale", "must be > 0")
        if self.logit_jitter == 0.0 and self.draft_quality < 1.0:
            raise bad("logit_jitter", "must be > 0 unless draft_quality is 1")
        return self

    def params(self) -> VocabParams:
        """The jitted functions' parameter tuple (draft_quality turned into the draft noise sigma_0)."""
        rho = float(self.draft_quality)
        sigma0 = float(self.logit_jitter) * math.sqrt(max(0.0, 1.0 / (rho * rho) - 1.0))
        return VocabParams(
            sharpness_min=float(self.sharpness_min), sharpness_max=float(self.sharpness_max),
            sharpness_jitter=float(self.sharpness_jitter), difficulty_slope=float(self.difficulty_slope),
            logit_jitter=float(self.logit_jitter), draft_noise=sigma0,
            draft_temperature=float(self.draft_temperature), difficulty_noise=float(self.difficulty_noise),
            depth_decay=float(self.depth_decay), early_boost=float(self.early_boost),
            early_scale=float(self.early_scale), difficulty_drift=float(self.difficulty_drift))


def zipf_log_rank(vocab_size: int) -> np.ndarray:
    """Zipf base logits -log(rank), rank = 1..V: float64 (V,)."""
    return -np.log(np.arange(1, vocab_size + 1, dtype=np.float64))


# ---------------------------------------------------------------------------------------------
# One position's distributions
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def difficulty_step(state, d, params):
    """Next latent difficulty of an AR(1) with unit-normal marginal: phi*d + delta*N(0, 1).

    delta = params.difficulty_drift, phi = sqrt(1 - delta^2). Advances ``state``.
    """
    delta = params.difficulty_drift
    return math.sqrt(1.0 - delta * delta) * d + delta * next_normal(state)


@njit(cache=True)
def draw_logits(state, difficulty, depth, position, params, log_rank, lp_out, lq_out):
    """Draw one position's target and draft logits (module doc, "The distribution model").

    Args:
        state: uint64 (4,) RNG stream, advanced in place (2V + 1 normals).
        difficulty: latent difficulty d (unit-normal scale; higher = harder).
        depth: draft_index k inside the block (0-based).
        position: context position t of the drafted token (0-based).
        params: :class:`VocabParams`.
        log_rank: float64 (V,) Zipf base logits, :func:`zipf_log_rank`.
        lp_out, lq_out: float64 (V,) outputs, target and draft logits (nats, unnormalised).

    Returns: (max target logit, its index, max draft logit, its index), first index on ties,
    for :func:`softmax_given_max`.
    """
    s0, s1, s2, s3 = state[0], state[1], state[2], state[3]
    g, s0, s1, s2, s3 = normal_s(s0, s1, s2, s3)
    z = params.difficulty_slope * difficulty + params.sharpness_jitter * g
    hardness = 1.0 / (1.0 + math.exp(-z))
    s = params.sharpness_max - (params.sharpness_max - params.sharpness_min) * hardness
    sq = s / params.draft_temperature
    sigma = (params.draft_noise * math.exp(params.difficulty_noise * difficulty)
             * (1.0 + params.depth_decay * depth)
             * (1.0 - params.early_boost * math.exp(-position / params.early_scale)))
    jitter = params.logit_jitter
    mp = -np.inf
    mq = -np.inf
    ap = 0
    aq = 0
    for v in range(log_rank.shape[0]):
        g, s0, s1, s2, s3 = normal_s(s0, s1, s2, s3)
        e, s0, s1, s2, s3 = normal_s(s0, s1, s2, s3)
        shared = log_rank[v] + jitter * g
        lp = s * shared
        lq = sq * (shared + sigma * e)
        lp_out[v] = lp
        lq_out[v] = lq
        if lp > mp:
            mp = lp
            ap = v
        if lq > mq:
            mq = lq
            aq = v
    state[0], state[1], state[2], state[3] = s0, s1, s2, s3
    return mp, ap, mq, aq


@njit(cache=True)
def draw_pair(state, difficulty, depth, position, params, log_rank, p_out, q_out, work):
    """Draw one position's target p and draft q (see :func:`draw_logits`) into ``p_out``, ``q_out``.

    Args: as :func:`draw_logits`; ``work`` float64 (V,) scratch.
    Returns: (target_entropy, draft_entropy, target_top_prob, draft_top_prob,
    target_argmax, draft_argmax, overlap), entropies in nats.
    """
    mp, ap, mq, aq = draw_logits(state, difficulty, depth, position, params, log_rank, p_out, q_out)
    hp, top_p, arg_p = softmax_given_max(p_out, mp, ap, work)
    hq, top_q, arg_q = softmax_given_max(q_out, mq, aq, work)
    return hp, hq, top_p, top_q, arg_p, arg_q, overlap(p_out, q_out)


# ---------------------------------------------------------------------------------------------
# Sequences and splits
# ---------------------------------------------------------------------------------------------

_STREAM_LENGTH = 0
_STREAM_CONTENT = 1


class VocabSetup(NamedTuple):
    """What every sequence of one split shares besides the :class:`VocabParams` (the kernels' model record):
    ``seed`` uint64, ``gamma`` the draft length, ``log_rank`` float64 (V,) (:func:`zipf_log_rank`).

    The parameters stay a separate argument: Numba's parallel loops cannot take a record nested in another.
    """

    seed: np.uint64
    gamma: int
    log_rank: np.ndarray


class VocabColumns(NamedTuple):
    """The output arrays of the generator, one per column of :func:`generate_split` (its names), n rows each:
    int64 ``seq_id``, ``position``, ``draft_index``, ``target_rank``; bool ``top_token_match``,
    ``baseline_accepts``; float64 the others; ``block_residual_phi`` float64 (n, K), or (0, K) for none."""

    seq_id: np.ndarray
    position: np.ndarray
    draft_prob: np.ndarray
    target_prob: np.ndarray
    draft_entropy: np.ndarray
    target_entropy: np.ndarray
    top_token_match: np.ndarray
    rand_value: np.ndarray
    baseline_accepts: np.ndarray
    draft_index: np.ndarray
    draft_top_prob: np.ndarray
    target_top_prob: np.ndarray
    overlap: np.ndarray
    block_residual_mass: np.ndarray
    target_rank: np.ndarray
    block_residual_phi: np.ndarray


class KeptBlock(NamedTuple):
    """Where :func:`_sequence` copies the (p, q) of every depth of block ``block`` (-1: none):
    ``p``, ``q`` float64 (gamma, V)."""

    block: int
    p: np.ndarray
    q: np.ndarray


@njit(cache=True)
def _block_counts(seed, sequences, avg_length, gamma):
    """Blocks per sequence: round((avg//2 + U{0..avg-1}) / gamma), at least 1. int64 (sequences,)."""
    out = np.empty(sequences, dtype=np.int64)
    for i in range(sequences):
        state = seed_state(seed, i, _STREAM_LENGTH)
        rows = avg_length // 2 + int(next_double(state) * avg_length)
        out[i] = max(1, (rows + gamma // 2) // gamma)
    return out


@njit(cache=True)
def _sequence(setup, params, i, blocks, row0, out, keep):
    """Rows of sequence ``i`` (``blocks`` blocks) from row ``row0`` of ``out`` (module doc, "Block emulation").

    ``setup`` a :class:`VocabSetup`, ``params`` the :class:`VocabParams`, ``out`` a :class:`VocabColumns`; its
    ``block_residual_mass``, ``target_rank`` and ``block_residual_phi`` take
    no random draws (:mod:`evolve.verification.block`). The (p, q) of
    every depth of block ``keep.block`` go to ``keep`` (a :class:`KeptBlock`).
    """
    seed, gamma, log_rank = setup.seed, setup.gamma, setup.log_rank
    seq_id, position, draft_index = out.seq_id, out.position, out.draft_index
    draft_prob, target_prob, draft_entropy, target_entropy = (out.draft_prob, out.target_prob, out.draft_entropy,
                                                              out.target_entropy)
    top_match, rand_value, baseline = out.top_token_match, out.rand_value, out.baseline_accepts
    draft_top, target_top, overlap_out = out.draft_top_prob, out.target_top_prob, out.overlap
    residual_out, rank_out, phi_out = out.block_residual_mass, out.target_rank, out.block_residual_phi
    keep_block, p_keep, q_keep = keep.block, keep.p, keep.q
    state = seed_state(seed, i, _STREAM_CONTENT)
    V = log_rank.shape[0]
    p = np.empty(V)
    q = np.empty(V)
    work = np.empty(V)
    horizon = blocks * (gamma + 1) + gamma + 1
    diff = np.empty(horizon)
    diff[0] = next_normal(state)
    filled = 1
    t = 0
    row = row0
    for b in range(blocks):
        prefix = 0
        rejected = False
        weight = 1.0
        for k in range(gamma):
            pos = t + k
            while filled <= pos:
                diff[filled] = difficulty_step(state, diff[filled - 1], params)
                filled += 1
            hp, hq, top_p, top_q, arg_p, arg_q, ov = draw_pair(state, diff[pos], k, pos, params, log_rank, p, q, work)
            if k > 0:  # the previous record's residual mass needs this depth's (p, q)
                residual_out[row - 1] = residual_mass(weight, p, q)
                if phi_out.shape[0]:
                    residual_phi(p, q, phi_out[row - 1])
            if b == keep_block:
                p_keep[k, :] = p
                q_keep[k, :] = q
            x = sample_index(state, q)
            u = next_double(state)
            r = acceptance_ratio(p[x], q[x])
            accept = u < r
            weight = block_weight(weight, p[x], q[x])
            seq_id[row] = i
            position[row] = pos
            draft_index[row] = k
            draft_prob[row] = q[x]
            target_prob[row] = p[x]
            draft_entropy[row] = hq
            target_entropy[row] = hp
            top_match[row] = arg_p == arg_q
            rand_value[row] = u
            baseline[row] = accept
            draft_top[row] = top_q
            target_top[row] = top_p
            overlap_out[row] = ov
            rank_out[row] = target_rank(p, x)
            residual_out[row] = np.nan  # stays NaN at the block's last depth
            if phi_out.shape[0]:
                phi_out[row, :] = np.nan
            row += 1
            if not rejected:
                if accept:
                    prefix += 1
                else:
                    rejected = True
        t += prefix + 1


@njit(cache=True, parallel=True)
def _generate(setup, params, blocks, offsets, out):
    """Every sequence into ``out`` (:class:`VocabColumns`): sequence i has ``blocks[i]`` blocks from row
    ``offsets[i]`` (int64 (sequences,) each); ``setup`` a :class:`VocabSetup`, ``params`` its :class:`VocabParams`."""
    none = np.empty((0, 0))
    keep = KeptBlock(-1, none, none)
    for i in prange(blocks.shape[0]):
        _sequence(setup, params, i, blocks[i], offsets[i], out, keep)


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2 ** 64:
        raise InputError(f"must be an integer in [0, 2**64) (value {seed!r})", param="seed")
    return int(seed)


def generate_split(sequences: int, seed: int, config: VocabModelConfig = VocabModelConfig()) -> pd.DataFrame:
    """Draw ``sequences`` sequences of speculation blocks from the vocabulary model.

    Args:
        sequences: number of sequences (>= 1).
        seed: integer in [0, 2**64); the same seed and config give the same frame
            whatever the number of threads.
        config: model knobs (validated).

    Returns: DataFrame with every schema column, required and optional
    (seq_id, position, draft_prob, target_prob, draft_entropy, target_entropy,
    top_token_match, rand_value, baseline_accepts, draft_index, draft_top_prob,
    target_top_prob, overlap, block_residual_mass, target_rank, block_residual_phi), about
    ``sequences * avg_length`` rows. ``block_residual_mass``, ``target_rank`` and
    ``block_residual_phi`` (:mod:`evolve.verification.block`; a list of
    RESIDUAL_PHI_POINTS floats per row) take no random draws, so the other
    columns are those of a model without them.

    Raises: InputError for a bad size, seed or knob (naming the parameter).
    """
    if isinstance(sequences, bool) or not isinstance(sequences, (int, np.integer)) or sequences < 1:
        raise InputError(f"must be an integer >= 1 (value {sequences!r})", param="sequences")
    seed = _check_seed(seed)
    config.validate()
    gamma = int(config.gamma)
    blocks = _block_counts(np.uint64(seed), int(sequences), int(config.avg_length), gamma)
    rows = blocks * gamma
    offsets = np.concatenate(([0], np.cumsum(rows)[:-1])).astype(np.int64)
    n = int(rows.sum())
    cols = {
        "seq_id": np.empty(n, np.int64), "position": np.empty(n, np.int64),
        "draft_prob": np.empty(n), "target_prob": np.empty(n),
        "draft_entropy": np.empty(n), "target_entropy": np.empty(n),
        "top_token_match": np.empty(n, np.bool_), "rand_value": np.empty(n),
        "baseline_accepts": np.empty(n, np.bool_), "draft_index": np.empty(n, np.int64),
        "draft_top_prob": np.empty(n), "target_top_prob": np.empty(n), "overlap": np.empty(n),
        "block_residual_mass": np.empty(n), "target_rank": np.empty(n, np.int64),
    }
    phi = np.empty((n, RESIDUAL_PHI_POINTS))
    setup = VocabSetup(np.uint64(seed), gamma, zipf_log_rank(int(config.vocab_size)))
    _generate(setup, config.params(), blocks, offsets, VocabColumns(**cols, block_residual_phi=phi))
    frame = pd.DataFrame(cols)
    frame["block_residual_phi"] = list(phi)
    return frame


def block_distributions(seed: int, sequence: int, block: int,
                        config: VocabModelConfig = VocabModelConfig()) -> tuple[np.ndarray, np.ndarray]:
    """The target and draft distributions of one block of :func:`generate_split` (for checks and tests).

    Args: the split's ``seed`` and ``config``; ``sequence`` (its ``seq_id``, >= 0) and
    ``block`` (0-based index of the block in that sequence).
    Returns: (p, q) float64 (gamma, V): row k is the (p, q) the record at
    ``draft_index`` k of that block was drawn from. The sequence is regenerated
    from its own stream, so this does not depend on how many sequences the split has.
    Raises: InputError for a bad seed or config, a negative sequence, or a block
    index outside the sequence.
    """
    seed = _check_seed(seed)
    config.validate()
    gamma, V = int(config.gamma), int(config.vocab_size)
    if isinstance(sequence, bool) or not isinstance(sequence, (int, np.integer)) or sequence < 0:
        raise InputError(f"sequence: must be an integer >= 0 (value {sequence!r})")
    blocks = int(_block_counts(np.uint64(seed), int(sequence) + 1, int(config.avg_length), gamma)[sequence])
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or not 0 <= block < blocks:
        raise InputError(f"block: sequence {sequence} has blocks 0..{blocks - 1} (value {block!r})")
    n = blocks * gamma
    f, i, b = (lambda: np.empty(n)), (lambda: np.empty(n, np.int64)), (lambda: np.empty(n, np.bool_))
    out = VocabColumns(i(), i(), f(), f(), f(), f(), b(), f(), b(), i(), f(), f(), f(), f(), i(),
                       np.empty((0, RESIDUAL_PHI_POINTS)))
    keep = KeptBlock(int(block), np.empty((gamma, V)), np.empty((gamma, V)))
    _sequence(VocabSetup(np.uint64(seed), gamma, zipf_log_rank(V)), config.params(), int(sequence), blocks, 0, out,
              keep)
    return keep.p, keep.q


def measure_throughput(tokens: int = 1_000_000, seed: int = 0,
                       config: VocabModelConfig = VocabModelConfig()) -> dict:
    """Time :func:`generate_split` for the fewest sequences giving at least ``tokens`` rows.

    A small warm-up call first compiles or loads the cached machine code, so
    the timing covers generation only (with the current numba thread count).

    Returns: dict with tokens (rows generated), seconds (wall time),
    tokens_per_s, vocab_size, threads (numba threads) and cpus (os.cpu_count()).
    Raises: InputError for a bad seed or config.
    """
    config.validate()
    seed = _check_seed(seed)
    generate_split(2, seed, config)
    estimate = int(1.2 * max(1, tokens) / config.avg_length) + 2
    while True:
        blocks = _block_counts(np.uint64(seed), estimate, int(config.avg_length), int(config.gamma))
        rows = np.cumsum(blocks * config.gamma)
        if rows[-1] >= tokens:
            break
        estimate *= 2
    sequences = int(np.searchsorted(rows, tokens)) + 1  # rows of sequence i do not depend on the count
    start = time.perf_counter()
    df = generate_split(sequences, seed, config)
    seconds = time.perf_counter() - start
    return {"tokens": int(len(df)), "seconds": seconds, "tokens_per_s": len(df) / seconds,
            "vocab_size": int(config.vocab_size), "threads": int(numba.get_num_threads()),
            "cpus": os.cpu_count()}

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

The sequences and splits of the model (block emulation, the random streams, ``generate_split``) are
:mod:`evolve.traces.synth.vocab_blocks`.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import NamedTuple

import numpy as np
from numba import njit

from evolve.errors import InputError
from evolve.traces.synth.rng import next_normal, normal_s
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


__all__ = ["GENERATOR_NAME", "GENERATOR_VERSION", "VocabParams", "VocabModelConfig", "zipf_log_rank",
           "difficulty_step", "draw_logits", "draw_pair"]

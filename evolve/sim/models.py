"""Synthetic draft/target language models for the decode-loop simulator, and the jobs that start decodes.

A :class:`SyntheticModel` turns the vocabulary generator's distribution model
(:mod:`evolve.traces.synth.vocab_model`, module doc "The distribution model") into a pair of
*context-dependent* categorical distributions over ``V`` tokens. At text
position ``t`` (0-based index of the generated token) with the ``window`` (K)
tokens before it:

* an RNG state is derived from a hash of (seed, t, the K previous tokens)
  (:func:`context_key`, then ``seed_state(seed, key, STREAM_MODEL)``);
* the latent difficulty takes one AR(1) step from the difficulty of position
  t - 1, d_t = phi*d_{t-1} + delta*eps, with eps drawn from that state
  (``difficulty_step``), so difficulty drifts along the text as in the
  generator, and d_t is itself a deterministic function of the whole prefix;
* ``draw_pair(state, d_t, depth, t, ...)`` then draws the target p and the
  draft q from the same state.

So p(.|prefix) and q(.|prefix, depth) are fixed functions of the prefix: the
same prefix always gives the same distributions, and a drafted or emitted
token changes every later distribution (through the hash window and the
difficulty chain). p does not depend on ``depth``; the draft's noise grows
with ``depth``, the number of tokens drafted since the last verification
(the generator's ``depth_decay``), as a draft that conditions on its own
guesses drifts. Before position 0 a sequence has a *prompt* of K tokens and an
initial difficulty d_{-1} ~ N(0, 1) drawn from (seed, sequence key,
``STREAM_PROMPT``).

Jobs
----
A decode job starts at position ``t0`` after a context window (int64 (K,)) with
d_{t0-1}. Its token buffer ``buf`` holds the token of position s at
``buf[K + s]`` (the window sits just before t0), its difficulty path ``dpath``
holds d_s at ``dpath[s + 1]`` (:func:`start_buffers`). Sequence jobs start from
position 0 after the prompt of key :func:`job_key` (length, sample)
(:func:`sequence_jobs`); context jobs all start from one fixed :class:`Context`
(:func:`context_jobs`).

Random streams: the models use states keyed by contexts (``STREAM_MODEL``), a
sequence's prompt comes from (seed, job key, ``STREAM_PROMPT``), and the decode
loops draw from (seed, job key, ``STREAM_DECODE`` + an offset per loop kind).
"""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from evolve.errors import InputError
from evolve.traces.synth.rng import next_double, next_normal, seed_state
from evolve.traces.synth.softmax import softmax_given_max
from evolve.traces.synth.vocab_model import VocabModelConfig, difficulty_step, draw_logits, draw_pair, zipf_log_rank

#: Tokens of context hashed into a position's RNG key.
DEFAULT_WINDOW = 4

STREAM_MODEL = 11
STREAM_DECODE = 21
STREAM_PROMPT = 22

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FM1 = np.uint64(0xFF51AFD7ED558CCD)
_FM2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)


# ---------------------------------------------------------------------------------------------
# Context hashing and one position's distributions
# ---------------------------------------------------------------------------------------------

#: The synthetic models as the kernels take them: ``seed`` uint64, ``params`` the
#: :class:`evolve.traces.synth.vocab_model.VocabParams`, ``log_rank`` float64 (V,) the Zipf base logits
#: (:attr:`SyntheticModel.kernel`).
KernelModel = namedtuple("KernelModel", ["seed", "params", "log_rank"])
#: Decode jobs as the batch kernels take them (the fields of :func:`sequence_jobs`' dict): ``keys`` uint64 (J,),
#: ``windows`` int64 (J, K), ``t0s`` int64 (J,), ``d_prevs`` float64 (J,), ``lengths`` int64 (J,).
Jobs = namedtuple("Jobs", ["keys", "windows", "t0s", "d_prevs", "lengths"])


@njit(cache=True)
def _fmix64(h):
    """MurmurHash3's 64-bit finaliser (uint64 -> uint64, a bijection)."""
    h ^= h >> _S33
    h *= _FM1
    h ^= h >> _S33
    h *= _FM2
    h ^= h >> _S33
    return h


@njit(cache=True)
def context_key(position, window, salt):
    """uint64 hash of (position, window tokens, salt): the RNG key of one context.

    Args: position (int >= 0), window int64 (K,) the K tokens before the
    position, oldest first, salt (int >= 0; e.g. a Medusa head index + 1).
    """
    h = _fmix64(np.uint64(position) * _GOLDEN + np.uint64(salt))
    for i in range(window.shape[0]):
        h = _fmix64(h ^ (np.uint64(window[i]) + np.uint64(1)) * _GOLDEN)
    return h


@njit(cache=True)
def position_pair(model_seed, position, window, d_prev, depth, params, log_rank, p, q, work):
    """Target p and draft q at a context, written into ``p`` and ``q`` (float64 (V,)).

    Args:
        model_seed: uint64 seed of the synthetic models.
        position: text position t of the next token; window int64 (K,) the K tokens before it.
        d_prev: latent difficulty at position t - 1.
        depth: tokens drafted since the last verification (draft noise grows with it; p does not).
        params, log_rank: :class:`evolve.traces.synth.vocab_model.VocabParams`, :func:`evolve.traces.synth.vocab_model.zipf_log_rank`.
        work: float64 (V,) scratch.

    Returns: (d_t, target_entropy, draft_entropy, target_top_prob, draft_top_prob,
    target_argmax, draft_argmax, overlap); entropies in nats.
    """
    state = seed_state(model_seed, context_key(position, window, 0), STREAM_MODEL)
    d = difficulty_step(state, d_prev, params)
    hp, hq, tp, tq, ap, aq, ov = draw_pair(state, d, depth, position, params, log_rank, p, q, work)
    return d, hp, hq, tp, tq, ap, aq, ov


@njit(cache=True)
def target_at(model_seed, position, window, d_prev, params, log_rank, p, scratch, work):
    """Only the target p at a context (same values as :func:`position_pair`'s ``p``).

    ``scratch`` float64 (V,) receives the unused draft logits. Returns (d_t, target_argmax).
    """
    state = seed_state(model_seed, context_key(position, window, 0), STREAM_MODEL)
    d = difficulty_step(state, d_prev, params)
    mp, ap, _, _ = draw_logits(state, d, 0, position, params, log_rank, p, scratch)
    softmax_given_max(p, mp, ap, work)
    return d, ap


# ---------------------------------------------------------------------------------------------
# Jobs: prompts and buffers
# ---------------------------------------------------------------------------------------------

@njit(cache=True)
def job_key(a, b):
    """uint64 key of a (length, sample) job (or any pair of non-negative ints)."""
    return _fmix64(_fmix64(np.uint64(a) + _GOLDEN) ^ (np.uint64(b) * _GOLDEN + np.uint64(1)))


@njit(cache=True)
def prompts(seed, keys, V, window_len):
    """Each job's prompt: K tokens uniform on 0..V-1 and d_{-1} ~ N(0, 1), from (seed, key, STREAM_PROMPT).

    Args: seed uint64, keys uint64 (J,). Returns (windows int64 (J, K), d_prev float64 (J,)).
    """
    windows = np.empty((keys.shape[0], window_len), dtype=np.int64)
    d_prev = np.empty(keys.shape[0])
    for j in range(keys.shape[0]):
        state = seed_state(seed, keys[j], STREAM_PROMPT)
        for i in range(window_len):
            windows[j, i] = min(V - 1, int(next_double(state) * V))
        d_prev[j] = next_normal(state)
    return windows, d_prev


@njit(cache=True)
def start_buffers(window, t0, d_prev, room):
    """(buf int64 (K + t0 + room,), dpath float64 (t0 + room + 1,)) holding the window before t0 and d_{t0-1}."""
    K = window.shape[0]
    buf = np.zeros(K + t0 + room, dtype=np.int64)
    buf[t0:t0 + K] = window
    dpath = np.zeros(t0 + room + 1)
    dpath[t0] = d_prev
    return buf, dpath


# ---------------------------------------------------------------------------------------------
# Python API
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SyntheticModel:
    """A pair of context-dependent draft/target models over ``vocab_size`` tokens (module doc).

    ``config`` supplies the distribution model's knobs (its ``vocab_size`` and
    ``gamma`` are ignored); ``seed`` fixes the models; ``window`` is K, the
    number of previous tokens hashed into each position's key.
    """

    vocab_size: int = 1000
    seed: int = 0
    window: int = DEFAULT_WINDOW
    config: VocabModelConfig = field(default_factory=VocabModelConfig)

    def __post_init__(self) -> None:
        if isinstance(self.vocab_size, bool) or not isinstance(self.vocab_size, (int, np.integer)) \
                or not 2 <= self.vocab_size <= 1_000_000:
            raise InputError(f"must be an integer in [2, 1000000] (value {self.vocab_size!r})", param="vocab_size")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) \
                or not 0 <= int(self.seed) < 2 ** 63:
            raise InputError(f"must be an integer in [0, 2**63) (value {self.seed!r})", param="seed")
        if not isinstance(self.window, (int, np.integer)) or not 1 <= self.window <= 64:
            raise InputError(f"window: must be an integer in [1, 64] (value {self.window!r})")
        self.config.validate()

    @property
    def params(self):
        """The jitted functions' :class:`evolve.traces.synth.vocab_model.VocabParams`."""
        return self.config.params()

    @property
    def kernel(self) -> KernelModel:
        """The model as the kernels take it (:class:`KernelModel`)."""
        return KernelModel(self.useed, self.params, self.log_rank)

    @property
    def log_rank(self) -> np.ndarray:
        """float64 (V,) Zipf base logits."""
        return zipf_log_rank(int(self.vocab_size))

    @property
    def useed(self) -> np.uint64:
        """The seed as uint64 (what the kernels take)."""
        return np.uint64(self.seed)


@dataclass(frozen=True)
class Context:
    """A fixed decoding context: the ``window`` tokens (int64 (K,)) before ``position``, and d_{position-1}."""

    window: np.ndarray
    position: int
    d_prev: float


def random_context(model: SyntheticModel, key: int, position: int = 10) -> Context:
    """A context with a random window (from (model seed, key, STREAM_PROMPT)) at ``position``."""
    windows, d_prev = prompts(model.useed, np.array([key], dtype=np.uint64), int(model.vocab_size), int(model.window))
    return Context(windows[0].copy(), int(position), float(d_prev[0]))


def sequence_jobs(model: SyntheticModel, lengths, samples: int, key0: int = 0) -> dict:
    """Jobs of ``samples`` sequences per length from position 0: sequence i of length L has key job_key(L, key0 + i).

    Returns dict of keys uint64 (J,), windows int64 (J, K), t0s int64 (J,),
    d_prevs float64 (J,), lengths int64 (J,) (lengths outer, samples inner).
    """
    lengths = np.repeat(np.asarray([int(x) for x in lengths], dtype=np.int64), samples)
    sample_ids = np.tile(np.arange(key0, key0 + samples, dtype=np.int64), lengths.size // max(samples, 1))
    keys = np.array([job_key(int(L), int(i)) for L, i in zip(lengths, sample_ids)], dtype=np.uint64)
    windows, d_prevs = prompts(model.useed, keys, int(model.vocab_size), int(model.window))
    return {"keys": keys, "windows": windows, "t0s": np.zeros(keys.size, dtype=np.int64), "d_prevs": d_prevs,
            "lengths": lengths}


def context_jobs(context: Context, n: int, n_tokens: int) -> dict:
    """``n`` jobs decoding ``n_tokens`` tokens from one fixed context (keys 0..n-1)."""
    window = np.ascontiguousarray(context.window, dtype=np.int64)
    windows = np.ascontiguousarray(np.broadcast_to(window, (n, window.size)))
    return {"keys": np.arange(n, dtype=np.uint64), "windows": windows,
            "t0s": np.full(n, int(context.position), dtype=np.int64), "d_prevs": np.full(n, float(context.d_prev)),
            "lengths": np.full(n, int(n_tokens), dtype=np.int64)}


def distributions_at(model: SyntheticModel, context: Context, depth: int = 0) -> dict:
    """Target p and draft q (float64 (V,)) at ``context`` for draft depth ``depth``, with the features.

    Returns: dict with p, q, d (difficulty at the position), target_entropy,
    draft_entropy, target_top_prob, draft_top_prob, target_argmax, draft_argmax, overlap.
    """
    V = int(model.vocab_size)
    p, q, work = np.empty(V), np.empty(V), np.empty(V)
    d, hp, hq, tp, tq, ap, aq, ov = position_pair(model.useed, context.position, np.asarray(context.window, np.int64),
                                                 context.d_prev, depth, model.params, model.log_rank, p, q, work)
    return {"p": p, "q": q, "d": d, "target_entropy": hp, "draft_entropy": hq, "target_top_prob": tp,
            "draft_top_prob": tq, "target_argmax": int(ap), "draft_argmax": int(aq), "overlap": ov}

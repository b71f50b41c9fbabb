"""Speculative decoding, simulated for real: synthetic draft/target models and the chain decode loop.

Synthetic language models
-------------------------
A :class:`SyntheticModel` turns the vocabulary generator's distribution model
(:mod:`data.synth.vocab_model`, module doc "The distribution model") into a pair of
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

Chain speculative decoding (Leviathan et al. 2023, arXiv 2211.17192; seed 001's decode step)
---------------------------------------------------------------------------------------
One target call (a *block*) at position t:

1. draft gamma tokens autoregressively, x_k ~ q(.|prefix + x_<k, depth k),
   k = 0..gamma-1 (one draft step each);
2. compute each drafted token's features exactly as the vocabulary generator
   does (draft_prob q(x), target_prob p(x), position t+k, draft_entropy H(q),
   target_entropy H(p) in nats, top_token_match argmax p == argmax q,
   draft_index k, draft_top_prob, target_top_prob, overlap sum_v min(p, q))
   and the rule's threshold tau_k by running the rule's compiled program over
   the block's rows (:func:`evolve.eval.interpreter.eval_block`; NaN/inf -> 0,
   clamped to [0, 1], as the evaluator does);
3. accept x_k iff u_k < tau_k, left to right; at the first rejection emit a
   token from the residual norm(max(0, p - q*tau)) (tau evaluated for every
   vocabulary token at that position: the best residual for any rule, notes
   ``acceptance-math.md`` section 1; the standard residual norm(max(0, p - q))
   for tau = min(1, p/q)) and end the block; if all gamma are accepted, emit a
   bonus token from p at position t + gamma.

A block therefore emits accepted + 1 tokens. If the residual is all zero
(only possible through rounding: it means a rejection had probability 0) the
token is drawn from p. The plain autoregressive loop (:func:`autoregressive`)
is the baseline: one target call per token, x_t ~ p (or argmax p when greedy).

Cost model: a target call costs 1, a draft step costs c (the cost ratio), so
speculative time = calls * (1 + gamma*c) and autoregressive time = length;
speedup = autoregressive time / speculative time.

Statistics of a run (:class:`ChainResult`)
-----------------------------------------
Over the blocks of a run, with tau_k, r_k = min(1, p(x_k)/q(x_k)) at depth k:

* analytic tokens per call = mean over blocks of 1 + sum_{k=1..gamma}
  prod_{i<=k} tau_i (the block formula, notes section 3) evaluated on the
  tokens actually drafted (including depths past the first rejection). Given
  the drafted tokens it is the expected number of tokens the block emits, so
  the simulated tokens per call estimate it without bias;
* tv_expected = sum over blocks of sum_k prod_{i<k} tau_i * max(0, tau_k - r_k)
  divided by the sum over blocks of their analytic tokens: the evaluator's
  ``tv_per_token`` on the simulated blocks (each depth's total-variation damage
  weighted by the probability that the depth is reached, per emitted token);
* tv_empirical = (number of drafted tokens accepted with r_k <= u_k < tau_k)
  divided by the number of emitted tokens: its sampled counterpart. At one
  position P(accept x with r(x) <= u < tau(x)) = sum_x max(0, q(x)tau(x) - p(x))
  = the TV between the rule's output and p, so both estimate the same damage
  per emitted token.

Randomness: the models use states keyed by contexts (``STREAM_MODEL``); the
decoding (drafted tokens, u, residual and bonus samples) uses a separate
xoshiro256++ stream per job keyed by (seed, job key, ``STREAM_DECODE``); a
sequence's prompt comes from (seed, job key, ``STREAM_PROMPT``). Jobs run in
parallel with ``prange`` (:func:`chain_batch`); every output depends only on
the seed, never on the thread count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numba import njit, prange

from data.errors import InputError
from data.synth.vocab_model import (
    VocabModelConfig, difficulty_step, draw_logits, draw_pair, next_double, next_normal, sample_index,
    sample_scaled, seed_state, softmax_given_max, zipf_log_rank,
)
from evolve.eval.evaluator import DEFAULT_COST_RATIO
from evolve.eval.interpreter import eval_block
from evolve.gp.primitives import FEATURES

#: Tokens of context hashed into a position's RNG key.
DEFAULT_WINDOW = 4

STREAM_MODEL = 11
STREAM_DECODE = 21
STREAM_PROMPT = 22

# The feature rows below are compile-time constants of cached kernels, which Numba re-compiles only
# when this file changes: a different FEATURES order must fail here, not silently use stale rows.
_FEATURE_ORDER = ("draft_prob", "target_prob", "position", "draft_entropy", "target_entropy", "top_token_match",
                  "draft_index", "draft_top_prob", "target_top_prob", "overlap")
if tuple(FEATURES) != _FEATURE_ORDER:
    raise ImportError("evolve.gp.primitives.FEATURES changed; update _FEATURE_ORDER in evolve/decoding.py "
                      f"(found {FEATURES})")
N_FEATURES = len(FEATURES)
F_DRAFT_PROB = FEATURES.index("draft_prob")
F_TARGET_PROB = FEATURES.index("target_prob")
F_POSITION = FEATURES.index("position")
F_DRAFT_ENTROPY = FEATURES.index("draft_entropy")
F_TARGET_ENTROPY = FEATURES.index("target_entropy")
F_TOP_MATCH = FEATURES.index("top_token_match")
F_DRAFT_INDEX = FEATURES.index("draft_index")
F_DRAFT_TOP = FEATURES.index("draft_top_prob")
F_TARGET_TOP = FEATURES.index("target_top_prob")
F_OVERLAP = FEATURES.index("overlap")

# per-sequence statistics (float64 rows of length N_STATS)
S_CALLS = 0          # target calls (blocks)
S_EMITTED = 1        # tokens emitted by all blocks (not truncated at the length)
S_ACCEPTED = 2       # drafted tokens accepted
S_DRAFTED = 3        # drafted tokens (gamma per block)
S_ANALYTIC = 4       # sum over blocks of 1 + sum_k prod_{i<=k} tau_i
S_TV_EXPECTED = 5    # sum over blocks of sum_k prod_{i<k} tau_i max(0, tau_k - r_k)
S_TV_COUNT = 6       # accepted drafted tokens with r <= u < tau
S_DRAFT_STEPS = 7    # sequential draft steps
S_LENGTH = 8         # tokens asked for
S_SUM_TAU = 9        # sum of tau over all drafted tokens
S_ROWS = 10          # rows recorded (record mode)
N_STATS = 11

# recorded row layout (record mode): FEATURES, then r, u, tau, accepted, tested, block
R_R = N_FEATURES
R_U = N_FEATURES + 1
R_TAU = N_FEATURES + 2
R_ACCEPTED = N_FEATURES + 3
R_TESTED = N_FEATURES + 4
R_BLOCK = N_FEATURES + 5
N_RECORD = N_FEATURES + 6

# per-block record layout: realized tokens, analytic tokens, TV count, expected TV
B_TOKENS = 0
B_ANALYTIC = 1
B_TV_COUNT = 2
B_TV_EXPECTED = 3
N_BLOCK_RECORD = 4

RESIDUAL_BEST = 0
RESIDUAL_BROKEN_FROM_P = 1  # deliberately wrong (tests only): sample from p after a rejection

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FM1 = np.uint64(0xFF51AFD7ED558CCD)
_FM2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)


# ---------------------------------------------------------------------------------------------
# Context hashing and one position's distributions
# ---------------------------------------------------------------------------------------------

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
        params, log_rank: :class:`data.synth.vocab_model.VocabParams`, :func:`data.synth.vocab_model.zipf_log_rank`.
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


@njit(cache=True)
def _clamp_tau(t):
    """The evaluator's threshold semantics: NaN/inf -> 0, then clamp to [0, 1]."""
    if not np.isfinite(t):
        return 0.0
    if t < 0.0:
        return 0.0
    if t > 1.0:
        return 1.0
    return t


@njit(cache=True)
def _window(buf, window_len, position, out):
    """out[:] = the ``window_len`` tokens before ``position`` (buffer index window_len + position)."""
    for i in range(window_len):
        out[i] = buf[position + i]


@njit(cache=True)
def sample_normalised(state, weights):
    """Draw v with probability weights[v] / sum(weights) (float64 (V,), >= 0); -1 if all are 0."""
    total = 0.0
    for v in range(weights.shape[0]):
        total += weights[v]
    if not total > 0.0:
        return -1
    return sample_scaled(state, weights, total)


@njit(cache=True)
def _residual_sample(rng, ops, args, consts, p, q, feats, XV, stack, resid, mode):
    """Token after a rejection: from norm(max(0, p - q*tau)) with tau of every token (see module doc).

    ``feats`` float64 (N_FEATURES,) the position's features (the drafted
    token's draft_prob/target_prob are replaced by each token's q(v), p(v));
    ``XV`` float64 (N_FEATURES, V), ``stack`` float64 (>= stack_size, V), ``resid`` float64 (V,).
    """
    V = p.shape[0]
    if mode == RESIDUAL_BROKEN_FROM_P:
        return sample_index(rng, p)
    for f in range(N_FEATURES):
        if f != F_DRAFT_PROB and f != F_TARGET_PROB:
            val = feats[f]
            for v in range(V):
                XV[f, v] = val
    for v in range(V):
        XV[F_DRAFT_PROB, v] = q[v]
        XV[F_TARGET_PROB, v] = p[v]
    eval_block(ops, args, consts, XV, 0, V, stack)
    for v in range(V):
        resid[v] = max(0.0, p[v] - q[v] * _clamp_tau(stack[0, v]))
    y = sample_normalised(rng, resid)
    if y < 0:
        y = sample_index(rng, p)
    return y


# ---------------------------------------------------------------------------------------------
# The chain decode loop
# ---------------------------------------------------------------------------------------------

@njit(cache=True)
def chain_run(model_seed, rng, buf, dpath, t0, length, gamma, window_len, params, log_rank,
              ops, args, consts, stack_size, residual_mode, stats, rows, blocks):
    """Chain speculative decoding of ``length`` tokens from position ``t0`` (module doc).

    Args:
        model_seed: uint64 seed of the synthetic models; rng: uint64 (4,) decoding stream.
        buf: int64 (window_len + t0 + length + gamma + 1,); token at position s lives at
            ``buf[window_len + s]``; ``buf[t0:t0+window_len]`` must hold the context window.
        dpath: float64 (t0 + length + gamma + 2,); ``dpath[s + 1]`` is the difficulty of
            position s; ``dpath[t0]`` must hold d_{t0-1}.
        gamma: draft length >= 1; ops, args, consts, stack_size: the rule's compiled program.
        residual_mode: :data:`RESIDUAL_BEST` (correct) or :data:`RESIDUAL_BROKEN_FROM_P` (tests).
        stats: float64 (N_STATS,) accumulated in place (see S_* constants).
        rows: float64 (R, N_RECORD) records of every drafted token while R allows (else (0, N_RECORD)).
        blocks: float64 (B, N_BLOCK_RECORD) per-block records while B allows.

    Tokens past ``t0 + length`` emitted by the last block stay in ``buf``.
    """
    V = log_rank.shape[0]
    P = np.empty((gamma, V))
    Q = np.empty((gamma, V))
    X = np.empty((N_FEATURES, gamma))
    XV = np.empty((N_FEATURES, V))
    stack = np.empty((max(stack_size, 1), max(gamma, V)))
    work = np.empty(V)
    resid = np.empty(V)
    scratch = np.empty(V)
    win = np.empty(window_len, dtype=np.int64)
    feats = np.empty(N_FEATURES)
    tau = np.empty(gamma)
    r = np.empty(gamma)
    uu = np.empty(gamma)
    t = t0
    end = t0 + length
    n_rows = int(stats[S_ROWS])
    n_blocks = 0
    while t < end:
        d = dpath[t]
        for k in range(gamma):
            pos = t + k
            _window(buf, window_len, pos, win)
            d, hp, hq, tp, tq, ap, aq, ov = position_pair(model_seed, pos, win, d, k, params, log_rank,
                                                         P[k], Q[k], work)
            dpath[pos + 1] = d
            x = sample_index(rng, Q[k])
            buf[window_len + pos] = x
            X[F_DRAFT_PROB, k] = Q[k, x]
            X[F_TARGET_PROB, k] = P[k, x]
            X[F_POSITION, k] = pos
            X[F_DRAFT_ENTROPY, k] = hq
            X[F_TARGET_ENTROPY, k] = hp
            X[F_TOP_MATCH, k] = 1.0 if ap == aq else 0.0
            X[F_DRAFT_INDEX, k] = k
            X[F_DRAFT_TOP, k] = tq
            X[F_TARGET_TOP, k] = tp
            X[F_OVERLAP, k] = ov
            r[k] = min(1.0, P[k, x] / Q[k, x])
        eval_block(ops, args, consts, X, 0, gamma, stack)
        reach = 1.0
        analytic = 1.0
        tv_exp = 0.0
        for k in range(gamma):
            tk = _clamp_tau(stack[0, k])
            tau[k] = tk
            stats[S_SUM_TAU] += tk
            tv_exp += reach * max(0.0, tk - r[k])
            reach *= tk
            analytic += reach
        for k in range(gamma):  # every depth's u is drawn, so untested rows have one too
            uu[k] = next_double(rng)
        accepted = gamma
        for k in range(gamma):
            if uu[k] >= tau[k]:
                accepted = k
                break
        tv_count = 0
        for k in range(accepted):
            if uu[k] >= r[k]:
                tv_count += 1
        for k in range(gamma):
            if n_rows >= rows.shape[0]:
                break
            for f in range(N_FEATURES):
                rows[n_rows, f] = X[f, k]
            rows[n_rows, R_R] = r[k]
            rows[n_rows, R_U] = uu[k]
            rows[n_rows, R_TAU] = tau[k]
            rows[n_rows, R_ACCEPTED] = 1.0 if k < accepted else 0.0
            rows[n_rows, R_TESTED] = 1.0 if k <= accepted else 0.0
            rows[n_rows, R_BLOCK] = stats[S_CALLS]
            n_rows += 1
        if accepted < gamma:
            k = accepted
            for f in range(N_FEATURES):
                feats[f] = X[f, k]
            y = _residual_sample(rng, ops, args, consts, P[k], Q[k], feats, XV, stack, resid, residual_mode)
            buf[window_len + t + k] = y
        if accepted == gamma:  # bonus token from p at position t + gamma
            pos = t + gamma
            _window(buf, window_len, pos, win)
            db, _ = target_at(model_seed, pos, win, dpath[pos], params, log_rank, resid, scratch, work)
            dpath[pos + 1] = db
            buf[window_len + pos] = sample_index(rng, resid)
        emitted = accepted + 1
        if n_blocks < blocks.shape[0]:
            blocks[n_blocks, B_TOKENS] = emitted
            blocks[n_blocks, B_ANALYTIC] = analytic
            blocks[n_blocks, B_TV_COUNT] = tv_count
            blocks[n_blocks, B_TV_EXPECTED] = tv_exp
        n_blocks += 1
        stats[S_CALLS] += 1.0
        stats[S_EMITTED] += emitted
        stats[S_ACCEPTED] += accepted
        stats[S_DRAFTED] += gamma
        stats[S_DRAFT_STEPS] += gamma
        stats[S_ANALYTIC] += analytic
        stats[S_TV_EXPECTED] += tv_exp
        stats[S_TV_COUNT] += tv_count
        t += emitted
    stats[S_LENGTH] += length
    stats[S_ROWS] = n_rows


@njit(cache=True)
def autoregressive_run(model_seed, rng, buf, dpath, t0, length, window_len, params, log_rank, greedy):
    """Plain autoregressive decoding: x_s ~ p(.|prefix) (argmax p if ``greedy``), one target call per token.

    ``buf`` and ``dpath`` as in :func:`chain_run` (``buf`` needs window_len + t0 + length entries).
    Returns the number of target calls (= length).
    """
    V = log_rank.shape[0]
    p = np.empty(V)
    scratch = np.empty(V)
    work = np.empty(V)
    win = np.empty(window_len, dtype=np.int64)
    for pos in range(t0, t0 + length):
        _window(buf, window_len, pos, win)
        d, ap = target_at(model_seed, pos, win, dpath[pos], params, log_rank, p, scratch, work)
        dpath[pos + 1] = d
        buf[window_len + pos] = ap if greedy else sample_index(rng, p)
    return length


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


@njit(cache=True, parallel=True)
def chain_batch(model_seed, decode_seed, keys, windows, t0s, d_prevs, lengths, gamma, params, log_rank, ops, args,
                consts, stack_size, residual_mode, stats_out, tokens_out, rows_out, blocks_out):
    """Independent chain decodes (jobs), in parallel; each job's output depends only on its inputs.

    Job j decodes ``lengths[j]`` tokens from position ``t0s[j]`` after the context
    window ``windows[j]`` (int64 (J, K)) with d_{t0-1} = ``d_prevs[j]``, on the
    decoding stream (decode_seed, keys[j], STREAM_DECODE). Outputs per job:
    ``stats_out[j]`` (J, N_STATS), the first tokens ``tokens_out[j]`` (J, T; T may be 0),
    records ``rows_out[j]`` (J, R, N_RECORD) and ``blocks_out[j]`` (J, B, N_BLOCK_RECORD)
    (R, B may be 0); see :func:`chain_run`.
    """
    for j in prange(keys.shape[0]):
        K = windows.shape[1]
        t0 = t0s[j]
        buf, dpath = start_buffers(windows[j], t0, d_prevs[j], lengths[j] + gamma + 1)
        rng = seed_state(decode_seed, keys[j], STREAM_DECODE)
        chain_run(model_seed, rng, buf, dpath, t0, lengths[j], gamma, K, params, log_rank, ops, args, consts,
                  stack_size, residual_mode, stats_out[j], rows_out[j], blocks_out[j])
        for k in range(min(tokens_out.shape[1], lengths[j])):
            tokens_out[j, k] = buf[K + t0 + k]


@njit(cache=True)
def autoregressive_batch(model_seed, decode_seed, keys, windows, t0s, d_prevs, lengths, params, log_rank, greedy,
                         tokens_out):
    """Plain autoregressive decodes (jobs as :func:`chain_batch`, stream STREAM_DECODE + 100).

    Returns int64 (J,) target calls; the first tokens go to ``tokens_out`` (J, T).
    """
    calls = np.zeros(keys.shape[0], dtype=np.int64)
    for j in range(keys.shape[0]):
        K = windows.shape[1]
        t0 = t0s[j]
        buf, dpath = start_buffers(windows[j], t0, d_prevs[j], lengths[j])
        rng = seed_state(decode_seed, keys[j], STREAM_DECODE + 100)
        calls[j] = autoregressive_run(model_seed, rng, buf, dpath, t0, lengths[j], K, params, log_rank, greedy)
        for k in range(min(tokens_out.shape[1], lengths[j])):
            tokens_out[j, k] = buf[K + t0 + k]
    return calls


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
            raise InputError(f"option '--vocab': must be an integer in [2, 1000000] (value {self.vocab_size!r})")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) \
                or not 0 <= int(self.seed) < 2 ** 63:
            raise InputError(f"option '--seed': must be an integer in [0, 2**63) (value {self.seed!r})")
        if not isinstance(self.window, (int, np.integer)) or not 1 <= self.window <= 64:
            raise InputError(f"option '--window': must be an integer in [1, 64] (value {self.window!r})")
        self.config.validate()

    @property
    def params(self):
        """The jitted functions' :class:`data.synth.vocab_model.VocabParams`."""
        return self.config.params()

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


def rule_program(rule) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(ops, args, consts, stack_size) of an expression rule, champion or :class:`evolve.gp.compiler.Program`.

    Raises: InputError for a function rule (the simulator runs compiled
    programs inside its jitted loop; give the rule as an expression instead).
    """
    from evolve.gp.compiler import Program
    program = rule if isinstance(rule, Program) else getattr(rule, "program", None)
    if program is None:
        name = getattr(rule, "name", "?")
        raise InputError(f"option '--rule': rule '{name}' is a Python function rule; the simulator runs "
                         "expression rules and champions only (give it as a primitive-set expression)")
    return (np.ascontiguousarray(program.ops, np.int32), np.ascontiguousarray(program.args, np.int32),
            np.ascontiguousarray(program.consts, np.float64), int(program.stack_size))


def check_gamma(gamma) -> int:
    """Validated draft length (1..64). Raises InputError naming ``--gamma``."""
    if isinstance(gamma, bool) or not isinstance(gamma, (int, np.integer)) or not 1 <= gamma <= 64:
        raise InputError(f"option '--gamma': must be an integer in [1, 64] (value {gamma!r})")
    return int(gamma)


def check_cost_ratio(c) -> float:
    """Validated cost ratio (finite, >= 0). Raises InputError naming ``--cost-ratio``."""
    if isinstance(c, bool) or not isinstance(c, (int, float, np.integer, np.floating)) \
            or not math.isfinite(c) or c < 0:
        raise InputError(f"option '--cost-ratio': must be a finite number >= 0 (value {c!r})")
    return float(c)


@dataclass(frozen=True)
class ChainResult:
    """Totals of a chain speculative decoding run over ``sequences`` sequences of ``length`` tokens.

    ``stats`` is float64 (N_STATS,) summed over sequences (S_* constants);
    ``autoregressive_calls`` the baseline's total target calls; ``per_sequence``
    float64 (sequences, N_STATS) the statistics of each sequence.
    """

    length: int
    sequences: int
    gamma: int
    cost_ratio: float
    stats: np.ndarray
    autoregressive_calls: float
    per_sequence: np.ndarray | None = None

    @property
    def target_calls(self) -> float:
        """Mean target calls per sequence."""
        return float(self.stats[S_CALLS]) / self.sequences

    @property
    def calls_per_token(self) -> float:
        """Target calls per generated token (seed 002): total calls / (sequences * length)."""
        return float(self.stats[S_CALLS] / self.stats[S_LENGTH])

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafted tokens / drafted tokens (gamma per call; seed 001's acceptance_rate)."""
        return float(self.stats[S_ACCEPTED] / self.stats[S_DRAFTED])

    @property
    def tokens_per_call(self) -> float:
        """Emitted tokens / target calls (every block's tokens, the last one not truncated)."""
        return float(self.stats[S_EMITTED] / self.stats[S_CALLS])

    @property
    def analytic_tokens_per_call(self) -> float:
        """Mean over the simulated blocks of 1 + sum_k prod_{i<=k} tau_i (notes section 3)."""
        return float(self.stats[S_ANALYTIC] / self.stats[S_CALLS])

    @property
    def speculative_time(self) -> float:
        """Mean simulated time per sequence: calls + c * draft steps (target call = 1)."""
        return float(self.stats[S_CALLS] + self.cost_ratio * self.stats[S_DRAFT_STEPS]) / self.sequences

    @property
    def autoregressive_time(self) -> float:
        """Mean simulated time per sequence of the baseline: one target call per token."""
        return float(self.autoregressive_calls) / self.sequences

    @property
    def speedup(self) -> float:
        """autoregressive time / speculative time."""
        return self.autoregressive_time / self.speculative_time

    @property
    def tv_expected(self) -> float:
        """Reach-weighted expected TV per emitted token (module doc): sum of block TVs / sum of analytic tokens."""
        return float(self.stats[S_TV_EXPECTED] / self.stats[S_ANALYTIC])

    @property
    def tv_empirical(self) -> float:
        """Drafted tokens accepted with r <= u < tau per emitted token (module doc)."""
        return float(self.stats[S_TV_COUNT] / self.stats[S_EMITTED])

    @property
    def expected_acceptance(self) -> float:
        """Mean tau over all drafted tokens."""
        return float(self.stats[S_SUM_TAU] / self.stats[S_DRAFTED])


def simulate_chain(model: SyntheticModel, rule, lengths, samples: int, gamma: int,
                   cost_ratio: float = DEFAULT_COST_RATIO) -> list[ChainResult]:
    """Chain speculative decoding and the autoregressive baseline for every length (module doc).

    Args:
        model: the synthetic models (their seed also seeds the decoding streams).
        rule: expression rule, champion or Program (:func:`rule_program`).
        lengths: generation lengths (ints >= 1); samples: sequences per length (>= 1).
        gamma: draft length; cost_ratio: draft step cost c.

    Returns: one :class:`ChainResult` per length, in order. Sequence i of
    length L starts from its own prompt (key job_key(L, i)), the same for the
    baseline. Raises InputError for bad options or a function rule.
    """
    gamma = check_gamma(gamma)
    cost_ratio = check_cost_ratio(cost_ratio)
    ops, args, consts, ss = rule_program(rule)
    lengths = [int(x) for x in lengths]
    jobs = sequence_jobs(model, lengths, samples)
    J = jobs["keys"].size
    out = np.zeros((J, N_STATS))
    chain_batch(model.useed, model.useed, jobs["keys"], jobs["windows"], jobs["t0s"], jobs["d_prevs"], jobs["lengths"],
                gamma, model.params, model.log_rank, ops, args, consts, ss, RESIDUAL_BEST, out,
                np.zeros((J, 0), np.int64), np.zeros((J, 0, N_RECORD)), np.zeros((J, 0, N_BLOCK_RECORD)))
    ar = autoregressive_batch(model.useed, model.useed, jobs["keys"], jobs["windows"], jobs["t0s"], jobs["d_prevs"],
                              jobs["lengths"], model.params, model.log_rank, False, np.zeros((J, 0), np.int64))
    results = []
    for i, length in enumerate(lengths):
        sl = slice(i * samples, (i + 1) * samples)
        results.append(ChainResult(length, samples, gamma, cost_ratio, out[sl].sum(axis=0), float(ar[sl].sum()),
                                   out[sl].copy()))
    return results


def chain_at_context(model: SyntheticModel, rule, context: Context, n: int, gamma: int, n_tokens: int = 1,
                     seed: int = 0, _broken_residual: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``n`` independent speculative decodes of ``n_tokens`` tokens from one fixed context.

    Returns: (tokens int64 (n, n_tokens), first_rows float64 (n, N_RECORD)):
    the emitted tokens, and the record of each decode's first drafted token
    (FEATURES, then r, u, tau, accepted, tested, block). ``_broken_residual``
    (tests only) samples from p instead of the residual after a rejection.
    """
    gamma = check_gamma(gamma)
    ops, args, consts, ss = rule_program(rule)
    jobs = context_jobs(context, int(n), int(n_tokens))
    tokens = np.zeros((n, n_tokens), dtype=np.int64)
    rows = np.zeros((n, 1, N_RECORD))
    mode = RESIDUAL_BROKEN_FROM_P if _broken_residual else RESIDUAL_BEST
    chain_batch(model.useed, np.uint64(seed), jobs["keys"], jobs["windows"], jobs["t0s"], jobs["d_prevs"],
                jobs["lengths"], gamma, model.params, model.log_rank, ops, args, consts, ss, mode,
                np.zeros((n, N_STATS)), tokens, rows, np.zeros((n, 0, N_BLOCK_RECORD)))
    return tokens, rows[:, 0, :]


def chain_traces(model: SyntheticModel, rule, length: int, sequences: int, gamma: int,
                 key0: int = 0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Record a chain decoding run as a schema-valid trace split, plus per-block records.

    Every drafted token (including those after a block's rejection) becomes a
    row as in the vocabulary generator: draft_index 0..gamma-1 consecutive per
    block, rand_value = the u the decode loop drew (a fresh one for untested
    tokens), baseline_accepts = rand_value < min(1, p/q). So
    :func:`evolve.eval.evaluator.evaluate` on the frame with ``gamma`` reproduces the
    run's analytic tokens per call and tv_expected.

    Returns: (frame, tau float64 (n,) the thresholds the loop used, blocks
    float64 (calls, N_BLOCK_RECORD): realized tokens, analytic tokens, TV count, expected TV).
    """
    gamma = check_gamma(gamma)
    ops, args, consts, ss = rule_program(rule)
    length = int(length)
    jobs = sequence_jobs(model, [length], int(sequences), int(key0))
    J = jobs["keys"].size
    stats = np.zeros((J, N_STATS))
    rows = np.zeros((J, length * gamma, N_RECORD))
    blocks = np.zeros((J, length, N_BLOCK_RECORD))
    chain_batch(model.useed, model.useed, jobs["keys"], jobs["windows"], jobs["t0s"], jobs["d_prevs"], jobs["lengths"],
                gamma, model.params, model.log_rank, ops, args, consts, ss, RESIDUAL_BEST, stats,
                np.zeros((J, 0), np.int64), rows, blocks)
    frames, taus, blocks_all = [], [], []
    for s in range(J):
        n = int(stats[s, S_ROWS])
        r = rows[s, :n]
        frame = {f: r[:, i] for i, f in enumerate(FEATURES)}
        frame["position"] = frame["position"].astype(np.int64)
        frame["draft_index"] = frame["draft_index"].astype(np.int64)
        frame["top_token_match"] = frame["top_token_match"] > 0.5
        frame["rand_value"] = r[:, R_U]
        frame["baseline_accepts"] = r[:, R_U] < np.minimum(1.0, frame["target_prob"] / frame["draft_prob"])
        frame["seq_id"] = np.full(n, s, dtype=np.int64)
        frames.append(pd.DataFrame(frame))
        taus.append(r[:, R_TAU])
        blocks_all.append(blocks[s, :int(stats[s, S_CALLS])])
    return pd.concat(frames, ignore_index=True), np.concatenate(taus), np.concatenate(blocks_all)


def chi_square_pvalue(counts, probs, min_expected: float = 5.0) -> float:
    """Pearson chi-square goodness-of-fit p-value of token ``counts`` (int (V,)) against ``probs`` (float (V,)).

    Cells whose expected count is below ``min_expected`` are pooled into one
    cell (dropped if its expected count is 0 and nothing was observed there).
    Used by the exactness tests: with a lossless loop the emitted tokens at a
    fixed context are distributed as p.
    """
    from scipy import stats
    counts = np.asarray(counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    expected = probs / probs.sum() * counts.sum()
    keep = expected >= min_expected
    obs = list(counts[keep])
    exp = list(expected[keep])
    rest_o, rest_e = counts[~keep].sum(), expected[~keep].sum()
    if rest_e > 0 or rest_o > 0:
        obs.append(rest_o)
        exp.append(max(rest_e, 1e-300))
    return float(stats.chisquare(np.asarray(obs), np.asarray(exp)).pvalue)


def autoregressive(model: SyntheticModel, length: int, sequences: int, greedy: bool = False,
                   key_length: int | None = None) -> np.ndarray:
    """Tokens (int64 (sequences, length)) of plain autoregressive decoding, sequence i from prompt job_key(L, i).

    ``key_length`` (default ``length``) is the L of the prompt keys, so a run of
    another length can share prompts. Greedy decoding emits argmax p.
    """
    jobs = sequence_jobs(model, [int(key_length if key_length is not None else length)], int(sequences))
    jobs["lengths"][:] = int(length)
    out = np.zeros((int(sequences), int(length)), dtype=np.int64)
    autoregressive_batch(model.useed, model.useed, jobs["keys"], jobs["windows"], jobs["t0s"], jobs["d_prevs"],
                         jobs["lengths"], model.params, model.log_rank, bool(greedy), out)
    return out

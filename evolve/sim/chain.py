"""The chain decode loop of the simulator, in jitted kernels, and the layouts of what it records.

Chain speculative decoding (Leviathan et al. 2023, arXiv 2211.17192)
----------------------------------------------------------------------
One target call (a *block*) at position t, on the synthetic models of
:mod:`evolve.sim.models`:

1. draft gamma tokens autoregressively, x_k ~ q(.|prefix + x_<k, depth k),
   k = 0..gamma-1 (one draft step each);
2. compute each drafted token's features exactly as the vocabulary generator
   does (draft_prob q(x), target_prob p(x), position t+k, draft_entropy H(q),
   target_entropy H(p) in nats, top_token_match argmax p == argmax q,
   draft_index k, draft_top_prob, target_top_prob, overlap sum_v min(p, q))
   and the rule's threshold tau_k by running the rule's compiled program over
   the block's rows (:func:`evolve.eval.reference.eval_rows`; NaN/inf -> 0,
   clamped to [0, 1], as the evaluator does);
3. accept x_k iff u_k < tau_k, left to right; at the first rejection emit a
   token from the residual norm(max(0, p - q*tau)) and end the block; if all
   gamma are accepted, emit a bonus token from p at position t + gamma. That is
   token-wise verification; block verification (lossless, or relaxed against a
   mixture target with a weight program) and FLy decide the kept prefix and the
   residual differently from the same drafts and uniforms
   (:mod:`evolve.sim.verification`).

The residual takes tau of every vocabulary token at the rejected position: a
token v was already emitted by acceptance with probability q(v) tau(v), so
max(0, p(v) - q(v) tau(v)) is the mass of p still missing, and sampling from it
brings the output as close to p as any residual can; for the standard rule
tau = min(1, p/q) it is the standard residual norm(max(0, p - q)). A block
therefore emits accepted + 1 tokens. If the residual is all zero (only possible
through rounding: it means a rejection had probability 0) the token is drawn
from p. The plain autoregressive loop (:func:`autoregressive_run`) is the
baseline: one target call per token, x_t ~ p (or argmax p when greedy).

Layouts
-------
The kernels write float64 rows whose columns are named by the ``IntEnum``
layouts below (:func:`evolve.eval.fastpath.layouts.record_layout`), the one definition
shared by the kernels (Numba folds the members into constants) and the Python
side: :class:`Feature` (feature matrices, the order of
:data:`evolve.gp.primitives.FEATURES`), :class:`Stat` (per-sequence
statistics), :class:`Record` (one drafted token's record: the features, then
r, u, tau, accepted, tested, block, block_residual_mass, then block_residual_phi's
PHI_POINTS values) and
:class:`BlockStat` (one block's record). ``N_*`` are the row lengths; the flat names ``S_*``,
``R_*``, ``B_*`` are the same members.

Randomness: the decoding (drafted tokens, u, residual and bonus samples) uses a
separate xoshiro256++ stream per job keyed by (seed, job key, ``STREAM_DECODE``;
``+ 100`` for the autoregressive baseline). Jobs run in parallel with ``prange``
(:func:`chain_batch`); every output depends only on the seed, never on the
thread count.
"""
from __future__ import annotations

from collections import namedtuple
from enum import IntEnum

import numpy as np
from numba import njit, prange

from evolve.verification.block import (
    PHI_POINTS, block_accept, block_masses, block_residual, block_stops, relaxed_damage, relaxed_targets, residual_phi,
    target_rank,
)
from evolve.verification.tokenwise import acceptance_ratio, residual_weights
from evolve.verification.tokenwise_block import block_expectation, clamp_threshold
from evolve.traces.synth.rng import next_double, sample_index, sample_normalised, seed_state
from evolve.eval.fastpath.layouts import record_layout, record_size
from evolve.eval.reference import eval_rows
from evolve.gp.primitives import FEATURES, Op
from evolve.sim.models import STREAM_DECODE, KernelModel, position_pair, start_buffers, target_at
from evolve.sim.verification import VERIFY_BLOCK, VERIFY_FLY, fly_accept, fly_expected, topk_entropy


@record_layout
class Feature(IntEnum):
    """Row of each feature in the kernels' feature matrices: the order of ``FEATURES``."""

    DRAFT_PROB = 0
    TARGET_PROB = 1
    POSITION = 2
    DRAFT_ENTROPY = 3
    TARGET_ENTROPY = 4
    TOP_TOKEN_MATCH = 5
    DRAFT_INDEX = 6
    DRAFT_TOP_PROB = 7
    TARGET_TOP_PROB = 8
    OVERLAP = 9
    TARGET_RANK = 10
    DRAFT_CUMPROB = 11
    LOOKUP_LEN = 12   # prompt lookup's columns: the simulator has no lookup drafter (NaN rows, not exported)
    LOOKUP_FREQ = 13
    LEVEL_CUMPROB = 14  # a draft tree's level: no kind the simulator runs reads them (NaN rows)
    LEVEL_RANK = 15
    PREV_VERIFIED = 16  # the request so far: a verification-length policy's history (NaN rows)
    PREV_ACCEPTED = 17
    ACCEPT_EWMA = 18
    FIRST_HIT_EWMA = 19
    SINCE_REJECT = 20
    SUFFIX_MATCH_LEN = 21  # suffix decoding's columns: the simulator has no suffix drafter (NaN rows, not exported)
    SUFFIX_PROB = 22
    SUFFIX_CUMPROB = 23
    SUFFIX_SCORE = 24
    SUFFIX_FROM_CACHE = 25


# The layouts are compile-time constants of cached kernels, which Numba re-compiles only when this
# file changes: a different FEATURES order must fail here, not silently use stale rows.
if tuple(FEATURES) != tuple(f.name.lower() for f in Feature):
    raise ImportError("evolve.gp.primitives.FEATURES changed; update Feature in evolve/sim/chain.py "
                      f"(found {FEATURES})")
N_FEATURES = record_size(Feature)


@record_layout
class Stat(IntEnum):
    """Per-sequence statistics of a chain run (float64 rows of length ``N_STATS``)."""

    CALLS = 0          # target calls (blocks)
    EMITTED = 1        # tokens emitted by all blocks (not truncated at the length)
    ACCEPTED = 2       # drafted tokens accepted
    DRAFTED = 3        # drafted tokens (gamma per block)
    ANALYTIC = 4       # sum over blocks of their expected tokens (token-wise: 1 + sum_k prod_{i<=k} tau_i)
    TV_EXPECTED = 5    # sum over blocks of their expected damage (token-wise: see BlockStat.TV_EXPECTED)
    TV_COUNT = 6       # accepted drafted tokens with r <= u (lossy rules, FLy's deferrals; 0 for block verification)
    DRAFT_STEPS = 7    # sequential draft steps
    LENGTH = 8         # tokens asked for
    SUM_TAU = 9        # sum of tau over all drafted tokens
    ROWS = 10          # rows recorded (record mode)


N_STATS = record_size(Stat)


class Record(IntEnum):
    """Columns of one drafted token's record (record mode) after its feature columns 0..N_FEATURES-1,
    which follow :class:`Feature`; a record has ``N_RECORD`` columns."""

    R = N_FEATURES             # min(1, p(x)/q(x))
    U = N_FEATURES + 1         # the uniform drawn for the acceptance test
    TAU = N_FEATURES + 2       # the rule's threshold
    ACCEPTED = N_FEATURES + 3  # 1 if accepted
    TESTED = N_FEATURES + 4    # 1 if the acceptance test ran (depth <= first rejection)
    BLOCK = N_FEATURES + 5     # index of the block (target call) in the sequence
    RESIDUAL_MASS = N_FEATURES + 6  # block_residual_mass (NaN at depth gamma - 1)
    PHI = N_FEATURES + 7       # first of the PHI_POINTS values of block_residual_phi (NaN at depth gamma - 1)


N_RECORD = N_FEATURES + len(Record) + PHI_POINTS - 1


@record_layout
class BlockStat(IntEnum):
    """One block's record (float64 rows of length ``N_BLOCK_RECORD``)."""

    TOKENS = 0       # realized tokens emitted
    ANALYTIC = 1     # expected tokens given the drafts (token-wise: 1 + sum_k prod_{i<=k} tau_i; see _verify)
    TV_COUNT = 2     # accepted drafted tokens with r <= u (relaxed block: sum of w_k (1 - overlap_k) over emitted depths)
    TV_EXPECTED = 3  # expected damage given the drafts (token-wise: sum_k prod_{i<k} tau_i max(0, tau_k - r_k))


N_BLOCK_RECORD = record_size(BlockStat)

# Flat names of the same members (unpacking fails at import if a layout gains a member).
(S_CALLS, S_EMITTED, S_ACCEPTED, S_DRAFTED, S_ANALYTIC, S_TV_EXPECTED, S_TV_COUNT, S_DRAFT_STEPS, S_LENGTH,
 S_SUM_TAU, S_ROWS) = Stat
R_R, R_U, R_TAU, R_ACCEPTED, R_TESTED, R_BLOCK, R_RESIDUAL_MASS, R_PHI = Record
B_TOKENS, B_ANALYTIC, B_TV_COUNT, B_TV_EXPECTED = BlockStat


#: A compiled program as the kernels take it (:func:`evolve.sim.decoding.rule_program`'s four values): ``ops``,
#: ``args`` int64 (L,), ``consts`` float64 (L,), ``stack_size``; an empty one (L = 0) is no program.
RuleProgram = namedtuple("RuleProgram", ["ops", "args", "consts", "stack_size"])
#: The two programs of a chain decode: the rule's thresholds (``rule``) and the relaxation weight of relaxed block
#: verification (``weight``, empty: none), each a :class:`RuleProgram`.
Programs = namedtuple("Programs", ["rule", "weight"])
#: How a chain block is drafted and verified: draft length ``gamma`` >= 1; ``verify``
#: :data:`evolve.sim.verification.VERIFY_TOKEN`, ``VERIFY_BLOCK`` or ``VERIFY_FLY``; FLy's ``fly_window`` (int),
#: ``fly_threshold`` (nats) and ``fly_top_k`` (int).
ChainMode = namedtuple("ChainMode", ["gamma", "verify", "fly_window", "fly_threshold", "fly_top_k"])
#: What a chain decode writes: ``stats`` float64 (N_STATS,) (accumulated, columns :class:`Stat`), ``rows`` float64
#: (R, N_RECORD) the records of the drafted tokens while R allows, ``blocks`` float64 (B, N_BLOCK_RECORD) per block.
ChainOut = namedtuple("ChainOut", ["stats", "rows", "blocks"])
#: The outputs of :func:`chain_batch`, one row per job: ``stats`` float64 (J, N_STATS), ``tokens`` int64 (J, T) the
#: first tokens, ``rows`` float64 (J, R, N_RECORD), ``blocks`` float64 (J, B, N_BLOCK_RECORD) (T, R, B may be 0).
BatchOut = namedtuple("BatchOut", ["stats", "tokens", "rows", "blocks"])
#: Scratch of one block's verification (:func:`_verify`): ``h`` float64 (gamma,) stopping probabilities;
#: ``native``, ``gate``, ``deferred`` bool (gamma,) and ``mass``, ``nxt`` float64 (gamma + 1,): FLy's.
VerifyScratch = namedtuple("VerifyScratch", ["h", "native", "gate", "deferred", "mass", "nxt"])


@njit(cache=True)
def _window(buf, window_len, position, out):
    """out[:] = the ``window_len`` tokens before ``position`` (buffer index window_len + position)."""
    for i in range(window_len):
        out[i] = buf[position + i]


@njit(cache=True)
def _target_ranks(p, out):
    """out[v] = target_rank of token v: the number of tokens with a strictly larger p (ties share a rank)."""
    order = np.argsort(-p)
    rank = 0
    for j in range(p.shape[0]):
        if j > 0 and p[order[j]] < p[order[j - 1]]:
            rank = j
        out[order[j]] = rank


@njit(cache=True)
def _residual_sample(rng, rule, p, q, feats, XV, stack, resid, uses_rank):
    """Token after a rejection: from norm(max(0, p - q*tau)) with tau of every token (see module doc).

    ``rule`` the rule's :class:`RuleProgram`; ``feats`` float64 (N_FEATURES,) the position's features (the drafted
    token's draft_prob/target_prob are replaced by each token's q(v), p(v), and its
    target_rank by each token's rank if ``uses_rank``, i.e. if the program reads it);
    ``XV`` float64 (N_FEATURES, V), ``stack`` float64 (>= stack_size, V), ``resid`` float64 (V,).
    """
    V = p.shape[0]
    for f in range(N_FEATURES):
        if f != Feature.DRAFT_PROB and f != Feature.TARGET_PROB and f != Feature.TARGET_RANK:
            val = feats[f]
            for v in range(V):
                XV[f, v] = val
    for v in range(V):
        XV[Feature.DRAFT_PROB, v] = q[v]
        XV[Feature.TARGET_PROB, v] = p[v]
    if uses_rank:  # sorting V tokens per rejection is only paid by programs that read the rank
        _target_ranks(p, XV[Feature.TARGET_RANK])
    eval_rows(rule.ops, rule.args, rule.consts, XV, 0, V, stack)
    tau = stack[0]
    for v in range(V):
        tau[v] = clamp_threshold(tau[v])
    residual_weights(p, q, tau, resid)
    y = sample_normalised(rng, resid)
    if y < 0:
        y = sample_index(rng, p)
    return y


@njit(cache=True)
def _verify(mode, P, target_prob, r, tau, uu, weights, masses, vs):
    """One block's verification (:mod:`evolve.sim.verification`): (accepted, analytic tokens, expected TV).

    ``mode`` a :class:`ChainMode`; ``P`` float64 (gamma, V); ``target_prob``, ``r`` min(1, p/q), ``tau`` the rule's
    clamped thresholds and ``uu`` the uniforms, float64 (gamma,); block verification needs ``weights``,
    ``masses`` float64 (gamma,) from :func:`evolve.verification.block.block_masses` and writes ``vs.h``; the rest
    of ``vs`` (:class:`VerifyScratch`) is scratch.
    Token-wise: analytic = 1 + sum_k prod_{i<=k} tau_i, expected TV =
    sum_k prod_{i<k} tau_i max(0, tau_k - r_k) (:func:`evolve.verification.tokenwise_block.block_expectation`); block: 1 + E[tau], 0 (relaxed: the
    caller adds the damage, :func:`evolve.verification.block.relaxed_damage`); FLy: 1 + E[kept],
    E[deferred acceptances] (:func:`evolve.sim.verification.fly_expected`).
    """
    gamma, verify, fly_window, fly_threshold, fly_top_k = mode
    h, native, gate, deferred, mass, nxt = vs
    if verify == VERIFY_BLOCK:
        e_tau = block_stops(weights, masses, gamma, h)
        return block_accept(h, uu, gamma), 1.0 + e_tau, 0.0
    if verify == VERIFY_FLY:
        for k in range(gamma):
            native[k] = uu[k] < tau[k]
            gate[k] = (k + fly_window < gamma and target_prob[k] > 0.0
                       and topk_entropy(P[k], fly_top_k) >= fly_threshold)
        e_kept, e_deferred = fly_expected(tau, gate, gamma, fly_window, mass, nxt)
        return fly_accept(native, gate, gamma, fly_window, deferred), 1.0 + e_kept, e_deferred
    analytic, tv_exp = block_expectation(tau[:gamma], r)
    accepted = gamma
    for k in range(gamma):
        if uu[k] >= tau[k]:
            accepted = k
            break
    return accepted, analytic, tv_exp


# ---------------------------------------------------------------------------------------------
# The chain decode loop
# ---------------------------------------------------------------------------------------------

@njit(cache=True)
def chain_run(model, rng, buf, dpath, t0, length, window_len, mode, programs, out):
    """Chain speculative decoding of ``length`` tokens from position ``t0`` (module doc).

    Args:
        model: :class:`evolve.sim.models.KernelModel`; rng: uint64 (4,) decoding stream.
        buf: int64 (window_len + t0 + length + gamma + 1,); token at position s lives at
            ``buf[window_len + s]``; ``buf[t0:t0+window_len]`` must hold the context window.
        dpath: float64 (t0 + length + gamma + 2,); ``dpath[s + 1]`` is the difficulty of
            position s; ``dpath[t0]`` must hold d_{t0-1}.
        window_len: K, the context window's length.
        mode: :class:`ChainMode` (gamma, the verification and FLy's parameters).
        programs: :class:`Programs`: the rule's compiled program and the relaxation weight's (``VERIFY_BLOCK``
            against p~ = (1 - w) p + w q; an empty program is lossless block verification).
        out: :class:`ChainOut`: ``stats`` float64 (N_STATS,) accumulated in place (columns: :class:`Stat`),
            ``rows`` float64 (R, N_RECORD) records of every drafted token while R allows (else (0, N_RECORD)),
            ``blocks`` float64 (B, N_BLOCK_RECORD) per-block records while B allows.

    Tokens past ``t0 + length`` emitted by the last block stay in ``buf``.
    """
    model_seed, params, log_rank = model
    gamma, verify = mode.gamma, mode.verify
    ops, args, consts, stack_size = programs.rule
    wops, wargs, wconsts, wstack = programs.weight
    stats, rows, blocks = out
    V = log_rank.shape[0]
    P = np.empty((gamma, V))
    Q = np.empty((gamma, V))
    X = np.empty((N_FEATURES, gamma))
    X[Feature.LOOKUP_LEN, :] = np.nan  # no prompt lookup here: its columns are NaN (no kind the simulator runs reads them)
    X[Feature.LOOKUP_FREQ, :] = np.nan
    X[Feature.LEVEL_CUMPROB, :] = np.nan
    X[Feature.LEVEL_RANK, :] = np.nan
    X[Feature.PREV_VERIFIED:Feature.SINCE_REJECT + 1, :] = np.nan  # a verification-length policy's history
    X[Feature.SUFFIX_MATCH_LEN:Feature.SUFFIX_FROM_CACHE + 1, :] = np.nan  # no suffix decoding here
    XV = np.empty((N_FEATURES, V))
    stack = np.empty((max(stack_size, wstack, 1), max(gamma, V)))
    relaxed = verify == VERIFY_BLOCK and wops.shape[0] > 0
    wk = np.zeros(gamma)
    damage = np.zeros(gamma)
    Pt = np.empty((gamma if relaxed else 0, V))
    tpt = np.empty(gamma)
    drafts = np.empty(gamma, dtype=np.int64)
    rweights = np.empty(gamma)
    rmasses = np.full(gamma, np.nan)
    work = np.empty(V)
    resid = np.empty(V)
    scratch = np.empty(V)
    win = np.empty(window_len, dtype=np.int64)
    feats = np.empty(N_FEATURES)
    tau = np.empty(gamma)
    r = np.empty(gamma)
    uu = np.empty(gamma)
    weights = np.empty(gamma)
    masses = np.full(gamma, np.nan)
    h = np.empty(gamma)
    vs = VerifyScratch(h, np.zeros(gamma, dtype=np.bool_), np.zeros(gamma, dtype=np.bool_),
                       np.zeros(gamma, dtype=np.bool_), np.empty(gamma + 1), np.empty(gamma + 1))
    uses_rank = False
    for i in range(ops.shape[0]):
        if ops[i] == Op.FEATURE and args[i] == Feature.TARGET_RANK:
            uses_rank = True
    t = t0
    end = t0 + length
    n_rows = int(stats[Stat.ROWS])
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
            X[Feature.DRAFT_PROB, k] = Q[k, x]
            X[Feature.TARGET_PROB, k] = P[k, x]
            X[Feature.POSITION, k] = pos
            X[Feature.DRAFT_ENTROPY, k] = hq
            X[Feature.TARGET_ENTROPY, k] = hp
            X[Feature.TOP_TOKEN_MATCH, k] = 1.0 if ap == aq else 0.0
            X[Feature.DRAFT_INDEX, k] = k
            X[Feature.DRAFT_TOP_PROB, k] = tq
            X[Feature.TARGET_TOP_PROB, k] = tp
            X[Feature.OVERLAP, k] = ov
            X[Feature.TARGET_RANK, k] = target_rank(P[k], x)
            X[Feature.DRAFT_CUMPROB, k] = Q[k, x] * (X[Feature.DRAFT_CUMPROB, k - 1] if k > 0 else 1.0)
            r[k] = acceptance_ratio(P[k, x], Q[k, x])
            drafts[k] = x
        if relaxed:  # the relaxation weight of every depth, from its prefix-level features
            eval_rows(wops, wargs, wconsts, X, 0, gamma, stack)
            for k in range(gamma):
                wk[k] = clamp_threshold(stack[0, k])
                damage[k] = wk[k] * (1.0 - X[Feature.OVERLAP, k])
        eval_rows(ops, args, consts, X, 0, gamma, stack)
        for k in range(gamma):
            tau[k] = clamp_threshold(stack[0, k])
            stats[Stat.SUM_TAU] += tau[k]
        for k in range(gamma):  # every depth's u is drawn, so untested rows have one too
            uu[k] = next_double(rng)
        if verify == VERIFY_BLOCK or n_rows < rows.shape[0]:
            block_masses(P, Q, X[Feature.TARGET_PROB], X[Feature.DRAFT_PROB], gamma, weights, masses)
        vweights, vmasses = weights, masses
        if relaxed:  # block verification against p~ (the records keep the lossless masses)
            relaxed_targets(P, Q, wk, drafts, gamma, Pt, tpt)
            block_masses(Pt, Q, tpt, X[Feature.DRAFT_PROB], gamma, rweights, rmasses)
            vweights, vmasses = rweights, rmasses
        accepted, analytic, tv_exp = _verify(mode, P, X[Feature.TARGET_PROB], r, tau, uu, vweights, vmasses, vs)
        tv_count = 0.0  # accepted with u >= r: damage of a lossy rule or of FLy (block verification has none)
        if verify != VERIFY_BLOCK:
            for k in range(accepted):
                if uu[k] >= r[k]:
                    tv_count += 1
        if relaxed:  # expected and realized damage: w_k (1 - overlap_k) over the emitted depths
            tv_exp = relaxed_damage(h, damage, gamma)
            for k in range(min(accepted + 1, gamma)):
                tv_count += damage[k]
        for k in range(gamma):
            if n_rows >= rows.shape[0]:
                break
            for f in range(N_FEATURES):
                rows[n_rows, f] = X[f, k]
            rows[n_rows, Record.R] = r[k]
            rows[n_rows, Record.U] = uu[k]
            rows[n_rows, Record.TAU] = tau[k]
            rows[n_rows, Record.ACCEPTED] = 1.0 if k < accepted else 0.0
            rows[n_rows, Record.TESTED] = 1.0 if k <= accepted else 0.0
            rows[n_rows, Record.BLOCK] = stats[Stat.CALLS]
            rows[n_rows, Record.RESIDUAL_MASS] = masses[k]
            if k + 1 < gamma:
                residual_phi(P[k + 1], Q[k + 1], rows[n_rows, Record.PHI:Record.PHI + PHI_POINTS])
            else:
                rows[n_rows, Record.PHI:Record.PHI + PHI_POINTS] = np.nan
            n_rows += 1
        if accepted < gamma:
            k = accepted
            if verify == VERIFY_BLOCK:  # norm(max(0, P_tau p - q)) at the first depth not kept (p~ if relaxed)
                weight = 1.0 if k == 0 else vweights[k - 1]
                block_residual(weight, Pt[k] if relaxed else P[k], Q[k], resid)
                y = sample_normalised(rng, resid)
                if y < 0:
                    y = sample_index(rng, P[k])
            else:
                for f in range(N_FEATURES):
                    feats[f] = X[f, k]
                y = _residual_sample(rng, programs.rule, P[k], Q[k], feats, XV, stack, resid, uses_rank)
            buf[window_len + t + k] = y
        if accepted == gamma:  # bonus token from p at position t + gamma
            pos = t + gamma
            _window(buf, window_len, pos, win)
            db, _ = target_at(model_seed, pos, win, dpath[pos], params, log_rank, resid, scratch, work)
            dpath[pos + 1] = db
            buf[window_len + pos] = sample_index(rng, resid)
        emitted = accepted + 1
        if n_blocks < blocks.shape[0]:
            blocks[n_blocks, BlockStat.TOKENS] = emitted
            blocks[n_blocks, BlockStat.ANALYTIC] = analytic
            blocks[n_blocks, BlockStat.TV_COUNT] = tv_count
            blocks[n_blocks, BlockStat.TV_EXPECTED] = tv_exp
        n_blocks += 1
        stats[Stat.CALLS] += 1.0
        stats[Stat.EMITTED] += emitted
        stats[Stat.ACCEPTED] += accepted
        stats[Stat.DRAFTED] += gamma
        stats[Stat.DRAFT_STEPS] += gamma
        stats[Stat.ANALYTIC] += analytic
        stats[Stat.TV_EXPECTED] += tv_exp
        stats[Stat.TV_COUNT] += tv_count
        t += emitted
    stats[Stat.LENGTH] += length
    stats[Stat.ROWS] = n_rows


@njit(cache=True)
def autoregressive_run(model, rng, buf, dpath, t0, length, window_len, greedy):
    """Plain autoregressive decoding: x_s ~ p(.|prefix) (argmax p if ``greedy``), one target call per token.

    ``model``, ``buf`` and ``dpath`` as in :func:`chain_run` (``buf`` needs window_len + t0 + length entries).
    Returns the number of target calls (= length).
    """
    model_seed, params, log_rank = model
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


@njit(cache=True, parallel=True)
def chain_batch(model_seed, params, log_rank, decode_seed, jobs, mode, rule, weight, out):
    """Independent chain decodes (jobs), in parallel; each job's output depends only on its inputs.

    ``model_seed``, ``params``, ``log_rank`` the fields of a :class:`evolve.sim.models.KernelModel` (Numba's
    parallel loop does not take a record holding a record; pass ``*model.kernel``), ``jobs`` a
    :class:`evolve.sim.models.Jobs`, ``mode`` a :class:`ChainMode`, ``rule`` and ``weight`` the two
    :class:`RuleProgram` of :class:`Programs`, ``out`` a :class:`BatchOut`. Job j decodes ``lengths[j]`` tokens from position
    ``t0s[j]`` after the context window ``windows[j]`` (int64 (J, K)) with d_{t0-1} = ``d_prevs[j]``, on the
    decoding stream (decode_seed, keys[j], STREAM_DECODE). Outputs per job:
    ``out.stats[j]`` (J, N_STATS), the first tokens ``out.tokens[j]`` (J, T; T may be 0),
    records ``out.rows[j]`` (J, R, N_RECORD) and ``out.blocks[j]`` (J, B, N_BLOCK_RECORD)
    (R, B may be 0); see :func:`chain_run`.
    """
    keys, windows, t0s, d_prevs, lengths = jobs
    stats_out, tokens_out, rows_out, blocks_out = out
    gamma = mode.gamma
    for j in prange(keys.shape[0]):
        K = windows.shape[1]
        t0 = t0s[j]
        buf, dpath = start_buffers(windows[j], t0, d_prevs[j], lengths[j] + gamma + 1)
        rng = seed_state(decode_seed, keys[j], STREAM_DECODE)
        chain_run(KernelModel(model_seed, params, log_rank), rng, buf, dpath, t0, lengths[j], K, mode,
                  Programs(rule, weight), ChainOut(stats_out[j], rows_out[j], blocks_out[j]))
        for k in range(min(tokens_out.shape[1], lengths[j])):
            tokens_out[j, k] = buf[K + t0 + k]


@njit(cache=True)
def autoregressive_batch(model, decode_seed, jobs, greedy, tokens_out):
    """Plain autoregressive decodes (``model`` and ``jobs`` as :func:`chain_batch`, stream STREAM_DECODE + 100).

    Returns int64 (J,) target calls; the first tokens go to ``tokens_out`` (J, T).
    """
    keys, windows, t0s, d_prevs, lengths = jobs
    calls = np.zeros(keys.shape[0], dtype=np.int64)
    for j in range(keys.shape[0]):
        K = windows.shape[1]
        t0 = t0s[j]
        buf, dpath = start_buffers(windows[j], t0, d_prevs[j], lengths[j])
        rng = seed_state(decode_seed, keys[j], STREAM_DECODE + 100)
        calls[j] = autoregressive_run(model, rng, buf, dpath, t0, lengths[j], K, greedy)
        for k in range(min(tokens_out.shape[1], lengths[j])):
            tokens_out[j, k] = buf[K + t0 + k]
    return calls

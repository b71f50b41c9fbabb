"""Verification-length policies from records: how many drafted tokens to send, scored in tokens per second.

A speculative step drafts tokens one at a time and then calls the target once on them. A
verification-length policy (kind ``verify-length``, :mod:`evolve.kinds.registry`) decides, before each
draft step k = 0, 1, ... (k tokens drafted so far), whether to draft one more: the step drafts token
k + 1 iff the program's value v_k > 0 (NaN: stop), up to ``gamma`` tokens. Only what is known before
the target is called may be read, the drafter's side of the last drafted token k:

* ``draft_prob``: q_k(x_k), its probability under the drafter (1 before the first draft);
* ``draft_top_prob``: the drafter's largest probability at that position (1 before the first draft;
  when the data has the column);
* ``draft_entropy``: the drafter's entropy there, in nats (0 before the first draft);
* ``draft_cumprob``: prod_{i<=k} q_i(x_i), the drafter's probability of the whole drafted prefix
  (1 before the first draft): the survival estimate of confidence-scheduled verification;
* ``draft_index``: k; ``position``: the text position of the token about to be drafted;
* ``lookup_len``, ``lookup_freq`` (n-gram prompt lookup only; when the data has the columns): the
  matched n-gram's length and the empirical frequency of the token about to be drafted
  (:mod:`evolve.engine.ngram`): a lookup draft is known before it is drafted, so these describe
  token k + 1 itself, as its record holds them.

The drafted tokens are verified by a *verifier* (:class:`LengthVerifier`), by default the standard
rule (lossless; Leviathan et al. 2023, arXiv 2211.17192), under which a block of L drafts emits, in
expectation over the target's test,

    tokens(L) = 1 + sum_{j=1..L} prod_{i<=j} min(1, p_i / q_i)

Any other verifier of a chain works the same way, from per-record prefix tables (:func:`prefix_tables`:
the expected tokens and damage of the block's first L records verified alone, for every L):

* a per-token acceptance rule tau (a threshold rule, lossy or not): tokens(L) = 1 + sum_{j<=L}
  prod_{i<=j} tau_i and damage(L) = sum_{j<=L} prod_{i<j} tau_i max(0, tau_j - min(1, p_j/q_j)), the
  evaluator's block accounting (:func:`evolve.eval.fastpath.kernels.reduce_block_counts`);
* block verification (Sun et al. 2024, arXiv 2403.10444; lossless) and relaxed block verification
  with a relaxation weight w (:mod:`evolve.eval.relaxed_block`): the block recursion stopped at L, whose
  last level accepts with h_L = P~_L, as a block of L drafted tokens would (damage 0 without w).

Target calls that drafted nothing leave no record (the n-gram drafter without a match, the last token of
a text): a harvested split knows how many there were (:attr:`evolve.eval.evaluator.EvalData.no_draft_calls`),
and every policy's figures include them as plain decoding steps (1 token, ``plain_token_s``), which no
policy can change.

A policy's ``tv_per_token`` is the sum of the blocks' damage over the sum of their expected tokens (0
for a lossless verifier). A block of L drafts costs seconds(L) = target_forward_s(L + 1) + L *
draft_token_s (:mod:`evolve.eval.costs`); L = 0 is a plain decoding step and costs plain_token_s.
Tokens per second = sum over blocks of tokens / sum of seconds (exact from the records of data
harvested with ``gamma_max`` drafts per block: every shorter prefix is scored from the same records;
the prefixes themselves are those the harvest's own decoding visited). That is call weighting, each
harvested block one call of the policy; under position weighting each block counts as
h / tokens calls, h the positions its harvest call covered (:func:`block_cover`).

A policy that reads the request so far (the history features, :mod:`evolve.kinds.verify_length.history`) is
scored by walking each text's blocks in order (:mod:`evolve.kinds.verify_length.eval_history`); every other
policy's values are computed for all records at once. The competitor policies and the bound are
:mod:`evolve.kinds.verify_length.eval_competitors`.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from numba import njit

from evolve.errors import InputError
from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.eval.evaluator import AcceptanceQualityFitness, EvalData, check_features, thresholds
from evolve.eval.relaxed_block import block_level
from evolve.eval.population import PopulationEvaluator
from evolve.eval.fastpath.lowering import NO_ROWS, derivable_pairs, lower
from evolve.eval.fastpath.scoring import packed_thresholds
from evolve.kinds.verify_length.eval_history import (add_call, block_end, choice_counts, history_rows,
                                                     outcome_tables, program_walk, reads_rows, text_starts)
from evolve.kinds.verify_length.history import START
from evolve.kinds.verify_length.settings import DEFAULT_WEIGHTING, STANDARD_VERIFIER, WEIGHTINGS, LengthVerifier
from evolve.gp.primitives import FEATURES, HISTORY_FEATURES, LOOKUP_FEATURES, SUFFIX_FEATURES
from evolve.verification.block import expected_damage_step
from evolve.verification.tokenwise_block import clamp_threshold, expectation_step, threshold_excess

#: Features a verification-length policy reads (:data:`evolve.kinds.verify_length.KIND`).
POLICY_FEATURES: tuple[str, ...] = ("draft_prob", "position", "draft_entropy", "draft_index", "draft_top_prob",
                                    "draft_cumprob") + LOOKUP_FEATURES + HISTORY_FEATURES + SUFFIX_FEATURES


@dataclass(frozen=True)
class LengthMetrics:
    """A verification-length policy's metrics on one split (per target call, expectations from the records).

    ``records``: records scored; ``blocks``: target calls counted (one per block and per call without a draft;
    under position weighting, :func:`block_cover`, the weighted count, rounded); ``tokens_per_call``: expected tokens
    per target call; ``seconds_per_call``: expected seconds per call under the cost file;
    ``tokens_per_second`` = their ratio; ``speedup`` = tokens per second times ``plain_token_s``;
    ``mean_verified``: drafted tokens verified per call; ``mean_drafted``: tokens drafted per call (more than
    verified only for ``survival_prefix``); ``tv_per_token``: expected damage per emitted token under the
    verifier (0 for a lossless one).
    """

    records: int
    blocks: int
    tokens_per_call: float
    seconds_per_call: float
    tokens_per_second: float
    speedup: float
    mean_verified: float
    mean_drafted: float
    tv_per_token: float = 0.0

    def to_dict(self) -> dict:
        """Plain dict of the fields."""
        return asdict(self)


def decision_data(data: EvalData) -> EvalData:
    """The decision rows of ``data``: row j of block b holds what is known before drafting the block's
    token j (see the module doc), and ``r`` the acceptance probability min(1, p/q) of that token.

    Returns an :class:`EvalData` with the same records order and texts, whose available features are
    :data:`POLICY_FEATURES` (``draft_top_prob`` and the lookup and suffix columns when ``data`` has them; such a
    column is the record's own value; the history features hold a text's start,
    :data:`evolve.kinds.verify_length.history.START`, which the walk of a policy reading them rewrites block
    by block) and the core features (the target's read as NaN: a policy may not read them,
    :data:`evolve.kinds.verify_length.KIND`).
    Raises: InputError when ``data`` has no ``draft_index``.
    """
    if data.depth is None:
        raise InputError(f"{data.source}: a verification-length policy needs column 'draft_index' (speculation "
                         f"blocks)")
    n = data.n
    depth = data.depth
    q = data.feature("draft_prob")
    top = data.feature("draft_top_prob") if "draft_top_prob" in data.available else None
    ent = data.feature("draft_entropy")
    start = depth == 0
    prev = np.roll(np.arange(n), 1)
    rows: dict[str, np.ndarray] = {}
    rows["draft_prob"] = np.where(start, 1.0, q[prev])
    rows["draft_entropy"] = np.where(start, 0.0, ent[prev])
    if top is not None:
        rows["draft_top_prob"] = np.where(start, 1.0, top[prev])
    rows["draft_cumprob"] = _cumprob_before(q, depth)
    rows["draft_index"] = depth.astype(np.float64)
    rows["position"] = data.feature("position")
    for f in LOOKUP_FEATURES + SUFFIX_FEATURES:  # the drafter's columns: known before the token is drafted
        if f in data.available:
            rows[f] = data.feature(f)
    for f, value in zip(HISTORY_FEATURES, START):  # a text's start; a history policy's walk rewrites them
        rows[f] = np.full(n, value)
    available = [f for f in FEATURES if f in rows or f in ("target_prob", "target_entropy", "top_token_match")]
    X = np.stack([rows.get(f, np.full(n, np.nan)) for f in available])
    return EvalData(X, data.r, data.u, data.b, tuple(available), source=data.source, split=data.split,
                    bounds=data.bounds, block_length=data.block_length, no_draft_calls=data.no_draft_calls,
                    text_runs=data.text_runs)


@njit(cache=True)
def _cumprob_before(q: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """prod of ``q`` over the block's earlier records (1 at a block's first record), float64 (n,)."""
    out = np.empty(q.size)
    acc = 1.0
    for i in range(q.size):
        if depth[i] == 0:
            acc = 1.0
        out[i] = acc
        acc *= q[i]
    return out


@njit(cache=True)
def threshold_prefix_tables(tau, r, depth, tok, dmg):
    """Prefix tables of a per-token verifier: on the record at depth d (L = d + 1 records of its block),
    ``tok`` = 1 + sum_{j<=L} prod_{i<=j} tau_i and ``dmg`` = sum_{j<=L} prod_{i<j} tau_i max(0, tau_j - r_j).

    Args: ``tau`` float64 (n,) thresholds (NaN/inf -> 0, clamped to [0, 1]), ``r`` float64 (n,) min(1, p/q),
    ``depth`` float64 (n,) draft_index; ``tok``, ``dmg`` float64 (n,) written. Rows before the first block
    start get tok 1, dmg 0. The recursion is :func:`evolve.verification.tokenwise_block.expectation_step`.
    """
    tokens, damage, reach = 1.0, 0.0, 1.0
    for i in range(tau.size):
        if depth[i] == 0.0:
            tokens, damage, reach = 1.0, 0.0, 1.0
        t = clamp_threshold(tau[i])
        reach, tokens, damage = expectation_step(reach, tokens, damage, t, threshold_excess(t, r[i]))
        tok[i] = tokens
        dmg[i] = damage


@njit(cache=True)
def block_prefix_tables(w, ratio, depth, overlap, mass, phi, tok, dmg):
    """Prefix tables of (relaxed) block verification: on the record at depth d, the expected tokens 1 + E[tau]
    and damage of the block's first L = d + 1 records verified as a block of L drafts (h_L = P~_L), by the
    recursion of :func:`evolve.eval.relaxed_block.reduce_relaxed` (w = 0 everywhere: lossless block
    verification, damage 0).

    Args: ``w`` float64 (n,) relaxation weights (NaN/inf -> 0, clamped to [0, 1]); ``ratio`` p(x)/q(x),
    ``depth``, ``overlap``, ``mass`` (block_residual_mass) float64 (n,); ``phi`` float64 (n, K)
    (block_residual_phi; any (n, 1) array when w is 0 everywhere: it is then not read); ``tok``, ``dmg``
    float64 (n,) written.
    """
    e_tau, f, cum, pt, pl, prev = 0.0, 0.0, 0.0, 1.0, 1.0, -1
    for row in range(w.size):
        d = depth[row] if prev >= 0 else 0.0  # rows before the first block start one
        wj = w[row]
        if not (abs(wj) < np.inf):
            wj = 0.0
        wj = min(max(wj, 0.0), 1.0)
        back = prev if d > 0.0 else row
        e_tau, f, cum, pt, pl = block_level(d, wj, overlap[row], ratio[row], phi[back], mass[back],
                                            (e_tau, f, cum, pt, pl))
        prev = row
        level = d + 1.0
        # 1 + A_L, h_L = P~_L, summed as (1 + L P~) + (1 - P~) A (not 1 + expected_accepted_step: other bits)
        tok[row] = 1.0 + level * pt + (1.0 - pt) * e_tau
        dmg[row] = expected_damage_step(f, cum, pt)


@njit(cache=True)
def length_counts(v, tok, dmg, depth, gamma, forward, draft_s, cover, out):
    """Per-block reduction of policy values ``v`` float64 (n,) (draft token j of a block iff v_0..v_j > 0).

    ``tok``, ``dmg`` float64 (n,) the verifier's prefix tables (:func:`prefix_tables`), ``depth`` float64
    (n,) draft_index; ``forward`` float64 (gamma + 1,) seconds of the target's call verifying 0..gamma drafts;
    ``draft_s`` seconds per drafted token; ``cover`` float64 (n,) the block weights of :func:`block_cover`.
    Adds to ``out`` float64 (:data:`N_LENGTH_COUNTS`,): calls, sum of expected tokens, sum of seconds, sum of
    verified drafts, sum of drafted tokens, sum of expected damage (each block's call counted ``cover / tokens``
    times, once under call weighting).
    """
    i = 0
    while i < v.size:
        j = block_end(depth, i)
        g = min(j - i, gamma)
        L = 0
        while L < g and v[i + L] > 0.0:
            L += 1
        add_call(tok, dmg, i, L, L, forward, draft_s, cover, out)
        i = j


def block_cover(data: EvalData, weighting: str = DEFAULT_WEIGHTING) -> np.ndarray:
    """The block weights of a weighting (:data:`WEIGHTINGS`): float64 (n,), at each block's first record.

    ``call`` (zeros): a policy's tokens per second is sum of its calls' expected tokens / sum of their seconds,
    one call per harvested block, as if the states the harvest started its calls in were the states any policy
    starts its calls in. ``position``: a block stands for the positions of the text its harvest call covered,
    h = 1 + sum_j prod_(i<=j) min(1, p_i/q_i) over all its records (the standard rule's expected tokens, the
    harvest's own verification), and a policy's call there costs seconds / tokens per position, so tokens per
    second = sum h / sum h * seconds / tokens: the policy's calls are counted h / tokens times. The two agree
    exactly for the harvest's own draft length verified by the standard rule; on real texts, where a stretch that is easy to draft (a copied
    passage) stays easy, a policy that verifies fewer tokens per call makes more calls there than the harvest
    did, which only the second counts (docs/results/speed.md measures both against live decoding).
    Raises: InputError (param ``length_weighting``) for an unknown weighting.
    """
    if weighting not in WEIGHTINGS:
        raise InputError(f"unknown block weighting {weighting!r} (choose from {', '.join(WEIGHTINGS)})",
                         param="length_weighting")
    cover = np.zeros(data.n)
    if weighting == "position" and data.n:
        depth = data.depth.astype(np.float64)
        tok, dmg = np.empty(data.n), np.empty(data.n)
        threshold_prefix_tables(data.r, data.r, depth, tok, dmg)  # the standard rule over each whole block
        starts = np.flatnonzero(depth == 0)
        cover[starts] = tok[np.append(starts[1:], data.n) - 1]
    return cover


#: Length of the counts record of :func:`length_counts`.
N_LENGTH_COUNTS = 6


def add_no_draft_calls(out: np.ndarray, calls: int, forward: np.ndarray) -> np.ndarray:
    """Add ``calls`` target calls without a draft (no record: a plain decoding step each, 1 token,
    ``forward[0]`` seconds) to the counts ``out`` of :func:`length_counts`; returns ``out``."""
    out[0] += calls
    out[1] += calls
    out[2] += calls * forward[0]
    return out


def prefix_tables(data: EvalData, verifier: LengthVerifier = STANDARD_VERIFIER) -> tuple[np.ndarray, np.ndarray]:
    """The verifier's prefix tables on the records of ``data`` (tok, dmg float64 (n,); see
    :func:`threshold_prefix_tables`, :func:`block_prefix_tables`).

    Raises: InputError when block verification needs a column the split lacks (``block_residual_mass``,
    and ``block_residual_phi`` for a relaxation), or the rule reads a feature the split lacks.
    """
    n = data.n
    tok, dmg = np.empty(n), np.empty(n)
    if not verifier.block:
        tau = data.r if verifier.rule is None else np.ascontiguousarray(thresholds(verifier.rule, data),
                                                                          dtype=np.float64)
        threshold_prefix_tables(tau, data.r, data.depth.astype(np.float64), tok, dmg)
        return tok, dmg
    from evolve.eval.relaxed_block import relaxed_of
    rd = relaxed_of(data)
    if verifier.rule is None:
        w, phi = np.zeros(n), np.zeros((n, 1))
    else:
        w, phi = np.ascontiguousarray(thresholds(verifier.rule, data), dtype=np.float64), rd.phi
    block_prefix_tables(w, rd.ratio, rd.depth, rd.overlap, rd.mass, phi, tok, dmg)
    return tok, dmg


def forward_table(costs: Costs, gamma: int) -> np.ndarray:
    """float64 (gamma + 1,): seconds of the target's call verifying 0..gamma drafted tokens
    (:meth:`evolve.eval.costs.Costs.verify_seconds`: a plain decoding step for 0)."""
    return np.array([costs.verify_seconds(t) for t in range(gamma + 1)])


def metrics_from_length_counts(c: np.ndarray, n: int, costs: Costs) -> LengthMetrics:
    """:class:`LengthMetrics` from the counts of :func:`length_counts` over ``n`` records."""
    calls = float(c[0])
    if not calls > 0.0:
        return LengthMetrics(n, 0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)
    tpc, spc = c[1] / calls, c[2] / calls
    tps = c[1] / c[2]
    return LengthMetrics(n, int(round(calls)), tpc, spc, tps, tps * costs.plain_token_s, c[3] / calls, c[4] / calls,
                         c[5] / c[1])


def policy_metrics(values: np.ndarray, data: EvalData, gamma: int, costs: Costs = DEFAULT_COSTS,
                   verifier: LengthVerifier = STANDARD_VERIFIER,
                   tables: tuple[np.ndarray, np.ndarray] | None = None, weighting: str = DEFAULT_WEIGHTING,
                   cover: np.ndarray | None = None) -> LengthMetrics:
    """Metrics of policy values ``values`` float64 (n,) on the records of ``data`` (an EvalData with draft_index),
    the drafts verified by ``verifier`` (``tables``: its :func:`prefix_tables` on ``data``, when known), the
    blocks weighted by ``weighting`` (``cover``: its :func:`block_cover` on ``data``, when known)."""
    tok, dmg = tables if tables is not None else prefix_tables(data, verifier)
    out = np.zeros(N_LENGTH_COUNTS)
    forward = forward_table(costs, gamma)
    length_counts(np.ascontiguousarray(values, dtype=np.float64), tok, dmg, data.depth.astype(np.float64), int(gamma),
                  forward, float(costs.draft_token_s), block_cover(data, weighting) if cover is None else cover, out)
    return metrics_from_length_counts(add_no_draft_calls(out, data.no_draft_calls, forward), data.n, costs)


def length_choices(values: np.ndarray, depth: np.ndarray, gamma: int) -> np.ndarray:
    """int64 (blocks,): the drafts policy values ``values`` float64 (n,) verify at each block (the blocks of
    ``depth``, in order), as :func:`length_counts` chooses them."""
    starts = np.flatnonzero(depth == 0)
    ends = np.append(starts[1:], depth.size)
    stop = ~(values > 0.0)
    out = np.empty(starts.size, dtype=np.int64)
    for b, (i, j) in enumerate(zip(starts, ends)):
        g = min(j - i, gamma)
        hit = np.flatnonzero(stop[i:i + g])
        out[b] = hit[0] if hit.size else g
    return out


def fixed_gamma_values(data: EvalData, length: int) -> np.ndarray:
    """Policy values of the fixed draft length ``length`` (draft while draft_index < length)."""
    return np.where(data.depth < length, 1.0, -1.0)


class LengthPopulationEvaluator(PopulationEvaluator):
    """A :class:`evolve.eval.population.PopulationEvaluator` whose individuals are verification-length
    policies: each program runs on the split's decision rows (:func:`decision_data`), and its values are
    reduced by :func:`length_counts` under the cost model ``costs``, the drafts verified by ``verifier``
    (:class:`LengthVerifier`; its prefix tables are computed once), the blocks weighted by ``weighting``
    (:func:`block_cover`); a program reading a history feature walks each text's blocks in order
    (:func:`evolve.kinds.verify_length.eval_history.program_walk`; its history rows are never derived rows). Same
    caching and statistics. :meth:`choices` gives each block's verified drafts.

    Raises (constructor): InputError for a missing gamma or a split without draft_index; (evaluate)
    InputError for a program reading a feature the policy may not read.
    """

    def __init__(self, data: EvalData, fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(),
                 gamma: int | None = None, cache_size: int = 0, costs: Costs = DEFAULT_COSTS,
                 verifier: LengthVerifier | None = None, weighting: str = DEFAULT_WEIGHTING, **kw):
        if gamma is None:
            raise InputError("gamma (the longest verification) is required by a verification-length policy")
        super().__init__(decision_data(data), fitness, gamma=gamma, cache_size=cache_size, **kw)
        self.costs = costs
        self.verifier = verifier or STANDARD_VERIFIER
        self._forward = forward_table(costs, self._gamma)
        self._tok, self._dmg = prefix_tables(data, self.verifier)
        self._depth = self.data.depth.astype(np.float64)
        self.weighting = weighting
        self._cover = block_cover(data, weighting)
        self._history = history_rows(self.data)
        self._starts = text_starts(self.data)
        self._outcomes = outcome_tables(data, self.verifier)

    def _check(self, program) -> None:
        from evolve.kinds.verify_length import KIND
        KIND.check_features(program.features, "policy")
        check_features(program, self.data, "policy")

    def _derivable(self, pairs):
        """The (opcode, feature) pairs worth a derived row: none of a history feature (the walk rewrites them)."""
        history = {FEATURES.index(f) for f in HISTORY_FEATURES}
        return {(op, f) for op, f in pairs if f not in history}

    def _counts(self, packed, D, lowered=()):
        out = np.zeros((len(lowered), N_LENGTH_COUNTS))
        for i, lo in enumerate(lowered):
            self._run(lo, D, out[i], np.zeros(0, dtype=np.int64))
            add_no_draft_calls(out[i], self.data.no_draft_calls, self._forward)
        return out

    def _run(self, lo, D, out: np.ndarray, choices: np.ndarray) -> None:
        """Add the calls of one lowered program to ``out`` (and each block's verified drafts to ``choices``)."""
        draft_s = float(self.costs.draft_token_s)
        if reads_rows(lo, self._history):
            program_walk((lo.code, lo.consts, lo.n_regs, lo.result, lo.rows), self.data.X, NO_ROWS if D is None else D,
                         (self._history, self._depth, self._starts), (*self._outcomes, self._tok, self._dmg),
                         (self._gamma, self._forward, draft_s, self._cover), out, choices)
            return
        v = packed_thresholds(lo, self.data.X, self.data.bounds, D)
        if choices.size:
            choices[:] = length_choices(v, self._depth, self._gamma)
        length_counts(v, self._tok, self._dmg, self._depth, self._gamma, self._forward, draft_s, self._cover, out)

    def choices(self, program) -> np.ndarray:
        """int64 (blocks,): the drafts the policy ``program`` (a :class:`evolve.gp.compiler.Program`) verifies at
        every block of the split, in order. Raises: InputError as :meth:`evaluate`."""
        self._check(program)
        pairs = derivable_pairs(program.ops, program.args) if self.derive else set()
        D, derived = self.data.derived_rows(self._derivable(pairs)) if pairs else (None, None)
        lo = lower(program.ops, program.args, program.consts, self.data.feature_rows, derived)
        found = np.zeros(int(np.count_nonzero(self._depth == 0)), dtype=np.int64)
        self._run(lo, D, np.zeros(N_LENGTH_COUNTS), found)
        return found

    def block_counts(self, program) -> np.ndarray:
        """float64 (blocks, :data:`N_LENGTH_COUNTS`): each block's call under the policy ``program`` (its
        :meth:`choices`), counted as :func:`length_counts` counts it (the calls without a record left out)."""
        verified = self.choices(program)
        out = np.zeros((verified.size, N_LENGTH_COUNTS))
        choice_counts(verified, verified, self._depth, self._tok, self._dmg, self._forward,
                      float(self.costs.draft_token_s), self._cover, out)
        return out

    def _metrics(self, counts):
        return metrics_from_length_counts(counts, self.data.n, self.costs)


__all__ = ["POLICY_FEATURES", "LengthMetrics", "N_LENGTH_COUNTS", "add_no_draft_calls", "prefix_tables",
           "threshold_prefix_tables", "block_prefix_tables", "decision_data", "length_counts", "length_choices",
           "block_cover", "forward_table", "metrics_from_length_counts", "policy_metrics", "fixed_gamma_values",
           "LengthPopulationEvaluator"]

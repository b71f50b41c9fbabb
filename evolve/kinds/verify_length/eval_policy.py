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

Competitors, each scored by the same kernel (:func:`competitors`):

* ``best_fixed_gamma``: the fixed draft length (0..gamma) with the most tokens per second (picked on
  the split given to :func:`competitors`, e.g. valid);
* ``confidence_threshold``: stop when the drafter's top probability of the last drafted token is
  below h (SpecDec++, Huang et al. 2024, arXiv 2405.19715, stops on a predicted rejection
  probability; DFlash's confidence variant in vLLM uses the draft's top probability), h tuned;
* ``survival_prefix``: draft ``gamma`` tokens, then verify the prefix L that maximises expected
  tokens per second with the cumulative product of the drafter's probabilities as the survival
  estimate (confidence-scheduled verification of DSpark, Cheng et al. 2026, arXiv 2607.05147).

And one bound, not a policy: ``length_oracle`` (:func:`length_oracle`), the most tokens per second any
per-block choice of lengths gives when each block's outcome is known (it reads the target); a policy's
distance to it is what better features could still win, and where it equals plain decoding no policy
can speed decoding up.
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
from evolve.eval.fastpath.scoring import packed_thresholds
from evolve.kinds.verify_length.settings import DEFAULT_WEIGHTING, STANDARD_VERIFIER, WEIGHTINGS, LengthVerifier
from evolve.gp.primitives import FEATURES, LOOKUP_FEATURES
from evolve.verification.block import expected_damage_step
from heuristics.length_policies import CONFIDENCE_GRID
from evolve.verification.tokenwise_block import clamp_threshold, expectation_step, threshold_excess

#: Features a verification-length policy reads (:data:`evolve.kinds.verify_length.KIND`).
POLICY_FEATURES: tuple[str, ...] = ("draft_prob", "position", "draft_entropy", "draft_index", "draft_top_prob",
                                    "draft_cumprob") + LOOKUP_FEATURES


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

    Returns an :class:`EvalData` with the same records order, whose available features are
    :data:`POLICY_FEATURES` (``draft_top_prob`` and the lookup columns when ``data`` has them; a lookup
    column is the record's own value) and the core features (the
    target's read as NaN: a policy may not read them, :data:`evolve.kinds.verify_length.KIND`).
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
    for f in LOOKUP_FEATURES:
        if f in data.available:
            rows[f] = data.feature(f)
    available = [f for f in FEATURES if f in rows or f in ("target_prob", "target_entropy", "top_token_match")]
    X = np.stack([rows.get(f, np.full(n, np.nan)) for f in available])
    return EvalData(X, data.r, data.u, data.b, tuple(available), source=data.source, split=data.split,
                    bounds=data.bounds, block_length=data.block_length, no_draft_calls=data.no_draft_calls)


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
def _block_end(depth, i):
    """Index one past the speculation block starting at record ``i`` (the next draft_index 0, or the end)."""
    j = i + 1
    while j < depth.size and depth[j] != 0:
        j += 1
    return j


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
def _add_call(tok, dmg, i, verified, drafted, forward, draft_s, cover, out):
    """Add one call that verifies the block's first ``verified`` drafts (starting at record ``i``) and drafted
    ``drafted`` tokens, weighted by ``cover[i] / tokens`` calls (:func:`block_cover`; one call where
    ``cover[i]`` <= 0)."""
    tokens = tok[i + verified - 1] if verified > 0 else 1.0
    k = cover[i] / tokens if cover[i] > 0.0 else 1.0
    out[0] += k
    out[1] += k * tokens
    if verified > 0:
        out[5] += k * dmg[i + verified - 1]
    out[2] += k * (forward[verified] + drafted * draft_s)
    out[3] += k * verified
    out[4] += k * drafted


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
        j = _block_end(depth, i)
        g = min(j - i, gamma)
        L = 0
        while L < g and v[i + L] > 0.0:
            L += 1
        _add_call(tok, dmg, i, L, L, forward, draft_s, cover, out)
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


@njit(cache=True)
def survival_counts(q, tok, dmg, depth, gamma, forward, draft_s, cover, out):
    """The ``survival_prefix`` competitor: draft ``gamma`` tokens (or the block's rows), then verify the prefix
    L maximising (1 + sum_{k<=L} S_k) / (forward[L] + drafted * draft_s), S_k = prod_{i<=k} q_i. Adds to ``out`` as
    :func:`length_counts`."""
    i = 0
    while i < q.size:
        j = _block_end(depth, i)
        g = min(j - i, gamma)
        best_L, best, est, surv = 0, 1.0 / (forward[0] + g * draft_s), 1.0, 1.0
        for k in range(g):
            surv *= q[i + k]
            est += surv
            value = est / (forward[k + 1] + g * draft_s)
            if value > best:
                best, best_L = value, k + 1
        _add_call(tok, dmg, i, best_L, g, forward, draft_s, cover, out)
        i = j


@njit(cache=True)
def oracle_counts(tok, dmg, depth, gamma, forward, draft_s, cover, lam, out):
    """The ``length_oracle`` bound at rate ``lam`` (tokens per second): every block verifies the prefix L
    (0..gamma) maximising tokens(L) - lam * seconds(L), its expected tokens known; under position weighting
    (``cover`` > 0) the one maximising tokens(L) / seconds(L), whatever ``lam`` (:func:`length_oracle`). Adds
    to ``out`` as :func:`length_counts`."""
    i = 0
    while i < depth.size:
        j = _block_end(depth, i)
        g = min(j - i, gamma)
        per_position = cover[i] > 0.0
        best_L = 0
        best = 1.0 / forward[0] if per_position else 1.0 - lam * forward[0]
        for L in range(1, g + 1):
            s = forward[L] + L * draft_s
            value = tok[i + L - 1] / s if per_position else tok[i + L - 1] - lam * s
            if value > best:
                best, best_L = value, L
        _add_call(tok, dmg, i, best_L, best_L, forward, draft_s, cover, out)
        i = j


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


def fixed_gamma_values(data: EvalData, length: int) -> np.ndarray:
    """Policy values of the fixed draft length ``length`` (draft while draft_index < length)."""
    return np.where(data.depth < length, 1.0, -1.0)


def competitors(data: EvalData, gamma: int, costs: Costs = DEFAULT_COSTS, tuned_on: EvalData | None = None,
                verifier: LengthVerifier = STANDARD_VERIFIER,
                score=None, weighting: str = DEFAULT_WEIGHTING) -> dict[str, tuple[str, LengthMetrics]]:
    """The competitors of the module doc on ``data``, their drafts verified by ``verifier``, the blocks weighted
    by ``weighting`` (:func:`block_cover`): {name: (setting, metrics)}.

    ``best_fixed_gamma`` and ``confidence_threshold`` pick their setting on ``tuned_on`` (default
    ``data``: pass the valid split to score the test split honestly) by ``score(metrics)`` (default: tokens
    per second; a run's objective for a lossy verifier). ``confidence_threshold`` reads ``draft_top_prob``
    when the data has it, else ``draft_prob``.
    """
    tune = tuned_on if tuned_on is not None else data
    score = score or (lambda m: m.tokens_per_second)
    tables = {id(d): prefix_tables(d, verifier) for d in (tune, data)}
    covers = {id(d): block_cover(d, weighting) for d in (tune, data)}

    def fixed(d: EvalData, g: int) -> LengthMetrics:
        return policy_metrics(fixed_gamma_values(d, g), d, gamma, costs, verifier, tables[id(d)], cover=covers[id(d)])

    g_best = max(range(gamma + 1), key=lambda g: (score(fixed(tune, g)), -g))
    out = {"best_fixed_gamma": (f"gamma={g_best}", fixed(data, g_best))}

    decisions = {id(d): decision_data(d) for d in (tune, data)}

    def confidence(d: EvalData, h: float) -> LengthMetrics:
        dd = decisions[id(d)]
        col = "draft_top_prob" if "draft_top_prob" in dd.available else "draft_prob"
        return policy_metrics(dd.feature(col) - h, dd, gamma, costs, verifier, tables[id(d)], cover=covers[id(d)])

    h_best = max(CONFIDENCE_GRID, key=lambda h: (score(confidence(tune, h)), -h))
    out["confidence_threshold"] = (f"h={h_best:g}", confidence(data, h_best))
    c = np.zeros(N_LENGTH_COUNTS)
    tok, dmg = tables[id(data)]
    forward = forward_table(costs, gamma)
    survival_counts(data.feature("draft_prob"), tok, dmg, data.depth.astype(np.float64), int(gamma), forward,
                    float(costs.draft_token_s), covers[id(data)], c)
    out["survival_prefix"] = ("", metrics_from_length_counts(add_no_draft_calls(c, data.no_draft_calls, forward),
                                                             data.n, costs))
    out["length_oracle"] = ("bound", length_oracle(data, gamma, costs, verifier, tables[id(data)], weighting))
    return out


def length_oracle(data: EvalData, gamma: int, costs: Costs = DEFAULT_COSTS,
                  verifier: LengthVerifier = STANDARD_VERIFIER,
                  tables: tuple[np.ndarray, np.ndarray] | None = None, weighting: str = DEFAULT_WEIGHTING) -> LengthMetrics:
    """An upper bound, not a policy: the most tokens per second any choice of verification lengths (0..gamma per
    block, chosen knowing each block's expected tokens, i.e. reading the target) gives on ``data`` under ``costs``.

    Maximises (sum of tokens) / (sum of seconds) over per-block lengths exactly by Dinkelbach's iteration
    (Dinkelbach 1967): at rate lam each block takes the length maximising tokens - lam * seconds
    (:func:`oracle_counts`), lam becomes the resulting ratio, until it stops rising (finitely many steps). No
    policy that reads only what is known before the target is called (:data:`POLICY_FEATURES`) can exceed it,
    so a policy's distance to it is the room left for better features; the drafting cost is charged only for the
    verified drafts, as for a policy. TV is not constrained (for a lossy verifier, the bound of the unconstrained
    problem). Under position weighting (:func:`block_cover`) the ratio is sum h / sum h * seconds / tokens, so each
    block simply takes the length with the most tokens per second.
    """
    tok, dmg = tables if tables is not None else prefix_tables(data, verifier)
    forward = forward_table(costs, gamma)
    depth = data.depth.astype(np.float64)
    cover = block_cover(data, weighting)
    lam, best = 1.0 / forward[0], None
    for _ in range(100):
        out = np.zeros(N_LENGTH_COUNTS)
        oracle_counts(tok, dmg, depth, int(gamma), forward, float(costs.draft_token_s), cover, lam, out)
        add_no_draft_calls(out, data.no_draft_calls, forward)
        if best is None or out[1] * best[2] > best[1] * out[2]:
            best = out
        if not out[1] / out[2] > lam * (1.0 + 1e-12):
            break
        lam = out[1] / out[2]
    return metrics_from_length_counts(best, data.n, costs)


class LengthPopulationEvaluator(PopulationEvaluator):
    """A :class:`evolve.eval.population.PopulationEvaluator` whose individuals are verification-length
    policies: each program runs on the split's decision rows (:func:`decision_data`), and its values are
    reduced by :func:`length_counts` under the cost model ``costs``, the drafts verified by ``verifier``
    (:class:`LengthVerifier`; its prefix tables are computed once), the blocks weighted by ``weighting``
    (:func:`block_cover`). Same caching and statistics.

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

    def _check(self, program) -> None:
        from evolve.kinds.verify_length import KIND
        KIND.check_features(program.features, "policy")
        check_features(program, self.data, "policy")

    def _counts(self, packed, D, lowered=()):
        out = np.zeros((len(lowered), N_LENGTH_COUNTS))
        for i, lo in enumerate(lowered):
            v = packed_thresholds(lo, self.data.X, self.data.bounds, D)
            length_counts(v, self._tok, self._dmg, self._depth, self._gamma, self._forward,
                          float(self.costs.draft_token_s), self._cover, out[i])
            add_no_draft_calls(out[i], self.data.no_draft_calls, self._forward)
        return out

    def _metrics(self, counts):
        return metrics_from_length_counts(counts, self.data.n, self.costs)


__all__ = ["POLICY_FEATURES", "LengthMetrics",
           "N_LENGTH_COUNTS", "add_no_draft_calls", "prefix_tables", "threshold_prefix_tables", "block_prefix_tables", "decision_data",
           "length_counts", "survival_counts", "oracle_counts", "length_oracle", "block_cover",
           "forward_table", "metrics_from_length_counts", "policy_metrics", "fixed_gamma_values", "competitors",
           "LengthPopulationEvaluator"]

"""Live speculative decoding on real models with any acceptance rule, and plain decoding to compare.

The models, the drafters, the KV cache, the sampling distributions and the random streams
are the harvester's (:mod:`evolve.harvest`: :func:`evolve.harvest.loop.build` loads them from
a :class:`evolve.harvest.config.HarvestConfig`); only the acceptance test differs. One block of
one text (:func:`live_block`), with p_d, q_d the target's and the drafter's distributions
(float64 (V,)) at depth d = 0..k-1 of the block:

1. the drafter proposes x_0..x_{k-1} (one uniform of the text's stream each);
2. the target scores the context and the drafts in one pass (p_0..p_k);
3. the rule's threshold of each drafted token, tau_d(x_d), is computed from the features of
   the record the harvester would write for it (:func:`candidate_features`: draft_prob =
   q_d(x), target_prob = p_d(x), position, draft_index d, the entropies, top probabilities,
   overlap, top_token_match of the two whole distributions and target_rank of x under p_d),
   by the evaluator (:func:`evolve.eval.evaluator.thresholds`; NaN or infinite -> 0, then
   clamped to [0, 1]);
4. x_d is accepted iff u_d < tau_d(x_d), left to right, with k fresh uniforms; at the first
   rejection n the next token is drawn from the residual norm(max(0, p_n - q_n tau_n)), tau_n
   evaluated for every token of the vocabulary at depth n (the residual that brings the output
   closest to p: a token v was already emitted with probability q_n(v) tau_n(v)); after k
   acceptances from p_k. One more uniform draws that token. The draws are in the harvester's
   order, so with the standard rule a text is the harvester's text.

Block verification (Sun et al. 2024, arXiv 2403.10444; :data:`BLOCK_VERIFICATION`) replaces steps 3
and 4 by a joint decision on the block (:func:`block_decision`, the simulator's kernels): with the
same k + 1 uniforms it keeps the first n drafts and draws the next token from its own residual;
it is lossless, so it adds no damage. Relaxed block verification (a :class:`BlockVerifier` with a
``relaxation`` rule, the weight w of a relaxation champion: :mod:`evolve.kinds.registry`) makes the same
decision against p~_d = (1 - w_d) p_d + w_d q_d at every drafted depth (w_d from the depth's
prefix-level features, :func:`relaxation_weights`; the bonus token after a full block from p_k);
its damage is the relaxed_block module's (:mod:`evolve.kinds.relaxation.eval_block`): the expected sum of
w_d TV(p_d, q_d) = w_d (1 - overlap_d) over the emitted depths, given the drafts
(:func:`relaxed_block_decision`).

A verification-length policy (:class:`LengthPolicy`, a rule of kind ``verify-length``) changes step 1:
before each draft step it decides, from the drafter's side of the last drafted token
(:func:`policy_features`, the features :func:`evolve.kinds.verify_length.eval_policy.decision_data` gives the
records), whether to draft one more token (:func:`policy_keep`; the drafter stops at once, so tokens
not sent are never drafted); a step with no draft is a plain decoding step. The drafts are then
verified by the policy's verifier (the standard rule, a per-token rule or block verification).
:class:`LiveCounts` keeps how many tokens each call verified, so the cost model predicts the same
calls' seconds (:meth:`LiveCounts.predicted_seconds`).

Damage (:class:`LiveCounts`): at every verified depth the exact total-variation damage
TV_d = sum_v max(0, q_d(v) tau_d(v) - p_d(v)), tau_d evaluated for all V tokens, is weighted
as the evaluator weights TV per emitted token (:mod:`evolve.eval.evaluator`, Leviathan et al.
2023, arXiv 2211.17192, section 3): tv_per_token = sum over blocks of sum_d prod_{i<d}
tau_i(x_i) TV_d, divided by the sum over target calls of the expected tokens 1 + sum_d
prod_{i<=d} tau_i(x_i). The evaluator's per-record term max(0, tau(x) - r(x)) has the
expectation TV_d over x ~ q_d; here the sum over the vocabulary replaces it. The time these
measurements take is kept out of the decoding time.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from evolve.errors import InputError
from evolve.engine.distributions import sample_index
from evolve.engine.onehot import OneHot, argmax_rows, densify, max_rows, overlap_rows, support, values_at
from evolve.engine.runner import BatchKV
from evolve.verification.block import block_accept, block_masses, block_residual_array, block_stops, \
    relaxed_damage, relaxed_target
from evolve.verification.tokenwise import residual_distribution, standard_threshold
from evolve.verification.tokenwise_block import block_expectation_tv
from evolve.eval.evaluator import EvalData, thresholds
from evolve.kinds.tree_shape.eval_shape import cost_tables
from evolve.kinds.verify_length.eval_policy import POLICY_FEATURES
from evolve.gp.primitives import CORE_FEATURES, FEATURES, LOOKUP_FEATURES
from heuristics.registry import get_rule

_ROW = {f: i for i, f in enumerate(FEATURES)}
#: Features :func:`candidate_features` computes (target_rank only when a rule reads it).
COMPUTED: tuple[str, ...] = CORE_FEATURES + ("draft_index", "draft_top_prob", "target_top_prob", "overlap",
                                             "target_rank")


def rule_features(rule) -> tuple[str, ...]:
    """Features a rule reads (an expression rule's terminals; the core ones plus declared extras for a
    function rule). Raises InputError for a feature live decoding cannot compute."""
    if rule.program is not None:
        needed = tuple(rule.program.features)
    else:
        needed = tuple(CORE_FEATURES) + tuple(rule.extra_columns)
    missing = [f for f in needed if f not in COMPUTED]
    if missing:
        raise InputError(f"rule '{rule.name}' reads '{missing[0]}', which live decoding does not compute "
                         f"(it computes {', '.join(COMPUTED)})")
    return needed


def candidate_features(p: np.ndarray, q: np.ndarray, p_ent: np.ndarray, q_ent: np.ndarray, start: int,
                       tokens: np.ndarray, rank: bool = False) -> np.ndarray:
    """Features of candidate tokens at each depth of a block, as the harvester's records hold them.

    Args: ``p``, ``q`` float64 (k, V) target and draft distributions at depths 0..k-1 (or
    :class:`evolve.engine.onehot.OneHot` rows: greedy decoding, a deterministic drafter);
    ``p_ent``, ``q_ent`` float64 (k,) their entropies (nats); ``start`` the position (index in
    the generated text) of depth 0; ``tokens`` int (k, m) the candidate ids of each depth;
    ``rank``: compute target_rank (the number of tokens with a larger p; else its row is 0).
    Returns: X float64 (len(FEATURES), k*m), column d*m + j for token ``tokens[d, j]``.
    """
    k, m = tokens.shape
    d = np.repeat(np.arange(k), m)
    x = tokens.reshape(-1)
    X = np.zeros((len(FEATURES), k * m))
    X[_ROW["draft_prob"]] = values_at(q, d, x)
    X[_ROW["target_prob"]] = values_at(p, d, x)
    X[_ROW["position"]] = start + d
    X[_ROW["draft_entropy"]] = q_ent[d]
    X[_ROW["target_entropy"]] = p_ent[d]
    X[_ROW["top_token_match"]] = (argmax_rows(q) == argmax_rows(p))[d]
    X[_ROW["draft_index"]] = d
    X[_ROW["draft_top_prob"]] = max_rows(q)[d]
    X[_ROW["target_top_prob"]] = max_rows(p)[d]
    X[_ROW["overlap"]] = np.clip(overlap_rows(p, q), 0.0, 1.0)[d]
    if rank and isinstance(p, OneHot):
        X[_ROW["target_rank"]] = (np.asarray(p.ids)[d] != x).astype(np.float64)
    elif rank:
        ordered = np.sort(p, axis=1)
        X[_ROW["target_rank"]] = np.concatenate(
            [p.shape[1] - np.searchsorted(ordered[i], p[i, tokens[i]], side="right") for i in range(k)])
    return X


def rule_thresholds(rule, X: np.ndarray, needed: Sequence[str]) -> np.ndarray:
    """Thresholds float64 (n,) of ``rule`` over feature columns ``X`` (len(FEATURES), n), by the evaluator.

    NaN or infinite thresholds become 0, then they are clamped to [0, 1] (the evaluator's semantics).
    """
    with np.errstate(all="ignore"):
        r = standard_threshold(X[_ROW["target_prob"]], X[_ROW["draft_prob"]])
    ones = np.ones(r.size)
    available = tuple(f for f in FEATURES if f != "target_rank" or "target_rank" in needed)
    raw = thresholds(rule, EvalData(X, r, ones, ones < r, available, source="live decoding"))
    return np.where(np.isfinite(raw), np.clip(raw, 0.0, 1.0), 0.0)


@dataclass
class LiveCounts:
    """Totals of live decoding with one rule (or plain decoding: no drafts, no damage).

    ``tokens`` emitted, ``target_calls`` target passes after the prefill, ``seconds`` decoding wall
    time (the prompt's prefill and the damage measurement excluded), ``expected_tokens`` and ``block_tv``
    the sums of the module doc's tokens-per-call and TV terms.
    """

    tokens: int = 0
    target_calls: int = 0
    seconds: float = 0.0
    expected_tokens: float = 0.0
    block_tv: float = 0.0
    tokens_sq: int = 0
    drafted: dict[int, int] = field(default_factory=dict)
    #: draft-tree calls (:mod:`evolve.live.trees`) by (nodes verified, nodes expanded at depth 0, 1, ...): count
    tree_calls: dict[tuple[int, ...], int] = field(default_factory=dict)

    def add(self, other: "LiveCounts") -> None:
        """Add ``other``'s totals to these."""
        for name in ("tokens", "target_calls", "seconds", "expected_tokens", "block_tv", "tokens_sq"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for k, n in other.drafted.items():
            self.drafted[k] = self.drafted.get(k, 0) + n
        for key, n in other.tree_calls.items():
            self.tree_calls[key] = self.tree_calls.get(key, 0) + n

    def add_call(self, emitted: int, expected: float | None = None, drafted: int = 0) -> None:
        """Count one target call that emitted ``emitted`` tokens (``expected`` of them in expectation;
        default ``emitted``) and verified ``drafted`` drafted tokens (it scored drafted + 1 new tokens)."""
        self.target_calls += 1
        self.tokens += emitted
        self.tokens_sq += emitted * emitted
        self.expected_tokens += float(emitted) if expected is None else expected
        self.drafted[drafted] = self.drafted.get(drafted, 0) + 1

    def add_tree_call(self, emitted: int, expected: float, expanded: Sequence[int], nodes: int) -> None:
        """Count one draft-tree call verifying ``nodes`` nodes, whose verified tree expands ``expanded[d]`` nodes
        at depth d (the root at depth 0), as :meth:`add_call` (its ``drafted`` = ``nodes``)."""
        self.add_call(emitted, expected, nodes)
        key = (nodes, *expanded)
        self.tree_calls[key] = self.tree_calls.get(key, 0) + 1

    def predicted_seconds(self, costs) -> float:
        """Seconds the cost model gives these calls: sum over calls of target_forward_s(k + 1) + k *
        draft_token_s, k the call's drafted tokens, and plain_token_s for a call without drafts
        (:meth:`evolve.eval.costs.Costs.step_seconds`; ``costs`` a :class:`evolve.eval.costs.Costs`); a draft-tree
        call is priced as the tree scorer prices its tree (:func:`tree_call_seconds`)."""
        chains = dict(self.drafted)
        for key, n in self.tree_calls.items():
            chains[key[0]] -= n
        return (sum(n * costs.step_seconds(k, k) for k, n in chains.items())
                + sum(n * tree_call_seconds(costs, key[0], key[1:]) for key, n in self.tree_calls.items()))

    @property
    def mean_drafted(self) -> float:
        """Drafted tokens verified per target call."""
        return sum(k * n for k, n in self.drafted.items()) / self.target_calls if self.target_calls else float("nan")

    @property
    def tokens_per_call(self) -> float:
        """Emitted tokens per target call."""
        return self.tokens / self.target_calls if self.target_calls else float("nan")

    @property
    def tokens_per_call_se(self) -> float:
        """Standard error of :attr:`tokens_per_call`, treating calls as independent (nan below 2 calls)."""
        n = self.target_calls
        if n < 2:
            return float("nan")
        mean = self.tokens / n
        var = max(self.tokens_sq / n - mean * mean, 0.0) * n / (n - 1)
        return math.sqrt(var / n)

    @property
    def expected_tokens_per_call(self) -> float:
        """Expected tokens per target call given the drafted tokens, 1 + sum_d prod_{i<=d} tau_i(x_i) per
        call averaged over calls (the evaluator's tokens per call on the live blocks; less noisy than
        :attr:`tokens_per_call`, which also samples the accept/reject draws)."""
        return self.expected_tokens / self.target_calls if self.target_calls else float("nan")

    @property
    def tokens_per_s(self) -> float:
        """Emitted tokens per second of decoding."""
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    @property
    def tv_per_token(self) -> float:
        """Reach-weighted exact TV per emitted token (module doc)."""
        return self.block_tv / self.expected_tokens if self.expected_tokens > 0 else 0.0


def tree_call_seconds(costs, nodes: int, expanded: Sequence[int]) -> float:
    """Seconds ``costs`` gives a draft-tree call verifying ``nodes`` nodes that expands ``expanded[d]`` nodes at depth d,
    as :func:`evolve.kinds.tree_shape.eval_shape.shape_counts` prices it: ``verify_seconds(nodes)`` plus one drafter
    pass per depth with an expansion, over its m nodes (:func:`evolve.kinds.tree_shape.eval_shape.cost_tables`)."""
    forward, draft = cost_tables(costs, nodes)
    seconds = forward[nodes]
    for m in expanded:
        if m > 0:
            seconds += draft[m]
    return float(seconds)


def _draft_and_score(engine, batch, k: int, keep=None):
    """Steps 1 and 2 of a block of row 0: the drafts x_0..x_{k-1} (fewer when ``keep``, a verification-length
    policy's :data:`evolve.engine.drafter_base.Keep`, stops drafting), their q (k, V) and entropies (k,), the
    target's p (k+1, V) and entropies (k+1,), and the context length before the block."""
    state, kv = batch.rows[0], batch.kv
    drafts, q, q_ent = engine.drafter.propose(engine, batch, [k], keep)[0]
    k, L = len(drafts), len(state.ctx)
    logits = engine.run(kv, [state.ctx[kv.lengths[0]:] + drafts], k + 1)
    p, p_ent = engine.distributions(logits[0, logits.shape[1] - k - 1:])
    return drafts, q, q_ent, p, p_ent, L


def _finish_block(engine, batch, drafts: list[int], n: int, nxt: int, L: int) -> list[int]:
    """Keep ``n`` drafts and the next token ``nxt`` (none after a full block ending in end-of-sequence):
    advance row 0's caches and context; returns the emitted tokens."""
    state, kv = batch.rows[0], batch.kv
    k = len(drafts)
    emitted = drafts[:n] if (k and n == k and drafts[-1] in engine.eos) else drafts[:n] + [nxt]
    kv.truncate(0, L + n)
    kv.compact()
    engine.drafter.commit(engine, batch, [L + n])
    state.ctx.extend(emitted)
    return emitted


def live_block(engine, batch, k: int, rule, needed: Sequence[str], counts: LiveCounts, keep=None) -> list[int]:
    """One speculation block of row 0 of ``batch`` with up to ``k`` drafts (the module doc's steps).

    Advances the row's context and caches and adds the block's call, tokens and damage terms to
    ``counts`` (the damage measurement's time is subtracted from ``counts.seconds``). ``keep``: a
    verification-length policy's decision to draft one more token (:func:`policy_keep`). Returns the
    emitted tokens.
    """
    state = batch.rows[0]
    drafts, q, q_ent, p, p_ent, L = _draft_and_score(engine, batch, k, keep)
    k = len(drafts)
    u, u_next = state.rng.random(k), state.rng.random()
    if k == 0:  # no draft (e.g. no n-gram match): the target's token alone, as plain decoding
        emitted = _finish_block(engine, batch, drafts, 0, sample_index(p[0], u_next), L)
        counts.add_call(len(emitted), 1.0)
        return emitted
    start, rank = L - state.prompt_len, "target_rank" in needed
    tau_x = rule_thresholds(rule, candidate_features(p[:k], q, p_ent[:k], q_ent, start,
                                                     np.asarray(drafts)[:, None], rank), needed)
    rejected = np.flatnonzero(u >= tau_x)
    n = int(rejected[0]) if rejected.size else k
    if n < k:
        nxt = sample_index(_rule_residual(rule, needed, p, q, p_ent, q_ent, start, n, rank), u_next)
    else:
        nxt = sample_index(p[k], u_next)
    emitted = _finish_block(engine, batch, drafts, n, nxt, L)
    t0 = time.perf_counter()
    expected = _add_damage(rule, needed, p[:k], q, p_ent[:k], q_ent, start, tau_x, counts)
    counts.seconds -= time.perf_counter() - t0
    counts.add_call(len(emitted), expected, k)
    return emitted


def _rule_residual(rule, needed, p, q, p_ent, q_ent, start: int, n: int, rank: bool):
    """The residual norm(max(0, p_n - q_n tau_n)) after a rejection at depth ``n``. tau_n is evaluated only
    on the support of q_n (elsewhere q_n tau_n = 0 whatever tau_n): the whole vocabulary for a dense
    drafter, one token for a one-hot one; the values are those of the evaluation over the vocabulary."""
    if isinstance(p, OneHot):
        return p[n]
    ids = support(q, n)
    tau = rule_thresholds(rule, candidate_features(p[n:n + 1], q[n:n + 1], p_ent[n:n + 1], q_ent[n:n + 1], start + n,
                                                   ids[None, :], rank), needed)
    scaled = np.zeros(p.shape[1])
    scaled[ids] = values_at(q, np.full(ids.size, n), ids) * tau
    return residual_distribution(p[n], scaled, 1.0)


@dataclass(frozen=True)
class BlockVerifier:
    """Block verification (Sun et al. 2024, arXiv 2403.10444) in place of a per-token rule
    (:func:`live_block_verified`).

    Without ``relaxation`` it is lossless block verification (``benchmark.py live --rule
    block_verification``); with ``relaxation``, an expression rule of kind ``relaxation``
    (:data:`evolve.kinds.relaxation.RELAXATION`: the weight w in [0, 1] of prefix-level features), each
    block is verified against p~_d = (1 - w_d) p_d + w_d q_d (relaxed block verification). ``name``
    labels the row.
    """

    name: str = "block_verification"
    relaxation: Any = None


#: The one instance :func:`speculative_text` recognises.
BLOCK_VERIFICATION = BlockVerifier()


def block_decision(p: np.ndarray, q: np.ndarray, drafts: Sequence[int],
                   eta: np.ndarray) -> tuple[int, np.ndarray, float]:
    """Block verification's decision on one block (Sun et al. 2024, arXiv 2403.10444).

    As the simulator's ``block`` verification (:mod:`evolve.verification.block`, whose Numba kernels
    it calls): block weights P_i = min(1, P_{i-1} p_i(x_i)/q_i(x_i)), residual masses, stopping
    probabilities h_i; it keeps the first n drafts, n the largest i (1-based) with eta_i <= h_i.
    Args: ``p`` float64 (k+1, V) and ``q`` float64 (k, V) the target's and the drafter's
    distributions at depths 0..k; ``drafts`` the k drafted ids; ``eta`` float64 (k,) uniforms.
    Returns (n, the unnormalised distribution (V,) of the next token: max(0, P_n p_n - q_n) at
    depth n (P_0 = 1), or p_k after a full block; the expected tokens of the call given the
    drafts, 1 + E[n]).
    """
    n, dist, expected, _ = _block_decision(p, q, drafts, eta)
    return n, dist, expected


def _block_decision(p, q, drafts, eta):
    """:func:`block_decision` and the stopping probabilities h float64 (k,)."""
    k = len(drafts)
    p, q = densify(p), densify(q)  # the simulator's kernels read dense rows (k + 1 rows: small)
    rows, x = np.arange(k), np.asarray(drafts)
    weights, masses, h = np.empty(k), np.empty(k), np.empty(k)
    block_masses(p[:k], q, p[rows, x], q[rows, x], k, weights, masses)
    expected = 1.0 + block_stops(weights, masses, k, h)
    n = int(block_accept(h, eta, k))
    if n == k:
        return n, p[k], expected, h
    residual = block_residual_array(1.0 if n == 0 else weights[n - 1], p[n], q[n])
    return n, (residual if residual.sum() > 0 else p[n]), expected, h


def relaxation_weights(rule, p: np.ndarray, q: np.ndarray, p_ent: np.ndarray, q_ent: np.ndarray, start: int,
                       drafts: Sequence[int], needed: Sequence[str] = ()) -> np.ndarray:
    """The relaxation weights w float64 (k,) in [0, 1] of a relaxation ``rule`` at depths 0..k-1 of a block.

    Args as :func:`candidate_features` (``p``, ``q`` float64 (k, V), entropies (k,) in nats, ``start``
    the position of depth 0, the k drafted ids); the rule reads prefix-level features only (a
    relaxation rule cannot read the drafted token's), computed as the harvester's records hold them.
    NaN or infinite weights become 0, then they are clamped to [0, 1] (as
    :mod:`evolve.kinds.relaxation.eval_block` scores them).
    """
    X = candidate_features(p, q, p_ent, q_ent, start, np.asarray(drafts)[:, None])
    return rule_thresholds(rule, X, needed)


def relaxed_block_decision(p: np.ndarray, q: np.ndarray, drafts: Sequence[int], eta: np.ndarray,
                           w: np.ndarray) -> tuple[int, np.ndarray, float, float]:
    """Relaxed block verification's decision on one block: :func:`block_decision` against the relaxed
    targets p~_d = (1 - w_d) p_d + w_d q_d at the drafted depths d = 0..k-1 and p_k itself for the
    bonus token (w = 0 there).

    Args: ``p`` float64 (k+1, V), ``q`` float64 (k, V), ``drafts`` the k drafted ids, ``eta`` float64
    (k,) uniforms, ``w`` float64 (k,) weights in [0, 1]. Returns (n, the unnormalised distribution of
    the next token, the expected tokens of the call 1 + E[n], the block's expected damage given the
    drafts: E[sum over the emitted depths d of w_d TV(p_d, q_d)], TV(p_d, q_d) = 1 - sum_v min(p_d,
    q_d), by :func:`evolve.verification.block.relaxed_damage`). With w = 0 everywhere it is exactly
    :func:`block_decision` with damage 0.
    """
    k = len(drafts)
    p, q = densify(p), densify(q)
    w = np.asarray(w, dtype=np.float64)
    target = np.concatenate([relaxed_target(p[:k], q, w), p[k:k + 1]])
    n, dist, expected, h = _block_decision(target, q, drafts, eta)
    damage = w * (1.0 - np.clip(np.minimum(p[:k], q).sum(axis=1), 0.0, 1.0))
    return n, dist, expected, float(relaxed_damage(h, damage, k))


def live_block_verified(engine, batch, k: int, counts: LiveCounts, verifier: BlockVerifier | None = None,
                        needed: Sequence[str] = (), keep=None) -> list[int]:
    """One block of row 0 verified jointly by block verification (:func:`block_decision`): k uniforms
    for the decision, one more to draw the next token; the call's expected tokens are 1 + E[n] given
    the drafts. Lossless (no damage added) unless ``verifier`` has a relaxation: then relaxed block
    verification (:func:`relaxed_block_decision`, weights by :func:`relaxation_weights` reading the
    features ``needed``) adds its expected damage. ``keep``: a verification-length policy's decision to draft one
    more token (:func:`policy_keep`). Returns the emitted tokens."""
    state = batch.rows[0]
    drafts, q, q_ent, p, p_ent, L = _draft_and_score(engine, batch, k, keep)
    eta, u_next = state.rng.random(len(drafts)), state.rng.random()
    if not drafts:  # no draft: the target's token alone
        emitted = _finish_block(engine, batch, drafts, 0, sample_index(p[0], u_next), L)
        counts.add_call(len(emitted), 1.0)
        return emitted
    relaxation = None if verifier is None else verifier.relaxation
    if relaxation is None:
        n, dist, expected = block_decision(p, q, drafts, eta)
    else:
        k = len(drafts)
        w = relaxation_weights(relaxation, p[:k], q, p_ent[:k], q_ent, L - state.prompt_len, drafts, needed)
        n, dist, expected, damage = relaxed_block_decision(p, q, drafts, eta, w)
        counts.block_tv += damage
    emitted = _finish_block(engine, batch, drafts, n, sample_index(dist, u_next), L)
    counts.add_call(len(emitted), expected, len(drafts))
    return emitted


@dataclass(frozen=True)
class LengthPolicy:
    """A verification-length policy (a rule of kind ``verify-length``, :data:`evolve.kinds.verify_length.VERIFY_LENGTH`)
    deciding live how many tokens to draft (:func:`policy_keep`); the drafts are verified by ``rule``: a
    threshold rule (per token), a :class:`BlockVerifier` (block verification, relaxed or not), or None (the
    standard rule, lossless). ``name`` labels the row."""

    name: str
    policy: Any
    rule: Any = None


def policy_features(probs: Sequence[float], tops: Sequence[float], entropies: Sequence[float],
                    start: int, lookahead: dict[str, float] | None = None) -> np.ndarray:
    """The decision features before drafting token k = len(probs) of a block, as
    :func:`evolve.kinds.verify_length.eval_policy.decision_data` builds them from records: float64
    (len(POLICY_AVAILABLE), 1), rows in :data:`POLICY_AVAILABLE` order (the target's NaN).

    ``probs``, ``tops``: q_i(x_i) and max q_i of the drafts so far (probabilities); ``entropies``: their
    drafter entropies (nats); ``start``: the text position of the block's first draft; ``lookahead``: the
    drafter's columns of token k, known before drafting it (prompt lookup's ``lookup_len``, ``lookup_freq``;
    :meth:`evolve.engine.drafter_base.Drafter.lookahead`), NaN where not given.
    """
    k = len(probs)
    values = {"draft_prob": probs[-1] if k else 1.0, "draft_top_prob": tops[-1] if k else 1.0,
              "draft_entropy": float(entropies[k - 1]) if k else 0.0,
              "draft_cumprob": float(np.prod(probs)) if k else 1.0, "draft_index": float(k),
              "position": float(start + k), **(lookahead or {})}
    return np.array([[values.get(f, np.nan)] for f in POLICY_AVAILABLE])


#: The features :func:`policy_features` gives, in :data:`evolve.gp.primitives.FEATURES` order.
POLICY_AVAILABLE: tuple[str, ...] = tuple(f for f in FEATURES if f in POLICY_FEATURES or f in CORE_FEATURES)


def policy_value(policy, X: np.ndarray) -> float:
    """The policy's value v on one decision (``X`` from :func:`policy_features`); NaN or infinite -> -1 (stop)."""
    one = np.ones(1)
    v = float(thresholds(policy, EvalData(X, one, one, one < one, POLICY_AVAILABLE, source="live decoding"))[0])
    return v if math.isfinite(v) else -1.0


def policy_keep(policy, start: int):
    """``keep(row, probs, tops, entropies, lookahead=None)`` for :meth:`evolve.engine.drafter_base.Drafter.propose`:
    draft one more token iff the policy's value on :func:`policy_features` is > 0 (the decision after each draft).
    Its attribute ``lookahead`` says whether the policy reads a drafter's lookahead columns (else a drafter need
    not compute them)."""
    def keep(_row, probs, tops, entropies, lookahead=None) -> bool:
        return policy_value(policy, policy_features(probs, tops, entropies, start, lookahead)) > 0.0
    keep.lookahead = any(f in LOOKUP_FEATURES for f in policy.program.features)
    return keep


def _add_damage(rule, needed, p, q, p_ent, q_ent, start, tau_x, counts: LiveCounts) -> float:
    """Add one block's reach-weighted exact TV (module doc) to ``counts``; returns its expected tokens."""
    k = len(q)
    tv = np.zeros(k)
    rank = "target_rank" in needed
    for d in range(k):  # q tau - p > 0 needs q > p (tau <= 1): tau_d is evaluated on those tokens only
        pd_, qd = densify(p[d]), densify(q[d])
        ids = np.flatnonzero(qd > pd_)
        if ids.size:
            tau = rule_thresholds(rule, candidate_features(p[d:d + 1], q[d:d + 1], p_ent[d:d + 1], q_ent[d:d + 1],
                                                           start + d, ids[None, :], rank), needed)
            tv[d] = np.maximum(qd[ids] * tau - pd_[ids], 0.0).sum()
    tokens, damage = block_expectation_tv(np.asarray(tau_x, dtype=np.float64)[:k], tv)
    counts.block_tv += damage
    return tokens


def speculative_text(engine, rule, prompt_ids: Sequence[int], gamma: int, max_new_tokens: int,
                     rng: np.random.Generator) -> tuple[list[int], LiveCounts]:
    """Decode one text of at most ``max_new_tokens`` tokens by speculative decoding with ``rule`` (a threshold
    rule, or a :class:`BlockVerifier`: :data:`BLOCK_VERIFICATION` for lossless block verification, one with a
    relaxation for relaxed block verification; :func:`live_block_verified`).

    Block sizes are min(gamma, remaining - 1), and with one token left the target samples it alone
    (as the harvester does); a text stops after an end-of-sequence token. Returns (the generated
    ids, the text's :class:`LiveCounts`). Raises InputError for a rule reading a feature that
    live decoding does not compute.
    """
    import torch

    policy = rule if isinstance(rule, LengthPolicy) else None
    if policy is not None:
        rule = policy.rule if policy.rule is not None else get_rule("standard_rejection")
    verified = isinstance(rule, BlockVerifier)
    if verified:
        needed = () if rule.relaxation is None else rule_features(rule.relaxation)
    else:
        needed = rule_features(rule)
    counts = LiveCounts()
    with torch.inference_mode():
        batch = engine.new_batch(1)
        engine.start(batch, 0, 0, prompt_ids, rng)  # the prefill: not timed
        t0 = time.perf_counter()
        state = batch.rows[0]
        while state.generated < max_new_tokens:
            k = min(gamma, max_new_tokens - state.generated - 1)
            keep = None
            if k > 0 and policy is not None:
                start = len(state.ctx) - state.prompt_len
                keep = policy_keep(policy.policy, start)
                ahead = engine.drafter.lookahead(engine, state.ctx) if keep.lookahead else {}
                if not keep(0, [], [], [], ahead):  # the decision before the first draft
                    k = 0
            if k > 0 and verified:
                emitted = live_block_verified(engine, batch, k, counts, rule, needed, keep)
            elif k > 0:
                emitted = live_block(engine, batch, k, rule, needed, counts, keep)
            else:
                emitted = [_target_step(engine, batch.kv, state.ctx, state.rng)]
                counts.add_call(1)
            if emitted and emitted[-1] in engine.eos:
                break
        engine.release(batch, 0)
    counts.seconds += time.perf_counter() - t0
    return state.ctx[state.prompt_len:], counts


def _target_step(engine, kv: BatchKV, ctx: list[int], rng: np.random.Generator) -> int:
    """Sample one token from the target alone and append it to ``ctx``."""
    logits = engine.run(kv, [ctx[kv.lengths[0]:]], 1)
    p, _ = engine.distributions(logits[0, -1:])
    tok = sample_index(p[0], rng.random())
    ctx.append(tok)
    return tok


def autoregressive_text(engine, prompt_ids: Sequence[int], max_new_tokens: int,
                        rng: np.random.Generator) -> tuple[list[int], LiveCounts]:
    """Plain autoregressive decoding of the target (one pass per token, same sampling and caches).

    Returns (the generated ids, :class:`LiveCounts` with tokens, target calls and seconds).
    """
    import torch

    counts = LiveCounts()
    with torch.inference_mode():
        ctx = [int(t) for t in prompt_ids]
        kv = engine.new_kv(1)
        kv.place(0, engine.run.prefill(ctx[:-1]), len(ctx) - 1)  # the prefill: not timed
        t0 = time.perf_counter()
        generated: list[int] = []
        while len(generated) < max_new_tokens:
            generated.append(_target_step(engine, kv, ctx, rng))
            if generated[-1] in engine.eos:
                break
    counts.seconds = time.perf_counter() - t0
    counts.tokens = counts.target_calls = counts.tokens_sq = len(generated)
    counts.expected_tokens = float(len(generated))
    counts.drafted = {0: len(generated)}
    return generated, counts


__all__ = ["BLOCK_VERIFICATION", "COMPUTED", "BlockVerifier", "LengthPolicy", "LiveCounts", "POLICY_AVAILABLE",
           "autoregressive_text", "policy_features", "policy_keep", "policy_value",
           "block_decision", "candidate_features", "live_block", "live_block_verified", "relaxation_weights",
           "relaxed_block_decision", "rule_features", "rule_thresholds", "speculative_text", "tree_call_seconds"]

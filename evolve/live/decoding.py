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
it is lossless, so it adds no damage. A kind may make the block's decision its own way
(:func:`live_block_verified`'s ``relax``: relaxed block verification, :mod:`evolve.kinds.relaxation.live`).

Every row is a decoder with one method, ``text`` (:class:`ChainDecoder` here, :class:`evolve.live.tree_decoding.TreeDecoder`
for draft trees): a kind's ``live`` hook builds the row of one of its programs from the pieces above (the threshold
kind: :func:`tokenwise_decoder`; a verification-length policy adds ``keep``, its decision before each draft step,
:mod:`evolve.kinds.verify_length.live`), so the commands never ask what a row is.
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
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from evolve.errors import InputError
from evolve.engine.distributions import sample_index
from evolve.engine.onehot import OneHot, argmax_rows, densify, max_rows, overlap_rows, support, values_at
from evolve.engine.runner import BatchKV
from evolve.verification.block import block_accept, block_masses, block_residual_array, block_stops
from evolve.verification.tokenwise import residual_distribution, standard_threshold
from evolve.verification.tokenwise_block import block_expectation_tv
from evolve.eval.evaluator import EvalData, thresholds
from evolve.eval.tree_scoring import cost_tables
from evolve.gp.primitives import CORE_FEATURES, FEATURES

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
    #: the sum over the tokens plain decoding emitted of the tokens of context before each (its prompt's and the
    #: earlier emitted ones); 0 for a rule's rows (:attr:`mean_context`)
    context_sum: float = 0.0
    drafted: dict[int, int] = field(default_factory=dict)
    #: draft-tree calls (:mod:`evolve.live.tree_decoding`) by (nodes verified, nodes expanded at depth 0, 1, ...): count
    tree_calls: dict[tuple[int, ...], int] = field(default_factory=dict)

    def add(self, other: "LiveCounts") -> None:
        """Add ``other``'s totals to these."""
        for name in ("tokens", "target_calls", "seconds", "expected_tokens", "block_tv", "tokens_sq", "context_sum"):
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
    def mean_context(self) -> float | None:
        """Tokens of context before an emitted token, averaged over the tokens of plain decoding (the context
        :meth:`evolve.eval.costs.Costs.at_context` prices a run's calls at); None for a rule's rows."""
        return self.context_sum / self.tokens if self.context_sum and self.tokens else None

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
    as :func:`evolve.eval.tree_scoring.shape_counts` prices it: ``verify_seconds(nodes)`` plus one drafter
    pass per depth with an expansion, over its m nodes (:func:`evolve.eval.tree_scoring.cost_tables`)."""
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
    verification-length policy's decision to draft one more token. Returns the
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
    n, dist, expected, _ = block_decision_with_stops(p, q, drafts, eta)
    return n, dist, expected


def block_decision_with_stops(p, q, drafts, eta):
    """:func:`block_decision` and the stopping probabilities h float64 (k,) (relaxed block verification weights
    its damage by them)."""
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


def live_block_verified(engine, batch, k: int, counts: LiveCounts, keep=None, relax=None) -> list[int]:
    """One block of row 0 verified jointly by block verification (:func:`block_decision`): k uniforms
    for the decision, one more to draw the next token; the call's expected tokens are 1 + E[n] given
    the drafts. Lossless (no damage added) unless ``relax`` is given: ``relax(p, q, p_ent, q_ent, start, drafts,
    eta) -> (n, unnormalised next-token distribution, expected tokens, expected damage)`` makes the decision
    instead (relaxed block verification, :mod:`evolve.kinds.relaxation.live`) and its damage is added.
    ``keep``: a verification-length policy's decision to draft one more token. Returns the emitted tokens."""
    state = batch.rows[0]
    drafts, q, q_ent, p, p_ent, L = _draft_and_score(engine, batch, k, keep)
    eta, u_next = state.rng.random(len(drafts)), state.rng.random()
    if not drafts:  # no draft: the target's token alone
        emitted = _finish_block(engine, batch, drafts, 0, sample_index(p[0], u_next), L)
        counts.add_call(len(emitted), 1.0)
        return emitted
    if relax is None:
        n, dist, expected = block_decision(p, q, drafts, eta)
    else:
        k = len(drafts)
        n, dist, expected, damage = relax(p, q, p_ent[:k], q_ent, L - state.prompt_len, drafts, eta)
        counts.block_tv += damage
    emitted = _finish_block(engine, batch, drafts, n, sample_index(dist, u_next), L)
    counts.add_call(len(emitted), expected, len(drafts))
    return emitted


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


#: Verifies one block of row 0: ``verify(engine, batch, k, counts, keep) -> emitted tokens`` (:func:`live_block` with
#: a rule's thresholds, :func:`live_block_verified`).
Verify = Callable[..., list[int]]


@dataclass(frozen=True)
class ChainDecoder:
    """A row of live decoding that drafts chains (module doc): ``name`` labels it; ``verify`` verifies one block
    (:data:`Verify`), ``needed`` the features it reads; ``keep(start)``, when given, is a verification-length
    policy's decision to draft one more token in the block starting at text position ``start`` (a
    :data:`evolve.engine.drafter_base.Keep`, with its attribute ``lookahead``), and ``lookahead`` the drafter columns
    it reads (prompt lookup's ``lookup_len``, ``lookup_freq``). ``history``, when given, replaces ``keep`` for a policy
    that reads the request so far: called once per text, it returns an object whose ``keep(start)`` is the block's
    decision and whose ``observe(verified, accepted)`` is told every call the policy made (the drafts it verified and
    how many the target accepted; 0, 0 when the policy drafted nothing; not called when the drafter had nothing to
    draft). Every kind's ``live`` hook returns such a row (or a draft-tree row,
    :class:`evolve.live.tree_decoding.TreeDecoder`); the commands call :meth:`text` alone."""

    name: str
    verify: Verify
    needed: tuple[str, ...] = ()
    keep: Callable[[int], Any] | None = None
    lookahead: tuple[str, ...] = ()
    history: Callable[[], Any] | None = None
    #: Whether the row decodes draft trees (it does not: :class:`evolve.live.tree_decoding.TreeDecoder` does).
    tree: ClassVar[bool] = False

    def text(self, engine, prompt_ids: Sequence[int], max_new_tokens: int, rng: np.random.Generator, gamma: int,
             tree: tuple[int, int] | None = None) -> tuple[list[int], LiveCounts]:
        """Decode one text of at most ``max_new_tokens`` tokens by speculative decoding with blocks of at most
        ``gamma`` drafts (``tree`` is not read).

        Block sizes are min(gamma, remaining - 1), and with one token left the target samples it alone
        (as the harvester does); a text stops after an end-of-sequence token. Returns (the generated
        ids, the text's :class:`LiveCounts`).
        """
        import torch

        counts = LiveCounts()
        tracker = self.history() if self.history is not None else None
        decide = tracker.keep if tracker is not None else self.keep
        with torch.inference_mode():
            batch = engine.new_batch(1)
            engine.start(batch, 0, 0, prompt_ids, rng)  # the prefill: not timed
            t0 = time.perf_counter()
            state = batch.rows[0]
            while state.generated < max_new_tokens:
                k = min(gamma, max_new_tokens - state.generated - 1)
                keep, stopped = None, False
                if k > 0 and decide is not None:
                    keep = decide(len(state.ctx) - state.prompt_len)
                    ahead = engine.drafter.lookahead(engine, state.ctx) if keep.lookahead else {}
                    if not keep(0, [], [], [], ahead):  # the decision before the first draft
                        k, stopped = 0, True
                if k > 0:
                    before = dict(counts.drafted)
                    emitted = self.verify(engine, batch, k, counts, keep)
                    if tracker is not None:
                        verified = next(d for d, n in counts.drafted.items() if n > before.get(d, 0))
                        if verified:  # a call the drafter had nothing for does not reach the history
                            tracker.observe(verified, _accepted(emitted, verified, engine.eos))
                else:
                    emitted = [_target_step(engine, batch.kv, state.ctx, state.rng)]
                    counts.add_call(1)
                    if tracker is not None and stopped:
                        tracker.observe(0, 0)
                if emitted and emitted[-1] in engine.eos:
                    break
            engine.release(batch, 0)
        counts.seconds += time.perf_counter() - t0
        return state.ctx[state.prompt_len:], counts


def _accepted(emitted: list[int], verified: int, eos) -> int:
    """The drafts accepted by a call that verified ``verified`` drafts and emitted ``emitted`` (the accepted drafts,
    then the target's next token, which a full block ending in end-of-sequence leaves out,
    :func:`_finish_block`)."""
    if len(emitted) == verified and emitted and emitted[-1] in eos:
        return verified
    return len(emitted) - 1


def tokenwise_decoder(rule, name: str | None = None) -> ChainDecoder:
    """The chain row of a per-token rule (:func:`live_block`: the drafts accepted by its thresholds, the residual
    after a rejection), named ``name`` (default: the rule's). Raises InputError (:func:`rule_features`) for a rule
    reading a feature live decoding does not compute."""
    needed = rule_features(rule)

    def verify(engine, batch, k, counts, keep=None):
        return live_block(engine, batch, k, rule, needed, counts, keep)

    return ChainDecoder(name or rule.name, verify, needed)


class BlockVerifier(ChainDecoder):
    """Lossless block verification (Sun et al. 2024, arXiv 2403.10444; :func:`live_block_verified`) in place of a
    per-token rule: ``benchmark.py live --rule block_verification`` (the one instance :data:`BLOCK_VERIFICATION`)."""


#: Lossless block verification, the verifier ``block_verification`` names.
BLOCK_VERIFICATION = BlockVerifier("block_verification", live_block_verified)


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
    m, prompt = len(generated), len(prompt_ids)
    counts.context_sum = float(prompt * m + m * (m - 1) // 2)  # the token emitted j-th follows prompt + j tokens
    return generated, counts


__all__ = ["BLOCK_VERIFICATION", "COMPUTED", "BlockVerifier", "ChainDecoder", "LiveCounts", "Verify",
           "autoregressive_text", "block_decision", "block_decision_with_stops", "candidate_features", "live_block",
           "live_block_verified", "rule_features", "rule_thresholds", "tokenwise_decoder", "tree_call_seconds"]

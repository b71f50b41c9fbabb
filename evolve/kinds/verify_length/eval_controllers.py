"""The draft-length controllers inference engines ship (or have proposed), as competitor families of a
verification-length policy, each tuned on the tuning split and scored from the records.

Each reads only what its engine reads; those that read how the request's earlier drafts fared walk each split's
blocks in order with the outcome the harvest's own random numbers give every call
(:func:`evolve.kinds.verify_length.eval_history.call_outcome`: u < tau for a per-token verifier, expectations under
block verification), as a policy reading the history features is scored
(:mod:`evolve.kinds.verify_length.eval_history`, with the same approximations).

* ``llama_cpp_p_min``, llama.cpp's ``--spec-draft-p-min P`` (``common_params_speculative_draft::p_min``, default 0:
  off; ``common/speculative.cpp`` and ``common/common.h`` of llama.cpp as vendored by llama-cpp-python 0.3.36): after
  the drafter's pass for the next token, drafting stops when that token's top probability is below P; the token is
  not sent, but its pass was paid. So a block verifies the leading drafts whose ``draft_top_prob`` is at least P
  (``draft_prob`` without that column) and drafts one more when it stops early. P tuned over 0 and
  :data:`heuristics.length_policies.CONFIDENCE_GRID`.
* ``sglang_adaptive``, SGLang's adaptive speculation (``--speculative-adaptive``; sglang 0.5.23
  ``sglang/srt/speculative/adaptive_spec_params.py``, ``AdaptiveStepSlot``): an exponential moving average
  (``ema_alpha`` 0.2) of the accepted drafts per verification, started at steps - 1; after ``warmup_batches``
  verifications, every ``update_interval``-th one moves the number of draft steps down the sorted
  ``candidate_steps`` while the average is at most the next lower candidate - 0.5 + ``down_hysteresis`` (0.5 +
  hysteresis below a zero step), else up while it exceeds the current one - 0.5 + ``up_hysteresis``; from zero steps
  it probes the smallest positive one. Its state belongs to the server, not the request: at one request at a time it
  carries over from one text to the next, as here (texts in the split's order). Tuned: the candidate set (SGLang's
  batch-size-1 default ``[1, 3, 5, 7]`` cut at gamma, every length 0..gamma, or 1..gamma), the initial steps
  (``--speculative-num-steps``), (warmup, interval) (10, 5) as shipped or (0, 1), ``down_hysteresis`` -0.25 as
  shipped or 0.
* ``dynamic_sd_goodput``, vLLM's Dynamic SD: vLLM 0.33.0 reads a schedule of draft lengths per batch size
  (``num_speculative_tokens_per_batch_size``, ``vllm/config/speculative.py``, ``vllm/v1/spec_decode/dynamic/utils.py``)
  and profiling it is left to the user; the Dynamic SD design picks each length by goodput from acceptance per
  position and step times profiled offline: K = argmax_K (1 + sum_{k<=K} a_k) / (target_forward_s(K + 1) + K
  draft_token_s), a_k the share of verifications whose first k drafts were all accepted (vLLM logs it,
  ``vllm/v1/spec_decode/metrics.py``). That rule is not in vLLM 0.33.0's code; here the profile is the tuning
  split's sampled outcomes at one request.
* ``acceptance_band``, the per-request acceptance-band controller proposed for vLLM's dynamic proposer (not in vLLM
  0.33.0's code): the request starts at K0 drafts; after every call that verified drafts its running acceptance
  rate (the history feature ``accept_ewma``'s average, :mod:`evolve.kinds.verify_length.history`) above ``high``
  raises K by one (at most gamma), below ``low`` lowers it by one (at least K_min; K_min 0 gives up speculating for
  the rest of the request). Tuned: low, high, K0, K_min.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from evolve.kinds.verify_length.eval_history import block_end, call_outcome
from evolve.kinds.verify_length.eval_rows import scored, tuned
from heuristics.length_policies import CONFIDENCE_GRID
from evolve.kinds.verify_length.history import ALPHA, START

#: Grid of the running acceptance rate's band edges of ``acceptance_band``.
BAND_GRID: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: SGLang's default candidate steps at batch size 1 (``DEFAULT_ADAPTIVE_CONFIG["1"]``).
SGLANG_STEPS: tuple[int, ...] = (1, 3, 5, 7)
#: SGLang's ``ema_alpha`` default (``AdaptiveStepSlot``).
SGLANG_EMA_ALPHA = 0.2


@njit(cache=True)
def p_min_choices(top, depth, gamma, p_min, verified, drafted):
    """llama.cpp's ``p_min`` early stop on each block: ``verified`` the leading drafts whose top probability ``top``
    is at least ``p_min``, ``drafted`` one more when it stopped before the block's end (int64 (blocks,) each)."""
    i, b = 0, 0
    while i < depth.size:
        j = block_end(depth, i)
        g = min(j - i, gamma)
        L = 0
        while L < g and top[i + L] >= p_min:
            L += 1
        verified[b], drafted[b] = L, min(L + 1, g)
        i, b = j, b + 1


@njit(cache=True)
def sglang_recompute(candidates, steps, ema, down_h, up_h):
    """``AdaptiveStepSlot._recompute_params`` (module doc): the new (steps, ema)."""
    n = candidates.size
    idx = 0
    while idx < n and candidates[idx] != steps:
        idx += 1
    if steps == 0:
        idx = min(idx + 1, n - 1)
        target = candidates[idx]
        if target > 0 and ema < 0.0:
            ema = target - 1.0
        return target, ema
    old = idx
    while idx > 0:
        prev = candidates[idx - 1]
        drop = (0.5 if prev == 0 else prev - 0.5) + down_h
        if ema <= drop:
            idx -= 1
        else:
            break
    if not idx < old:
        while idx < n - 1:
            if ema > candidates[idx] - 0.5 + up_h:
                idx += 1
            else:
                break
    return candidates[idx], ema


@njit(cache=True)
def sglang_choices(depth, outcomes, gamma, controller, verified):
    """SGLang's adaptive speculation over the split's blocks in order (state kept across texts): each block's
    verified drafts into ``verified`` int64 (blocks,). ``outcomes``: (tau, u, sampled, tok) of
    :func:`evolve.kinds.verify_length.eval_history.call_outcome`; ``controller``: (candidates int64 sorted, initial
    the starting steps (the middle candidate when it is not one), warmup, interval, down_h, up_h)."""
    tau, u, sampled, tok = outcomes
    candidates, initial, warmup, interval, down_h, up_h = controller
    steps = initial
    found = False
    for c in candidates:
        found = found or c == initial
    if not found:
        steps = candidates[candidates.size // 2]
    ema = steps - 1.0
    count = 0
    i, b = 0, 0
    while i < depth.size:
        j = block_end(depth, i)
        L = min(steps, j - i, gamma)
        verified[b] = L
        accepted = call_outcome(i, L, tau, u, sampled, tok)[0]
        if steps > 0:
            ema = (1.0 - SGLANG_EMA_ALPHA) * ema + SGLANG_EMA_ALPHA * accepted
        count += 1
        if count > warmup and (count - warmup) % interval == 0:
            steps, ema = sglang_recompute(candidates, steps, ema, down_h, up_h)
        i, b = j, b + 1


@njit(cache=True)
def band_choices(depth, starts, outcomes, gamma, band, verified):
    """The acceptance-band controller over each text's blocks in order: each block's verified drafts into
    ``verified`` int64 (blocks,). ``outcomes``: (tau, u, sampled, tok) as :func:`sglang_choices`; ``band``: (low,
    high, k0, k_min)."""
    tau, u, sampled, tok = outcomes
    low, high, k0, k_min = band
    k, rate = k0, START[2]
    i, b = 0, 0
    while i < depth.size:
        j = block_end(depth, i)
        if starts[i] or i == 0:
            k, rate = k0, START[2]
        L = min(k, j - i, gamma)
        verified[b] = L
        if L > 0:
            accepted = call_outcome(i, L, tau, u, sampled, tok)[0]
            rate = (1.0 - ALPHA) * rate + ALPHA * accepted / L
            if rate > high:
                k = min(k + 1, gamma)
            elif rate < low:
                k = max(k - 1, k_min)
        i, b = j, b + 1


def position_acceptance(s) -> np.ndarray:
    """float64 (gamma,): a_k, the share of the blocks of a prepared split (:class:`Scoring`) long enough to hold k + 1
    drafts whose first k + 1 drafts were all accepted (sampled outcomes; expectations under block verification)."""
    out = np.zeros(s.gamma)
    for k in range(s.gamma):
        long = s.starts[s.lengths >= k + 1]
        if long.size == 0:
            continue
        hits = [call_outcome(int(i), k + 1, s.tau, s.u, s.sampled, s.tok)[2] for i in long]
        out[k] = float(np.mean(hits))
    return out


def goodput_length(s) -> int:
    """Dynamic SD's goodput pick on a prepared split (module doc): the K in 0..gamma with the most expected tokens
    per second of step time (the shorter of equals)."""
    a = position_acceptance(s)
    draft_s = float(s.costs.draft_token_s)
    value = [(1.0 + a[:K].sum()) / (s.forward[K] + K * draft_s) for K in range(s.gamma + 1)]
    return max(range(s.gamma + 1), key=lambda K: (value[K], -K))


def _walk(s, kernel, *args) -> tuple[np.ndarray, None]:
    verified = np.zeros(s.starts.size, dtype=np.int64)
    kernel(*args, verified)
    return verified, None


def controller_rows(tune, data, score) -> dict:
    """The engines' controllers of the module doc, tuned on the prepared split ``tune`` by ``score(metrics)`` and
    scored on ``data`` (:class:`evolve.kinds.verify_length.eval_competitors.Scoring` both): {name: Scored}."""
    g = data.gamma
    rows = {}
    column = "draft_top_prob" if "draft_top_prob" in data.data.available else "draft_prob"

    def p_min(s, p):
        verified, drafted = np.zeros(s.starts.size, np.int64), np.zeros(s.starts.size, np.int64)
        p_min_choices(s.data.feature(column), s.depth, s.gamma, float(p), verified, drafted)
        return verified, drafted

    rows["llama_cpp_p_min"] = tuned(tune, data, (0.0,) + CONFIDENCE_GRID, p_min, lambda p: f"p_min={p:g}", score)
    sets = {tuple(c for c in SGLANG_STEPS if c <= g) or (1,), tuple(range(g + 1)), tuple(range(1, g + 1))}
    grid = [(cands, init, timing, down) for cands in sorted(sets) for init in cands
            for timing in ((10, 5), (0, 1)) for down in (-0.25, 0.0)]

    def sglang(s, m):
        cands, init, (warmup, interval), down = m
        return _walk(s, sglang_choices, s.depth, (s.tau, s.u, s.sampled, s.tok), s.gamma,
                     (np.array(cands, dtype=np.int64), init, warmup, interval, down, 0.0))

    rows["sglang_adaptive"] = tuned(tune, data, grid, sglang, lambda m: (
        f"steps={','.join(map(str, m[0]))},init={m[1]},warmup={m[2][0]},interval={m[2][1]},down={m[3]:g}"), score)
    k = goodput_length(tune)
    rows["dynamic_sd_goodput"] = scored(data, f"K={k}", np.minimum(data.lengths, k))
    band = [(lo, hi, k0, kmin) for lo in BAND_GRID for hi in BAND_GRID if hi > lo
            for k0 in range(1, g + 1) for kmin in (0, 1)]

    def banded(s, m):
        lo, hi, k0, kmin = m
        return _walk(s, band_choices, s.depth, s.text_start, (s.tau, s.u, s.sampled, s.tok), s.gamma, (lo, hi, k0, kmin))

    rows["acceptance_band"] = tuned(tune, data, band, banded,
                                    lambda m: f"low={m[0]:g},high={m[1]:g},K0={m[2]},K_min={m[3]}", score)
    return rows


__all__ = ["BAND_GRID", "SGLANG_STEPS", "SGLANG_EMA_ALPHA", "p_min_choices", "sglang_recompute", "sglang_choices", "band_choices",
           "position_acceptance", "goodput_length", "controller_rows"]

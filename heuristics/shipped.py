"""Relaxed acceptance rules that inference engines ship, as per-token rules (plain data).

Each function returns a :class:`heuristics.contract.Rule` whose expression is
written over the primitive set. With p = ``target_prob`` = p(x) and
q = ``draft_prob`` = q(x) of the drafted token x ~ q, r = p/q and u ~ U[0, 1)
(accept iff u < tau; thresholds are clamped to [0, 1]):

``sglang_threshold`` (parameters t_single, t_acc)
    tau = 1 if p >= t_single, else min(1, p / (t_acc * q)).

    SGLang's ``speculative_accept_threshold_single`` and
    ``speculative_accept_threshold_acc`` (``python/sglang/srt/server_args.py``,
    both default 1.0; the verify kernel ``tree_speculative_sampling_target_only``,
    ``TreeSpeculativeSamplingTargetOnly`` in
    ``sgl-kernel/csrc/speculative/speculative_sampling.cuh``, which floors
    t_acc at 1e-9). The kernel is *target-only*:
    it never reads the draft's probabilities, because SGLang's EAGLE drafts are
    the draft's top-k tokens, chosen deterministically. For a chain (one child
    per level) it accepts the child x iff ``coin <= p(x) / t_acc`` or
    ``p(x) >= t_single``, with one ``coin`` ~ U[0, 1) per level. With t_acc = 1
    that is the standard test min(1, p/q) for a draft that is a point mass
    (q(x) = 1). Our records hold a token *sampled* from q, with q(x) < 1 in
    general, so we put the draft's probability back where the point mass had
    1: tau = min(1, p / (t_acc q)), which is the standard rule at t_acc = 1
    and t_single = 1 (SGLang's defaults) and the lenient ratio at t_single = 1.
    Applied literally to sampled drafts (tau = min(1, p / t_acc)) the rule
    would sit below the standard one at the defaults (p <= p/q): lossless but
    slower, not the relaxation the knobs are meant to be. Other differences:
    the kernel accepts on ``coin <= ...`` where we accept on u < tau (a
    difference of probability 0), sums the target probabilities of rejected
    siblings into its coin test (trees only; nothing to sum on a chain), and
    after a rejection samples from p with the rejected tokens removed, where
    our metrics assume the residual norm(max(0, p - q tau)) that makes the
    damage exactly max(0, tau - r) per token.

``trt_relaxed`` (parameters N = ``relaxed_topk``, delta = ``relaxed_delta``)
    tau = 1 if x is among the N most likely tokens under p and
    p(x) >= max_v p(v) - delta, else 0.

    TensorRT-LLM's relaxed acceptance for MTP (``MTPDecodingConfig`` fields
    ``use_relaxed_acceptance_for_thinking``, ``relaxed_topk`` (default 1),
    ``relaxed_delta`` (default 0.0); ``mtpRelaxedAcceptanceKernel`` in
    ``cpp/tensorrt_llm/kernels/speculativeDecoding/mtpKernels.cu``; the
    probabilities are ``torch.softmax`` of the target's logits in
    ``tensorrt_llm/_torch/speculative/mtp.py``). The kernel walks the target's
    top-N list and accepts the draft token if it meets an entry whose
    probability is at least the top-1 probability minus delta; the top-1 entry
    always qualifies. When the condition fails the engine rejects outright
    (tau = 0, not min(1, p/q)) and emits the target's argmax, i.e. it decodes
    greedily; our metrics instead assume the residual norm(max(0, p - q tau)),
    so they show what the acceptance test costs, not the greedy fallback.
    N = 1, delta = 0 is greedy matching (the registry's ``greedy_match``).
    The rank comes from the ``target_rank`` column (0 = argmax; ties count
    only strictly larger probabilities, so tied tokens share a rank, where
    ``torch.topk`` would order them arbitrarily). Needs ``target_rank`` and
    ``target_top_prob``. TensorRT-LLM applies the rule only inside the
    thinking phase of a reasoning model (delta = 0 outside); a per-token rule
    has no phase, so here it applies everywhere.

``mixture`` (parameter w in [0, 1])
    tau = min(1, (1 - w) + w r): the standard test against the mixture
    pi = (1 - w) q + w p instead of p, since min(1, pi(x)/q(x)) =
    min(1, (1 - w) + w p(x)/q(x)). w = 1 is the standard rule, w = 0 accepts
    everything. Speculative cascades verify against such a mixture
    (Harikrishna Narasimhan, Wittawat Jitkrittum, Ankit Singh Rawat, Seungyeon
    Kim, Neha Gupta, Aditya Krishna Menon, Sanjiv Kumar 2024, arXiv
    2405.19261); DIVERSED's static ensemble is the same rule (arXiv 2604.07622).

Defaults of the registered rules: TensorRT-LLM's published DeepSeek-R1
setting N = 10, delta = 0.6; t_single = 0.5, t_acc = 0.8 and w = 0.9 are this
project's picks (the engines' own defaults are the lossless end of each knob).
"""
from __future__ import annotations

import math

from heuristics.contract import STANDARD, Rule

SGLANG = ("SGLang speculative_accept_threshold_single/_acc (python/sglang/srt/server_args.py; "
          "TreeSpeculativeSamplingTargetOnly in sgl-kernel/csrc/speculative/speculative_sampling.cuh)")
TRT = ("TensorRT-LLM MTP relaxed acceptance, relaxed_topk/relaxed_delta (mtpRelaxedAcceptanceKernel in "
       "cpp/tensorrt_llm/kernels/speculativeDecoding/mtpKernels.cu)")
MIXTURE = ("verification against the mixture (1 - w) q + w p: speculative cascades, Narasimhan et al. 2024 "
           "(arXiv 2405.19261); DIVERSED static ensemble (arXiv 2604.07622)")

#: Slack of the ``trt_relaxed`` probability test, as for greedy matching (heuristics.published.ARGMAX_SLACK).
TOP_SLACK = 1e-12

DEFAULT_SGLANG = (0.5, 0.8)
DEFAULT_TRT = (10.0, 0.6)
DEFAULT_MIXTURE_W = 0.9


def _number(name: str, value, low: float, high: float, low_open: bool = False) -> float:
    """``value`` as a float after checking low <(=) value <= high. Raises ValueError otherwise."""
    v = float(value)
    if not math.isfinite(v) or v > high or v < low or (low_open and v == low):
        raise ValueError(f"{name} must be in {'(' if low_open else '['}{low:g}, {high:g}] (value {value!r})")
    return v


def sglang_threshold(t_single: float = DEFAULT_SGLANG[0], t_acc: float = DEFAULT_SGLANG[1]) -> Rule:
    """SGLang's two thresholds on sampled drafts: tau = 1 if p >= t_single else min(1, p/(t_acc q)).

    Args:
        t_single: accept outright when the target gives the token at least
            this probability, in (0, 1]; 1 accepts outright only tokens with p = 1.
        t_acc: divisor of the acceptance ratio, in (0, 1]; 1 keeps the standard ratio.

    Lossless iff t_single = t_acc = 1 (SGLang's defaults). See the module doc for
    how SGLang's target-only kernel maps onto sampled drafts. Raises ValueError
    for a parameter out of range.
    """
    ts = _number("t_single", t_single, 0.0, 1.0, low_open=True)
    ta = _number("t_acc", t_acc, 0.0, 1.0, low_open=True)
    return Rule(f"sglang_{ts:g}_{ta:g}", f"1 if p >= {ts:g} else min(1, p/({ta:g}*q))", SGLANG,
                expression=f"if_gt({ts!r}, target_prob, min(1.0, div(target_prob, mul({ta!r}, draft_prob))), 1.0)",
                lossless=ts == 1.0 and ta == 1.0)


def trt_relaxed(topk: float = DEFAULT_TRT[0], delta: float = DEFAULT_TRT[1]) -> Rule:
    """TensorRT-LLM's relaxed acceptance: tau = 1 if rank_p(x) < N and p(x) >= max p - delta, else 0.

    Args:
        topk: N (``relaxed_topk``), an integer >= 1 (given as a number).
        delta: ``relaxed_delta`` in [0, 1], in units of probability.

    Expression: ``if_gt(target_rank, N - 0.5, 0, if_gt(max p - delta - 1e-12, p, 0, 1))``
    (the 1e-12 slack as in greedy matching). Needs ``target_rank`` and
    ``target_top_prob``; never lossless for sampling. Raises ValueError for
    a parameter out of range.
    """
    n = _number("topk", topk, 1.0, math.inf)
    if n != round(n):
        raise ValueError(f"topk must be an integer >= 1 (value {topk!r})")
    d = _number("delta", delta, 0.0, 1.0)
    return Rule(f"trt_relaxed_{n:g}_{d:g}", f"1 if rank_p(x) < {n:g} and p(x) >= max p - {d:g} else 0", TRT,
                expression=f"if_gt(target_rank, {n - 0.5!r}, 0.0, "
                           f"if_gt(sub(target_top_prob, {d + TOP_SLACK!r}), target_prob, 0.0, 1.0))")


def mixture(w: float = DEFAULT_MIXTURE_W) -> Rule:
    """Verification against the mixture (1 - w) q + w p: tau = min(1, (1 - w) + w p/q) (arXiv 2405.19261).

    Args: w in [0, 1], the target's weight (1: the standard rule, lossless; 0: accept all).
    Raises ValueError for w out of range.
    """
    wv = _number("w", w, 0.0, 1.0)
    if wv == 1.0:
        expression = STANDARD
    else:
        expression = f"min(1.0, add({round(1.0 - wv, 12)!r}, mul({wv!r}, div(target_prob, draft_prob))))"
    return Rule(f"mixture_{wv:g}", f"min(1, {1 - wv:g} + {wv:g}*p/q)", MIXTURE, expression=expression,
                lossless=wv == 1.0)


__all__ = ["sglang_threshold", "trt_relaxed", "mixture", "SGLANG", "TRT", "MIXTURE", "TOP_SLACK",
           "DEFAULT_SGLANG", "DEFAULT_TRT", "DEFAULT_MIXTURE_W"]

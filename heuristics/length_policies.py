"""The published verification-length policies as parameterised families (the competitors of an evolved
policy, :mod:`evolve.kinds.verify_length.eval_competitors`), so that commands can run them by name (``benchmark.py live
--rule fixed_gamma:gamma=2``).

Both are rules of kind ``verify-length`` (:data:`evolve.kinds.verify_length.KIND`): before each draft step,
draft one more token iff the value is > 0; the drafts are verified by the standard rule.

* ``fixed_gamma:gamma=G``: draft G tokens (value G - 0.5 - draft_index): the fixed draft length of
  speculative sampling (Leviathan et al. 2023, arXiv 2211.17192; Chen et al. 2023, arXiv 2302.01318).
  G = 0 is plain decoding.
* ``confidence_threshold:h=H``: stop when the drafter's top probability of the last drafted token is
  below H (value draft_top_prob - H; 1 before the first draft): the draft-confidence stop of SpecDec++
  (Huang et al. 2024, arXiv 2405.19715) and of DFlash's confidence variant in vLLM.

The survival-prefix competitor drafts first and then picks the prefix to verify; it is no policy of
this kind and is scored from records only (:func:`evolve.kinds.verify_length.eval_competitors.competitors`).

What verifies the drafts a policy sends is named by :func:`heuristics.verifiers.verifier_parts` (the
``verify_with`` setting of a verification-length run).
"""
from __future__ import annotations

import math

from heuristics.contract import Rule
from heuristics.published import Family

#: The kind of these rules (the registry resolves the name, :mod:`evolve.kinds.registry`).
KIND_NAME = "verify-length"
#: The default verifier of a verification-length policy's drafts.
STANDARD_VERIFIER_NAME = "standard_rejection"
#: Lossless block verification as a verifier.
BLOCK_VERIFIER_NAME = "block_verification"
#: The ``verify_with`` settings an engine that verifies by matching its own samples runs (llama-cpp-python's loop;
#: None: the default, standard).
LOOP_VERIFIERS = (None, STANDARD_VERIFIER_NAME, BLOCK_VERIFIER_NAME)
#: Longest fixed draft length of the sweep grid.
MAX_FIXED_GAMMA = 8
#: vLLM 0.33.0's defaults of suffix decoding's knobs (``vllm/config/speculative.py``): tree depth, max_spec_factor,
#: offset (not a vLLM knob: 0), min_token_prob; :func:`suffix_rule` takes the last three.
SUFFIX_VLLM_DEFAULT = (24, 1.0, 0.0, 0.1)


def fixed_gamma(gamma) -> Rule:
    """The policy drafting exactly ``gamma`` tokens per block (an integer >= 0; ValueError otherwise)."""
    g = 5 if gamma is None else gamma
    if not math.isfinite(g) or g != int(g) or g < 0:
        raise ValueError(f"gamma must be an integer >= 0 (value {g:g})")
    return Rule(f"fixed_gamma:gamma={int(g)}", f"draft {int(g)} tokens per block",
                "Leviathan et al. 2023 (arXiv 2211.17192); Chen et al. 2023 (arXiv 2302.01318)",
                expression=f"sub({int(g) - 0.5!r}, draft_index)", lossless=True, kind=KIND_NAME)


def confidence_threshold(h) -> Rule:
    """The policy that stops drafting when the drafter's top probability falls below ``h`` (in [0, 1];
    ValueError otherwise)."""
    h = 0.5 if h is None else float(h)
    if not 0.0 <= h <= 1.0:
        raise ValueError(f"h must be in [0, 1] (value {h:g})")
    return Rule(f"confidence_threshold:h={h:g}", f"stop drafting when the drafter's top probability < {h:g}",
                "SpecDec++ (Huang et al. 2024, arXiv 2405.19715); DFlash confidence scheduling in vLLM",
                expression=f"sub(draft_top_prob, {h!r})", lossless=True, kind=KIND_NAME)


def suffix_rule(factor: float, offset: float, min_prob: float, length: int | None = None) -> Rule:
    """Suffix decoding's own rule as a policy (SuffixDecoding, Oliaro et al. 2024, arXiv 2411.04975; arctic-inference's
    ``SuffixDecodingCache.speculate``, vLLM's ``method: suffix``): draft token j while its path probability
    (``suffix_cumprob``) is at least ``min_prob`` and j < ``factor`` x match length (``suffix_match_len``) +
    ``offset``, and, with ``length``, j < length (``num_speculative_tokens``). The library's budget is
    int(factor x match length + offset); the two agree wherever factor x match length + offset is an integer or a
    half-integer (every point of the tuning grids). The tree depth's own cap on a draft is not part of the program
    (:mod:`evolve.kinds.verify_length.eval_suffix` scores it from the records)."""
    room = f"sub(add(mul({float(factor)!r}, suffix_match_len), {float(offset) - 0.5!r}), draft_index)"
    expression = f"min(sub(suffix_cumprob, {float(min_prob) - 1e-12!r}), {room})"
    name = f"suffix_rule:factor={factor:g},offset={offset:g},min_prob={min_prob:g}"
    if length is not None:
        expression = f"min({expression}, sub({length - 0.5!r}, draft_index))"
        name += f",n={length}"
    return Rule(name, "suffix decoding's own rule at these knobs", "SuffixDecoding (Oliaro et al. 2024, arXiv "
                "2411.04975); arctic-inference 0.3.0", expression=expression, lossless=True, kind=KIND_NAME)


#: The policy families by name (``FAMILY:VALUE`` names a member, as for the acceptance-rule families).
#: The thresholds h of the confidence-threshold family swept (tuned on valid) wherever the family is a competitor.
CONFIDENCE_GRID: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(1, 20))

POLICY_FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("fixed_gamma", fixed_gamma, "gamma", 5, tuple(float(g) for g in range(MAX_FIXED_GAMMA + 1)),
           "Leviathan et al. 2023 (arXiv 2211.17192)"),
    Family("confidence_threshold", confidence_threshold, "h", 0.5, CONFIDENCE_GRID,
           "SpecDec++ (Huang et al. 2024, arXiv 2405.19715)", columns=("draft_top_prob",)),
)}

__all__ = ["LOOP_VERIFIERS", "POLICY_FAMILIES", "MAX_FIXED_GAMMA", "STANDARD_VERIFIER_NAME", "BLOCK_VERIFIER_NAME", "confidence_threshold",
           "fixed_gamma", "suffix_rule"]

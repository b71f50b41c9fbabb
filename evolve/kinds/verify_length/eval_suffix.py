"""Suffix decoding's own rule as competitor rows of a verification-length policy, on a suffix-decoding harvest.

vLLM's ``method: suffix`` (vLLM 0.33.0, ``vllm/v1/spec_decode/suffix_decoding.py``, arctic-inference's
``SuffixDecodingCache.speculate``) verifies every token of its draft, and shapes the draft with four knobs: the tree
depth (``suffix_decoding_max_tree_depth``: a match and its draft fit in it), ``suffix_decoding_max_spec_factor`` and
the library's ``max_spec_offset`` (at most factor x match length + offset drafts) and
``suffix_decoding_min_token_prob`` (only tokens whose estimated path probability is at least it). On a harvest of
the suffix drafter (:mod:`evolve.engine.suffix`: the draft of the most frequent path, the columns
``suffix_match_len`` and ``suffix_cumprob``) the rule's choice at each block is the prefix those knobs keep
(:func:`knob_choices`, the match length capped at the depth's room as the trees cap it). Two rows:

* ``suffix_vllm_default``: the knobs at vLLM 0.33.0's defaults (depth 24, factor 1.0, offset 0, min_token_prob 0.1), at
  most gamma drafts (``num_speculative_tokens``);
* ``suffix_tuned``: the four knobs tuned on the tuning split by the run's measure over :data:`FACTORS`,
  :data:`OFFSETS`, :data:`MIN_PROBS` and :data:`DEPTHS`.

What the rows assume: the library chooses among the matches by the draft's score, so under other knobs it may prefer
another match (a shorter budget can favour a shorter match); the harvest's draft is the one of an uncapped budget,
and the rows keep a prefix of it. The live rows (``benchmark.py live``) run the library itself at the knobs.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from evolve.kinds.verify_length.eval_rows import Scored, Scoring, scored, tuned
from heuristics.length_policies import SUFFIX_VLLM_DEFAULT as VLLM_DEFAULT
#: The tuning grids of the knobs.
FACTORS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 1000.0)
OFFSETS: tuple[float, ...] = (0.0, 1.0, 2.0, 4.0)
MIN_PROBS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7)
DEPTHS: tuple[int, ...] = (16, 24, 32, 64)
#: The columns the rows read.
COLUMNS = ("suffix_match_len", "suffix_cumprob")


@njit(cache=True)
def knob_choices(match, cumprob, depth, gamma, tree_depth, factor, offset, min_prob, verified):
    """Each block's kept drafts (int64 (blocks,) into ``verified``) under the knobs, from the records' match lengths and
    path probabilities (float64 (n,)) and draft index ``depth``: at most ``gamma``, ``int(factor m + offset)`` and the
    room the tree depth leaves a match of length m (``tree_depth - m``, m capped at ``tree_depth - 1``), and the prefix
    whose path probabilities are at least ``min_prob``."""
    i, b = 0, 0
    n = depth.size
    while i < n:
        j = i + 1
        while j < n and depth[j] != 0:
            j += 1
        m = min(match[i], tree_depth - 1.0)
        budget = min(float(gamma), float(int(m * factor + offset + 1e-6)), tree_depth - m)
        k = 0
        while k < budget and i + k < j and cumprob[i + k] >= min_prob:
            k += 1
        verified[b] = k
        i, b = j, b + 1


def _choose(s: Scoring, knobs: tuple) -> tuple[np.ndarray, None]:
    tree_depth, factor, offset, min_prob = knobs
    verified = np.zeros(s.starts.size, np.int64)
    knob_choices(s.data.feature("suffix_match_len"), s.data.feature("suffix_cumprob"), s.depth, int(s.gamma),
                 float(tree_depth), float(factor), float(offset), float(min_prob), verified)
    return np.minimum(verified, s.lengths), None


def knob_label(knobs: tuple) -> str:
    """The setting of a row: the vLLM fields (and the library's offset)."""
    depth, factor, offset, min_prob = knobs
    return (f"suffix_decoding_max_tree_depth={depth}, suffix_decoding_max_spec_factor={factor:g}, "
            f"max_spec_offset={offset:g}, suffix_decoding_min_token_prob={min_prob:g}")


def suffix_rows(tune: Scoring, data: Scoring, score) -> dict[str, Scored]:
    """``suffix_vllm_default`` and ``suffix_tuned`` (module doc) on ``data``, tuned on ``tune``; none without the
    suffix columns."""
    if any(c not in data.data.available or c not in tune.data.available for c in COLUMNS):
        return {}
    grid = [(d, f, o, p) for d in DEPTHS for f in FACTORS for o in OFFSETS for p in MIN_PROBS]
    return {"suffix_vllm_default": scored(data, knob_label(VLLM_DEFAULT), *_choose(data, VLLM_DEFAULT)),
            "suffix_tuned": tuned(tune, data, grid, _choose, knob_label, score)}


__all__ = ["COLUMNS", "DEPTHS", "FACTORS", "MIN_PROBS", "OFFSETS", "VLLM_DEFAULT", "knob_choices", "knob_label",
           "suffix_rows"]

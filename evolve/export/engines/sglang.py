"""SGLang: the exact server flags (``python -m sglang.launch_server ... FLAGS``), one line under a comment header.

Every flag is checked in ``python/sglang/srt/server_args.py`` (``ServerArgs`` and its ``add_cli_args``). What it
writes: a fixed draft length L as a chain (``--speculative-num-steps L --speculative-eagle-topk 1
--speculative-num-draft-tokens L+1``); a member of the ``sglang_threshold`` family as its two thresholds
(``--speculative-accept-threshold-single``/``-acc``; the standard rule is both at 1.0, SGLang's default); a tree
shape that is EAGLE-2's per-level top-k with k children per expanded node to depth d (``eagle2_topk`` with
``widest`` = k, :func:`evolve.eval.tree_competitors.eagle2_topk_expression`) as ``--speculative-eagle-topk
k --speculative-num-steps d --speculative-num-draft-tokens 1 + k + (d - 1) k^2`` (every drafted node kept, so SGLang's
final re-ranking keeps them all), a chain as top-k 1.

How exact: SGLang drafts the drafter's top-k tokens and verifies with a target-only kernel
(``TreeSpeculativeSamplingTargetOnly``); how that maps onto the records' sampled drafts is in :mod:`heuristics.shipped`.
"""
from __future__ import annotations

from evolve.export.engines.base import (Engine, KindSupport, Knob, Provenance, Setting, comment, constants, flags,
                                        member)
from evolve.export.engines.families import topk_tree_rule
from evolve.export.engines.supports import chain_tree_support, length_support, threshold_support
from evolve.kinds.relaxation import RELAXATION
from evolve.kinds.threshold import THRESHOLD
from evolve.kinds.tree_shape import TREE_SHAPE
from evolve.kinds.verify_length import VERIFY_LENGTH
from heuristics.published import SGLANG_GRID
from heuristics.shipped import sglang_threshold

SOURCE = "python/sglang/srt/server_args.py (sgl-project/sglang, ServerArgs)"

KNOBS = (
    Knob("--speculative-algorithm", "str", "EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, ...", "None (off)", SOURCE),
    Knob("--speculative-num-steps", "int", ">= 1", "None (chosen per model)", SOURCE),
    Knob("--speculative-eagle-topk", "int", ">= 1", "None (chosen per model)", SOURCE),
    Knob("--speculative-num-draft-tokens", "int", ">= 1", "None (chosen per model)", SOURCE),
    Knob("--speculative-accept-threshold-single", "float", "(0, 1]", "1.0", SOURCE),
    Knob("--speculative-accept-threshold-acc", "float", "(0, 1]", "1.0", SOURCE),
    Knob("--speculative-use-rejection-sampling", "bool", "top-k 1 only; not with the accept thresholds", "False",
         SOURCE),
    Knob("--speculative-adaptive", "bool", "adjusts the number of steps from the acceptance rate", "False", SOURCE),
    Knob("--speculative-adaptive-config", "str", "a JSON file of the adaptive knobs", "None", SOURCE),
)


def _chain(length: int, block: bool = False) -> dict:
    if length == 0:
        return {}
    return {"--speculative-num-steps": length, "--speculative-eagle-topk": 1,
            "--speculative-num-draft-tokens": length + 1}


def _topk(top: int, depth: int) -> dict:
    return {"--speculative-num-steps": depth, "--speculative-eagle-topk": top,
            "--speculative-num-draft-tokens": 1 + top + (depth - 1) * top * top}


def _thresholds(single: float, acc: float) -> dict:
    return {"--speculative-accept-threshold-single": single, "--speculative-accept-threshold-acc": acc}


_CHAINS = chain_tree_support(_chain, "a chain (--speculative-eagle-topk 1) or per-level top-k")


def _tree_exact(rule, gamma):
    found = _CHAINS.exact(rule, gamma)
    if found is not None:
        return found
    c = constants(rule.nodes)
    guess = member(rule, topk_tree_rule, [(round(c[1] + 0.5), round(c[0] + 0.5))] if len(c) >= 2 else [])
    if guess is None:
        return None
    return Setting(f"top={guess[0]},depth={guess[1]}", topk_tree_rule(*guess), _topk(*guess))


def _tree_settings(rule, gamma, depth):
    return _CHAINS.settings(rule, gamma, depth) + [
        Setting(f"top={k},depth={d}", topk_tree_rule(k, d), _topk(k, d))
        for k in range(2, max(2, gamma) + 1) for d in range(1, depth + 1)]


KINDS = {
    THRESHOLD: threshold_support(((sglang_threshold, lambda c: [(c[0], c[2])] if len(c) >= 3 else [], _thresholds,
                                   SGLANG_GRID),), _thresholds(1.0, 1.0),
                                 "the two accept thresholds (the sglang_threshold family)"),
    VERIFY_LENGTH: length_support(_chain, "a chain: --speculative-num-steps N --speculative-eagle-topk 1"),
    TREE_SHAPE: KindSupport(_tree_exact, _tree_settings, lambda gamma: None, _CHAINS.nearest),
}


#: The nearest setting of a kind this engine cannot run.
REFUSALS = {RELAXATION: "lossless token-wise verification: export the standard rule (standard_rejection)"}


def render(setting: Setting, provenance: Provenance, schedule=None) -> str:
    """The flag line of ``setting`` under its provenance header (``#`` comments)."""
    header = ["SGLang server flags, written by specdec-evolve (python -m evolve export)", *provenance.lines(),
              f"setting: {setting.label}", *([setting.note] if setting.note else []),
              "use: python -m sglang.launch_server --model-path MODEL --speculative-algorithm ALGO "
              "--speculative-draft-model-path DRAFT $(grep -v '^#' FILE)"]
    return f"{comment(header)}\n{flags(dict(setting.knobs))}\n"


ENGINE = Engine("sglang", "SGLang", "server flags (one line)", KNOBS, KINDS, render, refusals=REFUSALS)

__all__ = ["ENGINE", "KNOBS", "render"]

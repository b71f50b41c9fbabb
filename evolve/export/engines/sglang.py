"""SGLang: the exact server flags (``python -m sglang.launch_server ... FLAGS``), one line under a comment header,
checked against SGLang 0.5.23.

Every flag is a field of ``ServerArgs`` (``python/sglang/srt/arg_groups/fields/spec.py``), parsed by the argument
parser SGLang builds from those fields (``ServerArgs.add_cli_args``); the speculative settings are resolved in
``python/sglang/srt/arg_groups/speculative_hook.py``. What it writes: a fixed draft length L as a chain
(``--speculative-num-steps L --speculative-eagle-topk 1 --speculative-num-draft-tokens L+1``: SGLang sets the draft
tokens to steps + 1 whenever top-k is 1); drafts verified as a block (a run that verified by blocks, or a relaxation
weight of 0) with ``--speculative-use-block-verification`` (EAGLE or EAGLE3 drafters with top-k 1 on CUDA or ROCm:
SGLang refuses it for STANDALONE and NGRAM); a member of the ``sglang_threshold`` family as its two thresholds
(``--speculative-accept-threshold-single``/``-acc``; the standard rule is both at 1.0, SGLang's default); a tree
shape that is EAGLE-2's per-level top-k with k children per expanded node to depth d (``eagle2_topk`` with ``widest``
= k) as ``--speculative-eagle-topk k --speculative-num-steps d --speculative-num-draft-tokens 1 + k + (d - 1) k^2``
(every drafted node kept, so SGLang's final re-ranking keeps them all), a chain as top-k 1.

The algorithm follows the harvest's drafter: prompt lookup as ``--speculative-algorithm NGRAM`` (SGLang's n-gram
drafter matches the request against its trie of earlier tokens, breadth 1 for a chain: the nearest, not the same,
drafter), a draft model as ``STANDALONE``, an EAGLE head as ``EAGLE3``. How exact the verification is: SGLang drafts
the drafter's top-k tokens and verifies with a target-only kernel (``TreeSpeculativeSamplingTargetOnly``); how that
maps onto the records' sampled drafts is in :mod:`heuristics.shipped`.
"""
from __future__ import annotations

from evolve.engine.drafter_base import EngineFamily
from evolve.errors import InputError
from evolve.export.engines.base import Capabilities, Engine, Family, Knob, Provenance, Setting
from evolve.export.engines.text import comment, flags, header
from heuristics.published import SGLANG_GRID
from heuristics.shipped import sglang_threshold

VERSION = "0.5.23"
SOURCE = f"python/sglang/srt/arg_groups/fields/spec.py (sglang {VERSION}, ServerArgs)"
BLOCK = "--speculative-use-block-verification"
BLOCK_CONDITION = ("block verification runs with --speculative-algorithm EAGLE or EAGLE3 on CUDA or ROCm "
                   "(SGLang refuses it for STANDALONE and NGRAM)")

KNOBS = (
    Knob("--speculative-algorithm", "str", "EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK, UNO",
         "None (off)", SOURCE),
    Knob("--speculative-num-steps", "int", ">= 1", "None (chosen per model)", SOURCE),
    Knob("--speculative-eagle-topk", "int", ">= 1", "None (chosen per model)", SOURCE),
    Knob("--speculative-num-draft-tokens", "int", "steps + 1 with top-k 1", "None (chosen per model)", SOURCE),
    Knob("--speculative-accept-threshold-single", "float", "(0, 1]", "1.0", SOURCE),
    Knob("--speculative-accept-threshold-acc", "float", "(0, 1]", "1.0", SOURCE),
    Knob("--speculative-use-rejection-sampling", "bool", "top-k 1 only; not with the accept thresholds", "False",
         SOURCE),
    Knob(BLOCK, "bool", "EAGLE/EAGLE3 with top-k 1, DFLASH/DSPARK; CUDA or ROCm", "False", SOURCE),
    Knob("--speculative-ngram-max-bfs-breadth", "int", ">= 1 (NGRAM: its top-k)", "10", SOURCE),
    Knob("--speculative-adaptive", "bool", "adjusts the number of steps from the acceptance rate", "False", SOURCE),
)


def _chain(length: int) -> dict:
    return {"--speculative-num-steps": length, "--speculative-eagle-topk": 1,
            "--speculative-num-draft-tokens": length + 1}


def _topk(top: int, depth: int) -> dict:
    return {"--speculative-num-steps": depth, "--speculative-eagle-topk": top,
            "--speculative-num-draft-tokens": 1 + top + (depth - 1) * top * top}


def _thresholds(single: float, acc: float) -> dict:
    return {"--speculative-accept-threshold-single": single, "--speculative-accept-threshold-acc": acc}


FAMILY = Family(sglang_threshold, lambda c: [(c[0], c[2])] if len(c) >= 3 else [], _thresholds, SGLANG_GRID)
CAPABILITIES = Capabilities(length=_chain, block={BLOCK: True}, block_condition=BLOCK_CONDITION, topk_tree=_topk,
                            families=(FAMILY,), lossless=_thresholds(1.0, 1.0))


def _algorithm(knobs: dict, provenance: Provenance) -> tuple[dict, str]:
    """The algorithm flags of the harvest's drafter, and what the user adds. Raises InputError for block
    verification with a drafter SGLang refuses it for."""
    drafter = provenance.drafter
    if drafter.lookup:
        if BLOCK in knobs:
            raise InputError(f"SGLang {VERSION} runs block verification only with EAGLE or EAGLE3 drafters, not its "
                             f"NGRAM drafter (the harvest drafted by prompt lookup); nearest: the same length "
                             f"verified token by token")
        algorithm = {"--speculative-algorithm": "NGRAM", "--speculative-ngram-max-bfs-breadth":
                     knobs.get("--speculative-eagle-topk", 1), "--speculative-ngram-min-bfs-breadth": 1}
        return algorithm, ""
    if drafter.family is EngineFamily.DRAFT_MODEL:
        if BLOCK in knobs:
            raise InputError(f"SGLang {VERSION} runs block verification only with EAGLE or EAGLE3 drafters, not "
                             f"STANDALONE (the harvest drafted with a draft model); nearest: the same length "
                             f"verified token by token")
        return {"--speculative-algorithm": "STANDALONE"}, "--speculative-draft-model-path DRAFT"
    if drafter.family is EngineFamily.EAGLE_HEAD:
        return {"--speculative-algorithm": "EAGLE3"}, "--speculative-draft-model-path HEAD"
    return {}, "--speculative-algorithm ALGO --speculative-draft-model-path DRAFT"


def render(setting: Setting, provenance: Provenance, schedule=None) -> str:
    """The flag line of ``setting`` under its provenance header (``#`` comments); a boolean flag is written alone.
    Raises InputError for block verification with a drafter SGLang refuses it for."""
    knobs = dict(setting.knobs)
    speculates = "--speculative-num-steps" in knobs
    algorithm, extra = _algorithm(knobs, provenance) if speculates else ({}, "")
    line = {**algorithm, **knobs}
    if speculates:
        use = f"use: python -m sglang.launch_server --model-path MODEL {extra + ' ' if extra else ''}$(grep -v '^#' FILE)"
    elif knobs:
        use = ("use: python -m sglang.launch_server --model-path MODEL --speculative-algorithm ALGO "
               "--speculative-draft-model-path DRAFT $(grep -v '^#' FILE)")
    else:
        use = "use: plain decoding: launch SGLang without --speculative-algorithm"
    return f"{comment(header('SGLang server flags', f'SGLang {VERSION}', provenance, setting, [], use))}\n" \
           f"{flags(line)}\n"


ENGINE = Engine("sglang", "SGLang", "server flags (one line)", KNOBS, CAPABILITIES, render, VERSION,
                "the argument parser ServerArgs builds from its own field definitions, from the released wheel")

__all__ = ["ENGINE", "KNOBS", "VERSION", "render"]

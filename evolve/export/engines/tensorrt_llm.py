"""TensorRT-LLM: a YAML file for ``trtllm-serve MODEL --config FILE`` (alias ``--extra_llm_api_options``) holding
``speculative_config``.

Every name is checked in ``tensorrt_llm/llmapi/llm_args.py`` (``DecodingBaseConfig``, ``EagleDecodingConfig``,
``MTPDecodingConfig``); the serve option in ``tensorrt_llm/commands/serve.py``. What it writes: a fixed draft length
as ``max_draft_len``; a static tree as ``eagle_choices`` (node paths) with ``max_draft_len`` its depth and
``max_total_draft_tokens`` its node count; a member of the ``trt_relaxed`` family as MTP's relaxed acceptance
(``use_relaxed_acceptance_for_thinking``, ``relaxed_topk``, ``relaxed_delta``; TensorRT-LLM applies it inside a
reasoning model's thinking phase only, :mod:`heuristics.shipped`); a per-batch-size schedule as
``draft_len_schedule`` ({batch size: draft length}, a length applying from its batch size up; TensorRT-LLM requires
the entry for batch size 1 to equal ``max_draft_len``).
"""
from __future__ import annotations

from evolve.errors import InputError
from evolve.export.engines.base import Engine, Knob, Provenance, Setting, check_schedule, tree_paths, yaml_text
from evolve.export.engines.supports import length_support, static_tree_support, threshold_support
from evolve.kinds.relaxation import RELAXATION
from evolve.kinds.threshold import THRESHOLD
from evolve.kinds.tree_shape import TREE_SHAPE
from evolve.kinds.verify_length import VERIFY_LENGTH
from heuristics.published import TRT_GRID
from heuristics.shipped import TOP_SLACK, trt_relaxed

SOURCE = "tensorrt_llm/llmapi/llm_args.py (NVIDIA/TensorRT-LLM fcd3f31)"

KNOBS = (
    Knob("decoding_type", "str", "Eagle, MTP, DraftTarget, NGram, Medusa, Lookahead", "required", SOURCE),
    Knob("max_draft_len", "int", ">= 0", "None (required)", SOURCE),
    Knob("max_total_draft_tokens", "int", ">= max_draft_len", "max_draft_len (a chain)", SOURCE),
    Knob("draft_len_schedule", "dict", "{batch size: draft length}, from that batch size up; {1: max_draft_len}",
         "None", SOURCE),
    Knob("max_concurrency", "int", ">= 0: no speculation above this batch size", "None", SOURCE),
    Knob("eagle_choices", "list", "node paths of a static tree, e.g. [[0], [0, 0], [1]]", "None (a chain)", SOURCE),
    Knob("use_dynamic_tree", "bool", "Eagle", "False", SOURCE),
    Knob("dynamic_tree_max_topK", "int", "Eagle, with use_dynamic_tree", "None", SOURCE),
    Knob("use_relaxed_acceptance_for_thinking", "bool", "MTP", "False", SOURCE),
    Knob("relaxed_topk", "int", ">= 1", "1", SOURCE),
    Knob("relaxed_delta", "float", "[0, 1]", "0.0", SOURCE),
)


def _length(length: int, block: bool = False) -> dict:
    return {"decoding_type": "Eagle", "max_draft_len": length} if length else {}


def _tree(widths: tuple[int, ...]) -> dict:
    paths = tree_paths(widths)
    if not paths:
        return {}
    return {"decoding_type": "Eagle", "max_draft_len": len(widths), "max_total_draft_tokens": len(paths),
            "eagle_choices": [list(p) for p in paths]}


def _relaxed(topk: float, delta: float) -> dict:
    return {"decoding_type": "MTP", "use_relaxed_acceptance_for_thinking": True, "relaxed_topk": int(topk),
            "relaxed_delta": delta}


KINDS = {
    THRESHOLD: threshold_support(((trt_relaxed, lambda c: [(c[0] + 0.5, round(c[2] - TOP_SLACK, 12)),
                                                            (c[0] + 0.5, c[2] - TOP_SLACK)] if len(c) >= 3 else [],
                                   _relaxed, TRT_GRID),),
                                 {"decoding_type": "MTP", "use_relaxed_acceptance_for_thinking": False},
                                 "MTP relaxed acceptance (relaxed_topk, relaxed_delta)"),
    VERIFY_LENGTH: length_support(_length, "a fixed max_draft_len"),
    TREE_SHAPE: static_tree_support(_tree, "a static tree (eagle_choices)"),
}

#: The nearest setting of a kind this engine cannot run.
REFUSALS = {RELAXATION: "lossless token-wise verification: export the standard rule (standard_rejection)"}


def render(setting: Setting, provenance: Provenance, schedule=None) -> str:
    """The YAML text of ``setting`` for ``trtllm-serve --config`` (see the module doc); ``schedule``: (start, end,
    length) triples written as ``draft_len_schedule`` with ``max_draft_len`` the length at batch size 1.

    Raises: InputError (param ``schedule``) for a malformed schedule or one whose lengths exceed its first.
    """
    config = dict(setting.knobs)
    if schedule is not None:
        rows = check_schedule(schedule)
        first = rows[0][2]
        if any(length > first for _, _, length in rows):
            raise InputError("TensorRT-LLM's max_draft_len is the schedule's length at batch size 1, so no later "
                             "length may exceed it", param="schedule")
        config.setdefault("decoding_type", "Eagle")
        config["max_draft_len"] = first
        config["draft_len_schedule"] = {str(start): length for start, _, length in rows}
    header = ["TensorRT-LLM speculative decoding, written by specdec-evolve (python -m evolve export)",
              *provenance.lines(), f"setting: {setting.label}", *([setting.note] if setting.note else []),
              "add the drafter (speculative_model) to speculative_config",
              "use: trtllm-serve MODEL --config FILE" if config else
              "plain decoding: run TensorRT-LLM without speculative_config"]
    return yaml_text(header, {"speculative_config": config} if config else {})


ENGINE = Engine("tensorrt-llm", "TensorRT-LLM", "trtllm-serve MODEL --config FILE (YAML)", KNOBS, KINDS, render,
                schedule=True, refusals=REFUSALS)

__all__ = ["ENGINE", "KNOBS", "render"]

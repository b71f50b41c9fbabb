"""TensorRT-LLM: a YAML file for ``trtllm-serve MODEL --config FILE`` (alias ``--extra_llm_api_options``) holding
``speculative_config``, checked against the source at commit 0004396 (TensorRT-LLM cannot be installed here: its
package is a stub that fetches the wheel from outside the package registry).

The engine's semantics the writer relies on, read in ``tensorrt_llm/llmapi/llm_args.py`` at NVIDIA/TensorRT-LLM
commit 0004396720054fd8e205cbf616f21f0b57c6b412 (:data:`FACTS`; :mod:`tests.test_engines_conformance` checks the
written files against them):

* ``DecodingBaseConfig.draft_len_schedule`` maps a batch size to a draft length, each key the *upper end* of a range
  ("{4:4, 8:2, 32:1}: batch sizes 1-4 use 4, 5-8 use 2, 9-32 use 1, 33+ use 0, speculation disabled"); its validator
  requires keys >= 1, lengths >= 0, the smallest key's length equal to ``max_draft_len`` and no length above it;
  ``max_concurrency`` and ``draft_len_schedule`` are mutually exclusive. The runtime lookup
  (``get_draft_len_for_batch_size`` in ``tensorrt_llm/_torch/speculative/utils.py``) takes the first key >= the
  batch size (``bisect_left``) and 0 above the largest key. :func:`schedule_length` is that lookup.
* ``EagleDecodingConfig`` (``decoding_type: Eagle``) requires ``max_draft_len`` > 0 and a ``speculative_model``;
  ``eagle_choices`` (node paths of a static tree, deprecated, to be removed in 1.4) sets ``max_draft_len`` to the
  tree's depth and ``max_total_draft_tokens`` to its node count.
* ``NGramDecodingConfig`` (``decoding_type: NGram``): prompt lookup with ``max_matching_ngram_size``, ``max_draft_len``
  > 0; ``DraftTargetDecodingConfig`` (``Draft_Target``): a draft model, ``max_draft_len`` > 0.
* ``MTPDecodingConfig`` (``decoding_type: MTP``): ``use_relaxed_acceptance_for_thinking``, ``relaxed_topk`` (> 0),
  ``relaxed_delta`` (>= 0), applied inside a reasoning model's thinking phase only (:mod:`heuristics.shipped`).

What it writes: a fixed draft length as ``max_draft_len`` (plain decoding, length 0, is no speculative_config); a
static tree as ``eagle_choices`` with ``max_draft_len`` its depth and ``max_total_draft_tokens`` its node count; a
member of the ``trt_relaxed`` family as MTP's relaxed acceptance; a per-batch-size schedule as ``draft_len_schedule``
keyed by each range's *end* (so every range runs its own length; the last range's end is where speculation stops),
``max_draft_len`` the length at batch size 1. The drafter follows the harvest's (prompt lookup: NGram; a draft model:
Draft_Target; else Eagle).
"""
from __future__ import annotations

from bisect import bisect_left

from evolve.engine.drafter_base import EngineFamily
from evolve.errors import InputError
from evolve.export.engines.base import Capabilities, Engine, Family, Knob, Provenance, Setting
from evolve.export.engines.shapes import tree_paths
from evolve.export.engines.text import check_schedule, header, merged, read_yaml_text, yaml_text
from heuristics.published import TRT_GRID
from heuristics.shipped import TOP_SLACK, trt_relaxed

COMMIT = "0004396720054fd8e205cbf616f21f0b57c6b412"
VERSION = f"source {COMMIT[:7]}"
SOURCE = f"tensorrt_llm/llmapi/llm_args.py (NVIDIA/TensorRT-LLM {COMMIT[:7]})"
RUNTIME = "tensorrt_llm/_torch/speculative/utils.py (NVIDIA/TensorRT-LLM, get_draft_len_for_batch_size)"
#: The engine's semantics, as read (the module doc): name -> (statement, where).
FACTS = {
    "draft_len_schedule keys": ("each key is the upper end of a batch-size range; above the largest key the draft "
                                "length is 0 (speculation disabled)", f"{SOURCE}, DecodingBaseConfig; {RUNTIME}"),
    "draft_len_schedule validation": ("keys >= 1, lengths >= 0, the smallest key's length equals max_draft_len, no "
                                      "length exceeds it", f"{SOURCE}, validate_draft_len_schedule_and_sort"),
    "Eagle max_draft_len": ("> 0 and speculative_model required", f"{SOURCE}, EagleDecodingConfig"),
    "eagle_choices": ("node paths; sets max_draft_len to the depth and max_total_draft_tokens to the node count",
                      f"{SOURCE}, EagleDecodingConfig.validate_eagle_config"),
}

KNOBS = (
    Knob("decoding_type", "str", "Eagle, Eagle3, MTP, Draft_Target, NGram, SA, User_Provided, ...", "required",
         SOURCE),
    Knob("max_draft_len", "int", "> 0 (Eagle, NGram, Draft_Target)", "None (required)", SOURCE),
    Knob("max_total_draft_tokens", "int", ">= max_draft_len", "max_draft_len (a chain)", SOURCE),
    Knob("draft_len_schedule", "dict", "{largest batch size of a range: draft length}; 0 above the largest key; the "
         "smallest key's length is max_draft_len", "None", SOURCE),
    Knob("max_concurrency", "int", "> 0: no speculation above this batch size; not with draft_len_schedule", "None",
         SOURCE),
    Knob("eagle_choices", "list", "node paths of a static tree, e.g. [[0], [0, 0], [1]] (deprecated)",
         "None (a chain)", SOURCE),
    Knob("max_matching_ngram_size", "int", "> 0 (NGram)", "2", SOURCE),
    Knob("use_relaxed_acceptance_for_thinking", "bool", "MTP", "False", SOURCE),
    Knob("relaxed_topk", "int", "> 0", "1", SOURCE),
    Knob("relaxed_delta", "float", ">= 0", "0.0", SOURCE),
)


def _length(length: int) -> dict:
    return {"decoding_type": "Eagle", "max_draft_len": length}


def _tree(widths: tuple[int, ...]) -> dict:
    paths = tree_paths(widths)
    return {"decoding_type": "Eagle", "max_draft_len": len(widths), "max_total_draft_tokens": len(paths),
            "eagle_choices": [list(p) for p in paths]}


def _relaxed(topk: float, delta: float) -> dict:
    return {"decoding_type": "MTP", "use_relaxed_acceptance_for_thinking": True, "relaxed_topk": int(topk),
            "relaxed_delta": delta}


FAMILY = Family(trt_relaxed, lambda c: [(c[0] + 0.5, round(c[2] - TOP_SLACK, 12)), (c[0] + 0.5, c[2] - TOP_SLACK)]
                if len(c) >= 3 else [], _relaxed, TRT_GRID)
CAPABILITIES = Capabilities(length=_length, static_tree=_tree, max_tree_nodes=1024, families=(FAMILY,),
                            lossless={"decoding_type": "MTP", "use_relaxed_acceptance_for_thinking": False},
                            schedule=True)


def _drafter(config: dict, provenance: Provenance) -> tuple[dict, str]:
    """``config`` with the harvest's drafter as its decoding type (a chain's), and what the user adds."""
    drafter = provenance.drafter
    if config.get("decoding_type") != "Eagle" or "eagle_choices" in config:
        return config, "add the drafter (speculative_model) to speculative_config"
    if drafter.lookup and drafter.ngram:
        return {**config, "decoding_type": "NGram", "max_matching_ngram_size": drafter.ngram[0]}, ""
    if drafter.family is EngineFamily.DRAFT_MODEL:
        return {**config, "decoding_type": "Draft_Target"}, "add the draft model (speculative_model) to speculative_config"
    return config, "add the drafter (speculative_model: an EAGLE head) to speculative_config"


def _schedule(config: dict, schedule) -> tuple[dict, list[str]]:
    rows = merged(check_schedule(schedule))
    first = rows[0][2]
    if first == 0:
        if any(length for _, _, length in rows):
            raise InputError("TensorRT-LLM's max_draft_len is the schedule's length at batch size 1 and must be > 0, "
                             "so a schedule may not start with plain decoding", param="schedule")
        return {}, ["the schedule tuned is plain decoding at every batch size listed"]
    if any(length > first for _, _, length in rows):
        raise InputError("TensorRT-LLM's max_draft_len is the schedule's length at batch size 1, so no later "
                         "length may exceed it", param="schedule")
    while len(rows) > 1 and rows[-1][2] == 0:  # above the largest key TensorRT-LLM drafts nothing
        rows = rows[:-1]
    config = {**(config or _length(first)), "max_draft_len": first,
              "draft_len_schedule": {str(end): length for _, end, length in rows}}
    return config, [f"draft_len_schedule keys are the largest batch size of each range; no speculation above "
                    f"{rows[-1][1]}"]


def render(setting: Setting, provenance: Provenance, schedule=None) -> str:
    """The YAML text of ``setting`` for ``trtllm-serve --config`` (see the module doc); ``schedule``: (start, end,
    length) triples written as ``draft_len_schedule`` keyed by range ends, ``max_draft_len`` the length at batch
    size 1; all zero: plain decoding.

    Raises: InputError (param ``schedule``) for a malformed schedule, one whose lengths exceed its first, or one
    starting at 0 that drafts later."""
    config = dict(setting.knobs)
    notes: list[str] = []
    if schedule is not None:
        config, more = _schedule(config, schedule)
        notes += more
    extra = ""
    if config:
        config, extra = _drafter(config, provenance)
    lines = header("TensorRT-LLM speculative decoding", f"the source at {COMMIT[:7]}", provenance, setting,
                   [*notes, *([extra] if extra else [])],
                   "use: trtllm-serve MODEL --config FILE" if config else
                   "use: plain decoding: run TensorRT-LLM without speculative_config")
    return yaml_text(lines, {"speculative_config": config} if config else {})


def schedule_length(text: str, batch: int) -> int:
    """The draft length TensorRT-LLM runs at ``batch`` concurrent requests from a file :func:`render` wrote, as
    ``get_draft_len_for_batch_size`` reads it (the first key >= ``batch``; 0 above the largest key); no schedule:
    ``max_draft_len``; no speculative_config: 0."""
    config = read_yaml_text(text).get("speculative_config", {})
    if "draft_len_schedule" not in config:
        return int(config.get("max_draft_len", 0)) if config.get("decoding_type") != "MTP" else 0
    keys = sorted(int(k) for k in config["draft_len_schedule"])
    i = bisect_left(keys, batch)
    return int(config["draft_len_schedule"][str(keys[i])]) if i < len(keys) else 0


ENGINE = Engine("tensorrt-llm", "TensorRT-LLM", "trtllm-serve MODEL --config FILE (YAML)", KNOBS, CAPABILITIES, render,
                VERSION, f"the semantics of its source at commit {COMMIT}, stated in this module (FACTS); the "
                "package cannot be installed here", schedule_length)

__all__ = ["COMMIT", "ENGINE", "FACTS", "KNOBS", "VERSION", "render", "schedule_length"]

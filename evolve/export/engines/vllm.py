"""vLLM: a YAML file for ``vllm serve MODEL --config FILE`` holding ``speculative-config``, checked against vLLM 0.33.0.

vLLM reads nested mappings of a ``--config`` YAML file as the JSON of the option (``load_config_file`` in
``vllm/utils/argparse_utils.py``), so the same mapping is what ``--speculative-config '{...}'`` and
``LLM(speculative_config={...})`` take; the header comment holds that flag line and the champion's provenance.
Every name is a field of ``SpeculativeConfig`` (``vllm/config/speculative.py``), which refuses unknown keys.

What it writes: a fixed draft length as ``num_speculative_tokens`` (> 0: plain decoding is no speculative-config at
all), and for an acceptance rule or a relaxation weight (no length of its own) the length the champion was scored
at (:attr:`evolve.export.engines.base.Provenance.length`), which vLLM requires; drafts verified as a block (the run's ``verify_with`` is block verification, or a relaxation weight of 0) as
``rejection_sample_method: block`` (Sun et al. 2024, arXiv 2403.10444), which only Model Runner V2 applies
(``vllm/v1/worker/gpu/spec_decode/rejection_sampler.py``; the V1 runner's ``vllm/v1/sample/rejection_sampler.py`` has
no block branch and verifies token by token), so the file's ``use:`` line sets ``VLLM_USE_V2_MODEL_RUNNER=1``, which
selects V2 (``VllmConfig.use_v2_model_runner``, ``vllm/config/vllm.py``); the standard rule as
``rejection_sample_method: standard``; a chain (a tree of width 1) as its draft length: 0.33.0 has no static tree
(``speculative_token_tree`` is not a field), so a wider tree is refused with the chain as nearest setting; a
per-batch-size schedule as ``num_speculative_tokens_per_batch_size`` (inclusive [start, end, K] ranges, K capped at
``num_speculative_tokens``: ``build_dynamic_sd_schedule_lookup``, ``vllm/v1/spec_decode/dynamic/utils.py``), which
vLLM drops with data parallelism and, on Model Runner V1, for methods other than ngram, eagle, eagle3, mtp,
draft_model and dflash (``VllmConfig._maybe_disable_dynamic_sd_*``).

The drafter follows the harvest's (the champion's dataset metadata): suffix decoding as ``method: suffix`` with its
four knobs (``suffix_decoding_max_tree_depth``, ``_max_spec_factor``, ``_min_token_prob`` tuned, the library's
``max_spec_offset`` not a vLLM field; ``_validate_suffix_decoding`` checks them; vLLM runs it on Model Runner V1 only,
``vllm/config/vllm.py``); prompt lookup as ``method: ngram`` with
``prompt_lookup_max``/``prompt_lookup_min``; a draft model as ``method: draft_model``; an EAGLE head as
``method: eagle3``; the model drafters with ``draft_sample_method: probabilistic`` (with vLLM's default ``greedy``
the drafts are the drafter's argmax and the ratio test treats them as one-hot, while the records this project
scores hold tokens sampled from the drafter).
"""
from __future__ import annotations

import json

from evolve.engine.drafter_base import EngineFamily
from evolve.export.engines.base import Capabilities, Engine, Knob, Provenance, Setting
from evolve.export.engines.text import check_schedule, header, merged, read_yaml_text, yaml_text

VERSION = "0.33.0"
SOURCE = f"vllm/config/speculative.py (vllm {VERSION})"
V2 = "VLLM_USE_V2_MODEL_RUNNER=1"
BLOCK_CONDITION = (f"block verification runs on Model Runner V2 only: start vLLM with {V2} (vllm/config/vllm.py); "
                   "the V1 runner verifies token by token")
SCHEDULE_CONDITION = ("the schedule holds with data_parallel_size 1, and on Model Runner V1 only for methods ngram, "
                      "eagle, eagle3, mtp, draft_model and dflash (vLLM drops it otherwise)")

KNOBS = (
    Knob("method", "str", "ngram, medusa, mlp_speculator, draft_model, suffix, eagle, eagle3, mtp, dflash, dspark, ...",
         "detected from `model`", SOURCE),
    Knob("num_speculative_tokens", "int", "> 0", "the draft model's n_predict, else required", SOURCE),
    Knob("prompt_lookup_max", "int", ">= 1", "required for ngram", SOURCE),
    Knob("prompt_lookup_min", "int", ">= 1", "1 for ngram", SOURCE),
    Knob("num_speculative_tokens_per_batch_size", "list", "[range_start, range_end, K], inclusive ranges from 1",
         "None", SOURCE),
    Knob("rejection_sample_method", "str", "standard, synthetic, block (Model Runner V2 only), fly", "standard",
         SOURCE),
    Knob("draft_sample_method", "str", "greedy, probabilistic", "greedy", SOURCE),
    Knob("enable_adaptive_verification", "bool", "method dspark only", "False", SOURCE),
    Knob("suffix_decoding_max_tree_depth", "int", ">= 1 (method suffix)", "24", SOURCE),
    Knob("suffix_decoding_max_cached_requests", "int", ">= 0 (method suffix; 0 disables the global cache)", "10000",
         SOURCE),
    Knob("suffix_decoding_max_spec_factor", "float", ">= 0 (method suffix)", "1.0", SOURCE),
    Knob("suffix_decoding_min_token_prob", "float", "[0, 1] (method suffix)", "0.1", SOURCE),
)


def _length(length: int) -> dict:
    return {"num_speculative_tokens": length, "rejection_sample_method": "standard"}


def _suffix(length: int, depth: int, factor: float, min_prob: float) -> dict:
    """``method: suffix`` with its knobs (``_validate_suffix_decoding``: depth >= 1, factor >= 0, min_prob in
    [0, 1])."""
    return {"method": "suffix", "num_speculative_tokens": length, "suffix_decoding_max_tree_depth": depth,
            "suffix_decoding_max_spec_factor": factor, "suffix_decoding_min_token_prob": min_prob}


CAPABILITIES = Capabilities(length=_length, block={"rejection_sample_method": "block"}, block_condition=BLOCK_CONDITION,
                            lossless={"rejection_sample_method": "standard"}, schedule=True, suffix=_suffix)


def _drafter(provenance: Provenance) -> tuple[dict, str]:
    """The drafter's keys and what the user adds, from the harvest's drafter."""
    drafter = provenance.drafter
    if drafter.family is EngineFamily.SUFFIX:
        return {"method": "suffix"}, ""
    if drafter.lookup and drafter.ngram:
        return {"method": "ngram", "prompt_lookup_max": drafter.ngram[0], "prompt_lookup_min": drafter.ngram[1]}, ""
    sampled = {"draft_sample_method": "probabilistic"}
    if drafter.family is EngineFamily.DRAFT_MODEL:
        return {"method": "draft_model", **sampled}, "add the draft model (model: DRAFT) to speculative-config"
    if drafter.family is EngineFamily.EAGLE_HEAD:
        return {"method": "eagle3", **sampled}, "add the EAGLE-3 head (model: HEAD) to speculative-config"
    return sampled, "add the drafter (method, model) to speculative-config"


def render(setting: Setting, provenance: Provenance, schedule=None) -> str:
    """The YAML text of ``setting`` for ``vllm serve --config`` (see the module doc); ``schedule``: (start, end,
    length) triples written as ``num_speculative_tokens_per_batch_size``, ``num_speculative_tokens`` their longest
    length; a schedule of length 0 at every batch size is plain decoding (no speculative-config: vLLM requires
    ``num_speculative_tokens`` > 0). Raises InputError for a malformed schedule."""
    config = dict(setting.knobs)
    notes: list[str] = []
    if schedule is not None:
        rows = merged(check_schedule(schedule))
        longest = max(length for _, _, length in rows)
        if longest == 0:
            config = {}
            notes.append("the schedule tuned is plain decoding at every batch size listed")
        else:
            base = {k: v for k, v in config.items() if k != "num_speculative_tokens"} or _length(longest)
            config = {**base, "num_speculative_tokens": longest,
                      "num_speculative_tokens_per_batch_size": [list(r) for r in rows]}
            notes.append(SCHEDULE_CONDITION)
    extra = ""
    if config:
        drafter, extra = _drafter(provenance)
        config = {**drafter, **config}
        if "num_speculative_tokens" not in config and provenance.length is not None:
            config["num_speculative_tokens"] = provenance.length
            notes.append(f"num_speculative_tokens {provenance.length}: the draft length the champion was scored at")
        elif "num_speculative_tokens" not in config:
            extra = f"{extra}; " if extra else ""
            extra += ("add num_speculative_tokens (the draft length to run; this rule has no run recording one) to "
                      "speculative-config")
    block = config.get("rejection_sample_method") == "block"
    env = f"{V2} " if block else ""
    use = (f"{env}vllm serve MODEL --config FILE, or: {env}vllm serve MODEL --speculative-config "
           f"'{json.dumps(config)}'" if config else "plain decoding: run vLLM without --speculative-config")
    lines = header("vLLM speculative decoding", f"vLLM {VERSION}", provenance, setting,
                   [*notes, *([extra] if extra else [])], f"use: {use}")
    return yaml_text(lines, {"speculative-config": config} if config else {})


def schedule_length(text: str, batch: int) -> int:
    """The draft length vLLM runs at ``batch`` concurrent requests from a file :func:`render` wrote, as
    ``build_dynamic_sd_schedule_lookup`` reads it (the range holding ``batch``; a gap or the tail after the last range
    carries the previous length; every length capped at ``num_speculative_tokens``); no speculative-config: 0."""
    config = read_yaml_text(text).get("speculative-config", {})
    top = int(config.get("num_speculative_tokens", 0))
    rows = sorted(config.get("num_speculative_tokens_per_batch_size") or [], key=lambda r: r[0])
    if not rows:
        return top
    found = rows[0][2]
    for start, end, length in rows:
        if start > batch:
            break
        found = length
    return min(top, int(found))


ENGINE = Engine("vllm", "vLLM", "vllm serve MODEL --config FILE (YAML)", KNOBS, CAPABILITIES, render, VERSION,
                "SpeculativeConfig and the --config loader of the released wheel, installed without its GPU "
                "dependencies", schedule_length)

__all__ = ["ENGINE", "KNOBS", "VERSION", "render", "schedule_length"]

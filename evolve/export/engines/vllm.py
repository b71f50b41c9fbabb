"""vLLM: a YAML file for ``vllm serve MODEL --config FILE`` holding ``speculative-config``.

vLLM reads nested mappings of a ``--config`` YAML file as the JSON of the option (``load_config_file`` in
``vllm/utils/argparse_utils.py``), so the same mapping is what ``--speculative-config '{...}'`` and
``LLM(speculative_config={...})`` take; the header comment holds that flag line and the champion's provenance.
Every name is checked in ``vllm/config/speculative.py`` (``SpeculativeConfig``); the field set differs between
versions, so the table names the commit read.

What it writes: a fixed draft length as ``num_speculative_tokens``; a policy verified as a block (its run's
``verify_with`` is block verification), or a relaxation weight of 0, as ``rejection_sample_method: block`` (block
verification, Sun et al. 2024, arXiv 2403.10444); the standard rule as ``rejection_sample_method: standard``; a static
tree as ``speculative_token_tree`` (node paths, breadth first) with ``num_speculative_tokens`` its node count; a
per-batch-size schedule as ``num_speculative_tokens_per_batch_size``. Every configuration sets
``draft_sample_method: probabilistic``: with vLLM's default ``greedy`` the drafts are the drafter's argmax and the
ratio test treats them as one-hot, while the records this project scores hold tokens sampled from the drafter.
"""
from __future__ import annotations

import json

from evolve.export.engines.base import (Engine, KindSupport, Knob, Provenance, Setting, check_schedule, constant_value,
                                        tree_paths, yaml_text)
from evolve.export.engines.families import block_rule
from evolve.export.engines.supports import length_support, static_tree_support, threshold_support
from evolve.export.exporter import layout
from evolve.kinds.relaxation import RELAXATION
from evolve.kinds.threshold import THRESHOLD
from evolve.kinds.tree_shape import TREE_SHAPE
from evolve.kinds.verify_length import VERIFY_LENGTH

SOURCE = "vllm/config/speculative.py"
NEW = f"{SOURCE} (vllm-project/vllm 002e77c)"
OLD = f"{SOURCE} (vllm-project/vllm f19b16d; not in 002e77c)"

KNOBS = (
    Knob("method", "str", "ngram, medusa, mlp_speculator, draft_model, suffix, eagle, eagle3, mtp, dflash, ...",
         "detected from `model`", NEW),
    Knob("num_speculative_tokens", "int", "> 0", "the draft model's n_predict, else required", NEW),
    Knob("prompt_lookup_max", "int", ">= 1", "5 for ngram", NEW),
    Knob("prompt_lookup_min", "int", ">= 1", "5 for ngram", NEW),
    Knob("num_speculative_tokens_per_batch_size", "list", "[range_start, range_end, K], inclusive ranges", "None",
         NEW),
    Knob("rejection_sample_method", "str", "standard, synthetic, block", "standard", NEW),
    Knob("draft_sample_method", "str", "greedy, probabilistic", "greedy", NEW),
    Knob("enable_adaptive_verification", "bool", "method dspark only", "False", NEW),
    Knob("speculative_token_tree", "str", "a list of node paths, e.g. [(0,), (0, 0), (0, 1)]",
         "None (a chain)", OLD),
)


def _config(**values) -> dict:
    return {"draft_sample_method": "probabilistic", **values}


def _length(length: int, block: bool) -> dict:
    if length == 0:
        return {}
    return _config(num_speculative_tokens=length, rejection_sample_method="block" if block else "standard")


def _tree(widths: tuple[int, ...]) -> dict:
    paths = tree_paths(widths)
    if not paths:
        return {}
    return _config(num_speculative_tokens=len(paths), speculative_token_tree=str(paths))


def _relaxation_exact(rule, gamma):
    value = constant_value(rule, layout(rule))
    if value is None or value != 0.0:
        return None
    return Setting("block, w=0", block_rule(), _config(rejection_sample_method="block"))


KINDS = {
    THRESHOLD: threshold_support((), _config(rejection_sample_method="standard"),
                                 "the standard rule (rejection_sample_method: standard)"),
    RELAXATION: KindSupport(_relaxation_exact,
                            lambda rule, gamma, depth: [Setting("block, w=0", block_rule(),
                                                                _config(rejection_sample_method="block"))],
                            lambda gamma: None, "lossless block verification (rejection_sample_method: block)"),
    VERIFY_LENGTH: length_support(_length, "a fixed num_speculative_tokens", block=True),
    TREE_SHAPE: static_tree_support(_tree, "a static speculative_token_tree"),
}


def render(setting: Setting, provenance: Provenance, schedule=None) -> str:
    """The YAML text of ``setting`` for ``vllm serve --config`` (see the module doc); ``schedule``: (start, end,
    length) triples written as ``num_speculative_tokens_per_batch_size``, ``num_speculative_tokens`` their longest
    length. Raises InputError for a malformed schedule (:func:`evolve.export.engines.base.check_schedule`)."""
    config = dict(setting.knobs)
    if schedule is not None:
        rows = check_schedule(schedule)
        config = _config(**{k: v for k, v in config.items() if k != "draft_sample_method"})
        config["num_speculative_tokens"] = max(length for _, _, length in rows)
        config["num_speculative_tokens_per_batch_size"] = [list(r) for r in rows]
    body = {"speculative-config": config} if config else {}
    use = (f"vllm serve MODEL --config FILE, or: vllm serve MODEL --speculative-config '{json.dumps(config)}'"
           if config else "plain decoding: run vLLM without --speculative-config")
    header = ["vLLM speculative decoding, written by specdec-evolve (python -m evolve export)",
              *provenance.lines(), f"setting: {setting.label}", *([setting.note] if setting.note else []),
              "add the drafter (method, model) to speculative-config", f"use: {use}"]
    return yaml_text(header, body)


ENGINE = Engine("vllm", "vLLM", "vllm serve MODEL --config FILE (YAML)", KNOBS, KINDS, render, schedule=True)

__all__ = ["ENGINE", "KNOBS", "render"]

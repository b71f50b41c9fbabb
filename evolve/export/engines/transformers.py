"""transformers: a GenerationConfig-compatible JSON of ``generate()`` keyword arguments for assisted generation
(``model.generate(**inputs, assistant_model=DRAFT, **kwargs)``, or ``GenerationConfig.from_json_file``).

Every name is checked in ``src/transformers/generation/configuration_utils.py`` (``GenerationConfig``), the stop in
``src/transformers/generation/stopping_criteria.py`` (``ConfidenceCriteria``) and the loop in
``src/transformers/generation/candidate_generator.py`` (``AssistedCandidateGenerator``). What it writes: a fixed draft
length L as ``num_assistant_tokens`` L with ``num_assistant_tokens_schedule`` ``constant`` and
``assistant_confidence_threshold`` 0; a capped confidence stop (stop after a drafted token whose probability under
the assistant is below h, at most n drafts) as ``num_assistant_tokens`` n with the threshold h. ``ConfidenceCriteria``
stops after the assistant's token whose probability is below the threshold, the token kept, as a verification-length
policy reading ``draft_top_prob`` does (the assistant decodes greedily unless its own generation config samples).
Caveat written into the file: with scikit-learn installed, ``AssistedCandidateGenerator`` re-tunes
``assistant_confidence_threshold`` during generation from the acceptances it sees (an ROC cost), so the threshold
stays as written only without scikit-learn. A tree shape runs as a chain. JSON has no comments: the provenance is the
``_provenance`` key (remove it before passing the rest to ``generate``).
"""
from __future__ import annotations

import json

from evolve.export.engines.base import Engine, Knob, Provenance, Setting
from evolve.export.engines.families import capped_confidence_rule
from evolve.export.engines.supports import chain_tree_support, length_support, threshold_support
from evolve.kinds.relaxation import RELAXATION
from evolve.kinds.threshold import THRESHOLD
from evolve.kinds.tree_shape import TREE_SHAPE
from evolve.kinds.verify_length import VERIFY_LENGTH

CONFIG = "src/transformers/generation/configuration_utils.py (huggingface/transformers)"
#: transformers 4.x's defaults (``GenerationConfig.__init__``); 5.x's GenerationConfig leaves them None.
DEFAULT_TOKENS, DEFAULT_THRESHOLD = 20, 0.4
SKLEARN_NOTE = ("with scikit-learn installed, transformers re-tunes assistant_confidence_threshold during generation "
                "(AssistedCandidateGenerator.update_candidate_strategy); the threshold holds as written without it")

KNOBS = (
    Knob("assistant_model", "model", "a drafter sharing the tokenizer", "None (off)", CONFIG),
    Knob("num_assistant_tokens", "int", ">= 1", "20 (4.x; None in 5.x's GenerationConfig)", CONFIG),
    Knob("num_assistant_tokens_schedule", "str", "constant, heuristic, heuristic_transient",
         "constant (4.x; None in 5.x's GenerationConfig)", CONFIG),
    Knob("assistant_confidence_threshold", "float", "[0, 1]; 0 never stops",
         "0.4 (4.x; None in 5.x's GenerationConfig)", CONFIG),
    Knob("prompt_lookup_num_tokens", "int", ">= 1 (prompt lookup instead of an assistant)", "None", CONFIG),
    Knob("max_matching_ngram_size", "int", ">= 1", "None (2 in the prompt lookup generator)", CONFIG),
)


def _length(length: int, block: bool = False) -> dict:
    if length == 0:
        return {}
    return {"num_assistant_tokens": length, "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0}


def _confidence(h: float, n: int) -> dict:
    return {"num_assistant_tokens": n, "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": h}


def _default(gamma: int) -> Setting:
    return Setting(f"h={DEFAULT_THRESHOLD:g},n={DEFAULT_TOKENS}",
                   capped_confidence_rule(DEFAULT_THRESHOLD, DEFAULT_TOKENS), {}, SKLEARN_NOTE)


KINDS = {
    THRESHOLD: threshold_support((), {}, "the standard rule (speculative sampling of assisted generation)"),
    VERIFY_LENGTH: length_support(_length, "num_assistant_tokens with assistant_confidence_threshold",
                                  confidence=_confidence, default=_default, cap=DEFAULT_TOKENS),
    TREE_SHAPE: chain_tree_support(_length, "a chain with a fixed num_assistant_tokens"),
}

#: The nearest setting of a kind this engine cannot run.
REFUSALS = {RELAXATION: "lossless token-wise verification: export the standard rule (standard_rejection)"}


def render(setting: Setting, provenance: Provenance, schedule=None) -> str:
    """The JSON text of ``setting``'s generate() keyword arguments with a ``_provenance`` key."""
    notes = [setting.note] if setting.note else []
    if "assistant_confidence_threshold" in setting.knobs and setting.knobs["assistant_confidence_threshold"] > 0:
        notes.append(SKLEARN_NOTE)
    body = {**setting.knobs, "_provenance": [*provenance.lines(), f"setting: {setting.label}", *notes,
                                             "use: model.generate(**inputs, assistant_model=DRAFT, **kwargs) "
                                             "without _provenance" if setting.knobs else
                                             "plain decoding: generate without an assistant"]}
    return json.dumps(body, indent=2) + "\n"


ENGINE = Engine("transformers", "transformers", "generate() keyword arguments (JSON)", KNOBS, KINDS, render, refusals=REFUSALS)

__all__ = ["ENGINE", "KNOBS", "render"]

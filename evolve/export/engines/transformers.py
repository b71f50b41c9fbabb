"""transformers: a JSON file of assisted-generation settings, checked against transformers 5.24.0's ``generate()``.

Where transformers reads them (``src/transformers/generation/candidate_generator.py``): ``AssistedCandidateGenerator``
takes ``num_assistant_tokens``, ``num_assistant_tokens_schedule`` and ``assistant_confidence_threshold`` from the
*assistant model's* own ``generation_config`` (a deep copy of it, completed with the library defaults: 20 tokens,
schedule ``constant``, threshold 0.4), not from the keyword arguments of ``generate()``; so the file is applied to the
drafter: ``draft.generation_config.update(**settings)`` (``GenerationConfig.update``), then
``model.generate(**inputs, assistant_model=draft)``. A prompt-lookup harvest is written instead as the keyword
arguments of ``generate()`` that select transformers' own prompt lookup (``prompt_lookup_num_tokens``,
``max_matching_ngram_size``: ``PromptLookupCandidateGenerator``, which backs off from the longest n-gram to 1 and
takes the earliest match, the nearest drafter to the harvest's, not the same).

What it writes: a fixed draft length L as ``num_assistant_tokens`` L with ``num_assistant_tokens_schedule``
``constant`` and ``assistant_confidence_threshold`` 0 (no stop: ``ConfidenceCriteria`` in ``stopping_criteria.py``
stops after the assistant's token whose probability is below the threshold, the token kept); a capped confidence stop
(stop after a drafted token whose probability under the assistant is below h, at most n drafts) as
``num_assistant_tokens`` n with the threshold h, under the condition written into the file: with scikit-learn
importable (``is_sklearn_available``), ``AssistedCandidateGenerator.update_candidate_strategy`` re-tunes a non-zero
threshold during generation from the acceptances it sees (an ROC cost), so the threshold stays as written only
without scikit-learn. A tree shape runs as a chain. JSON has no comments: the provenance is the ``_provenance`` key
(remove it before applying the rest).
"""
from __future__ import annotations

import json

from evolve.export.engines.base import Capabilities, Engine, Knob, Provenance, Setting
from evolve.export.engines.text import header

VERSION = "5.24.0"
CONFIG = f"src/transformers/generation/configuration_utils.py (transformers {VERSION})"
GENERATOR = f"src/transformers/generation/candidate_generator.py (transformers {VERSION})"
#: The library defaults the candidate generator completes the assistant's generation config with
#: (``GenerationConfig._get_default_generation_params``).
DEFAULT_TOKENS, DEFAULT_THRESHOLD = 20, 0.4
SKLEARN_CONDITION = ("the threshold holds as written only where scikit-learn is not importable: with it, "
                     "transformers re-tunes assistant_confidence_threshold during generation "
                     "(AssistedCandidateGenerator.update_candidate_strategy)")
APPLY = ("settings = json.load(open(FILE)); settings.pop('_provenance'); draft.generation_config.update(**settings); "
         "model.generate(**inputs, assistant_model=draft)")
LOOKUP = ("settings = json.load(open(FILE)); settings.pop('_provenance'); "
          "model.generate(**inputs, **settings)")

KNOBS = (
    Knob("assistant_model", "model", "a drafter sharing the tokenizer", "None (off)", CONFIG),
    Knob("num_assistant_tokens", "int", ">= 1; read from the assistant's generation_config", "20", GENERATOR),
    Knob("num_assistant_tokens_schedule", "str", "constant, heuristic, heuristic_transient", "constant", GENERATOR),
    Knob("assistant_confidence_threshold", "float", "[0, 1]; 0 never stops; re-tuned with scikit-learn", "0.4",
         GENERATOR),
    Knob("prompt_lookup_num_tokens", "int", ">= 1 (prompt lookup instead of an assistant; a generate() argument)",
         "None", CONFIG),
    Knob("max_matching_ngram_size", "int", ">= 1", "2 (in the prompt lookup generator)", GENERATOR),
)


def _length(length: int) -> dict:
    return {"num_assistant_tokens": length, "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0}


def _confidence(h: float, n: int) -> dict:
    return {"num_assistant_tokens": n, "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": h}


CAPABILITIES = Capabilities(length=_length, confidence=_confidence, confidence_condition=SKLEARN_CONDITION,
                            default_confidence=(DEFAULT_THRESHOLD, DEFAULT_TOKENS))


def render(setting: Setting, provenance: Provenance, schedule=None) -> str:
    """The JSON text of ``setting`` with a ``_provenance`` key (see the module doc for where each key goes)."""
    knobs = dict(setting.knobs)
    notes: list[str] = []
    if knobs and provenance.drafter.lookup and provenance.drafter.ngram:
        if knobs.get("assistant_confidence_threshold"):
            notes.append("prompt lookup has no confidence: transformers' lookup drafts the whole match")
        knobs = {"prompt_lookup_num_tokens": knobs["num_assistant_tokens"],
                 "max_matching_ngram_size": provenance.drafter.ngram[0]}
        use = f"use: (prompt lookup, no assistant) {LOOKUP}"
    elif knobs:
        use = f"use: {APPLY}"
    else:
        use = "use: plain decoding: generate without an assistant"
    body = {**knobs, "_provenance": header("transformers assisted generation", f"transformers {VERSION}", provenance,
                                           setting, notes, use)}
    return json.dumps(body, indent=2) + "\n"


ENGINE = Engine("transformers", "transformers", "assistant generation_config settings (JSON)", KNOBS, CAPABILITIES,
                render, VERSION, "GenerationConfig and a real generate() with the assistant's generation_config")

__all__ = ["APPLY", "DEFAULT_THRESHOLD", "DEFAULT_TOKENS", "ENGINE", "KNOBS", "VERSION", "render"]

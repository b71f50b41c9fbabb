"""llama.cpp: the exact ``llama-server`` (or ``llama-cli``) flags, one line under a comment header, checked against
the llama.cpp source llama-cpp-python 0.3.36 vendors (ggml-org/llama.cpp 0c1e570).

Every flag and default is checked in ``common/arg.cpp`` and ``common/common.h`` (``common_params_speculative``), and
the drafting in ``common/speculative.cpp``. llama.cpp speculates only with a speculation type: the default is
``none`` (``common_params_speculative::types``), and a draft GGUF given with ``-md`` sets one only when its metadata
names an MTP, DFlash or DSpark head (``common_speculative_types_from_gguf``), so an ordinary draft model loads and is
never used unless ``--spec-type`` is given. What it writes: a fixed draft length L with a draft model as
``--spec-type draft-simple --spec-draft-n-max L --spec-draft-n-min 0 --spec-draft-p-min 0`` (p-min 0: the loop never
stops early; n-min 0: no short draft is dropped); with the harvest's prompt lookup as ``--spec-type ngram-simple
--spec-ngram-simple-size-n N --spec-ngram-simple-size-m L --spec-ngram-simple-min-hits 1`` (llama.cpp's n-gram
drafter without a draft model: the latest earlier match of the last N tokens, followed by up to L tokens; N is the
harvest's longest n-gram, and llama.cpp does not back off to shorter n-grams, so this is the nearest drafter, not the
same); with an EAGLE head as ``--spec-type draft-eagle3``; no drafting (L = 0) as no flag at all (plain decoding). A
tree shape runs as a chain (a static tree of width 1).

Not expressible: the confidence stop of ``--spec-draft-p-min`` p > 0. The loop tests the drafter's top probability of
the token it has just drafted and drops that token when it is below p (it is neither verified nor kept, though its
draft step was paid), where a verification-length policy decides before drafting from the last kept token; so no
rule over the records' features gives llama.cpp's lengths and costs exactly, and the tuned settings are the fixed
lengths. llama.cpp drafts greedily (the drafter's argmax) and accepts a drafted token when the target's sample
equals it, the standard rule for a point-mass draft (:mod:`heuristics.shipped` says how that maps onto records of
sampled drafts).
"""
from __future__ import annotations

from evolve.engine.drafter_base import EngineFamily
from evolve.errors import InputError
from evolve.export.engines.base import Capabilities, Engine, Knob, Provenance, Setting
from evolve.export.engines.text import comment, flags, header

COMMIT = "0c1e57098"
VERSION = f"{COMMIT[:7]} (llama-cpp-python 0.3.36)"
ARG = f"common/arg.cpp (ggml-org/llama.cpp {COMMIT[:7]})"
COMMON = f"common/common.h (ggml-org/llama.cpp {COMMIT[:7]})"
#: llama.cpp's default ``--spec-draft-n-max`` (``common_params_speculative_draft::n_max``).
DEFAULT_N_MAX = 3
#: The longest m-gram ``--spec-ngram-simple-size-m`` takes (``common/arg.cpp``: 1..1024).
MAX_NGRAM_DRAFT = 1024

KNOBS = (
    Knob("--spec-type", "str", "none, draft-simple, draft-eagle3, draft-mtp, draft-dflash, draft-dspark, ngram-simple, "
         "ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache (comma-separated)", "none", f"{ARG}; {COMMON}"),
    Knob("--spec-draft-model (-md)", "str", "a GGUF file", "unused", ARG),
    Knob("--spec-draft-n-max", "int", ">= 0", str(DEFAULT_N_MAX), f"{ARG}; {COMMON}"),
    Knob("--spec-draft-n-min", "int", ">= 0: drafts shorter than this are dropped", "0", f"{ARG}; {COMMON}"),
    Knob("--spec-draft-p-min (--draft-p-min)", "float", "[0, 1]: stop when the top probability is below it", "0.0",
         f"{ARG}; {COMMON}"),
    Knob("--spec-ngram-simple-size-n", "int", "1..1024: the n-gram looked up", "12", f"{ARG}; {COMMON}"),
    Knob("--spec-ngram-simple-size-m", "int", "1..1024: the tokens drafted after a match", "48", f"{ARG}; {COMMON}"),
    Knob("--spec-ngram-simple-min-hits", "int", ">= 1", "1", f"{ARG}; {COMMON}"),
)


def _length(length: int) -> dict:
    return {"--spec-type": "draft-simple", "--spec-draft-n-max": length, "--spec-draft-n-min": 0,
            "--spec-draft-p-min": 0}


CAPABILITIES = Capabilities(length=_length, default_length=DEFAULT_N_MAX)


def drafted(knobs: dict, provenance: Provenance) -> tuple[dict, str]:
    """``knobs`` (a draft-simple length) for the harvest's drafter, and the model flags of the ``use:`` line.
    Raises InputError for a prompt-lookup length llama.cpp's n-gram drafter does not take."""
    length = int(knobs["--spec-draft-n-max"])
    drafter = provenance.drafter
    if drafter.lookup and drafter.ngram:
        if length > MAX_NGRAM_DRAFT:
            raise InputError(f"llama.cpp's ngram-simple drafts at most {MAX_NGRAM_DRAFT} tokens a step (its m-gram "
                             f"size); the setting drafts {length}")
        return {"--spec-type": "ngram-simple", "--spec-ngram-simple-size-n": drafter.ngram[0],
                "--spec-ngram-simple-size-m": length, "--spec-ngram-simple-min-hits": 1}, "-m MODEL"
    if drafter.family is EngineFamily.EAGLE_HEAD:
        return {**knobs, "--spec-type": "draft-eagle3"}, "-m MODEL -md EAGLE3_HEAD"
    return knobs, "-m MODEL -md DRAFT"


def render(setting: Setting, provenance: Provenance, schedule=None) -> str:
    """The flag line of ``setting`` under its provenance header (``#`` comments); the drafter follows the harvest's.
    Raises InputError as :func:`drafted`."""
    knobs = dict(setting.knobs)
    if knobs:
        knobs, models = drafted(knobs, provenance)
        use = f"use: llama-server {models} $(grep -v '^#' FILE)"
    else:
        use = "use: plain decoding: llama-server -m MODEL (no draft model, no --spec-type)"
    return f"{comment(header('llama.cpp server flags', f'llama.cpp {VERSION}', provenance, setting, [], use))}\n" \
           f"{flags(knobs)}\n"


ENGINE = Engine("llama.cpp", "llama.cpp", "llama-server flags (one line)", KNOBS, CAPABILITIES, render, VERSION,
                "common_params_parse and common_speculative_n_max of the vendored source, compiled")

__all__ = ["COMMIT", "DEFAULT_N_MAX", "ENGINE", "KNOBS", "MAX_NGRAM_DRAFT", "VERSION", "drafted", "render"]

"""llama.cpp: the exact ``llama-server`` flags, one line under a comment header.

Every flag and default is checked in ``common/arg.cpp`` and ``common/common.h`` (``common_params_speculative_draft``),
and the drafting loop in ``common/speculative.cpp`` (``common_speculative_impl_draft_simple::draft``). What it writes:
a fixed draft length L as ``--spec-draft-n-max L --spec-draft-n-min 0 --spec-draft-p-min 0`` (with p-min 0 the
loop never stops early: it stops when the drafter's top probability is below p-min); no drafting as
``--spec-type none``. A tree shape runs as a chain (a static tree of width 1).

Not expressible: the confidence stop of ``--spec-draft-p-min`` p > 0. The loop tests the drafter's top probability of
the token it has just drafted and drops that token when it is below p (it is neither verified nor kept, though its
draft step was paid), where a verification-length policy decides before drafting from the last kept token; so no
rule over the records' features gives llama.cpp's lengths and costs exactly, and the tuned settings are the fixed
lengths. llama.cpp drafts greedily (the drafter's argmax) and accepts a drafted token when the target's sample
equals it, the standard rule for a point-mass draft (:mod:`heuristics.shipped` says how that maps onto records of
sampled drafts).
"""
from __future__ import annotations

from evolve.export.engines.base import Engine, Knob, Provenance, Setting, comment, flags
from evolve.export.engines.families import fixed_length_rule, static_tree_rule
from evolve.export.engines.supports import chain_tree_support, length_support, threshold_support
from evolve.kinds.relaxation import RELAXATION
from evolve.kinds.threshold import THRESHOLD
from evolve.kinds.tree_shape import TREE_SHAPE
from evolve.kinds.verify_length import VERIFY_LENGTH

ARG = "common/arg.cpp (ggml-org/llama.cpp 0017d6f)"
COMMON = "common/common.h (ggml-org/llama.cpp 001d906)"
#: llama.cpp's default ``--spec-draft-n-max`` (``common_params_speculative_draft::n_max``).
DEFAULT_N_MAX = 3

KNOBS = (
    Knob("--spec-type", "str", "none, draft-simple, draft-eagle3, draft-mtp, draft-dflash, ngram-simple, ngram-mod, "
         "... (comma-separated)", "none", ARG),
    Knob("--spec-draft-model (-md)", "str", "a GGUF file", "unused", ARG),
    Knob("--spec-draft-n-max", "int", ">= 0", str(DEFAULT_N_MAX), f"{ARG}; {COMMON}"),
    Knob("--spec-draft-n-min", "int", ">= 0: drafts shorter than this are dropped", "0", f"{ARG}; {COMMON}"),
    Knob("--spec-draft-p-min (--draft-p-min)", "float", "[0, 1]: stop when the top probability is below it", "0.0",
         f"{ARG}; {COMMON}"),
    Knob("--spec-draft-p-split (--draft-p-split)", "float", "[0, 1]", "0.1", f"{ARG}; {COMMON}"),
)


def _length(length: int, block: bool = False) -> dict:
    if length == 0:
        return {"--spec-type": "none"}
    return {"--spec-draft-n-max": length, "--spec-draft-n-min": 0, "--spec-draft-p-min": 0}


def _default(gamma: int) -> Setting:
    return Setting(f"length={DEFAULT_N_MAX}", fixed_length_rule(DEFAULT_N_MAX), {})


def _default_chain(gamma: int) -> Setting:
    return Setting(f"depth={DEFAULT_N_MAX}", static_tree_rule((1,) * DEFAULT_N_MAX), {})


KINDS = {
    THRESHOLD: threshold_support((), {}, "the standard rule (llama.cpp's own verification)"),
    VERIFY_LENGTH: length_support(_length, "a fixed --spec-draft-n-max (p-min 0)", default=_default),
    TREE_SHAPE: chain_tree_support(_length, "a chain with a fixed --spec-draft-n-max", default=_default_chain),
}

#: The nearest setting of a kind this engine cannot run.
REFUSALS = {RELAXATION: "lossless token-wise verification: export the standard rule (standard_rejection)"}


def render(setting: Setting, provenance: Provenance, schedule=None) -> str:
    """The flag line of ``setting`` under its provenance header (``#`` comments)."""
    header = ["llama.cpp server flags, written by specdec-evolve (python -m evolve export)", *provenance.lines(),
              f"setting: {setting.label}", *([setting.note] if setting.note else []),
              "use: llama-server -m MODEL -md DRAFT $(grep -v '^#' FILE)"]
    return f"{comment(header)}\n{flags(dict(setting.knobs))}\n"


ENGINE = Engine("llama.cpp", "llama.cpp", "llama-server flags (one line)", KNOBS, KINDS, render, refusals=REFUSALS)

__all__ = ["ENGINE", "KNOBS", "DEFAULT_N_MAX", "render"]

"""``python -m evolve run --target-engine NAME``: a search told up front which engine will run its champion, so that
it reads only what that engine's drafter gives before each draft step.

A verification-length policy exported into llama-cpp-python runs as a draft model inside ``Llama.generate``
(:mod:`evolve.export.engines.llama_cpp_python`), where the decision before each draft step sees only the columns
the module's drafter (the dataset's: prompt lookup or suffix decoding) and the text's history give (its
:attr:`evolve.export.engines.base.Capabilities.step_columns`);
a policy reading another column (``draft_prob``, the target's) is refused at export, after the search. With the target
engine named, the run's features are those columns (``auto``) or are checked to be among them, and a kind the engine
cannot run is refused before anything is evolved.
"""
from __future__ import annotations

from dataclasses import replace

from evolve.engine.drafter_base import EngineFamily
from evolve.errors import InputError
from evolve.export.engines.draft_models import DRAFT_MODELS
from evolve.export.engines.deploy import harvest_drafter
from heuristics.length_policies import LOOP_VERIFIERS

#: The engines a run can target: name -> the :class:`evolve.export.engines.base.Engine` whose step columns bound the
#: features (the draft-model targets of ``python -m evolve export``).
TARGET_ENGINES = {name: m.ENGINE for name, m in DRAFT_MODELS.items()}


def for_engine(cfg, name: str):
    """``cfg`` (a :class:`evolve.search.config.RunConfig`) with its features bounded by engine ``name`` (module doc):
    ``auto`` becomes the engine's step columns for the dataset's drafter; a list is kept when every feature is among
    them.

    Raises: InputError (one line) for an unknown engine (parameter ``target_engine``), a kind the engine does not run
    (parameter ``evolve``), a lossy verifier (parameter ``verify_with``), a dataset drafted by a drafter the engine's
    module does not run (parameter ``data``; a dataset naming no drafter is read as prompt lookup's), or a feature it
    cannot give (parameter ``features``, naming the feature, the engine and what it gives)."""
    if name not in TARGET_ENGINES:
        raise InputError(f"no target engine '{name}' (choose from {', '.join(TARGET_ENGINES)})", param="target_engine")
    engine = TARGET_ENGINES[name]
    if engine.support(cfg.program_kind) is None:
        raise InputError(f"{name} runs per-draft-step policies (verify-length) inside its loop, not a {cfg.evolve} "
                         f"program", param="evolve")
    verifier = cfg.setting("verify_with")
    if verifier not in LOOP_VERIFIERS:
        raise InputError(f"{name} verifies drafts only by matching its own samples (lossless), not with "
                         f"'{verifier}'", param="verify_with")
    family = harvest_drafter("", cfg.data).family or EngineFamily.LOOKUP  # unknown: the module's prompt lookup
    by_drafter = engine.capabilities.step_columns
    if family not in by_drafter:
        raise InputError(f"{name}'s module drafts by {' or '.join(f.value for f in by_drafter)}, and the dataset "
                         f"{cfg.data} was drafted by {family.value}", param="data")
    columns = by_drafter[family]
    if cfg.features == "auto":
        return replace(cfg, features=tuple(columns))
    outside = [f for f in cfg.features if f not in columns]
    if outside:
        raise InputError(f"'{outside[0]}' is not given by {name}'s drafter before a draft step (it gives "
                         f"{', '.join(columns)})", param="features")
    return cfg


__all__ = ["TARGET_ENGINES", "for_engine"]

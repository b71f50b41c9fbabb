"""Drafters: what proposes the tokens of a speculation block, and their registry (:data:`DRAFTERS`).

Each drafter is one module:

* ``model``: a second model that shares the target's tokenizer (:mod:`evolve.engine.model_drafter`).
* ``skip_layers``: self-speculation by skipping the listed decoder layers of the target
  (Draft & Verify; :mod:`evolve.engine.skip_layers`).
* ``window``: self-speculation with attention restricted to the first ``SINK`` tokens plus the
  ``RECENT`` most recent tokens (StreamingLLM-style sparse KV; :mod:`evolve.engine.window`).
* ``ngram``: prompt lookup (:mod:`evolve.engine.ngram`): the continuation of the latest earlier
  match of the last n tokens; deterministic (q one-hot), no model pass.
* ``early_exit``: the target's first K layers, final norm and LM head (LayerSkip;
  :mod:`evolve.engine.early_exit`).
* ``eagle``: an EAGLE-3-style head on the target's hidden states, loaded from the published checkpoint
  layout, with its own KV cache (:mod:`evolve.engine.eagle`).
* ``suffix``: suffix decoding from arctic-inference, suffix trees of the prompt and of earlier responses (vLLM's
  ``suffix`` method; :mod:`evolve.engine.suffix`).

Registry: every drafter class names the :class:`evolve.harvest.config.HarvestConfig` field
that selects it (``field``; the command-line parameter of the same name), declares its option as
plain data (``option``, a :class:`evolve.engine.drafter_base.DrafterOption`: flag, metavar, help,
value type), the backends that cannot run it (``unsupported``), validates the field's value
(``check_value``) and builds itself from it (``build``). ``harvest``, ``live`` and ``perf
--write-costs`` take their drafter options from the registry (:mod:`evolve.cli.drafters`), the
harvest config and the backends look the chosen drafter up in it. Adding a drafter is one module
with a :class:`evolve.engine.drafter_base.Drafter` subclass and one entry in :data:`DRAFTERS`
(or a call of :func:`register_drafter`).
"""
from __future__ import annotations

from evolve.engine.drafter_base import Drafter
from evolve.engine.eagle import EagleDrafter
from evolve.engine.early_exit import EarlyExitDrafter
from evolve.engine.model_drafter import ModelDrafter
from evolve.engine.ngram import NgramDrafter
from evolve.engine.skip_layers import SkipLayerDrafter
from evolve.engine.suffix import SuffixDrafter
from evolve.engine.window import WindowDrafter


#: The drafters, in the order the options are listed; each selected by its ``field``. Read it live (a drafter
#: registered later, :func:`register_drafter`, is in it).
DRAFTERS: list[type[Drafter]] = [ModelDrafter, SkipLayerDrafter, WindowDrafter, NgramDrafter, EarlyExitDrafter,
                                  EagleDrafter, SuffixDrafter]


def register_drafter(cls: type[Drafter]) -> type[Drafter]:
    """Add a drafter class to :data:`DRAFTERS` (usable as a class decorator); returns it.

    Raises: ValueError for a class without ``field`` or ``option``, or whose ``field`` or flag is taken.
    """
    if not cls.field or cls.option is None:
        raise ValueError(f"drafter {cls.__name__}: needs a field and an option")
    for d in DRAFTERS:
        if d.field == cls.field or d.option.flag == cls.option.flag:
            raise ValueError(f"drafter {cls.__name__}: field '{cls.field}' or flag '{cls.option.flag}' is taken "
                             f"by {d.__name__}")
    DRAFTERS.append(cls)
    return cls


def drafter_fields() -> tuple[str, ...]:
    """The HarvestConfig fields selecting a drafter, in the registry's order."""
    return tuple(d.field for d in DRAFTERS)


def drafter_of(field: str) -> type[Drafter] | None:
    """The drafter class selected by ``field``, or None for a name that is not a drafter's field."""
    return next((d for d in DRAFTERS if d.field == field), None)


def chosen_drafters(values) -> list[type[Drafter]]:
    """The drafter classes whose field has a value (not None) in ``values`` (a config or a field -> value dict)."""
    get = values.get if isinstance(values, dict) else (lambda name: getattr(values, name, None))
    return [d for d in DRAFTERS if get(d.field) is not None]


def drafter_for(config, target, draft, vocab: int) -> Drafter:
    """The drafter a (checked) config selects: exactly one drafter field is set."""
    (cls,) = chosen_drafters(config)
    return cls.build(target, draft, getattr(config, cls.field), vocab, config.device)


__all__ = ["DRAFTERS", "chosen_drafters", "drafter_fields", "drafter_for", "drafter_of", "register_drafter"]

"""Drafters: what proposes the tokens of a speculation block, and their registry (:data:`DRAFTERS`).

* ``model``: a second model that shares the target's tokenizer (same vocabulary, id for id),
  with its own KV cache.
* ``skip_layers``: self-speculation by skipping the listed decoder layers of the target
  (Draft & Verify, Zhang et al. 2024, arXiv 2309.08168). The drafter is a shallow copy of the
  target whose ``model.layers`` holds only the kept layers (the weights are shared, nothing is
  copied); it reads and extends the target's own KV cache, as the paper's implementation does,
  and the cache is cropped back before verification. Llama-like models (decoder layers in
  ``model.model.layers``) only.
* ``window``: self-speculation with attention restricted to the first ``SINK`` tokens plus the
  ``RECENT`` most recent tokens (StreamingLLM-style sparse KV, as in TriForce, Sun et al. 2024,
  arXiv 2404.11912, and MagicDec, Chen et al. 2024, arXiv 2408.11049). The draft passes run
  the target on its own KV cache with a 4-D attention mask that hides every other position;
  the rows of the verified prefix were computed by the full target. The mask gives the exact
  drafter distribution; it does not make drafting faster here (only the records matter).
* ``ngram``: prompt lookup (:mod:`evolve.engine.ngram`): the continuation of the latest earlier
  match of the last n tokens; deterministic (q one-hot), no model pass.
* ``early_exit``: the target's first K layers, final norm and LM head (LayerSkip;
  :mod:`evolve.engine.early_exit`).

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

from typing import Any, Sequence

from evolve.errors import InputError
from evolve.engine.drafter_base import Drafter, DrafterOption, _SelfDrafter, kept_layers_model, target_layers
from evolve.engine.early_exit import EarlyExitDrafter
from evolve.engine.models import LoadedModel
from evolve.engine.ngram import NgramDrafter
from evolve.engine.runner import BatchKV, Runner


class ModelDrafter(Drafter):
    """A second model sharing the target's tokenizer, with its own batched KV cache."""

    kind = "model"
    field = "draft"
    option = DrafterOption("--draft", "PATH", "Draft model (directory or .gguf) sharing the target's tokenizer.")
    draft_model = True
    grows_trees = True

    @classmethod
    def build(cls, target, draft, value, vocab, device):
        return cls(draft, vocab, device)

    def __init__(self, loaded: LoadedModel, vocab: int, device: str):
        self.loaded = loaded
        self.device = device
        self.run = Runner(loaded.model, vocab, device)

    def settings(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.loaded.source.path), "format": self.loaded.source.kind,
                "architecture": self.loaded.architecture}

    def start(self, engine, batch, row):
        if batch.draft_kv is None:
            batch.draft_kv = BatchKV(batch.kv.batch, self.device)
        ctx = batch.rows[row].ctx
        batch.draft_kv.place(row, self.run.prefill(ctx[:-1]), len(ctx) - 1)

    def propose(self, engine, batch, ks, keep=None):
        kv = batch.draft_kv
        feeds = [r.ctx[kv.lengths[i]:] if r is not None else [] for i, r in enumerate(batch.rows)]
        return self._draft_loop(self.run, kv, batch, feeds, ks, engine, keep=keep)

    def commit(self, engine, batch, valid):
        for i, n in enumerate(valid):
            if n is not None:
                batch.draft_kv.truncate(i, n)
        batch.draft_kv.compact()


class SkipLayerDrafter(_SelfDrafter):
    """Draft & Verify self-speculation: the target with some decoder layers skipped
    (Zhang et al. 2024, arXiv 2309.08168). Shares weights and KV cache with the target."""

    kind = "skip_layers"
    field = "skip_layers"
    option = DrafterOption("--draft-skip-layers", "LIST",
                           "Self-speculation: the target skipping these 0-based decoder layers, e.g. '2,4,6-9' "
                           "(Draft & Verify; Llama-like models).", value="layers")
    unsupported = {"llama_cpp": "llama.cpp cannot skip decoder layers"}
    grows_trees = True

    @classmethod
    def check_value(cls, value) -> None:
        if not value:
            raise InputError("the list is empty", param="skip_layers")
        if any(i < 0 for i in value):
            raise InputError(f"layer indices are >= 0 (value {min(value)})", param="skip_layers")

    @classmethod
    def build(cls, target, draft, value, vocab, device):
        return cls(target, value, vocab, device)

    def __init__(self, target: LoadedModel, skip: Sequence[int], vocab: int, device: str):
        n = target_layers(target, "skip_layers")
        bad = [i for i in skip if i >= n]
        if bad:
            raise InputError(f"layer {bad[0]} does not exist; the target has {n} decoder layers (0..{n - 1})",
                             param="skip_layers")
        keep = [i for i in range(n) if i not in set(skip)]
        if not keep:
            raise InputError(f"skips all {n} decoder layers; keep at least one", param="skip_layers")
        self.skip = tuple(sorted(set(skip)))
        self.keep = tuple(keep)
        self.n_layers = n
        super().__init__(kept_layers_model(target, keep, "skip_layers"), vocab, device)

    def settings(self) -> dict[str, Any]:
        return {"kind": self.kind, "skip_layers": list(self.skip), "kept_layers": len(self.keep),
                "target_layers": self.n_layers}


class WindowDrafter(_SelfDrafter):
    """StreamingLLM-style sparse-KV self-speculation (TriForce, MagicDec): the target attending
    only to the first ``sink`` tokens and the ``recent`` most recent ones (the query included)."""

    kind = "window"
    field = "window"
    option = DrafterOption("--draft-window", "SINK,RECENT",
                           "Self-speculation: the target attending only to the first SINK and the RECENT last "
                           "tokens (StreamingLLM-style sparse KV, as in TriForce/MagicDec), e.g. '4,64'.",
                           value="pair")
    unsupported = {"llama_cpp": "llama.cpp cannot restrict attention per query"}

    @classmethod
    def check_value(cls, value) -> None:
        sink, recent = value
        if sink < 0 or recent < 1:
            raise InputError(f"SINK must be >= 0 and RECENT >= 1 (value {sink},{recent})", param="window")

    @classmethod
    def build(cls, target, draft, value, vocab, device):
        return cls(target, *value, vocab, device)

    def __init__(self, target: LoadedModel, sink: int, recent: int, vocab: int, device: str):
        self.sink, self.recent = int(sink), int(recent)
        super().__init__(target.model, vocab, device)

    def allowed(self):
        sink, recent = self.sink, self.recent
        return lambda i, j: (j < sink) | (i - j < recent)

    def settings(self) -> dict[str, Any]:
        return {"kind": self.kind, "sink": self.sink, "recent": self.recent}


#: The drafters, in the order the options are listed; each selected by its ``field``. Read it live (a drafter
#: registered later, :func:`register_drafter`, is in it).
DRAFTERS: list[type[Drafter]] = [ModelDrafter, SkipLayerDrafter, WindowDrafter, NgramDrafter, EarlyExitDrafter]


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


__all__ = ["DRAFTERS", "Drafter", "EarlyExitDrafter", "ModelDrafter", "NgramDrafter", "SkipLayerDrafter",
           "WindowDrafter", "chosen_drafters", "drafter_fields", "drafter_for", "drafter_of", "register_drafter"]

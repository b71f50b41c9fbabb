"""Drafters: the models that propose the tokens of a speculation block.

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
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np

from data.errors import InputError
from data.harvest.distributions import distributions, sample_index
from data.harvest.models import LoadedModel
from data.harvest.runner import TextState, _crop_cache, _new_cache, _Runner


def _shallow(module):
    """A copy of an nn.Module that shares its parameters, buffers and submodules."""
    c = copy.copy(module)
    c._modules = dict(module._modules)
    c._parameters = dict(module._parameters)
    c._buffers = dict(module._buffers)
    return c


class Drafter:
    """Base class: proposes up to k tokens with their full draft distributions.

    The ``engine`` argument of the methods is the :class:`data.harvest.engine.SpeculativeEngine`
    running the drafter; its ``temperature`` and ``eos`` ids are read.
    """

    kind = ""

    def settings(self) -> dict[str, Any]:
        """The drafter's kind and parameters, as written into the dataset's metadata."""
        raise NotImplementedError

    def start(self, engine, state: TextState) -> None:
        """Prepare drafter state for a new text (``state.ctx`` is the prompt)."""

    def propose(self, engine, state: TextState, k: int, rng: np.random.Generator):
        """Draft up to k tokens (stopping after an end-of-sequence token).

        Returns: (token ids list, q float64 (k', V), entropies float64 (k',)).
        """
        raise NotImplementedError

    def commit(self, engine, state: TextState, valid: int) -> None:
        """Keep drafter state for the first ``valid`` context tokens only."""

    def _draft_loop(self, run, state, start, feed, k, rng, engine, cache, allowed=None):
        drafts, dists, ents = [], [], []
        for _ in range(k):
            logits = run(feed, start, cache, 1, allowed)
            q, h = distributions(logits, engine.temperature)
            x = sample_index(q[0], rng.random())
            drafts.append(x)
            dists.append(q[0])
            ents.append(h[0])
            start += len(feed)
            feed = [x]
            if x in engine.eos:
                break
        return drafts, np.stack(dists), np.asarray(ents), start


class ModelDrafter(Drafter):
    """A second model sharing the target's tokenizer, with its own KV cache."""

    kind = "model"

    def __init__(self, loaded: LoadedModel, vocab: int, device: str):
        self.loaded = loaded
        self.run = _Runner(loaded.model, vocab, device)

    def settings(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.loaded.source.path), "format": self.loaded.source.kind,
                "architecture": self.loaded.architecture}

    def start(self, engine, state):
        state.draft_cache = _new_cache()
        state.draft_len = 0
        if len(state.ctx) > 1:
            self.run(state.ctx[:-1], 0, state.draft_cache, 1)
            state.draft_len = len(state.ctx) - 1

    def propose(self, engine, state, k, rng):
        feed = state.ctx[state.draft_len:]
        drafts, q, h, state.draft_len = self._draft_loop(self.run, state, state.draft_len, feed, k, rng,
                                                         engine, state.draft_cache)
        return drafts, q, h

    def commit(self, engine, state, valid):
        if state.draft_len > valid:
            _crop_cache(state.draft_cache, valid)
            state.draft_len = valid


class _SelfDrafter(Drafter):
    """A drafter that runs (part of) the target on the target's own KV cache, then crops it back."""

    def __init__(self, model, vocab: int, device: str):
        self.run = _Runner(model, vocab, device)

    def allowed(self):
        """``allowed(i, j)``: may query position i attend to key position j (beyond causality)?"""
        return lambda i, j: j >= 0

    def propose(self, engine, state, k, rng):
        feed = state.ctx[state.cache_len:]
        try:
            drafts, q, h, _ = self._draft_loop(self.run, state, state.cache_len, feed, k, rng, engine,
                                               state.cache, self.allowed())
        finally:
            _crop_cache(state.cache, state.cache_len)
        return drafts, q, h


class SkipLayerDrafter(_SelfDrafter):
    """Draft & Verify self-speculation: the target with some decoder layers skipped
    (Zhang et al. 2024, arXiv 2309.08168). Shares weights and KV cache with the target."""

    kind = "skip_layers"

    def __init__(self, target: LoadedModel, skip: Sequence[int], vocab: int, device: str):
        model = target.model
        inner = getattr(model, "model", None)
        layers = getattr(inner, "layers", None)
        import torch

        if not isinstance(layers, torch.nn.ModuleList):
            raise InputError(f"option '--draft-skip-layers': the target's architecture ({type(model).__name__}) "
                             f"keeps no decoder layers in model.model.layers; layer skipping supports "
                             f"Llama-like models only")
        n = len(layers)
        bad = [i for i in skip if i >= n]
        if bad:
            raise InputError(f"option '--draft-skip-layers': layer {bad[0]} does not exist; the target has "
                             f"{n} decoder layers (0..{n - 1})")
        keep = [i for i in range(n) if i not in set(skip)]
        if not keep:
            raise InputError(f"option '--draft-skip-layers': skips all {n} decoder layers; keep at least one")
        draft_inner = _shallow(inner)
        draft_inner.layers = torch.nn.ModuleList([layers[i] for i in keep])
        draft = _shallow(model)
        draft.model = draft_inner
        self.skip = tuple(sorted(set(skip)))
        self.keep = tuple(keep)
        self.n_layers = n
        super().__init__(draft, vocab, device)

    def settings(self) -> dict[str, Any]:
        return {"kind": self.kind, "skip_layers": list(self.skip), "kept_layers": len(self.keep),
                "target_layers": self.n_layers}


class WindowDrafter(_SelfDrafter):
    """StreamingLLM-style sparse-KV self-speculation (TriForce, MagicDec): the target attending
    only to the first ``sink`` tokens and the ``recent`` most recent ones (the query included)."""

    kind = "window"

    def __init__(self, target: LoadedModel, sink: int, recent: int, vocab: int, device: str):
        self.sink, self.recent = int(sink), int(recent)
        super().__init__(target.model, vocab, device)

    def allowed(self):
        sink, recent = self.sink, self.recent
        return lambda i, j: (j < sink) | (i - j < recent)

    def settings(self) -> dict[str, Any]:
        return {"kind": self.kind, "sink": self.sink, "recent": self.recent}

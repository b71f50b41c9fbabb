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

from evolve.errors import InputError
from evolve.engine.distributions import sample_index
from evolve.engine.models import LoadedModel
from evolve.engine.runner import BatchKV, Runner


def _shallow(module):
    """A copy of an nn.Module that shares its parameters, buffers and submodules."""
    c = copy.copy(module)
    c._modules = dict(module._modules)
    c._parameters = dict(module._parameters)
    c._buffers = dict(module._buffers)
    return c


class Drafter:
    """Base class: proposes up to k_i tokens for every row of a batch, with their full draft distributions.

    The ``engine`` argument of the methods is the :class:`evolve.traces.harvest.engine.SpeculativeEngine`
    running the drafter (its ``sampling`` settings and ``eos`` ids are read); ``batch`` is its
    :class:`evolve.traces.harvest.engine.Batch` (``batch.rows[i]`` the state of row i's text or None,
    ``batch.kv`` the target's :class:`evolve.engine.runner.BatchKV`).
    """

    kind = ""

    def settings(self) -> dict[str, Any]:
        """The drafter's kind and parameters, as written into the dataset's metadata."""
        raise NotImplementedError

    def start(self, engine, batch, row: int) -> None:
        """Prepare drafter state for the new text of ``row`` (``batch.rows[row].ctx`` is its prompt)."""

    def propose(self, engine, batch, ks: Sequence[int]):
        """Draft up to ``ks[i]`` tokens for row i (stopping after an end-of-sequence token).

        Each draft is sampled from q with one uniform of the row's own random stream.
        Returns: per row (token ids list, q float64 (k'_i, V), entropies float64 (k'_i,)); rows with
        ``ks[i] == 0`` get an empty list and None.
        """
        raise NotImplementedError

    def commit(self, engine, batch, valid: Sequence[int | None]) -> None:
        """Keep drafter state for the first ``valid[i]`` context tokens of row i (None: row unchanged)."""

    def _draft_loop(self, run: Runner, kv: BatchKV, batch, feeds, ks, engine, allowed=None):
        rows = range(len(ks))
        drafts: list[list[int]] = [[] for _ in rows]
        dists: list[list] = [[] for _ in rows]
        ents: list[list] = [[] for _ in rows]
        feeds = [list(f) if k else [] for f, k in zip(feeds, ks)]
        while any(feeds):
            logits = run(kv, feeds, 1, allowed)
            live = [i for i in rows if feeds[i]]
            q, h = engine.distributions(logits[live, -1])
            for r, i in enumerate(live):
                x = sample_index(q[r], batch.rows[i].rng.random())
                drafts[i].append(x)
                dists[i].append(q[r])
                ents[i].append(h[r])
                feeds[i] = [] if (x in engine.eos or len(drafts[i]) >= ks[i]) else [x]
        return [(drafts[i], np.stack(dists[i]) if dists[i] else None, np.asarray(ents[i])) for i in rows]


class ModelDrafter(Drafter):
    """A second model sharing the target's tokenizer, with its own batched KV cache."""

    kind = "model"

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

    def propose(self, engine, batch, ks):
        kv = batch.draft_kv
        feeds = [r.ctx[kv.lengths[i]:] if r is not None else [] for i, r in enumerate(batch.rows)]
        return self._draft_loop(self.run, kv, batch, feeds, ks, engine)

    def commit(self, engine, batch, valid):
        for i, n in enumerate(valid):
            if n is not None:
                batch.draft_kv.truncate(i, n)
        batch.draft_kv.compact()


class _SelfDrafter(Drafter):
    """A drafter that runs (part of) the target on the target's own KV cache, then crops it back."""

    def __init__(self, model, vocab: int, device: str):
        self.run = Runner(model, vocab, device)

    def allowed(self):
        """``allowed(i, j)``: may query position i attend to key position j (beyond causality)?

        Self-drafters always pass an explicit mask: a skipped layer's cache lags behind during drafting,
        so the model must not derive the mask from the cache length."""
        return lambda i, j: j >= 0

    def propose(self, engine, batch, ks):
        kv = batch.kv
        slots, lengths = kv.slots, list(kv.lengths)
        feeds = [r.ctx[kv.lengths[i]:] if r is not None else [] for i, r in enumerate(batch.rows)]
        try:
            return self._draft_loop(self.run, kv, batch, feeds, ks, engine, self.allowed())
        finally:
            kv.crop(slots, lengths)


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
            raise InputError(f"the target's architecture ({type(model).__name__}) keeps no decoder layers in "
                             f"model.model.layers; layer skipping supports Llama-like models only",
                             param="skip_layers")
        n = len(layers)
        bad = [i for i in skip if i >= n]
        if bad:
            raise InputError(f"layer {bad[0]} does not exist; the target has {n} decoder layers (0..{n - 1})",
                             param="skip_layers")
        keep = [i for i in range(n) if i not in set(skip)]
        if not keep:
            raise InputError(f"skips all {n} decoder layers; keep at least one", param="skip_layers")
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

"""The model drafter (``--draft PATH``): a second model that shares the target's tokenizer.

Same vocabulary, id for id; its own batched KV cache (:class:`evolve.engine.runner.BatchKV`). The
llama.cpp backend has its own (:class:`evolve.engine.llama_cpp.LlamaModelDrafter`).
"""
from __future__ import annotations

from typing import Any

from evolve.engine.drafter_base import Drafter, DrafterOption, EngineFamily
from evolve.engine.models import LoadedModel
from evolve.engine.runner import BatchKV, Runner


class ModelDrafter(Drafter):
    """A second model sharing the target's tokenizer, with its own batched KV cache."""

    name = "model"
    family = EngineFamily.DRAFT_MODEL
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
        return {"kind": self.name, "path": str(self.loaded.source.path), "format": self.loaded.source.file_format,
                "architecture": self.loaded.architecture}

    def start(self, engine, batch, row):
        if batch.draft_kv is None:
            batch.draft_kv = BatchKV(batch.kv.batch, self.device)
        ctx = batch.rows[row].ctx
        batch.draft_kv.place(row, self.run.prefill(ctx[:-1]), len(ctx) - 1)

    def propose(self, engine, batch, ks, keep=None):
        kv = batch.draft_kv
        feeds = [r.ctx[kv.lengths[i]:] if r is not None else [] for i, r in enumerate(batch.rows)]
        return self._draft_loop(kv, batch, feeds, ks, engine, keep=keep)

    def commit(self, engine, batch, valid):
        for i, n in enumerate(valid):
            if n is not None:
                batch.draft_kv.truncate(i, n)
        batch.draft_kv.compact()


__all__ = ["ModelDrafter"]

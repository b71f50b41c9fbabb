"""Early-exit self-speculation (LayerSkip, Elhoushi et al. 2024, arXiv 2404.16710): ``--draft-exit-layer K``.

The drafter is the target's first K decoder layers followed by the target's final norm and LM
head (weights shared, nothing copied). It runs on the target's own KV cache: layers 0..K-1 of the
cache hold, for every accepted token, exactly the keys and values the drafter needs (the first K
layers of the target and of the drafter are the same computation). The drafted tokens' keys and
values that the draft passes append to layers 0..K-1 are *not* reused: the cache is cropped back
before verification and the verification pass recomputes all layers for the drafted tokens, so
its logits are exactly the target's (lossless). LayerSkip's self-speculation also reuses them
(saving K/N of the verification's work on the drafts); here only the decisions and records
matter, and they do not depend on it. Llama-like models (``model.model.layers``) only.
"""
from __future__ import annotations

from typing import Any

from evolve.errors import InputError
from evolve.engine.drafter_base import VALUE_LIMITS, DrafterOption, _SelfDrafter, kept_layers_model, target_layers


class EarlyExitDrafter(_SelfDrafter):
    """The target's first ``exit_layer`` decoder layers + final norm + LM head (1 <= K < layers)."""

    name = "early_exit"
    field = "exit_layer"
    option = DrafterOption("--draft-exit-layer", "K",
                           "Early exit (LayerSkip): the target's first K decoder layers, final norm and LM head, on "
                           f"the target's KV cache (Llama-like models; K at most {VALUE_LIMITS['count']}).", value="count")
    unsupported = {"llama_cpp": "llama.cpp cannot exit early from the decoder layers"}
    grows_trees = True

    @classmethod
    def check_value(cls, value) -> None:
        if value < 1:
            raise InputError(f"must be at least 1 (value {value})", param="exit_layer")

    @classmethod
    def build(cls, target, draft, value, vocab, device):
        return cls(target, value, vocab, device)

    def __init__(self, target, exit_layer: int, vocab: int, device: str):
        n = target_layers(target, "exit_layer")
        if not 1 <= exit_layer < n:
            raise InputError(f"the target has {n} decoder layers: exit after 1..{n - 1} of them "
                             f"(value {exit_layer})", param="exit_layer")
        self.exit_layer, self.n_layers = int(exit_layer), n
        super().__init__(kept_layers_model(target, range(exit_layer), "exit_layer"), vocab, device)

    def settings(self) -> dict[str, Any]:
        return {"kind": self.name, "exit_layer": self.exit_layer, "target_layers": self.n_layers}

"""Skip-layer self-speculation (Draft & Verify, Zhang et al. 2024, arXiv 2309.08168): ``--draft-skip-layers LIST``.

The drafter is a shallow copy of the target whose ``model.layers`` holds only the kept layers (the
weights are shared, nothing is copied); it reads and extends the target's own KV cache, as the paper's
implementation does, and the cache is cropped back before verification. Llama-like models (decoder
layers in ``model.model.layers``) only.
"""
from __future__ import annotations

from typing import Any, Sequence

from evolve.errors import InputError
from evolve.engine.drafter_base import VALUE_LIMITS, DrafterOption, _SelfDrafter, kept_layers_model, target_layers
from evolve.engine.models import LoadedModel


class SkipLayerDrafter(_SelfDrafter):
    """Draft & Verify self-speculation: the target with some decoder layers skipped
    (Zhang et al. 2024, arXiv 2309.08168). Shares weights and KV cache with the target."""

    name = "skip_layers"
    field = "skip_layers"
    option = DrafterOption("--draft-skip-layers", "LIST",
                           "Self-speculation: the target skipping these 0-based decoder layers, e.g. '2,4,6-9' "
                           f"(Draft & Verify; Llama-like models; indices at most {VALUE_LIMITS['layers']}).", value="layers")
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
        return {"kind": self.name, "skip_layers": list(self.skip), "kept_layers": len(self.keep),
                "target_layers": self.n_layers}


__all__ = ["SkipLayerDrafter"]

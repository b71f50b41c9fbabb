"""Forward passes of a causal LM on a KV cache, and the decoding state of one text.

The names with a leading underscore are helpers shared inside :mod:`data.harvest`
(the drafters and the engine), not a public API.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


def _crop_cache(cache, length: int) -> None:
    """Crop every layer of a transformers ``DynamicCache`` to ``length`` positions."""
    for layer in cache.layers:
        n = layer.get_seq_length()
        if n > length:
            layer.crop(length - n)


class _Runner:
    """Runs one causal LM forward pass on a KV cache with explicit positions (and mask)."""

    def __init__(self, model, vocab: int, device: str):
        import inspect

        self.model = model
        self.vocab = vocab
        self.device = device
        self.dtype = next(model.parameters()).dtype
        self.keep_arg = "logits_to_keep" in inspect.signature(model.forward).parameters

    def __call__(self, ids: Sequence[int], start: int, cache, n_logits: int, allowed=None):
        """Feed ``ids`` at positions start.. on ``cache``; return the last ``n_logits`` logits (n, V).

        ``allowed(i, j)`` (torch broadcasting on query positions i and key positions j) restricts
        attention beyond causality; then a 4-D additive mask is passed.
        """
        import torch

        q = len(ids)
        kwargs: dict[str, Any] = {
            "input_ids": torch.tensor([list(ids)], dtype=torch.long, device=self.device),
            "position_ids": torch.arange(start, start + q, device=self.device).unsqueeze(0),
            "past_key_values": cache,
            "use_cache": True,
        }
        if allowed is not None:
            i = torch.arange(start, start + q, device=self.device)[:, None]
            j = torch.arange(start + q, device=self.device)[None, :]
            ok = (j <= i) & allowed(i, j)
            mask = torch.zeros((1, 1, q, start + q), dtype=self.dtype, device=self.device)
            kwargs["attention_mask"] = mask.masked_fill(~ok, torch.finfo(self.dtype).min)
        if self.keep_arg:
            kwargs["logits_to_keep"] = max(1, n_logits)
        logits = self.model(**kwargs).logits
        return logits[0, logits.shape[1] - n_logits:, : self.vocab]


def _new_cache():
    from transformers import DynamicCache

    return DynamicCache()


@dataclass
class TextState:
    """Decoding state of one text: context ids, target KV cache and its length, drafter state."""

    ctx: list[int]
    prompt_len: int
    cache: Any
    cache_len: int
    draft_cache: Any = None
    draft_len: int = 0

"""Sparse-KV self-speculation (``--draft-window SINK,RECENT``): the target attending only to the first ``SINK``
tokens plus the ``RECENT`` most recent ones (StreamingLLM-style, as in TriForce, Sun et al. 2024, arXiv
2404.11912, and MagicDec, Chen et al. 2024, arXiv 2408.11049).

The draft passes run the target on its own KV cache with a 4-D attention mask that hides every other
position; the rows of the verified prefix were computed by the full target. The mask gives the exact
drafter distribution; it does not make drafting faster here (only the records matter).
"""
from __future__ import annotations

from typing import Any

from evolve.errors import InputError
from evolve.engine.drafter_base import VALUE_LIMITS, DrafterOption, _SelfDrafter
from evolve.engine.models import LoadedModel


class WindowDrafter(_SelfDrafter):
    """StreamingLLM-style sparse-KV self-speculation (TriForce, MagicDec): the target attending
    only to the first ``sink`` tokens and the ``recent`` most recent ones (the query included)."""

    name = "window"
    field = "window"
    option = DrafterOption("--draft-window", "SINK,RECENT",
                           "Self-speculation: the target attending only to the first SINK and the RECENT last "
                           "tokens (StreamingLLM-style sparse KV, as in TriForce/MagicDec), e.g. '4,64' (each at most "
                           f"{VALUE_LIMITS['pair']}).", value="pair")
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
        return {"kind": self.name, "sink": self.sink, "recent": self.recent}


__all__ = ["WindowDrafter"]

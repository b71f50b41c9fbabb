"""N-gram prompt lookup: a drafter without a model (``--draft-ngram MAX[,MIN]``).

As vLLM's ``ngram`` speculative method (``prompt_lookup_max`` / ``prompt_lookup_min``; vLLM's
``prompt_lookup_min`` defaults to 1) and transformers' prompt lookup decoding
(``prompt_lookup_num_tokens``, ``max_matching_ngram_size``, default 2): for n from MAX down to MIN,
the last n tokens of the text so far (prompt and generated tokens) are searched for earlier in
the text; at the first n with a match, the draft is the continuation of the *latest* earlier match
(transformers takes the earliest), up to the block's k tokens and stopping after an
end-of-sequence token. No match: no draft (the block has 0 drafted tokens and the target samples
one token alone, as in plain decoding).

The draft is deterministic: its distribution q is one-hot at the drafted token, kept as
:class:`evolve.engine.onehot.OneHot` ids (records: draft_prob 1, draft_entropy 0, draft_top_prob 1),
and it draws no uniform from the text's random stream.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from evolve.errors import InputError
from evolve.engine.drafter_base import Drafter
from evolve.engine.onehot import OneHot


def lookup(ctx: Sequence[int], k: int, n_max: int, n_min: int) -> list[int]:
    """The continuation (at most ``k`` tokens) of the latest earlier match of the last n tokens of ``ctx``,
    for the largest n in [n_min, n_max] that has one; [] when none has."""
    L = len(ctx)
    if k <= 0 or L < 2:
        return []
    arr = np.asarray(ctx, dtype=np.int64)
    for n in range(min(n_max, L - 1), n_min - 1, -1):
        # windows starting at 0..L-n-1 (the last window, the pattern itself, is excluded)
        windows = np.lib.stride_tricks.sliding_window_view(arr[:L - 1], n)
        hits = np.flatnonzero((windows == arr[L - n:]).all(axis=1))
        if hits.size:
            start = int(hits[-1]) + n
            return [int(t) for t in arr[start:start + k]]
    return []


class _NoModel:
    """Stands for the drafter's runner: no forward pass, no seconds."""

    seconds = 0.0


class NgramDrafter(Drafter):
    """Prompt lookup (see the module doc): ``n_max`` >= ``n_min`` >= 1."""

    kind = "ngram"
    field = "ngram"
    model_free = True

    @classmethod
    def check_value(cls, value) -> None:
        if len(value) not in (1, 2):
            raise InputError(f"expected MAX or MAX,MIN (value {value})", param="ngram")
        n_max, n_min = value[0], (value[1] if len(value) == 2 else 1)
        if n_min < 1 or n_max < n_min:
            raise InputError(f"expected MAX >= MIN >= 1 (value {n_max},{n_min})", param="ngram")

    @classmethod
    def build(cls, target, draft, value, vocab, device):
        return cls(value[0], value[1] if len(value) == 2 else 1, vocab)

    def __init__(self, n_max: int, n_min: int, vocab: int):
        self.n_max, self.n_min, self.vocab = int(n_max), int(n_min), int(vocab)
        self.run = _NoModel()

    def settings(self) -> dict[str, Any]:
        return {"kind": self.kind, "max": self.n_max, "min": self.n_min}

    def propose(self, engine, batch, ks, keep=None):
        out = []
        for i, (row, k) in enumerate(zip(batch.rows, ks)):
            if row is None or not k:
                out.append(([], None, np.zeros(0)))
                continue
            draft = lookup(row.ctx, k, self.n_max, self.n_min)
            for j, t in enumerate(draft):
                if t in engine.eos:
                    draft = draft[:j + 1]
                    break
            if keep is not None:  # a one-hot draft: q(x) = max q = 1, entropy 0
                n = 1
                while n < len(draft) and keep(i, [1.0] * n, [1.0] * n, [0.0] * n):
                    n += 1
                draft = draft[:n]
            q = OneHot(np.asarray(draft, dtype=np.int64), self.vocab) if draft else None
            out.append((draft, q, np.zeros(len(draft))))
        return out

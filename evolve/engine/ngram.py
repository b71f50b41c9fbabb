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

So the drafter's probabilities say nothing about a draft's chance; what does is the match itself.
Every drafted token carries two lookup columns (:func:`lookup_columns`; :data:`evolve.traces.schema.LOOKUP_COLUMNS`), known
before the token is drafted (the lookup is free), which a verification-length policy may read:

* ``lookup_len``: n, the length of the matched n-gram (the same for every token of the block);
* ``lookup_freq``: among the earlier occurrences in the text of the matched n-gram followed by the
  block's tokens drafted before this one, the fraction followed by this token: the empirical
  probability of the continuation, as SuffixDecoding scores its candidate tokens (Oliaro et al. 2024,
  arXiv 2411.04975). In (0, 1]: the latest match itself is one occurrence.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from evolve.errors import InputError
from evolve.engine.drafter_base import VALUE_LIMITS, Drafter, DrafterOption, EngineFamily
from evolve.engine.onehot import OneHot
from evolve.traces.schema import LOOKUP_COLUMNS


#: The n-gram lengths (MAX, MIN) of prompt lookup where none are given (the scripts' ``--draft-ngram 3,1``).
DEFAULT_LOOKUP: tuple[int, int] = (3, 1)


def lookup_lengths(value: Sequence[int] | None) -> tuple[int, int]:
    """(MAX, MIN) of a ``--draft-ngram`` value ``(MAX,)`` or ``(MAX, MIN)`` (MIN 1 when not given); None or empty:
    :data:`DEFAULT_LOOKUP`. Checking the value is :meth:`NgramDrafter.check_value`'s."""
    if not value:
        return DEFAULT_LOOKUP
    return int(value[0]), int(value[1]) if len(value) == 2 else 1


def _occurrences(arr: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    """Start indices s of the occurrences of ``pattern`` in ``arr`` followed by a token of ``arr``
    (s + len(pattern) < len(arr)), increasing; int64."""
    m = pattern.size
    if arr.size <= m:
        return np.zeros(0, dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(arr[:arr.size - 1], m)
    return np.flatnonzero((windows == pattern).all(axis=1))


def lookup_match(ctx: Sequence[int], k: int, n_max: int, n_min: int) -> tuple[list[int], int]:
    """(draft, n): the continuation (at most ``k`` tokens) of the latest earlier match of the last n tokens of
    ``ctx``, for the largest n in [n_min, n_max] that has one; ([], 0) when none has."""
    L = len(ctx)
    if k <= 0 or L < 2:
        return [], 0
    arr = np.asarray(ctx, dtype=np.int64)
    for n in range(min(n_max, L - 1), n_min - 1, -1):
        hits = _occurrences(arr, arr[L - n:])  # the last window, the pattern itself, is not followed: excluded
        if hits.size:
            start = int(hits[-1]) + n
            return [int(t) for t in arr[start:start + k]], n
    return [], 0


def lookup_columns(ctx: Sequence[int], draft: Sequence[int], n: int) -> dict[str, np.ndarray]:
    """The lookup columns (module doc) of the tokens of ``draft``, a continuation of a match of the last ``n``
    tokens of ``ctx`` (:func:`lookup_match`): {"lookup_len": int64 (k,), "lookup_freq": float64 (k,)}.

    Raises ValueError when a drafted token never follows its pattern in ``ctx`` (not a lookup draft).
    """
    arr = np.asarray(ctx, dtype=np.int64)
    pattern = list(arr[arr.size - n:]) if n else []
    freq = np.empty(len(draft))
    for j, x in enumerate(draft):
        p = np.asarray(pattern + list(draft[:j]), dtype=np.int64)
        hits = _occurrences(arr, p)
        follows = arr[hits + p.size] == x
        if not follows.any():
            raise ValueError(f"drafted token {j} ({x}) never follows its pattern in the context")
        freq[j] = follows.mean()
    return {"lookup_len": np.full(len(draft), n, dtype=np.int64), "lookup_freq": freq}


class _NoModel:
    """Stands for the drafter's runner: no forward pass, no seconds."""

    seconds = 0.0


class NgramDrafter(Drafter):
    """Prompt lookup (see the module doc): ``n_max`` >= ``n_min`` >= 1."""

    name = "ngram"
    family = EngineFamily.LOOKUP
    field = "ngram"
    option = DrafterOption("--draft-ngram", "MAX[,MIN]",
                           "Prompt lookup (vLLM's ngram method): the draft continues the latest earlier occurrence of "
                           "the last n tokens, n from MAX down to MIN (default 1); no match, no draft. E.g. '3,1' "
                           f"(each at most {VALUE_LIMITS['counts']}).", value="counts")
    model_free = True
    lookahead_columns = LOOKUP_COLUMNS

    @classmethod
    def check_value(cls, value) -> None:
        if len(value) not in (1, 2):
            raise InputError(f"expected MAX or MAX,MIN (value {value})", param="ngram")
        n_max, n_min = lookup_lengths(value)
        if n_min < 1 or n_max < n_min:
            raise InputError(f"expected MAX >= MIN >= 1 (value {n_max},{n_min})", param="ngram")

    @classmethod
    def build(cls, target, draft, value, vocab, device):
        return cls(*lookup_lengths(value), vocab)

    def __init__(self, n_max: int, n_min: int, vocab: int):
        self.n_max, self.n_min, self.vocab = int(n_max), int(n_min), int(vocab)
        self.run = _NoModel()

    def settings(self) -> dict[str, Any]:
        return {"kind": self.name, "max": self.n_max, "min": self.n_min}

    def _draft(self, engine, ctx: Sequence[int], k: int) -> tuple[list[int], int]:
        draft, n = lookup_match(ctx, k, self.n_max, self.n_min)
        for j, t in enumerate(draft):
            if t in engine.eos:
                return draft[:j + 1], n
        return draft, n

    def draft_columns(self, ctx, drafts):
        _, n = lookup_match(ctx, len(drafts), self.n_max, self.n_min)
        return lookup_columns(ctx, drafts, n)

    def lookahead(self, engine, ctx, drafted=0):
        draft, n = self._draft(engine, ctx, drafted + 1)
        if len(draft) <= drafted:
            return {}
        return {c: float(v[drafted]) for c, v in lookup_columns(ctx, draft, n).items()}

    def propose(self, engine, batch, ks, keep=None):
        out = []
        for i, (row, k) in enumerate(zip(batch.rows, ks)):
            if row is None or not k:
                out.append(([], None, np.zeros(0)))
                continue
            draft, n = self._draft(engine, row.ctx, k)
            if keep is not None and len(draft) > 1:  # a one-hot draft: q(x) = max q = 1, entropy 0
                cols = lookup_columns(row.ctx, draft, n) if getattr(keep, "lookahead", True) else {}
                m = 1
                while m < len(draft) and keep(i, [1.0] * m, [1.0] * m, [0.0] * m,
                                              {c: float(v[m]) for c, v in cols.items()}):
                    m += 1
                draft = draft[:m]
            q = OneHot(np.asarray(draft, dtype=np.int64), self.vocab) if draft else None
            out.append((draft, q, np.zeros(len(draft))))
        return out

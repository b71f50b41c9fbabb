"""Forward passes of a causal LM on a batch of texts that share one KV cache (:class:`BatchKV`, :class:`Runner`).

Layout. A :class:`BatchKV` holds, per layer, key and value tensors of shape (B, H, S, D)
for B batch rows and S slots, plus, per row, which slots are valid and the position (index in
the row's text) of the token in each slot. A row's valid slots are exactly the positions
0..n-1 of its text, where n is its cached length. New tokens are appended at the end for
every row at once: a row feeding fewer tokens than the longest feed is padded on the left
(the pad slots are invalid), so its last fed tokens are the last slots and the logits a row
needs are always the batch's last ones. Slots of rejected drafts are invalidated, not
removed; :meth:`BatchKV.compact` gathers every row's valid slots to the right end (left
padding) to keep S small (with one row, a slice of the slots, no gather).

Transformers' cache. Only the public API of ``transformers.DynamicCache`` is used: a pass gets
a ``DynamicCache`` filled from the per-layer tensors with ``update(keys, values, layer_idx)``
(:meth:`BatchKV.dynamic_cache`); the model appends the new slots to it, and they are read back
by iterating over the cache (one (keys, values, ...) entry per layer). The cache is kept for
the next pass and rebuilt only after an operation replaced the tensors (gather, padding,
placing a row, cropping layers of unequal lengths); cropping every layer to S slots uses
``DynamicCache.crop``. Rebuilding costs one copy of the tensors (``update`` concatenates).

Masks. Each pass gets a 4-D additive mask (B, 1, T, S + T): query position i of a row may
attend to a valid key slot at position j <= i (and, for the window drafter, only where
``allowed(i, j)``). When every row is complete (no pad, no hole, equal lengths) and no
restriction applies, no mask is passed and the model uses its own causal mask, so a batch
of one row runs exactly the computation of plain single-text decoding.

Prefill. A new text is prefilled alone (batch 1, no mask) into a cache of its own and
then placed into its row (:meth:`BatchKV.place`), so the prefill of a text does not
depend on the batch it joins.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from evolve.engine.clock import synchronize


def _new_cache(layers: Iterable[tuple[Any, Any]] = ()):
    """A transformers ``DynamicCache`` holding the given per-layer (keys, values) (None: a layer
    without cached states), filled through the public ``DynamicCache.update``."""
    from transformers import DynamicCache

    cache = DynamicCache()
    for index, (keys, values) in enumerate(layers):
        if keys is not None:
            cache.update(keys, values, index)
    return cache


def _read_cache(cache) -> tuple[list, list]:
    """Per-layer keys and values of a ``DynamicCache``, read by iterating over it (its public
    accessor). A layer the model never ran (e.g. a skipped one) gives None."""
    keys: list = []
    values: list = []
    for entry in cache:
        k, v = entry[0], entry[1]
        ok = k is not None and v is not None and k.dim() == 4
        keys.append(k if ok else None)
        values.append(v if ok else None)
    return keys, values


class BatchKV:
    """A KV cache shared by B rows with per-row valid slots and positions (see the module docstring).

    ``lengths[i]`` is the number of tokens of row i's text that the cache holds (positions
    0..lengths[i]-1); ``valid`` (bool (B, S)) and ``pos`` (int64 (B, S)) describe the slots;
    ``keys[l]`` and ``values[l]`` are layer l's tensors (B, H, S, D) (None for a layer without
    states). A layer the self-drafter skipped lags behind (fewer slots) until :meth:`crop`.
    """

    def __init__(self, batch: int, device: str = "cpu"):
        import torch

        self.batch = batch
        self.device = device
        self.keys: list = []
        self.values: list = []
        self._cache = None  # a DynamicCache holding exactly keys/values, or None: build it for the next pass
        self.valid = torch.zeros((batch, 0), dtype=torch.bool, device=device)
        self.pos = torch.zeros((batch, 0), dtype=torch.long, device=device)
        self.lengths = [0] * batch

    @property
    def slots(self) -> int:
        """S, the number of slots (equal for every row)."""
        return int(self.valid.shape[1])

    def complete(self) -> bool:
        """True when every slot of every row is valid (then slot index = position)."""
        return all(n == self.slots for n in self.lengths)

    def dynamic_cache(self):
        """The ``DynamicCache`` to pass to the model's next forward pass (built from the tensors if needed).

        After the pass, :meth:`absorb` reads the appended slots back (the cache is kept for the next pass)."""
        if self._cache is None:
            self._cache = _new_cache(zip(self.keys, self.values))
        return self._cache

    def absorb(self, cache) -> None:
        """Take the tensors of ``cache`` (the :meth:`dynamic_cache` a forward pass has just extended)."""
        self.keys, self.values = _read_cache(cache)
        self._cache = cache

    def discard_cache(self) -> None:
        """Forget the built cache (a failed pass may have left it half extended); the tensors stay as they were."""
        self._cache = None

    def _set(self, keys: list, values: list) -> None:
        self.keys, self.values, self._cache = keys, values, None

    def _map_layers(self, fn: Callable) -> None:
        self._set([None if k is None else fn(k) for k in self.keys],
                  [None if v is None else fn(v) for v in self.values])

    def _slice(self, start: int, stop: int) -> None:
        """Keep slots start..stop-1 of every layer (of a layer with fewer slots: those below ``stop``)."""
        S = self.slots
        if (start == 0 and self._cache is not None
                and all(k is None or k.shape[2] == S for k in self.keys)):
            if stop < S:
                self._cache.crop(stop - S)  # a negative count: drop the last S - stop slots of every layer
                self.keys, self.values = _read_cache(self._cache)
        else:
            self._map_layers(lambda t: t[:, :, start:stop, :])

    def crop(self, slots: int, lengths: Sequence[int]) -> None:
        """Drop every slot from ``slots`` on (the drafts a self-drafter appended) and restore ``lengths``."""
        if slots < self.slots:
            self._slice(0, slots)
            self.valid, self.pos = self.valid[:, :slots], self.pos[:, :slots]
        self.lengths = list(lengths)

    def truncate(self, row: int, length: int) -> None:
        """Keep only positions < ``length`` of ``row`` (invalidate the others' slots)."""
        if length < self.lengths[row]:
            self.valid[row] &= self.pos[row] < length
            self.lengths[row] = length

    def keep_path(self, nodes: int, path: Sequence[int]) -> None:
        """After :meth:`Runner.tree` with ``keep`` over ``nodes`` tree nodes (the last ``nodes`` slots of row 0, a
        batch of one row): keep the slots of the nodes ``path`` (a path from the root down, parents first: their
        positions follow the root's) and drop the tree's other slots; row 0 then holds the text up to the root and
        the path, compacted. Raises ValueError for a batch of more than one row or a node outside 0..nodes-1."""
        if self.batch != 1:
            raise ValueError(f"BatchKV.keep_path needs a batch of one row, got {self.batch}")
        first = self.slots - nodes
        if any(not 0 <= int(i) < nodes for i in path):
            raise ValueError(f"BatchKV.keep_path: a node of {list(path)} outside 0..{nodes - 1}")
        drop = self.valid.new_ones(nodes)
        drop[[int(i) for i in path]] = False
        self.valid[0, first:] &= ~drop
        self.lengths = [int(self.pos[0, first - 1]) + 1 + len(path)]  # the root's position + 1, then the path's
        self.compact()

    def clear(self, row: int) -> None:
        """Forget row ``row`` (its text is finished)."""
        self.truncate(row, 0)

    def compact(self) -> None:
        """Move every row's valid slots to the right end, in order (left padding); S becomes max(lengths).

        With one row whose valid slots are consecutive (the usual case) this is a slice, not a gather."""
        import torch

        S, width = self.slots, max(self.lengths)
        if width == S and all(bool(self.valid[i, S - n:].all()) for i, n in enumerate(self.lengths)):
            return
        if self.batch == 1:
            kept = torch.nonzero(self.valid[0], as_tuple=False)[:, 0]
            n = int(kept.numel())
            start = int(kept[0]) if n else 0
            if n == width and (n == 0 or int(kept[-1]) - start + 1 == n):
                self._slice(start, start + n)
                self.pos = self.pos[:, start:start + n]
                self.valid = torch.ones((1, n), dtype=torch.bool, device=self.device)
                return
        idx = torch.zeros((self.batch, width), dtype=torch.long, device=self.device)
        for i, n in enumerate(self.lengths):
            if n:
                idx[i, width - n:] = torch.nonzero(self.valid[i], as_tuple=False)[:, 0]
        keep = torch.arange(width, device=self.device)[None, :] >= torch.tensor(
            [width - n for n in self.lengths], device=self.device)[:, None]

        flat: dict[tuple[int, int], Any] = {}

        def gather(t):
            # t[b, h, idx[b, w]] for every b, h, w: index_select of whole (D,) rows, about twice as fast
            # as torch.gather on CPU (the same values, copied)
            B, H, S, D = t.shape
            if (H, S) not in flat:
                flat[H, S] = ((torch.arange(B, device=t.device)[:, None, None] * H
                               + torch.arange(H, device=t.device)[None, :, None]) * S
                              + idx[:, None, :].to(t.device)).reshape(-1)
            return t.reshape(B * H * S, D).index_select(0, flat[H, S]).view(B, H, width, D)

        self._map_layers(gather)
        self.pos = torch.gather(self.pos, 1, idx).masked_fill(~keep, 0)
        self.valid = keep

    def place(self, row: int, prefill, length: int) -> None:
        """Put a text's prefilled cache (a ``DynamicCache`` of batch 1 and ``length`` slots, or None for
        length 0) into ``row``."""
        import torch

        self.clear(row)
        width = max(self.slots, length)
        if width > self.slots:
            extra = width - self.slots
            self._map_layers(lambda t: torch.nn.functional.pad(t, (0, 0, extra, 0)))
            self.valid = torch.nn.functional.pad(self.valid, (extra, 0), value=False)
            self.pos = torch.nn.functional.pad(self.pos, (extra, 0), value=0)
        if length:
            keys, values = list(self.keys), list(self.values)
            src_keys, src_values = _read_cache(prefill)
            for index, (src_k, src_v) in enumerate(zip(src_keys, src_values)):
                if src_k is None:
                    continue
                while len(keys) <= index:
                    keys.append(None)
                    values.append(None)
                if keys[index] is None:
                    shape = (self.batch, src_k.shape[1], width, src_k.shape[3])
                    keys[index] = src_k.new_zeros(shape)
                    values[index] = src_v.new_zeros(shape[:3] + (src_v.shape[3],))
                keys[index][row, :, width - length:] = src_k[0]
                values[index][row, :, width - length:] = src_v[0]
            self._set(keys, values)
        self.valid[row] = torch.arange(width, device=self.device) >= width - length
        self.pos[row] = torch.clamp(torch.arange(width, device=self.device) - (width - length), min=0)
        self.lengths[row] = length


class Runner:
    """Runs one forward pass of a causal LM for all rows of a :class:`BatchKV` (see the module docstring).

    Args: model (transformers causal LM), vocab V (logits kept), device. ``seconds`` accumulates the
    wall time spent inside the model's forward passes.
    """

    def __init__(self, model, vocab: int, device: str):
        import inspect

        self.model = model
        self.vocab = vocab
        self.device = device
        self.dtype = next(model.parameters()).dtype
        parameters = inspect.signature(model.forward).parameters
        self.keep_arg = "logits_to_keep" in parameters
        # the cache's keyword: ``cache`` from transformers 5.24 on (``past_key_values`` is deprecated there and
        # warns a FutureWarning on every call), ``past_key_values`` before
        self.cache_arg = "cache" if "cache" in parameters else "past_key_values"
        self.seconds = 0.0

    def _forward(self, kwargs: dict[str, Any]):
        """The model's forward on ``kwargs``, its wall time (the device's queued work waited for before the clock is
        read: :func:`evolve.engine.clock.synchronize`) added to ``seconds``."""
        import time

        synchronize(self.device)
        t0 = time.perf_counter()
        try:
            out = self.model(**kwargs)
            synchronize(self.device)
            return out
        finally:
            self.seconds += time.perf_counter() - t0

    def _forward_cached(self, kv: BatchKV, cache, kwargs: dict[str, Any], keep: int):
        """Run the model on ``kwargs`` (keeping the last ``keep`` logit rows where the model allows it) and take
        the grown ``cache`` into ``kv``; on an exception the cache is discarded and ``kv`` left as it was."""
        if self.keep_arg:
            kwargs["logits_to_keep"] = keep
        try:
            logits = self._forward(kwargs).logits
        except BaseException:
            kv.discard_cache()
            raise
        kv.absorb(cache)
        return logits

    def prefill(self, ids: Sequence[int]):
        """Run ``ids`` (positions 0..) alone into a new cache; returns the cache (None for no ids)."""
        import torch

        if not ids:
            return None
        cache = _new_cache()
        kwargs: dict[str, Any] = {"input_ids": torch.tensor([list(ids)], dtype=torch.long, device=self.device),
                                  "position_ids": torch.arange(len(ids), device=self.device)[None],
                                  self.cache_arg: cache, "use_cache": True}
        if self.keep_arg:
            kwargs["logits_to_keep"] = 1
        self._forward(kwargs)
        return cache

    def __call__(self, kv: BatchKV, feeds: Sequence[Sequence[int]], n_logits: int, allowed=None):
        """Append each row's ``feeds[i]`` (possibly empty) to ``kv``; return logits (B, n_logits, V).

        Row i's last min(n_logits, len(feeds[i])) logit rows belong to its last fed tokens (the
        others are padding). ``allowed(i, j)`` (torch broadcasting on query positions i and key
        positions j) restricts attention beyond causality. Returns None when nothing is fed.
        """
        import torch

        T = max(len(f) for f in feeds)
        if T == 0:
            return None
        B, dev = kv.batch, self.device
        ids = torch.zeros((B, T), dtype=torch.long)
        qpos = torch.zeros((B, T), dtype=torch.long)
        new_valid = torch.zeros((B, T), dtype=torch.bool)
        for i, f in enumerate(feeds):
            n = len(f)
            if n:
                ids[i, T - n:] = torch.tensor(list(f), dtype=torch.long)
                qpos[i, T - n:] = torch.arange(kv.lengths[i], kv.lengths[i] + n)
                new_valid[i, T - n:] = True
        ids, qpos, new_valid = ids.to(dev), qpos.to(dev), new_valid.to(dev)
        plain = allowed is None and kv.complete() and all(len(f) == T for f in feeds)
        valid = torch.cat([kv.valid, new_valid], dim=1)
        pos = torch.cat([kv.pos, qpos], dim=1)
        cache = kv.dynamic_cache()
        kwargs: dict[str, Any] = {"input_ids": ids, "position_ids": qpos, self.cache_arg: cache,
                                  "use_cache": True}
        if not plain:
            i, j = qpos[:, :, None], pos[:, None, :]
            ok = valid[:, None, :] & (j <= i)
            if allowed is not None:
                ok &= allowed(i, j)
            mask = torch.zeros((B, 1, T, valid.shape[1]), dtype=self.dtype, device=dev)
            kwargs["attention_mask"] = mask.masked_fill(~ok[:, None], torch.finfo(self.dtype).min)
        logits = self._forward_cached(kv, cache, kwargs, max(1, n_logits))
        kv.valid, kv.pos = valid, pos
        kv.lengths = [n + len(f) for n, f in zip(kv.lengths, feeds)]
        return logits[:, logits.shape[1] - n_logits:, : self.vocab]

    def tree(self, kv: BatchKV, context: Sequence[int], parents: Sequence[int], tokens: Sequence[int],
             keep: bool = False):
        """One forward pass over ``context`` and then a draft tree (tree attention) for a batch of ONE row.

        Tokens and positions. With L = ``kv.lengths[0]`` cached tokens, the c = len(``context``) >= 1
        context tokens (the text's tokens not cached yet; the last one is the last accepted token) get
        positions L..L+c-1. Then the n = len(``tokens``) tree nodes follow: node i holds ``tokens[i]``,
        its parent is node ``parents[i]`` (< i) or, for -1, the root (the last context token); its
        position is L + c - 1 + depth(i), depth 1 for a child of the root (siblings share a position;
        rotary embeddings use these ``position_ids``).

        Mask. An explicit 4-D additive mask (1, 1, T, S + T) (T = c + n, S slots; 0 where allowed, the
        dtype's minimum elsewhere) is always passed: every new token attends to every valid cached slot;
        context token k to context tokens 0..k; node i to all context tokens, its ancestors and itself
        only (not to siblings or other branches). So node i's logits equal those of a plain forward of
        the text followed by the path root -> i.

        Returns: logits (n + 1, V) in the model's dtype (float32 for a float32 model), V = ``self.vocab``:
        row 0 the last context token's (the root's next-token distribution), row 1 + i those after node i.

        Cache afterwards. The tree's slots are removed (``truncate(0, L + c)`` then ``compact``): ``kv``
        holds exactly the L + c tokens of the text, as if only ``context`` had been fed, so the accepted
        path can be fed next as ordinary context. With ``keep`` the tree's slots stay (the context's first, then node i
        at slot ``kv.slots - n + i``) until the caller's :meth:`BatchKV.keep_path` keeps the accepted path's and drops
        the others, so the accepted tokens are not fed again (a node's keys and values are those of a plain forward
        of the text and its path, as its logits are). ``seconds`` counts the pass.

        Raises: ValueError (before touching ``kv``) for a batch of more than one row, an empty context,
        ``parents`` and ``tokens`` of different lengths, or a parent outside -1..i-1. An exception of the
        model discards the built cache (as :meth:`__call__` does) and leaves ``kv`` as it was.
        """
        import torch

        if kv.batch != 1:
            raise ValueError(f"Runner.tree needs a batch of one row, got {kv.batch}")
        c, n = len(context), len(tokens)
        if c < 1:
            raise ValueError("Runner.tree needs at least one context token (the last accepted token)")
        if len(parents) != n:
            raise ValueError(f"Runner.tree: {len(parents)} parents for {n} tokens")
        depth: list[int] = []
        for i, p in enumerate(parents):
            p = int(p)
            if not -1 <= p < i:
                raise ValueError(f"Runner.tree: node {i} has parent {p} (needs -1 <= parent < {i})")
            depth.append(1 if p < 0 else depth[p] + 1)
        L, T, dev = kv.lengths[0], c + n, self.device
        root = L + c - 1
        qpos = torch.tensor([list(range(L, L + c)) + [root + d for d in depth]], dtype=torch.long, device=dev)
        ids = torch.tensor([list(context) + list(tokens)], dtype=torch.long, device=dev)
        # visibility among the new tokens: causal over the context, ancestors (and self) inside the tree
        seen = torch.zeros((T, T), dtype=torch.bool)
        seen[:c, :c] = torch.tril(torch.ones((c, c), dtype=torch.bool))
        for i, p in enumerate(parents):
            row = c + i
            if p >= 0:
                seen[row] = seen[c + int(p)]
            else:
                seen[row, :c] = True
            seen[row, row] = True
        ok = torch.cat([kv.valid[0][None, :].expand(T, -1), seen.to(dev)], dim=1)
        mask = torch.zeros((1, 1, T, kv.slots + T), dtype=self.dtype, device=dev)
        mask = mask.masked_fill(~ok[None, None], torch.finfo(self.dtype).min)
        cache = kv.dynamic_cache()
        kwargs: dict[str, Any] = {"input_ids": ids, "position_ids": qpos, self.cache_arg: cache,
                                  "attention_mask": mask, "use_cache": True}
        logits = self._forward_cached(kv, cache, kwargs, n + 1)
        kv.valid = torch.cat([kv.valid, torch.ones((1, T), dtype=torch.bool, device=dev)], dim=1)
        kv.pos = torch.cat([kv.pos, qpos], dim=1)
        kv.lengths = [root + 1 + max(depth, default=0)]  # every tree position is >= L + c: truncate drops them
        if not keep:
            kv.truncate(0, L + c)
            kv.compact()
        return logits[0, logits.shape[1] - (n + 1):, : self.vocab]

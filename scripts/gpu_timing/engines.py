"""The timed calls of each engine: ``Op`` (one call, eager or captured in a CUDA graph and replayed), on
transformers' LlamaForCausalLM with DynamicCache caches (``HFModel``), on the pure-torch Llama with a static cache
(``PureModel``, eager or with CUDA graphs) and on an EAGLE-3-style head (``HeadDrafter``)."""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from gpu_timing.llama import Eagle3Head, PureLlama, distributions, sample

try:  # optional: the fallback is the pure-torch Llama of gpu_timing.llama
    import transformers
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM
except Exception:  # noqa: BLE001 - any import failure means "not usable here"
    transformers = None


@dataclass(frozen=True)
class Timing:
    """Where and how every model of one (group, variant) is timed: the device, the cached context's length in
    tokens, the device synchronisation around each timed call, and (pure-torch models and heads only) whether each
    call is captured in a CUDA graph, with the graphs' shared memory pool."""

    device: torch.device
    context: int
    sync: object
    graph: bool = False
    pool: object = None


class Op:
    """One timed call: ``fn`` (run eagerly, or captured once in a CUDA graph and replayed), then ``reset``
    (untimed: restores the KV cache)."""

    def __init__(self, fn, reset=None, graph: bool = False, pool=None, sync=None):
        self.fn, self.reset, self.graph, self.pool, self.sync = fn, reset, graph, pool, sync or (lambda: None)
        self.g = None

    def _capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self.fn()
                if self.reset:
                    self.reset()
        torch.cuda.current_stream().wait_stream(s)
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g, pool=self.pool):
            self.fn()
        torch.cuda.synchronize()

    def time(self) -> float:
        if self.graph and self.g is None:
            self._capture()
        self.sync()
        t0 = time.perf_counter()
        if self.graph:
            self.g.replay()
        else:
            self.fn()
        self.sync()
        seconds = time.perf_counter() - t0
        if self.reset:
            self.reset()
        return seconds


def _cache_kwarg() -> str:
    import inspect
    params = inspect.signature(LlamaForCausalLM.forward).parameters
    return "cache" if "cache" in params and "past_key_values" not in params else "past_key_values"


def _crop(cache, length: int) -> None:
    """Crop a DynamicCache back to ``length`` tokens (a negative argument removes tokens in every transformers
    version; positive ones mean 'keep' in 4.x and are refused in 5.2x)."""
    n = cache.get_seq_length()
    if n > length:
        cache.crop(length - n)


def hf_config(c: dict):
    kw = {k: v for k, v in c.items() if k != "draft_vocab_size"}
    cfg = LlamaConfig(**kw, attn_implementation="sdpa")
    cfg.use_cache = True
    return cfg


class HFModel:
    """transformers' LlamaForCausalLM with DynamicCache caches (one per batch size), eager."""

    engine_detail = "transformers LlamaForCausalLM (SDPA attention), DynamicCache, eager"

    def __init__(self, c: dict, timing: Timing):
        self.c, self.device, self.L, self.sync = c, timing.device, timing.context, timing.sync
        with torch.device(timing.device):
            self.model = LlamaForCausalLM(hf_config(c)).eval()
        self.cfg = self.model.config
        self.kw = _cache_kwarg()
        self.caches = {}
        self.gen = torch.Generator(device="cpu").manual_seed(0)

    def ids(self, B, T):
        return torch.randint(0, self.c["vocab_size"], (B, T), generator=self.gen).to(self.device)

    def cache(self, B):
        if B not in self.caches:
            try:
                cache = DynamicCache(config=self.cfg)
            except TypeError:
                cache = DynamicCache()
            self.model(input_ids=self.ids(B, self.L), use_cache=True, logits_to_keep=1, **{self.kw: cache})
            assert cache.get_seq_length() == self.L, cache.get_seq_length()
            self.caches[B] = cache
        return self.caches[B]

    def forward_op(self, B, T) -> Op:
        cache, ids = self.cache(B), self.ids(B, T)

        def fn():
            distributions(self.model(input_ids=ids, use_cache=True, **{self.kw: cache}).logits)

        return Op(fn, lambda: _crop(cache, self.L), sync=self.sync)

    def plain_ops(self, n) -> list:
        cache, state = self.cache(1), {"tok": self.ids(1, 1)}

        def fn():
            logits = self.model(input_ids=state["tok"], use_cache=True, **{self.kw: cache}).logits
            state["tok"] = sample(distributions(logits[:, -1])).view(1, 1)

        return [Op(fn, (lambda: _crop(cache, self.L)) if i == n - 1 else None, sync=self.sync) for i in range(n)]

    def draft_op(self, gamma) -> Op:
        cache, first = self.cache(1), self.ids(1, 1)

        def fn():
            tok = first
            for _ in range(gamma):
                logits = self.model(input_ids=tok, use_cache=True, **{self.kw: cache}).logits
                tok = sample(distributions(logits[:, -1])).view(1, 1)

        return Op(fn, lambda: _crop(cache, self.L), sync=self.sync)


class PureModel:
    """The pure-torch Llama over one static cache for the largest batch (views for smaller ones); positions are
    fixed (the context length), so nothing needs cropping; with ``graph`` every op is a CUDA graph."""

    def __init__(self, c: dict, timing: Timing, max_batch: int, max_new: int):
        self.c, self.device, self.L, self.sync = c, timing.device, timing.context, timing.sync
        self.graph, self.pool = timing.graph, timing.pool
        with torch.device(timing.device):
            self.model = PureLlama(c).eval()
            self.kv = self.model.new_cache(max_batch, timing.context + max_new)
        self.gen = torch.Generator(device="cpu").manual_seed(0)
        self.engine_detail = ("pure-torch Llama (SDPA attention), static KV cache, "
                              + ("each timed call captured in a CUDA graph and replayed" if timing.graph else "eager"))

    def ids(self, B, T):
        return torch.randint(0, self.c["vocab_size"], (B, T), generator=self.gen).to(self.device)

    def forward_op(self, B, T) -> Op:
        ids = self.ids(B, T)
        return Op(lambda: distributions(self.model(ids, self.L, self.kv)), graph=self.graph, pool=self.pool,
                  sync=self.sync)

    def plain_ops(self, n) -> list:
        tok = self.ids(1, 1)

        def step(i):
            def fn():
                logits = self.model(tok, self.L + i, self.kv)
                tok.copy_(sample(distributions(logits[:, -1])).view(1, 1))
            return fn

        return [Op(step(i), graph=self.graph, pool=self.pool, sync=self.sync) for i in range(n)]

    def draft_op(self, gamma) -> Op:
        first, tok = self.ids(1, 1), self.ids(1, 1)

        def fn():
            tok.copy_(first)
            for i in range(gamma):
                logits = self.model(tok, self.L + i, self.kv)
                tok.copy_(sample(distributions(logits[:, -1])).view(1, 1))

        return Op(fn, graph=self.graph, pool=self.pool, sync=self.sync)


class HeadDrafter:
    """An EAGLE-3-style head proposing ``gamma`` tokens from random target features, with its own KV cache of the
    context."""

    def __init__(self, c: dict, timing: Timing, max_new: int):
        self.c = c
        with torch.device(timing.device):
            self.head = Eagle3Head(c).eval()
            self.kv = self.head.new_cache(timing.context + max_new)
            self.features = torch.randn(1, 1, 3 * c["hidden_size"])
            self.token = torch.zeros(1, 1, dtype=torch.long)
        self.L, self.sync, self.graph, self.pool = timing.context, timing.sync, timing.graph, timing.pool

    def draft_op(self, gamma) -> Op:
        return Op(lambda: self.head.propose(self.token, self.features, self.L, self.kv, gamma), graph=self.graph,
                  pool=self.pool, sync=self.sync)

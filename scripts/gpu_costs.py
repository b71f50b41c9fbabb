#!/usr/bin/env python3
"""Measured GPU cost files (the format of ``evolve/eval/costs.py``) for model shapes users deploy.

A dense model's timings do not depend on its weights' values, so the models here are built from their
configs with random weights (nothing is downloaded) and only timed. For each target / drafter pair this
measures, in bf16 under ``torch.inference_mode()``, after a cached context of ``--context`` tokens:

* ``target_forward_s[T - 1]``: one target forward over T = 1..16 new tokens (batch 1) and the T next-token
  distributions (a float32 softmax over the logits); the KV cache is cropped back after each, outside the timing;
* ``plain_token_s``: one step of plain decoding (a T = 1 forward, its distribution, one sample fed to the next
  step); the median of 4 consecutive steps per repeat, the cache rolled back once afterwards;
* ``draft_token_s``: the drafter proposes ``gamma`` tokens autoregressively (batch 1: forward, distribution,
  sample, feed back), timed as a whole and divided by gamma. A draft model keeps its own KV cache of the
  context; an EAGLE-3-style head (Li et al. 2025, arXiv 2503.01840) is one Llama decoder layer whose attention
  reads concat(embedding of the current token, fc(3 target hidden states)) (2H wide), with its own KV cache,
  a final RMSNorm and an LM head over a reduced draft vocabulary (the fc runs once per proposal, as in EAGLE-3,
  where later steps feed the layer's own output);
* ``batch_forward_s``: one step over n new tokens in total across a batch of requests (each with the same
  cached context): 1, 2, ..., 64 requests of one token each, then 64 requests of 2..32 tokens each; the whole
  grid (requests x tokens per request) is kept under ``batch_grid``.

Methods are interleaved, one repeat of each at a time (as ``evolve/perf/costs.py`` does), after
warm-ups, with ``torch.cuda.synchronize()`` around ``time.perf_counter()``; the median of ``--repeats`` is kept.

Two engines are measured for every pair: ``torch`` (transformers' LlamaForCausalLM, SDPA attention, DynamicCache,
eager: what a plain PyTorch engine pays, Python and kernel-launch overhead included), and, on CUDA,
``torch+cudagraph`` (a minimal pure-torch Llama with a static KV cache, every timed call captured once in a CUDA
graph and replayed, as serving engines do: closer to the GPU's own cost). Where transformers is missing the
``torch`` files use the pure-torch Llama in eager mode (``--impl pure`` forces that).

Standalone: imports torch, transformers (optional) and the standard library only. Each cost file is written as
soon as it is measured (atomically), the small model first, so a run cut short keeps what it finished.

    python3 scripts/gpu_costs.py --out docs/costs --device cuda          # on a CUDA machine (a few minutes)
    python3 scripts/gpu_costs.py --smoke --device cpu --out /tmp/smoke   # tiny configs, under a minute
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import traceback
from datetime import datetime, timezone

import torch
import torch.nn.functional as F
from torch import nn

try:  # optional: the fallback is the pure-torch Llama below
    import transformers
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM
except Exception:  # noqa: BLE001 - any import failure means "not usable here"
    transformers = None

# --- model shapes (configs of the public checkpoints; weights are random) ------------------------------------

SMOLLM2_135M = dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                    head_dim=64, intermediate_size=1536, vocab_size=49152, tie_word_embeddings=True,
                    rope_theta=100000.0, rms_norm_eps=1e-5, max_position_embeddings=8192)
LLAMA31_8B = dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                  head_dim=128, intermediate_size=14336, vocab_size=128256, tie_word_embeddings=False,
                  rope_theta=500000.0, rms_norm_eps=1e-5, max_position_embeddings=131072)
LLAMA32_1B = dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                  head_dim=64, intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True,
                  rope_theta=500000.0, rms_norm_eps=1e-5, max_position_embeddings=131072)


def eagle3_head(target: dict, draft_vocab: int) -> dict:
    """An EAGLE-3 head's shape for ``target``: one decoder layer of the target's width, heads and MLP."""
    return dict(hidden_size=target["hidden_size"], num_attention_heads=target["num_attention_heads"],
                num_key_value_heads=target["num_key_value_heads"], head_dim=target["head_dim"],
                intermediate_size=target["intermediate_size"], vocab_size=target["vocab_size"],
                draft_vocab_size=draft_vocab, rope_theta=target["rope_theta"], rms_norm_eps=target["rms_norm_eps"])


#: (file stem, target name, target config, [(file suffix, drafter name, drafter type, drafter config)])
#: (the drafter type is written under the cost file's key ``drafter.kind``, the key earlier cost files have)
GROUPS = [
    ("smollm2_135m", "SmolLM2-135M", SMOLLM2_135M,
     [("eagle", "EAGLE-3-style head for SmolLM2-135M", "eagle3-head", eagle3_head(SMOLLM2_135M, 32000))]),
    ("llama31_8b", "Llama-3.1-8B", LLAMA31_8B,
     [("llama32_1b", "Llama-3.2-1B", "draft-model", LLAMA32_1B),
      ("eagle3", "EAGLE-3-style head for Llama-3.1-8B", "eagle3-head", eagle3_head(LLAMA31_8B, 32000))]),
]

_TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             intermediate_size=128, vocab_size=512, tie_word_embeddings=True, rope_theta=10000.0, rms_norm_eps=1e-5,
             max_position_embeddings=1024)
_TINY_DRAFT = dict(_TINY, hidden_size=32, num_hidden_layers=1, head_dim=8, intermediate_size=64)
SMOKE_GROUPS = [
    ("smollm2_135m", "tiny stand-in for SmolLM2-135M", _TINY,
     [("eagle", "EAGLE-3-style head (tiny)", "eagle3-head", eagle3_head(_TINY, 256))]),
    ("llama31_8b", "tiny stand-in for Llama-3.1-8B", dict(_TINY, tie_word_embeddings=False),
     [("llama32_1b", "tiny draft model", "draft-model", _TINY_DRAFT),
      ("eagle3", "EAGLE-3-style head (tiny)", "eagle3-head", eagle3_head(_TINY, 256))]),
]

#: Consecutive plain decoding steps timed per repeat (as the CPU harness).
PLAIN_RUN = 4


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- sampling on the device (no host sync) --------------------------------------------------------------------

def sample(p: torch.Tensor) -> torch.Tensor:
    """One index per row of the distributions ``p`` (float32), drawn on the device (exponential race)."""
    return torch.argmax(p / torch.empty_like(p).exponential_(), dim=-1)


def distributions(logits: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits.float(), dim=-1)


# --- a minimal pure-torch Llama with a static KV cache --------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Rotary:
    def __init__(self, head_dim: int, theta: float, max_pos: int, device, dtype):
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim))
        f = torch.outer(torch.arange(max_pos, dtype=torch.float32, device=device), inv)
        emb = torch.cat([f, f], dim=-1)
        self.cos, self.sin = emb.cos().to(dtype), emb.sin().to(dtype)

    def apply(self, x, pos: int):  # x [B, heads, T, D]
        T = x.shape[-2]
        cos, sin = self.cos[pos:pos + T], self.sin[pos:pos + T]
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rot * sin


def attention(q, k, v, kv_buf, pos: int):
    """Write k, v [B, kvh, T, D] at ``pos`` of the static cache ``kv_buf`` ([2, Bmax, kvh, max_len, D]) and attend
    q [B, h, T, D] over positions 0..pos+T-1 (causal within the T new tokens)."""
    B, T = q.shape[0], q.shape[2]
    kbuf, vbuf = kv_buf[0, :B], kv_buf[1, :B]
    kbuf[:, :, pos:pos + T] = k
    vbuf[:, :, pos:pos + T] = v
    K, V = kbuf[:, :, :pos + T], vbuf[:, :, :pos + T]
    mask = None if T == 1 else torch.ones(T, pos + T, dtype=torch.bool, device=q.device).tril(diagonal=pos)
    if q.shape[1] != K.shape[1]:
        try:
            return F.scaled_dot_product_attention(q, K, V, attn_mask=mask, enable_gqa=True)
        except TypeError:  # torch < 2.5
            rep = q.shape[1] // K.shape[1]
            K, V = K.repeat_interleave(rep, dim=1), V.repeat_interleave(rep, dim=1)
    return F.scaled_dot_product_attention(q, K, V, attn_mask=mask)


class Attention(nn.Module):
    def __init__(self, c: dict, in_dim: int):
        super().__init__()
        self.h, self.kvh, self.d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.q_proj = nn.Linear(in_dim, self.h * self.d, bias=False)
        self.k_proj = nn.Linear(in_dim, self.kvh * self.d, bias=False)
        self.v_proj = nn.Linear(in_dim, self.kvh * self.d, bias=False)
        self.o_proj = nn.Linear(self.h * self.d, c["hidden_size"], bias=False)

    def forward(self, x, pos: int, kv_buf, rope: Rotary):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.h, self.d).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kvh, self.d).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kvh, self.d).transpose(1, 2)
        q, k = rope.apply(q, pos), rope.apply(k, pos)
        o = attention(q, k, v, kv_buf, pos)
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.h * self.d))


class MLP(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        H, I = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        H = c["hidden_size"]
        self.self_attn = Attention(c, H)
        self.mlp = MLP(c)
        self.input_layernorm = RMSNorm(H, c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(H, c["rms_norm_eps"])

    def forward(self, x, pos, kv_buf, rope):
        x = x + self.self_attn(self.input_layernorm(x), pos, kv_buf, rope)
        return x + self.mlp(self.post_attention_layernorm(x))


class PureLlama(nn.Module):
    """LlamaForCausalLM's shape (same parameter names) over a static KV cache: forward(ids [B, T], pos, cache)."""

    def __init__(self, c: dict):
        super().__init__()
        self.c = c
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.model.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c["num_hidden_layers"]))
        self.model.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        if c.get("tie_word_embeddings"):
            self.lm_head.weight = self.model.embed_tokens.weight
        self.rope = None

    def new_cache(self, batch: int, max_len: int):
        c = self.c
        p = next(self.parameters())
        self.rope = Rotary(c["head_dim"], c["rope_theta"], max_len, p.device, p.dtype)
        # random values stand for the context's keys and values (timings do not depend on them)
        return [torch.randn(2, batch, c["num_key_value_heads"], max_len, c["head_dim"], device=p.device, dtype=p.dtype)
                for _ in range(c["num_hidden_layers"])]

    def forward(self, ids, pos: int, cache):
        x = self.model.embed_tokens(ids)
        for layer, kv in zip(self.model.layers, cache):
            x = layer(x, pos, kv, self.rope)
        return self.lm_head(self.model.norm(x))


class Eagle3Head(nn.Module):
    """An EAGLE-3-style draft head (shapes as the paper's released heads): fc 3H -> H over three target layers'
    hidden states; one decoder layer whose q/k/v read concat(input_layernorm(embed(token)), hidden_norm(h)) (2H);
    the residual is h; post-attention norm and MLP; final norm; lm_head H -> draft vocabulary; d2t maps a draft
    index to a target token id."""

    def __init__(self, c: dict):
        super().__init__()
        H = c["hidden_size"]
        self.c = c
        self.embed_tokens = nn.Embedding(c["vocab_size"], H)  # the target's embedding in EAGLE-3 (shared)
        self.fc = nn.Linear(3 * H, H, bias=False)
        self.input_layernorm = RMSNorm(H, c["rms_norm_eps"])
        self.hidden_norm = RMSNorm(H, c["rms_norm_eps"])
        self.self_attn = Attention(c, 2 * H)
        self.post_attention_layernorm = RMSNorm(H, c["rms_norm_eps"])
        self.mlp = MLP(c)
        self.norm = RMSNorm(H, c["rms_norm_eps"])
        self.lm_head = nn.Linear(H, c["draft_vocab_size"], bias=False)
        self.register_buffer("d2t", torch.zeros(c["draft_vocab_size"], dtype=torch.long))
        self.rope = None

    def new_cache(self, max_len: int):
        c = self.c
        p = next(self.parameters())
        self.rope = Rotary(c["head_dim"], c["rope_theta"], max_len, p.device, p.dtype)
        return torch.randn(2, 1, c["num_key_value_heads"], max_len, c["head_dim"], device=p.device, dtype=p.dtype)

    def step(self, token, h, pos: int, kv):
        """token [1, 1], h [1, 1, H] -> (draft logits [1, 1, Vd], the layer's output h for the next step)."""
        x = torch.cat([self.input_layernorm(self.embed_tokens(token)), self.hidden_norm(h)], dim=-1)
        h = h + self.self_attn(x, pos, kv, self.rope)
        h = h + self.mlp(self.post_attention_layernorm(h))
        return self.lm_head(self.norm(h)), h

    def propose(self, token, features, pos: int, kv, gamma: int):
        h = self.fc(features)
        out = []
        for i in range(gamma):
            logits, h = self.step(token, h, pos + i, kv)
            idx = sample(distributions(logits[:, -1]))
            token = (idx + self.d2t[idx]).view(1, 1)
            out.append(token)
        return torch.cat(out, dim=1)


# --- timed operations --------------------------------------------------------------------------------------

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

    def __init__(self, c: dict, device, context: int, sync):
        self.c, self.device, self.L, self.sync = c, device, context, sync
        with torch.device(device):
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

    def __init__(self, c: dict, device, context: int, sync, max_batch: int, max_new: int, graph: bool, pool):
        self.c, self.device, self.L, self.sync, self.graph, self.pool = c, device, context, sync, graph, pool
        with torch.device(device):
            self.model = PureLlama(c).eval()
            self.kv = self.model.new_cache(max_batch, context + max_new)
        self.gen = torch.Generator(device="cpu").manual_seed(0)
        self.engine_detail = ("pure-torch Llama (SDPA attention), static KV cache, "
                              + ("each timed call captured in a CUDA graph and replayed" if graph else "eager"))

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
    def __init__(self, c: dict, device, context: int, max_new: int, sync, graph: bool, pool):
        self.c = c
        with torch.device(device):
            self.head = Eagle3Head(c).eval()
            self.kv = self.head.new_cache(context + max_new)
            self.features = torch.randn(1, 1, 3 * c["hidden_size"])
            self.token = torch.zeros(1, 1, dtype=torch.long)
        self.L, self.sync, self.graph, self.pool = context, sync, graph, pool

    def draft_op(self, gamma) -> Op:
        return Op(lambda: self.head.propose(self.token, self.features, self.L, self.kv, gamma), graph=self.graph,
                  pool=self.pool, sync=self.sync)


# --- measuring one group (a target and its drafters) ----------------------------------------------------------

def batch_plan(smoke: bool):
    """(requests, tokens per request) points of the batch grid, and those of the main batch curve."""
    if smoke:
        requests, per = [1, 2, 4], [1, 2]
        extra = [(4, 4)]
    else:
        requests, per = [1, 2, 4, 8, 16, 32, 64], [1, 2, 4, 8]
        extra = [(64, 16), (64, 32)]
    grid = [(r, t) for r in requests for t in per] + extra
    top = requests[-1]
    curve = [(r, 1) for r in requests] + sorted((top, t) for r, t in grid if r == top and t > 1)
    return grid, curve


def n_params(module) -> int:
    return sum(p.numel() for p in module.parameters())


def measure_group(target, drafters: dict, args, tmax: int, gamma: int, grid) -> dict:
    fwd = {T: target.forward_op(1, T) for T in range(1, tmax + 1)}
    plain = target.plain_ops(PLAIN_RUN)
    drafts = {name: d.draft_op(gamma) for name, d in drafters.items()}
    batch = {rt: (fwd[rt[1]] if rt[0] == 1 else target.forward_op(*rt)) for rt in grid}
    curve = {T: [] for T in fwd}
    plain_s, draft_s = [], {name: [] for name in drafts}
    grid_s = {rt: [] for rt in grid}
    t0 = time.perf_counter()
    for w in range(args.warmups):
        for op in list(fwd.values()) + plain + list(drafts.values()) + list(batch.values()):
            op.time()
    log(f"  warm-up done in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    for r in range(args.repeats):
        for T, op in fwd.items():
            curve[T].append(op.time())
        plain_s.extend(op.time() for op in plain)
        for name, op in drafts.items():
            draft_s[name].append(op.time() / gamma)
        for rt in grid:
            grid_s[rt].append(batch[rt].time())
    log(f"  {args.repeats} repeats in {time.perf_counter() - t0:.1f} s")
    return {"curve": [statistics.median(curve[T]) for T in sorted(curve)],
            "plain": statistics.median(plain_s),
            "draft": {name: statistics.median(v) for name, v in draft_s.items()},
            "grid": {rt: statistics.median(v) for rt, v in grid_s.items()},
            "spread": {"target_forward_T1_min_max_s": [min(curve[1]), max(curve[1])],
                       "plain_min_max_s": [min(plain_s), max(plain_s)]}}


def versions(device) -> dict:
    v = {"torch": torch.__version__, "transformers": getattr(transformers, "__version__", None),
         "cuda": torch.version.cuda, "python": platform.python_version()}
    if device.type == "cuda":
        v["cudnn"] = torch.backends.cudnn.version()
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20)
            v["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
        except Exception:  # noqa: BLE001
            v["driver"] = None
    return v


def gpu_name(device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else (platform.processor() or platform.machine()
                                                                              or "cpu")


def gpu_slug(device) -> str:
    if device.type != "cuda":
        return "cpu"
    found = re.findall(r"[A-Za-z]+\d+\w*", torch.cuda.get_device_name(device))
    return (found[0] if found else "gpu").lower()


def config_summary(c: dict) -> dict:
    return dict(c)


def cost_doc(res: dict, drafter_key: str, meta: dict, grid, curve_points, gamma: int) -> dict:
    fwd = res["curve"]
    draft = res["draft"][drafter_key]
    plain = res["plain"]
    tokens = [r * t for r, t in curve_points]
    seconds = [res["grid"][rt] for rt in curve_points]
    doc = {
        "target_forward_s": fwd,
        "draft_token_s": draft,
        "plain_token_s": plain,
        "batch_forward_s": {"tokens": tokens, "seconds": seconds,
                            "requests": [r for r, _ in curve_points],
                            "tokens_per_request": [t for _, t in curve_points]},
        "target_forward_relative": [t / fwd[0] for t in fwd],
        "draft_token_relative": draft / fwd[0],
        "plain_tokens_per_s": 1.0 / plain,
        "drafted_tokens_per_call": gamma,
        "batch_tokens_per_s": [n / s for n, s in zip(tokens, seconds)],
        "batch_grid": {"requests": [r for r, _ in grid], "tokens_per_request": [t for _, t in grid],
                       "seconds": [res["grid"][rt] for rt in grid]},
        "timing_spread": res["spread"],
    }
    doc.update(meta)
    return doc


def write_json(path: str, doc: dict) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def check_doc(doc: dict) -> None:
    """The checks of the project's loader (evolve.eval.costs.costs_from_dict), restated (standalone script)."""
    curve = doc["target_forward_s"]
    assert isinstance(curve, list) and curve and all(math.isfinite(v) and v > 0 for v in curve), curve
    assert math.isfinite(doc["draft_token_s"]) and doc["draft_token_s"] >= 0
    assert math.isfinite(doc["plain_token_s"]) and doc["plain_token_s"] > 0
    b = doc["batch_forward_s"]
    assert len(b["tokens"]) == len(b["seconds"]) and all(s > 0 for s in b["seconds"])
    assert all(x < y for x, y in zip(b["tokens"], b["tokens"][1:])), b["tokens"]


def run_group(group, variant: str, args, device, sync, slug: str, written: list) -> None:
    stem, tname, tcfg, drafter_specs = group
    tmax, gamma = args.tmax, args.tmax - 1
    grid, curve_points = batch_plan(args.smoke)
    max_batch = max(r for r, _ in grid)
    max_new = max(max(t for _, t in grid), tmax, gamma + 1, PLAIN_RUN)
    graph = variant == "cudagraph"
    pool = torch.cuda.graph_pool_handle() if graph else None
    use_hf = variant == "eager" and transformers is not None and args.impl != "pure"
    t_start = time.perf_counter()
    log(f"{stem} [{variant}]: building {tname} ({'transformers' if use_hf else 'pure torch'}), context {args.context}")
    if use_hf:
        target = HFModel(tcfg, device, args.context, sync)
    else:
        target = PureModel(tcfg, device, args.context, sync, max_batch, max_new, graph, pool)
    drafters, dmeta = {}, {}
    for suffix, dname, drafter_type, dcfg in drafter_specs:
        if drafter_type == "draft-model":
            d = HFModel(dcfg, device, args.context, sync) if use_hf else \
                PureModel(dcfg, device, args.context, sync, 1, max_new, graph, pool)
            params = n_params(d.model)
        else:
            d = HeadDrafter(dcfg, device, args.context, max_new, sync, graph, pool)
            params = n_params(d.head) - d.head.embed_tokens.weight.numel()
        drafters[suffix] = d
        dmeta[suffix] = {"kind": drafter_type, "name": dname, "config": config_summary(dcfg), "gamma": gamma,
                         "parameters": params}
        if drafter_type == "eagle3-head":
            dmeta[suffix]["parameters_note"] = "without the token embedding, which EAGLE-3 shares with the target"
            dmeta[suffix]["cost_per_token"] = ("one decoder layer over one token with its own KV cache of the context "
                                               "(2H-wide q/k/v input), final norm, lm_head over the draft vocabulary, "
                                               "softmax and a sample; fc once per proposal")
    log(f"  built in {time.perf_counter() - t_start:.1f} s; measuring")
    res = measure_group(target, drafters, args, tmax, gamma, grid)
    vers = versions(device)
    name = gpu_name(device)
    engine = "torch" if not graph else "torch+cudagraph"
    impl = target.engine_detail if hasattr(target, "engine_detail") else HFModel.engine_detail
    for suffix, _, drafter_type, _ in drafter_specs:
        machine = (f"{name}, torch {vers['torch']} (CUDA {vers['cuda']}), "
                   + (f"transformers {vers['transformers']}, " if use_hf else "")
                   + f"{impl}; models built from their configs with random bf16 weights (timings only)")
        meta = {
            "machine": machine,
            "host": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                     "cpu_count": os.cpu_count()},
            "gpu": name,
            "threads": torch.get_num_threads(),
            "engine": engine,
            "engine_detail": impl,
            "weights": "random (models built from configs; timings only, no outputs to read)",
            "target": {"name": tname, "config": config_summary(tcfg), "parameters": n_params(target.model)},
            "drafter": dmeta[suffix],
            "dtype": "bfloat16" if device.type == "cuda" or args.dtype == "bfloat16" else args.dtype,
            "device": device.type,
            "versions": vers,
            "torch": vers["torch"], "transformers": vers["transformers"], "cuda": vers["cuda"],
            "context_tokens": args.context,
            "gamma_max": tmax - 1,
            "repeats": args.repeats,
            "warmups": args.warmups,
            "plain_run": PLAIN_RUN,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "script": "scripts/gpu_costs.py" + (" --smoke" if args.smoke else ""),
        }
        doc = cost_doc(res, suffix, meta, grid, curve_points, gamma)
        check_doc(doc)
        fname = f"measured_{slug}_{stem}_{suffix}" + {"eager": "", "cudagraph": "_cudagraph", "pure": "_pure"}[variant] \
            + ".json"
        path = os.path.join(args.out, fname)
        write_json(path, doc)
        written.append(path)
        rel = doc["target_forward_relative"]
        log(f"  wrote {path}: T=1 {doc['target_forward_s'][0] * 1e3:.3f} ms, T=16/T=1 {rel[-1]:.2f}, "
            f"T=8/T=1 {rel[min(7, len(rel) - 1)]:.2f}, draft {doc['draft_token_s'] * 1e3:.3f} ms "
            f"({doc['draft_token_relative']:.3f} of T=1), plain {doc['plain_tokens_per_s']:.1f} tok/s, batch "
            + ", ".join(f"{n}:{s * 1e3:.2f}ms" for n, s in zip(doc['batch_forward_s']['tokens'],
                                                                  doc['batch_forward_s']['seconds'])))
    del target, drafters, d, res
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    log(f"{stem} [{variant}] done in {time.perf_counter() - t_start:.1f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for the cost files (created)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats of every method (default 20; smoke 2)")
    ap.add_argument("--warmups", type=int, default=None, help="warm-up rounds (default 2; smoke 1)")
    ap.add_argument("--context", type=int, default=None, help="cached context tokens (default 512; smoke 32)")
    ap.add_argument("--tmax", type=int, default=16, help="largest T of the T-curve (draft gamma = tmax - 1)")
    ap.add_argument("--smoke", action="store_true", help="tiny configs and few repeats (runs on a CPU in seconds)")
    ap.add_argument("--impl", choices=["auto", "pure"], default="auto",
                    help="auto: transformers if importable, else the pure-torch Llama; pure: always the latter")
    ap.add_argument("--graphs", choices=["auto", "on", "off"], default="auto",
                    help="also measure the CUDA-graph variant (auto: on CUDA; on a CPU 'on' runs its code eagerly)")
    ap.add_argument("--only", default=None, help="comma-separated group stems (smollm2_135m, llama31_8b)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="start no further (group, variant) once this many seconds have passed")
    ap.add_argument("--dtype", default="bfloat16", help="dtype on a CPU (default bfloat16; CUDA is always bfloat16)")
    args = ap.parse_args(argv)
    args.repeats = args.repeats or (2 if args.smoke else 20)
    args.warmups = args.warmups if args.warmups is not None else (1 if args.smoke else 2)
    args.context = args.context or (32 if args.smoke else 512)
    device = torch.device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", torch.cuda.current_device() if device.index is None else device.index)
        torch.cuda.set_device(device)
    os.makedirs(args.out, exist_ok=True)
    torch.set_default_dtype(torch.bfloat16 if device.type == "cuda" else getattr(torch, args.dtype))
    torch.manual_seed(0)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    slug = gpu_slug(device)
    log(f"device {gpu_name(device)} ({slug}); torch {torch.__version__}, transformers "
        f"{getattr(transformers, '__version__', 'missing')}, CUDA {torch.version.cuda}; context {args.context}, "
        f"repeats {args.repeats}, warm-ups {args.warmups}")
    groups = SMOKE_GROUPS if args.smoke else GROUPS
    if args.only:
        keep = set(args.only.split(","))
        groups = [g for g in groups if g[0] in keep]
    variants = ["eager"]
    if args.graphs == "on" or (args.graphs == "auto" and device.type == "cuda"):
        variants.append("cudagraph")
    written, failed = [], []
    graphs_ok = True
    t0 = time.perf_counter()
    with torch.inference_mode():
        for group in groups:
            for variant in variants:
                if variant == "cudagraph" and not graphs_ok:
                    continue
                if args.budget_s is not None and time.perf_counter() - t0 > args.budget_s:
                    log(f"skipping {group[0]} [{variant}]: past --budget-s {args.budget_s:g}")
                    failed.append(f"{group[0]} [{variant}] (skipped, budget)")
                    continue
                if variant == "cudagraph" and device.type != "cuda":
                    log("(CUDA graphs need CUDA: the graph variant's code runs eagerly here)")
                try:
                    run_group(group, variant if device.type == "cuda" else ("eager" if variant == "eager" else "pure"),
                              args, device, sync, slug, written)
                except Exception:  # noqa: BLE001 - keep the other files
                    failed.append(f"{group[0]} [{variant}]")
                    traceback.print_exc()
                    if variant == "cudagraph":
                        graphs_ok = False
                    gc.collect()
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
    log(f"all done in {time.perf_counter() - t0:.1f} s; wrote {len(written)} files"
        + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    for p in written:
        print(p)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

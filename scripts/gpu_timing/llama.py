"""A minimal pure-torch Llama over a static KV cache (``PureLlama``, LlamaForCausalLM's parameter names) and an
EAGLE-3-style draft head (``Eagle3Head``; Li et al. 2025, arXiv 2503.01840), with sampling on the device."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

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

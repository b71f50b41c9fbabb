"""The EAGLE-3 head's checkpoint and computation (Li et al. 2025, arXiv 2503.01840): reading and writing the
published layout (``config.json``, ``model.safetensors`` or ``pytorch_model.bin``; :class:`EagleConfig`,
:func:`load_head_weights`, :func:`save_head`) and the head's forward on one text (:class:`EagleHead`).

The layout and the equations follow the authors' code (SafeAILab/EAGLE, ``eagle/model/cnets.py``: ``Model``,
``LlamaDecoderLayeremb``) and SGLang's trainer (sgl-project/SpecForge,
``specforge/modeling/draft/llama3_eagle.py``: ``LlamaForCausalLMEagle3``). The equations, and the drafter
that runs the head on the target's hidden states: :mod:`evolve.engine.eagle`.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from evolve.errors import InputError
from evolve.files.tensors import tensor_problem

#: The head's tensors (names as the authors' and SpecForge's checkpoints store them).
HEAD_TENSORS: tuple[str, ...] = (
    "fc.weight", "midlayer.hidden_norm.weight", "midlayer.input_layernorm.weight",
    "midlayer.self_attn.q_proj.weight", "midlayer.self_attn.k_proj.weight", "midlayer.self_attn.v_proj.weight",
    "midlayer.self_attn.o_proj.weight", "midlayer.post_attention_layernorm.weight", "midlayer.mlp.gate_proj.weight",
    "midlayer.mlp.up_proj.weight", "midlayer.mlp.down_proj.weight", "norm.weight", "lm_head.weight")
#: Optional tensors: the vocabulary maps and the head's own embedding.
OPTIONAL_TENSORS: tuple[str, ...] = ("d2t", "t2d", "embed_tokens.weight")
#: The dtype kind of each tensor that is not a float tensor (:func:`evolve.files.tensors.tensor_problem`): the draft
#: vocabulary's offsets to target ids, and the target vocabulary's membership mask.
TENSOR_KINDS = {"d2t": "integer", "t2d": "bool"}
#: Weight files tried, in order.
WEIGHT_FILES: tuple[str, ...] = ("model.safetensors", "pytorch_model.bin")
PARAM = "eagle"


def default_layers(n_layers: int) -> tuple[int, int, int]:
    """The target layers whose outputs feed the head by default: 1, N // 2 - 1, N - 4 (the inputs of layers 2,
    N // 2 and N - 3, the authors' ``modeling_llama_kv.py``; SpecForge's ``resolve_eagle_capture_layers``)."""
    return (1, n_layers // 2 - 1, n_layers - 4)


@dataclass(frozen=True)
class EagleConfig:
    """A head's ``config.json``, read (module doc). Sizes are counts; ``layers`` the target layers whose outputs
    it reads (None: :func:`default_layers`); ``raw`` the whole file."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    eps: float
    act: str
    vocab: int
    draft_vocab: int
    target_hidden: int
    layers: tuple[int, ...] | None
    raw: dict

    @classmethod
    def read(cls, path: Path) -> "EagleConfig":
        """Read ``path`` (a config.json): :meth:`read_dict` of its contents. Raises InputError (``eagle``) for a
        missing or malformed file."""
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise InputError(f"{path}: no such file (an EAGLE-3 head directory holds config.json)", param=PARAM) from None
        except (ValueError, RecursionError) as exc:
            raise InputError(f"{path}: not an EAGLE-3 head config ({' '.join(str(exc).split())[:160]})",
                             param=PARAM) from None
        except OSError as exc:
            raise InputError(f"{path}: cannot read the EAGLE-3 head config ({exc.strerror or exc})",
                             param=PARAM) from None
        return cls.read_dict(raw, str(path))

    @classmethod
    def read_dict(cls, raw: dict, where: str = "config.json") -> "EagleConfig":
        """A head config from the contents of its ``config.json``. Raises InputError (``eagle``, naming ``where``
        and the key) for a missing or malformed key, a size that is not a whole number >= 1 (zero heads), key/value
        heads that do not divide the heads, a draft vocabulary larger than the vocabulary, a ``rms_norm_eps`` or
        ``rope_theta`` that is not a finite number > 0, an activation (``hidden_act``) or rotary embedding
        (``rope_scaling``/``rope_parameters``) that transformers' own code does not build, or an option this head
        does not implement (``fc_norm``, ``norm_output`` false, ``pretraining_tp`` > 1)."""
        if not isinstance(raw, dict):
            raise InputError(f"{where}: not an EAGLE-3 head config (a JSON object)", param=PARAM)
        try:
            hidden, heads = _whole(raw, "hidden_size", where), _whole(raw, "num_attention_heads", where)
            layers = (raw.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
            cfg = cls(hidden, heads, _whole(raw, "num_key_value_heads", where, heads),
                      _whole(raw, "head_dim", where, hidden // heads or None, MAX_HEAD_DIM), _whole(raw, "intermediate_size", where),
                      _positive(raw, "rms_norm_eps", where, 1e-6), str(raw.get("hidden_act", "silu")),
                      _whole(raw, "vocab_size", where), _whole(raw, "draft_vocab_size", where, raw.get("vocab_size")),
                      _whole(raw, "target_hidden_size", where, hidden),
                      None if layers is None else tuple(int(i) for i in layers), dict(raw))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InputError(f"{where}: not an EAGLE-3 head config ({type(exc).__name__}: {exc})", param=PARAM) from None
        _check_sense(cfg, where)
        if raw.get("fc_norm") or raw.get("norm_output", True) is False or int(raw.get("pretraining_tp", 1)) > 1:
            raise InputError(f"{where}: fc_norm, norm_output false and pretraining_tp > 1 are not supported",
                             param=PARAM)
        if cfg.layers is not None and len(cfg.layers) != 3:
            raise InputError(f"{where}: eagle_aux_hidden_state_layer_ids needs three layers (got {list(cfg.layers)})",
                             param=PARAM)
        return cfg

    def rope(self):
        """transformers' ``LlamaRotaryEmbedding`` for this config (rope_theta, rope_scaling / rope_parameters)."""
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        keys = ("rope_theta", "rope_scaling", "rope_parameters", "max_position_embeddings")
        cfg = LlamaConfig(hidden_size=self.hidden, num_attention_heads=self.heads, num_key_value_heads=self.kv_heads,
                          head_dim=self.head_dim, **{k: self.raw[k] for k in keys if self.raw.get(k) is not None})
        return LlamaRotaryEmbedding(cfg)


#: The largest size a head's config may give (a vocabulary, a hidden or intermediate size): far above any
#: published model's, far below what would exhaust memory before the weights' shapes are compared.
MAX_SIZE = 1 << 24
#: The largest ``head_dim`` (the rotary embedding is built from the config alone).
MAX_HEAD_DIM = 1 << 16


def _whole(raw: dict, key: str, where: str, default=None, most: int = MAX_SIZE) -> int:
    """``raw[key]`` (or ``default`` when absent or null) as a whole number in 1..``most``. Raises InputError naming
    the key."""
    value = raw.get(key)
    value = default if value is None else value
    if value is None:
        raise InputError(f"{where}: not an EAGLE-3 head config (no key '{key}')", param=PARAM)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value != int(value) or not 1 <= value <= most:
        raise InputError(f"{where}: key '{key}' is {value!r}, expected a whole number in 1..{most}", param=PARAM)
    return int(value)


def _positive(raw: dict, key: str, where: str, default: float) -> float:
    """``raw[key]`` (``default`` when absent) as a finite number > 0. Raises InputError naming the key."""
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(f"{where}: key '{key}' is {value!r}, expected a finite number > 0", param=PARAM)
    return float(value)


def _check_sense(cfg: EagleConfig, where: str) -> None:
    """The config's values make a head transformers' code can run (see :meth:`EagleConfig.read_dict`)."""
    from transformers.activations import ACT2FN

    raw = cfg.raw
    if cfg.heads % cfg.kv_heads:
        raise InputError(f"{where}: key 'num_key_value_heads' is {cfg.kv_heads}, which does not divide the "
                         f"{cfg.heads} attention heads", param=PARAM)
    if cfg.draft_vocab > cfg.vocab:
        raise InputError(f"{where}: key 'draft_vocab_size' is {cfg.draft_vocab}, more than vocab_size "
                         f"{cfg.vocab}", param=PARAM)
    if cfg.act not in ACT2FN:
        raise InputError(f"{where}: key 'hidden_act' is {cfg.act!r}, not an activation transformers knows (e.g. "
                         f"silu, gelu)", param=PARAM)
    if raw.get("num_hidden_layers") is not None and _whole(raw, "num_hidden_layers", where) != 1:
        raise InputError(f"{where}: key 'num_hidden_layers' is {raw['num_hidden_layers']!r}; an EAGLE-3 head is one "
                         f"decoder layer", param=PARAM)
    _positive(raw, "rope_theta", where, 10000.0)
    if raw.get("max_position_embeddings") is not None:
        _whole(raw, "max_position_embeddings", where)
    key = next((k for k in ("rope_scaling", "rope_parameters") if raw.get(k) is not None), "rope_theta")
    if key != "rope_theta" and not isinstance(raw[key], dict):
        raise InputError(f"{where}: key '{key}' must be a JSON object or null (value {raw[key]!r})", param=PARAM)
    try:
        import torch

        cos, sin = cfg.rope()(torch.zeros(1, 1, 2, cfg.head_dim), torch.arange(2)[None])
        ok = bool(torch.isfinite(cos).all() and torch.isfinite(sin).all())
    except Exception as exc:  # noqa: BLE001 - transformers' rope code raises many types for a bad setting
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        raise InputError(f"{where}: key '{key}' is not a rotary embedding transformers builds "
                         f"({type(exc).__name__}: {(lines[0] if lines else '')[:120]})", param=PARAM) from None
    if not ok:
        raise InputError(f"{where}: key '{key}' gives a rotary embedding with NaN or infinite values", param=PARAM)


def load_head_weights(directory: Path) -> tuple[dict, Path]:
    """The tensors of a head's weight file (:data:`WEIGHT_FILES`, the first present) and its path.

    ``model.safetensors`` is read with the safetensors package, ``pytorch_model.bin`` with ``torch.load``
    (``weights_only=True``). Raises InputError (``eagle``) when neither exists or the file cannot be read."""
    for name in WEIGHT_FILES:
        path = directory / name
        if not path.is_file():
            continue
        try:
            if name.endswith(".safetensors"):
                from safetensors.torch import load_file

                return dict(load_file(str(path))), path
            import torch

            return dict(torch.load(str(path), map_location="cpu", weights_only=True)), path
        except Exception as exc:  # damaged files raise many types
            raise InputError(f"{path}: cannot read the weights ({type(exc).__name__}: {exc})", param=PARAM) from None
    raise InputError(f"{directory}: no weights ({' or '.join(WEIGHT_FILES)})", param=PARAM)


def save_head(directory, config: dict, tensors: dict, safetensors: bool = True) -> Path:
    """Write a head in the published layout: ``config.json`` and ``model.safetensors`` (or ``pytorch_model.bin``
    with ``safetensors=False``). ``tensors``: name -> torch tensor (:data:`HEAD_TENSORS`, ``d2t`` int64 (D,),
    ``t2d`` bool (V,)). Returns the directory."""
    import torch

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    data = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    if safetensors:
        from safetensors.torch import save_file

        save_file(data, str(out / "model.safetensors"))
    else:
        torch.save(data, str(out / "pytorch_model.bin"))
    return out


class EagleHead:
    """The head's computation on torch tensors of one text (module doc), weights in the target's dtype and device.

    Args: ``config`` (:class:`EagleConfig`), ``tensors`` (name -> tensor as loaded), ``embed`` the (V, H)
    embedding (the head's or the target's), ``vocab`` V (the target's logits), dtype and device; ``where`` names
    the weight file in messages.
    Raises InputError (``eagle``, naming ``where`` and the tensor) for a missing tensor, a tensor of the wrong
    shape, a weight or norm that is NaN or infinite (also once cast to ``dtype``), or a vocabulary map that does
    not fit (ids outside 0..V-1, repeated ids, V different from the config's ``vocab_size``).
    """

    def __init__(self, config: EagleConfig, tensors: dict, embed, vocab: int, dtype, device: str,
                 where: str = "the head"):
        import torch
        from transformers.activations import ACT2FN

        c = config
        H, Hq, Hkv, D = c.hidden, c.heads * c.head_dim, c.kv_heads * c.head_dim, c.draft_vocab
        shapes = {"fc.weight": (H, 3 * c.target_hidden), "midlayer.hidden_norm.weight": (H,),
                  "midlayer.input_layernorm.weight": (H,), "midlayer.self_attn.q_proj.weight": (Hq, 2 * H),
                  "midlayer.self_attn.k_proj.weight": (Hkv, 2 * H), "midlayer.self_attn.v_proj.weight": (Hkv, 2 * H),
                  "midlayer.self_attn.o_proj.weight": (H, Hq), "midlayer.post_attention_layernorm.weight": (H,),
                  "midlayer.mlp.gate_proj.weight": (c.intermediate, H), "midlayer.mlp.up_proj.weight": (c.intermediate, H),
                  "midlayer.mlp.down_proj.weight": (H, c.intermediate), "norm.weight": (H,), "lm_head.weight": (D, H)}
        unknown = sorted(set(tensors) - set(HEAD_TENSORS) - set(OPTIONAL_TENSORS))
        if unknown:
            raise InputError(f"{where}: unexpected tensor '{unknown[0]}' in the head ({len(unknown)} unknown)",
                             param=PARAM)
        for name, value in tensors.items():
            problem = tensor_problem(value, TENSOR_KINDS.get(name, "float"))
            if problem is not None:
                raise InputError(f"{where}: '{name}' {problem}", param=PARAM)
        for name, shape in shapes.items():
            if name not in tensors:
                raise InputError(f"{where}: the head has no tensor '{name}'", param=PARAM)
            if tuple(tensors[name].shape) != shape:
                raise InputError(f"{where}: tensor '{name}' has shape {tuple(tensors[name].shape)}, expected {shape}",
                                 param=PARAM)
        if c.vocab != vocab:
            raise InputError(f"{where}: the head's vocab_size is {c.vocab}, the target has {vocab} logits", param=PARAM)
        if embed.dim() != 2 or embed.shape[0] < vocab or embed.shape[1] != H:
            raise InputError(f"{where}: embedding of shape {tuple(embed.shape)}, the head needs ({vocab}, {H})",
                             param=PARAM)
        if "embed_tokens.weight" in tensors and not bool(torch.isfinite(embed).all()):
            raise InputError(f"{where}: tensor 'embed_tokens.weight' holds a NaN or infinite value", param=PARAM)
        if "d2t" in tensors:
            d2t = tensors["d2t"].to(torch.long).reshape(-1)
        elif D == vocab:
            d2t = torch.zeros(D, dtype=torch.long)
        else:
            raise InputError(f"{where}: the head has no 'd2t' map for its {D}-token draft vocabulary", param=PARAM)
        ids = torch.arange(D) + d2t if d2t.numel() == D else None
        if ids is None or int(ids.min()) < 0 or int(ids.max()) >= vocab or int(torch.unique(ids).numel()) != D:
            raise InputError(f"{where}: 'd2t' does not map the {D} draft ids onto distinct target ids below {vocab}",
                             param=PARAM)
        w = {k: tensors[k].to(device=device, dtype=dtype) for k in shapes}
        bad = next((k for k, v in w.items() if not bool(torch.isfinite(v).all())), None)
        if bad is not None:
            raise InputError(f"{where}: tensor '{bad}' holds a NaN or infinite value (in {dtype})", param=PARAM)
        self.config, self.w, self.vocab, self.dtype, self.device = c, w, vocab, dtype, device
        self.embed = embed.to(device=device, dtype=dtype)
        self.target_ids = ids.to(device)
        self.act = ACT2FN[c.act]
        self.rope = c.rope().to(device)

    def _norm(self, x, name: str):
        """Llama RMSNorm (in float32, weight times the normalised input cast back)."""
        import torch

        x32 = x.to(torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.config.eps)
        return self.w[name] * x32.to(x.dtype)

    def project(self, g):
        """``fc``: target features (T, 3 H_t) -> (T, H)."""
        return g.to(self.dtype) @ self.w["fc.weight"].T

    def layer(self, tokens, hidden, positions, past_k, past_v, allowed):
        """The decoder layer on T new head positions of one text.

        Args: ``tokens`` long (T,) (the embedded ids), ``hidden`` (T, H) (``fc`` features or earlier outputs),
        ``positions`` long (T,) rotary positions, ``past_k``/``past_v`` (H_kv, S, d) cached keys/values (rotary
        applied), ``allowed`` bool (T, S + T) which keys each query sees (None: all cached and causal among the new).
        Returns: (out (T, H), keys (H_kv, T, d), values (H_kv, T, d)) in the head's dtype.
        """
        import torch
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        c, w = self.config, self.w
        T = int(tokens.shape[0])
        emb = self.embed[tokens]
        a = torch.cat([self._norm(emb, "midlayer.input_layernorm.weight"),
                       self._norm(hidden, "midlayer.hidden_norm.weight")], dim=-1)
        q = (a @ w["midlayer.self_attn.q_proj.weight"].T).view(T, c.heads, c.head_dim).transpose(0, 1)
        k = (a @ w["midlayer.self_attn.k_proj.weight"].T).view(T, c.kv_heads, c.head_dim).transpose(0, 1)
        v = (a @ w["midlayer.self_attn.v_proj.weight"].T).view(T, c.kv_heads, c.head_dim).transpose(0, 1)
        cos, sin = self.rope(v, positions[None])
        q, k = apply_rotary_pos_emb(q[None], k[None], cos, sin)
        q, k = q[0], k[0]
        keys, values = torch.cat([past_k, k], dim=1), torch.cat([past_v, v], dim=1)
        rep = c.heads // c.kv_heads
        kk, vv = keys.repeat_interleave(rep, dim=0), values.repeat_interleave(rep, dim=0)
        scores = (q @ kk.transpose(1, 2)) / math.sqrt(c.head_dim)
        if allowed is None:
            S = int(past_k.shape[1])
            allowed = torch.arange(S + T, device=q.device)[None, :] <= S + torch.arange(T, device=q.device)[:, None]
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        attn = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype) @ vv
        h = hidden + attn.transpose(0, 1).reshape(T, c.heads * c.head_dim) @ w["midlayer.self_attn.o_proj.weight"].T
        x = self._norm(h, "midlayer.post_attention_layernorm.weight")
        mlp = (self.act(x @ w["midlayer.mlp.gate_proj.weight"].T) * (x @ w["midlayer.mlp.up_proj.weight"].T))
        return h + mlp @ w["midlayer.mlp.down_proj.weight"].T, k, v

    def draft_logits(self, out):
        """Draft-vocabulary logits (T, D) of head outputs (T, H): ``lm_head(norm(out))``."""
        return self._norm(out, "norm.weight") @ self.w["lm_head.weight"].T

    def logits(self, out):
        """Target-vocabulary logits (T, V) of head outputs (T, H): :meth:`draft_logits` placed at the ids
        ``d + d2t[d]``, -inf elsewhere."""
        import torch

        draft = self.draft_logits(out)
        full = torch.full((out.shape[0], self.vocab), float("-inf"), dtype=draft.dtype, device=draft.device)
        full[:, self.target_ids] = draft
        return full


__all__ = ["EagleConfig", "EagleHead", "HEAD_TENSORS", "OPTIONAL_TENSORS", "PARAM", "WEIGHT_FILES",
           "default_layers", "load_head_weights", "save_head"]

"""Training an EAGLE-3-style head for a local target (``python -m evolve train-drafter``), as the authors' trainer
does (SafeAILab/EAGLE ``eagle/traineagle3/cnets.py``; Li et al. 2025, arXiv 2503.01840), sized for a CPU.

1. Data (``OUT/data/texts.json``): the target's own responses to a prompt file (the chat template applied as
   ``harvest`` does), sampled at ``temperature`` (transformers' ``generate``, ``max_new_tokens`` each), in
   batches of ``response_batch`` prompts (left-padded; one seeded stream per batch; a response ends at its
   first end-of-sequence token). Batches are several times faster on a CPU; greedy responses are the same as
   one prompt at a time up to floating-point ties.
2. Draft vocabulary (``draft_vocab`` D): the D most frequent token ids of the responses (ties: lower id first),
   the end-of-sequence ids always kept; ``d2t[d] = id_d - d`` and ``t2d`` as the published heads store them.
3. Features (``OUT/data/features.pt``): one teacher-forced forward of the target over prompt + response per
   text: the outputs of the three layers the head reads (float32 (N, 3 H)) and the target's logits at the
   draft-vocabulary ids (float32 (N, D)).
4. Training (training-time test): head position t reads ``fc(g_t)`` and token x_{t+1}; unrolled step j
   (0..``ttt``-1) reads, at position t, step j-1's output and token x_{t+j+1} at rotary position t + j,
   attending to step 0's keys at positions <= t and to steps 1..j's keys at t only (what drafting j tokens
   after position t sees). Its loss is the cross-entropy of the draft distribution against the target's
   distribution of x_{t+j+2} restricted to the draft vocabulary and renormalised (soft labels), over the
   response's tokens, weighted 0.8^j (the authors' weights), averaged. AdamW (``lr``), one text per step, texts
   in a seeded order per epoch; the target's embedding is frozen (not saved: the head reads it).
5. Checkpoints every ``save_every`` steps and at the end: the head in the published layout (``OUT/config.json``,
   ``OUT/model.safetensors``) and ``OUT/train_state.pt`` (step, weights, optimiser). Running the same command
   again resumes from it (a changed setting is refused); a resumed run equals an uninterrupted one.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from evolve.engine.eagle_head import EagleConfig, EagleHead, default_layers, save_head
from evolve.errors import InputError
from evolve.train.files import data_digest, read_features, read_state, read_texts

#: Weight of unrolled step j's loss: STEP_DECAY ** j (the authors' 0.8).
STEP_DECAY = 0.8
#: The most optimiser steps a run may ask for (and a checkpoint may have done): a million steps of one text each
#: is days of a CPU.
MAX_STEPS = 1_000_000


@dataclass(frozen=True)
class TrainSettings:
    """The settings of a training run (every field a ``train-drafter`` option of the same name).

    ``target`` a local model directory or .gguf, ``prompts`` a prompt file, ``out`` the output directory;
    ``max_new_tokens`` per response, ``temperature`` of the responses (0: greedy); ``draft_vocab`` D; ``steps``
    optimiser steps (one text each); ``ttt`` unrolled steps; ``lr``; ``seed``; ``save_every`` steps between
    checkpoints; ``threads`` torch threads (None: torch's choice); ``response_batch`` prompts per ``generate`` call
    of the responses.
    """

    target: str
    prompts: str
    out: str
    max_new_tokens: int = 128
    temperature: float = 1.0
    draft_vocab: int = 4096
    steps: int = 2000
    ttt: int = 3
    lr: float = 1e-3
    seed: int = 0
    save_every: int = 100
    threads: int | None = None
    response_batch: int = 1

    def check(self) -> None:
        """Raise InputError (naming the field) for a value out of range."""
        for name in ("max_new_tokens", "draft_vocab", "steps", "ttt", "save_every", "response_batch"):
            if getattr(self, name) < 1:
                raise InputError(f"must be at least 1 (value {getattr(self, name)})", param=name)
        if self.steps > MAX_STEPS:
            raise InputError(f"must be at most {MAX_STEPS} (value {self.steps})", param="steps")
        if not (self.temperature >= 0 and np.isfinite(self.temperature)):
            raise InputError(f"must be a finite number >= 0 (value {self.temperature})", param="temperature")
        if not (self.lr > 0 and np.isfinite(self.lr)):
            raise InputError(f"must be a finite number > 0 (value {self.lr})", param="lr")

    def data_key(self) -> dict:
        """What the data files depend on (a resume with other values is refused)."""
        return {k: v for k, v in asdict(self).items() if k in ("max_new_tokens", "temperature", "draft_vocab", "seed",
                                                                    "response_batch")}


def training_layers(n: int) -> tuple[int, int, int]:
    """The target layers the head reads: :func:`evolve.engine.eagle_head.default_layers` where they are three
    distinct layers (N >= 7), else 0, (N - 1) // 2, N - 2. Raises InputError for fewer than 4 layers."""
    layers = default_layers(n)
    if len(set(layers)) == 3 and min(layers) >= 0:
        return layers
    if n < 4:
        raise InputError(f"the target has {n} decoder layers; an EAGLE-3 head reads three of them (at least 4)",
                         param="target")
    return (0, (n - 1) // 2, n - 2)


def draft_vocabulary(texts: list[list[int]], size: int, vocab: int, keep: set[int]) -> np.ndarray:
    """The draft vocabulary: int64 (D,) sorted target ids, the ``size`` most frequent ids of ``texts`` (ties:
    lower id) with the ``keep`` ids always in (D = min(size, vocab))."""
    counts = np.zeros(vocab, dtype=np.int64)
    for t in texts:
        np.add.at(counts, np.asarray(t, dtype=np.int64), 1)
    size = min(size, vocab)
    order = np.lexsort((np.arange(vocab), -counts))
    chosen = [i for i in sorted(keep) if i < vocab][:size]
    for i in order:
        if len(chosen) >= size:
            break
        if int(i) not in chosen:
            chosen.append(int(i))
    return np.sort(np.asarray(chosen, dtype=np.int64))


def _atomic_torch_save(obj, path: Path) -> None:
    import io

    import torch

    from evolve.files.atomic import atomic_write_bytes

    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write_bytes(path, buf.getvalue())


def prepare_data(settings: TrainSettings, loaded, say: Callable[[str], None]) -> dict:
    """Steps 1-3 of the module doc (reusing ``OUT/data`` when it was made with the same :meth:`data_key`).

    Returns {"texts": [{"ids", "prompt_len"}], "vocab_ids" int64 (D,), "layers", "features": [{"g" float32
    (N, 3 H), "z" float32 (N, D)}], "digest": :func:`evolve.train.files.data_digest` of the data}. Raises
    InputError for an unreadable prompt file, or a damaged, foreign or other settings' ``texts.json`` or
    ``features.pt`` (:mod:`evolve.train.files`).
    """
    import torch

    from evolve.engine.models import context_length, eos_ids
    from evolve.harvest.prompts import check_context, encode_prompt, read_prompts

    data = Path(settings.out) / "data"
    prompts, lines = read_prompts(settings.prompts)  # a missing or unreadable prompts file: its one-line error
    data.mkdir(parents=True, exist_ok=True)
    key = dict(settings.data_key(), prompts_sha256=hashlib.sha256(Path(settings.prompts).read_bytes()).hexdigest(),
               target=str(loaded.source.path))
    model, vocab = loaded.model, loaded.vocab_out
    texts_file, feats_file = data / "texts.json", data / "features.pt"
    if texts_file.exists():
        texts = read_texts(texts_file, key, vocab)
    else:
        encoded = [encode_prompt(loaded.tokenizer, prompt, f"{settings.prompts}, line {line}", vocab)
                   for prompt, line in zip(prompts, lines)]
        context = context_length(loaded)
        for ids, line in zip(encoded, lines):
            check_context(ids, f"{settings.prompts}, line {line}",
                          None if context is None else context - settings.max_new_tokens, context)
        texts, stops, B = [], eos_ids(loaded), settings.response_batch
        for first in range(0, len(encoded), B):
            batch = encoded[first:first + B]
            width = max(len(ids) for ids in batch)
            inputs = torch.tensor([[0] * (width - len(ids)) + ids for ids in batch])
            mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch])
            torch.manual_seed(settings.seed * 1_000_003 + first)
            with torch.no_grad():
                out = model.generate(inputs, attention_mask=mask, max_new_tokens=settings.max_new_tokens,
                                     do_sample=settings.temperature > 0, temperature=settings.temperature or None,
                                     top_k=0, top_p=1.0, pad_token_id=0)
            for ids, row in zip(batch, out[:, width:].tolist()):
                end = next((k + 1 for k, tok in enumerate(row) if tok in stops), len(row))
                texts.append({"ids": list(ids) + [int(t) for t in row[:end]], "prompt_len": len(ids)})
            say(f"responses {len(texts)}/{len(prompts)}")
        from evolve.files.atomic import atomic_write_text

        atomic_write_text(texts_file, json.dumps({"key": key, "texts": texts}))
    n_layers = len(model.model.layers)
    layers = training_layers(n_layers)
    vocab_ids = draft_vocabulary([t["ids"][t["prompt_len"]:] for t in texts], settings.draft_vocab, vocab,
                                 eos_ids(loaded))
    digest = data_digest(key, texts, layers, vocab_ids)
    width = 3 * int(model.get_input_embeddings().weight.shape[1])
    if feats_file.exists():
        features = read_features(feats_file, digest, texts, width, len(vocab_ids))
    else:
        features, index = [], torch.as_tensor(vocab_ids)
        with torch.no_grad():
            for i, t in enumerate(texts):
                res = model(input_ids=torch.tensor([t["ids"]]), output_hidden_states=True)
                g = torch.cat([res.hidden_states[layer + 1][0] for layer in layers], -1).float()
                features.append({"g": g.clone(), "z": res.logits[0, :, index].float().clone()})
                say(f"features {i + 1}/{len(texts)}")
        _atomic_torch_save({"digest": digest, "features": features}, feats_file)
    return {"texts": texts, "vocab_ids": vocab_ids, "layers": layers, "features": features, "digest": digest}


def head_config(model, vocab: int, draft: int, layers) -> dict:
    """The head's ``config.json`` for a Llama-like ``model`` (its sizes and rope settings), vocabulary V = ``vocab``
    and D = ``draft``, reading ``layers``."""
    c = model.config.get_text_config()
    rope = dict(getattr(c, "rope_parameters", None) or {})
    theta = rope.pop("rope_theta", getattr(c, "rope_theta", 10000.0))
    scaling = rope if rope.get("rope_type", "default") != "default" else None
    return {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": c.hidden_size,
            "num_attention_heads": c.num_attention_heads, "num_key_value_heads": c.num_key_value_heads,
            "head_dim": getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
            "intermediate_size": c.intermediate_size, "num_hidden_layers": 1, "rms_norm_eps": c.rms_norm_eps,
            "hidden_act": c.hidden_act, "vocab_size": vocab, "draft_vocab_size": draft, "rope_theta": theta,
            "rope_scaling": scaling, "max_position_embeddings": c.max_position_embeddings,
            "tie_word_embeddings": False, "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(layers)}}


def init_tensors(config: dict, model, vocab_ids: np.ndarray, seed: int) -> dict:
    """Initial head tensors (float32): normal(0, 0.02) projections from a generator seeded with ``seed``, norms at
    one, ``lm_head`` the target's output rows of the draft vocabulary; ``d2t`` and ``t2d``."""
    import torch

    cfg = EagleConfig.read_dict(config)
    gen = torch.Generator().manual_seed(seed)
    H, Hq, Hkv, I = cfg.hidden, cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim, cfg.intermediate

    def rnd(*shape):
        return torch.randn(*shape, generator=gen) * 0.02

    ids = torch.as_tensor(vocab_ids)
    t2d = torch.zeros(config["vocab_size"], dtype=torch.bool)
    t2d[ids] = True
    return {"fc.weight": rnd(H, 3 * cfg.target_hidden), "midlayer.hidden_norm.weight": torch.ones(H),
            "midlayer.input_layernorm.weight": torch.ones(H), "midlayer.self_attn.q_proj.weight": rnd(Hq, 2 * H),
            "midlayer.self_attn.k_proj.weight": rnd(Hkv, 2 * H), "midlayer.self_attn.v_proj.weight": rnd(Hkv, 2 * H),
            "midlayer.self_attn.o_proj.weight": rnd(H, Hq), "midlayer.post_attention_layernorm.weight": torch.ones(H),
            "midlayer.mlp.gate_proj.weight": rnd(I, H), "midlayer.mlp.up_proj.weight": rnd(I, H),
            "midlayer.mlp.down_proj.weight": rnd(H, I), "norm.weight": torch.ones(H),
            "lm_head.weight": model.get_output_embeddings().weight.detach()[ids].float().clone(),
            "d2t": ids - torch.arange(ids.numel()), "t2d": t2d}


def ttt_loss(head: EagleHead, g, ids: list[int], z, prompt_len: int, steps: int):
    """The training-time-test loss of one text (module doc, step 4) and step 0's top-1 agreement.

    Args: the head (trainable tensors), ``g`` float32 (N, 3 H) target features, ``ids`` the N token ids, ``z``
    float32 (N, D) the target's draft-vocabulary logits, the prompt's length, the unrolled steps.
    Returns: (loss, a scalar tensor; agreement, a float in [0, 1] or nan without a response position).
    """
    import torch

    N = len(ids)
    T = N - 1
    tok = torch.tensor(ids + [0] * steps, dtype=torch.long)
    t = torch.arange(T)
    hidden = head.project(g[:T])
    keys, values = [], []
    total, weight, agree = torch.zeros(()), 0.0, float("nan")
    for j in range(steps):
        pos = t + j
        allowed = torch.zeros((T, (j + 1) * T), dtype=torch.bool)
        allowed[:, :T] = t[None, :] <= t[:, None]
        for i in range(1, j + 1):
            allowed[:, i * T:(i + 1) * T] = torch.eye(T, dtype=torch.bool)
        past_k = torch.cat(keys, 1) if keys else hidden.new_zeros((head.config.kv_heads, 0, head.config.head_dim))
        past_v = torch.cat(values, 1) if values else past_k
        out, k, v = head.layer(tok[1 + j:1 + j + T], hidden, pos, past_k, past_v, allowed)
        keys.append(k)
        values.append(v)
        target_pos = t + j + 1  # the target's distribution of x_{t+j+2}
        mask = (target_pos <= N - 2) & (target_pos + 1 >= prompt_len)
        if bool(mask.any()):
            p = torch.softmax(z[target_pos[mask]], -1)
            logq = torch.log_softmax(head.draft_logits(out[mask]), -1)
            total = total + STEP_DECAY ** j * -(p * logq).sum(-1).mean()
            weight += STEP_DECAY ** j
            if j == 0:
                agree = float((logq.argmax(-1) == p.argmax(-1)).float().mean())
        hidden = out
    return (total / weight if weight else total), agree


def _fingerprint(settings: TrainSettings, config: dict) -> dict:
    return {"settings": {k: v for k, v in asdict(settings).items() if k not in ("steps", "save_every", "threads",
                                                                              "out")},
            "config": config}


def train(settings: TrainSettings, say: Callable[[str], None] | None = None) -> dict:
    """Train a head (module doc) and write it into ``settings.out``; resumes from ``OUT/train_state.pt``.

    ``say`` gets the progress lines (None: silent). Returns {"steps", "loss" (mean of the last ``save_every``
    steps), "agreement" (step 0's top-1 agreement, same window), "out"}.
    Raises InputError for a bad setting, an unloadable target, a target with fewer than 4 decoder layers, or a
    checkpoint of other settings.
    """
    import torch

    from evolve.engine.models import load_model, resolve_model

    say = say or (lambda msg: None)
    settings.check()
    if settings.threads is not None:
        torch.set_num_threads(settings.threads)
    out = Path(settings.out)
    loaded = load_model(resolve_model(settings.target, "target"))
    data = prepare_data(settings, loaded, say)
    vocab = loaded.vocab_out
    config = head_config(loaded.model, vocab, len(data["vocab_ids"]), data["layers"])
    state_file = out / "train_state.pt"
    fingerprint = _fingerprint(settings, config)
    tensors = init_tensors(config, loaded.model, data["vocab_ids"], settings.seed)
    trainable = [k for k in tensors if k not in ("d2t", "t2d")]
    params = {k: tensors[k].requires_grad_(True) for k in trainable}
    opt = torch.optim.AdamW([params[k] for k in trainable], lr=settings.lr)
    step, window = 0, []
    if state_file.exists():
        state = read_state(state_file, fingerprint, {k: tuple(params[k].shape) for k in trainable}, data["digest"],
                           MAX_STEPS, hyper=opt.state_dict()["param_groups"][0])
        with torch.no_grad():
            for k in trainable:
                params[k].copy_(state["params"][k])
        try:
            opt.load_state_dict(state["optimizer"])
        except (ValueError, KeyError, TypeError, RuntimeError) as exc:
            raise InputError(f"{state_file}: key 'optimizer' is not AdamW's state of this head ({exc})",
                             param="out") from None
        step, window = state["step"], state["window"]
        say(f"resumed at step {step}")
    embed = loaded.model.get_input_embeddings().weight.detach().float()
    head = EagleHead(EagleConfig.read_dict(config), tensors, embed, vocab, torch.float32, "cpu")
    n = len(data["texts"])

    def save() -> None:
        save_head(out, config, {k: v.detach() for k, v in tensors.items()})
        _atomic_torch_save({"step": step, "params": {k: params[k].detach().clone() for k in trainable},
                            "optimizer": opt.state_dict(), "window": window, "fingerprint": fingerprint,
                            "digest": data["digest"]}, state_file)

    while step < settings.steps:
        order = np.random.default_rng([settings.seed, step // n]).permutation(n)
        i = int(order[step % n])
        text, feats = data["texts"][i], data["features"][i]
        loss, agree = ttt_loss(head, feats["g"], text["ids"], feats["z"], text["prompt_len"], settings.ttt)
        opt.zero_grad()
        if loss.requires_grad:
            loss.backward()
            opt.step()
        step += 1
        window = (window + [[float(loss.detach()), agree]])[-settings.save_every:]
        if step % settings.save_every == 0 or step == settings.steps:
            losses = [w[0] for w in window]
            agrees = [w[1] for w in window if w[1] == w[1]]
            say(f"step {step}/{settings.steps}: loss {np.mean(losses):.4f}, top-1 agreement "
                f"{np.mean(agrees) if agrees else float('nan'):.3f} (last {len(window)} steps)")
            save()
    losses = [w[0] for w in window]
    agrees = [w[1] for w in window if w[1] == w[1]]
    return {"steps": step, "loss": float(np.mean(losses)) if losses else float("nan"),
            "agreement": float(np.mean(agrees)) if agrees else float("nan"), "out": str(out)}


__all__ = ["STEP_DECAY", "TrainSettings", "draft_vocabulary", "head_config", "init_tensors", "prepare_data",
           "train", "training_layers", "ttt_loss"]

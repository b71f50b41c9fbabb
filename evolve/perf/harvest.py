"""``python benchmark.py perf --harvest MODEL``: the harvester's speed against plain ``generate()`` sampling.

The harvester (:mod:`evolve.harvest.loop`) runs the target once per emitted block plus the
drafter's passes, so plain autoregressive sampling of the same target with transformers'
``generate()`` (temperature 1, no top-k/top-p, the same prompts and token budget, stopping at
the end-of-sequence token) is the upper bound it is compared with. Both are measured in the
same process on the same loaded model, at batch sizes 1 and 8 by default:

* ``harvest_tokens_per_s[b]``: tokens the harvester emits per wall second at ``--batch-size b``
  with the layer-skipping drafter (records are built but not written);
* ``harvest_forward_share[b]``: the share of that wall time spent inside the models' forward
  passes (:attr:`evolve.engine.runner.Runner.seconds`); the rest is the float64 distributions,
  sampling, records and cache bookkeeping;
* ``generate_tokens_per_s[b]``: ``generate()`` with ``do_sample=True``, b prompts at a time,
  left-padded; a row's tokens are counted up to and including its end-of-sequence token.

The targets: batch-8 harvest >= 3x batch 1, and >= 50% of the batch-8 time in forward passes.
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

TARGET_BATCH_SPEEDUP = 3.0
TARGET_FORWARD_SHARE = 0.5


def run_harvest_perf(model: str, prompts: str, texts: int = 16, max_new_tokens: int = 64, gamma: int = 5,
                     skip_layers: Sequence[int] | None = None, batches: Sequence[int] = (1, 8),
                     threads: int | None = None, seed: int = 0,
                     progress: Callable[[str], None] | None = None) -> dict:
    """Measure harvest and ``generate()`` tokens per second on the first ``texts`` prompts of ``prompts``.

    Args: ``model`` a local model directory or .gguf file; ``prompts`` a prompts file (one per
    line); ``skip_layers`` the drafter's skipped layers (None: layers n//3, n//2 and 2n//3 of the
    target's n, i.e. 10, 15, 20 of SmolLM2-135M's 30); ``batches`` the batch sizes (the first
    is the reference of ``harvest_batch_speedup``); ``threads`` torch CPU threads (None: torch's).
    Returns: {"harvest": figures} (see the module docstring; tokens per second are floats, keyed
    by the batch size as a string). Raises: InputError for a bad model or prompts file.
    """
    import torch

    from evolve.harvest.config import HarvestConfig
    from evolve.harvest.loop import build, text_rng
    from evolve.harvest.prompts import encode_prompt, read_prompts

    say = progress or (lambda msg: None)
    load_start = _load()
    if skip_layers is None:
        skip_layers = _default_skip(model)
    config = HarvestConfig(target=model, prompts=prompts, skip_layers=tuple(skip_layers), gamma=gamma,
                           max_new_tokens=max_new_tokens, seed=seed, threads=threads)
    say(f"loading {model}")
    setup = build(config)
    lines, _ = read_prompts(prompts)
    tok = setup.target.tokenizer
    enc = [encode_prompt(tok, p, f"{prompts}", setup.engine.vocab)
           for p in lines[:texts]]
    figures: dict = {"model": str(model), "drafter": setup.engine.drafter.settings(), "texts": len(enc),
                     "max_new_tokens": max_new_tokens, "gamma": gamma, "threads": torch.get_num_threads(),
                     "harvest_tokens_per_s": {}, "harvest_forward_share": {}, "harvest_seconds": {},
                     "harvest_tokens": {}, "harvest_records": {}, "generate_tokens_per_s": {},
                     "generate_seconds": {}, "generate_tokens": {}}
    engine = setup.engine
    for b in batches:
        say(f"harvest at batch {b}")
        f0, t0 = engine.forward_seconds(), time.perf_counter()
        tokens = records = 0
        for _, result in engine.run_texts([(i, ids, text_rng(seed, i)) for i, ids in enumerate(enc)], gamma,
                                          max_new_tokens, b):
            tokens += len(result.tokens)
            records += sum(len(blk.drafts) for blk in result.blocks)
        seconds = time.perf_counter() - t0
        key = str(b)
        figures["harvest_tokens_per_s"][key] = tokens / seconds
        figures["harvest_forward_share"][key] = (engine.forward_seconds() - f0) / seconds
        figures["harvest_seconds"][key], figures["harvest_tokens"][key] = seconds, tokens
        figures["harvest_records"][key] = records
    for b in batches:
        say(f"generate() at batch {b}")
        tokens, seconds = _generate(setup.target.model, tok, enc, b, max_new_tokens, engine.eos, seed)
        key = str(b)
        figures["generate_tokens_per_s"][key] = tokens / seconds
        figures["generate_seconds"][key], figures["generate_tokens"][key] = seconds, tokens
    first, last = str(batches[0]), str(batches[-1])
    figures["harvest_batch_speedup"] = figures["harvest_tokens_per_s"][last] / figures["harvest_tokens_per_s"][first]
    figures["harvest_vs_generate"] = {k: figures["harvest_tokens_per_s"][k] / figures["generate_tokens_per_s"][k]
                                      for k in figures["harvest_tokens_per_s"]}
    figures["load_average"] = {"start": load_start, "end": _load()}
    figures["targets_met"] = {
        "batch_speedup_3x": figures["harvest_batch_speedup"] >= TARGET_BATCH_SPEEDUP,
        "forward_share_50pct": figures["harvest_forward_share"][last] >= TARGET_FORWARD_SHARE}
    return {"harvest": figures}


def _load() -> float | None:
    """The 1-minute load average (None where the system has none)."""
    import os

    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _default_skip(model: str) -> tuple[int, ...]:
    """Layers n//3, n//2, 2n//3 of the model's n decoder layers (read from its config, no weights loaded)."""
    from pathlib import Path

    from evolve.engine.models import _torch, resolve_model

    src = resolve_model(model, "target")
    _, transformers = _torch()
    kwargs = {"gguf_file": src.path.name} if src.file_format == "gguf" else {}
    n = int(transformers.AutoConfig.from_pretrained(str(Path(src.load_dir)), local_files_only=True,
                                                    **kwargs).get_text_config().num_hidden_layers)
    return tuple(sorted({n // 3, n // 2, 2 * n // 3}))


def _generate(model, tokenizer, enc: list[list[int]], batch: int, max_new_tokens: int, eos: set[int],
              seed: int) -> tuple[int, float]:
    """Plain ``generate()`` sampling of ``enc`` in left-padded batches: (tokens counted, wall seconds)."""
    import torch

    torch.manual_seed(seed)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos)
    tokens, t0 = 0, time.perf_counter()
    with torch.inference_mode():
        for s in range(0, len(enc), batch):
            chunk = enc[s:s + batch]
            width = max(len(ids) for ids in chunk)
            ids = torch.tensor([[pad] * (width - len(x)) + x for x in chunk], dtype=torch.long, device=model.device)
            mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in chunk], dtype=torch.long,
                                device=model.device)
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0,
                                 top_p=1.0, max_new_tokens=max_new_tokens, pad_token_id=pad,
                                 eos_token_id=sorted(eos))
            for row in out[:, width:].tolist():
                ends = [i for i, t in enumerate(row) if t in eos]
                tokens += ends[0] + 1 if ends else len(row)
    return tokens, time.perf_counter() - t0


def render_harvest(report: dict) -> str:
    """The harvest figures as a short text table."""
    h = report["harvest"]
    rows = [f"{'batch':>6} {'harvest tok/s':>14} {'forward share':>14} {'generate() tok/s':>17} "
            f"{'harvest/generate':>17}"]
    for k in h["harvest_tokens_per_s"]:
        rows.append(f"{k:>6} {h['harvest_tokens_per_s'][k]:>14.2f} {h['harvest_forward_share'][k]:>14.2f} "
                    f"{h['generate_tokens_per_s'][k]:>17.2f} {h['harvest_vs_generate'][k]:>17.2f}")
    met = h["targets_met"]
    rows.append(f"harvest batch speedup {h['harvest_batch_speedup']:.2f}x "
                f"({'target met' if met['batch_speedup_3x'] else 'target missed'}: >= {TARGET_BATCH_SPEEDUP:g}x); "
                f"forward share {'target met' if met['forward_share_50pct'] else 'target missed'} "
                f"(>= {TARGET_FORWARD_SHARE:.0%}); {h['texts']} texts x {h['max_new_tokens']} tokens, "
                f"{h['threads']} thread(s)")
    load = h.get("load_average", {})
    if load.get("start") is not None:
        rows.append(f"load average at start {load['start']:.2f}, at end {load['end']:.2f} "
                    f"(other processes share the cores when it exceeds the core count)")
    return "\n".join(rows) + "\n"

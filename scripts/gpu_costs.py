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

Standalone: imports torch, transformers (optional) and the standard library only (its parts are the package
``scripts/gpu_timing``). Each cost file is written as soon as it is measured (atomically), the small model first, so
a run cut short keeps what it finished.

    python3 scripts/gpu_costs.py --out docs/costs --device cuda          # on a CUDA machine (a few minutes)
    python3 scripts/gpu_costs.py --smoke --device cpu --out /tmp/smoke   # tiny configs, under a minute
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import traceback

import torch

from gpu_timing.cost_file import gpu_name, gpu_slug
from gpu_timing.engines import transformers
from gpu_timing.measure import log, run_group
from gpu_timing.shapes import GROUPS, SMOKE_GROUPS


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

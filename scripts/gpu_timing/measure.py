"""One group (a target and its drafters) measured in one variant (eager, CUDA graphs, or the pure-torch Llama
eagerly): the models built, every method timed interleaved after warm-ups, medians kept, one cost file written
per drafter."""
from __future__ import annotations

import gc
import os
import platform
import statistics
import time
from datetime import datetime, timezone

import torch

from gpu_timing.cost_file import check_doc, config_summary, cost_doc, gpu_name, versions, write_json
from gpu_timing.engines import HeadDrafter, HFModel, PureModel, Timing, transformers

#: Consecutive plain decoding steps timed per repeat (as the CPU harness).
PLAIN_RUN = 4


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


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


def run_group(group, variant: str, args, device, sync, slug: str, written: list) -> None:
    stem, tname, tcfg, drafter_specs = group
    tmax, gamma = args.tmax, args.tmax - 1
    grid, curve_points = batch_plan(args.smoke)
    max_batch = max(r for r, _ in grid)
    max_new = max(max(t for _, t in grid), tmax, gamma + 1, PLAIN_RUN)
    graph = variant == "cudagraph"
    pool = torch.cuda.graph_pool_handle() if graph else None
    timing = Timing(device, args.context, sync, graph, pool)
    use_hf = variant == "eager" and transformers is not None and args.impl != "pure"
    t_start = time.perf_counter()
    log(f"{stem} [{variant}]: building {tname} ({'transformers' if use_hf else 'pure torch'}), context {args.context}")
    if use_hf:
        target = HFModel(tcfg, timing)
    else:
        target = PureModel(tcfg, timing, max_batch, max_new)
    drafters, dmeta = {}, {}
    for suffix, dname, drafter_type, dcfg in drafter_specs:
        if drafter_type == "draft-model":
            d = HFModel(dcfg, timing) if use_hf else PureModel(dcfg, timing, 1, max_new)
            params = n_params(d.model)
        else:
            d = HeadDrafter(dcfg, timing, max_new)
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

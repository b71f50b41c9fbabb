"""``python benchmark.py perf --backend-curves MODEL.gguf``: the cost of a target forward over T new tokens on
each backend (:mod:`evolve.engine.backends`), and plain decoding's tokens/s.

Both backends load the same GGUF file in one process: torch dequantises it to float32 (the
project's :class:`evolve.engine.runner.Runner` on a :class:`evolve.engine.runner.BatchKV`), llama.cpp
runs it on its quantised kernels (:class:`evolve.engine.llama_cpp.LlamaRunner`, ``Llama.eval`` with
``logits_all=True``). A fixed prompt of ``prompt_tokens`` tokens is prefilled once; every trial
rolls the cache back to it (torch: ``BatchKV.truncate``; llama.cpp: ``n_tokens`` and
``llama_memory_seq_rm``) and times one forward over T = 1..``max_t`` new tokens, returning the
logits of every new position (what a verification needs). The trials are interleaved: every
repeat runs, for each thread count, every T on both backends (the order of T and of the
backends alternates between repeats), so a change in the machine's speed during the run hits
all figures alike; the median of ``repeats`` (after one warm-up round) is reported.

Plain decoding: ``plain_tokens`` greedy tokens after the prompt, one T = 1 forward and an arg
max each, ``plain_repeats`` times interleaved; the median tokens/s is reported.

Figures (key ``backend_curves`` of the report): per backend and thread count, ``forward_s``
(seconds for T = 1..max_t, a cost file's ``target_forward_s``), ``relative`` (forward_s / forward_s[T=1]),
``plain_tokens_per_s`` and ``plain_token_s``; ``logits_max_abs_diff`` (llama.cpp's logits against
torch's at the T = max_t trial: quantised kernels round differently) and ``argmax_agree``.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable, Sequence

#: The fixed text the prompt and the fed tokens are cut from.
TEXT = ("The history of the bicycle begins in the early nineteenth century, when inventors in Europe "
        "experimented with two-wheeled machines pushed along by the rider's feet. Pedals attached to the "
        "front wheel came later, and the chain drive that moves the rear wheel made the modern safety "
        "bicycle possible. Today bicycles are used for transport, sport and leisure in almost every country, "
        "and cities build lanes to keep riders safe from cars and trucks on busy roads.")


def _median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def run_backend_curves(model: str, threads: Sequence[int] = (1, 2), max_t: int = 8, repeats: int = 15,
                       prompt_tokens: int = 64, plain_tokens: int = 32, plain_repeats: int = 5,
                       progress: Callable[[str], None] | None = None) -> dict:
    """Measure both backends on ``model`` (a local .gguf file); see the module doc.

    Returns {"backend_curves": figures}. Raises: InputError for a bad model, a missing llama-cpp-python
    (naming the install command), or counts below 1.
    """
    import numpy as np

    from evolve.errors import InputError
    from evolve.engine.llama_cpp import load_llama, set_threads
    from evolve.engine.models import load_model, resolve_model
    from evolve.engine.runner import BatchKV, Runner

    for name, value in (("max_t", max_t), ("repeats", repeats), ("plain_tokens", plain_tokens),
                        ("plain_repeats", plain_repeats), ("prompt_tokens", prompt_tokens)):
        if value < 1:
            raise InputError(f"must be at least 1 (value {value})", param=name)
    say = progress or (lambda _msg: None)
    src = resolve_model(model, "backend_curves")
    if src.file_format != "gguf":
        raise InputError(f"{model}: give a .gguf file (both backends load it)", param="backend_curves")
    say(f"loading {src.path} on llama.cpp")
    lmodel = load_llama(src, threads=threads[0], n_ctx=max(512, prompt_tokens + max_t + plain_tokens + 8))
    say(f"loading {src.path} on torch (dequantised to float32)")
    tmodel = load_model(src, "float32", "cpu")
    import torch

    ids = [int(t) for t in tmodel.tokenizer(TEXT, add_special_tokens=False)["input_ids"]]
    while len(ids) < prompt_tokens + max(max_t, 1) + 1:
        ids = ids + ids
    prompt, new = ids[:prompt_tokens], ids[prompt_tokens:prompt_tokens + max_t]
    vocab = min(tmodel.vocab_out, lmodel.vocab_out)
    trun = Runner(tmodel.model, vocab, "cpu")
    tkv = BatchKV(1, "cpu")
    from evolve.engine.llama_cpp import LlamaRunner

    lrun = LlamaRunner(lmodel.model, vocab)
    lkv = lrun.new_kv(1)
    engines = {"torch": (trun, tkv), "llama_cpp": (lrun, lkv)}
    P = len(prompt)

    def set_n(n: int) -> None:
        torch.set_num_threads(n)
        set_threads(lmodel.model, n)

    def forward(name: str, T: int):
        run, kv = engines[name]
        kv.truncate(0, P)
        kv.compact()
        t0 = time.perf_counter()
        logits = run(kv, [new[:T]], T)
        return time.perf_counter() - t0, logits

    def plain(name: str) -> float:
        run, kv = engines[name]
        kv.truncate(0, P - 1)
        kv.compact()
        tok = prompt[-1]
        t0 = time.perf_counter()
        for _ in range(plain_tokens):
            tok = int(run(kv, [[tok]], 1)[0, -1].argmax())
        return plain_tokens / (time.perf_counter() - t0)

    backends = ("torch", "llama_cpp")
    times = {b: {n: {T: [] for T in range(1, max_t + 1)} for n in threads} for b in backends}
    rates = {b: {n: [] for n in threads} for b in backends}
    load_start = os.getloadavg()[0]
    with torch.inference_mode():
        tkv.place(0, trun.prefill(prompt), P)
        lkv.place(0, lrun.prefill(prompt), P)
        say(f"forwards: T = 1..{max_t}, {len(threads)} thread counts, 1 warm-up + {repeats} repeats, interleaved")
        for rep in range(repeats + 1):
            for n in threads:
                set_n(n)
                order = range(1, max_t + 1) if rep % 2 == 0 else range(max_t, 0, -1)
                for T in order:
                    for b in (backends if (rep + T) % 2 == 0 else backends[::-1]):
                        dt, _ = forward(b, T)
                        if rep:
                            times[b][n][T].append(dt)
        say(f"plain decoding: {plain_tokens} tokens, {plain_repeats} repeats, interleaved")
        for rep in range(plain_repeats):
            for n in threads:
                set_n(n)
                for b in (backends if rep % 2 == 0 else backends[::-1]):
                    rates[b][n].append(plain(b))
        set_n(threads[-1])
        _, tl = forward("torch", max_t)
        _, ll = forward("llama_cpp", max_t)
    diff = (tl.float() - ll.float()).abs()
    figures: dict = {
        "model": str(src.path), "prompt_tokens": P, "max_t": max_t, "repeats": repeats, "plain_tokens": plain_tokens,
        "plain_repeats": plain_repeats, "threads": list(threads), "cores": os.cpu_count(),
        "load_average": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
        "versions": _versions(),
        "logits_max_abs_diff": float(diff.max()),
        "logits_mean_abs_diff": float(diff.mean()),
        "argmax_agree": float(np.mean((tl[0].argmax(-1) == ll[0].argmax(-1)).numpy())),
        "backends": {},
    }
    for b in backends:
        figures["backends"][b] = {}
        for n in threads:
            fwd = [_median(times[b][n][T]) for T in range(1, max_t + 1)]
            rate = _median(rates[b][n])
            figures["backends"][b][str(n)] = {
                "forward_s": fwd, "target_forward_s": fwd, "relative": [f / fwd[0] for f in fwd],
                "forward_s_min": [min(times[b][n][T]) for T in range(1, max_t + 1)],
                "plain_tokens_per_s": rate, "plain_token_s": 1.0 / rate}
    t1 = figures["backends"]["torch"]
    figures["llama_cpp_vs_torch_forward"] = {
        str(n): [t / ll_ for t, ll_ in zip(t1[str(n)]["forward_s"], figures["backends"]["llama_cpp"][str(n)]["forward_s"])]
        for n in threads}
    return {"backend_curves": figures}


def _versions() -> dict:
    from importlib import metadata

    out = {}
    for pkg in ("torch", "transformers", "gguf", "llama-cpp-python"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def render_backend_curves(report: dict) -> str:
    """The curves as a text table: per backend and thread count, forward ms and cost relative to T = 1."""
    f = report["backend_curves"]
    ts = range(1, f["max_t"] + 1)
    head = f"{'backend':<10} {'thr':>3} {'':<9}" + "".join(f"{'T=' + str(t):>8}" for t in ts) + f"{'plain tok/s':>13}"
    rows = [head]
    for b, per in f["backends"].items():
        for n, c in per.items():
            rows.append(f"{b:<10} {n:>3} {'ms':<9}" + "".join(f"{x * 1e3:>8.1f}" for x in c["forward_s"])
                        + f"{c['plain_tokens_per_s']:>13.1f}")
            rows.append(f"{'':<10} {'':>3} {'vs T=1':<9}" + "".join(f"{x:>8.2f}" for x in c["relative"]))
    rows.append(f"median of {f['repeats']} interleaved repeats after a {f['prompt_tokens']}-token prompt; plain: "
                f"{f['plain_tokens']} greedy tokens, median of {f['plain_repeats']}; llama.cpp vs torch logits: max "
                f"|diff| {f['logits_max_abs_diff']:.3f}, mean {f['logits_mean_abs_diff']:.3f}, arg max agrees on "
                f"{f['argmax_agree']:.0%} of {f['max_t']} positions")
    load = f["load_average"]
    rows.append(f"load average at start {load['start']:.2f}, at end {load['end']:.2f} on {f['cores']} cores")
    return "\n".join(rows) + "\n"

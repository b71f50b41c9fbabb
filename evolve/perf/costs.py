"""``python benchmark.py perf --write-costs FILE``: a cost file (:mod:`evolve.eval.costs`) measured on this machine.

For a target model and a drafter (selected as in ``harvest`` and ``live``), on the backend the
config names (torch, or llama.cpp: :mod:`evolve.engine.backends`), with the harvest's KV cache, three methods are timed in turn, one
repeat of each at a time (interleaved, so a change in the machine's speed hits all alike), and the
median of ``repeats`` is kept:

* ``target_forward_s[T - 1]``: one target call over T = 1..gamma_max + 1 new tokens after a
  cached context: the model's forward and the T next-token distributions the engine computes from
  its logits (the cache is cropped back after each);
* ``draft_token_s``: one ``propose`` call of the drafter for gamma_max tokens (its forward passes,
  its distributions and sampling, as in a block), divided by the tokens it drafted; the context is
  the prompt written twice, so that prompt lookup finds a match;
* ``plain_token_s``: one step of plain decoding: a T = 1 forward, the distribution, one sample; the
  median of :data:`PLAIN_RUN` consecutive steps per repeat, each feeding the token the previous one
  drew, with no cache rollback between them (as plain decoding runs: on llama.cpp a step right after
  a rollback costs about 2 ms more).

The context is the first prompt of the prompts file (chat template applied) written twice
(``context_tokens``). The T-curve and the plain step are timed again after a long context
(:func:`long_context`: the prompt written as often as adds :data:`LONG_CONTEXT_SPAN` tokens), as the
file's ``long_context``, so that the cost model prices calls at the context of the texts it predicts
(:meth:`evolve.eval.costs.Costs.at_context`). The file also holds the machine, the thread count, the
engine, the models' file names and SHA-256, the drafter's settings, dtype, gamma_max, repeats, the
date, and the relative figures
(``target_forward_relative``: the T-curve over T = 1; ``draft_token_relative``: draft_token_s over
the T = 1 forward; ``plain_tokens_per_s``). Written atomically.

A T-curve whose medians fall with T by more than the cost files' tolerance (timing noise: a cost file
that does so is refused when read, :mod:`evolve.eval.costs`) is written as its running maximum, with a
warning, and the medians as ``target_forward_measured_s``.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import time
from datetime import datetime, timezone
from typing import Callable

from evolve.engine.clock import synchronize

#: Default largest draft length measured (forwards over 1..DEFAULT_GAMMA_MAX + 1 tokens).
DEFAULT_GAMMA_MAX = 6
#: Default repeats of every method.
DEFAULT_REPEATS = 7
#: Consecutive plain decoding steps timed per repeat (``plain_token_s`` is their median).
PLAIN_RUN = 4
#: Tokens the long context of the second timing adds to the first (``long_context``: a forward's time grows with the
#: context it attends to, :mod:`evolve.eval.costs`).
LONG_CONTEXT_SPAN = 768
#: Longest long context (tokens); the model's own context, less one call, bounds it too (:func:`long_context`).
LONG_CONTEXT_LIMIT = 2048
#: Fewest tokens the long context must add for a second timing (a shorter span measures noise, not a slope).
MIN_CONTEXT_SPAN = 128


def measure_costs(config, gamma_max: int = DEFAULT_GAMMA_MAX, repeats: int = DEFAULT_REPEATS,
                  progress: Callable[[str], None] | None = None) -> dict:
    """Measure the cost file's figures (module doc) for ``config`` (a HarvestConfig selecting the target,
    the drafter, dtype, device and threads; its first prompt is the context). Returns the JSON object."""
    import numpy as np
    import torch

    from evolve.engine.backends import get_backend
    from evolve.engine.distributions import sample_index
    from evolve.engine.models import context_length
    from evolve.harvest.loop import build
    from evolve.harvest.prompts import encode_prompt, read_prompts

    say = progress or (lambda msg: None)
    say(f"loading {config.target}")
    setup = build(config)
    engine = setup.engine
    prompts, lines = read_prompts(config.prompts)
    prompt = encode_prompt(setup.target.tokenizer, prompts[0], f"{config.prompts}, line {lines[0]}", engine.vocab)
    ctx = list(prompt) + list(prompt)
    rng = np.random.default_rng(0)

    def timed_at(context: list[int], drafts: bool) -> tuple[list[list[float]], list[float], list[float], int]:
        """(seconds per T, plain steps, seconds per drafted token, tokens drafted) of ``repeats`` interleaved
        repeats after ``context`` (the drafter timed only where ``drafts``)."""
        filler = (context * (gamma_max + 2))[:gamma_max + 1]  # the new tokens of a T-token forward (ids of the text)
        curve: list[list[float]] = [[] for _ in range(gamma_max + 1)]
        draft_s: list[float] = []
        plain: list[float] = []
        drafted_total = 0
        batch = engine.new_batch(1)
        engine.start(batch, 0, 0, context, rng)  # the target's cache holds context[:-1] (one cache: llama.cpp has one)
        kv, base = batch.kv, batch.kv.lengths[0]

        def forward(T: int) -> float:
            synchronize(engine.device)
            t0 = time.perf_counter()
            engine.distributions(engine.run(kv, [filler[:T]], T)[0])
            synchronize(engine.device)  # a CUDA forward returns before it has run
            seconds = time.perf_counter() - t0
            kv.truncate(0, base)
            kv.compact()
            return seconds

        def plain_steps() -> list[float]:
            """PLAIN_RUN steps of uninterrupted plain decoding (each feeds the token the previous one drew), timed
            one by one; the cache is rolled back once afterwards, outside the timing."""
            times, token = [], filler[0]
            for _ in range(PLAIN_RUN):
                synchronize(engine.device)
                t0 = time.perf_counter()
                logits = engine.run(kv, [[token]], 1)
                p, _ = engine.distributions(logits[0, -1:])
                token = sample_index(p[0], rng.random())
                synchronize(engine.device)
                times.append(time.perf_counter() - t0)
            kv.truncate(0, base)
            kv.compact()
            return times

        def draft() -> tuple[float, int]:
            synchronize(engine.device)
            t0 = time.perf_counter()
            drafts = engine.drafter.propose(engine, batch, [gamma_max])[0][0]
            synchronize(engine.device)
            seconds = time.perf_counter() - t0
            engine.drafter.commit(engine, batch, [base])
            return seconds, len(drafts)

        forward(1), plain_steps(), drafts and draft()  # warm-up
        for r in range(repeats):
            say(f"repeat {r + 1}/{repeats} after {len(context)} tokens of context")
            for T in range(1, gamma_max + 2):
                curve[T - 1].append(forward(T))
            plain.extend(plain_steps())
            if drafts:
                seconds, n = draft()
                drafted_total += n
                draft_s.append(seconds / max(n, 1))
        return curve, plain, draft_s, drafted_total

    room = context_length(setup.target)
    long = long_context(prompt, len(ctx), None if room is None else room - (gamma_max + 1 + PLAIN_RUN))
    with torch.inference_mode():
        curve, plain, draft_s, drafted_total = timed_at(ctx, True)
        far = None if long is None else timed_at(long, False)
    return cost_document(curve, draft_s, plain, drafted_total / repeats, gamma_max, repeats, len(ctx), {
        **long_context_record(far, None if long is None else len(long), repeats),
        "threads": get_backend(config.backend).threads(config),
        "engine": config.backend,
        "target": {"path": setup.description["target"]["path"], "sha256": setup.description["target"]["sha256"]},
        "drafter": setup.description["drafter"],
        "dtype": config.dtype,
        "device": config.device,
    })


def long_context(prompt: list[int], short: int, limit: int | None = None) -> list[int] | None:
    """The long context of the cost file's second timing (``long_context``, :mod:`evolve.eval.costs`): the prompt
    written as many times as reach ``short`` + :data:`LONG_CONTEXT_SPAN` tokens, at most :data:`LONG_CONTEXT_LIMIT`
    and ``limit`` (the room the model or engine leaves), its first tokens cut so that it ends as the prompt does
    (a chat template's assistant header: the model answers it as it answers the prompt). None, with an InputWarning,
    when that leaves less than :data:`MIN_CONTEXT_SPAN` tokens more than ``short`` (the file then has one timing)."""
    import warnings

    from evolve.errors import InputWarning

    if not prompt:
        return None
    want = min(short + LONG_CONTEXT_SPAN, LONG_CONTEXT_LIMIT, LONG_CONTEXT_LIMIT if limit is None else limit)
    if want < short + MIN_CONTEXT_SPAN:
        warnings.warn(InputWarning(f"measured costs: after the first prompt written twice ({short} tokens) the "
                                   f"context has room for {max(want - short, 0)} more tokens, fewer than "
                                   f"{MIN_CONTEXT_SPAN}: the file is timed at one context (no long_context), so its "
                                   f"predictions are for texts of about {short} tokens of context"), stacklevel=2)
        return None
    return (list(prompt) * (want // len(prompt) + 1))[-want:]


def long_context_record(far: tuple | None, tokens: int | None, repeats: int) -> dict:
    """The file's ``long_context`` object from the timings at the long context (``far``: seconds per T, plain steps,
    as :func:`measure_costs`'s inner timing returns first; ``tokens`` its length; the T-curve enveloped as the
    file's, its medians kept as ``target_forward_measured_s`` inside it when they differ); {} when there were none."""
    if far is None:
        return {}
    forward_s, measured = _envelope([statistics.median(c) for c in far[0]], repeats,
                                    f"after {tokens} tokens of context (long_context)")
    return {"long_context": {"context_tokens": tokens, "target_forward_s": forward_s,
                             **({"target_forward_measured_s": measured} if measured != forward_s else {}),
                             "plain_token_s": statistics.median(far[1])}}


def cost_document(curve: list[list[float]], draft_s: list[float], plain: list[float], drafted_per_call: float,
                  gamma_max: int, repeats: int, context_tokens: int, record: dict) -> dict:
    """The cost file's JSON object from the timings: ``curve[T - 1]`` the seconds of the calls over T tokens,
    ``draft_s`` seconds per drafted token and ``plain`` seconds per plain token (one per timing; each figure is
    their median, the T-curve enveloped by :func:`_envelope`), the relative figures, the machine and the date, and
    ``record`` (how and where it was timed: threads, engine, target, drafter, ...). Checked to load as a cost file
    (:func:`evolve.eval.costs.costs_from_dict`)."""
    from evolve.eval.costs import costs_from_dict

    forward_s, measured = _envelope([statistics.median(c) for c in curve], repeats)
    draft = statistics.median(draft_s) if draft_s else 0.0
    plain_s = statistics.median(plain)
    doc = {
        "target_forward_s": forward_s,
        **({"target_forward_measured_s": measured} if measured != forward_s else {}),
        "draft_token_s": draft,
        "plain_token_s": plain_s,
        "target_forward_relative": [t / forward_s[0] for t in forward_s],
        "draft_token_relative": draft / forward_s[0],
        "plain_tokens_per_s": 1.0 / plain_s,
        "drafted_tokens_per_call": drafted_per_call,
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpu_count": os.cpu_count()},
        **record,
        "gamma_max": gamma_max,
        "repeats": repeats,
        "context_tokens": context_tokens,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    costs_from_dict(doc, "measured costs")  # the file must load
    return doc


def _envelope(measured: list[float], repeats: int, where: str = "") -> tuple[list[float], list[float]]:
    """(curve to write, ``measured``): the measured medians, or, when they fall with T by more than the cost
    files' tolerance (:data:`evolve.eval.costs.FORWARD_DIP_TOLERANCE`: timing noise, a forward over more tokens
    is not cheaper), their running maximum, with an :class:`evolve.errors.InputWarning` (the medians are kept
    in the file as ``target_forward_measured_s``)."""
    import warnings

    from evolve.errors import InputWarning
    from evolve.eval.costs import FORWARD_DIP_TOLERANCE

    top, worst = measured[0], 0.0
    for t in measured:
        top = max(top, t)
        worst = max(worst, 1.0 - t / top)
    if worst <= FORWARD_DIP_TOLERANCE:
        return measured, measured
    warnings.warn(f"measured costs{f' {where}' if where else ''}: the target forward times fall with T by up to "
                  f"{worst:.0%} (timing noise of "
                  f"{repeats} repeats; more cost repeats on a quieter machine measure better); written as their "
                  f"running maximum, the medians kept as target_forward_measured_s", InputWarning, stacklevel=2)
    envelope, top = [], measured[0]
    for t in measured:
        top = max(top, t)
        envelope.append(top)
    return envelope, measured


def write_costs(path, doc: dict) -> None:
    """Write the cost file atomically."""
    from evolve.files.atomic import atomic_write_text

    atomic_write_text(os.fspath(path), json.dumps(doc, indent=2) + "\n")


def render_costs(doc: dict) -> str:
    """A short table of the figures."""
    rel = doc["target_forward_relative"]
    where = (f"timed inside {doc['engine']} {doc['engine_version']}'s own loop" if "engine_version" in doc else
             f"timed on this project's {doc.get('engine')} backend")
    lines = [where,
             f"target forward, T = 1: {doc['target_forward_s'][0] * 1e3:.2f} ms ({doc['threads']} threads)",
             "T-curve / T=1: " + ", ".join(f"T={i + 1} {r:.2f}" for i, r in enumerate(rel)),
             f"drafter ({doc['drafter'].get('kind')}): {doc['draft_token_s'] * 1e3:.3f} ms per drafted token "
             f"= {doc['draft_token_relative']:.3f} of a T=1 forward ({doc['drafted_tokens_per_call']:.1f} drafted "
             f"per call)",
             f"plain decoding: {doc['plain_tokens_per_s']:.1f} tokens/s (after {doc['context_tokens']} tokens of "
             f"context)"]
    long = doc.get("long_context")
    if long:
        lines.append(f"after {long['context_tokens']} tokens of context: target forward, T = 1: "
                     f"{long['target_forward_s'][0] * 1e3:.2f} ms, T = {len(long['target_forward_s'])}: "
                     f"{long['target_forward_s'][-1] * 1e3:.2f} ms; plain decoding: {1 / long['plain_token_s']:.1f} "
                     f"tokens/s")
    return "\n".join(lines) + "\n"

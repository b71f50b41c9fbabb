"""``python benchmark.py perf --write-costs FILE --engine NAME``: a cost file timed inside an engine's own decoding loop.

The cost file of :mod:`evolve.perf.costs` times the project's backends. A user deploys in an engine, whose loop
adds its own work to every step (llama-cpp-python: the logits of every evaluated position copied into numpy, one
sampler call per kept position, Python bookkeeping; transformers: logits processors, stopping criteria, the cache
crop, the model kwargs' update), so a policy priced on the project's backend can win there and lose in the engine.
Here the figures are taken inside the engine's own loop (:data:`ENGINE_LOOPS`, one module per engine), so that a
prediction under the file is a prediction of that engine's speed:

* ``plain_token_s``: the engine's own plain decoding (llama-cpp-python ``Llama.generate`` without a draft model,
  transformers ``generate()`` without candidates), greedy, from the context: the median of the seconds between
  consecutive delivered tokens after the first (the prefill) over :data:`PLAIN_TOKENS` tokens per repeat;
* ``target_forward_s[T - 1]``: one iteration of the engine's speculative loop that verifies T - 1 drafted tokens
  and keeps them all (the forward over T tokens as the loop evaluates it, its sampling of T positions and its
  bookkeeping): the engine decodes the context with a *replay* drafter that proposes the next T - 1 tokens of
  the greedy continuation the plain run produced (so each is kept), and the seconds from the drafter's return to
  its next call are an iteration; iterations whose drafts were not all kept (the engine's batched forward
  rounding a near tie the other way) are left out; the median of the kept iterations of all repeats;
* ``draft_token_s``: the engine's own drafter for the ``--draft-ngram`` or ``--draft`` setting
  (llama-cpp-python ``LlamaPromptLookupDecoding``; transformers' prompt lookup or assistant-model candidate
  generator), timed by wrapping its call inside a ``generate`` run of :data:`PLAIN_TOKENS` tokens: seconds in
  the drafter over tokens drafted, the median over repeats.

The context is the first prompt of the prompts file (chat template applied) written twice, as for the backends'
cost file; the plain and replay timings are taken again after a long context, as the file's ``long_context``
(:func:`evolve.perf.costs.long_context`; where that timing fails, a warning and a file of one timing). The file
records ``engine`` (the engine's name), ``engine_version`` (its installed version), ``measured_in``
(:data:`evolve.eval.costs.ENGINE_LOOP`) and ``method`` (how each figure was taken, in words), beside the machine,
threads, model, drafter, gamma_max, repeats and date (:func:`evolve.perf.costs.cost_document`, which also envelopes a
T-curve that falls with T beyond the tolerance).

Raises (one line): InputError for an engine not in :data:`ENGINE_LOOPS`, its package missing, a drafter the engine
does not ship, a model it cannot load, or a prompt whose greedy answer is too short to time the longest draft.
"""
from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

from evolve.errors import InputError, InputWarning

#: The engines whose own loop can be timed: name -> module (with ``open_loop(config) -> EngineLoop``).
ENGINE_LOOPS: dict[str, str] = {
    "llama-cpp-python": "evolve.perf.loop_llama_cpp_python",
    "transformers": "evolve.perf.loop_transformers",
}
#: Tokens a plain run and a drafter run decode per repeat.
PLAIN_TOKENS = 24
#: Kept iterations wanted per draft length and repeat (the replay run decodes this many blocks).
REPLAY_STEPS = 4


@dataclass
class EngineLoop:
    """An engine opened for timing: ``name``, ``version``, ``tokenizer`` (of the target), the calls below, and
    ``method`` (how each figure is taken, in words: recorded in the file).

    ``plain(ids, n)`` -> (tokens, seconds between consecutive tokens after the first): the engine's greedy decoding
    of ``n`` tokens after ``ids``. ``replay(ids, continuation, k)`` -> seconds of each loop iteration that verified
    ``k`` replayed drafts and kept all of them. ``draft(ids, n, gamma)`` -> (seconds in the engine's drafter, tokens
    it drafted, its calls) over a ``generate`` of ``n`` tokens with at most ``gamma`` drafts a call. ``threads``: CPU threads;
    ``drafter``: the engine's drafter and its settings (recorded in the file); ``n_ctx``: the tokens of context the
    engine was opened with (transformers: the model's ``max_position_embeddings``; None: none known).
    """

    name: str
    version: str
    tokenizer: object
    plain: Callable[[Sequence[int], int], tuple[list[int], list[float]]]
    replay: Callable[[Sequence[int], Sequence[int], int], list[float]]
    draft: Callable[[Sequence[int], int, int], tuple[float, int, int]]
    threads: int
    drafter: dict = field(default_factory=dict)
    method: dict = field(default_factory=dict)
    n_ctx: int | None = None


def engine_names() -> tuple[str, ...]:
    """The engines :func:`measure_engine_costs` can time (``--engine``)."""
    return tuple(ENGINE_LOOPS)


def open_engine(name: str, config) -> EngineLoop:
    """The :class:`EngineLoop` of engine ``name`` for ``config`` (a HarvestConfig: target, drafter, threads).

    Raises: InputError (one line, parameter ``engine``) for an unknown engine, and as the engine's module for a
    missing package, a drafter it does not ship or a model it cannot load."""
    if name not in ENGINE_LOOPS:
        raise InputError(f"no engine loop '{name}' (choose from {', '.join(ENGINE_LOOPS)})", param="engine")
    return importlib.import_module(ENGINE_LOOPS[name]).open_loop(config)


def follows(text: Sequence[int], prefix: Sequence[int]) -> bool:
    """Whether ``text`` starts with ``prefix`` (token ids)."""
    return len(text) >= len(prefix) and all(int(a) == int(b) for a, b in zip(text, prefix))


def replay_tokens(text: Sequence[int], ids: Sequence[int], continuation: Sequence[int], k: int) -> list[int]:
    """The replay drafter's proposal for the engine's ``text`` so far: the next ``k`` tokens of ``continuation``
    (the greedy answer to ``ids``) after it, or none once the text has left ``ids + continuation``."""
    done = len(text) - len(ids)
    if k == 0 or done < 0 or not follows(list(ids) + list(continuation), text):
        return []
    return [int(t) for t in continuation[done:done + k]]


def kept_iterations(calls: Sequence[tuple[int, float, float]], k: int) -> list[float]:
    """The seconds of the loop iterations that kept all ``k`` drafts: ``calls`` holds, per drafter call, (length of
    the text it was given, time it was entered, time it returned, ``time.perf_counter``); iteration i runs from call
    i's return to call i + 1's entry and kept its drafts iff the text grew by k + 1 (the drafts and the token sampled
    after them). Give the calls that follow the prefill (llama-cpp-python's first call does; transformers' first
    call comes before it, so its caller leaves that call out): every iteration counted is then a decoding step."""
    return [calls[i + 1][1] - calls[i][2] for i in range(len(calls) - 1) if calls[i + 1][0] - calls[i][0] == k + 1]


def measure_engine_costs(config, engine: str, gamma_max: int, repeats: int,
                         progress: Callable[[str], None] | None = None) -> dict:
    """Measure the cost file of ``config``'s target and drafter inside ``engine``'s loop (module doc). Returns the
    JSON object (checked to load as a cost file).

    Raises: InputError as :func:`open_engine`, and naming the prompts file when the first prompt's greedy answer
    is shorter than the longest replayed block needs, or an iteration length was never timed."""
    from evolve.engine.models import resolve_model
    from evolve.eval.costs import ENGINE_LOOP
    from evolve.harvest.prompts import encode_prompt, read_prompts
    from evolve.perf.costs import cost_document, long_context, long_context_record

    say = progress or (lambda _msg: None)
    source = resolve_model(config.target, "target")
    say(f"loading {config.target} in {engine}")
    loop = open_engine(engine, config)
    prompts, lines = read_prompts(config.prompts)
    prompt = encode_prompt(loop.tokenizer, prompts[0], f"{config.prompts}, line {lines[0]}")
    ctx = list(prompt) + list(prompt)
    need = REPLAY_STEPS * (gamma_max + 1) + 2
    room = max(need, PLAIN_TOKENS) + gamma_max + 1
    if loop.n_ctx is not None and len(ctx) + room > loop.n_ctx:
        raise InputError(f"{config.prompts}, line {lines[0]}: the first prompt written twice ({len(ctx)} tokens) and "
                         f"{room} more do not fit the {loop.n_ctx} tokens of context {engine} is opened with; put a "
                         f"shorter prompt first", param="prompts")
    loop.plain(ctx, 4), loop.draft(ctx, 4, gamma_max)  # warm-up

    def timed_at(context: list[int], drafts: bool) -> tuple[list[list[float]], list[float], list[float], int, int]:
        """(seconds per T, plain gaps, seconds per drafted token, tokens drafted, drafter calls) of ``repeats``
        repeats after ``context`` (the drafter timed only where ``drafts``)."""
        curve: list[list[float]] = [[] for _ in range(gamma_max + 1)]
        plain: list[float] = []
        draft_s: list[float] = []
        drafted_total = draft_calls = 0
        for r in range(repeats):
            say(f"repeat {r + 1}/{repeats} after {len(context)} tokens of context")
            answer, gaps = loop.plain(context, max(need, PLAIN_TOKENS))
            if len(answer) < need:
                raise InputError(f"{config.prompts}, line {lines[0]}: its greedy answer in {engine} after "
                                 f"{len(context)} tokens of context ends after {len(answer)} tokens, fewer than the "
                                 f"{need} that {REPLAY_STEPS} blocks of {gamma_max + 1} tokens need; put a prompt "
                                 f"with a longer answer first", param="prompts")
            plain.extend(gaps[:PLAIN_TOKENS])
            for T in range(1, gamma_max + 2):
                curve[T - 1].extend(loop.replay(context, answer, T - 1))
            if drafts:
                seconds, n, calls = loop.draft(context, PLAIN_TOKENS, gamma_max)
                drafted_total, draft_calls = drafted_total + n, draft_calls + calls
                if n:
                    draft_s.append(seconds / n)
        missing = [T for T in range(1, gamma_max + 2) if not curve[T - 1]]
        if missing:
            raise InputError(f"{engine}: no iteration verifying {missing[0] - 1} drafts after {len(context)} tokens "
                             f"of context kept them all (its batched forward rounds the greedy answer another way); "
                             f"try another first prompt", param="prompts")
        return curve, plain, draft_s, drafted_total, draft_calls

    curve, plain, draft_s, drafted_total, draft_calls = timed_at(ctx, True)
    long = long_context(prompt, len(ctx), None if loop.n_ctx is None else loop.n_ctx - room)
    try:
        far = None if long is None else timed_at(long, False)
    except InputError as exc:  # the file is still good for the context it was timed at
        warnings.warn(InputWarning(f"no long_context: {exc}; the file is timed at one context ({len(ctx)} tokens)"),
                      stacklevel=2)
        far = long = None
    return cost_document(curve, draft_s, plain, drafted_total / max(draft_calls, 1), gamma_max, repeats, len(ctx), {
        **long_context_record(far, None if long is None else len(long), repeats),
        "iterations_timed": [len(c) for c in curve],
        "threads": loop.threads,
        "engine": loop.name,
        "engine_version": loop.version,
        "measured_in": ENGINE_LOOP,
        "method": loop.method,
        "target": {"path": str(source.path), "sha256": source.hashes()},
        "drafter": loop.drafter,
    })


__all__ = ["ENGINE_LOOPS", "EngineLoop", "PLAIN_TOKENS", "REPLAY_STEPS", "engine_names",
           "follows", "kept_iterations", "measure_engine_costs", "open_engine", "replay_tokens"]

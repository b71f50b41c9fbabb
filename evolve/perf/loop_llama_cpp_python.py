"""llama-cpp-python's own loop, timed for a cost file (:mod:`evolve.perf.engine_loop`).

One ``llama_cpp.Llama`` of the target GGUF (``logits_all=True``, which a draft model needs; ``n_threads`` and
``n_threads_batch`` the config's threads) decodes with ``Llama.generate(ids, temp=0, repeat_penalty=1)``
(``llama_cpp/llama.py`` of llama-cpp-python 0.3.36): after each evaluation it samples position after position
until a sample differs from the drafted token, then calls ``Llama.draft_model(input_ids)`` with the text so far and
evaluates the returned drafts with the sampled token in one ``eval``. Its drafters are ``LlamaDraftModel``
subclasses; the one it ships is ``LlamaPromptLookupDecoding(max_ngram_size, num_pred_tokens)``
(``llama_cpp/llama_speculative.py``), the engine's drafter for ``--draft-ngram MAX[,MIN]`` (it tries n from MAX down
to 1; MIN is the project's). No other drafter is shipped: a config drafting otherwise is refused.
"""
from __future__ import annotations

import time

from evolve.errors import InputError
from evolve.perf.engine_loop import EngineLoop, kept_iterations, replay_tokens

NAME = "llama-cpp-python"
#: Tokens of context the target is opened with (the first prompt twice, and the answers timed after it).
N_CTX = 4096


def open_loop(config) -> EngineLoop:
    """The :class:`evolve.perf.engine_loop.EngineLoop` of llama-cpp-python for ``config`` (module doc).

    Raises: InputError (one line) when llama-cpp-python is missing, the target is not a GGUF it loads, or the
    drafter is not prompt lookup (``--draft-ngram``)."""
    import numpy as np

    from evolve.engine.llama_cpp import import_llama, load_llama
    from evolve.engine.models import resolve_model
    from evolve.engine.threads import apply_threads, default_threads

    chosen = [name for name, value in config.drafters if value is not None]
    if chosen != ["ngram"]:
        raise InputError(f"{NAME} ships one drafter, prompt lookup (LlamaPromptLookupDecoding): time it with the "
                         f"prompt-lookup drafter (given: {', '.join(chosen) or 'none'})", param="engine")
    llama_cpp = import_llama()
    from llama_cpp.llama_speculative import LlamaDraftModel, LlamaPromptLookupDecoding

    threads = config.threads or default_threads() or 1
    apply_threads(threads)  # torch (the tokenizer's process) beside llama.cpp on as many threads
    loaded = load_llama(resolve_model(config.target, "target"), threads=threads, n_ctx=N_CTX)
    llm = loaded.model
    n_max = int(config.ngram[0])

    class Replay(LlamaDraftModel):
        """Proposes the next k tokens of the greedy answer; records (text length, entered, returned) per call."""

        def __init__(self, ids, answer, k):
            self.ids, self.answer, self.k, self.calls = list(ids), list(answer), k, []

        def __call__(self, input_ids, /, **kwargs):
            t0 = time.perf_counter()
            draft = np.asarray(replay_tokens(input_ids, self.ids, self.answer, self.k), dtype=np.intc)
            self.calls.append((len(input_ids), t0, time.perf_counter()))
            return draft

    class Timed(LlamaDraftModel):
        """The engine's prompt lookup, its seconds and drafted tokens summed."""

        def __init__(self, gamma):
            self.inner, self.seconds, self.tokens, self.calls = LlamaPromptLookupDecoding(n_max, gamma), 0.0, 0, 0

        def __call__(self, input_ids, /, **kwargs):
            t0 = time.perf_counter()
            out = self.inner(input_ids)
            self.seconds += time.perf_counter() - t0
            self.tokens += len(out)
            self.calls += 1
            return out

    def generate(ids, n, draft_model=None):
        llm.draft_model = draft_model
        out, stamps = [], []
        try:
            for tok in llm.generate(list(ids), temp=0.0, repeat_penalty=1.0):
                stamps.append(time.perf_counter())
                out.append(int(tok))
                if len(out) >= n:
                    break
        finally:
            llm.draft_model = None
        return out, stamps

    def plain(ids, n):
        out, stamps = generate(ids, n)
        return out, [b - a for a, b in zip(stamps[1:], stamps[2:])]

    def replay(ids, answer, k):
        drafts = Replay(ids, answer, k)
        generate(ids, len(answer) - 1, drafts)
        return kept_iterations(drafts.calls, k)

    def draft(ids, n, gamma):
        timed = Timed(gamma)
        generate(ids, n, timed)
        return timed.seconds, timed.tokens, timed.calls

    method = {
        "plain_token_s": "Llama.generate(temp=0) without a draft model: median seconds between consecutive tokens "
                         "after the first",
        "target_forward_s": "Llama.generate(temp=0) with a LlamaDraftModel replaying the next T-1 tokens of the greedy "
                            "answer: median seconds from the draft model's return to its next call (eval of T "
                            "tokens, T samples, bookkeeping), iterations that kept all drafts",
        "draft_token_s": f"LlamaPromptLookupDecoding(max_ngram_size={n_max}, num_pred_tokens=gamma_max) called by "
                         f"Llama.generate: seconds in the call over tokens drafted",
    }
    return EngineLoop(NAME, llama_cpp.__version__, loaded.tokenizer, plain, replay, draft, threads,
                      {"kind": "ngram", "max": n_max, "engine_class": "LlamaPromptLookupDecoding"}, method, N_CTX)


__all__ = ["NAME", "open_loop"]

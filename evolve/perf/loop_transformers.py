"""transformers' own loop, timed for a cost file (:mod:`evolve.perf.engine_loop`).

The target is loaded as the torch backend and the transformers peer load it (:func:`evolve.engine.models.load_model`,
float32, cpu) and decodes with ``model.generate(ids, do_sample=False)`` (transformers 5.24.0,
``transformers/generation/utils.py``). Plain decoding is its greedy loop; speculative decoding is its assisted loop
(``_assisted_decoding``): per iteration the candidate generator's ``get_candidates``, one forward over the last token
and the candidates, the logits processors, the comparison with the greedy choices, the cache crop and the model
kwargs' update. The engine's drafters are its candidate generators: prompt lookup (``prompt_lookup_num_tokens``,
``max_matching_ngram_size``: ``PromptLookupCandidateGenerator``) for ``--draft-ngram MAX[,MIN]`` (it tries n from
MAX down to 1), and an assistant model (``assistant_model``, ``num_assistant_tokens`` with the constant schedule:
``AssistedCandidateGenerator``) for ``--draft MODEL``. The replay drafter is a ``CandidateGenerator`` handed to the
assisted loop by the model's ``_get_candidate_generator`` (set on the instance while a replay runs, removed after);
the engine's own generators are wrapped the same way to time their ``get_candidates``.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

from evolve.errors import InputError
from evolve.perf.engine_loop import EngineLoop, kept_iterations, replay_tokens

NAME = "transformers"


def open_loop(config) -> EngineLoop:
    """The :class:`evolve.perf.engine_loop.EngineLoop` of transformers for ``config`` (module doc).

    Raises: InputError (one line) for a drafter transformers does not ship (neither prompt lookup nor a draft
    model) or a model it cannot load."""
    import torch
    import transformers
    from transformers.generation.candidate_generator import CandidateGenerator

    from evolve.engine.models import context_length, load_model, resolve_model
    from evolve.engine.threads import apply_threads

    chosen = [name for name, value in config.drafters if value is not None]
    if chosen not in (["ngram"], ["draft"]):
        raise InputError(f"{NAME} ships prompt lookup and assistant models as drafters: time them with the "
                         f"prompt-lookup drafter or a draft model (given: {', '.join(chosen) or 'none'})",
                         param="engine")
    threads = apply_threads(config.threads)
    loaded = load_model(resolve_model(config.target, "target"), "float32", "cpu")
    model = loaded.model
    assistant = load_model(resolve_model(config.draft_model, "draft"), "float32", "cpu").model \
        if chosen == ["draft"] else None
    n_max = int(config.ngram[0]) if chosen == ["ngram"] else None

    class Replay(CandidateGenerator):
        """Proposes the next k tokens of the greedy answer; records (text length, entered, returned) per call."""

        def __init__(self, ids, answer, k):
            self.ids, self.answer, self.k, self.calls = list(ids), list(answer), k, []

        def get_candidates(self, input_ids, **kwargs):
            t0 = time.perf_counter()
            text = input_ids[0].tolist()
            more = replay_tokens(text, self.ids, self.answer, self.k)
            out = torch.cat([input_ids, torch.tensor([more], dtype=input_ids.dtype)], dim=1) if more else input_ids
            self.calls.append((len(text), t0, time.perf_counter()))
            return out, None

        def update_candidate_strategy(self, input_ids, scores, num_matches):
            pass

    @contextmanager
    def candidates(make):
        """Hand ``make(original generator)`` to the assisted loop (the instance attribute, removed after)."""
        original = model._get_candidate_generator
        model._get_candidate_generator = lambda *a, **kw: make(original(*a, **kw))
        try:
            yield
        finally:
            del model._get_candidate_generator

    def generate(ids, n, **extra):
        """(the ``n`` tokens ``generate`` decodes after ``ids``, past any end-of-sequence token, as llama-cpp-python's
        generator does; (time, tokens) of each streamer put after the prompt's)."""
        stamps = []

        class Clock:
            def put(self, value):
                stamps.append((time.perf_counter(), int(value.numel())))

            def end(self):
                pass

        with torch.inference_mode():
            out = model.generate(torch.tensor([list(ids)]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 max_new_tokens=n, do_sample=False, eos_token_id=[], pad_token_id=0,
                                 streamer=Clock(), **extra)  # no end of sequence: n tokens, as llama.cpp's loop
        return [int(t) for t in out[0, len(ids):]], stamps[1:]  # the first put is the prompt

    def plain(ids, n):
        out, stamps = generate(ids, n)
        return out, [b[0] - a[0] for a, b in zip(stamps[1:], stamps[2:])]

    def replay(ids, answer, k):
        drafts = Replay(ids, answer, k)
        with candidates(lambda _original: drafts):
            generate(ids, len(answer) - 1, prompt_lookup_num_tokens=max(k, 1))
        return kept_iterations(drafts.calls[1:], k)  # the first call comes before the prefill: its iteration holds it

    def draft(ids, n, gamma):
        timed = {"seconds": 0.0, "tokens": 0, "calls": 0}

        def wrap(inner):
            get = inner.get_candidates

            def get_candidates(input_ids, **kwargs):
                t0 = time.perf_counter()
                out, logits = get(input_ids, **kwargs)
                timed["seconds"] += time.perf_counter() - t0
                timed["tokens"] += int(out.shape[1] - input_ids.shape[1])
                timed["calls"] += 1
                return out, logits
            inner.get_candidates = get_candidates
            return inner

        extra = (dict(prompt_lookup_num_tokens=gamma, max_matching_ngram_size=n_max) if assistant is None else
                 dict(assistant_model=assistant, num_assistant_tokens=gamma,
                      num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0))
        with candidates(wrap):
            generate(ids, n, **extra)
        return timed["seconds"], timed["tokens"], timed["calls"]

    engine_drafter = ("PromptLookupCandidateGenerator" if assistant is None else "AssistedCandidateGenerator")
    method = {
        "plain_token_s": "model.generate(do_sample=False): median seconds between consecutive streamer puts after "
                         "the first generated token",
        "target_forward_s": "model.generate(do_sample=False) in its assisted loop with a CandidateGenerator replaying "
                            "the next T-1 tokens of the greedy answer: median seconds from get_candidates' return to "
                            "its next call, iterations that kept all candidates",
        "draft_token_s": f"{engine_drafter}.get_candidates inside model.generate: seconds in the call over tokens "
                         f"proposed",
    }
    drafter = ({"kind": "ngram", "max": n_max} if assistant is None else
               {"kind": "model", "path": str(config.draft_model)})
    return EngineLoop(NAME, transformers.__version__, loaded.tokenizer, plain, replay, draft, threads,
                      {**drafter, "engine_class": engine_drafter}, method, context_length(loaded))


__all__ = ["NAME", "open_loop"]

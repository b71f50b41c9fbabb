"""The suffix-decoding drafter of the llama-cpp-python module: ``PolicySuffixDecoding``, a ``LlamaDraftModel`` whose
drafts come from arctic-inference's ``SuffixDecodingCache`` (the library vLLM's method ``suffix`` runs; SuffixDecoding,
Oliaro et al. 2024, arXiv 2411.04975), cut by a verification-length policy evolved on a suffix-decoding harvest.

It drafts as this project's suffix drafter drafts (:mod:`evolve.engine.suffix`; its ``speculate_trees`` and
``suffix_columns`` are written into the module from their source): each text is a request of the cache, started
with its prompt and given its tokens as they come; the draft after the text so far is the request's own tree's or
the global tree's (earlier responses), whichever scores higher, at most ``num_pred_tokens`` tokens, cut after an
end-of-sequence token; and before drafting token m the policy reads the suffix columns (the match length, token m's
estimated probability, the path probability, the draft's score, whether it came from earlier responses) beside
draft_index, position and the text's history. A text ends (its response joins the global cache, as a finished
request of vLLM's does) at ``finish(tokens)``, or at the first call of the next text (then without the tokens
sampled after its last call); ``warm(prompt, response)`` puts a text decoded elsewhere into the cache, so a
deployment starts from the cache the policy was scored with.

This module holds that drafter's part only (:data:`COLUMN_VALUES`, the class text, its settings read from the
champion's harvest); :mod:`evolve.export.engines.llama_cpp_python` writes the module.
"""
from __future__ import annotations

from evolve.engine.suffix import (HARVEST_SPEC_FACTOR, MAX_CACHED, MAX_DEPTH, VERSION, VLLM_CACHED, VLLM_DEPTH,
                                  ask_trees, speculate_trees, suffix_columns)
from evolve.errors import InputError
from evolve.export.codegen import core_source
from evolve.traces.schema import SUFFIX_COLUMNS

#: The suffix columns a decision reads, and their value (Python expressions of ``m`` the draft index and ``cols`` the
#: columns of the full draft, as :mod:`evolve.export.engines.llama_cpp_python`'s values are).
COLUMN_VALUES: dict[str, str] = {name: f"float(cols[{name!r}][m])" for name in SUFFIX_COLUMNS}
#: The class the module defines.
CLASS_NAME = "PolicySuffixDecoding"
#: The import the module adds (arctic-inference at :data:`evolve.engine.suffix.VERSION`).
IMPORT = ("from arctic_inference.suffix_decoding import SuffixDecodingCache\n"
          "from arctic_inference.suffix_decoding.cache import SuffixTree")
#: The docstring's words on the drafter (a clause the policy's sentence follows) and on its cache (a paragraph).
DOC = (f"PolicySuffixDecoding drafts by suffix decoding (arctic-inference {VERSION}'s SuffixDecodingCache, the library "
       "vLLM's method suffix runs): each text is a request of the cache (its prompt, then its tokens as they come); "
       "the draft after the text so far is the continuation the request's own suffix tree or the global tree of "
       "earlier responses gives with the higher score (its own tree on a tie), at most num_pred_tokens tokens")
CACHE_DOC = ("Call finish(tokens) with the whole text (prompt and output) after each text so that its response joins "
             "the global cache whole (else the next text's first call ends it, without the tokens sampled after its "
             "last call), and warm(prompt, response) to put texts decoded before into the cache, in the order they "
             "were decoded (the policy was scored with its harvest's earlier texts in the cache).")

CLASS = '''

class PolicySuffixDecoding(_PolicyDraft):
    """Suffix decoding drafting as far as the policy RULE keeps drafting (the module doc).

    Args: ``max_tree_depth``: the suffix trees' depth (DEPTH as the policy's harvest drafted); ``max_cached_requests``:
    responses kept in the global cache (CACHED; 0: the prompt alone); ``num_pred_tokens``: the longest draft (GAMMA as
    the policy was scored); ``eos_token_ids``: end-of-sequence ids (a draft stops after one).
    """

    def __init__(self, max_tree_depth=DEPTH, max_cached_requests=CACHED, num_pred_tokens=GAMMA, eos_token_ids=()):
        if not 2 <= max_tree_depth or max_cached_requests < 0 or num_pred_tokens < 1:
            raise ValueError("expected max_tree_depth >= 2, max_cached_requests >= 0 and num_pred_tokens >= 1")
        self.max_tree_depth = int(max_tree_depth)
        self.cache = SuffixDecodingCache(max_tree_depth=self.max_tree_depth,
                                         max_cached_requests=int(max_cached_requests))
        self._setup(num_pred_tokens, eos_token_ids)
        self._requests, self._active, self._seen, self._found = 0, None, 0, None

    def warm(self, prompt, response):
        """Put a text decoded before into the global cache: its ``prompt`` and ``response`` (token ids)."""
        self._requests += 1
        self.cache.start_request(self._requests, np.asarray(prompt, dtype=np.int32))
        if len(response):
            self.cache.add_active_response(self._requests, [int(t) for t in response])
        self.cache.stop_request(self._requests)

    def finish(self, tokens=None):
        """End the text decoded now: ``tokens`` (the whole text, prompt and output; None: as far as the last call saw
        it) join the global cache; the next call starts a new text."""
        if self._active is not None and tokens is not None:
            self._sync(np.asarray(tokens, dtype=np.int64))
        self._stop()
        self._last, self._prompt_len = None, None

    def _stop(self):
        if self._active is not None:
            self.cache.stop_request(self._active)
            self._active = None

    def _begin(self, ctx):
        self._stop()
        self._requests += 1
        self._active = self._requests
        self.cache.start_request(self._active, np.asarray(ctx[:self._prompt_len], dtype=np.int32))
        self._seen = self._prompt_len

    def _sync(self, ctx):
        if ctx.size > self._seen:
            self.cache.add_active_response(self._active, [int(t) for t in ctx[self._seen:]])
            self._seen = ctx.size

    def _propose(self, ctx):
        self._sync(ctx)
        tokens, probs, match, score, from_cache = speculate_trees(self.cache, SuffixTree, self._active, ctx,
                                                                  self.max_tree_depth, SPEC_FACTOR)
        self._found = (probs, match, score, from_cache)
        return tokens[:self.num_pred_tokens]

    def _columns(self, ctx, draft):
        probs, match, score, from_cache = self._found
        return suffix_columns(probs[:len(draft)], match, score, from_cache)
'''


def source_parts(depth: int, cached: int, gamma: int) -> tuple[list[str], list[str]]:
    """The module's text of this drafter beside :data:`CLASS`: (its constants, the class's defaults ``depth``,
    ``cached`` and ``gamma``; its functions, written from their source)."""
    constants = ["#: Defaults of PolicySuffixDecoding: the tree depth, cached responses and longest draft of the "
                 "policy's harvest and run (constructor arguments); the speculation's max_spec_factor (large enough "
                 "never to cap a draft, as the harvest asked the trees).",
                 f"DEPTH, CACHED, GAMMA = {int(depth)}, {int(cached)}, {int(gamma)}",
                 f"SPEC_FACTOR = {HARVEST_SPEC_FACTOR!r}"]
    return constants, [core_source(f).rstrip("\n") for f in (ask_trees, speculate_trees, suffix_columns)]


def harvest_settings(found: dict, source: str) -> tuple[int, int]:
    """(tree depth, cached responses) of a suffix harvest's drafter settings ``found`` (a champion file's
    ``provenance.data.generator_config.drafter``), vLLM's defaults where absent.

    Raises: InputError naming the file and key for a value the class would refuse (not an integer, out of the
    drafter's bounds)."""
    out = []
    for key, default, low, high in (("max_tree_depth", VLLM_DEPTH, 2, MAX_DEPTH),
                                    ("max_cached_requests", VLLM_CACHED, 0, MAX_CACHED)):
        value = found.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InputError(f"{source}: key 'provenance.data.generator_config.drafter.{key}' is {value!r}, not an "
                             f"integer in {low}..{high}")
        out.append(value)
    return out[0], out[1]


__all__ = ["CACHE_DOC", "CLASS", "CLASS_NAME", "COLUMN_VALUES", "DOC", "IMPORT", "harvest_settings", "source_parts"]

"""Suffix decoding: a drafter without a model whose drafts come from suffix trees over the prompt and earlier
responses (``--draft-suffix DEPTH[,CACHED]``).

SuffixDecoding (Oliaro et al. 2024, arXiv 2411.04975) keeps a suffix tree of each request's prompt and response and a
global suffix tree of earlier requests' responses; at each step it matches the end of the text against both and
drafts the most frequent continuation. The trees, the matching and the drafts are those of Snowflake's
``arctic-inference`` package (``arctic_inference.suffix_decoding``, version :data:`VERSION`), the library vLLM's
``method: suffix`` runs (``vllm/v1/spec_decode/suffix_decoding.py``, vLLM 0.33.0); this module holds no tree of its
own. Per text (a request): ``start_request`` with its prompt when the text starts, ``add_active_response`` with the
tokens the text gained since the last draft before each draft, ``stop_request`` when the text ends (its response stays
in the global cache, which keeps the ``CACHED`` latest responses, vLLM's ``suffix_decoding_max_cached_requests``;
DEPTH is ``suffix_decoding_max_tree_depth``).

The harvest drafts what the trees give, up to DEPTH tokens (``max_spec_tokens``), of which a block keeps its first
k: ``max_spec_factor`` :data:`HARVEST_SPEC_FACTOR` (no cap by the match length), ``max_spec_offset`` 0 and
``min_token_prob`` 0 (every token of the most frequent path), a chain (``use_tree_spec`` off, as vLLM drafts); one
draft whatever the block's k, so the columns a policy reads do not depend on k. A policy, or vLLM's own rule (the
tokens whose estimated probability is at least ``min_token_prob``, at most ``max_spec_factor`` times the match
length plus ``max_spec_offset``: :mod:`evolve.kinds.verify_length.eval_suffix`), then verifies a prefix of that
draft. The draft is deterministic: q is one-hot (:class:`evolve.engine.onehot.OneHot`), and it draws no uniform from
the text's random stream.

Every drafted token carries the suffix columns (:data:`evolve.traces.schema.SUFFIX_COLUMNS`), known before it is
drafted: the match length, its estimated probability after the block's earlier drafts (the ratio of the tree's path
probabilities), their product (the path probability), the draft's score (the sum of path probabilities) and whether
the draft came from the global cache (earlier responses) or the request's own tree (prompt and response). To tell the
two apart the drafter asks each tree as ``SuffixDecodingCache.speculate`` does (the request's own tree wins a tie).

Requests share the global cache, so the order texts are decoded in matters (:attr:`cross_request`): a harvest decodes
its splits one after another, train, valid, test (earlier splits' responses warm the cache of later ones, never the
reverse), one text at a time, and a resumed harvest first replays the finished texts into the cache in that order.
"""
from __future__ import annotations

import math
import os
from typing import Any, Sequence

import numpy as np

from evolve.errors import InputError
from evolve.engine.drafter_base import Drafter, DrafterOption, EngineFamily
from evolve.engine.onehot import OneHot
from evolve.traces.schema import SUFFIX_COLUMNS

#: The arctic-inference version whose trees this drafter was built and checked against.
VERSION = "0.3.0"
#: How to install it (a source package: only its suffix-tree extension builds without CUDA).
INSTALL = ('pip install "nanobind==2.9.2" cmake ninja && pip install --no-build-isolation '
           f'arctic-inference=={VERSION} (the README names it; its build needs a C++ compiler)')
#: vLLM 0.33.0's defaults (``vllm/config/speculative.py``): tree depth, cached requests, spec factor, min token prob.
VLLM_DEPTH, VLLM_CACHED, VLLM_FACTOR, VLLM_MIN_PROB = 24, 10000, 1.0, 0.1
#: The harvest's ``max_spec_factor``: so large that the match length never caps a draft below the block's k.
HARVEST_SPEC_FACTOR = 1000.0
#: Largest tree depth and number of cached responses the option takes.
MAX_DEPTH, MAX_CACHED = 256, 100_000
#: Bytes of memory per cached response token (measured 230-355 B per token for arctic-inference 0.3.0's trees; a
#: bound with room): a global cache whose responses would take more than half the machine's memory is refused.
BYTES_PER_TOKEN = 400


def import_suffix():
    """``arctic_inference.suffix_decoding`` at :data:`VERSION`. Raises: InputError (parameter ``suffix``, one line)
    when it is not installed or another version is."""
    try:
        from arctic_inference import suffix_decoding
    except ImportError:
        raise InputError(f"suffix decoding needs the package arctic-inference {VERSION}: {INSTALL}",
                         param="suffix") from None
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("arctic_inference")
    except PackageNotFoundError:
        found = "unknown"
    if found != VERSION:
        raise InputError(f"suffix decoding was built and checked against arctic-inference {VERSION}; version "
                         f"{found} is installed ({INSTALL})", param="suffix")
    return suffix_decoding


def suffix_settings(value: Sequence[int] | None) -> tuple[int, int]:
    """(DEPTH, CACHED) of a ``--draft-suffix`` value ``(DEPTH,)`` or ``(DEPTH, CACHED)``; CACHED defaults to vLLM's
    :data:`VLLM_CACHED`; None or empty: vLLM's defaults."""
    if not value:
        return VLLM_DEPTH, VLLM_CACHED
    return int(value[0]), int(value[1]) if len(value) == 2 else VLLM_CACHED


def parse_value(text: str) -> tuple[int, ...]:
    """The ``--draft-suffix`` text ``DEPTH`` or ``DEPTH,CACHED`` as a tuple of its integers (CACHED may be 0: the
    prompt alone), bounds checked by :meth:`SuffixDrafter.check_value`. Raises: ValueError (one line) for anything
    else."""
    parts = text.split(",")
    if len(parts) not in (1, 2) or not all(p.strip().isdecimal() for p in parts):
        raise ValueError(f"expected DEPTH or DEPTH,CACHED, integers >= 0 (value {text!r})")
    return tuple(int(p) for p in parts)


def physical_memory() -> int | None:
    """Bytes of memory of this machine (None where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


class SuffixDrafter(Drafter):
    """Suffix decoding from arctic-inference (module doc): trees of depth ``depth``, at most ``cached`` responses."""

    name = "suffix"
    family = EngineFamily.SUFFIX
    field = "suffix"
    option = DrafterOption(
        "--draft-suffix", "DEPTH[,CACHED]",
        f"Suffix decoding (vLLM's suffix method, arctic-inference {VERSION}): the most frequent continuation of the "
        "text's end in suffix trees of the prompt and of the CACHED latest responses (default "
        f"{VLLM_CACHED}; 0: the prompt alone), trees of depth DEPTH (vLLM's default {VLLM_DEPTH}), e.g. '64'; DEPTH "
        f"at most {MAX_DEPTH}, CACHED at most {MAX_CACHED}, and the cache bounded by half the machine's memory "
        f"({BYTES_PER_TOKEN} bytes per cached token). Texts are decoded one at a time, train then valid then test.",
        value=parse_value)
    model_free = True
    cross_request = True
    lookahead_columns = SUFFIX_COLUMNS
    grows_trees = True
    deterministic_trees = True

    @classmethod
    def check_value(cls, value) -> None:
        if len(value) not in (1, 2):
            raise InputError(f"expected DEPTH or DEPTH,CACHED (value {value})", param="suffix")
        depth, cached = suffix_settings(value)
        if not 2 <= depth <= MAX_DEPTH:
            raise InputError(f"DEPTH must be in 2..{MAX_DEPTH} (value {depth})", param="suffix")
        if not 0 <= cached <= MAX_CACHED:
            raise InputError(f"CACHED must be in 0..{MAX_CACHED} (value {cached})", param="suffix")

    @classmethod
    def check_config(cls, config) -> None:
        """The settings suffix decoding needs: one text at a time (the global cache is filled in a stated order),
        a cache that fits in memory, and the library at :data:`VERSION`."""
        if config.batch_size != 1:
            raise InputError(f"suffix decoding decodes one text at a time, each seeing the responses before it "
                             f"(value {config.batch_size})", param="batch_size")
        _, cached = suffix_settings(getattr(config, cls.field))
        memory = physical_memory()
        need = cached * config.max_new_tokens * BYTES_PER_TOKEN
        if memory is not None and need > memory // 2:
            raise InputError(f"a cache of {cached} responses of up to {config.max_new_tokens} tokens may take "
                             f"{need / 2 ** 30:.1f} GiB, more than half of this machine's {memory / 2 ** 30:.1f} GiB; "
                             f"give a smaller CACHED", param="suffix")
        import_suffix()

    @classmethod
    def build(cls, target, draft, value, vocab, device):
        return cls(*suffix_settings(value), vocab)

    def __init__(self, depth: int, cached: int, vocab: int):
        module = import_suffix()
        self.depth, self.cached, self.vocab = int(depth), int(cached), int(vocab)
        self.cache = module.SuffixDecodingCache(max_tree_depth=self.depth, max_cached_requests=self.cached)
        self.tree_class = module.cache.SuffixTree
        self.seen: dict[Any, int] = {}
        self.current: Any = None  # the request decoded now (one text at a time)
        self.requests = 0  # requests started so far (their ids)
        self._last: tuple | None = None  # the last speculation, by (request, context length)
        self.run = _NoModel()

    def settings(self) -> dict[str, Any]:
        return {"kind": self.name, "library": f"arctic-inference {VERSION}", "max_tree_depth": self.depth,
                "max_cached_requests": self.cached, "max_spec_factor": HARVEST_SPEC_FACTOR, "max_spec_offset": 0.0,
                "min_token_prob": 0.0, "cache": "the responses of the texts decoded before, one text at a time: "
                                                "train, then valid, then test"}

    # --- requests ----------------------------------------------------------------------------------------------

    def fresh(self) -> "SuffixDrafter":
        """A drafter of the same settings with an empty cache (a live row's own, so rows never see each other's
        responses)."""
        return SuffixDrafter(self.depth, self.cached, self.vocab)

    def _new_request(self) -> int:
        self.requests += 1
        return self.requests

    def start(self, engine, batch, row: int) -> None:
        """A new text (one text at a time: its request is the drafter's :attr:`current`)."""
        self.open_text(batch.rows[row].ctx)

    def open_text(self, prompt: Sequence[int]) -> None:
        """Start the request of a new text whose prompt is ``prompt`` (it becomes :attr:`current`; a request still
        open is stopped first)."""
        if self.current is not None and self.current in self.cache.active_requests:
            self.cache.stop_request(self.current)
        req = self._new_request()
        self.cache.start_request(req, np.asarray(prompt, dtype=np.int32))
        self.seen[req] = len(prompt)
        self.current = req
        self._last = None

    def sync(self, ctx: Sequence[int], req=None) -> None:
        """Give the request's tree (``req``, default the text decoded now) the tokens the text gained since the last
        draft."""
        req = self.current if req is None else req
        done = self.seen[req]
        if len(ctx) < done:
            raise RuntimeError(f"text {req} lost tokens the suffix trees hold (a rewind suffix decoding cannot undo)")
        if len(ctx) > done:
            self.cache.add_active_response(req, [int(t) for t in ctx[done:]])
            self.seen[req] = len(ctx)

    def finish(self, engine, batch, row: int) -> None:
        state = batch.rows[row]
        if state is not None:
            self.close_text(state.ctx)

    def close_text(self, ctx: Sequence[int]) -> None:
        """End the text decoded now, whose whole text is ``ctx``: its response stays in the global cache."""
        req = self.current
        if req is None or req not in self.cache.active_requests:
            return
        self.sync(ctx, req)
        self.cache.stop_request(req)
        self.seen.pop(req, None)
        self.current, self._last = None, None

    def warm(self, req, prompt: Sequence[int], response: Sequence[int]) -> None:
        """Replay a finished text into the cache: its prompt, its response, its end (a resumed harvest, live decoding
        after the texts of earlier splits); ``req`` names it only for the caller (the drafter numbers requests)."""
        req = self._new_request()
        self.cache.start_request(req, np.asarray(list(prompt), dtype=np.int32))
        if len(response):
            self.cache.add_active_response(req, [int(t) for t in response])
        self.cache.stop_request(req)

    def ask_tree(self, ctx: Sequence[int], nodes: int):
        """The library's tree of at most ``nodes`` nodes after ``ctx`` for the text decoded now, at the harvest's
        settings (:func:`ask_trees` with ``use_tree``): (the arctic-inference draft, 1 if from the global cache)."""
        return ask_trees(self.cache, self.tree_class, self.current, ctx, self.depth, HARVEST_SPEC_FACTOR, nodes, True)

    def path_columns(self, probs: np.ndarray, match: int, score: float, from_cache: int) -> dict[str, np.ndarray]:
        """The suffix columns of a path whose path probabilities are ``probs`` (:func:`suffix_columns`), for the chain
        records of a tree step."""
        return suffix_columns(probs, match, score, from_cache)

    def tree_step(self, engine, kv, ctx, rng, nodes, width, max_depth):
        """One step of suffix decoding's draft tree (:func:`evolve.engine.suffix_tree.suffix_tree_step`)."""
        from evolve.engine.suffix_tree import suffix_tree_step

        return suffix_tree_step(engine, kv, self, ctx, rng, nodes, width, max_depth)

    # --- drafts --------------------------------------------------------------------------------------------------

    def speculate(self, req, ctx: Sequence[int]):
        """(token ids, path probabilities float64, match length, score, from the global cache) of the draft after
        ``ctx`` at the harvest's settings (module doc), as long as the trees give (at most DEPTH tokens; a block
        keeps its first k): the same draft whatever the block's k, so a policy's columns do not depend on it."""
        if self._last is not None and self._last[0] == (req, len(ctx)):
            return self._last[1]
        found = speculate_trees(self.cache, self.tree_class, req, ctx, self.depth, HARVEST_SPEC_FACTOR)
        self._last = ((req, len(ctx)), found)
        return found

    def _draft(self, engine, req, ctx, k: int):
        """(the first ``k`` tokens of the draft after ``ctx``, cut after an end-of-sequence token, their columns)."""
        self.sync(ctx, req)
        tokens, probs, match, score, from_cache = self.speculate(req, ctx)
        tokens, probs = tokens[:k], probs[:k]
        for j, t in enumerate(tokens):
            if t in engine.eos:
                tokens, probs = tokens[:j + 1], probs[:j + 1]
                break
        return tokens, suffix_columns(probs, match, score, from_cache)

    def draft_columns(self, ctx, drafts):
        if not len(drafts):
            return {c: np.zeros(0) for c in SUFFIX_COLUMNS}
        tokens, probs, match, score, from_cache = self.speculate(self.current, ctx)
        if tokens[:len(drafts)] != [int(t) for t in drafts]:
            raise RuntimeError("suffix columns asked of tokens the trees did not draft after this context")
        return suffix_columns(probs[:len(drafts)], match, score, from_cache)

    def lookahead(self, engine, ctx, drafted=0):
        if self.current is None:
            return {}
        draft, cols = self._draft(engine, self.current, ctx, drafted + 1)
        if len(draft) <= drafted:
            return {}
        return {c: float(v[drafted]) for c, v in cols.items()}

    def propose(self, engine, batch, ks, keep=None):
        out = []
        for i, (row, k) in enumerate(zip(batch.rows, ks)):
            if row is None or not k:
                out.append(([], None, np.zeros(0)))
                continue
            draft, cols = self._draft(engine, self.current, row.ctx, k)
            if keep is not None and len(draft) > 1:  # a one-hot draft: q(x) = max q = 1, entropy 0
                m = 1
                while m < len(draft) and keep(i, [1.0] * m, [1.0] * m, [0.0] * m,
                                              {c: float(v[m]) for c, v in cols.items()}):
                    m += 1
                draft = draft[:m]
            q = OneHot(np.asarray(draft, dtype=np.int64), self.vocab) if draft else None
            out.append((draft, q, np.zeros(len(draft))))
        return out


def ask_trees(cache, tree, req, ctx, depth: int, factor: float, nodes: int = 0, use_tree: bool = False):
    """The library's draft after ``ctx`` from the request's own suffix tree or the global one, the higher score (the
    request's own tree wins a tie), each asked as ``SuffixDecodingCache.speculate`` asks it: the last ``depth``
    tokens, at most ``nodes`` drafted tokens (0: ``depth``), ``factor`` x match length, no offset, no probability
    floor; a chain, or with ``use_tree`` a tree (:mod:`evolve.engine.suffix_tree`). Arguments as
    :func:`speculate_trees`. Returns (the arctic-inference draft: ``token_ids``, ``parents``, ``probs`` (estimated
    path probabilities), ``score``, ``match_len``; 1 if it came from the global cache else 0)."""
    tail = np.asarray(ctx[-depth:], dtype=np.int32)
    args = (tail, nodes or depth, factor, 0.0, 0.0, use_tree)
    own = tree.speculate_ndarray(cache._local_trees[req], *args)
    other = tree.speculate_ndarray(cache._global_tree, *args)
    return (own, 0) if own.score >= other.score else (other, 1)


def speculate_trees(cache, tree, req, ctx, depth: int, factor: float):
    """The draft after ``ctx`` from the request's own suffix tree or the global one (the harvest's settings).

    ``cache``: an arctic-inference ``SuffixDecodingCache`` holding the active request ``req``; ``tree``: its
    ``SuffixTree`` class; ``ctx``: the text so far, int (L,); each tree is asked as ``SuffixDecodingCache.speculate``
    asks it (the last ``depth`` tokens, at most ``depth`` drafts, ``factor`` x match length, no offset, no probability
    floor, a chain) and the higher score wins (the request's own tree wins a tie). Returns (token ids, list of int;
    path probabilities, float64 (n,); match length, int; score, float; 1 if from the global cache else 0). Used by
    :class:`SuffixDrafter` and copied into the llama-cpp-python module of a suffix policy
    (:mod:`evolve.export.engines.llama_cpp_python_suffix`)."""
    best, from_cache = ask_trees(cache, tree, req, ctx, depth, factor)
    return (list(best.token_ids), np.asarray(best.probs, dtype=np.float64), int(best.match_len), float(best.score),
            from_cache)


def suffix_columns(probs: np.ndarray, match_len: int, score: float, from_cache: int) -> dict[str, np.ndarray]:
    """The suffix columns of a draft whose path probabilities are ``probs``: {column: array (k,)}.

    ``probs`` float64 (k,), ``match_len`` the match length, ``score`` the draft's score, ``from_cache`` 1 for a draft
    from the global cache (the module doc says what each column is)."""
    k = probs.size
    prev = np.concatenate(([1.0], probs[:-1])) if k else probs
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.where(prev > 0, probs / prev, 0.0)
    return {"suffix_match_len": np.full(k, int(match_len), dtype=np.int64),
            "suffix_prob": np.clip(step, math.ulp(0.0), 1.0),
            "suffix_cumprob": np.clip(probs, math.ulp(0.0), 1.0),
            "suffix_score": np.full(k, float(score)), "suffix_from_cache": np.full(k, int(from_cache), dtype=np.int64)}


class _NoModel:
    """Stands for the drafter's runner: no forward pass, no seconds."""

    seconds = 0.0


__all__ = ["BYTES_PER_TOKEN", "HARVEST_SPEC_FACTOR", "INSTALL", "MAX_CACHED", "MAX_DEPTH", "SuffixDrafter", "VERSION",
           "VLLM_CACHED", "VLLM_DEPTH", "VLLM_FACTOR", "VLLM_MIN_PROB", "ask_trees", "import_suffix", "parse_value",
           "physical_memory", "speculate_trees", "suffix_columns", "suffix_settings"]

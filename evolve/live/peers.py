"""Peers: the speculative decoding other libraries ship, decoded beside this project's rules (``benchmark.py live
--peers``).

A peer is a library (:data:`PEERS`, by name) that decodes the same prompt ids in the same process, greedily,
interleaved with this project's rows; each of its rows is one configuration, and its ``plain`` row (the library's
own decoding without speculation) is the reference of its speedups:

* ``transformers``: ``model.generate(ids, do_sample=False, prompt_lookup_num_tokens=K, max_matching_ngram_size=N)``
  (transformers' prompt lookup decoding, ``transformers/generation/candidate_generator.py``
  ``PromptLookupCandidateGenerator``; N defaults to 2 there); rows ``plain``, ``K=10`` (the value its documentation
  uses), the tuned K, and one per exported policy: its module's ``generate(model, ids, drafter=...)``
  (:mod:`evolve.export.engines.transformers_generate`: the policy's drafts as the candidates of transformers' own
  assisted-generation loop; for suffix decoding one drafter across the texts of a repeat, as below). The model is the
  target loaded as the torch backend loads it (:func:`evolve.engine.models.load_model`, float32, from the same file).
* ``llama-cpp-python``: ``Llama.generate(ids, temp=0)`` (``llama_cpp/llama.py``) with ``Llama.draft_model`` set to
  ``LlamaPromptLookupDecoding(max_ngram_size, num_pred_tokens)`` (``llama_cpp/llama_speculative.py``; defaults 2,
  10) or to an exported policy's ``PolicyPromptLookup`` (the module text of
  :mod:`evolve.export.engines.llama_cpp_python`, given by the command), or its ``PolicySuffixDecoding`` for a
  suffix-decoding run (one draft model across the texts of a repeat, each text ending with ``finish``, its cache
  started from the earlier splits' texts: :attr:`PeerRow.fresh`); rows ``plain``, default, tuned and one per
  exported policy. One ``Llama`` of the target GGUF (``logits_all=True``, which a draft model needs) serves every row;
  only its ``draft_model`` changes between rows.

One copy of the model: a peer decodes with the model this project's backend has loaded (:attr:`PeerSetup.shared`)
where it is the peer's own kind and loaded as the peer would load it (transformers: the torch backend's float32 model
on the same device, with no forward hooks on it, such as an EAGLE drafter's capture of the target's hidden states;
llama-cpp-python: the llama_cpp backend's ``Llama``, ``logits_all=True``, the same threads and a context at least as
long), so the engine's own rows cost no second copy of the weights; otherwise it loads its own. Sharing the ``Llama``
is safe because the two sides keep its ids and cache in step: the backend's rows start each text from an empty context
(:meth:`evolve.engine.llama_cpp.LlamaRunner.prefill` resets the ``Llama``) and roll it back with llama-cpp-python's
own bookkeeping, and ``Llama.generate`` reuses the cached prefix whose ids match the prompt (whichever row computed
it) and re-evaluates the rest. So a peer's text may follow a prefix the backend computed, as it followed one its
own previous row computed before; llama.cpp's batched arithmetic can then flip a near-tied greedy choice.

Timing (prefill excluded): the library's first decoding step holds the prompt's prefill, so the clock starts when
the first generated tokens are delivered (transformers: the streamer's first ``put`` of generated tokens;
llama-cpp-python: the generator's first token) and stops at the last one; ``tokens`` counts the tokens delivered
after the first step and ``target_calls`` the decoding steps after it (transformers: one ``put`` per step;
llama-cpp-python: one target evaluation per call of the draft model). So a row's tokens/s is its decoding rate after
the first step, for plain and speculative decoding alike; the first step's tokens (one for plain decoding, up to K + 1
for transformers' prompt lookup) are in the text but not in the rate.

Calls (``LiveCounts.drafted``: how many drafted tokens each of those steps verified, so a cost file timed in the
library's own loop prices the row's own calls, :mod:`evolve.live.deployed`): a plain row's steps verify none;
llama-cpp-python's are the lengths its draft model returned (the draft model wrapped in :class:`_Logged`: Llama.generate
evaluates the last token and those drafts in one call); transformers' are the lengths of the candidates its
``PromptLookupCandidateGenerator.get_candidates`` returned, logged while the row decodes (:func:`_logged_lookup`), or
the lengths an exported module's drafter returned, the first (the prefill's step) left out as the clock leaves it out. A
log of another length than the steps counted (a library whose loop calls these otherwise) leaves the row's calls
unpriced rather than priced wrong.
"""
from __future__ import annotations

import time
import types
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from evolve.engine.ngram import DEFAULT_LOOKUP
from evolve.errors import InputError
from evolve.live.decoding import LiveCounts

#: transformers' documented prompt_lookup_num_tokens; llama-cpp-python's LlamaPromptLookupDecoding defaults.
TRANSFORMERS_DEFAULT_K = 10
LLAMA_DEFAULT_NGRAM, LLAMA_DEFAULT_K = 2, 10
#: Draft lengths tried when a peer's K is tuned (:func:`tune`).
TUNE_GRID: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 8, 10)


@dataclass
class PeerRow:
    """One configuration of a peer library: ``name`` (the row's label), ``engine`` (the library), ``decode(ids,
    max_new_tokens) -> (generated ids, LiveCounts)`` and ``plain`` (the library's own plain decoding: the reference
    of the library's speedups). ``setting`` the K of a prompt-lookup row (None otherwise) and ``make(K)`` the decoder
    of the same configuration with another K (the library's default prompt-lookup row: :func:`tuned_row`);
    ``fresh()``: start the row's cache across texts again (an exported suffix-decoding policy: a new repeat starts
    from the earlier splits' texts alone, as this project's rows do); None: the row keeps nothing across texts."""

    name: str
    engine: str
    decode: Callable[[Sequence[int], int], tuple[list[int], LiveCounts]]
    plain: bool = False
    setting: int | None = None
    make: Callable[[int], Callable] | None = None
    label: str = ""
    fresh: Callable[[], None] | None = None


@dataclass(frozen=True)
class PeerSetup:
    """What the peers need: ``target`` (the model file), ``threads``, ``eos`` ids, ``n_ctx`` (tokens of context a
    llama.cpp context needs: the longest prompt + new tokens + a block), ``exported`` ((peer name, row name, module
    text) of exported policies, each written for that peer's engine: :meth:`modules`) and ``ngram`` (MAX, MIN) and
    ``gamma`` the exported drafter's settings, or ``suffix`` (tree depth, cached responses) for policies drafting by
    suffix decoding, whose cache starts from ``history`` ((prompt ids, response ids) of the earlier splits' texts, in
    order); ``device`` where transformers runs the target (llama-cpp-python runs on the cpu)."""

    target: str
    threads: int
    eos: tuple[int, ...]
    n_ctx: int
    exported: tuple = ()
    ngram: tuple[int, int] = DEFAULT_LOOKUP
    gamma: int = 5
    device: str = "cpu"
    suffix: tuple[int, int] | None = None
    history: tuple = ()
    shared: object = None

    def modules(self, peer: str) -> list[tuple[str, types.ModuleType]]:
        """(policy name, module) of every exported policy written for ``peer``, each module's text run in a module
        of its own."""
        out = []
        for engine, name, source in self.exported:
            if engine == peer:
                module = types.ModuleType(f"exported_{peer.replace('-', '_')}_{len(out)}")
                exec(compile(source, f"<exported policy {name}>", "exec"), module.__dict__)
                out.append((name, module))
        return out

    def drafter_maker(self, module) -> tuple[Callable[[int], object], Callable[[], None] | None]:
        """(``make(prompt_len)`` the exported ``module``'s drafter for the next text, started; ``fresh()`` for a
        suffix-decoding drafter kept across texts (:class:`_SuffixHeld`), else None)."""
        if self.suffix is not None:
            held = _SuffixHeld(module, self)
            return held.make, held.fresh

        def make(prompt_len):
            drafter = module.PolicyPromptLookup(self.ngram[0], self.ngram[1], self.gamma, eos_token_ids=tuple(self.eos))
            drafter.start(prompt_len)
            return drafter
        return make, None


def exported_row_name(engine: str, policy: str) -> str:
    """The row name of ``policy`` exported into ``engine`` and decoded there (``ENGINE POLICY (exported)``)."""
    return f"{engine} {policy} (exported)"


def _counts(tokens: int, seconds: float, calls: int, drafted: Sequence[int] | None) -> LiveCounts:
    """A peer row's counts of one text: ``tokens`` delivered after the first step in ``seconds`` by ``calls`` steps,
    ``drafted[i]`` the drafted tokens verified by step i after the first (None: not logged, so the row's calls are
    not priced; a log of another length than ``calls`` is taken as not logged)."""
    counts = LiveCounts(tokens=tokens, target_calls=calls, seconds=seconds, expected_tokens=float(tokens))
    if drafted is not None and len(drafted) == calls:
        for k in drafted:
            counts.drafted[int(k)] = counts.drafted.get(int(k), 0) + 1
    return counts


class _Logged:
    """A llama-cpp-python draft model's stand-in that logs how many tokens each call of ``draft`` returned."""

    def __init__(self, draft):
        self.draft, self.log = draft, []

    def __call__(self, input_ids, /, **kwargs):
        out = self.draft(input_ids, **kwargs)
        self.log.append(len(out))
        return out

    def __getattr__(self, name):  # the draft model's other methods (start, finish) and settings
        if name == "draft" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.draft, name)


@contextmanager
def _logged_lookup(log: list[int]):
    """While open, every transformers ``PromptLookupCandidateGenerator.get_candidates`` call appends the number of
    candidate tokens it returned to ``log`` (the class's method restored on leaving)."""
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator as generator

    original = generator.get_candidates

    def get_candidates(self, input_ids, *args, **kwargs):
        candidates, logits = original(self, input_ids, *args, **kwargs)
        log.append(int(candidates.shape[1] - input_ids.shape[1]))
        return candidates, logits

    generator.get_candidates = get_candidates
    try:
        yield
    finally:
        generator.get_candidates = original


class _Clock:
    """A transformers streamer timing decoding after the first step (the module doc)."""

    def __init__(self):
        self.puts, self.t0, self.t1, self.tokens = 0, None, None, 0

    def put(self, value) -> None:
        self.puts += 1
        now = time.perf_counter()
        if self.puts == 1:  # the prompt
            return
        if self.t0 is None:
            self.t0 = now
            return
        self.tokens += int(value.numel())
        self.t1 = now

    def end(self) -> None:
        pass


class Peer:
    """A peer library: ``name``, the ``package`` it imports and how to install it (:meth:`check`), and its rows."""

    name = ""
    package = ""
    install = ""

    def check(self) -> None:
        """Refuse, in one line (InputError), a peer whose package is not installed."""
        try:
            __import__(self.package)
        except ImportError:
            raise InputError(f"peer '{self.name}' needs the package {self.package}: {self.install}",
                             param="peers") from None

    def rows(self, setup: PeerSetup) -> list[PeerRow]:
        raise NotImplementedError


class TransformersPeer(Peer):
    name, package, install = "transformers", "transformers", "pip install transformers"

    def rows(self, setup: PeerSetup) -> list[PeerRow]:
        import torch

        from evolve.engine.models import load_model, resolve_model

        model = setup.shared if _float32_on(setup.shared, setup.device) else None
        if model is None:
            model = load_model(resolve_model(setup.target, "target"), "float32", setup.device).model
        model.eval()
        eos = list(setup.eos)

        def run(ids, max_new_tokens, generate, log, extra=None):
            clock = _Clock()
            with torch.inference_mode():
                ids_t = torch.tensor([list(ids)], device=setup.device)
                out = generate(ids_t, attention_mask=torch.ones_like(ids_t), max_new_tokens=max_new_tokens,
                               do_sample=False, eos_token_id=eos, pad_token_id=eos[0] if eos else None,
                               streamer=clock, **(extra or {}))
            seconds = (clock.t1 - clock.t0) if clock.t1 is not None else 0.0
            steps = max(clock.puts - 2, 0)
            drafted = [0] * steps if log is None else log[1:]  # log[0]: the prefill's step, before the clock
            return [int(t) for t in out[0, len(ids):]], _counts(clock.tokens, seconds, steps, drafted)

        def decoder(k):
            def decode(ids, max_new_tokens):
                if k is None:
                    return run(ids, max_new_tokens, model.generate, None)
                log: list[int] = []
                with _logged_lookup(log):
                    return run(ids, max_new_tokens, model.generate, log, {"prompt_lookup_num_tokens": k})
            return decode

        def exported(module, make):
            def decode(ids, max_new_tokens):
                drafter = _Logged(make(len(ids)))
                return run(ids, max_new_tokens, lambda *a, **kw: module.generate(model, *a, drafter=drafter, **kw),
                           drafter.log)
            return decode

        rows = [PeerRow("transformers plain", self.name, decoder(None), plain=True),
                PeerRow(f"transformers prompt lookup K={TRANSFORMERS_DEFAULT_K} (default)", self.name,
                        decoder(TRANSFORMERS_DEFAULT_K), setting=TRANSFORMERS_DEFAULT_K, make=decoder,
                        label="transformers prompt lookup")]
        for name, module in setup.modules(self.name):
            make, fresh = setup.drafter_maker(module)
            rows.append(PeerRow(exported_row_name(self.name, name), self.name, exported(module, make), fresh=fresh))
        return rows


class LlamaCppPythonPeer(Peer):
    name, package, install = "llama-cpp-python", "llama_cpp", "pip install 'llama-cpp-python>=0.3.36'"

    def rows(self, setup: PeerSetup) -> list[PeerRow]:
        import llama_cpp
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        if not str(setup.target).lower().endswith(".gguf"):
            raise InputError(f"peer '{self.name}' loads .gguf files only (target {setup.target})", param="peers")
        llm = setup.shared if _llama_for(setup.shared, setup) else None
        if llm is None:
            llm = llama_cpp.Llama(model_path=str(setup.target), n_ctx=setup.n_ctx, n_threads=setup.threads,
                                  n_threads_batch=setup.threads, logits_all=True, verbose=False)
        eos = set(setup.eos)

        def decoder(make_draft):
            def decode(ids, max_new_tokens):
                draft = None if make_draft is None else make_draft(len(ids))
                llm.draft_model = logged = None if draft is None else _Logged(draft)
                out, t0, t1 = [], None, None
                for tok in llm.generate(list(ids), temp=0.0, repeat_penalty=1.0):
                    out.append(int(tok))
                    t1 = time.perf_counter()
                    if t0 is None:
                        t0 = t1
                    if len(out) >= max_new_tokens or tok in eos:
                        break
                llm.draft_model = None
                if hasattr(draft, "finish"):  # a cache across texts: the whole text joins it
                    draft.finish(list(ids) + out)
                tokens = max(len(out) - 1, 0)
                drafted = [0] * tokens if logged is None else logged.log  # plain: one call per token, none drafted
                return out, _counts(tokens, (t1 - t0) if out else 0.0, len(drafted), drafted)
            return decode

        def lookup(k, n=LLAMA_DEFAULT_NGRAM):
            return lambda prompt_len: LlamaPromptLookupDecoding(max_ngram_size=n, num_pred_tokens=k)

        rows = [PeerRow("llama-cpp-python plain", self.name, decoder(None), plain=True),
                PeerRow(f"llama-cpp-python prompt lookup K={LLAMA_DEFAULT_K} (default)", self.name,
                        decoder(lookup(LLAMA_DEFAULT_K)), setting=LLAMA_DEFAULT_K,
                        make=lambda k: decoder(lookup(k)), label="llama-cpp-python prompt lookup")]
        for name, module in setup.modules(self.name):
            make, fresh = setup.drafter_maker(module)
            rows.append(PeerRow(exported_row_name(self.name, name), self.name, decoder(make), fresh=fresh))
        return rows


def _float32_on(model, device: str) -> bool:
    """Whether ``model`` is a torch module whose parameters are float32 on ``device`` and on which no forward hook is
    registered (as transformers' peer loads its target: a hook, e.g. an EAGLE drafter's, would run in its loop)."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return False
    param, want = next(model.parameters(), None), torch.device(device)
    hooked = any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    return (param is not None and not hooked and param.dtype == torch.float32 and param.device.type == want.type
            and want.index in (None, param.device.index))


def _llama_for(llm, setup: PeerSetup) -> bool:
    """Whether ``llm`` is a ``llama_cpp.Llama`` the llama-cpp-python peer can decode ``setup``'s texts with as if it
    had loaded it: every position's logits kept, ``setup.threads`` threads, at least ``setup.n_ctx`` of context."""
    import llama_cpp

    return (isinstance(llm, llama_cpp.Llama) and bool(getattr(llm, "_logits_all", False))
            and getattr(llm, "n_threads", None) == setup.threads
            and getattr(llm, "n_threads_batch", None) == setup.threads and llm.n_ctx() >= setup.n_ctx)


class _SuffixHeld:
    """An exported suffix-decoding policy's draft model kept across the texts of one repeat (``make(prompt_len)`` the
    model for the next text); ``fresh()`` a new one whose cache holds the earlier splits' texts (``setup.history``)."""

    def __init__(self, module, setup: PeerSetup):
        self.module, self.setup, self.model = module, setup, None

    def fresh(self) -> None:
        depth, cached = self.setup.suffix
        self.model = self.module.PolicySuffixDecoding(depth, cached, self.setup.gamma,
                                                      eos_token_ids=tuple(self.setup.eos))
        for prompt_ids, response_ids in self.setup.history:
            self.model.warm(prompt_ids, response_ids)

    def make(self, prompt_len: int):
        if self.model is None:
            self.fresh()
        self.model.start(prompt_len)
        return self.model


#: The peers by name (``--peers NAME,...``).
PEERS: dict[str, Peer] = {p.name: p for p in (TransformersPeer(), LlamaCppPythonPeer())}
#: The engine whose own plain decoding every live table prints beside this project's backend's (``benchmark.py live``
#: without ``--no-engine-plain``): backend name -> peer name.
BACKEND_PEERS = {"torch": "transformers", "llama_cpp": "llama-cpp-python"}


def engine_plain_row(peer: Peer, setup: PeerSetup) -> PeerRow:
    """The plain decoding row of ``peer`` (the library's own decoding without speculation), alone."""
    return next(row for row in peer.rows(replace(setup, exported=())) if row.plain)


def peers_named(names: Sequence[str]) -> list[Peer]:
    """The peers ``names`` (in :data:`PEERS` order), each checked installed. Raises InputError (one line) for an
    unknown name or a missing package."""
    for name in names:
        if name not in PEERS:
            raise InputError(f"unknown peer '{name}' (choose from {', '.join(PEERS)})", param="peers")
    chosen = [p for n, p in PEERS.items() if n in names]
    for peer in chosen:
        peer.check()
    return chosen


def peer_rows(peers: Sequence[Peer], setup: PeerSetup, baseline: str | None, peer_k: dict[str, int],
              tune_prompts: Sequence[Sequence[int]], max_new_tokens: int) -> list[PeerRow]:
    """The rows ``peers`` decode on ``setup``, in order, each prompt-lookup row followed by its tuned row (K from
    ``peer_k`` {peer name: K}, else tuned on the token ids ``tune_prompts`` where given, :func:`tune`), after the
    plain row of the engine ``baseline`` (a peer name: its own plain decoding beside ours whatever the peers; None:
    none)."""
    rows = [engine_plain_row(PEERS[baseline], setup)] if baseline is not None else []
    for peer in peers:
        found = peer.rows(setup)
        for row in list(found):
            if row.make is None:
                continue
            k = peer_k.get(peer.name)
            if k is None and tune_prompts:
                k = tune(row, tune_prompts, max_new_tokens)
            if k is not None:
                found.insert(found.index(row) + 1, tuned_row(row, k))
        rows += found
    return rows


def tuned_row(row: PeerRow, k: int) -> PeerRow:
    """The configuration of the tunable ``row`` (its ``make``) with draft length ``k``, labelled tuned."""
    return PeerRow(f"{row.label} K={int(k)} (tuned)", row.engine, row.make(int(k)), setting=int(k))


def tune(row: PeerRow, prompts: Sequence[Sequence[int]], max_new_tokens: int,
         grid: Sequence[int] = TUNE_GRID) -> int:
    """The K of ``grid`` at which the prompt-lookup configuration of ``row``'s library (``row.make(K)`` a decoder)
    decodes ``prompts`` (token ids: a valid set, not the measured one) fastest, in tokens per second of decoding
    (tokens / seconds summed over the prompts; one decode each)."""
    best, best_rate = grid[0], -1.0
    for k in grid:
        decode = row.make(k)
        total = LiveCounts()
        for ids in prompts:
            total.add(decode(ids, max_new_tokens)[1])
        if total.tokens_per_s > best_rate:
            best, best_rate = k, total.tokens_per_s
    return best


__all__ = ["BACKEND_PEERS", "LLAMA_DEFAULT_K", "LLAMA_DEFAULT_NGRAM", "PEERS", "Peer", "PeerRow", "PeerSetup",
           "TRANSFORMERS_DEFAULT_K", "TUNE_GRID", "engine_plain_row", "exported_row_name", "peer_rows", "peers_named", "tune",
           "tuned_row"]

"""The llama.cpp backend (llama-cpp-python): target and draft forward passes on a GGUF model's own kernels.

The torch backend (:mod:`evolve.engine.runner`) dequantises a GGUF file into float32 torch weights;
this backend runs the file as it is (quantised matrix products, llama.cpp's KV cache), which on a
CPU makes a forward over a few new tokens several times cheaper (docs/results/backends.md). It offers the
interface the decode loops use from the torch runner:

* :class:`LlamaRunner` (``run(kv, feeds, n_logits)``, ``run.prefill(ids)``, ``run.seconds``,
  ``run.new_kv(batch)``) evaluates the new tokens with ``Llama.eval`` (``logits_all=True``) and
  returns float32 torch logits (1, n_logits, V) for the last ``n_logits`` fed positions, so the
  distributions, sampling and records are the torch backend's code;
* :class:`LlamaKV` mirrors :class:`evolve.engine.runner.BatchKV` for one row: ``lengths``,
  ``truncate``, ``compact``, ``place``, ``clear``. The cache itself lives in the llama.cpp context;
  a truncation only lowers ``lengths[0]`` and the next pass removes the rejected positions
  (``Llama.n_tokens`` and ``kv_cache_seq_rm``, i.e. ``llama_memory_seq_rm``) before it appends;
* :class:`LlamaModelDrafter`: the model drafter (a second GGUF with its own context);
* :class:`LlamaCppBackend`: the backend itself (name ``llama_cpp``), its entry in :mod:`evolve.engine.backends`.

One context holds one sequence, so the backend decodes one text at a time (batch size 1) and
supports the model drafter only: llama.cpp cannot skip decoder layers or mask attention per
query, so ``skip_layers`` and ``window`` are refused (:func:`check_config`). Models with a recurrent
state (Mamba-style, hybrids) are refused: their cache cannot be rolled back.

llama-cpp-python is the optional extra ``llama`` (it compiles llama.cpp; about 7 minutes on 2
cores); it is imported only when a model is loaded.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

from evolve.errors import InputError
from evolve.engine.backend_base import Backend
from evolve.engine.drafter_base import Drafter
from evolve.engine.model_drafter import ModelDrafter
from evolve.engine.models import LoadedModel, ModelSource, _short, _torch, quiet_loading

NAME = "llama_cpp"
INSTALL = "pip install 'llama-cpp-python>=0.3.36' (or pip install -e '.[llama]'; it compiles llama.cpp)"
#: Context size (tokens) of a loaded model: prompt + generated tokens + one block must fit.
DEFAULT_N_CTX = 4096


def import_llama():
    """The ``llama_cpp`` module, or InputError (one line) naming the backend and the install command."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise InputError(f"backend '{NAME}' needs the package llama-cpp-python: {INSTALL} ({_short(exc)})",
                         param="backend") from None
    return llama_cpp


def check_config(config) -> None:
    """Refuse what this backend cannot run, in one line naming the option (before anything is loaded):
    every drafter but the model drafter and those that run no model (prompt lookup; skip-layers, window,
    early exit are refused, with the reason the drafter gives in its ``unsupported``), a batch size above
    1, a device other than cpu, a target or draft model that is not a .gguf file."""
    from evolve.engine.drafters import DRAFTERS, chosen_drafters

    chosen = chosen_drafters(config)
    if not chosen or not (chosen[0].draft_model or chosen[0].model_free):
        model = next(d for d in DRAFTERS if d.draft_model)
        drafter, field = (chosen[0].name, chosen[0].field) if chosen else ("none", model.field)
        why = chosen[0].unsupported.get(NAME) if chosen else None
        why = why or "only the model drafter and the drafters without a model run on llama.cpp"
        raise InputError(f"drafter '{drafter}' is not supported by backend '{NAME}' ({why}); use a draft model "
                         f"(a second GGUF), prompt lookup or the torch backend", param=field)
    if config.batch_size != 1:
        raise InputError(f"backend '{NAME}' decodes one text at a time (value {config.batch_size}); use 1 or the "
                         f"torch backend", param="batch_size")
    if config.device != "cpu":
        raise InputError(f"backend '{NAME}' runs on the cpu only (value {config.device})", param="device")
    for param, path in (("target", config.target), *((d.field, config.draft_model) for d in chosen if d.draft_model)):
        if path is not None and not str(path).lower().endswith(".gguf"):
            raise InputError(f"{path}: backend '{NAME}' loads .gguf files only", param=param)


class LlamaKV:
    """The cached length of the one text a llama.cpp context holds (see the module doc).

    ``owner`` is the runner whose context holds the cache and ``epoch`` its prefill count when the
    text was placed: a cache used after another prefill of the same context is an error.
    """

    def __init__(self, owner: "LlamaRunner", batch: int = 1):
        if batch != 1:
            raise InputError(f"backend '{NAME}' decodes one text at a time (batch {batch})", param="batch_size")
        self.owner = owner
        self.batch = 1
        self.device = "cpu"
        self.lengths = [0]
        self.epoch = -1

    @property
    def slots(self) -> int:
        return self.lengths[0]

    def complete(self) -> bool:
        return True

    def truncate(self, row: int, length: int) -> None:
        """Keep only positions < ``length`` (the context drops the others before the next pass)."""
        self.lengths[row] = min(self.lengths[row], length)

    def clear(self, row: int) -> None:
        self.truncate(row, 0)

    def compact(self) -> None:
        """Nothing to gather: the valid positions are always 0..length-1."""

    def crop(self, slots: int, lengths: Sequence[int]) -> None:
        self.lengths = [min(int(lengths[0]), slots)]

    def place(self, row: int, prefill, length: int) -> None:
        """Take the text :meth:`LlamaRunner.prefill` has just put into the context (``prefill`` its
        epoch, or None for an empty prefill) with ``length`` cached tokens."""
        self.lengths[row] = length
        self.epoch = self.owner.epoch if prefill is None else int(prefill)


class LlamaRunner:
    """Forward passes of a llama.cpp model (``llama_cpp.Llama`` with ``logits_all=True``); see the module doc.

    Args: ``llm`` the Llama object, ``vocab`` V (logits kept). ``seconds`` accumulates the wall time
    of the passes.
    """

    def __init__(self, llm, vocab: int):
        self.llm = llm
        self.vocab = vocab
        self.seconds = 0.0
        self.epoch = 0

    def new_kv(self, batch: int = 1) -> LlamaKV:
        """An empty cache view of this runner's context."""
        kv = LlamaKV(self, batch)
        kv.epoch = self.epoch
        return kv

    def rollback(self, length: int) -> None:
        """Drop every cached position from ``length`` on (``llama_memory_seq_rm``)."""
        llm = self.llm
        if length > llm.n_tokens:
            raise RuntimeError(f"llama.cpp context holds {llm.n_tokens} tokens, cannot roll forward to {length}")
        if length < llm.n_tokens:
            llm._ctx.kv_cache_seq_rm(-1, length, -1)
            llm.n_tokens = length

    def _eval(self, ids: Sequence[int]) -> None:
        need = self.llm.n_tokens + len(ids)
        if need > self.llm.n_ctx():
            raise InputError(f"a text needs {need} tokens of context, more than the llama.cpp context of "
                             f"{self.llm.n_ctx()}; generate fewer tokens or shorten the prompt", param="max_new_tokens")
        t0 = time.perf_counter()
        try:
            self.llm.eval(list(ids))
        finally:
            self.seconds += time.perf_counter() - t0

    def prefill(self, ids: Sequence[int]):
        """Empty the context and evaluate ``ids`` (positions 0..); returns the token for :meth:`LlamaKV.place`
        (None for no ids)."""
        self.epoch += 1
        self.rollback(0)
        self.llm.reset()
        if not ids:
            return None
        self._eval(ids)
        return self.epoch

    def __call__(self, kv: LlamaKV, feeds: Sequence[Sequence[int]], n_logits: int, allowed=None):
        """Append ``feeds[0]`` to the text of ``kv``; return float32 torch logits (1, n_logits, V) of its last
        ``n_logits`` fed positions (None when nothing is fed)."""
        import torch

        if allowed is not None:
            raise InputError(f"backend '{NAME}' cannot restrict attention (self-speculation drafters)")
        if len(feeds) != 1:
            raise InputError(f"backend '{NAME}' decodes one text at a time (batch {len(feeds)})", param="batch_size")
        if kv.owner is not self or kv.epoch != self.epoch:
            raise RuntimeError("a llama.cpp cache view used after its context was prefilled with another text")
        feed = list(feeds[0])
        if not feed:
            return None
        start = kv.lengths[0]
        self.rollback(start)
        self._eval(feed)
        kv.lengths[0] = start + len(feed)
        n = max(1, n_logits)
        rows = self.llm.scores[start + len(feed) - n:start + len(feed), : self.vocab]
        return torch.from_numpy(rows.copy())[None]


def load_llama(source: ModelSource, threads: int | None = None, n_ctx: int = DEFAULT_N_CTX) -> LoadedModel:
    """Load a GGUF file with llama.cpp (``logits_all=True``) and its tokenizer with transformers (read from
    the same file; offline). ``model`` of the result is the ``llama_cpp.Llama`` object.

    Raises: InputError (one line) when llama-cpp-python is missing, the file is not a GGUF model llama.cpp
    loads, or the model keeps a recurrent state.
    """
    llama_cpp = import_llama()
    if source.file_format != "gguf":
        raise InputError(f"{source.path}: backend '{NAME}' loads .gguf files only", param=source.param)
    _, transformers = _torch()
    kwargs: dict[str, Any] = {"n_ctx": n_ctx, "logits_all": True, "verbose": False}
    if threads is not None:
        kwargs.update(n_threads=threads, n_threads_batch=threads)
    try:
        llm = llama_cpp.Llama(model_path=str(source.path), **kwargs)
    except Exception as exc:  # llama-cpp-python raises ValueError/RuntimeError/OSError
        raise InputError(f"{source.path}: llama.cpp cannot load the model ({_short(exc)})",
                         param=source.param) from None
    if getattr(llm, "_is_recurrent", False) or getattr(llm, "_is_hybrid", False):
        raise InputError(f"{source.path}: the model keeps a recurrent state that cannot be rolled back after a "
                         f"rejected draft; only attention models are supported", param=source.param)
    try:
        with quiet_loading():
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(source.load_dir), gguf_file=source.path.name,
                                                                   local_files_only=True)
    except Exception as exc:
        raise InputError(f"{source.path}: cannot load the tokenizer ({_short(exc)})", param=source.param) from None
    return LoadedModel(source, llm, tokenizer, int(llm.n_vocab()))


def set_threads(llm, threads: int) -> None:
    """Make a loaded ``Llama`` use ``threads`` threads for single-token and batched passes."""
    llm._ctx.set_n_threads(threads, threads)


def architecture(loaded: LoadedModel) -> str:
    """The GGUF's ``general.architecture`` (e.g. ``llama``)."""
    return str(getattr(loaded.model, "metadata", {}).get("general.architecture", "unknown"))


class LlamaModelDrafter(ModelDrafter):
    """The model drafter on llama.cpp: a second GGUF sharing the target's tokenizer, in its own context."""

    def __init__(self, loaded: LoadedModel, vocab: int, device: str = "cpu"):
        Drafter.__init__(self)
        self.loaded = loaded
        self.device = device
        self.run = LlamaRunner(loaded.model, vocab)

    def settings(self) -> dict[str, Any]:
        return {"kind": self.name, "path": str(self.loaded.source.path), "format": self.loaded.source.file_format,
                "architecture": architecture(self.loaded), "backend": NAME}

    def start(self, engine, batch, row):
        ctx = batch.rows[row].ctx
        batch.draft_kv = self.run.new_kv(1)
        batch.draft_kv.place(row, self.run.prefill(ctx[:-1]), len(ctx) - 1)


class LlamaCppBackend(Backend):
    """llama.cpp through llama-cpp-python (this module; the optional extra ``llama``)."""

    name = "llama_cpp"
    help = ("a .gguf on llama.cpp's kernels, the optional extra 'llama'; --draft or --draft-ngram, one text at a "
            "time")
    grows_trees = False

    def check(self, config) -> None:
        check_config(config)

    def load(self, source, config):
        from evolve.engine.threads import default_threads

        return load_llama(source, config.threads if config.threads is not None else default_threads())

    def check_rollback(self, loaded) -> None:
        """Done by :func:`load_llama` (recurrent models are refused there)."""

    def threads(self, config) -> int:
        from evolve.engine.threads import default_threads

        return config.threads if config.threads is not None else default_threads()

    def architecture(self, loaded) -> str:
        return architecture(loaded)

    def runner(self, loaded, vocab: int, config):
        return LlamaRunner(loaded.model, vocab)

    def drafter(self, config, draft, vocab: int):
        check_config(config)
        return LlamaModelDrafter(draft, vocab) if draft is not None else None  # None: a model-free drafter

"""Backends: what runs the models' forward passes (``--backend`` of ``generate_data.py harvest`` and
``benchmark.py live``).

A backend loads a model (:meth:`Backend.load`), checks that its cache can be rolled back, makes the
target's runner (``run(kv, feeds, n_logits)`` returning torch logits, ``run.prefill``, ``run.seconds``;
a runner with ``new_kv(batch)`` brings its own cache view, else :class:`evolve.engine.runner.BatchKV`)
and, when it has its own, the drafter (None: the torch drafters of :mod:`evolve.engine.drafters`). The decode loops (:mod:`evolve.harvest.loop`, :mod:`evolve.live.decoding`) are the
same for every backend.

* ``torch``: transformers models in torch (:mod:`evolve.engine.runner`; GGUF files dequantised), every
  drafter, batches;
* ``llama_cpp``: GGUF files on llama.cpp's own kernels (:mod:`evolve.engine.llama_cpp`; the optional
  extra ``llama``), the model drafter, one text at a time.

Adding a backend is one module with a :class:`Backend` subclass (its ``name`` and ``help``, the text of
``--backend``'s help) and one entry in :data:`BACKENDS`; the commands read the registry (choices and
help of ``--backend``), and a drafter names the backends that cannot run it (its ``unsupported``).
Nothing heavy is imported here: torch and llama_cpp are imported when a model is loaded.
"""
from __future__ import annotations

from typing import Any

from evolve.errors import InputError


class Backend:
    """The torch backend; the base class of the others (see the module doc)."""

    name = "torch"
    #: What it is, for ``--backend``'s help (what runs, which drafters, batches).
    help = "transformers; every drafter, batches"
    #: Whether a tree harvest can run on it (tree attention over a draft tree: :meth:`Runner.tree`).
    grows_trees = True

    def check(self, config) -> None:
        """Refuse, in one line naming the option, what the backend cannot run (before loading anything): here a
        drafter that names this backend in its ``unsupported`` (with the reason it gives)."""
        from evolve.engine.drafters import chosen_drafters

        for d in chosen_drafters(config):
            if self.name in d.unsupported:
                raise InputError(f"drafter '{d.name}' is not supported by backend '{self.name}' "
                                 f"({d.unsupported[self.name]})", param=d.field)

    def load(self, source, config):
        """Load a resolved model (:class:`evolve.engine.models.ModelSource`) for ``config`` (a HarvestConfig)."""
        from evolve.engine.models import load_model

        return load_model(source, config.dtype, config.device)

    def check_rollback(self, loaded) -> None:
        """Refuse a model whose cache cannot be rolled back after a rejected draft."""
        from evolve.engine.models import check_rollback

        check_rollback(loaded)

    def architecture(self, loaded) -> str:
        return loaded.architecture

    def runner(self, loaded, vocab: int, config):
        """The target's runner."""
        from evolve.engine.runner import Runner

        return Runner(loaded.model, vocab, config.device)

    def threads(self, config) -> int:
        """The CPU threads the models run on (after :func:`evolve.harvest.loop.build`)."""
        import torch

        return torch.get_num_threads()

    def drafter(self, config, draft, vocab: int):
        """The backend's own drafter for ``config`` (``draft``: the loaded draft model or None), or None:
        the torch drafters (:mod:`evolve.engine.drafters`, built by the harvest's ``build``)."""
        return None


class LlamaCppBackend(Backend):
    """llama.cpp through llama-cpp-python (:mod:`evolve.engine.llama_cpp`)."""

    name = "llama_cpp"
    help = ("a .gguf on llama.cpp's kernels, the optional extra 'llama'; --draft or --draft-ngram, one text at a "
            "time")
    grows_trees = False

    def check(self, config) -> None:
        from evolve.engine.llama_cpp import check_config

        check_config(config)

    def load(self, source, config):
        from evolve.engine.llama_cpp import load_llama
        from evolve.engine.threads import default_threads

        return load_llama(source, config.threads if config.threads is not None else default_threads())

    def check_rollback(self, loaded) -> None:
        """Done by :func:`evolve.engine.llama_cpp.load_llama` (recurrent models are refused there)."""

    def threads(self, config) -> int:
        from evolve.engine.threads import default_threads

        return config.threads if config.threads is not None else default_threads()

    def architecture(self, loaded) -> str:
        from evolve.engine.llama_cpp import architecture

        return architecture(loaded)

    def runner(self, loaded, vocab: int, config):
        from evolve.engine.llama_cpp import LlamaRunner

        return LlamaRunner(loaded.model, vocab)

    def drafter(self, config, draft, vocab: int):
        from evolve.engine.llama_cpp import LlamaModelDrafter, check_config

        check_config(config)
        return LlamaModelDrafter(draft, vocab) if draft is not None else None  # None: a model-free drafter


#: name -> backend class, in the order the command line lists them (read it live).
BACKENDS: dict[str, type[Backend]] = {"torch": Backend, "llama_cpp": LlamaCppBackend}


def backend_names() -> tuple[str, ...]:
    """The backends' names, in the order the command line lists them."""
    return tuple(BACKENDS)


def backends_help() -> str:
    """``--backend``'s help, from every backend's ``help``: "What runs the models: torch (...) or llama_cpp (...)."."""
    items = [f"{name} ({cls.help})" for name, cls in BACKENDS.items()]
    listed = items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]
    return f"What runs the models: {listed}."


def get_backend(name: str) -> Any:
    """The backend called ``name``. Raises InputError (param ``backend``) for an unknown name."""
    if name not in BACKENDS:
        raise InputError(f"unknown backend '{name}' (choose from {', '.join(backend_names())})", param="backend")
    return BACKENDS[name]()

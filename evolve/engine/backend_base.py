"""The backend contract, and the torch backend that is also its base class: what runs the models' forward passes
(the backends' registry, the ``--backend`` option's choices, is :mod:`evolve.engine.backends`).

A backend loads a model (:meth:`Backend.load`), checks that its cache can be rolled back, makes the
target's runner (``run(kv, feeds, n_logits)`` returning torch logits, ``run.prefill``, ``run.seconds``;
a runner with ``new_kv(batch)`` brings its own cache view, else :class:`evolve.engine.runner.BatchKV`)
and, when it has its own, the drafter (None: the torch drafters of :mod:`evolve.engine.drafters`).
``torch``: transformers models in torch (:mod:`evolve.engine.runner`; GGUF files dequantised), every drafter,
batches. Nothing heavy is imported here: torch is imported when a model is loaded.
"""
from __future__ import annotations

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


__all__ = ["Backend"]

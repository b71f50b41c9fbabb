"""The backends' registry: what runs the models' forward passes (``--backend`` of ``generate_data.py harvest`` and
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

Adding a backend is one module with a :class:`evolve.engine.backend_base.Backend` subclass (its ``name`` and ``help``, the text of
``--backend``'s help) and one entry in :data:`BACKENDS`; the commands read the registry (choices and
help of ``--backend``), and a drafter names the backends that cannot run it (its ``unsupported``).
Nothing heavy is imported here: torch and llama_cpp are imported when a model is loaded.
"""
from __future__ import annotations

from typing import Any

from evolve.engine.backend_base import Backend
from evolve.engine.llama_cpp import LlamaCppBackend
from evolve.errors import InputError


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

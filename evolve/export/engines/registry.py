"""The engine targets of ``python -m evolve export --to NAME`` by name (:data:`ENGINES`), and :func:`register_engine`.

A new engine is one module defining an :class:`evolve.export.engines.base.Engine` (conventionally ``ENGINE``) and one
line in :data:`BUILTIN`; an engine defined elsewhere is added at run time with :func:`register_engine`.
"""
from __future__ import annotations

from evolve.export.engines.base import Engine
from evolve.export.engines.llama_cpp import ENGINE as LLAMA_CPP
from evolve.export.engines.sglang import ENGINE as SGLANG
from evolve.export.engines.tensorrt_llm import ENGINE as TENSORRT_LLM
from evolve.export.engines.transformers import ENGINE as TRANSFORMERS
from evolve.export.engines.vllm import ENGINE as VLLM

#: The built-in engines, in the order the command lists them (one line per engine).
BUILTIN: tuple[Engine, ...] = (VLLM, SGLANG, TENSORRT_LLM, LLAMA_CPP, TRANSFORMERS)
#: The registered engines by name.
ENGINES: dict[str, Engine] = {e.name: e for e in BUILTIN}


def register_engine(engine: Engine) -> Engine:
    """Add ``engine`` to :data:`ENGINES`. Raises ValueError if another engine of that name is registered."""
    if ENGINES.get(engine.name, engine) is not engine:
        raise ValueError(f"an engine named {engine.name!r} is registered already")
    ENGINES[engine.name] = engine
    return engine


__all__ = ["BUILTIN", "ENGINES", "register_engine"]

"""The engine targets of ``python -m evolve export --to NAME`` by name (:data:`ENGINES`, each at its newest checked
version), every checked version of each (:data:`VERSIONS`, chosen with ``--engine-version``), and
:func:`register_engine`.

A new engine is one module defining an :class:`evolve.export.engines.base.Engine` (conventionally ``ENGINE``) and one
line in :data:`BUILTIN`; a newly checked version of an engine is one more :class:`evolve.export.engines.base.Engine`
of the same name with its own ``version`` and capabilities, registered after the older ones; an engine defined
elsewhere is added at run time with :func:`register_engine`.
"""
from __future__ import annotations

from evolve.errors import InputError
from evolve.export.engines.base import Engine
from evolve.export.engines.llama_cpp import ENGINE as LLAMA_CPP
from evolve.export.engines.sglang import ENGINE as SGLANG
from evolve.export.engines.tensorrt_llm import ENGINE as TENSORRT_LLM
from evolve.export.engines.transformers import ENGINE as TRANSFORMERS
from evolve.export.engines.vllm import ENGINE as VLLM

#: The built-in engines, in the order the command lists them (one line per engine version, oldest first).
BUILTIN: tuple[Engine, ...] = (VLLM, SGLANG, TENSORRT_LLM, LLAMA_CPP, TRANSFORMERS)
#: The registered engines by name, each at its newest checked version.
ENGINES: dict[str, Engine] = {}
#: Every checked version of each registered engine: name -> {version: engine}, oldest first.
VERSIONS: dict[str, dict[str, Engine]] = {}


def register_engine(engine: Engine) -> Engine:
    """Add ``engine`` (as the newest checked version of its name) to :data:`ENGINES` and :data:`VERSIONS`.
    Raises ValueError if that name and version is registered already."""
    versions = VERSIONS.setdefault(engine.name, {})
    if versions.get(engine.version, engine) is not engine:
        raise ValueError(f"an engine named {engine.name!r} is registered already at version {engine.version!r}")
    versions[engine.version] = engine
    ENGINES[engine.name] = engine
    return engine


def unregister_engine(name: str) -> None:
    """Remove every version of the engine ``name`` (a test's engine)."""
    ENGINES.pop(name, None)
    VERSIONS.pop(name, None)


def version_forms(version: str) -> set[str]:
    """The forms a user may name the checked ``version`` by (lower case): the whole text, and each of its words
    outside and inside parentheses, and the parenthesised text (``0c1e570 (llama-cpp-python 0.3.36)``: also
    ``0c1e570``, ``llama-cpp-python 0.3.36`` and ``0.3.36``; ``source 0004396``: also ``0004396``), of the words
    those holding a digit."""
    text = version.strip().lower()
    forms = {text}
    inner = text[text.find("(") + 1:text.rfind(")")].strip() if "(" in text and ")" in text else ""
    if inner:
        forms.add(inner)
    forms |= {w.strip("()") for w in text.split() if any(c.isdigit() for c in w)}
    return forms


def engine_at(name: str, version: str | None = None) -> Engine:
    """The engine ``name`` at the checked ``version`` (None: its newest), named by any of its
    :func:`version_forms` (case aside).

    Raises: InputError (param ``engine_version``) naming the checked versions for another version, or for a form
    that names several."""
    if version is None:
        return ENGINES[name]
    found = VERSIONS[name].get(version)
    if found is not None:
        return found
    matches = [e for v, e in VERSIONS[name].items() if version.strip().lower() in version_forms(v)]
    if len(matches) == 1:
        return matches[0]
    raise InputError(f"{ENGINES[name].title} was checked at {', '.join(VERSIONS[name])} only (value {version!r}"
                     f"{'; it names several' if matches else ''})", param="engine_version")


for _engine in BUILTIN:
    register_engine(_engine)

__all__ = ["BUILTIN", "ENGINES", "VERSIONS", "engine_at", "register_engine", "unregister_engine", "version_forms"]

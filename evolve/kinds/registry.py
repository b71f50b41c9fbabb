"""The registered kinds of program (:data:`KINDS`) and how to find one by name.

Adding a built-in kind is one package under :mod:`evolve.kinds` and one line in :data:`BUILTIN_PACKAGES`; a kind
defined elsewhere (a user's, or a test's) is added at run time with :func:`register_kind`. The kind is written into
every champion file (key ``kind``) and run document; each command asks the kind for its hook
(:meth:`evolve.kinds.base.ProgramKind.hook`) and refuses in one line naming the commands that can run it.

The registry names the built-in kinds' packages and imports them by name when it is first imported (each package's
``KIND`` is its :class:`evolve.kinds.base.ProgramKind`), as a plugin registry loads its plugins: a kind's package sits
above every shared layer (its hooks use them), so no shared module imports it; shared code reaches a kind through
this registry only, and names none but the default kind (:data:`DEFAULT_KIND`, the per-token threshold).
"""
from __future__ import annotations

import importlib
from typing import Any, Mapping

from evolve.errors import InputError
from evolve.kinds.base import KindHooks, ProgramKind, forget_hooks, set_hooks

#: The packages of the built-in kinds, in the order commands list them (one line per kind).
BUILTIN_PACKAGES: tuple[str, ...] = ("evolve.kinds.threshold", "evolve.kinds.relaxation", "evolve.kinds.verify_length",
                                     "evolve.kinds.tree_shape")
#: The built-in kinds (each package's ``KIND``), in that order.
BUILTIN: tuple[ProgramKind, ...] = tuple(importlib.import_module(name).KIND for name in BUILTIN_PACKAGES)
#: The registered kinds by name.
KINDS: dict[str, ProgramKind] = {k.name: k for k in BUILTIN}
#: The default kind: a per-token acceptance threshold (a rule or champion that names no kind is one).
DEFAULT_KIND: ProgramKind = BUILTIN[0]


def register_kind(kind: ProgramKind, hooks: KindHooks | None = None) -> ProgramKind:
    """Add ``kind`` to :data:`KINDS` (with ``hooks``; None: from its ``plugin`` module on first use).

    Raises: ValueError if another kind of that name is registered.
    """
    if KINDS.get(kind.name, kind) is not kind:
        raise ValueError(f"a kind named {kind.name!r} is registered already")
    KINDS[kind.name] = kind
    if hooks is not None:
        set_hooks(kind, hooks)
    return kind


def unregister_kind(kind: ProgramKind) -> None:
    """Remove ``kind`` (registered with :func:`register_kind`); a built-in kind cannot be removed.

    Raises: ValueError for a built-in kind.
    """
    if kind in BUILTIN:
        raise ValueError(f"{kind.name!r} is a built-in kind")
    if KINDS.get(kind.name) is kind:
        del KINDS[kind.name]
        forget_hooks(kind)


def program_kind(name: Any, what: str = "kind") -> ProgramKind:
    """The registered kind called ``name``. Raises InputError naming ``what`` for an unknown one."""
    if isinstance(name, ProgramKind):
        return name
    if not isinstance(name, str) or name not in KINDS:
        raise InputError(f"{what}: unknown kind of program {name!r} (known: {', '.join(KINDS)})")
    return KINDS[name]


#: The kinds older run configurations named by ``verify``: ``token`` programs were thresholds, ``block``
#: programs relaxation weights.
LEGACY_VERIFY: dict[str, str] = {"token": "threshold", "block": "relaxation"}


def kind_from_config(config: Mapping[str, Any] | None) -> ProgramKind:
    """The kind of program a run configuration evolved (its ``evolve`` key; before that key existed,
    ``verify = "block"`` meant relaxation weights). Unknown or missing values give ``threshold``."""
    if not isinstance(config, Mapping):
        return DEFAULT_KIND
    name = config.get("evolve")
    if isinstance(name, str) and name in KINDS:
        return KINDS[name]
    return KINDS[LEGACY_VERIFY.get(config.get("verify"), DEFAULT_KIND.name)]


__all__ = ["BUILTIN_PACKAGES", "BUILTIN", "KINDS", "DEFAULT_KIND", "register_kind", "unregister_kind", "program_kind", "LEGACY_VERIFY",
           "kind_from_config"]

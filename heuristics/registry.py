"""The registry of acceptance rules by name, assembled explicitly in one place.

Order of the registered rules (and of ``benchmark.py``'s table):

1. the baselines (:data:`heuristics.baselines.BASELINES`, the standard rule first);
2. the default rule of every published family (:data:`heuristics.published.PUBLISHED`,
   in :data:`heuristics.published.FAMILIES` order; the ``standard`` family's rule is
   the baseline ``standard_rejection`` and is listed once);
3. only when asked (``champions=True``): the promoted champions of the champions
   directory (:func:`heuristics.champions.list_champions`, sorted by file name),
   read afresh on every call so that a newly promoted champion is seen.

Nothing registers itself on import: the modules above define plain data, and
this module builds :data:`REGISTRY` from it once. Every command resolves rules
here: the comparison table, ``simulate --rule``, ``pareto --rule``, and the
search's ``include_standard`` (:data:`STANDARD_EXPRESSION`).
"""
from __future__ import annotations

import os
from typing import Iterable

from data.errors import InputError
from heuristics.baselines import BASELINES
from heuristics.champions import list_champions
from heuristics.contract import Rule
from heuristics.published import FAMILIES, PUBLISHED, Family

#: Name of the lossless reference rule, min(1, p/q).
STANDARD_NAME = "standard_rejection"


def builtin_rules() -> tuple[Rule, ...]:
    """The built-in rules in registry order: baselines, then the published families' defaults."""
    return (*BASELINES, *PUBLISHED)


def assemble(rules: Iterable[Rule]) -> dict[str, Rule]:
    """``{name: rule}`` in the given order. Raises ValueError when two rules share a name."""
    out: dict[str, Rule] = {}
    for rule in rules:
        if rule.name in out:
            raise ValueError(f"two rules are named {rule.name!r}")
        out[rule.name] = rule
    return out


#: The built-in rules by name, in registry order (built here once; champions are not in it).
REGISTRY: dict[str, Rule] = assemble(builtin_rules())

#: The standard rule's expression, min(1, p/q): what the search seeds with ``include_standard``.
STANDARD_EXPRESSION: str = REGISTRY[STANDARD_NAME].expression


def champion_rules(directory: str | os.PathLike | None = None) -> list[Rule]:
    """The promoted champions of ``directory`` (default :func:`heuristics.champions.champions_dir`) as rules.

    Sorted by file name; a missing directory holds none. Raises InputError
    (one line naming the file) for an invalid champion file or two files
    declaring the same name.
    """
    return list_champions(directory)


def rules(champions: bool = False, directory: str | os.PathLike | None = None) -> list[Rule]:
    """Every registered rule in registry order; with ``champions`` the promoted champions after them.

    Raises InputError as :func:`champion_rules` (only with ``champions``).
    """
    out = list(REGISTRY.values())
    if champions:
        out += champion_rules(directory)
    return out


def rule_names(champions: bool = False, directory: str | os.PathLike | None = None) -> list[str]:
    """Names of :func:`rules` (built-ins first, in registry order)."""
    return [r.name for r in rules(champions, directory)]


def get_rule(name: str, champions: bool = False, directory: str | os.PathLike | None = None) -> Rule:
    """The rule called ``name``: a built-in one, else (with ``champions``) a promoted champion.

    The champions directory is read only when ``name`` is not built in.
    Raises: InputError naming the unknown rule and the known ones, or as
    :func:`champion_rules` for an invalid champion file.
    """
    if name in REGISTRY:
        return REGISTRY[name]
    known = list(REGISTRY)
    if champions:
        found = champion_rules(directory)
        match = next((r for r in found if r.name == name), None)
        if match is not None:
            return match
        known += [r.name for r in found]
    raise InputError(f"unknown rule '{name}' (known: {', '.join(sorted(known))})")


def families() -> dict[str, Family]:
    """The published rule families by name, in sweep order (:data:`heuristics.published.FAMILIES`)."""
    return dict(FAMILIES)


def get_family(name: str) -> Family:
    """The published family ``name``. Raises InputError naming it and the known families."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise InputError(f"unknown family '{name}' (known: {', '.join(FAMILIES)})") from None


__all__ = ["REGISTRY", "STANDARD_EXPRESSION", "STANDARD_NAME", "assemble", "builtin_rules", "champion_rules",
           "families", "get_family", "get_rule", "rule_names", "rules"]

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

import math
import os
from typing import Iterable

from evolve.errors import InputError
from heuristics.baselines import BASELINES
from heuristics.champions import list_champions, promoted_champions
from heuristics.contract import Rule
from heuristics.length_policies import POLICY_FAMILIES
from heuristics.published import FAMILIES, PUBLISHED, Family, Pair

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


def family_member(spec: str) -> Rule:
    """The member of a published family named ``FAMILY:VALUES``, as ``benchmark.py pareto`` labels its points
    (the acceptance-rule families of :data:`heuristics.published.FAMILIES` and the verification-length
    policy families of :data:`heuristics.length_policies.POLICY_FAMILIES`).

    ``VALUES`` is the parameter value(s), with or without their names: ``fuzzy_sd:T=0.1125``,
    ``fuzzy_sd:0.1125``, ``sglang_threshold:t_single=0.5,t_acc=0.8`` or ``sglang_threshold:0.5,0.8``;
    a family without a parameter takes none (``greedy_match:``). Any value in the family's range
    is allowed, not only its sweep grid.
    Raises: InputError (one line, naming ``spec``) for an unknown family, a wrong name or count of
    values, a value that is not a finite number (``inf``, ``nan``, ``1e400``), or a value out of the family's
    range.
    """
    name, _, values = spec.partition(":")
    known = {**FAMILIES, **POLICY_FAMILIES}
    if name.strip() not in known:
        raise InputError(f"rule '{spec}': unknown family '{name.strip()}' (known: {', '.join(known)})")
    family = known[name.strip()]
    names = [] if family.parameter is None else [n.strip() for n in family.parameter.split(",")]
    parts = [v.strip() for v in values.split(",") if v.strip()]
    if len(parts) != len(names):
        want = ", ".join(f"{n}=VALUE" for n in names) or "no value"
        raise InputError(f"rule '{spec}': family {family.name} takes {want}")
    numbers = []
    for part, pname in zip(parts, names):
        key, eq, text = part.rpartition("=") if "=" in part else ("", "", part)
        if eq and key.strip() != pname:
            raise InputError(f"rule '{spec}': family {family.name} has no parameter '{key.strip()}' "
                             f"(its parameters: {family.parameter})")
        try:
            number = float(text)
        except ValueError:
            raise InputError(f"rule '{spec}': '{text}' is not a number") from None
        if not math.isfinite(number):
            raise InputError(f"rule '{spec}': {pname}={text.strip()} is not a finite number")
        numbers.append(number)
    value = None if not numbers else (numbers[0] if len(numbers) == 1 else Pair(*numbers))
    try:
        return family.make(value)
    except (ValueError, OverflowError) as exc:
        raise InputError(f"rule '{spec}': {exc}") from None


def get_rule(name: str, champions: bool = False, directory: str | os.PathLike | None = None) -> Rule:
    """The rule called ``name``: a built-in one, a family member ``FAMILY:VALUES`` (:func:`family_member`),
    else (with ``champions``) a promoted champion.

    The champions directory is read only when ``name`` is neither built in nor a family member.
    Raises: InputError naming the unknown rule and the known ones, as :func:`family_member` for a
    bad member, or as :func:`champion_rules` for an invalid champion file.
    """
    return find_rule(name, champions, directory)[0]


def find_rule(name: str, champions: bool = False,
              directory: str | os.PathLike | None = None) -> tuple[Rule, str | None]:
    """(rule, file): :func:`get_rule`'s rule, and for a promoted champion the file it was read from (None for a
    built-in rule or a family member). Raises: InputError as :func:`get_rule`."""
    if name in REGISTRY:
        return REGISTRY[name], None
    if ":" in name:
        return family_member(name), None
    known = list(REGISTRY)
    if champions:
        found = promoted_champions(directory)
        match = next((c for c in found if c.name == name), None)
        if match is not None:
            return match.rule(), match.path
        known += [c.name for c in found]
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
           "families", "family_member", "find_rule", "get_family", "get_rule", "rule_names", "rules"]

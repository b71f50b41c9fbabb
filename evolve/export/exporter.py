"""Resolve what to export (a champion file or a rule name) and write it for one target library.

``CHAMPION`` is an existing path (a champion ``NAME.json`` or a run directory holding
``champion.json``, read by :func:`heuristics.champions.read_champion`), or else the name of
a registered rule or promoted champion (:func:`heuristics.registry.get_rule`). Only
expression rules can be exported; a rule given as a Python function has no expression.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from evolve.errors import InputError
from evolve.export.numpy_module import numpy_source
from evolve.export.torch_module import torch_source
from heuristics.champions import read_champion
from heuristics.contract import Rule
from heuristics.registry import get_rule

#: Export targets: name -> function (rule name, prefix nodes, source text) -> module text.
TARGETS: dict[str, Callable] = {"numpy": numpy_source, "torch": torch_source}


def resolve_rule(spec: str, champions_dir: str | os.PathLike | None = None) -> tuple[Rule, str]:
    """The expression rule ``spec`` names, and where it came from.

    Returns (rule, source): source is the champion file read or ``registered rule NAME``.
    Raises: InputError for an invalid champion file, a path that does not exist, an unknown
    name (listing the known ones) or a function rule.
    """
    path = Path(spec)
    if path.exists() or spec.endswith(".json") or os.sep in spec:
        champion = read_champion(path)
        return champion.rule(), str(champion.path)
    rule = get_rule(spec, champions=True, directory=champions_dir)
    if rule.nodes is None:
        raise InputError(f"rule '{rule.name}' is a Python function rule; only expression rules and champions "
                         f"can be exported")
    return rule, f"registered rule {rule.name}"


def export_source(spec: str, target: str, champions_dir: str | os.PathLike | None = None) -> tuple[Rule, str]:
    """(rule, text of the standalone module) of ``spec`` (see :func:`resolve_rule`) for ``target``.

    Raises: InputError for an unknown target or as :func:`resolve_rule`.
    """
    if target not in TARGETS:
        raise InputError(f"unknown export target '{target}' (choose from {', '.join(TARGETS)})")
    rule, source = resolve_rule(spec, champions_dir)
    return rule, TARGETS[target](rule.name, rule.nodes, source)


__all__ = ["TARGETS", "export_source", "resolve_rule"]

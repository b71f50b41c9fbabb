"""Resolve what to export (a champion file or a rule name) and write it for one target library.

``CHAMPION`` is an existing path (a champion ``NAME.json`` or a run directory holding
``champion.json``, read by :func:`heuristics.champions.read_champion`), or else the name of
a registered rule or promoted champion (:func:`heuristics.registry.get_rule`). Only
expression rules can be exported; a rule given as a Python function has no expression.

What the module defines depends on the rule's kind of program (:mod:`evolve.gp.kinds`), through
the table :data:`LAYOUTS`: a threshold exports ``acceptance_threshold(**columns)`` and
``residual_distribution``; a relaxation weight (``python -m evolve run --evolve relaxation``)
exports ``relaxation_weight(**columns)`` and ``relaxed_target(target_probs, draft_probs, w)``,
to be used with block verification against (1 - w) p + w q (Sun et al. 2024, arXiv 2403.10444;
the module's docstring says how); a verification-length policy exports ``keep_drafting(**columns)``. The array library is the other table, :data:`TARGETS`.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable

from evolve.errors import InputError
from evolve.export.codegen import LENGTH_LAYOUT, RELAXATION_LAYOUT, THRESHOLD_LAYOUT, TREE_LAYOUT, Layout
from evolve.export.numpy_module import numpy_source
from evolve.export.torch_module import torch_source
from evolve.gp.kinds import RELAXATION, THRESHOLD, TREE_SHAPE, VERIFY_LENGTH
from heuristics.champions import read_champion
from heuristics.contract import Rule
from heuristics.registry import get_rule

#: Export targets: name -> function (rule name, prefix nodes, source text, layout) -> module text.
TARGETS: dict[str, Callable] = {"numpy": numpy_source, "torch": torch_source}
#: What the exported module of a rule of each kind of program defines, by kind name.
LAYOUTS: dict[str, Layout] = {THRESHOLD.name: THRESHOLD_LAYOUT, RELAXATION.name: RELAXATION_LAYOUT,
                              VERIFY_LENGTH.name: LENGTH_LAYOUT, TREE_SHAPE.name: TREE_LAYOUT}


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


def layout(rule: Rule) -> Layout:
    """The :class:`evolve.export.codegen.Layout` of ``rule``'s kind (:data:`LAYOUTS`).

    Raises: InputError (:meth:`evolve.gp.kinds.ProgramKind.refuse`) for a kind that cannot be exported.
    """
    kind = rule.program_kind
    found = LAYOUTS.get(kind.name)
    if found is None:
        raise kind.refuse("python -m evolve export", f"rule '{rule.name}'")
    if found.verifier_header:  # the verifier its run used (the standard rule without one)
        return dataclasses.replace(found, header=(*found.header, f"VERIFIER = {rule.verifier or 'standard_rejection'!r}"))
    return found


def export_source(spec: str, target: str, champions_dir: str | os.PathLike | None = None) -> tuple[Rule, str]:
    """(rule, text of the standalone module) of ``spec`` (see :func:`resolve_rule`) for ``target``, laid
    out for the rule's kind (:func:`layout`).

    Raises: InputError for an unknown target, a kind that cannot be exported, or as :func:`resolve_rule`.
    """
    if target not in TARGETS:
        raise InputError(f"unknown export target '{target}' (choose from {', '.join(TARGETS)})")
    rule, source = resolve_rule(spec, champions_dir)
    return rule, TARGETS[target](rule.name, rule.nodes, source, layout(rule))


__all__ = ["LAYOUTS", "TARGETS", "export_source", "layout", "resolve_rule"]

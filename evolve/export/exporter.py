"""Resolve what to export (a champion file or a rule name) and write it for one target library.

``CHAMPION`` is an existing path (a champion ``NAME.json`` or a run directory holding
``champion.json``, read by :func:`heuristics.champions.read_champion`), or else the name of
a registered rule or promoted champion (:func:`heuristics.registry.find_rule`). Only
expression rules can be exported; a rule given as a Python function has no expression.

What the module defines depends on the rule's kind of program (:mod:`evolve.kinds`), through the
kind's ``export`` hook (the ``export_layout`` module of its package): a threshold exports ``acceptance_threshold(**columns)`` and
``residual_distribution``; a relaxation weight (``python -m evolve run --evolve relaxation``)
exports ``relaxation_weight(**columns)`` and ``relaxed_target(target_probs, draft_probs, w)``,
to be used with block verification against (1 - w) p + w q (Sun et al. 2024, arXiv 2403.10444;
the module's docstring says how); a verification-length policy exports ``keep_drafting(**columns)``. The array library is the other table, :data:`TARGETS` (a verification-length
policy as a llama-cpp-python draft model: :mod:`evolve.export.engines.llama_cpp_python`).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable

from evolve.errors import InputError
from evolve.export.codegen import Layout
from evolve.export.numpy_module import numpy_source
from evolve.export.torch_module import torch_source
from heuristics.champions import read_champion
from heuristics.contract import Rule
from heuristics.registry import find_rule

#: Export targets: name -> function (rule name, prefix nodes, layout, source text) -> module text.
TARGETS: dict[str, Callable] = {"numpy": numpy_source, "torch": torch_source}


def resolve_rule(spec: str, champions_dir: str | os.PathLike | None = None) -> tuple[Rule, str]:
    """The expression rule ``spec`` names, and where it came from.

    Returns (rule, source): source is the champion file read (a promoted champion named by its name included, so
    that its run's context goes with it as with its path, :mod:`evolve.commands.run_context`) or
    ``registered rule NAME``.
    Raises: InputError for an invalid champion file, a path that does not exist, an unknown
    name (listing the known ones) or a function rule.
    """
    path = Path(spec)
    if path.exists() or spec.endswith(".json") or os.sep in spec:
        champion = read_champion(path)
        return champion.rule(), str(champion.path)
    rule, file = find_rule(spec, champions=True, directory=champions_dir)
    if file is not None:  # a promoted champion, read from its file
        return rule, str(file)
    if rule.nodes is None:
        raise InputError(f"rule '{rule.name}' is a Python function rule; only expression rules and champions "
                         f"can be exported")
    return rule, f"registered rule {rule.name}"


def layout(rule: Rule) -> Layout:
    """The :class:`evolve.export.codegen.Layout` of ``rule``'s kind (its ``export`` hook).

    Raises: InputError (:meth:`evolve.kinds.base.ProgramKind.refuse`) for a kind that cannot be exported.
    """
    kind = rule.program_kind
    found = kind.hook("export", "python -m evolve export", f"rule '{rule.name}'")
    if found.setting_headers:  # the kind's own settings its run used (their defaults where it set none)
        defaults = {f.name: f.default for f in dataclasses.fields(kind.settings)}
        return dataclasses.replace(found, header=(*found.header, *(f"{const} = {rule.setting(name) or defaults[name]!r}"
                                                                   for const, name in found.setting_headers)))
    return found


def export_source(spec: str, target: str, champions_dir: str | os.PathLike | None = None) -> tuple[Rule, str]:
    """(rule, text of the standalone module) of ``spec`` (see :func:`resolve_rule`) for ``target``, laid
    out for the rule's kind (:func:`layout`).

    Raises: InputError for an unknown target, a kind that cannot be exported, or as :func:`resolve_rule`.
    """
    if target not in TARGETS:
        raise InputError(f"unknown export target '{target}' (choose from {', '.join(TARGETS)})")
    rule, source = resolve_rule(spec, champions_dir)
    return rule, TARGETS[target](rule.name, rule.nodes, layout(rule), source)


__all__ = ["TARGETS", "export_source", "layout", "resolve_rule"]

"""Resolve what to export (a champion file or a rule name) and write it for one target library.

``CHAMPION`` is an existing path (a champion ``NAME.json`` or a run directory holding
``champion.json``, read by :func:`heuristics.champions.read_champion`), or else the name of
a registered rule or promoted champion (:func:`heuristics.registry.get_rule`). Only
expression rules can be exported; a rule given as a Python function has no expression.

What the module defines depends on the rule's kind of program (:mod:`evolve.kinds`), through the
kind's ``export`` hook (the ``export_layout`` module of its package): a threshold exports ``acceptance_threshold(**columns)`` and
``residual_distribution``; a relaxation weight (``python -m evolve run --evolve relaxation``)
exports ``relaxation_weight(**columns)`` and ``relaxed_target(target_probs, draft_probs, w)``,
to be used with block verification against (1 - w) p + w q (Sun et al. 2024, arXiv 2403.10444;
the module's docstring says how); a verification-length policy exports ``keep_drafting(**columns)``. The array library is the other table, :data:`TARGETS` (with the
llama-cpp-python draft model of a verification-length policy).
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
from heuristics.registry import get_rule

#: Export targets of a standalone module: name -> function (rule, layout, source text) -> module text: the numpy and
#: torch modules of the rule's kind, and a verification-length policy as a llama-cpp-python draft model
#: (:func:`evolve.export.engines.llama_cpp_python.module_source`, prompt lookup cut by the policy; its n-gram lengths
#: and longest draft are the class's constructor arguments).
TARGETS: dict[str, Callable[[Rule, Layout, str], str]] = {
    "numpy": lambda rule, found, source: numpy_source(rule.name, rule.nodes, found, source),
    "torch": lambda rule, found, source: torch_source(rule.name, rule.nodes, found, source),
    "llama-cpp-python": lambda rule, found, source: _llama_cpp_python(rule, source),
}


def _llama_cpp_python(rule: Rule, source: str) -> str:
    """:func:`evolve.export.engines.llama_cpp_python.module_source` of ``rule`` (imported here: that module reads
    this one's :func:`layout`), its defaults the n-gram lengths and the draft length of the champion's run (its
    provenance: the dataset's harvest ``ngram`` and the run's ``gamma``) when ``source`` is a champion file that
    records them, else prompt lookup 3..1 and 8 drafts."""
    from evolve.export.engines.llama_cpp_python import module_source

    ngram, gamma = (3, 1), 8
    if Path(source).is_file():
        prov = read_champion(source).provenance or {}
        run = prov.get("config") if isinstance(prov.get("config"), dict) else {}
        data = prov.get("data") if isinstance(prov.get("data"), dict) else {}
        harvest = data.get("generator_config") if isinstance(data.get("generator_config"), dict) else {}
        found = harvest.get("ngram")
        if isinstance(found, list) and 1 <= len(found) <= 2 and all(isinstance(v, int) and v >= 1 for v in found):
            ngram = (found[0], found[-1] if len(found) == 2 else 1)
        if isinstance(run.get("gamma"), int) and run["gamma"] >= 1:
            gamma = run["gamma"]
    return module_source(rule, source, ngram, gamma)


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
    """The :class:`evolve.export.codegen.Layout` of ``rule``'s kind (its ``export`` hook).

    Raises: InputError (:meth:`evolve.kinds.base.ProgramKind.refuse`) for a kind that cannot be exported.
    """
    found = rule.program_kind.hook("export", "python -m evolve export", f"rule '{rule.name}'")
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
    return rule, TARGETS[target](rule, layout(rule), source)


__all__ = ["TARGETS", "export_source", "layout", "resolve_rule"]

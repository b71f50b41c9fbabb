"""Builders of the :class:`evolve.export.engines.base.KindSupport` entries, from an engine's
:class:`evolve.export.engines.base.Capabilities` and a kind's own mapping of its programs onto them.

A kind says, in its own package (its ``engines`` hook), how its programs read as draft lengths (:class:`LengthRules`),
draft trees (:class:`TreeRules`) or acceptance rules (the standard rule and the families an engine ships); these
builders turn that and the engine's capabilities into the entry: the exact setting of a champion, the settings the
engine can express (as rules of the champion's kind, so the kind's own scorer scores them), and the engine's default.
Nothing here knows a kind: the rules come from the kind.

* :func:`length_support`: fixed draft lengths, block verification of them, capped confidence stops;
* :func:`tree_support`: static trees, chains (a static tree of width 1) and per-level top-k trees;
* :func:`threshold_support`: acceptance rules from the standard rule and the families an engine ships.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from evolve.errors import InputError
from evolve.export.engines.base import Capabilities, KindSupport, Setting
from evolve.export.engines.shapes import constants, member, tree_paths, tree_size
from heuristics.contract import Rule


@dataclass(frozen=True)
class LengthRules:
    """How a kind's programs read as draft lengths (given by the kind).

    ``length_of(rule)``: the fixed draft length of a champion, or None; ``verified(rule)``: how its drafts are
    verified: ``"token"`` (the standard rule), ``"block"`` (block verification), or ``""`` (another verifier no
    engine runs); ``make_length(L, block)``: the fixed length L as a rule of the kind; ``confidence_of(rule)``: (h, n)
    of a capped confidence stop (n None: no cap of its own), or None; ``make_confidence(h, n)``: that stop as a rule;
    ``grid``: the thresholds h swept when tuning.
    """

    length_of: Callable[[Rule], int | None]
    verified: Callable[[Rule], str]
    make_length: Callable[[int, bool], Rule]
    confidence_of: Callable[[Rule], tuple[float, int | None] | None]
    make_confidence: Callable[[float, int], Rule]
    grid: tuple[float, ...]


def _note(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def length_support(caps: Capabilities, rules: LengthRules, nearest: str, cap: int = 0) -> KindSupport | None:
    """The entry of an engine with a draft-length knob (None: the engine has none): a champion that is a fixed length
    L is ``caps.length(L)`` (plain decoding, the empty setting, for L = 0), verified as a block where the engine
    verifies blocks; a capped confidence stop is ``caps.confidence(h, n)`` (an uncapped one capped at the data's
    longest draft, or at ``cap`` without data). The settings tuned are every fixed length 0..gamma (as a block too
    for a block-verified champion) and the confidence stops of ``rules.grid``."""
    if caps.length is None:
        return None

    def knobs(length: int, block: bool) -> dict:
        if length == 0:
            return {}
        return {**caps.length(length), **((caps.block or {}) if block else {})}

    def length_setting(length: int, block: bool, note: str = "") -> Setting:
        label = f"length={length}" + (",block" if block else "")
        return Setting(label, rules.make_length(length, block), knobs(length, block),
                       _note(note, caps.block_condition if block and length else ""))

    def exact(rule: Rule, gamma: int | None) -> Setting | None:
        verified = rules.verified(rule)
        if verified not in ("token", "block") or (verified == "block" and caps.block is None):
            return None
        length = rules.length_of(rule)
        if length is not None:
            return length_setting(length, verified == "block")
        found = rules.confidence_of(rule)
        if caps.confidence is None or verified == "block" or found is None:
            return None
        h, n = found
        note = ""
        if n is None:
            if not (gamma or cap):
                return None
            n = gamma or cap
            note = (f"the policy has no cap of its own: at most {n} drafts "
                    + ("(the data's longest draft)" if gamma else "(the engine's default cap)"))
        return Setting(f"h={h:g},n={n}", rules.make_confidence(h, n), caps.confidence(h, n),
                       _note(note, caps.confidence_condition))

    def settings(rule: Rule, gamma: int, depth: int) -> list[Setting]:
        modes = [False, True] if caps.block is not None and rules.verified(rule) == "block" else [False]
        out = [length_setting(g, b) for b in modes for g in range(gamma + 1)]
        if caps.confidence is not None:
            out += [Setting(f"h={h:g},n={n}", rules.make_confidence(h, n), caps.confidence(h, n),
                            caps.confidence_condition) for h in rules.grid for n in range(1, gamma + 1)]
        return out

    def default(gamma: int) -> Setting | None:
        if caps.default_confidence is not None:
            h, n = caps.default_confidence
            return Setting(f"h={h:g},n={n}", rules.make_confidence(h, n), {}, caps.confidence_condition)
        if caps.default_length is not None:
            return Setting(f"length={caps.default_length}", rules.make_length(caps.default_length, False), {})
        return None

    return KindSupport(exact, settings, default, nearest)


@dataclass(frozen=True)
class TreeRules:
    """How a kind's programs read as draft trees (given by the kind): ``widths_of(rule)`` the children per depth of a
    static tree (a chain: all 1), or None; ``make_tree(widths)`` a static tree as a rule of the kind;
    ``topk_of(rule)`` (k, depth) of a per-level top-k tree, or None; ``make_topk(k, depth)`` that tree as a rule."""

    widths_of: Callable[[Rule], tuple[int, ...] | None]
    make_tree: Callable[[tuple[int, ...]], Rule]
    topk_of: Callable[[Rule], tuple[int, int] | None]
    make_topk: Callable[[int, int], Rule]


def _label(widths: tuple[int, ...]) -> str:
    if not widths:
        return "plain"
    if all(w == 1 for w in widths):
        return f"depth={len(widths)}"
    return "widths=" + ",".join(map(str, widths))


def tree_support(caps: Capabilities, rules: TreeRules, nearest: str) -> KindSupport | None:
    """The tree entry of an engine (None: it drafts neither trees nor chains): exact for a static tree the engine
    takes (``caps.static_tree``, within ``caps.max_tree_nodes``), a chain (``caps.chain``, else its draft length
    ``caps.length``), or a per-level top-k tree (``caps.topk_tree``); the settings tuned are the static trees whose
    widths do not grow with depth, up to the data's widest node (at most 4) and deepest level (fixed widths, Medusa's
    narrowing trees and chains among them), or the chains of every depth, and the top-k trees.

    Raises (from ``exact``): InputError for a static tree over the engine's node budget."""
    chain = caps.chain or caps.length
    if caps.static_tree is None and chain is None and caps.topk_tree is None:
        return None

    def knobs(widths: tuple[int, ...]) -> dict:
        if not widths:
            return {}
        if all(w == 1 for w in widths) and chain is not None:
            return dict(chain(len(widths)))
        return dict(caps.static_tree(widths))

    def exact(rule: Rule, gamma: int | None) -> Setting | None:
        widths = rules.widths_of(rule)
        if widths is not None and (caps.static_tree is not None or all(w == 1 for w in widths) and chain is not None):
            if caps.static_tree is not None and not all(w == 1 for w in widths) and caps.max_tree_nodes is not None:
                try:
                    tree_paths(widths, caps.max_tree_nodes)  # refused in one line over the budget
                except InputError as exc:
                    raise InputError(f"rule '{rule.name}': {exc}") from None
            return Setting(_label(widths), rules.make_tree(widths), knobs(widths))
        found = rules.topk_of(rule) if caps.topk_tree is not None else None
        if found is None:
            return None
        return Setting(f"top={found[0]},depth={found[1]}", rules.make_topk(*found), caps.topk_tree(*found))

    def settings(rule: Rule, gamma: int, depth: int) -> list[Setting]:
        shapes: set[tuple[int, ...]] = {()}
        if caps.static_tree is not None:
            widest = max(1, min(gamma, 4))
            frontier: list[tuple[int, ...]] = [()]
            for _ in range(depth):
                frontier = [s + (w,) for s in frontier for w in range(1, (s[-1] if s else widest) + 1)]
                shapes.update(s for s in frontier if caps.max_tree_nodes is None or
                              tree_size(s) <= caps.max_tree_nodes)
        elif chain is not None:
            shapes.update((1,) * d for d in range(1, depth + 1))
        out = [Setting(_label(s), rules.make_tree(s), knobs(s)) for s in sorted(shapes, key=lambda s: (len(s), s))]
        if caps.topk_tree is not None:
            out += [Setting(f"top={k},depth={d}", rules.make_topk(k, d), caps.topk_tree(k, d))
                    for k in range(2, max(2, gamma) + 1) for d in range(1, depth + 1)]
        return out

    def default(gamma: int) -> Setting | None:
        if caps.default_length is None or chain is None:
            return None
        return Setting(f"depth={caps.default_length}", rules.make_tree((1,) * caps.default_length), {})

    return KindSupport(exact, settings, default, nearest)


def threshold_support(caps: Capabilities, standard: Rule, nearest: str) -> KindSupport:
    """An acceptance-rule entry: the standard rule (``standard``; its knobs ``caps.lossless``, the engine's default
    verification, written as nothing when the engine has no knob for it) and each family of ``caps.families``."""
    lossless = dict(caps.lossless or {})

    def exact(rule: Rule, gamma: int | None) -> Setting | None:
        if rule.expression == standard.expression:
            return Setting("standard", standard, lossless)
        for family in caps.families:
            found = member(rule, family.make, family.guesses(constants(rule.nodes)))
            if found is not None:
                return Setting(family.make(*found).name, family.make(*found), family.knobs(*found))
        return None

    def settings(rule: Rule, gamma: int, depth: int) -> list[Setting]:
        out = [Setting("standard", standard, lossless)]
        for family in caps.families:
            out += [Setting(family.make(*p).name, family.make(*p), family.knobs(*p)) for p in family.grid]
        return out

    return KindSupport(exact, settings, lambda gamma: Setting("standard", standard, lossless), nearest)


__all__ = ["LengthRules", "TreeRules", "length_support", "tree_support", "threshold_support"]

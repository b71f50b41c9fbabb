"""Builders of the :class:`evolve.export.engines.base.KindSupport` entries engines share: an engine gives the function
that turns one setting's numbers into its knobs, and gets the entry that recognises exact champions and lists the
settings it can express (as rules of the champion's kind, :mod:`evolve.export.engines.families`).

* :func:`length_support`: fixed draft lengths (and, where the engine has the knobs, capped confidence stops);
* :func:`chain_tree_support`: tree shapes an engine runs as a chain (a static tree of width 1), and
  :func:`static_tree_support`: tree shapes an engine runs as a static tree of node paths;
* :func:`threshold_support`: acceptance rules from the standard rule and the families an engine ships.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from evolve.export.engines.base import KindSupport, Setting, constants, fixed_length, member, static_widths
from evolve.export.engines.families import (CONFIDENCE_GRID, capped_confidence_rule, fixed_length_rule,
                                            static_tree_rule)
from evolve.export.exporter import layout
from heuristics.contract import STANDARD_RULE, Rule
from heuristics.length_policies import BLOCK_VERIFIER_NAME, STANDARD_VERIFIER_NAME, confidence_threshold

Knobs = Mapping[str, Any]


def _verifier(rule: Rule) -> str:
    return rule.verifier or STANDARD_VERIFIER_NAME


def length_support(knobs: Callable[[int, bool], Knobs], nearest: str, block: bool = False,
                   confidence: Callable[[float, int], Knobs] | None = None,
                   default: Callable[[int], Setting | None] = lambda gamma: None, cap: int = 0) -> KindSupport:
    """A verification-length entry: a policy reading only ``draft_index`` is a fixed length L, written by
    ``knobs(L, block)``; with ``block`` the engine also verifies a block (a champion whose ``verify_with`` is block
    verification); ``confidence(h, n)``: the knobs of a capped confidence stop (:func:`capped_confidence_rule`, exact
    for a champion that is one, and for an uncapped ``confidence_threshold:h=H`` capped at the data's longest draft,
    or at ``cap`` without data), None where the engine has none. ``default(gamma)``: the engine's default setting."""

    def exact(rule: Rule, gamma: int | None) -> Setting | None:
        verifier = _verifier(rule)
        is_block = verifier == BLOCK_VERIFIER_NAME
        if verifier != STANDARD_VERIFIER_NAME and not (block and is_block):
            return None
        length = fixed_length(rule, layout(rule))
        if length is not None:
            return Setting(f"length={length}", fixed_length_rule(length, is_block), knobs(length, is_block))
        if confidence is None or is_block:
            return None
        c = constants(rule.nodes)
        found = member(rule, capped_confidence_rule, [(c[0], round(c[1] + 0.5))] if len(c) == 2 else [])
        uncapped = member(rule, confidence_threshold, [(c[0],)] if len(c) == 1 else [])
        note = ""
        if uncapped is not None and (gamma or cap):
            found = (uncapped[0], gamma or cap)
            note = (f"the policy has no cap of its own: at most {gamma or cap} drafts "
                    + ("(the data's longest draft)" if gamma else "(the engine's default cap)"))
        if found is None:
            return None
        h, n = found
        return Setting(f"h={h:g},n={n}", capped_confidence_rule(h, n), confidence(h, n), note)

    def settings(rule: Rule, gamma: int, depth: int) -> list[Setting]:
        modes = [False, True] if block and _verifier(rule) == BLOCK_VERIFIER_NAME else [False]
        out = [Setting(f"length={g}" + (",block" if b else ""), fixed_length_rule(g, b), knobs(g, b))
               for b in modes for g in range(gamma + 1)]
        if confidence is not None:
            out += [Setting(f"h={h:g},n={n}", capped_confidence_rule(h, n), confidence(h, n))
                    for h in CONFIDENCE_GRID for n in range(1, gamma + 1)]
        return out

    return KindSupport(exact, settings, default, nearest)


def _chain_length(rule: Rule) -> tuple[int, ...] | None:
    return static_widths(rule, layout(rule))


def chain_tree_support(knobs: Callable[[int], Knobs], nearest: str,
                       default: Callable[[int], Setting | None] = lambda gamma: None) -> KindSupport:
    """A tree-shape entry for an engine that drafts chains: exact for a static tree of width 1 (``knobs(depth)``);
    the expressible settings are the chains of every depth up to the data's deepest level."""

    def exact(rule: Rule, gamma: int | None) -> Setting | None:
        widths = _chain_length(rule)
        if widths is None or any(w != 1 for w in widths):
            return None
        return Setting(f"depth={len(widths)}", static_tree_rule(widths), knobs(len(widths)))

    def settings(rule: Rule, gamma: int, depth: int) -> list[Setting]:
        return [Setting(f"depth={d}", static_tree_rule((1,) * d), knobs(d)) for d in range(depth + 1)]

    return KindSupport(exact, settings, default, nearest)


def static_tree_support(knobs: Callable[[tuple[int, ...]], Knobs], nearest: str,
                        default: Callable[[int], Setting | None] = lambda gamma: None) -> KindSupport:
    """A tree-shape entry for an engine that takes a static tree: exact for a shape reading only ``draft_index``
    (``knobs(widths)``); the expressible settings are the static trees whose widths do not grow with depth, up to
    the data's widest node and deepest level (fixed widths, Medusa's narrowing trees and chains among them)."""

    def exact(rule: Rule, gamma: int | None) -> Setting | None:
        widths = _chain_length(rule)
        if widths is None:
            return None
        return Setting("widths=" + ",".join(map(str, widths)) if widths else "plain", static_tree_rule(widths),
                       knobs(widths))

    def settings(rule: Rule, gamma: int, depth: int) -> list[Setting]:
        widest = max(1, min(gamma, 4))
        shapes: set[tuple[int, ...]] = {()}
        frontier: list[tuple[int, ...]] = [()]
        for _ in range(depth):
            frontier = [s + (w,) for s in frontier for w in range(1, (s[-1] if s else widest) + 1)]
            shapes.update(frontier)
        return [Setting("widths=" + ",".join(map(str, s)) if s else "plain", static_tree_rule(s), knobs(s))
                for s in sorted(shapes, key=lambda s: (len(s), s))]

    return KindSupport(exact, settings, default, nearest)


def threshold_support(families: tuple[tuple[Callable[..., Rule], Callable[[list[float]], list[tuple]],
                                            Callable[..., Knobs], tuple], ...],
                      standard: Knobs, nearest: str) -> KindSupport:
    """An acceptance-rule entry: the standard rule (``standard``: the knobs of the engine's lossless verification,
    its default) and each family (make, guesses from the champion's constants, knobs of a member's parameters, the
    grid of parameter tuples swept when tuning)."""

    def exact(rule: Rule, gamma: int | None) -> Setting | None:
        if rule.expression == STANDARD_RULE.expression:
            return Setting("standard", STANDARD_RULE, standard)
        for make, guesses, knobs, _ in families:
            found = member(rule, make, guesses(constants(rule.nodes)))
            if found is not None:
                return Setting(make(*found).name, make(*found), knobs(*found))
        return None

    def settings(rule: Rule, gamma: int, depth: int) -> list[Setting]:
        out = [Setting("standard", STANDARD_RULE, standard)]
        for make, _, knobs, grid in families:
            out += [Setting(make(*p).name, make(*p), knobs(*p)) for p in grid]
        return out

    return KindSupport(exact, settings, lambda gamma: Setting("standard", STANDARD_RULE, standard), nearest)


__all__ = ["length_support", "chain_tree_support", "static_tree_support", "threshold_support"]

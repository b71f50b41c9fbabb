"""What an engine can express of a draft-tree shape (the kind's ``engines`` hook), from its capabilities.

A shape reading only ``draft_index`` is a static tree (:func:`static_tree_rule`: ``widths[d]`` children per node of
depth d; Medusa's static trees, Cai et al. 2024, arXiv 2401.10774), written where the engine takes one (within its
node budget), or as its chain where it is one of width 1; EAGLE-2's per-level top-k (:func:`topk_tree_rule`, Li et
al. 2024, arXiv 2406.16858) where the engine expands the top k nodes of each level. The settings are rules of this
kind, so its own scorer scores them on the dataset's tree tables.
"""
from __future__ import annotations

from evolve.export.engines.base import Engine, KindSupport
from evolve.export.engines.shapes import constants, member, static_widths
from evolve.export.engines.supports import TreeRules, tree_support
from evolve.export.exporter import layout
from evolve.kinds.tree_shape import KIND
from evolve.eval.tree_competitors import eagle2_topk_expression
from heuristics.contract import Rule


def static_tree_expression(widths: tuple[int, ...]) -> str:
    """The tree-shape program keeping ``widths[d]`` children at every node of depth d (none below)."""
    text = "0.0"
    for depth in reversed(range(len(widths))):
        text = f"if_gt({depth + 0.5!r}, draft_index, {float(widths[depth])!r}, {text})"
    return text


def static_tree_rule(widths: tuple[int, ...]) -> Rule:
    """A static tree (``widths[d]`` children per node of depth d) as a tree-shape rule; widths of 1 are a chain."""
    label = f"chain:depth={len(widths)}" if all(w == 1 for w in widths) else \
        f"static_tree:widths={','.join(map(str, widths))}"
    return Rule(label, "a static draft tree", "Medusa's static trees (Cai et al. 2024, arXiv 2401.10774)",
                expression=static_tree_expression(widths), lossless=True, kind=KIND.name)


def topk_tree_rule(top: int, depth: int) -> Rule:
    """EAGLE-2's per-level top-k with ``top`` children per expanded node, to ``depth``, as a tree-shape rule."""
    return Rule(f"eagle2_topk:top={top},depth={depth}", "the top nodes of each level expanded",
                "EAGLE-2 (Li et al. 2024, arXiv 2406.16858)", expression=eagle2_topk_expression(top, depth, top),
                lossless=True, kind=KIND.name)


def _topk(rule: Rule) -> tuple[int, int] | None:
    c = constants(rule.nodes)
    return member(rule, topk_tree_rule, [(round(c[1] + 0.5), round(c[0] + 0.5))] if len(c) >= 2 else [])


RULES = TreeRules(widths_of=lambda rule: static_widths(rule, layout(rule)), make_tree=static_tree_rule,
                  topk_of=_topk, make_topk=topk_tree_rule)


def engine_support(engine: Engine) -> KindSupport | None:
    """What ``engine`` can express of a tree shape (the module doc); refused where it drafts neither trees nor
    chains."""
    caps = engine.capabilities
    kinds = [name for name, has in (("a static tree", caps.static_tree), ("a chain", caps.chain or caps.length),
                                    ("per-level top-k", caps.topk_tree)) if has]
    found = tree_support(caps, RULES, " or ".join(kinds))
    return found if found is not None else KindSupport.refused("none: the engine drafts no tree or chain")


__all__ = ["RULES", "engine_support", "static_tree_expression", "static_tree_rule", "topk_tree_rule"]

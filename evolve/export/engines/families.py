"""The settings engines share, written as rules of the champion's kind so the kind's own scorer scores them.

* verification lengths: :func:`fixed_length_rule` (``fixed_gamma:gamma=G`` of :mod:`heuristics.length_policies`)
  and :func:`capped_confidence_rule` (stop after a drafted token whose drafter probability is below h, at most n
  drafts: ``min(sub(draft_top_prob, h), sub(n - 0.5, draft_index))``, SpecDec++'s stop, Huang et al. 2024,
  arXiv 2405.19715, with a cap);
* tree shapes: :func:`static_tree_rule` (children per depth; a chain has width 1) and SGLang's per-level top-k
  (:func:`evolve.eval.tree_competitors.eagle2_topk_expression`, EAGLE-2, Li et al. 2024,
  arXiv 2406.16858);
* relaxation weights: :func:`block_rule`, w = 0: lossless block verification (Sun et al. 2024, arXiv 2403.10444).

The thresholds' families are :mod:`heuristics.published` and :mod:`heuristics.shipped` themselves.
"""
from __future__ import annotations

from evolve.kinds.relaxation import RELAXATION
from evolve.kinds.tree_shape import TREE_SHAPE
from evolve.eval.tree_competitors import eagle2_topk_expression
from evolve.kinds.verify_length import VERIFY_LENGTH
from heuristics.contract import Rule
from heuristics.length_policies import BLOCK_VERIFIER_NAME, confidence_threshold, fixed_gamma

#: Thresholds h of the confidence settings (the grid of ``confidence_threshold``'s family).
CONFIDENCE_GRID: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(1, 20))


def fixed_length_rule(length: int, block: bool = False) -> Rule:
    """``fixed_gamma:gamma=length`` (drafts verified by the standard rule, or by block verification with ``block``)."""
    rule = fixed_gamma(length)
    if not block:
        return rule
    return Rule(f"{rule.name},verify=block", rule.description + ", verified as a block", rule.source,
                expression=rule.expression, lossless=True, kind=VERIFY_LENGTH.name, verifier=BLOCK_VERIFIER_NAME)


def capped_confidence_rule(h: float, cap: int) -> Rule:
    """Stop drafting after a token whose drafter top probability is below ``h``, and after ``cap`` drafts."""
    base = confidence_threshold(h)
    return Rule(f"{base.name},n={cap}", f"{base.description}, at most {cap} drafts", base.source,
                expression=f"min(sub(draft_top_prob, {float(h)!r}), sub({cap - 0.5!r}, draft_index))",
                lossless=True, kind=VERIFY_LENGTH.name)


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
                expression=static_tree_expression(widths), lossless=True, kind=TREE_SHAPE.name)


def topk_tree_rule(top: int, depth: int) -> Rule:
    """EAGLE-2's per-level top-k with ``top`` children per expanded node, to ``depth``, as a tree-shape rule."""
    return Rule(f"eagle2_topk:top={top},depth={depth}", "the top nodes of each level expanded",
                "EAGLE-2 (Li et al. 2024, arXiv 2406.16858)", expression=eagle2_topk_expression(top, depth, top),
                lossless=True, kind=TREE_SHAPE.name)


def block_rule() -> Rule:
    """The relaxation weight w = 0: lossless block verification."""
    return Rule("block_verification:w=0", "lossless block verification",
                "block verification, Sun et al. 2024 (arXiv 2403.10444)", expression="0.0", lossless=True,
                kind=RELAXATION.name)


__all__ = ["CONFIDENCE_GRID", "fixed_length_rule", "capped_confidence_rule", "static_tree_expression",
           "static_tree_rule", "topk_tree_rule", "block_rule"]

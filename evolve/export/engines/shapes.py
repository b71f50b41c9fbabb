"""Readers of a champion's shape, the same for every engine: its fixed draft length, its static tree, its constant
value, its family member, and a static tree's node paths (within a node budget).

The readers evaluate the champion through its exported numpy module (:func:`evolve.export.numpy_module.numpy_source`
with the kind's own layout), so a fixed length or a static tree is read with the exported module's exact semantics (a
policy drafts while its decision is 1; a tree node keeps ``ceil(v)`` children).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from evolve.errors import InputError
from evolve.export.codegen import straight_line
from evolve.export.numpy_module import numpy_source
from evolve.gp.compiler import Node
from heuristics.contract import Rule

#: Longest draft (or tree depth) a champion is read at when its length or tree is recognised: a program that has not
#: stopped by then is refused as one that never stops (no engine drafts thousands of tokens a step).
MAX_LENGTH = 4096
#: Node budget of a static tree written for an engine (every node is a drafted token verified in one target pass):
#: a shape keeping more is refused in one line before its node paths are built.
MAX_TREE_NODES = 1024


def program_values(rule: Rule, layout: Any, columns: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The values of ``rule``'s exported function (its kind's ``layout``, :class:`evolve.export.codegen.Layout`) on
    ``columns`` (name -> float64 array, one shape), or None when the rule reads a column not given.

    The numpy module of :mod:`evolve.export.numpy_module` is executed (floating-point warnings silenced: an
    overflowing value is read as the module returns it), so the values have the exported module's semantics exactly.
    Raises nothing for a well-formed rule.
    """
    features = straight_line(rule.nodes).features
    if any(f not in columns for f in features):
        return None
    namespace: dict[str, Any] = {}
    exec(compile(numpy_source(rule.name, rule.nodes, layout, "engine check"), "<exported>", "exec"), namespace)
    function = namespace[layout.kind.function_name]
    with np.errstate(all="ignore"):
        return np.asarray(function(**{f: columns[f] for f in features}), dtype=np.float64)


def _by_index(rule: Rule, layout: Any) -> np.ndarray | None:
    values = program_values(rule, layout, {"draft_index": np.arange(MAX_LENGTH + 1, dtype=np.float64)})
    return None if values is None else np.broadcast_to(values, (MAX_LENGTH + 1,))


def fixed_length(rule: Rule, layout: Any) -> int | None:
    """The draft length of a policy that reads only ``draft_index`` (drafting stops at the first step whose decision
    is 0), or None for a policy reading anything else.

    Raises: InputError (one line) for a policy that reads only ``draft_index`` and never stops within
    :data:`MAX_LENGTH` drafts (no engine's draft length is that)."""
    decisions = _by_index(rule, layout)
    if decisions is None:
        return None
    stops = np.flatnonzero(decisions <= 0.0)
    if not stops.size:
        raise InputError(f"rule '{rule.name}' reads only draft_index and keeps drafting past {MAX_LENGTH} drafts "
                         f"(a draft that never stops); no engine drafts that many tokens a step")
    return int(stops[0])


def static_widths(rule: Rule, layout: Any) -> tuple[int, ...] | None:
    """Children per depth of a tree shape that reads only ``draft_index`` (the tree ends at the first depth with no
    child; a node keeps ``ceil(v)`` children), or None for a shape reading anything else or keeping every drawn child
    (an infinite or undefined value).

    Raises: InputError (one line) for a shape that reads only ``draft_index`` and does not end within
    :data:`MAX_LENGTH` levels."""
    children = _by_index(rule, layout)
    if children is None:
        return None
    widths = []
    for c in children:
        if c <= 0.0:
            return tuple(widths)
        if not math.isfinite(c):
            return None
        widths.append(math.ceil(c))
    raise InputError(f"rule '{rule.name}' reads only draft_index and grows a tree deeper than {MAX_LENGTH} levels "
                     f"(a tree that never ends)")


def tree_size(widths: tuple[int, ...]) -> int:
    """The node count of a static tree with ``widths[d]`` children per node of depth d (the root not counted),
    computed without building it (Python integers: exact for any widths)."""
    total, level = 0, 1
    for w in widths:
        level *= int(w)
        total += level
    return total


def tree_paths(widths: tuple[int, ...], budget: int = MAX_TREE_NODES) -> list[tuple[int, ...]]:
    """The node paths of a static tree with ``widths[d]`` children at every node of depth d, breadth first (the
    format of TensorRT-LLM's ``eagle_choices`` and vLLM's former ``speculative_token_tree``: a node is the tuple of
    its child indices from the root).

    Raises: InputError (one line) when the tree has more than ``budget`` nodes (checked before any path is built)."""
    size = tree_size(widths)
    if size > budget:
        shown = f"{size:,}" if size < 10 ** 15 else f"about 10^{len(str(size)) - 1}"
        raise InputError(f"a static tree of widths {_widths_text(widths)} has {shown} nodes, over the node budget "
                         f"of {budget:,} (every node is a token drafted and verified each step)")
    paths: list[tuple[int, ...]] = []
    level: list[tuple[int, ...]] = [()]
    for w in widths:
        level = [p + (i,) for p in level for i in range(w)]
        paths += level
    return paths


def _widths_text(widths: tuple[int, ...]) -> str:
    text = ",".join(str(w) if w < 10 ** 6 else f"{float(w):.3g}" for w in widths[:8])
    return text + (",..." if len(widths) > 8 else "")


def constant_value(rule: Rule, layout: Any) -> float | None:
    """The value of a program that reads no column (through its exported function), or None."""
    value = program_values(rule, layout, {})
    return None if value is None else float(value.reshape(-1)[0])


def constants(nodes: list[Node]) -> list[float]:
    """The constants of prefix ``nodes`` in prefix order."""
    return [float(n.value) for n in nodes if n.node_type not in ("prim", "feature")]


def member(rule: Rule, make: Callable[..., Rule], guesses: list[tuple]) -> tuple | None:
    """The first parameter tuple of ``guesses`` whose family member ``make(*params)`` has ``rule``'s expression
    exactly (the same normalised expression text), or None. A guess ``make`` refuses (ValueError, or a value out of
    range) is skipped."""
    for params in guesses:
        try:
            candidate = make(*params)
        except (ValueError, TypeError, OverflowError):
            continue
        if candidate.expression == rule.expression:
            return params
    return None


__all__ = ["MAX_LENGTH", "MAX_TREE_NODES", "program_values", "fixed_length", "static_widths", "tree_size",
           "tree_paths", "constant_value", "constants", "member"]

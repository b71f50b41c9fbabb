"""Straight-line code of an expression, and the skeleton of an exported module shared by the targets.

:func:`straight_line` turns an expression (prefix nodes of :mod:`evolve.gp.compiler`) into
steps ``t3 = op(a, b)`` in evaluation order, whose operands are feature names, constants
``k0, k1, ...`` or earlier steps; an identical subexpression (same operator, same operands)
is computed once. Straight-line code has no nesting, so an expression of any size the parser
accepts (up to :data:`evolve.gp.compiler.MAX_NODES` nodes) prints as valid Python, where
nested calls would exceed the Python parser's nesting limit.

:func:`render_module` assembles the module text from a :class:`Target` (numpy or torch): a
docstring stating the semantics, the rule's name and expression as string literals (written
with ``repr``, so no text of a champion file ever becomes code), the protected operators, the
batched ``acceptance_threshold(**columns)`` and ``residual_distribution``. The operators
follow :mod:`evolve.gp.primitives` exactly, and the final threshold follows the evaluator
(:mod:`evolve.eval.kernels`): NaN or infinite -> 0, then clamped to [0, 1].
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from evolve.gp.compiler import Node, to_string
from evolve.gp.primitives import DIV_EPS, EXP_MAX, FEATURES, LOG_EPS, PRIMITIVE_BY_NAME


@dataclass(frozen=True)
class Step:
    """One assignment ``name = primitive(*operands)``."""

    name: str
    primitive: str
    operands: tuple[str, ...]


@dataclass(frozen=True)
class StraightLine:
    """An expression as straight-line code.

    ``steps`` in evaluation order; ``result`` the name holding the raw threshold (a step, a
    feature or a constant); ``features`` the features read, in :data:`FEATURES` order;
    ``constants`` (name, float value) pairs, one per distinct value.
    """

    steps: tuple[Step, ...]
    result: str
    features: tuple[str, ...]
    constants: tuple[tuple[str, float], ...]


def straight_line(nodes: list[Node]) -> StraightLine:
    """Straight-line code of prefix ``nodes`` (see the module doc). Raises ValueError if malformed."""
    stack: list[str] = []
    steps: list[Step] = []
    seen: dict[tuple[str, tuple[str, ...]], str] = {}
    constants: dict[str, tuple[str, float]] = {}
    used: set[str] = set()
    for node in reversed(nodes):
        if node.kind == "prim":
            arity = PRIMITIVE_BY_NAME[node.value].arity
            if len(stack) < arity:
                raise ValueError("malformed expression: an operator lacks arguments")
            operands = tuple(stack.pop() for _ in range(arity))  # first argument on top
            key = (str(node.value), operands)
            if key not in seen:
                seen[key] = f"t{len(steps)}"
                steps.append(Step(seen[key], str(node.value), operands))
            stack.append(seen[key])
        elif node.kind == "feature":
            used.add(str(node.value))
            stack.append(str(node.value))
        else:
            value = float(node.value)
            bits = value.hex()  # tells 0.0 from -0.0
            if bits not in constants:
                constants[bits] = (f"k{len(constants)}", value)
            stack.append(constants[bits][0])
    if len(stack) != 1:
        raise ValueError(f"malformed expression: leaves {len(stack)} values")
    return StraightLine(tuple(steps), stack[0], tuple(f for f in FEATURES if f in used), tuple(constants.values()))


_INFIX = {"add": "+", "sub": "-", "mul": "*"}


def call(step: Step) -> str:
    """Python text of one step's right-hand side: ``a + b`` for add/sub/mul, ``_name(...)`` otherwise."""
    if step.primitive in _INFIX:
        a, b = step.operands
        return f"{a} {_INFIX[step.primitive]} {b}"
    return f"_{step.primitive}({', '.join(step.operands)})"


@dataclass(frozen=True)
class Target:
    """What differs between the exported modules of two array libraries.

    ``library`` the module imported (``numpy``); ``imports`` its import line; ``helpers``
    the text of ``_columns``, the protected operators and ``residual_distribution``;
    ``constant(value)`` the text of a float64 scalar; ``body_open`` a line (or "") that
    opens a block around the computation (numpy's ``errstate``); ``finish(result)`` the
    lines returning the clamped thresholds.
    """

    library: str
    imports: str
    helpers: str
    constant: Callable[[float], str]
    body_open: str
    finish: Callable[[str], list[str]]


_SAFE_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,80}")


def _docstring(name: str, library: str) -> str:
    shown = f"'{name}'" if _SAFE_NAME.fullmatch(name) else "RULE"
    return f'''"""Acceptance rule {shown}, exported for {library} by specdec-evolve (`python -m evolve export`).

Generated; do not edit. Standalone: imports only math and {library}.

acceptance_threshold(**columns) returns tau, float64, one threshold per element of the
broadcast columns: accept a drafted token x iff u < tau(x) with u ~ U[0, 1). Columns are
named as in the trace schema (draft_prob = q(x), target_prob = p(x), entropies in nats,
position and draft_index as numbers, top_token_match as 0/1 or bool, ...); COLUMNS lists
those this rule reads, others are accepted and only take part in the broadcast.

Semantics, identical to specdec-evolve's evaluator: div(a, b) = a / b if |b| > 1e-9 else 1;
log(a) = log|a| if |a| > 1e-9 else 0; exp(a) = exp(a) if a <= 50 else exp(50); sqrt(a) =
sqrt|a|; min, max and if_gt compare with <, > and > (a comparison with NaN is false, so NaN
takes the else branch). The threshold is 0 where it is NaN or infinite, then clamped to [0, 1].

residual_distribution(target_probs, draft_probs, tau) is the distribution to sample from
after a rejection, norm(max(0, p - q * tau)) over the last axis (the vocabulary), with tau
this rule's threshold of every token of the vocabulary at that position.
"""'''


_CHECK = '''

def _check(x):
    for name in COLUMNS:
        if name not in x:
            raise TypeError(f"acceptance_threshold() needs the column {name!r} (this rule reads {', '.join(COLUMNS)})")

'''


def render_module(name: str, nodes: list[Node], target: Target, source: str = "") -> str:
    """The text of a standalone module computing the rule ``nodes`` with ``target``'s library.

    Args: ``name`` the rule's name, ``nodes`` its prefix expression, ``source`` where it came
    from (a champion file or "registered rule"); both strings are written as ``repr`` literals.
    """
    line = straight_line(nodes)
    body = [f"    {f} = x[{f!r}]" for f in line.features]
    body += [f"    {k} = {target.constant(v)}" for k, v in line.constants]
    indent = "    "
    if target.body_open:
        body.append(f"    {target.body_open}")
        indent = "        "
    body += [f"{indent}{s.name} = {call(s)}" for s in line.steps]
    body += [f"{indent}{text}" for text in target.finish(line.result)]
    parts = [
        _docstring(name, target.library),
        "import math",
        "",
        target.imports,
        "",
        f"RULE = {name!r}",
        f"SOURCE = {source!r}",
        f"EXPRESSION = {to_string(nodes)!r}",
        "#: The columns acceptance_threshold reads.",
        f"COLUMNS = {tuple(line.features)!r}",
        "",
        f"_DIV_EPS = {DIV_EPS!r}",
        f"_LOG_EPS = {LOG_EPS!r}",
        f"_EXP_MAX = {EXP_MAX!r}",
        f"_EXP_CAP = math.exp({EXP_MAX!r})",
        _CHECK,
        target.helpers.strip("\n"),
        "",
        "",
        "def acceptance_threshold(**columns):",
        '    """Thresholds tau (float64, the broadcast shape of the columns) of every element; see the module doc."""',
        "    x, shape, device = _columns(columns)",
        "    _check(x)",
        *body,
        "",
    ]
    return "\n".join(parts)


__all__ = ["Step", "StraightLine", "Target", "call", "render_module", "straight_line"]

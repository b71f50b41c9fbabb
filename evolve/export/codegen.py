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
(:mod:`evolve.eval.fastpath.kernels`): NaN or infinite -> 0, then clamped to [0, 1].
"""
from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from typing import Callable

from evolve.gp.compiler import Node, to_string
from evolve.kinds.base import ProgramKind
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
        if node.node_type == "prim":
            arity = PRIMITIVE_BY_NAME[node.value].arity
            if len(stack) < arity:
                raise ValueError("malformed expression: an operator lacks arguments")
            operands = tuple(stack.pop() for _ in range(arity))  # first argument on top
            key = (str(node.value), operands)
            if key not in seen:
                seen[key] = f"t{len(steps)}"
                steps.append(Step(seen[key], str(node.value), operands))
            stack.append(seen[key])
        elif node.node_type == "feature":
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


#: The protected operators of :mod:`evolve.gp.primitives`, one template for every array library: ``{L}``
#: is the library's name in the module (``np``, ``torch``), whose ``where``, ``abs``, ``log``, ``exp`` and
#: ``sqrt`` have the same meaning in both.
OPERATORS = '''
def _div(a, b):
    return {L}.where({L}.abs(b) > _DIV_EPS, a / b, 1.0)


def _min(a, b):
    return {L}.where(a < b, a, b)


def _max(a, b):
    return {L}.where(a > b, a, b)


def _log(a):
    x = {L}.abs(a)
    return {L}.where(x > _LOG_EPS, {L}.log(x), 0.0)


def _exp(a):
    return {L}.where(a <= _EXP_MAX, {L}.exp(a), _EXP_CAP)


def _sqrt(a):
    return {L}.sqrt({L}.abs(a))


def _if_gt(a, b, c, d):
    return {L}.where(a > b, c, d)
'''


@dataclass(frozen=True)
class Target:
    """What differs between the exported modules of two array libraries (one row of the per-backend
    table :data:`evolve.export.exporter.TARGETS`; the rest is the shared template).

    ``library`` the module imported (``numpy``); ``imports`` its import line; ``alias`` its name in
    the module (``np``), filled into :data:`OPERATORS`; ``columns`` the text of ``_columns``
    (columns -> float64 arrays, their broadcast shape, a device); ``residual`` the text of a
    threshold module's ``residual_distribution``; ``constant(value)`` the text of a float64 scalar;
    ``array(text, like)`` the text converting ``text`` to a float64 array (on the device of the array
    named ``like``, if given); ``body_open`` a line (or "") that opens a block around the computation
    (numpy's ``errstate``); ``finish(result, value, clamp)`` the lines assigning the broadcast raw values to
    ``value`` and returning them with NaN or infinity -> 0, clamped to [0, 1] (``clamp`` False: NaN -> 0 only,
    for counts).
    """

    library: str
    imports: str
    alias: str
    columns: str
    residual: str
    constant: Callable[[float], str]
    array: Callable[[str, str | None], str]
    body_open: str
    finish: Callable[[str, str, bool], list[str]]

    @property
    def helpers(self) -> str:
        """``_columns``, the protected operators and ``residual_distribution`` (a threshold module's helpers)."""
        return "\n".join([self.columns, self.operators, self.residual])

    @property
    def operators(self) -> str:
        """:data:`OPERATORS` for this library."""
        return OPERATORS.replace("{L}", self.alias)


_SAFE_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,80}")

#: The operators' semantics, as every exported module's docstring states them.
SEMANTICS = """Semantics, identical to specdec-evolve's evaluator: div(a, b) = a / b if |b| > 1e-9 else 1;
log(a) = log|a| if |a| > 1e-9 else 0; exp(a) = exp(a) if a <= 50 else exp(50); sqrt(a) =
sqrt|a|; min, max and if_gt compare with <, > and > (a comparison with NaN is false, so NaN
takes the else branch)."""


def core_source(function: Callable) -> str:
    """The text of a numpy function of the verification core (:mod:`evolve.verification`) as an exported module
    holds it: its source, with its docstring cut to the first line, after one blank line.

    Args: a plain Python function defined at a module's top level. Returns str. Raises ValueError
    for a function without a docstring. The exported modules' residual and relaxed target come from here,
    so the core's function is the one definition of both.
    """
    text = inspect.getsource(function)
    node = ast.parse(text).body[0]
    doc = ast.get_docstring(node) if isinstance(node, ast.FunctionDef) else None
    if not doc:
        raise ValueError(f"core_source: {getattr(function, '__name__', function)!r} has no docstring")
    lines = text.splitlines(keepends=True)
    first = node.body[0]
    indent = " " * first.col_offset
    return "\n" + "".join(lines[:first.lineno - 1] + [f'{indent}"""{doc.splitlines()[0]}"""\n'] + lines[first.end_lineno:])


def shown(name: str) -> str:
    """``name`` quoted as it may appear in generated source (``'NAME'``), or ``RULE`` for a name that is not a
    plain identifier (so no text from a champion file reaches the generated code unchecked)."""
    return f"'{name}'" if _SAFE_NAME.fullmatch(name) else "RULE"


@dataclass(frozen=True)
class Layout:
    """What differs between the exported modules of two kinds of program (:mod:`evolve.kinds.registry`).

    ``kind`` the kind; ``value`` the name of the computed value in the module (``tau``, ``w``);
    ``docstring(name, library)`` the module's docstring; ``helpers(target)`` ``_columns``, the
    protected operators and the kind's public helpers for ``target``'s library;
    ``header`` lines written after ``RULE`` (a relaxation module says ``KIND``); ``summary`` the
    docstring of the module's function; ``decision``: the function returns the decision 1.0 where the
    program's value is > 0, else 0.0 (NaN: 0.0), rather than the clamped value; ``children``: it returns
    the number of children ceil(v) where v > 0, else 0.0 (NaN: 0.0; inf: every child), not clamped to
    [0, 1]; ``setting_headers``: (constant, setting) pairs: the module names the kind's own run setting ``setting``
    of the rule (:meth:`heuristics.contract.Rule.setting`, the setting's default where its run set none) as
    ``CONSTANT = ...`` (a verification-length module's ``VERIFIER``). The function is named ``kind.function_name``.
    """

    kind: ProgramKind
    value: str
    docstring: Callable[[str, str], str]
    helpers: Callable[[Target], str]
    summary: str
    header: tuple[str, ...] = ()
    decision: bool = False
    setting_headers: tuple[tuple[str, str], ...] = ()
    children: bool = False


_CHECK = '''

def _check(x):
    for name in COLUMNS:
        if name not in x:
            raise TypeError(f"{FUNCTION}() needs the column {name!r} (this rule reads {', '.join(COLUMNS)})")

'''


def render_module(name: str, nodes: list[Node], target: Target, layout: Layout, source: str = "") -> str:
    """The text of a standalone module computing the program ``nodes`` with ``target``'s library.

    Args: ``name`` the rule's name, ``nodes`` its prefix expression, ``source`` where it came
    from (a champion file or "registered rule"); both strings are written as ``repr`` literals.
    ``layout``: what the program's value is, the kind's own (``export_layout`` of its package in
    :mod:`evolve.kinds`: a threshold defines ``acceptance_threshold``, a relaxation weight ``relaxation_weight``
    and ``relaxed_target``, ...).
    """
    line = straight_line(nodes)
    function = layout.kind.function_name
    body = [f"    {f} = x[{f!r}]" for f in line.features]
    body += [f"    {k} = {target.constant(v)}" for k, v in line.constants]
    indent = "    "
    if target.body_open:
        body.append(f"    {target.body_open}")
        indent = "        "
    body += [f"{indent}{s.name} = {call(s)}" for s in line.steps]
    a = target.alias
    result = f"{a}.where({line.result} > 0, 1.0, 0.0)" if layout.decision else line.result
    if layout.children:
        result = f"{a}.where({line.result} > 0, {a}.ceil({line.result}), 0.0)"
    body += [f"{indent}{text}" for text in target.finish(result, layout.value, not layout.children)]
    parts = [
        layout.docstring(name, target.library),
        "import math",
        "",
        target.imports,
        "",
        f"RULE = {name!r}",
        *layout.header,
        f"SOURCE = {source!r}",
        f"EXPRESSION = {to_string(nodes)!r}",
        f"#: The columns {function} reads.",
        f"COLUMNS = {tuple(line.features)!r}",
        "",
        f"_DIV_EPS = {DIV_EPS!r}",
        f"_LOG_EPS = {LOG_EPS!r}",
        f"_EXP_MAX = {EXP_MAX!r}",
        f"_EXP_CAP = math.exp({EXP_MAX!r})",
        _CHECK.replace("{FUNCTION}", function),
        layout.helpers(target).strip("\n"),
        "",
        "",
        f"def {function}(**columns):",
        f'    """{layout.summary}"""',
        "    x, shape, device = _columns(columns)",
        "    _check(x)",
        *body,
        "",
    ]
    return "\n".join(parts)


__all__ = ["OPERATORS", "SEMANTICS", "Layout", "Step", "StraightLine", "Target", "call", "core_source", "shown",
           "render_module", "straight_line"]

"""Expressions, DEAP trees and postfix programs.

An expression is written in prefix call notation, the format DEAP prints a tree
in: ``min(1.0, div(target_prob, draft_prob))``. Names are primitives of
:mod:`evolve.gp.primitives` or features; numbers are constants. :func:`parse` reads
such text with a small tokenizer and an explicit stack (no ``eval``, no
recursion), so champion files can be loaded safely.

A :class:`Program` is the compact form the Numba interpreter runs: the prefix
node list reversed, so that evaluating it left to right with a stack leaves an
operator's first argument on top. It holds parallel arrays ``ops`` (int32
opcodes), ``args`` (int32: feature index into :data:`FEATURES` or constant
index) and ``consts`` (float64), and the stack depth the program needs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from evolve.errors import InputError
from evolve.gp.primitives import (
    FEATURES, PRIMITIVE_BY_NAME, Op,
)

#: Limits that keep a hostile expression from exhausting memory or time.
MAX_EXPRESSION_CHARS = 200_000
MAX_NODES = 20_000


@dataclass(frozen=True)
class Node:
    """One prefix node: ``node_type`` is ``prim``, ``feature`` or ``const``."""

    node_type: str
    value: str | float

    @property
    def arity(self) -> int:
        """Number of arguments (0 for terminals)."""
        return PRIMITIVE_BY_NAME[self.value].arity if self.node_type == "prim" else 0


#: Tokens are ASCII only: ``re.ASCII`` keeps ``\d`` and ``\s`` from matching other scripts' digits
#: and spaces (``float`` would read the fullwidth ``０.５`` as 0.5).
_TOKEN = re.compile(
    r"\s*(?:(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<punct>[(),]))",
    re.ASCII,
)
_SPACE = " \t\n\r\f\v"


def parse(text: str, source: str = "expression", features: tuple[str, ...] = FEATURES) -> list[Node]:
    """Parse prefix call notation into a prefix node list.

    Args:
        text: e.g. ``"min(1.0, div(target_prob, draft_prob))"``.
        source: name used in error messages (e.g. the champion file).
        features: feature names allowed as terminals.

    Returns: list of :class:`Node` in prefix order.

    Raises:
        InputError: unknown name, wrong number of arguments, a stray character,
            a non-finite constant, or an expression beyond the size limits. The
            message names ``source`` and the character offset.
    """
    if not isinstance(text, str):
        raise InputError(f"{source}: expression must be a string, found {type(text).__name__}")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise InputError(f"{source}: expression is longer than {MAX_EXPRESSION_CHARS} characters")
    tokens: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip(_SPACE) == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            offset = pos + len(text[pos:]) - len(text[pos:].lstrip(_SPACE))
            raise InputError(f"{source}: unexpected character {text[offset]!r} at offset {offset}")
        token_type = m.lastgroup
        if token_type == "name" and m.group(token_type) not in PRIMITIVE_BY_NAME and m.group(token_type) not in features:
            known = ", ".join(list(PRIMITIVE_BY_NAME) + list(features))
            raise InputError(f"{source}: unknown name {m.group(token_type)!r} at offset {m.start(token_type)} "
                             f"(known: {known})")
        tokens.append((token_type, m.group(token_type), m.start(token_type)))
        pos = m.end()
        if len(tokens) > 4 * MAX_NODES:
            raise InputError(f"{source}: expression has more than {MAX_NODES} nodes")

    nodes: list[Node] = []
    # each frame: [primitive name, arity, args seen, offset]
    frames: list[list] = []
    i = 0

    def expect(kind_value: str, at: int) -> None:
        if at >= len(tokens) or tokens[at][1] != kind_value:
            where = tokens[at][2] if at < len(tokens) else len(text)
            found = repr(tokens[at][1]) if at < len(tokens) else "end of text"
            raise InputError(f"{source}: expected {kind_value!r} at offset {where}, found {found}")

    while True:
        if i >= len(tokens):
            raise InputError(f"{source}: unexpected end of expression")
        token_type, tok, off = tokens[i]
        if token_type == "num":
            value = float(tok)
            if not np.isfinite(value):
                raise InputError(f"{source}: constant {tok!r} at offset {off} is not finite")
            nodes.append(Node("const", value))
            i += 1
        elif token_type == "name":
            if tok in PRIMITIVE_BY_NAME:
                nodes.append(Node("prim", tok))
                expect("(", i + 1)
                frames.append([tok, PRIMITIVE_BY_NAME[tok].arity, 0, off])
                i += 2
                if len(nodes) > MAX_NODES:
                    raise InputError(f"{source}: expression has more than {MAX_NODES} nodes")
                continue
            nodes.append(Node("feature", tok))
            i += 1
        else:
            raise InputError(f"{source}: unexpected {tok!r} at offset {off}")
        if len(nodes) > MAX_NODES:
            raise InputError(f"{source}: expression has more than {MAX_NODES} nodes")
        # close finished frames
        while frames:
            frame = frames[-1]
            frame[2] += 1
            if frame[2] < frame[1]:
                expect(",", i)
                i += 1
                break
            if i < len(tokens) and tokens[i][1] == ",":
                raise InputError(f"{source}: {frame[0]} takes {frame[1]} argument(s), "
                                 f"more given at offset {tokens[i][2]}")
            expect(")", i)
            i += 1
            frames.pop()
        if not frames:
            break
    if i != len(tokens):
        raise InputError(f"{source}: unexpected {tokens[i][1]!r} at offset {tokens[i][2]} after the expression")
    return nodes


def to_string(nodes: list[Node]) -> str:
    """Canonical prefix call notation (DEAP's format); ``parse(to_string(n)) == n``."""
    return _render(nodes, lambda name, args: f"{name}({', '.join(args)})", repr)


def to_python(nodes: list[Node]) -> str:
    """A Python expression calling the scalar primitives of :mod:`evolve.gp.primitives`."""
    return _render(nodes, lambda name, args: f"{PRIMITIVE_BY_NAME[name].python_name}({', '.join(args)})", repr)


def _render(nodes: list[Node], call, const) -> str:
    stack: list[str] = []
    for node in reversed(nodes):
        if node.node_type == "prim":
            arity = node.arity
            args = [stack.pop() for _ in range(arity)]
            stack.append(call(node.value, args))
        elif node.node_type == "feature":
            stack.append(str(node.value))
        else:
            stack.append(const(float(node.value)))
    return stack[0]


def to_sympy(nodes: list[Node]):
    """The expression as a sympy object (features become real symbols), for display."""
    import sympy as sp
    stack: list = []
    for node in reversed(nodes):
        if node.node_type == "prim":
            args = [stack.pop() for _ in range(node.arity)]
            stack.append(PRIMITIVE_BY_NAME[node.value].sympy(*args))
        elif node.node_type == "feature":
            stack.append(sp.Symbol(str(node.value), real=True))
        else:
            stack.append(sp.Float(float(node.value)))
    return stack[0]


def simplify(nodes: list[Node]) -> str:
    """A simplified, readable rendering with sympy (display only; the stored expression is exact)."""
    import sympy as sp
    expr = to_sympy(nodes)
    try:
        expr = sp.simplify(expr)
    except Exception:  # sympy may give up on Piecewise-heavy expressions; show them unsimplified
        pass
    return str(expr)


def from_tree(tree) -> list[Node]:
    """Prefix nodes of a DEAP ``PrimitiveTree`` built by :func:`evolve.gp.primitives.build_pset`."""
    from deap import gp
    nodes = []
    for node in tree:
        if isinstance(node, gp.Primitive):
            nodes.append(Node("prim", node.name))
        elif isinstance(node.value, str):
            nodes.append(Node("feature", node.value))
        else:
            nodes.append(Node("const", float(node.value)))
    return nodes


def to_tree(nodes: list[Node], pset):
    """A DEAP ``PrimitiveTree`` over ``pset`` for prefix ``nodes``.

    Constants become instances of the pset's ephemeral class, so constant
    mutation applies to them. Raises: InputError for a feature the pset lacks.
    """
    from deap import gp
    prims = {p.name: p for p in pset.primitives[pset.ret]}
    args = {t.value: t for t in pset.terminals[pset.ret] if isinstance(t, gp.Terminal) and isinstance(t.value, str)}
    eph = next(t for t in pset.terminals[pset.ret] if isinstance(t, type))
    out = []
    for node in nodes:
        if node.node_type == "prim":
            out.append(prims[node.value])
        elif node.node_type == "feature":
            if node.value not in args:
                raise InputError(f"feature {node.value!r} is not among this run's terminals (the split's features, "
                                 f"narrowed by the run's feature list)", param="features")
            out.append(args[node.value])
        else:
            c = eph()
            c.value = float(node.value)
            out.append(c)
    return gp.PrimitiveTree(out)


@dataclass(frozen=True)
class Program:
    """A compiled postfix program for the Numba interpreter.

    ``ops`` int32 (k,), ``args`` int32 (k,), ``consts`` float64 (c,);
    ``stack_size`` is the deepest stack the program reaches; ``features`` are
    the feature names it reads.
    """

    ops: np.ndarray
    args: np.ndarray
    consts: np.ndarray
    stack_size: int
    features: tuple[str, ...] = field(default=())

    @property
    def size(self) -> int:
        """Number of nodes."""
        return int(self.ops.size)


def compile_nodes(nodes: list[Node]) -> Program:
    """Compile prefix nodes to a :class:`Program` (reversed prefix = postfix with first argument on top).

    Raises: ValueError for a malformed node list (wrong arity count).
    """
    k = len(nodes)
    ops = np.empty(k, dtype=np.int32)
    args = np.zeros(k, dtype=np.int32)
    consts: list[float] = []
    used: list[str] = []
    depth = max_depth = 0
    for j, node in enumerate(reversed(nodes)):
        if node.node_type == "prim":
            prim = PRIMITIVE_BY_NAME[node.value]
            ops[j] = prim.opcode
            depth -= prim.arity - 1
            if depth < 1:
                raise ValueError("malformed program: an operator lacks arguments")
        else:
            if node.node_type == "feature":
                ops[j] = Op.FEATURE
                args[j] = FEATURES.index(node.value)
                if node.value not in used:
                    used.append(str(node.value))
            else:
                ops[j] = Op.CONST
                args[j] = len(consts)
                consts.append(float(node.value))
            depth += 1
            max_depth = max(max_depth, depth)
    if depth != 1:
        raise ValueError(f"malformed program: leaves {depth} values on the stack")
    return Program(ops, args, np.asarray(consts, dtype=np.float64), max(max_depth, 1),
                   tuple(f for f in FEATURES if f in used))


def compile_expression(text: str, source: str = "expression") -> Program:
    """:func:`parse` then :func:`compile_nodes`. Raises: InputError for bad text."""
    return compile_nodes(parse(text, source))


def compile_tree(tree) -> Program:
    """Compile a DEAP tree (see :func:`from_tree`)."""
    return compile_nodes(from_tree(tree))


def evaluate_numpy(nodes: list[Node], columns: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Reference evaluation with the numpy semantics; returns float64 (n,) raw thresholds (not clamped).

    ``columns`` maps feature names to arrays of length ``n`` (``position`` and
    ``top_token_match`` as numbers).
    """
    stack: list[np.ndarray] = []
    for node in reversed(nodes):
        if node.node_type == "prim":
            args = [stack.pop() for _ in range(node.arity)]
            stack.append(np.broadcast_to(PRIMITIVE_BY_NAME[node.value].vector(*args), (n,)))
        elif node.node_type == "feature":
            stack.append(np.asarray(columns[node.value], dtype=np.float64))
        else:
            stack.append(np.full(n, float(node.value)))
    return np.array(stack[0], dtype=np.float64)


__all__ = ["Node", "Program", "parse", "to_string", "to_python", "to_sympy", "simplify", "from_tree", "to_tree",
           "compile_nodes", "compile_expression", "compile_tree", "evaluate_numpy"]

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
from evolve.gp.kinds import RELAXATION, THRESHOLD, TREE_SHAPE, VERIFY_LENGTH, ProgramKind
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
_SEMANTICS = """Semantics, identical to specdec-evolve's evaluator: div(a, b) = a / b if |b| > 1e-9 else 1;
log(a) = log|a| if |a| > 1e-9 else 0; exp(a) = exp(a) if a <= 50 else exp(50); sqrt(a) =
sqrt|a|; min, max and if_gt compare with <, > and > (a comparison with NaN is false, so NaN
takes the else branch)."""


def _shown(name: str) -> str:
    return f"'{name}'" if _SAFE_NAME.fullmatch(name) else "RULE"


def _docstring(name: str, library: str) -> str:
    return f'''"""Acceptance rule {_shown(name)}, exported for {library} by specdec-evolve (`python -m evolve export`).

Generated; do not edit. Standalone: imports only math and {library}.

acceptance_threshold(**columns) returns tau, float64, one threshold per element of the
broadcast columns: accept a drafted token x iff u < tau(x) with u ~ U[0, 1). Columns are
named as in the trace schema (draft_prob = q(x), target_prob = p(x), entropies in nats,
position and draft_index as numbers, top_token_match as 0/1 or bool, ...); COLUMNS lists
those this rule reads, others are accepted and only take part in the broadcast.

{_SEMANTICS} The threshold is 0 where it is NaN or infinite, then clamped to [0, 1].

residual_distribution(target_probs, draft_probs, tau) is the distribution to sample from
after a rejection, norm(max(0, p - q * tau)) over the last axis (the vocabulary), with tau
this rule's threshold of every token of the vocabulary at that position.
"""'''


def _relaxation_docstring(name: str, library: str) -> str:
    return f'''"""Relaxation weight {_shown(name)}, exported for {library} by specdec-evolve (`python -m evolve export`).

Generated; do not edit. Standalone: imports only math and {library}.

relaxation_weight(**columns) returns w, float64 in [0, 1], one weight per element of the
broadcast columns: the weight of relaxed block verification at one drafted position. Its
columns are prefix-level features of the position, named as in the trace schema (position,
draft_index, draft_entropy and target_entropy in nats of the whole draft and target
distributions there, draft_top_prob, target_top_prob, overlap = sum_v min(p(v), q(v)),
top_token_match as 0/1 or bool); never a feature of the drafted token, so w is a function
of the prefix. COLUMNS lists those this weight reads, others are accepted and only take part
in the broadcast.

{_SEMANTICS} The weight is 0 where it is NaN or infinite, then clamped to [0, 1].

relaxed_target(target_probs, draft_probs, w) returns the relaxed target
p~ = (1 - w) p + w q over the last axis (the vocabulary), float64, with w one weight per
position (its shape is that of p without the last axis, or broadcasts to it).

How to deploy it: relaxed block verification. For a block of drafted tokens X_1..X_gamma,
compute w_i = relaxation_weight(...) from position i's prefix-level features and verify the
block with lossless block verification (Ziteng Sun et al. 2024, "Block verification
accelerates speculative decoding", arXiv 2403.10444) against p~_i = relaxed_target(p_i, q_i,
w_i) in place of the target's p_i: block weights min(1, P~_(i-1) p~_i(X_i) / q_i(X_i)),
residual masses, stopping probabilities and the residual distribution
norm(max(0, P~_i p~_(i+1) - q_(i+1))) all use p~. After a fully accepted block the bonus token
is drawn from p itself (w = 0 at the bonus position). Since w does not depend on the drafted
token, block verification against p~ stays exact for p~ (the mixture target of speculative
cascades, Narasimhan et al. 2024, arXiv 2405.19261): position i's token follows p~_i, at total
variation w_i TV(p_i, q_i) = w_i (1 - overlap_i) from p_i. w = 0 everywhere is lossless block
verification. Do not use w as a per-token acceptance threshold.
"""'''


def _length_docstring(name: str, library: str) -> str:
    return f'''"""Verification-length policy {_shown(name)}, exported for {library} by specdec-evolve (`python -m evolve export`).

Generated; do not edit. Standalone: imports only math and {library}.

keep_drafting(**columns) returns 1.0 or 0.0 (float64), one per element of the broadcast columns:
before each draft step, draft one more token where it is 1.0 (the policy's value v > 0), then send every drafted token
to the target and verify them with the rule VERIFIER names, the one its run used (standard_rejection: the standard
rule, lossless; block_verification: block verification, lossless; else a rule or relaxation of that name, lossy
unless it says otherwise). Its columns describe the
drafter's side of the last drafted token, known before the target is called: draft_prob (its
probability under the drafter; 1 before the first draft), draft_top_prob (the drafter's largest
probability there; 1 before the first draft), draft_entropy (nats; 0 before the first draft),
draft_cumprob (the product of the drafter's probabilities of the tokens drafted so far; 1 before
the first draft), draft_index (the number of tokens drafted so far) and position (the position
of the token about to be drafted); with n-gram prompt lookup also lookup_len (the matched n-gram's
length) and lookup_freq (the share of the earlier occurrences of the matched n-gram, followed by the
tokens drafted so far, that the token about to be drafted follows), both of the token about to be
drafted, which a lookup knows before drafting it. COLUMNS lists those this policy reads.

{_SEMANTICS} A NaN value stops drafting. Stop at the engine's longest draft length too. Where it comes from: SpecDec++ (Huang
et al. 2024, arXiv 2405.19715) stops drafting on a predicted rejection; DSpark's
confidence-scheduled verification (Cheng et al. 2026, arXiv 2607.05147) sets the verification
length from the drafter's confidences; this policy was evolved for tokens per second under a
cost file.
"""'''


def _tree_docstring(name: str, library: str) -> str:
    return f'''"""Draft-tree shape {_shown(name)}, exported for {library} by specdec-evolve (`python -m evolve export`).

Generated; do not edit. Standalone: imports only math and {library}.

tree_children(**columns) returns, per element of the broadcast columns, how many children to draw at a
node of a draft tree (float64: ceil(v) where the shape's value v > 0, else 0; NaN gives 0, inf every
child the engine allows): at the root and at every kept node, before drawing its children, draw that many
independently (with replacement) from the drafter's distribution there, then verify the tree with
SpecInfer's recursive rejection sampling (Miao et al. 2024, arXiv 2305.09781), which keeps the output
distributed as the target's. Never choose the count after seeing those children's tokens. Its columns
describe the node: draft_prob (the drafter's probability of the node's token; 1 at the root),
draft_top_prob and draft_entropy (largest probability and entropy, nats, of the drafter's distribution
the node was drawn from; 1 and 0 at the root), draft_cumprob (the product of the drafter's probabilities
from the root down to the node; 1 at the root), draft_index (the node's depth, 0 at the root),
position (tokens generated before the step), and the node's level (the nodes kept at its depth):
level_cumprob (the largest draft_cumprob there; 1 at the root) and level_rank (the node's rank there by
draft_cumprob, 0 = the most probable, ties to the node drawn first). COLUMNS lists those this shape
reads. A shape reading no level column: cap the tree at the engine's node budget and expand nodes best
first by draft_cumprob (EAGLE-2's order, Li et al. 2024, arXiv 2406.16858), as it was scored. A shape
reading one: expand level by level (draw the children of every node of a level, then compute the next
level's columns and counts), with no node budget below the tree it keeps, as it was scored.
"""'''


def _relaxed_target(target: Target) -> str:
    """``relaxed_target`` for ``target``'s library (one template, the conversions from the backend's row)."""
    return f'''
def relaxed_target(target_probs, draft_probs, w):
    """The relaxed target (1 - w) p + w q over the last axis (float64); w has p's shape without that axis."""
    p = {target.array("target_probs", None)}
    q = {target.array("draft_probs", "p")}
    w = {target.array("w", "p")}[..., None]
    return (1.0 - w) * p + w * q
'''


@dataclass(frozen=True)
class Layout:
    """What differs between the exported modules of two kinds of program (:mod:`evolve.gp.kinds`).

    ``kind`` the kind; ``value`` the name of the computed value in the module (``tau``, ``w``);
    ``docstring(name, library)`` the module's docstring; ``helpers(target)`` ``_columns``, the
    protected operators and the kind's public helpers for ``target``'s library;
    ``header`` lines written after ``RULE`` (a relaxation module says ``KIND``); ``summary`` the
    docstring of the module's function; ``decision``: the function returns the decision 1.0 where the
    program's value is > 0, else 0.0 (NaN: 0.0), rather than the clamped value; ``children``: it returns
    the number of children ceil(v) where v > 0, else 0.0 (NaN: 0.0; inf: every child), not clamped to
    [0, 1]; ``verifier_header``: the
    module names the rule's verifier (``VERIFIER = ...``, :attr:`heuristics.contract.Rule.verifier`). The
    function is named ``kind.function_name``.
    """

    kind: ProgramKind
    value: str
    docstring: Callable[[str, str], str]
    helpers: Callable[[Target], str]
    summary: str
    header: tuple[str, ...] = ()
    decision: bool = False
    verifier_header: bool = False
    children: bool = False


#: A per-token acceptance threshold: ``acceptance_threshold`` and ``residual_distribution``.
THRESHOLD_LAYOUT = Layout(THRESHOLD, "tau", _docstring, lambda target: target.helpers,
                          "Thresholds tau (float64, the broadcast shape of the columns) of every element; see the "
                          "module doc.")
#: A relaxation weight: ``relaxation_weight`` and ``relaxed_target``.
RELAXATION_LAYOUT = Layout(RELAXATION, "w", _relaxation_docstring,
                           lambda target: "\n".join([target.columns, target.operators, _relaxed_target(target)]),
                           "Weights w (float64 in [0, 1], the broadcast shape of the columns) of every element; "
                           "see the module doc.", (f"KIND = {RELAXATION.name!r}",))
#: A verification-length policy: ``keep_drafting``.
LENGTH_LAYOUT = Layout(VERIFY_LENGTH, "v", _length_docstring,
                       lambda target: "\n".join([target.columns, target.operators]),
                       "1.0 where the policy drafts one more token (its value > 0), else 0.0; see the module doc.",
                       (f"KIND = {VERIFY_LENGTH.name!r}",), decision=True, verifier_header=True)
#: A draft-tree shape: ``tree_children``.
TREE_LAYOUT = Layout(TREE_SHAPE, "v", lambda name, library: _tree_docstring(name, library),
                     lambda target: "\n".join([target.columns, target.operators]),
                     "Children to keep (float64 counts: ceil(v) where the shape's value v > 0, else 0) at every node; "
                     "see the module doc.", (f"KIND = {TREE_SHAPE.name!r}",), children=True)


_CHECK = '''

def _check(x):
    for name in COLUMNS:
        if name not in x:
            raise TypeError(f"{FUNCTION}() needs the column {name!r} (this rule reads {', '.join(COLUMNS)})")

'''


def render_module(name: str, nodes: list[Node], target: Target, source: str = "",
                  layout: Layout = THRESHOLD_LAYOUT) -> str:
    """The text of a standalone module computing the program ``nodes`` with ``target``'s library.

    Args: ``name`` the rule's name, ``nodes`` its prefix expression, ``source`` where it came
    from (a champion file or "registered rule"); both strings are written as ``repr`` literals.
    ``layout``: what the program's value is (:data:`THRESHOLD_LAYOUT`, the default, defines
    ``acceptance_threshold``; :data:`RELAXATION_LAYOUT` ``relaxation_weight`` and ``relaxed_target``).
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


__all__ = ["OPERATORS", "Layout", "LENGTH_LAYOUT", "RELAXATION_LAYOUT", "Step", "StraightLine", "THRESHOLD_LAYOUT", "TREE_LAYOUT", "Target", "call",
           "render_module", "straight_line"]

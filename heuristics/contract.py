"""The acceptance-rule contract: the :class:`Rule` class and the standard rule.

Contract: a rule maps one drafted token's features to a threshold tau; the
token is accepted iff u < tau with u ~ U[0, 1). Values outside [0, 1] are
clamped; NaN or infinity counts as 0 (reject)::

    acceptance_threshold(draft_prob: float, target_prob: float, position: int,
                         draft_entropy: float, target_entropy: float,
                         top_token_match: bool) -> float

Probabilities are q(x) and p(x) of the drafted token x, entropies are in nats.
The output of speculative sampling is distributed exactly as the target's iff
tau(x) <= p(x)/q(x) for every token; the standard rule tau = min(1, p/q)
(:data:`STANDARD_RULE`) meets this with equality where p < q (Leviathan,
Kalman, Matias 2023, arXiv 2211.17192; Chen et al. 2023, arXiv 2302.01318).

A :class:`Rule` is either

* an *expression* over the primitive set (:mod:`evolve.gp.primitives`), run by the
  fused Numba interpreter: baselines, published rules and evolved champions; or
* a Numba-compilable Python *function* with the contract's signature. A rule
  declaring ``extra_columns`` (optional schema columns such as
  ``target_top_prob``) receives them as a seventh argument, a float64 array in
  declared order.

This module holds no registry: :mod:`heuristics.registry` assembles the named
rules explicitly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from evolve.gp.compiler import Node, Program, compile_nodes, parse, to_python, to_string
from evolve.kinds.base import ProgramKind
from evolve.kinds.registry import DEFAULT_KIND, program_kind

from evolve.gp.primitives import COLUMN_FEATURES, CORE_FEATURES, FEATURES

CONTRACT_ARGUMENTS: tuple[str, ...] = CORE_FEATURES
#: The standard rule min(1, p/q) as a primitive-set expression.
STANDARD = "min(1.0, div(target_prob, draft_prob))"
#: Citation of the standard rule.
STANDARD_SOURCE = "Leviathan et al. 2023 (arXiv 2211.17192); Chen et al. 2023 (arXiv 2302.01318)"


@dataclass
class Rule:
    """A named acceptance rule (expression or function; see the module doc).

    Attributes:
        name: registry name, e.g. ``standard_rejection``.
        description: one line.
        source: paper (authors, year, arXiv id) or project the formula comes from.
        expression: prefix expression over the primitive set, or None.
        function: Python function with the contract's signature, or None.
        extra_columns: optional schema columns a function rule receives.
        lossless: whether the output is distributed exactly as the target's
            (tau <= p/q for every token).
        kind: the name of the kind of program (a registered
            :class:`evolve.kinds.base.ProgramKind`, :mod:`evolve.kinds.registry`), which says what
            the value means: ``threshold`` (the default: the acceptance threshold tau),
            ``relaxation`` (the weight w of relaxed block verification; an expression over
            prefix-level features only), ``verify-length`` (a verification-length policy),
            ``tree-shape`` (children kept per draft-tree node) or a kind registered later.
        settings: the kind's own run settings of the run that made the rule (:attr:`evolve.kinds.base.ProgramKind
            .setting_names`), as (name, value) pairs of the values other than their defaults (a champion's
            provenance records them; empty: every default), read by the kind's own code (:meth:`setting`).
    """

    name: str
    description: str = ""
    source: str = ""
    expression: str | None = None
    function: Callable | None = None
    extra_columns: tuple[str, ...] = ()
    lossless: bool = False
    kind: str = DEFAULT_KIND.name
    settings: tuple[tuple[str, str], ...] = ()
    _program: Program | None = field(default=None, init=False, repr=False)
    _nodes: list[Node] | None = field(default=None, init=False, repr=False)
    _compiled: Callable | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if (self.expression is None) == (self.function is None):
            raise ValueError(f"rule {self.name!r}: give exactly one of expression and function")
        bad = [c for c in self.extra_columns if c not in COLUMN_FEATURES]
        if bad:
            raise ValueError(f"rule {self.name!r}: unknown extra column {bad[0]!r}")
        kind = program_kind(self.kind, f"rule {self.name!r}")
        kind.check_features(self.extra_columns, f"rule {self.name!r}")
        if kind is not DEFAULT_KIND and self.expression is None:
            raise ValueError(f"rule {self.name!r}: a {kind.name} rule is an expression")
        if self.expression is not None:
            self._nodes = parse(self.expression, f"rule {self.name}")
            kind.check_features([n.value for n in self._nodes if n.node_type == "feature"], f"rule {self.name!r}")
            self.expression = to_string(self._nodes)
            self._program = compile_nodes(self._nodes)


    def setting(self, name: str) -> str | None:
        """The value of the kind's own run setting ``name`` its run set (:attr:`settings`), or None (its default)."""
        return dict(self.settings).get(name)
    @property
    def nodes(self) -> list[Node] | None:
        """Prefix nodes of an expression rule (None for a function rule)."""
        return self._nodes

    @property
    def program(self) -> Program | None:
        """Compiled postfix program of an expression rule (None for a function rule)."""
        return self._program

    @property
    def columns_needed(self) -> tuple[str, ...]:
        """Optional schema columns the rule reads."""
        if self._program is not None:
            return tuple(f for f in self._program.features if f in COLUMN_FEATURES)
        return self.extra_columns

    def compiled(self) -> Callable:
        """The Numba-compiled function of a function rule (compiled once, lazily)."""
        if self.function is None:
            raise TypeError(f"rule {self.name!r} is an expression rule")
        if self._compiled is None:
            from numba import njit
            from numba.core.registry import CPUDispatcher
            self._compiled = self.function if isinstance(self.function, CPUDispatcher) else njit(self.function)
        return self._compiled

    @property
    def program_kind(self) -> ProgramKind:
        """The rule's :class:`evolve.kinds.base.ProgramKind`."""
        return program_kind(self.kind)

    def python_source(self, function_name: str | None = None) -> str:
        """Readable, Numba-compilable Python source of an expression rule (contract signature); the
        function is named for the rule's kind (``acceptance_threshold``, ``relaxation_weight``) unless
        ``function_name`` is given."""
        if self._nodes is None:
            raise TypeError(f"rule {self.name!r} is a function rule")
        return python_source(self._nodes, function_name or self.program_kind.function_name,
                             self.description or self.name, self.program_kind)


def python_source(nodes: list[Node], function_name: str, doc: str, kind: ProgramKind = DEFAULT_KIND) -> str:
    """Source of a module defining ``function_name`` with the contract's signature for ``nodes``.

    Optional features the expression reads become keyword arguments after the
    six contract arguments; the function's docstring says what its value is (``kind``'s output).
    """
    extra = [f for f in FEATURES if f not in CORE_FEATURES and any(n.node_type == "feature" and n.value == f for n in nodes)]
    params = ", ".join(list(CONTRACT_ARGUMENTS) + [f"{e}=float('nan')" for e in extra])
    used = sorted({n.value for n in nodes if n.node_type == "prim"})
    from evolve.gp.primitives import PRIMITIVE_BY_NAME
    imports = ", ".join(sorted(PRIMITIVE_BY_NAME[u].python_name for u in used))
    lines = [
        f'"""{doc}"""',
        "from numba import njit",
        "",
    ]
    if imports:
        lines.append(f"from evolve.gp.primitives import {imports}")
    lines += [
        "",
        "",
        "@njit(cache=True)",
        f"def {function_name}({params}):",
        f'    """{kind.title[0].upper()}{kind.title[1:]}: {kind.output}."""',
        "    position = float(position)",
        "    top_token_match = 1.0 if top_token_match else 0.0",
        f"    return {to_python(nodes)}",
        "",
    ]
    return "\n".join(lines)


#: The standard rule, registered as ``standard_rejection``: lossless rejection sampling.
STANDARD_RULE = Rule("standard_rejection", "min(1, p/q): lossless rejection sampling", STANDARD_SOURCE,
                     expression=STANDARD, lossless=True)

__all__ = ["CONTRACT_ARGUMENTS", "Rule", "STANDARD", "STANDARD_RULE", "STANDARD_SOURCE", "python_source"]

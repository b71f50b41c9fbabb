"""The primitive set (version 3): features, operators and their exact semantics.

Version 2 added the history features (:data:`HISTORY_FEATURES`) at the end of :data:`FEATURES`, version 3 the
suffix-decoding features (:data:`SUFFIX_FEATURES`) after them; every feature and operator of an earlier version
keeps its index and meaning, so a program of version 1 or 2 reads and scores as before (:data:`READABLE_VERSIONS`,
:data:`VERSION_FEATURES`).

Every operator is defined once here, as a scalar Numba function (used by the
interpreter and by generated champion files) and as a numpy function (the
reference path and DEAP's stock ``gp.compile`` path). Tests check the two agree
bit for bit, NaN and infinity included.

Protected operators (Koza-style closure, all inputs are valid):

* ``div(a, b)`` = a / b if \\|b\\| > 1e-9 else 1.0
* ``log(a)``    = log(\\|a\\|) if \\|a\\| > 1e-9 else 0.0
* ``exp(a)``    = exp(a) if a <= 50 else exp(50)
* ``sqrt(a)``   = sqrt(\\|a\\|)
* ``min(a, b)`` = a if a < b else b;  ``max(a, b)`` = a if a > b else b
* ``if_gt(a, b, c, d)`` = c if a > b else d

Comparisons with NaN are false, so NaN takes the ``else`` branch everywhere.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from enum import IntEnum, unique
from typing import Callable

import numpy as np
from numba import njit

from evolve.traces.schema import LOOKUP_COLUMNS, SUFFIX_COLUMNS

PRIMITIVE_SET_VERSION = 3
#: Primitive-set versions whose programs this version reads with the same meaning (version 1: before the history
#: features; version 2: before the suffix-decoding features; their features keep their indices).
READABLE_VERSIONS: tuple[int, ...] = (1, 2, 3)

#: Features every rule receives: the arguments of the rule contract's function, in order.
CORE_FEATURES: tuple[str, ...] = (
    "draft_prob", "target_prob", "position", "draft_entropy", "target_entropy", "top_token_match",
)
#: Optional schema columns that become terminals when a dataset has them.
OPTIONAL_FEATURES: tuple[str, ...] = ("draft_index", "draft_top_prob", "target_top_prob", "overlap", "target_rank")
#: Features computed from the records rather than read from a column: ``draft_cumprob``, the product of
#: the drafter's probabilities of the block's drafted tokens up to and including the token a feature row
#: describes (in a verification-length policy's decision row, the last drafted token: the survival
#: estimate of the drafted prefix, :mod:`evolve.kinds.verify_length.eval_policy`).
DERIVED_FEATURES: tuple[str, ...] = ("draft_cumprob",)
#: Optional schema columns of n-gram prompt lookup only (:data:`evolve.traces.schema.LOOKUP_COLUMNS`): the
#: matched n-gram's length and the empirical frequency of the drafted continuation (:mod:`evolve.engine.ngram`).
LOOKUP_FEATURES: tuple[str, ...] = LOOKUP_COLUMNS
#: Features of a draft tree's level (the kept nodes at one depth of one tree), for a tree-shape program only
#: (:mod:`evolve.eval.tree_levels`): ``level_cumprob``, the largest ``draft_cumprob`` at the node's level, and
#: ``level_rank``, the node's rank there by ``draft_cumprob`` (0 = the most probable; EAGLE-2's per-depth top-k).
LEVEL_FEATURES: tuple[str, ...] = ("level_cumprob", "level_rank")
#: Features of the request so far, for a verification-length policy only (:mod:`evolve.kinds.verify_length.history`):
#: known before a speculation block's first draft and the same at every draft step of it, they describe the text's
#: earlier target calls under the policy's own choices: ``prev_verified`` and ``prev_accepted``, the drafts the
#: text's previous call verified and the target accepted; ``accept_ewma``, an exponentially weighted running
#: acceptance rate (accepted / verified) of the text's calls; ``first_hit_ewma``, the same running share of its
#: calls whose first draft was accepted (for prompt lookup: how often a lookup's continuation held); and
#: ``since_reject``, the drafts accepted since the text's last rejected draft. The position in the text is
#: ``position``.
HISTORY_FEATURES: tuple[str, ...] = ("prev_verified", "prev_accepted", "accept_ewma", "first_hit_ewma",
                                     "since_reject")
#: Optional schema columns of suffix decoding only (:data:`evolve.traces.schema.SUFFIX_COLUMNS`): what the suffix
#: tree knows of a draft before it is drafted, for a verification-length policy (:mod:`evolve.engine.suffix`): the
#: match length, each token's estimated probability and their running product, the draft's score, and whether the
#: draft continues an earlier response.
SUFFIX_FEATURES: tuple[str, ...] = SUFFIX_COLUMNS
#: All features; a program's FEATURE opcode indexes this tuple (new features are appended: an older version's keep
#: their indices).
FEATURES: tuple[str, ...] = (CORE_FEATURES + OPTIONAL_FEATURES + DERIVED_FEATURES + LOOKUP_FEATURES + LEVEL_FEATURES
                             + HISTORY_FEATURES + SUFFIX_FEATURES)
#: The features each readable primitive-set version holds (a version's features keep their FEATURES indices in later
#: versions): a program of version 1 cannot read a history feature, which version 2 introduced, nor one of version 2
#: a suffix-decoding feature, which version 3 introduced.
VERSION_FEATURES: dict[int, tuple[str, ...]] = {
    1: FEATURES[:len(FEATURES) - len(SUFFIX_FEATURES) - len(HISTORY_FEATURES)],
    2: FEATURES[:len(FEATURES) - len(SUFFIX_FEATURES)], 3: FEATURES}
#: Features read from optional schema columns (a rule reading one needs the column).
COLUMN_FEATURES: tuple[str, ...] = OPTIONAL_FEATURES + LOOKUP_FEATURES + SUFFIX_FEATURES

DIV_EPS = 1e-9
LOG_EPS = 1e-9
EXP_MAX = 50.0
EXP_CAP = math.exp(EXP_MAX)


@unique
class Op(IntEnum):
    """Opcodes of a program (:class:`evolve.gp.compiler.Program`) and of register code.

    Written once here and read by both the Python side and the Numba kernels:
    Numba types a global IntEnum member as a compile-time constant, so
    ``op == Op.ADD`` costs no more than comparing with a literal.
    Values index per-opcode tables (arity, derived rows): they run 0..N_OPCODES-1.
    """

    #: terminal: a feature row (argument: index into FEATURES)
    FEATURE = 0
    #: terminal: a constant (argument: index into the program's constants)
    CONST = 1
    ADD = 2
    SUB = 3
    MUL = 4
    DIV = 5
    MIN = 6
    MAX = 7
    LOG = 8
    EXP = 9
    SQRT = 10
    IF_GT = 11


#: Number of opcodes (the length of per-opcode tables).
N_OPCODES = len(Op)


# --- scalar semantics (Numba) ---------------------------------------------------------------

@njit(cache=True)
def add(a, b):
    """a + b (float64)."""
    return a + b


@njit(cache=True)
def sub(a, b):
    """a - b (float64)."""
    return a - b


@njit(cache=True)
def mul(a, b):
    """a * b (float64)."""
    return a * b


@njit(cache=True)
def div(a, b):
    """Protected division: a / b if |b| > 1e-9 else 1.0."""
    return a / b if abs(b) > DIV_EPS else 1.0


@njit(cache=True)
def min_(a, b):
    """a if a < b else b (NaN in a gives b)."""
    return a if a < b else b


@njit(cache=True)
def max_(a, b):
    """a if a > b else b (NaN in a gives b)."""
    return a if a > b else b


@njit(cache=True)
def log(a):
    """Protected natural log: log(|a|) if |a| > 1e-9 else 0.0 (nats)."""
    x = abs(a)
    return math.log(x) if x > LOG_EPS else 0.0


@njit(cache=True)
def exp(a):
    """Protected exp: exp(a) if a <= 50 else exp(50)."""
    return math.exp(a) if a <= EXP_MAX else EXP_CAP


@njit(cache=True)
def sqrt(a):
    """Protected square root: sqrt(|a|)."""
    return math.sqrt(abs(a))


@njit(cache=True)
def if_gt(a, b, c, d):
    """c if a > b else d."""
    return c if a > b else d


# --- numpy semantics (reference path, DEAP's gp.compile path) -------------------------------

def _np_div(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(all="ignore"):
        return np.where(np.abs(b) > DIV_EPS, a / b, 1.0)


def _np_log(a):
    x = np.abs(np.asarray(a, dtype=np.float64))
    with np.errstate(all="ignore"):
        return np.where(x > LOG_EPS, np.log(x), 0.0)


def _np_exp(a):
    a = np.asarray(a, dtype=np.float64)
    with np.errstate(all="ignore"):
        return np.where(a <= EXP_MAX, np.exp(a), EXP_CAP)


def _np_sqrt(a):
    return np.sqrt(np.abs(np.asarray(a, dtype=np.float64)))


def _np_binary(op):
    def f(a, b):
        with np.errstate(all="ignore"):
            return op(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    f.__name__ = op.__name__
    return f


def _np_min(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.where(a < b, a, b)


def _np_max(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.where(a > b, a, b)


def _np_if_gt(a, b, c, d):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.where(a > b, np.asarray(c, dtype=np.float64), np.asarray(d, dtype=np.float64))


@dataclass(frozen=True)
class Primitive:
    """One operator of the primitive set.

    ``scalar`` is the Numba function (float64 arguments), ``vector`` the numpy
    function over float64 arrays; ``python_name`` is the name generated
    champion files import from this module; ``sympy`` renders it for display.
    """

    name: str
    arity: int
    opcode: Op
    scalar: Callable
    vector: Callable
    python_name: str
    sympy: Callable


def _sympy_table():
    import sympy as sp
    return {
        "add": lambda a, b: a + b,
        "sub": lambda a, b: a - b,
        "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b,
        "min": sp.Min,
        "max": sp.Max,
        "log": lambda a: sp.log(sp.Abs(a)),
        "exp": sp.exp,
        "sqrt": lambda a: sp.sqrt(sp.Abs(a)),
        "if_gt": lambda a, b, c, d: sp.Piecewise((c, sp.StrictGreaterThan(a, b)), (d, True)),
    }


def _lazy_sympy(name: str) -> Callable:
    def render(*args):
        return _sympy_table()[name](*args)
    return render


PRIMITIVES: tuple[Primitive, ...] = (
    Primitive("add", 2, Op.ADD, add, _np_binary(np.add), "add", _lazy_sympy("add")),
    Primitive("sub", 2, Op.SUB, sub, _np_binary(np.subtract), "sub", _lazy_sympy("sub")),
    Primitive("mul", 2, Op.MUL, mul, _np_binary(np.multiply), "mul", _lazy_sympy("mul")),
    Primitive("div", 2, Op.DIV, div, _np_div, "div", _lazy_sympy("div")),
    Primitive("min", 2, Op.MIN, min_, _np_min, "min_", _lazy_sympy("min")),
    Primitive("max", 2, Op.MAX, max_, _np_max, "max_", _lazy_sympy("max")),
    Primitive("log", 1, Op.LOG, log, _np_log, "log", _lazy_sympy("log")),
    Primitive("exp", 1, Op.EXP, exp, _np_exp, "exp", _lazy_sympy("exp")),
    Primitive("sqrt", 1, Op.SQRT, sqrt, _np_sqrt, "sqrt", _lazy_sympy("sqrt")),
    Primitive("if_gt", 4, Op.IF_GT, if_gt, _np_if_gt, "if_gt", _lazy_sympy("if_gt")),
)
PRIMITIVE_BY_NAME: dict[str, Primitive] = {p.name: p for p in PRIMITIVES}

#: Range of ephemeral constants (uniform, rounded to 3 decimals).
CONSTANT_RANGE = (-1.0, 1.0)


def random_constant() -> float:
    """An ephemeral constant: uniform in [-1, 1], rounded to 3 decimals (Python's ``random``)."""
    return round(random.uniform(*CONSTANT_RANGE), 3)


def build_pset(features: tuple[str, ...] = CORE_FEATURES):
    """DEAP primitive set over ``features`` (names from :data:`FEATURES`).

    Primitives carry their numpy implementations, so ``deap.gp.compile`` gives
    DEAP's stock vectorised path. Ephemeral constants come from
    :func:`random_constant`.

    Raises: ValueError for an unknown feature name.
    """
    from deap import gp

    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise ValueError(f"unknown feature {unknown[0]!r} (known: {', '.join(FEATURES)})")
    pset = gp.PrimitiveSet("acceptance_threshold", len(features))
    pset.renameArguments(**{f"ARG{i}": name for i, name in enumerate(features)})
    for prim in PRIMITIVES:
        pset.addPrimitive(prim.vector, prim.arity, name=prim.name)
    pset.addEphemeralConstant("const", random_constant)
    return pset

"""Lowering postfix programs to register code, and packing them for one batched call.

:func:`lower` turns the postfix program of :class:`evolve.gp.compiler.Program`
into *register code*: three-address instructions (layout
:class:`evolve.eval.fastpath.layouts.Instr`) whose operands are read straight from the
feature rows of ``X``, from pre-broadcast constant rows or from registers, so
terminals cost nothing and no operand is copied onto a stack. Constant subtrees
are folded with the kernels' scalar functions, repeated subtrees inside a
program are computed once, and ``log``/``exp`` of a bare feature can read a
*derived row* computed once per split (:func:`evolve.eval.fastpath.kernels.derive_row`,
requested through :func:`derivable_pairs`). :func:`pack` concatenates lowered
programs into flat arrays with offsets (:class:`Packed`), the input of
:func:`evolve.eval.fastpath.scoring.score_packed`.

Operand encoding (int32, one per operand slot of an instruction):

* ``v >= 0``: row ``v`` of the work item's buffer: registers ``0..n_regs-1``,
  then the program's constants, each broadcast over a row;
* ``-DERIVED_BASE < v < 0``: row ``-v-1`` of ``X`` (a feature);
* ``v <= -DERIVED_BASE``: row ``-v-DERIVED_BASE`` of the derived rows ``D``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
from numba import njit

from evolve.eval.fastpath.layouts import WIDTH, Instr
from evolve.gp.primitives import FEATURES, N_OPCODES, PRIMITIVES, Op, div, exp, if_gt, log, max_, min_, sqrt

#: Operand codes <= -DERIVED_BASE read row (-v - DERIVED_BASE) of the derived rows ``D`` (see module doc).
DERIVED_BASE = 1 << 20
#: An empty derived-row matrix (programs lowered without derived rows).
NO_ROWS = np.zeros((0, 1))
#: Unary operators whose application to a feature can be precomputed as a derived row (the costly ones).
DERIVABLE = (Op.LOG, Op.EXP)


class ProgramArrays(NamedTuple):
    """The program record the compiled kernels take (Numba-compatible, built by :attr:`Packed.program_args`):
    the fields of :class:`Packed` without ``nodes``, with the same dtypes."""

    code: np.ndarray
    code_off: np.ndarray
    consts: np.ndarray
    const_off: np.ndarray
    n_regs: np.ndarray
    result: np.ndarray
    rows: int


@dataclass(frozen=True)
class Lowered:
    """One program lowered to register code.

    ``code`` int32 (WIDTH*k,): k instructions laid out as
    :class:`evolve.eval.fastpath.layouts.Instr` (opcode, destination register, up to four
    operands, encoded as in the module doc); ``consts`` float64 (c,) the
    constants broadcast into buffer rows ``n_regs..n_regs+c-1``; ``result`` is
    the operand holding the threshold. ``nodes`` is the size of the source tree,
    ``instructions`` the number of instructions actually run (after folding and
    sharing).
    """

    code: np.ndarray
    consts: np.ndarray
    n_regs: int
    result: int
    nodes: int

    @property
    def instructions(self) -> int:
        """Instructions run per tile of tokens."""
        return int(self.code.size // WIDTH)

    @property
    def rows(self) -> int:
        """Buffer rows the program needs (registers + constants)."""
        return self.n_regs + int(self.consts.size)


_CONST_BASE = -(1 << 40)  # stack encoding of constant j: _CONST_BASE - j; feature row f: -1 - f


@njit(cache=True)
def _fold(op, a, b, c, d):
    """Value of an operator on constant operands (first argument ``a``), with the kernel's scalar functions."""
    if op == Op.ADD:
        return a + b
    if op == Op.SUB:
        return a - b
    if op == Op.MUL:
        return a * b
    if op == Op.DIV:
        return div(a, b)
    if op == Op.MIN:
        return min_(a, b)
    if op == Op.MAX:
        return max_(a, b)
    if op == Op.LOG:
        return log(a)
    if op == Op.EXP:
        return exp(a)
    if op == Op.SQRT:
        return sqrt(a)
    return if_gt(a, b, c, d)


@njit(cache=True)
def _intern_const(v, cbits, cval, nc):
    """Index of constant ``v`` in the table ``cval[:nc]`` (deduplicated by its bits via ``cbits``),
    adding it if new. Returns (index, new table length)."""
    bits = np.int64(np.array([v]).view(np.int64)[0])
    if bits in cbits:
        return cbits[bits], nc
    cbits[bits] = nc
    cval[nc] = v
    return nc, nc + 1


@njit(cache=True)
def _lower(ops, args, consts, feature_rows, arity, derived):
    """Register code of one postfix program; see :func:`lower`. Returns (code, consts, n_regs, result, status).

    status 0: ok; -1: malformed; k >= 1: reads FEATURES index k-1, which the data lacks.
    ``derived`` int64 (ops, X rows): row of ``D`` holding op(feature row), or -1.
    """
    n = ops.size
    empty_code = np.zeros(0, dtype=np.int32)
    stack = np.empty(n + 1, dtype=np.int64)
    sp = 0
    cval = np.empty(n + 1)            # constant table (values), deduplicated by bits
    cbits = dict()
    cbits[np.int64(0)] = np.int64(0)
    del cbits[np.int64(0)]
    nc = 0
    node_op = np.empty(n, dtype=np.int64)
    node_args = np.empty((n, 4), dtype=np.int64)
    uses = np.zeros(n, dtype=np.int64)
    ids = dict()
    ids[(np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0))] = np.int64(0)
    del ids[(np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0))]
    nn = 0
    opnd = np.zeros(4, dtype=np.int64)
    for k in range(n):
        op = ops[k]
        if op == Op.FEATURE:
            row = feature_rows[args[k]]
            if row < 0:
                return empty_code, cval[:0], 0, 0, args[k] + 1
            stack[sp] = -1 - row
            sp += 1
        elif op == Op.CONST:
            j, nc = _intern_const(consts[args[k]], cbits, cval, nc)
            stack[sp] = _CONST_BASE - j
            sp += 1
        else:
            a = arity[op]
            if sp < a or a == 0:
                return empty_code, cval[:0], 0, 0, -1
            all_const = True
            for q in range(4):
                opnd[q] = 0
            for q in range(a):
                sp -= 1
                opnd[q] = stack[sp]
                if opnd[q] > _CONST_BASE:
                    all_const = False
            if a == 1 and -DERIVED_BASE < opnd[0] < 0 and op < derived.shape[0] \
                    and derived[op, -opnd[0] - 1] >= 0:
                stack[sp] = -DERIVED_BASE - derived[op, -opnd[0] - 1]  # a precomputed row of D
                sp += 1
                continue
            if all_const:
                x = np.zeros(4)
                for q in range(a):
                    x[q] = cval[_CONST_BASE - opnd[q]]
                j, nc = _intern_const(_fold(op, x[0], x[1], x[2], x[3]), cbits, cval, nc)
                stack[sp] = _CONST_BASE - j
                sp += 1
                continue
            key = (np.int64(op), opnd[0], opnd[1], opnd[2], opnd[3])
            if key in ids:
                nid = ids[key]
            else:
                nid = nn
                ids[key] = nid
                node_op[nn] = op
                for q in range(4):
                    node_args[nn, q] = opnd[q]
                for q in range(a):
                    if opnd[q] >= 0:
                        uses[opnd[q]] += 1
                nn += 1
            stack[sp] = nid
            sp += 1
    if sp != 1:
        return empty_code, cval[:0], 0, 0, -1
    result = stack[0]
    # registers: a node's row is taken before its operands' rows are released
    reg = np.empty(max(nn, 1), dtype=np.int64)
    free = np.empty(max(nn, 1), dtype=np.int64)
    nfree = 0
    n_regs = 0
    for i in range(nn):
        if nfree > 0:
            nfree -= 1
            reg[i] = free[nfree]
        else:
            reg[i] = n_regs
            n_regs += 1
        for q in range(arity[node_op[i]]):
            o = node_args[i, q]
            if o >= 0:
                uses[o] -= 1
                if uses[o] == 0:
                    free[nfree] = reg[o]
                    nfree += 1
    # constant rows only for constants an instruction or the result reads
    crow = np.full(max(nc, 1), -1, dtype=np.int64)
    used = 0
    out_consts = np.empty(max(nc, 1))
    code = np.zeros(WIDTH * nn, dtype=np.int32)
    for i in range(nn + 1):
        if i < nn:
            a = arity[node_op[i]]
            code[WIDTH * i + Instr.OPCODE] = node_op[i]
            code[WIDTH * i + Instr.DEST] = reg[i]
        else:
            a = 1
        for q in range(a):
            o = node_args[i, q] if i < nn else result
            if o >= 0:
                e = reg[o]
            elif o > _CONST_BASE:
                e = o  # X row -o-1
            else:
                j = _CONST_BASE - o
                if crow[j] < 0:
                    crow[j] = used
                    out_consts[used] = cval[j]
                    used += 1
                e = n_regs + crow[j]
            if i < nn:
                code[WIDTH * i + Instr.ARG0 + q] = e
            else:
                result = e
    return code, out_consts[:used].copy(), n_regs, result, 0



_NO_DERIVED = np.zeros((0, 0), dtype=np.int64)

_ARITY_TABLE = np.zeros(N_OPCODES, dtype=np.int64)
for _p in PRIMITIVES:
    _ARITY_TABLE[_p.opcode] = _p.arity


def lower(ops: np.ndarray, args: np.ndarray, consts: np.ndarray, feature_rows,
          derived: np.ndarray | None = None) -> Lowered:
    """Lower a postfix program (:class:`evolve.gp.compiler.Program` arrays) to register code.

    Args:
        ops, args, consts: the program's arrays (int32, int32, float64).
        feature_rows: for each index of :data:`evolve.gp.primitives.FEATURES`, the row
            of ``X`` holding it (a sequence of ints; negative for a missing feature).
        derived: optional int64 (opcodes, X rows): ``derived[op, row]`` is the row
            of the derived-row matrix ``D`` holding op applied to feature row ``row``
            (computed by :func:`evolve.eval.fastpath.kernels.derive_row`, bit for bit what the instruction gives),
            or -1. Such subtrees become leaves reading ``D``.

    Constant subtrees are folded with the kernel's scalar functions (so the
    value is bit for bit what per-token evaluation gives); identical subtrees
    are computed once; registers are allocated so that no instruction writes a
    row it reads (which keeps the loops vectorisable).
    Raises: ValueError for a malformed program or a feature the data lacks.
    """
    rows = feature_rows if isinstance(feature_rows, np.ndarray) else np.asarray(feature_rows, dtype=np.int64)
    code, cvals, n_regs, result, status = _lower(
        np.asarray(ops, dtype=np.int32), np.asarray(args, dtype=np.int32), np.asarray(consts, dtype=np.float64),
        rows.astype(np.int64, copy=False), _ARITY_TABLE, _NO_DERIVED if derived is None else derived)
    if status == -1:
        raise ValueError("malformed program")
    if status > 0:
        raise ValueError(f"program reads feature {FEATURES[status - 1]!r}, which the data lacks")
    return Lowered(code, cvals, int(n_regs), int(result), int(len(ops)))


def derivable_pairs(ops: np.ndarray, args: np.ndarray) -> set[tuple[int, int]]:
    """(opcode, FEATURES index) of every ``log(feature)`` / ``exp(feature)`` in postfix arrays.

    ``ops``/``args`` may be several programs concatenated (a program never starts
    with an operator, so no false pair crosses a boundary).
    """
    if ops.size < 2:
        return set()
    hit = (ops[:-1] == Op.FEATURE) & np.isin(ops[1:], DERIVABLE)
    idx = np.flatnonzero(hit)
    return set(zip(ops[idx + 1].tolist(), args[idx].tolist()))


@dataclass(frozen=True)
class Packed:
    """Lowered programs concatenated into flat arrays (the input of :func:`evolve.eval.fastpath.scoring.score_packed`).

    ``code`` int32, ``code_off`` int64 (P+1,), ``consts`` float64, ``const_off``
    int64 (P+1,), ``n_regs`` int64 (P,), ``result`` int64 (P,), ``rows`` the
    largest buffer any program needs, ``nodes`` int64 (P,) tree sizes.
    """

    code: np.ndarray
    code_off: np.ndarray
    consts: np.ndarray
    const_off: np.ndarray
    n_regs: np.ndarray
    result: np.ndarray
    rows: int
    nodes: np.ndarray

    @property
    def size(self) -> int:
        """Number of programs."""
        return int(self.result.size)

    @cached_property
    def program_args(self) -> ProgramArrays:
        """The program record of the scoring kernels (:data:`ProgramArrays`, built once)."""
        return ProgramArrays(self.code, self.code_off, self.consts, self.const_off, self.n_regs, self.result, self.rows)


def pack(lowered: list[Lowered]) -> Packed:
    """Concatenate lowered programs (see :class:`Packed`)."""
    p = len(lowered)
    code_off = np.zeros(p + 1, dtype=np.int64)
    const_off = np.zeros(p + 1, dtype=np.int64)
    for i, lo in enumerate(lowered):
        code_off[i + 1] = code_off[i] + lo.code.size
        const_off[i + 1] = const_off[i] + lo.consts.size
    code = np.concatenate([lo.code for lo in lowered]) if p else np.zeros(0, dtype=np.int32)
    consts = np.concatenate([lo.consts for lo in lowered]) if p else np.zeros(0)
    return Packed(code.astype(np.int32, copy=False), code_off, consts.astype(np.float64, copy=False),
                  const_off, np.array([lo.n_regs for lo in lowered], dtype=np.int64),
                  np.array([lo.result for lo in lowered], dtype=np.int64),
                  max([lo.rows for lo in lowered] + [1]),
                  np.array([lo.nodes for lo in lowered], dtype=np.int64))



"""The Numba interpreters for programs and the fused metric reductions.

Two paths compute the same thing:

* the **reference stack machine** (:func:`eval_block`, :func:`score_program`,
  :func:`program_thresholds`): the postfix program of
  :class:`evolve.gp.compiler.Program` run block by block over ``X`` indexed by
  :data:`evolve.gp.primitives.FEATURES`; simple, kept for tests and as the
  per-program reference;
* the **fast path** (:func:`lower`, :func:`pack`, :func:`score_packed`,
  :func:`packed_thresholds`): every program is lowered once to *register code*
  (three-address instructions whose operands are read straight from the
  feature rows of ``X``, from pre-broadcast constant rows or from registers, so
  terminals cost nothing and no operand is copied onto a stack), constant
  subtrees are folded and repeated subtrees inside a program are computed once.
  Programs are concatenated into flat arrays with offsets and a whole
  population is scored in one compiled call: work items are (program, chunk of
  tokens) pairs handed out dynamically to all threads; each item runs its
  program over cache-sized blocks of :data:`BLOCK` tokens and reduces every
  block's thresholds into counts immediately (no array of thresholds is
  materialised). One program alone is parallel over its chunks. ``log`` and
  ``exp`` of a bare feature can read a *derived row* computed once per split
  (:func:`derive_row`, used by :mod:`evolve.eval.population`). Small calls run in
  the calling thread, and mid-sized ones too while other processes hold the
  cores (:class:`_Scheduler`): the result is the same either way.

Determinism: chunk boundaries depend only on the data (:func:`chunk_bounds`),
each item's partial counts are computed sequentially, and the partials of a
program are added in chunk order, so results do not depend on the number of
threads, on the schedule, or on whether a program is scored alone or inside a
population. Operators are the scalar functions of :mod:`evolve.gp.primitives`
(bitwise equal to the numpy reference). Every loop is vectorised by LLVM
(AVX2 here) except ``log`` and ``exp``, which stay calls to the C library's
scalar functions: numpy calls the same ones for float64 on AVX2 machines, so the
bits agree. Intel SVML (``icc_rt`` on PyPI) cannot replace them: llvmlite
wheels from PyPI are built without SVML support
(``llvmlite.binding.targets.has_svml()`` is False, so Numba ignores
libsvml), and SVML's results differ from glibc's in the last bit anyway.

The counts array (float64, :data:`N_COUNTS`) holds, in order: accepts, false
accepts, false rejects, invalid thresholds, sum of tau, sum of max(0, tau - r),
sum of max(0, r - tau) (tau: the threshold after NaN/inf -> 0 and clamping to
[0, 1]; r = min(1, p/q)); then, when block metrics are requested (gamma > 0),
the number of speculation blocks, the sum over blocks of the expected tokens
per target call 1 + sum_{k<=gamma} prod_{i<=k} tau_i, and the sum over blocks
of the expected TV sum_{k<=gamma} prod_{i<k} tau_i * max(0, tau_k - r_k)
(Leviathan et al. 2023, arXiv 2211.17192; notes ``acceptance-math.md``
section 3). Integer counts are exact in float64 up to 2**53 tokens.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numba
import numpy as np
from numba import njit, prange
from numba.core import cgutils, types
from numba.np.ufunc import parallel as _numba_parallel
from numba.extending import intrinsic

from evolve.gp.primitives import (
    OP_ADD, OP_CONST, OP_DIV, OP_EXP, OP_FEATURE, OP_IF_GT, OP_LOG, OP_MAX, OP_MIN, OP_MUL,
    OP_SQRT, OP_SUB, PRIMITIVES, div, exp, if_gt, log, max_, min_, sqrt,
)

#: Tokens per interpreter block (each opcode loops over a block; registers are BLOCK-long rows).
BLOCK = 512
#: Target tokens per work item (a chunk); boundaries are moved to speculation-block starts.
CHUNK = 4096

C_ACCEPT = 0
C_FALSE_ACCEPT = 1
C_FALSE_REJECT = 2
C_INVALID = 3
C_SUM_TAU = 4
C_SUM_TV = 5
C_SUM_EXPECTED_FR = 6
C_BLOCKS = 7
C_SUM_TOKENS = 8
C_SUM_BLOCK_TV = 9
#: Counts of the seed and expected metrics (the first seven).
N_FITNESS_COUNTS = 7
N_COUNTS = 10

#: Width of one register-code instruction: opcode, destination register, four operands.
WIDTH = 6


# --- reference stack machine ------------------------------------------------------------------

@njit(cache=True)
def eval_block(ops, args, consts, X, start, m, stack):
    """Run one program over rows ``start:start+m`` of ``X``; the result is left in ``stack[0, :m]``.

    ``X`` float64 (n_features, n); ``stack`` float64 (>= stack_size, >= m).
    """
    sp = 0
    for k in range(ops.size):
        op = ops[k]
        if op == OP_FEATURE:
            row = args[k]
            for j in range(m):
                stack[sp, j] = X[row, start + j]
            sp += 1
        elif op == OP_CONST:
            c = consts[args[k]]
            for j in range(m):
                stack[sp, j] = c
            sp += 1
        elif op == OP_ADD:
            for j in range(m):
                stack[sp - 2, j] = stack[sp - 1, j] + stack[sp - 2, j]
            sp -= 1
        elif op == OP_SUB:
            for j in range(m):
                stack[sp - 2, j] = stack[sp - 1, j] - stack[sp - 2, j]
            sp -= 1
        elif op == OP_MUL:
            for j in range(m):
                stack[sp - 2, j] = stack[sp - 1, j] * stack[sp - 2, j]
            sp -= 1
        elif op == OP_DIV:
            for j in range(m):
                stack[sp - 2, j] = div(stack[sp - 1, j], stack[sp - 2, j])
            sp -= 1
        elif op == OP_MIN:
            for j in range(m):
                stack[sp - 2, j] = min_(stack[sp - 1, j], stack[sp - 2, j])
            sp -= 1
        elif op == OP_MAX:
            for j in range(m):
                stack[sp - 2, j] = max_(stack[sp - 1, j], stack[sp - 2, j])
            sp -= 1
        elif op == OP_LOG:
            for j in range(m):
                stack[sp - 1, j] = log(stack[sp - 1, j])
        elif op == OP_EXP:
            for j in range(m):
                stack[sp - 1, j] = exp(stack[sp - 1, j])
        elif op == OP_SQRT:
            for j in range(m):
                stack[sp - 1, j] = sqrt(stack[sp - 1, j])
        elif op == OP_IF_GT:
            for j in range(m):
                stack[sp - 4, j] = if_gt(stack[sp - 1, j], stack[sp - 2, j], stack[sp - 3, j], stack[sp - 4, j])
            sp -= 3


@njit(cache=True)
def accumulate_block(tau, m, start, r, u, b, counts):
    """Reduce thresholds ``tau[:m]`` of rows ``start:start+m`` into ``counts[:7]`` (see module doc).

    ``r`` float64 (n,) standard thresholds, ``u`` float64 (n,) rand_value,
    ``b`` bool (n,) baseline_accepts.
    """
    acc = 0
    fa = 0
    fr = 0
    bad = 0
    s_tau = 0.0
    s_tv = 0.0
    s_fr = 0.0
    for j in range(m):
        t = tau[j]
        if not np.isfinite(t):
            bad += 1
            t = 0.0
        elif t < 0.0:
            t = 0.0
        elif t > 1.0:
            t = 1.0
        i = start + j
        accept = u[i] < t
        base = b[i]
        acc += accept
        fa += accept and not base
        fr += base and not accept
        s_tau += t
        d = t - r[i]
        if d > 0.0:
            s_tv += d
        else:
            s_fr -= d
    counts[C_ACCEPT] += acc
    counts[C_FALSE_ACCEPT] += fa
    counts[C_FALSE_REJECT] += fr
    counts[C_INVALID] += bad
    counts[C_SUM_TAU] += s_tau
    counts[C_SUM_TV] += s_tv
    counts[C_SUM_EXPECTED_FR] += s_fr


@njit(cache=True)
def score_program(ops, args, consts, stack_size, X, r, u, b):
    """Counts (float64, N_COUNTS; block counts 0) of one program over all rows of ``X``.

    Reference stack machine, one thread; ``X`` float64 (len(FEATURES), n) indexed by
    :data:`evolve.gp.primitives.FEATURES`.
    """
    n = X.shape[1]
    stack = np.empty((max(stack_size, 1), BLOCK))
    counts = np.zeros(N_COUNTS)
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        eval_block(ops, args, consts, X, start, m, stack)
        accumulate_block(stack[0], m, start, r, u, b, counts)
    return counts


@njit(cache=True)
def program_thresholds(ops, args, consts, stack_size, X):
    """Raw thresholds (float64 (n,), not clamped) of one program over ``X`` (reference stack machine)."""
    n = X.shape[1]
    stack = np.empty((max(stack_size, 1), BLOCK))
    out = np.empty(n)
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        eval_block(ops, args, consts, X, start, m, stack)
        out[start:start + m] = stack[0, :m]
    return out


@njit(cache=True)
def score_thresholds(tau, r, u, b):
    """Counts (float64, N_COUNTS; block counts 0) of given raw thresholds ``tau`` float64 (n,)."""
    n = tau.size
    counts = np.zeros(N_COUNTS)
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        accumulate_block(tau[start:start + m], m, start, r, u, b, counts)
    return counts


@njit
def function_thresholds(fn, X, out):
    """Raw thresholds of a Numba-compiled rule with seed 004's signature, written into ``out`` (n,).

    ``fn(draft_prob, target_prob, position: int, draft_entropy, target_entropy,
    top_token_match: bool) -> float`` is called per row with rows 0..5 of ``X``
    (float64 (n_features, n), the seed features first). Not cached: Numba cannot
    cache a function that takes another function as an argument, so each rule
    costs one compilation per process.
    """
    for i in range(X.shape[1]):
        out[i] = fn(X[0, i], X[1, i], np.int64(X[2, i]), X[3, i], X[4, i], X[5, i] > 0.5)
    return out


@njit
def function_thresholds_extra(fn, X, E, out):
    """As :func:`function_thresholds` for a rule declaring extra columns.

    The rule is called with a seventh argument ``E[:, i]``, float64 (k,), the
    declared extra columns of row i in declared order (``E`` float64 (k, n)).
    """
    for i in range(X.shape[1]):
        out[i] = fn(X[0, i], X[1, i], np.int64(X[2, i]), X[3, i], X[4, i], X[5, i] > 0.5, E[:, i])
    return out


# --- fast path: lowering to register code -----------------------------------------------------

@dataclass(frozen=True)
class Lowered:
    """One program lowered to register code.

    ``code`` int32 (WIDTH*k,): per instruction opcode, destination register and
    up to four operands. An operand ``v >= 0`` is row ``v`` of the item's
    buffer (registers ``0..n_regs-1``, then the pre-broadcast constants
    ``consts``); ``v < 0`` is row ``-v-1`` of ``X``. ``result`` is the operand
    holding the threshold. ``nodes`` is the size of the source tree, ``instructions``
    the number of instructions actually run (after folding and sharing).
    """

    code: np.ndarray
    consts: np.ndarray
    n_regs: int
    result: int
    nodes: int

    @property
    def instructions(self) -> int:
        """Instructions per token block."""
        return int(self.code.size // WIDTH)

    @property
    def rows(self) -> int:
        """Buffer rows the program needs (registers + constants)."""
        return self.n_regs + int(self.consts.size)


_CONST_BASE = -(1 << 40)  # stack encoding of constant j: _CONST_BASE - j; feature row f: -1 - f


@njit(cache=True)
def _fold(op, a, b, c, d):
    """Value of an operator on constant operands (first argument ``a``), with the kernel's scalar functions."""
    if op == OP_ADD:
        return a + b
    if op == OP_SUB:
        return a - b
    if op == OP_MUL:
        return a * b
    if op == OP_DIV:
        return div(a, b)
    if op == OP_MIN:
        return min_(a, b)
    if op == OP_MAX:
        return max_(a, b)
    if op == OP_LOG:
        return log(a)
    if op == OP_EXP:
        return exp(a)
    if op == OP_SQRT:
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
        if op == OP_FEATURE:
            row = feature_rows[args[k]]
            if row < 0:
                return empty_code, cval[:0], 0, 0, args[k] + 1
            stack[sp] = -1 - row
            sp += 1
        elif op == OP_CONST:
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
            code[WIDTH * i] = node_op[i]
            code[WIDTH * i + 1] = reg[i]
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
                code[WIDTH * i + 2 + q] = e
            else:
                result = e
    return code, out_consts[:used].copy(), n_regs, result, 0


_NO_DERIVED = np.zeros((0, 0), dtype=np.int64)
#: An empty derived-row matrix (programs lowered without derived rows).
NO_ROWS = np.zeros((0, 1))
#: Unary operators whose application to a feature can be precomputed as a derived row (the costly ones).
DERIVABLE = (OP_LOG, OP_EXP)

_ARITY_TABLE = np.zeros(max(p.opcode for p in PRIMITIVES) + 1, dtype=np.int64)
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
            (computed by :func:`derive_row`, bit for bit what the instruction gives),
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
        from evolve.gp.primitives import FEATURES
        raise ValueError(f"program reads feature {FEATURES[status - 1]!r}, which the data lacks")
    return Lowered(code, cvals, int(n_regs), int(result), int(len(ops)))


@njit(cache=True)
def derive_row(op, x, out):
    """``out[:] = op(x)`` for a unary opcode, with the same loops as the interpreter (bit-identical values)."""
    n = x.size
    for s in range(0, n, BLOCK):
        m = min(BLOCK, n - s)
        if op == OP_LOG:
            _k_log(out[s:s + m], x[s:s + m], m)
        elif op == OP_EXP:
            _k_exp(out[s:s + m], x[s:s + m], m)
        else:
            _k_sqrt(out[s:s + m], x[s:s + m], m)


def derivable_pairs(ops: np.ndarray, args: np.ndarray) -> set[tuple[int, int]]:
    """(opcode, FEATURES index) of every ``log(feature)`` / ``exp(feature)`` in postfix arrays.

    ``ops``/``args`` may be several programs concatenated (a program never starts
    with an operator, so no false pair crosses a boundary).
    """
    if ops.size < 2:
        return set()
    hit = (ops[:-1] == OP_FEATURE) & np.isin(ops[1:], DERIVABLE)
    idx = np.flatnonzero(hit)
    return set(zip(ops[idx + 1].tolist(), args[idx].tolist()))


@dataclass(frozen=True)
class Packed:
    """Lowered programs concatenated into flat arrays (the input of :func:`score_packed`).

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
    def program_args(self) -> tuple:
        """The program arguments of the scoring kernels, in their order (built once)."""
        return (self.code, self.code_off, self.consts, self.const_off, self.n_regs, self.result, self.rows)


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


def chunk_bounds(n: int, depth: np.ndarray | None = None, chunk: int = CHUNK) -> np.ndarray:
    """Work-item boundaries over ``n`` tokens: int64 (C+1,), 0 = b_0 < ... < b_C = n.

    Boundaries are near multiples of ``chunk``; with ``depth`` (float64 or int
    (n,), the ``draft_index`` column) each is moved forward to the next row with
    depth 0, so no speculation block is split. They depend only on the data.
    """
    if n <= 0:
        return np.zeros(1, dtype=np.int64)
    cuts = np.arange(chunk, n, chunk, dtype=np.int64)
    if depth is not None and cuts.size:
        starts = np.flatnonzero(np.asarray(depth) == 0)
        pos = np.searchsorted(starts, cuts)
        ok = pos < starts.size
        cuts = np.unique(starts[pos[ok]])
        cuts = cuts[(cuts > 0) & (cuts < n)]
    return np.concatenate(([0], cuts, [n])).astype(np.int64)


# --- fast path: kernels -------------------------------------------------------------------------

@intrinsic
def _fetch_add(typingctx, arr, idx, val):
    """Atomically add ``val`` to ``arr[idx]`` (int64) and return the old value."""
    sig = types.int64(arr, types.intp, types.int64)

    def codegen(context, builder, signature, args):
        ary_t = signature.args[0]
        ary = context.make_array(ary_t)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, ary_t, ary, [args[1]])
        return builder.atomic_rmw("add", ptr, args[2], "monotonic")

    return sig, codegen


#: Operand codes <= -DERIVED_BASE read row (-v - DERIVED_BASE) of the derived rows ``D``.
DERIVED_BASE = 1 << 20


@njit(cache=True, inline="always")
def _operand(v, X, D, buf, s, m):
    if v >= 0:
        return buf[v, :m]
    if v > -DERIVED_BASE:
        return X[-v - 1, s:s + m]
    return D[-v - DERIVED_BASE, s:s + m]


@njit(cache=True)
def _k_add(out, a, b, m):
    for j in range(m):
        out[j] = a[j] + b[j]


@njit(cache=True)
def _k_sub(out, a, b, m):
    for j in range(m):
        out[j] = a[j] - b[j]


@njit(cache=True)
def _k_mul(out, a, b, m):
    for j in range(m):
        out[j] = a[j] * b[j]


@njit(cache=True)
def _k_div(out, a, b, m):
    for j in range(m):
        out[j] = div(a[j], b[j])


@njit(cache=True)
def _k_min(out, a, b, m):
    for j in range(m):
        out[j] = min_(a[j], b[j])


@njit(cache=True)
def _k_max(out, a, b, m):
    for j in range(m):
        out[j] = max_(a[j], b[j])


@njit(cache=True)
def _k_log(out, a, m):
    for j in range(m):
        out[j] = log(a[j])


@njit(cache=True)
def _k_exp(out, a, m):
    for j in range(m):
        out[j] = exp(a[j])


@njit(cache=True)
def _k_sqrt(out, a, m):
    for j in range(m):
        out[j] = sqrt(a[j])


@njit(cache=True)
def _k_if_gt(out, a, b, c, d, m):
    for j in range(m):
        cj = c[j]  # both branches loaded unconditionally: a select the compiler vectorises
        dj = d[j]
        out[j] = cj if a[j] > b[j] else dj


@njit(cache=True)
def run_code(code, c0, c1, X, D, buf, s, m):
    """Run instructions ``code[c0:c1]`` over tokens ``s:s+m`` (m <= BLOCK); registers are rows of ``buf``.

    Operands: registers/constants (rows of ``buf``), feature rows of ``X``, derived rows of ``D``.
    """
    for pc in range(c0, c1, WIDTH):
        op = code[pc]
        out = buf[code[pc + 1], :m]
        a = _operand(code[pc + 2], X, D, buf, s, m)
        if op == OP_ADD:
            _k_add(out, a, _operand(code[pc + 3], X, D, buf, s, m), m)
        elif op == OP_SUB:
            _k_sub(out, a, _operand(code[pc + 3], X, D, buf, s, m), m)
        elif op == OP_MUL:
            _k_mul(out, a, _operand(code[pc + 3], X, D, buf, s, m), m)
        elif op == OP_DIV:
            _k_div(out, a, _operand(code[pc + 3], X, D, buf, s, m), m)
        elif op == OP_MIN:
            _k_min(out, a, _operand(code[pc + 3], X, D, buf, s, m), m)
        elif op == OP_MAX:
            _k_max(out, a, _operand(code[pc + 3], X, D, buf, s, m), m)
        elif op == OP_LOG:
            _k_log(out, a, m)
        elif op == OP_EXP:
            _k_exp(out, a, m)
        elif op == OP_SQRT:
            _k_sqrt(out, a, m)
        else:
            _k_if_gt(out, a, _operand(code[pc + 3], X, D, buf, s, m), _operand(code[pc + 4], X, D, buf, s, m),
                     _operand(code[pc + 5], X, D, buf, s, m), m)


@njit(cache=True, fastmath={"reassoc"})
def reduce_seed(tau, r, u, m, acc):
    """Add the seed and expected counts of thresholds ``tau[:m]`` to ``acc[:7]``.

    ``r``, ``u`` float64 (>= m,): min(1, p/q) and rand_value of the same tokens.
    The baseline decision is recomputed as u < r (the schema guarantees
    ``baseline_accepts`` equals it; :class:`evolve.eval.evaluator.EvalData` checks).
    False rejects are counted as ``fa - accepts`` here: the number of baseline
    accepts, a constant of the split, is added once per program by the callers
    (:func:`_combine`), which saves a comparison and a sum per token.
    Only reassociation of the sums is allowed (it lets the loop vectorise); the
    order is fixed by the compiled code and ``m``, so it is reproducible.
    """
    n_acc = 0
    fa = 0
    bad = 0
    s_tau = 0.0
    s_tv = 0.0
    s_fr = 0.0
    for j in range(m):
        t = tau[j]
        finite = np.abs(t) < np.inf
        bad += not finite
        t = max(t, 0.0)
        t = min(t, 1.0)
        t = t if finite else 0.0
        uj = u[j]
        rj = r[j]
        a = uj < t
        n_acc += a
        fa += a > (uj < rj)
        s_tau += t
        d = t - rj
        s_tv += max(d, 0.0)
        s_fr += max(-d, 0.0)
    acc[C_ACCEPT] += n_acc
    acc[C_FALSE_ACCEPT] += fa
    acc[C_FALSE_REJECT] += fa - n_acc  # + baseline accepts: base and not accepted
    acc[C_INVALID] += bad
    acc[C_SUM_TAU] += s_tau
    acc[C_SUM_TV] += s_tv
    acc[C_SUM_EXPECTED_FR] += s_fr


@njit(cache=True)
def reduce_blocks(tau, r, depth, m, gamma, reach, acc):
    """Add block counts of thresholds ``tau[:m]`` to ``acc[7:10]``; return the running product.

    ``r``, ``depth`` float64 (>= m,): min(1, p/q) and ``draft_index`` of the
    same tokens; ``reach`` is prod_{i<k} tau_i
    carried over from the previous block of the same chunk. Rows at depth >=
    ``gamma`` are ignored.
    """
    nb = 0
    tok = 0.0
    tv = 0.0
    for j in range(m):
        d = depth[j]
        if d < gamma:
            t = tau[j]
            if not np.isfinite(t):
                t = 0.0
            elif t < 0.0:
                t = 0.0
            elif t > 1.0:
                t = 1.0
            if d == 0.0:
                reach = 1.0
                nb += 1
                tok += 1.0
            e = t - r[j]
            if e > 0.0:
                tv += reach * e
            reach *= t
            tok += reach
    acc[C_BLOCKS] += nb
    acc[C_SUM_TOKENS] += tok
    acc[C_SUM_BLOCK_TV] += tv
    return reach


@njit(cache=True)
def _item_order(code_off, bounds, n_programs):
    """Work items (program * C + chunk) in chunk-major order, programs by estimated cost, largest first.

    Chunk-major: the programs of one chunk run one after the other (on all
    threads), so the chunk's rows are read from memory once and then served
    from the caches.
    """
    n_chunks = bounds.size - 1
    n_items = n_programs * n_chunks
    if n_programs == 1:
        return np.arange(n_items)
    cost = np.empty(n_programs, dtype=np.int64)
    for p in range(n_programs):
        cost[p] = -((code_off[p + 1] - code_off[p]) // WIDTH + 2)
    order = np.argsort(cost, kind="mergesort")
    items = np.empty(n_items, dtype=np.int64)
    k = 0
    for c in range(n_chunks):
        for i in range(n_programs):
            items[k] = order[i] * n_chunks + c
            k += 1
    return items


@njit(cache=True)
def _work(code, code_off, consts, const_off, n_regs, result, rows, X, D, r, u, bounds, depth, gamma,
          items, counter, partial):
    """One worker: take items from ``counter`` until none is left; each item's counts go to ``partial[item]``."""
    n_chunks = bounds.size - 1
    buf = np.empty((rows, BLOCK))
    last_p = -1
    while True:
        k = _fetch_add(counter, 0, 1)
        if k >= items.size:
            break
        it = items[k]
        p = it // n_chunks
        c = it - p * n_chunks
        base = n_regs[p]
        if p != last_p:
            for q in range(const_off[p], const_off[p + 1]):
                row = buf[base + q - const_off[p]]
                v = consts[q]
                for j in range(BLOCK):
                    row[j] = v
            last_p = p
        acc = partial[it]
        reach = 1.0
        lo = bounds[c]
        hi = bounds[c + 1]
        for s in range(lo, hi, BLOCK):
            m = min(BLOCK, hi - s)
            run_code(code, code_off[p], code_off[p + 1], X, D, buf, s, m)
            tau = _operand(result[p], X, D, buf, s, m)
            reduce_seed(tau, r[s:s + m], u[s:s + m], m, acc)
            if gamma > 0:
                reach = reduce_blocks(tau, r[s:s + m], depth[s:s + m], m, gamma, reach, acc)


@njit(cache=True)
def _combine(partial, n_programs, n_chunks, baseline):
    """Counts (P, N_COUNTS): each program's chunk partials added in chunk order.

    ``baseline`` (the split's number of baseline accepts) starts each false-reject
    count (see :func:`reduce_seed`); integer sums in float64 are exact in any order.
    """
    out = np.zeros((n_programs, N_COUNTS))
    for p in range(n_programs):
        out[p, C_FALSE_REJECT] = baseline
        for c in range(n_chunks):
            for q in range(N_COUNTS):
                out[p, q] += partial[p * n_chunks + c, q]
    return out


@njit(cache=True, parallel=True)
def _score_parallel(code, code_off, consts, const_off, n_regs, result, rows, X, D, r, u, bounds, depth, gamma,
                    baseline, nt):
    """Counts (P, N_COUNTS) of every program, ``nt`` workers taking (program, chunk) items dynamically."""
    n_programs = result.size
    n_chunks = bounds.size - 1
    items = _item_order(code_off, bounds, n_programs)
    partial = np.zeros((items.size, N_COUNTS))
    counter = np.zeros(1, dtype=np.int64)
    for w in prange(max(1, min(nt, items.size))):
        _work(code, code_off, consts, const_off, n_regs, result, rows, X, D, r, u, bounds, depth, gamma,
              items, counter, partial)
    return _combine(partial, n_programs, n_chunks, baseline)


@njit(cache=True)
def _score_serial(code, code_off, consts, const_off, n_regs, result, rows, X, D, r, u, bounds, depth, gamma,
                  baseline):
    """As :func:`_score_parallel` in the calling thread alone (same items, same partials, same sums)."""
    n_programs = result.size
    n_chunks = bounds.size - 1
    items = _item_order(code_off, bounds, n_programs)
    partial = np.zeros((items.size, N_COUNTS))
    counter = np.zeros(1, dtype=np.int64)
    _work(code, code_off, consts, const_off, n_regs, result, rows, X, D, r, u, bounds, depth, gamma,
          items, counter, partial)
    return _combine(partial, n_programs, n_chunks, baseline)


def threads() -> int:
    """Numba's current thread count (``numba.get_num_threads()``, without its per-call overhead)."""
    global _threads_ready
    if not _threads_ready:
        numba.get_num_threads()  # launches the thread pool once
        _threads_ready = True
    try:
        n = _numba_parallel._get_num_threads()
    except Exception:  # noqa: BLE001  (private API: fall back to the public one)
        return numba.get_num_threads()
    return n if n > 0 else numba.get_num_threads()


_threads_ready = False


class _Scheduler:
    """Chooses between the parallel and the single-thread kernel of a call (results are identical).

    Work estimated below :attr:`small` seconds runs in the calling thread
    (starting threads costs more than it saves); above :attr:`large` it always
    runs on all threads. In between it runs in parallel unless recent parallel
    calls took far longer than their estimate, which happens when other
    processes occupy the cores (a woken thread then waits for a time slice,
    often tens of milliseconds): after :attr:`strikes` such calls in a row,
    mid-sized work stays in the calling thread for :attr:`backoff` seconds.
    """

    ns_per_instruction = 0.5e-9   # single-thread seconds per token per instruction (measured, rough)
    ns_per_reduction = 1.5e-9     # ... per token per program for the fused reductions
    small = 30e-6
    large = 20e-3
    backoff = 5.0
    strikes = 2

    def __init__(self) -> None:
        self.contended_until = 0.0
        self.slow_calls = 0

    def estimate(self, tokens: int, instructions: int, programs: int) -> float:
        """Estimated single-thread seconds of a call."""
        return tokens * (instructions * self.ns_per_instruction + programs * self.ns_per_reduction)

    def run(self, estimate: float, parallel: Callable, serial: Callable):
        """Run ``parallel(threads)`` or ``serial()`` (see the class doc) and return its value."""
        nt = threads()
        if nt <= 1 or estimate < self.small:
            return serial()
        if estimate >= self.large:
            return parallel(nt)
        now = time.perf_counter()
        if now < self.contended_until:
            return serial()
        value = parallel(nt)
        if time.perf_counter() - now > 4.0 * estimate + 5e-3:
            self.slow_calls += 1
            if self.slow_calls >= self.strikes:
                self.contended_until = time.perf_counter() + self.backoff
                self.slow_calls = 0
        else:
            self.slow_calls = 0
        return value


SCHEDULER = _Scheduler()


def baseline_accepts(r: np.ndarray, u: np.ndarray) -> int:
    """Number of tokens the standard rule accepts, u < r (r, u float64 (n,)); a constant of the split."""
    return int(np.count_nonzero(u < r))


def score_packed(packed: Packed, X: np.ndarray, r: np.ndarray, u: np.ndarray,
                 bounds: np.ndarray, depth: np.ndarray | None = None, gamma: int = 0,
                 D: np.ndarray | None = None, baseline: int | None = None) -> np.ndarray:
    """Counts (float64 (P, N_COUNTS)) of every packed program over all tokens, in one compiled call.

    Args:
        packed: programs from :func:`pack` (operands index rows of ``X``).
        X: float64 (n_rows, n) C-contiguous feature rows.
        r, u: float64 (n,) min(1, p/q) and rand_value (baseline_accepts is u < r).
        bounds: int64 (C+1,) chunk boundaries (:func:`chunk_bounds`).
        depth: float64 (n,) draft_index row (needed when ``gamma`` > 0).
        gamma: draft length for the block counts; 0 skips them (they stay 0).
        D: float64 (k, n) derived rows the programs were lowered against (see :func:`lower`).
        baseline: the number of tokens with u < r (:func:`baseline_accepts`), when the
            caller knows it; None counts them.

    Work items (program, chunk) run on all threads, or in the calling thread
    when the work is small (:class:`_Scheduler`); results do not depend on
    that nor on the thread count (see module doc).
    """
    n_programs = packed.result.size
    if n_programs == 0:
        return np.zeros((0, N_COUNTS))
    if depth is None:
        depth = r[:0]
        gamma = 0
    args = packed.program_args + (X, NO_ROWS if D is None else D, r, u, bounds, depth, float(gamma),
                                  float(baseline_accepts(r, u) if baseline is None else baseline))
    est = SCHEDULER.estimate(r.size, packed.code.size // WIDTH, n_programs)
    return SCHEDULER.run(est, lambda nt: _score_parallel(*args, nt), lambda: _score_serial(*args))


@njit(cache=True)
def _thresholds_chunk(code, consts, n_regs, result, rows, X, D, lo, hi, out):
    buf = np.empty((rows, BLOCK))
    for q in range(consts.size):
        buf[n_regs + q, :] = consts[q]
    for s in range(lo, hi, BLOCK):
        m = min(BLOCK, hi - s)
        run_code(code, 0, code.size, X, D, buf, s, m)
        tau = _operand(result, X, D, buf, s, m)
        for j in range(m):
            out[s + j] = tau[j]


@njit(cache=True, parallel=True)
def _thresholds_parallel(code, consts, n_regs, result, rows, X, D, bounds, out):
    for c in prange(bounds.size - 1):
        _thresholds_chunk(code, consts, n_regs, result, rows, X, D, bounds[c], bounds[c + 1], out)


@njit(cache=True)
def _thresholds_serial(code, consts, n_regs, result, rows, X, D, bounds, out):
    for c in range(bounds.size - 1):
        _thresholds_chunk(code, consts, n_regs, result, rows, X, D, bounds[c], bounds[c + 1], out)


def packed_thresholds(lowered: Lowered, X: np.ndarray, bounds: np.ndarray, D: np.ndarray | None = None) -> np.ndarray:
    """Raw thresholds (float64 (n,), not clamped) of one lowered program, parallel over chunks."""
    out = np.empty(X.shape[1])
    if X.shape[1]:
        args = (lowered.code, lowered.consts, lowered.n_regs, lowered.result, max(lowered.rows, 1), X,
                NO_ROWS if D is None else D, bounds, out)
        est = SCHEDULER.estimate(X.shape[1], lowered.instructions + 1, 0)
        SCHEDULER.run(est, lambda nt: _thresholds_parallel(*args), lambda: _thresholds_serial(*args))
    return out


@njit(cache=True)
def _tau_chunk(tau, r, u, lo, hi, depth, gamma, acc):
    reach = 1.0
    for s in range(lo, hi, BLOCK):
        m = min(BLOCK, hi - s)
        t = tau[s:s + m]
        reduce_seed(t, r[s:s + m], u[s:s + m], m, acc)
        if gamma > 0:
            reach = reduce_blocks(t, r[s:s + m], depth[s:s + m], m, gamma, reach, acc)


@njit(cache=True, parallel=True)
def _score_tau_parallel(tau, r, u, bounds, depth, gamma, baseline):
    n_chunks = bounds.size - 1
    partial = np.zeros((n_chunks, N_COUNTS))
    for c in prange(n_chunks):
        _tau_chunk(tau, r, u, bounds[c], bounds[c + 1], depth, gamma, partial[c])
    return _combine(partial, 1, n_chunks, baseline)[0]


@njit(cache=True)
def _score_tau_serial(tau, r, u, bounds, depth, gamma, baseline):
    n_chunks = bounds.size - 1
    partial = np.zeros((n_chunks, N_COUNTS))
    for c in range(n_chunks):
        _tau_chunk(tau, r, u, bounds[c], bounds[c + 1], depth, gamma, partial[c])
    return _combine(partial, 1, n_chunks, baseline)[0]


def score_tau(tau: np.ndarray, r: np.ndarray, u: np.ndarray, bounds: np.ndarray,
              depth: np.ndarray | None = None, gamma: int = 0, baseline: int | None = None) -> np.ndarray:
    """Counts (float64 (N_COUNTS,)) of given raw thresholds ``tau`` float64 (n,), parallel over chunks.

    Same reductions and chunking as :func:`score_packed` (arguments as there),
    so a program's counts equal the counts of its thresholds bit for bit.
    """
    if depth is None:
        depth = r[:0]
        gamma = 0
    args = (tau, r, u, bounds, depth, float(gamma), float(baseline_accepts(r, u) if baseline is None else baseline))
    est = SCHEDULER.estimate(tau.size, 0, 1)
    return SCHEDULER.run(est, lambda nt: _score_tau_parallel(*args), lambda: _score_tau_serial(*args))

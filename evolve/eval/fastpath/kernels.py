"""The fused Numba kernels of the fast path: register code, metric reductions, the worker loop.

One work item is a (program, chunk of tokens) pair. :func:`work` takes items
from a shared atomic counter (:func:`fetch_add`, an LLVM ``atomicrmw``
intrinsic) until none is left; each item runs its program over the chunk in
tiles of :data:`evolve.eval.fastpath.layouts.TILE` tokens with :func:`run_code` and
reduces every tile's thresholds into the item's counts at once
(:func:`reduce_fitness_counts`, :func:`reduce_block_counts`), so no array of
thresholds is materialised. :func:`combine` adds each program's chunk partials
in chunk order. Counts are laid out as :class:`evolve.eval.fastpath.layouts.Count`,
instructions as :class:`evolve.eval.fastpath.layouts.Instr`, operands as described in
:mod:`evolve.eval.fastpath.lowering`.

Determinism: chunk boundaries depend only on the data
(:func:`evolve.eval.fastpath.scheduler.chunk_bounds`), each item's partial counts are
computed sequentially, and the partials of a program are added in chunk order,
so results depend neither on the number of threads, nor on the schedule, nor on
whether a program is scored alone or inside a population. Nor on the machine: the
float sums of a tile are added in an order written in the code
(:func:`reduce_fitness_counts`), never reassociated by the compiler, whose choice
follows the host CPU's vector width. Operators are the
scalar functions of :mod:`evolve.gp.primitives` (bitwise equal to the numpy
reference). Every loop is vectorised by LLVM (AVX2 here) except ``log`` and
``exp``, which stay calls to the C library's scalar functions: numpy calls the
same ones for float64 on AVX2 machines, so the bits agree. Intel SVML
(``icc_rt`` on PyPI) cannot replace them: llvmlite wheels from PyPI are built
without SVML support (``llvmlite.binding.targets.has_svml()`` is False, so
Numba ignores libsvml), and SVML's results differ from glibc's in the last bit
anyway.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

from evolve.eval.fastpath.layouts import N_COUNTS, TILE, WIDTH, Count, Instr
from evolve.eval.fastpath.lowering import DERIVED_BASE
from evolve.gp.primitives import Op, div, exp, log, max_, min_, sqrt
from evolve.verification.tokenwise_block import clamp_threshold, expectation_step, threshold_excess


class ScoreData(NamedTuple):
    """The split record :func:`work` reads (Numba-compatible): ``X`` float64 (k, n) feature rows, ``D`` float64
    (d, n) derived rows, ``r``/``u`` float64 (n,) min(1, p/q) and rand_value, ``bounds`` int64 (C+1,) chunk
    boundaries, ``depth`` float64 (n,) draft_index, ``gamma`` the draft length (0: no block counts),
    ``baseline`` the split's number of baseline accepts (see :func:`evolve.eval.fastpath.scoring.score_packed`)."""

    X: np.ndarray
    D: np.ndarray
    r: np.ndarray
    u: np.ndarray
    bounds: np.ndarray
    depth: np.ndarray
    gamma: float
    baseline: float


class WorkQueue(NamedTuple):
    """The work queue the workers share (Numba-compatible): ``items`` int64 (P*C,) item order
    (:func:`evolve.eval.fastpath.scheduler.item_order`, item = program * C + chunk), ``counter`` int64 (1,) the
    next item to take, ``partial`` float64 (P*C, counts) each item's counts."""

    items: np.ndarray
    counter: np.ndarray
    partial: np.ndarray


@intrinsic
def fetch_add(typingctx, arr, idx, val):
    """Atomically add ``val`` to ``arr[idx]`` (int64) and return the old value."""
    sig = types.int64(arr, types.intp, types.int64)

    def codegen(context, builder, signature, args):
        ary_t = signature.args[0]
        ary = context.make_array(ary_t)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, ary_t, ary, [args[1]])
        return builder.atomic_rmw("add", ptr, args[2], "monotonic")

    return sig, codegen


@njit(cache=True, inline="always")
def operand(v, X, D, buf, s, m):
    """The float64 (m,) row an encoded operand ``v`` reads for tokens ``s:s+m`` (a view, no copy).

    A buffer row (``buf`` float64 (rows, TILE): registers and constants), a
    feature row of ``X`` float64 (k, n) or a derived row of ``D`` float64
    (d, n); the encoding is :mod:`evolve.eval.fastpath.lowering`'s.
    """
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
    """Run instructions ``code[c0:c1]`` (int32) over tokens ``s:s+m`` (m <= TILE); registers are rows of ``buf``.

    Operands: registers/constants (rows of ``buf`` float64 (rows, TILE)),
    feature rows of ``X`` float64 (k, n), derived rows of ``D`` float64 (d, n).
    """
    for pc in range(c0, c1, WIDTH):
        op = code[pc + Instr.OPCODE]
        out = buf[code[pc + Instr.DEST], :m]
        a = operand(code[pc + Instr.ARG0], X, D, buf, s, m)
        if op == Op.ADD:
            _k_add(out, a, operand(code[pc + Instr.ARG1], X, D, buf, s, m), m)
        elif op == Op.SUB:
            _k_sub(out, a, operand(code[pc + Instr.ARG1], X, D, buf, s, m), m)
        elif op == Op.MUL:
            _k_mul(out, a, operand(code[pc + Instr.ARG1], X, D, buf, s, m), m)
        elif op == Op.DIV:
            _k_div(out, a, operand(code[pc + Instr.ARG1], X, D, buf, s, m), m)
        elif op == Op.MIN:
            _k_min(out, a, operand(code[pc + Instr.ARG1], X, D, buf, s, m), m)
        elif op == Op.MAX:
            _k_max(out, a, operand(code[pc + Instr.ARG1], X, D, buf, s, m), m)
        elif op == Op.LOG:
            _k_log(out, a, m)
        elif op == Op.EXP:
            _k_exp(out, a, m)
        elif op == Op.SQRT:
            _k_sqrt(out, a, m)
        else:
            _k_if_gt(out, a, operand(code[pc + Instr.ARG1], X, D, buf, s, m), operand(code[pc + Instr.ARG2], X, D, buf, s, m),
                     operand(code[pc + Instr.ARG3], X, D, buf, s, m), m)


@njit(cache=True)
def derive_row(op, x, out):
    """``out[:] = op(x)`` for a unary opcode (float64 (n,) each), tile by tile with :func:`run_code`'s loops.

    The values are bit for bit what the instruction gives, so a program may
    read the derived row instead (see :mod:`evolve.eval.fastpath.lowering`).
    """
    n = x.size
    for s in range(0, n, TILE):
        m = min(TILE, n - s)
        if op == Op.LOG:
            _k_log(out[s:s + m], x[s:s + m], m)
        elif op == Op.EXP:
            _k_exp(out[s:s + m], x[s:s + m], m)
        else:
            _k_sqrt(out[s:s + m], x[s:s + m], m)


@njit(cache=True, inline="always")
def _clamped(t):
    """The evaluator's threshold: NaN/inf -> 0, else clamped to [0, 1] (the same operations as
    :func:`evolve.verification.tokenwise_block.clamp_threshold`, written so the loops below vectorise)."""
    finite = np.abs(t) < np.inf
    t = max(t, 0.0)
    t = min(t, 1.0)
    return t if finite else 0.0


@njit(cache=True, inline="always")
def _lane_sum(row, m):
    """sum(row[:m]) in a fixed order: 8 partial sums (row[j] into lane j mod 8) over the first m - m mod 8
    values, combined as ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), then the last m mod 8 values one
    by one (with m < 8, all of them one by one). ``row`` float64 (>= m,)."""
    main = m - m % 8
    l0 = l1 = l2 = l3 = l4 = l5 = l6 = l7 = 0.0
    for j in range(0, main, 8):
        l0 += row[j]
        l1 += row[j + 1]
        l2 += row[j + 2]
        l3 += row[j + 3]
        l4 += row[j + 4]
        l5 += row[j + 5]
        l6 += row[j + 6]
        l7 += row[j + 7]
    s = ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
    for j in range(main, m):
        s += row[j]
    return s


@njit(cache=True)
def reduce_fitness_counts(tau, r, u, m, acc, terms):
    """Add the counts ACCEPT..SUM_EXPECTED_FR of thresholds ``tau[:m]`` to ``acc`` (a :class:`Count` record).

    ``r``, ``u`` float64 (>= m,): min(1, p/q) and rand_value of the same tokens; ``terms`` float64 (3, >= m)
    scratch (each token's clamped threshold, TV and false-reject terms).
    The baseline decision is recomputed as u < r (the schema guarantees
    ``baseline_accepts`` equals it; :class:`evolve.eval.evaluator.EvalData` checks).
    False rejects are counted as ``fa - accepts`` here: the number of baseline
    accepts, a constant of the split, is added once per program by the callers
    (:func:`combine`), which saves a comparison and a sum per token.

    The three float sums are added in an order written here (:func:`_lane_sum`), whatever the machine.
    It is the order LLVM's loop vectoriser gave this loop, when it was free to reassociate the sums, on
    CPUs whose code used 2 vectors of 4 doubles (an AVX-512 Xeon's 256-bit preference); left to the
    compiler, the order followed the host CPU (16 partial sums on AMD Zen 4, fewer without AVX), and the
    last bit of an expected acceptance differed between machines. The terms are written to ``terms``
    by one vectorised loop, then summed; Numba does not run LLVM's SLP vectoriser, so a sum in a fixed
    order is not vectorised, and eight independent partial sums keep it from waiting on each addition.
    """
    n_acc = 0
    fa = 0
    bad = 0
    t_row, tv_row, fr_row = terms[0], terms[1], terms[2]
    for j in range(m):
        t = tau[j]
        bad += not (np.abs(t) < np.inf)
        t = _clamped(t)
        uj = u[j]
        rj = r[j]
        a = uj < t
        n_acc += a
        fa += a > (uj < rj)
        d = t - rj
        t_row[j] = t
        tv_row[j] = max(d, 0.0)
        fr_row[j] = max(-d, 0.0)
    acc[Count.ACCEPT] += n_acc
    acc[Count.FALSE_ACCEPT] += fa
    acc[Count.FALSE_REJECT] += fa - n_acc  # + baseline accepts: base and not accepted
    acc[Count.INVALID] += bad
    acc[Count.SUM_TAU] += _lane_sum(t_row, m)
    acc[Count.SUM_TV] += _lane_sum(tv_row, m)
    acc[Count.SUM_EXPECTED_FR] += _lane_sum(fr_row, m)


@njit(cache=True)
def reduce_block_counts(tau, r, depth, m, gamma, reach, acc):
    """Add the counts BLOCKS..SUM_BLOCK_TV of thresholds ``tau[:m]`` to ``acc``; return the running product.

    ``r``, ``depth`` float64 (>= m,): min(1, p/q) and ``draft_index`` of the
    same tokens; ``reach`` is prod_{i<k} tau_i of the speculation block under
    way, carried over from the previous tile of the same chunk (a chunk starts
    at a block start). Rows at depth >= ``gamma`` are ignored. Formulas:
    Leviathan et al. 2023, arXiv 2211.17192 (see :class:`evolve.eval.fastpath.layouts.Count`); the
    recursion is :func:`evolve.verification.tokenwise_block.expectation_step`, with the tile's running sums.
    """
    nb = 0
    tok = 0.0
    tv = 0.0
    for j in range(m):
        d = depth[j]
        if d < gamma:
            t = clamp_threshold(tau[j])
            if d == 0.0:
                reach = 1.0
                nb += 1
                tok += 1.0
            reach, tok, tv = expectation_step(reach, tok, tv, t, threshold_excess(t, r[j]))
    acc[Count.BLOCKS] += nb
    acc[Count.SUM_TOKENS] += tok
    acc[Count.SUM_BLOCK_TV] += tv
    return reach


@njit(cache=True, inline="always")
def load_constants(buf, consts, const_off, n_regs, p):
    """Broadcast program ``p``'s constants into its buffer rows ``n_regs[p]..`` (``buf`` float64 (rows, TILE))."""
    base = n_regs[p]
    for q in range(const_off[p], const_off[p + 1]):
        row = buf[base + q - const_off[p]]
        v = consts[q]
        for j in range(TILE):
            row[j] = v


@njit(cache=True)
def work(prog, data, queue):
    """One worker: take items from ``queue.counter`` until none is left; each item's counts go to ``queue.partial[item]``.

    ``prog`` the program record (:data:`evolve.eval.fastpath.lowering.ProgramArrays`),
    ``data`` the split (:data:`ScoreData`), ``queue`` the :data:`WorkQueue`
    shared by the workers (``partial`` float64 (P*C, N_COUNTS)).
    """
    code, code_off, result = prog.code, prog.code_off, prog.result
    X, D, r, u, bounds, depth, gamma = data.X, data.D, data.r, data.u, data.bounds, data.depth, data.gamma
    items, counter, partial = queue.items, queue.counter, queue.partial
    n_chunks = bounds.size - 1
    buf = np.empty((prog.rows, TILE))
    terms = np.empty((3, TILE))
    last_p = -1
    while True:
        k = fetch_add(counter, 0, 1)
        if k >= items.size:
            break
        it = items[k]
        p = it // n_chunks
        c = it - p * n_chunks
        if p != last_p:
            load_constants(buf, prog.consts, prog.const_off, prog.n_regs, p)
            last_p = p
        acc = partial[it]
        reach = 1.0
        lo = bounds[c]
        hi = bounds[c + 1]
        for s in range(lo, hi, TILE):
            m = min(TILE, hi - s)
            run_code(code, code_off[p], code_off[p + 1], X, D, buf, s, m)
            tau = operand(result[p], X, D, buf, s, m)
            reduce_fitness_counts(tau, r[s:s + m], u[s:s + m], m, acc, terms)
            if gamma > 0:
                reach = reduce_block_counts(tau, r[s:s + m], depth[s:s + m], m, gamma, reach, acc)


@njit(cache=True)
def combine(partial, n_programs, n_chunks, baseline):
    """Counts float64 (P, N_COUNTS): each program's chunk partials ``partial`` (P*C, N_COUNTS) added in chunk order.

    ``baseline`` (the split's number of baseline accepts) starts each false-reject
    count (see :func:`reduce_fitness_counts`); integer sums in float64 are exact in any order.
    """
    out = np.zeros((n_programs, N_COUNTS))
    for p in range(n_programs):
        out[p, Count.FALSE_REJECT] = baseline
        for c in range(n_chunks):
            for q in range(N_COUNTS):
                out[p, q] += partial[p * n_chunks + c, q]
    return out


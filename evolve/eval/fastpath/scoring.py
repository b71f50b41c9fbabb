"""Scoring over a split: every packed program, one lowered program's thresholds, or given thresholds.

:func:`score_packed` scores a whole population in one compiled call: work items
(program, chunk) are handed out dynamically to all threads
(:func:`evolve.eval.fastpath.kernels.work`); one program alone is parallel over its
chunks. :func:`packed_thresholds` returns the raw thresholds of one lowered
program and :func:`score_tau` reduces given thresholds with the same kernels
and chunking, so a program's counts equal the counts of its thresholds bit for
bit. Each entry point has a parallel and a single-thread compiled form with
identical results; :data:`evolve.eval.fastpath.scheduler.SCHEDULER` picks one per call.

Counts are float64 records laid out as :class:`evolve.eval.fastpath.layouts.Count`:
accepts, false accepts, false rejects, invalid thresholds, sum of tau, sum of
max(0, tau - r), sum of max(0, r - tau) (tau: the threshold after NaN/inf -> 0
and clamping to [0, 1]; r = min(1, p/q)); then, when block metrics are
requested (gamma > 0), the number of speculation blocks, the sum over blocks of
the expected tokens per target call 1 + sum_{k<=gamma} prod_{i<=k} tau_i, and
the sum over blocks of the expected TV sum_{k<=gamma} prod_{i<k} tau_i *
max(0, tau_k - r_k) (Leviathan et al. 2023, arXiv 2211.17192, section 3: a
drafted token is reached only if every earlier one of its block was accepted).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from evolve.eval.fastpath.kernels import (
    ScoreData, WorkQueue, combine, operand, reduce_block_counts, reduce_fitness_counts, run_code, work,
)
from evolve.eval.fastpath.layouts import N_COUNTS, TILE, WIDTH
from evolve.eval.fastpath.lowering import NO_ROWS, Lowered, Packed
from evolve.eval.fastpath.scheduler import SCHEDULER, item_order


@njit(cache=True, parallel=True)
def _score_parallel(prog, data, nt):
    """Counts (P, N_COUNTS) of every program (``prog`` :data:`evolve.eval.fastpath.lowering.ProgramArrays`) over the
    split ``data`` (:data:`evolve.eval.fastpath.kernels.ScoreData`), ``nt`` workers taking (program, chunk) items dynamically."""
    n_programs = prog.result.size
    n_chunks = data.bounds.size - 1
    items = item_order(prog.code_off, data.bounds, n_programs)
    queue = WorkQueue(items, np.zeros(1, dtype=np.int64), np.zeros((items.size, N_COUNTS)))
    for w in prange(max(1, min(nt, items.size))):
        work(prog, data, queue)
    return combine(queue.partial, n_programs, n_chunks, data.baseline)


@njit(cache=True)
def _score_serial(prog, data):
    """As :func:`_score_parallel` in the calling thread alone (same items, same partials, same sums)."""
    n_programs = prog.result.size
    n_chunks = data.bounds.size - 1
    items = item_order(prog.code_off, data.bounds, n_programs)
    queue = WorkQueue(items, np.zeros(1, dtype=np.int64), np.zeros((items.size, N_COUNTS)))
    work(prog, data, queue)
    return combine(queue.partial, n_programs, n_chunks, data.baseline)


def baseline_accepts(r: np.ndarray, u: np.ndarray) -> int:
    """Number of tokens the standard rule accepts, u < r (r, u float64 (n,)); a constant of the split."""
    return int(np.count_nonzero(u < r))


def score_packed(packed: Packed, X: np.ndarray, r: np.ndarray, u: np.ndarray,
                 bounds: np.ndarray, depth: np.ndarray | None = None, gamma: int = 0,
                 D: np.ndarray | None = None, baseline: int | None = None) -> np.ndarray:
    """Counts (float64 (P, N_COUNTS)) of every packed program over all tokens, in one compiled call.

    Args:
        packed: programs from :func:`evolve.eval.fastpath.lowering.pack` (operands index rows of ``X``).
        X: float64 (n_rows, n) C-contiguous feature rows.
        r, u: float64 (n,) min(1, p/q) and rand_value (baseline_accepts is u < r).
        bounds: int64 (C+1,) chunk boundaries (:func:`evolve.eval.fastpath.scheduler.chunk_bounds`).
        depth: float64 (n,) draft_index row (needed when ``gamma`` > 0).
        gamma: draft length for the block counts; 0 skips them (they stay 0).
        D: float64 (k, n) derived rows the programs were lowered against
            (see :func:`evolve.eval.fastpath.lowering.lower`).
        baseline: the number of tokens with u < r (:func:`baseline_accepts`), when the
            caller knows it; None counts them.

    Work items (program, chunk) run on all threads, or in the calling thread
    when the work is small (:data:`evolve.eval.fastpath.scheduler.SCHEDULER`); results
    depend neither on that nor on the thread count (see :mod:`evolve.eval.fastpath.kernels`).
    """
    n_programs = packed.result.size
    if n_programs == 0:
        return np.zeros((0, N_COUNTS))
    if depth is None:
        depth = r[:0]
        gamma = 0
    prog = packed.program_args
    data = ScoreData(X, NO_ROWS if D is None else D, r, u, bounds, depth, float(gamma),
                     float(baseline_accepts(r, u) if baseline is None else baseline))
    est = SCHEDULER.estimate(r.size, packed.code.size // WIDTH, n_programs)
    return SCHEDULER.run(est, lambda nt: _score_parallel(prog, data, nt), lambda: _score_serial(prog, data))


@njit(cache=True)
def _thresholds_chunk(code, consts, n_regs, result, rows, X, D, lo, hi, out):
    """Raw thresholds of tokens ``lo:hi`` into ``out[lo:hi]``, tile by tile."""
    buf = np.empty((rows, TILE))
    for q in range(consts.size):
        buf[n_regs + q, :] = consts[q]
    for s in range(lo, hi, TILE):
        m = min(TILE, hi - s)
        run_code(code, 0, code.size, X, D, buf, s, m)
        tau = operand(result, X, D, buf, s, m)
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
    """Raw thresholds (float64 (n,), not clamped) of one lowered program, parallel over chunks.

    ``X`` float64 (k, n) feature rows, ``bounds`` int64 (C+1,) chunk
    boundaries, ``D`` the derived rows the program was lowered against (if any).
    """
    out = np.empty(X.shape[1])
    if X.shape[1]:
        args = (lowered.code, lowered.consts, lowered.n_regs, lowered.result, max(lowered.rows, 1), X,
                NO_ROWS if D is None else D, bounds, out)
        est = SCHEDULER.estimate(X.shape[1], lowered.instructions + 1, 0)
        SCHEDULER.run(est, lambda nt: _thresholds_parallel(*args), lambda: _thresholds_serial(*args))
    return out


@njit(cache=True)
def _tau_chunk(tau, r, u, lo, hi, depth, gamma, acc):
    """Counts of given thresholds of tokens ``lo:hi`` added to ``acc``, tile by tile."""
    reach = 1.0
    terms = np.empty((3, TILE))
    for s in range(lo, hi, TILE):
        m = min(TILE, hi - s)
        t = tau[s:s + m]
        reduce_fitness_counts(t, r[s:s + m], u[s:s + m], m, acc, terms)
        if gamma > 0:
            reach = reduce_block_counts(t, r[s:s + m], depth[s:s + m], m, gamma, reach, acc)


@njit(cache=True, parallel=True)
def _score_tau_parallel(tau, r, u, bounds, depth, gamma, baseline):
    n_chunks = bounds.size - 1
    partial = np.zeros((n_chunks, N_COUNTS))
    for c in prange(n_chunks):
        _tau_chunk(tau, r, u, bounds[c], bounds[c + 1], depth, gamma, partial[c])
    return combine(partial, 1, n_chunks, baseline)[0]


@njit(cache=True)
def _score_tau_serial(tau, r, u, bounds, depth, gamma, baseline):
    n_chunks = bounds.size - 1
    partial = np.zeros((n_chunks, N_COUNTS))
    for c in range(n_chunks):
        _tau_chunk(tau, r, u, bounds[c], bounds[c + 1], depth, gamma, partial[c])
    return combine(partial, 1, n_chunks, baseline)[0]


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

"""Relaxed block verification of a whole population of weight programs w(features), in one compiled call.

The counterpart of :mod:`evolve.eval.fastpath.scoring` and :class:`evolve.eval.population.PopulationEvaluator`
for the relaxation weight of :mod:`evolve.eval.relaxed_block`: each program is
lowered to register code (:mod:`evolve.eval.fastpath.lowering`), work items (program,
chunk) are taken by all threads from a shared counter, every tile of a chunk
runs the program with :func:`evolve.eval.fastpath.kernels.run_code` and feeds its weights
straight into the block recursion (:func:`evolve.eval.relaxed_block.reduce_relaxed`),
so no array of weights is materialised and a program costs what a threshold
program costs in the fast path. Chunks start at block starts; each item's
counts are sequential and a program's chunk partials are added in chunk order,
so results do not depend on the thread count, the schedule or the population
(:func:`weight_thresholds` + :func:`evolve.eval.relaxed_block.relaxed_counts`
give the same counts for one program).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from evolve.errors import InputError
from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.eval.evaluator import check_features
from evolve.eval.fastpath.kernels import WorkQueue, fetch_add, load_constants, operand, run_code
from evolve.eval.fastpath.layouts import TILE, WIDTH
from evolve.eval.fastpath.lowering import NO_ROWS, Packed
from evolve.eval.population import PopulationEvaluator
from evolve.eval.relaxed_block import (
    N_CARRY, N_RELAXED, RelaxedData, check_weight_features, close_block, metrics_from_relaxed, reduce_relaxed,
    relaxed_of,
)
from evolve.eval.fastpath.scheduler import SCHEDULER, item_order


@njit(cache=True)
def relaxed_work(prog, X, D, cols, queue):
    """One worker: take (program, chunk) items from ``queue.counter`` until none is left (counts into
    ``queue.partial[item]``).

    ``prog`` the program record (:data:`evolve.eval.fastpath.lowering.ProgramArrays`); ``X``
    float64 (k, n) feature rows, ``D`` derived rows; ``cols`` the split's
    :data:`evolve.eval.relaxed_block.RelaxedColumns`; ``queue`` the
    :data:`evolve.eval.fastpath.kernels.WorkQueue` shared by the workers (``partial`` float64 (P*C, N_RELAXED)).
    """
    code, code_off, result = prog.code, prog.code_off, prog.result
    bounds = cols.bounds
    items, counter, partial = queue.items, queue.counter, queue.partial
    n_chunks = bounds.size - 1
    buf = np.empty((prog.rows, TILE))
    st = np.zeros(N_CARRY)
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
        st[:] = 0.0
        lo = bounds[c]
        hi = bounds[c + 1]
        for s in range(lo, hi, TILE):
            m = min(TILE, hi - s)
            run_code(code, code_off[p], code_off[p + 1], X, D, buf, s, m)
            w = operand(result[p], X, D, buf, s, m)
            reduce_relaxed(w, s, m, cols, st, acc)
        close_block(st, acc)


@njit(cache=True)
def _combine(partial, n_programs, n_chunks):
    out = np.zeros((n_programs, N_RELAXED))
    for p in range(n_programs):
        for c in range(n_chunks):
            for q in range(N_RELAXED):
                out[p, q] += partial[p * n_chunks + c, q]
    return out


@njit(cache=True, parallel=True)
def _relaxed_parallel(prog, X, D, cols, nt):
    n_programs = prog.result.size
    items = item_order(prog.code_off, cols.bounds, n_programs)
    queue = WorkQueue(items, np.zeros(1, dtype=np.int64), np.zeros((items.size, N_RELAXED)))
    for _ in prange(max(1, min(nt, items.size))):
        relaxed_work(prog, X, D, cols, queue)
    return _combine(queue.partial, n_programs, cols.bounds.size - 1)


@njit(cache=True)
def _relaxed_serial(prog, X, D, cols):
    n_programs = prog.result.size
    items = item_order(prog.code_off, cols.bounds, n_programs)
    queue = WorkQueue(items, np.zeros(1, dtype=np.int64), np.zeros((items.size, N_RELAXED)))
    relaxed_work(prog, X, D, cols, queue)
    return _combine(queue.partial, n_programs, cols.bounds.size - 1)


def score_relaxed_packed(packed: Packed, X: np.ndarray, rd: RelaxedData, gamma: int,
                         D: np.ndarray | None = None) -> np.ndarray:
    """Counts (float64 (P, N_RELAXED), :class:`evolve.eval.relaxed_block.RelaxedCount`) of every packed weight
    program over a split, in one compiled call.

    ``X`` float64 (k, n) the split's feature rows (the programs' operands),
    ``rd`` its :class:`RelaxedData`, ``gamma`` >= 1 the draft length, ``D``
    the derived rows the programs were lowered against.
    """
    n_programs = packed.result.size
    if n_programs == 0:
        return np.zeros((0, N_RELAXED))
    args = (packed.program_args, X, NO_ROWS if D is None else D, rd.columns(gamma))
    est = SCHEDULER.estimate(rd.n, packed.code.size // WIDTH, n_programs)
    return SCHEDULER.run(est, lambda nt: _relaxed_parallel(*args, nt), lambda: _relaxed_serial(*args))


@dataclass
class RelaxedPopulationEvaluator(PopulationEvaluator):
    """A :class:`evolve.eval.population.PopulationEvaluator` whose individuals are relaxation weights w(features).

    Same caching, statistics and call pattern; each individual's result is a
    :class:`evolve.eval.relaxed_block.RelaxedMetrics` (tokens per call, TV per
    token, speedup, mean weight) instead of a threshold rule's Metrics. The
    split's relaxed columns come from :func:`evolve.eval.relaxed_block.relaxed_of`.

    Raises (constructor): InputError for a bad gamma (a gamma is required) or a
    split without the relaxed columns; (evaluate) InputError for a program that
    reads a feature the split lacks or one that depends on the drafted token.
    """

    def __post_init__(self) -> None:
        if self.gamma is None:
            raise InputError("gamma (the draft length) is required by relaxed block verification")
        super().__post_init__()
        if self._gamma == 0:
            raise InputError(f"{self.data.source}: relaxed block verification needs column 'draft_index'")
        self.relaxed = relaxed_of(self.data)

    def _check(self, program) -> None:
        check_features(program, self.data, "weight")
        check_weight_features(program.features)

    def _counts(self, packed, D, lowered=()):
        return score_relaxed_packed(packed, self.data.X, self.relaxed, self._gamma, D)

    def _metrics(self, counts):
        return metrics_from_relaxed(counts, self.data.n, self._gamma, self.costs)


def weight_thresholds(program, data) -> np.ndarray:
    """Raw weights (float64 (n,), before NaN handling and clamping) of one weight program on an EvalData."""
    from evolve.eval.evaluator import thresholds
    check_weight_features(program.features)
    return thresholds(program, data)


def evaluate_relaxed(individuals, data, gamma: int, costs: Costs = DEFAULT_COSTS):
    """:class:`RelaxedMetrics` of every weight program (expressions, trees, Programs) on ``data``, one batched call.

    Raises: InputError as :class:`RelaxedPopulationEvaluator`.
    """
    return RelaxedPopulationEvaluator(data, gamma=gamma, costs=costs, cache_size=0).evaluate(individuals)


__all__ = ["relaxed_work", "score_relaxed_packed", "RelaxedPopulationEvaluator", "weight_thresholds",
           "evaluate_relaxed"]

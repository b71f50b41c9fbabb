"""Relaxed block verification of a whole population of weight programs w(features), in one compiled call.

The counterpart of :mod:`evolve.eval.scoring` and :class:`evolve.eval.population.PopulationEvaluator`
for the relaxation weight of :mod:`evolve.kinds.relaxation.eval_block`: each program is
lowered to register code (:mod:`evolve.eval.lowering`), work items (program,
chunk) are taken by all threads from a shared counter, every tile of a chunk
runs the program with :func:`evolve.eval.kernels.run_code` and feeds its weights
straight into the block recursion (:func:`evolve.kinds.relaxation.eval_block.reduce_relaxed`),
so no array of weights is materialised and a program costs what a threshold
program costs in the fast path. Chunks start at block starts; each item's
counts are sequential and a program's chunk partials are added in chunk order,
so results do not depend on the thread count, the schedule or the population
(:func:`weight_thresholds` + :func:`evolve.kinds.relaxation.eval_block.relaxed_counts`
give the same counts for one program).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from evolve.errors import InputError
from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.eval.evaluator import check_features
from evolve.eval.kernels import fetch_add, load_constants, operand, run_code
from evolve.eval.layouts import TILE, WIDTH
from evolve.eval.lowering import NO_ROWS, Packed
from evolve.eval.population import PopulationEvaluator
from evolve.kinds.relaxation.eval_block import (
    N_CARRY, N_RELAXED, RelaxedData, check_weight_features, close_block, metrics_from_relaxed, reduce_relaxed,
    relaxed_of,
)
from evolve.eval.scheduler import SCHEDULER, item_order


@njit(cache=True)
def relaxed_work(code, code_off, consts, const_off, n_regs, result, rows, X, D, ratio, depth, overlap, mass, phi,
                 bounds, gamma, items, counter, partial):
    """One worker: take (program, chunk) items from ``counter`` until none is left (counts into ``partial[item]``).

    Program arrays as :class:`evolve.eval.lowering.Packed`; ``X`` float64 (k, n)
    feature rows, ``D`` derived rows; the split's arrays as
    :class:`evolve.kinds.relaxation.eval_block.RelaxedData`; ``partial`` float64 (P*C, N_RELAXED).
    """
    n_chunks = bounds.size - 1
    buf = np.empty((rows, TILE))
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
            load_constants(buf, consts, const_off, n_regs, p)
            last_p = p
        acc = partial[it]
        st[:] = 0.0
        lo = bounds[c]
        hi = bounds[c + 1]
        for s in range(lo, hi, TILE):
            m = min(TILE, hi - s)
            run_code(code, code_off[p], code_off[p + 1], X, D, buf, s, m)
            w = operand(result[p], X, D, buf, s, m)
            reduce_relaxed(w, s, m, ratio, depth, overlap, mass, phi, gamma, st, acc)
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
def _relaxed_parallel(code, code_off, consts, const_off, n_regs, result, rows, X, D, ratio, depth, overlap, mass, phi,
                      bounds, gamma, nt):
    n_programs = result.size
    items = item_order(code_off, bounds, n_programs)
    partial = np.zeros((items.size, N_RELAXED))
    counter = np.zeros(1, dtype=np.int64)
    for _ in prange(max(1, min(nt, items.size))):
        relaxed_work(code, code_off, consts, const_off, n_regs, result, rows, X, D, ratio, depth, overlap, mass, phi,
                     bounds, gamma, items, counter, partial)
    return _combine(partial, n_programs, bounds.size - 1)


@njit(cache=True)
def _relaxed_serial(code, code_off, consts, const_off, n_regs, result, rows, X, D, ratio, depth, overlap, mass, phi,
                    bounds, gamma):
    n_programs = result.size
    items = item_order(code_off, bounds, n_programs)
    partial = np.zeros((items.size, N_RELAXED))
    counter = np.zeros(1, dtype=np.int64)
    relaxed_work(code, code_off, consts, const_off, n_regs, result, rows, X, D, ratio, depth, overlap, mass, phi,
                 bounds, gamma, items, counter, partial)
    return _combine(partial, n_programs, bounds.size - 1)


def score_relaxed_packed(packed: Packed, X: np.ndarray, rd: RelaxedData, gamma: int,
                         D: np.ndarray | None = None) -> np.ndarray:
    """Counts (float64 (P, N_RELAXED), :class:`evolve.kinds.relaxation.eval_block.RelaxedCount`) of every packed weight
    program over a split, in one compiled call.

    ``X`` float64 (k, n) the split's feature rows (the programs' operands),
    ``rd`` its :class:`RelaxedData`, ``gamma`` >= 1 the draft length, ``D``
    the derived rows the programs were lowered against.
    """
    n_programs = packed.result.size
    if n_programs == 0:
        return np.zeros((0, N_RELAXED))
    args = packed.program_args + (X, NO_ROWS if D is None else D, rd.ratio, rd.depth, rd.overlap, rd.mass, rd.phi,
                                  rd.bounds, float(gamma))
    est = SCHEDULER.estimate(rd.n, packed.code.size // WIDTH, n_programs)
    return SCHEDULER.run(est, lambda nt: _relaxed_parallel(*args, nt), lambda: _relaxed_serial(*args))


@dataclass
class RelaxedPopulationEvaluator(PopulationEvaluator):
    """A :class:`evolve.eval.population.PopulationEvaluator` whose individuals are relaxation weights w(features).

    Same caching, statistics and call pattern; each individual's result is a
    :class:`evolve.kinds.relaxation.eval_block.RelaxedMetrics` (tokens per call, TV per
    token, speedup, mean weight) instead of a threshold rule's Metrics. The
    split's relaxed columns come from :func:`evolve.kinds.relaxation.eval_block.relaxed_of`.

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

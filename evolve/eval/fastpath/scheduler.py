"""Work scheduling of the fast path: chunk boundaries, item order, threads, serial or parallel.

The tokens of a split are cut into chunks of about
:data:`evolve.eval.fastpath.layouts.CHUNK` tokens at speculation-block starts
(:func:`chunk_bounds`); a work item is a (program, chunk) pair and
:func:`item_order` lists the items in the order workers take them. A call runs
on all of Numba's threads or in the calling thread alone (:data:`SCHEDULER`):
small calls run in the calling thread, and mid-sized ones too while other
processes hold the cores. The result is the same either way (see
:mod:`evolve.eval.fastpath.kernels`).
"""
from __future__ import annotations

import time
from typing import Callable

import numba
import numpy as np
from numba import njit
from numba.np.ufunc import parallel as _numba_parallel

from evolve.eval.fastpath.layouts import CHUNK, WIDTH


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


@njit(cache=True)
def item_order(code_off, bounds, n_programs):
    """Work items int64 (P*C,) (item = program * C + chunk) in chunk-major order, programs by cost, largest first.

    ``code_off`` int64 (P+1,) instruction offsets (:class:`evolve.eval.fastpath.lowering.Packed`),
    ``bounds`` int64 (C+1,) chunk boundaries; a program's cost is estimated by
    its instruction count.

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

"""Torch's CPU thread count for the commands that run models (harvest, live, perf).

On a machine with at most :data:`FEW_CORES` cores, torch's default (one thread per core) makes
every forward pass wait for the slowest core: when other processes share the machine, 2 threads
are slower than 1, often much slower. So without an explicit count the commands use 1 thread
there, and torch's default on larger machines.

Numba's threading layer, when it starts (lazily, at the first parallel kernel or thread-count query), sets the
OpenMP thread count of the calling thread to its own (``NUMBA_NUM_THREADS``, one per core); torch's CPU kernels read
that same count, so a layer started after :func:`apply_threads` silently undid it, and torch ran its element-wise
work on every core beside llama.cpp's or its own forward (measured: the llama_cpp backend's plain decoding at 0.73 to
0.96 of llama-cpp-python's own ``Llama.generate``, 0.94 to 1.02 with the count re-applied). :func:`apply_threads`
starts numba's layer first, then sets torch's count (numba's own kernels keep theirs).
"""
from __future__ import annotations

import os

#: At most this many cores: one thread by default.
FEW_CORES = 2


def default_threads() -> int | None:
    """1 on a machine with <= :data:`FEW_CORES` cores, else None (torch's default)."""
    return 1 if (os.cpu_count() or 1) <= FEW_CORES else None


def apply_threads(threads: int | None) -> int:
    """Set torch's CPU threads to ``threads`` (None: :func:`default_threads`) after starting numba's threading layer
    (module doc); returns torch's count in use."""
    import numba
    import torch

    n = threads if threads is not None else default_threads()
    numba.get_num_threads()  # starts numba's threading layer now, which sets this thread's OpenMP count
    if n is not None:
        torch.set_num_threads(int(n))
    return torch.get_num_threads()

"""Torch's CPU thread count for the commands that run models (harvest, live, perf).

On a machine with at most :data:`FEW_CORES` cores, torch's default (one thread per core) makes
every forward pass wait for the slowest core: when other processes share the machine, 2 threads
are slower than 1, often much slower. So without an explicit count the commands use 1 thread
there, and torch's default on larger machines.
"""
from __future__ import annotations

import os

#: At most this many cores: one thread by default.
FEW_CORES = 2


def default_threads() -> int | None:
    """1 on a machine with <= :data:`FEW_CORES` cores, else None (torch's default)."""
    return 1 if (os.cpu_count() or 1) <= FEW_CORES else None


def apply_threads(threads: int | None) -> int:
    """Set torch's CPU threads to ``threads`` (None: :func:`default_threads`); returns the count in use."""
    import torch

    n = threads if threads is not None else default_threads()
    if n is not None:
        torch.set_num_threads(int(n))
    return torch.get_num_threads()

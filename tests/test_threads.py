"""The thread count a model command sets holds after numba's threading layer starts (evolve.engine.threads): numba's
lazy start sets the OpenMP count of the calling thread, which torch's CPU kernels read, to one per core."""
from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import numpy as np
from numba import njit, prange
import torch
from evolve.engine.threads import apply_threads

@njit(parallel=True)
def total(a):
    s = 0.0
    for i in prange(a.size):
        s += a[i]
    return s

torch.set_num_threads(2)
print(apply_threads(1), end=" ")
total(np.ones(100))  # a rule row's first parallel kernel, as live decoding runs it after the model loads
print(torch.get_num_threads())
"""


def test_one_thread_stays_one_after_numbas_first_parallel_kernel():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "NUMBA_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1"]

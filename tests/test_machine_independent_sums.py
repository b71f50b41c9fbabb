"""The evaluator's float sums do not depend on the machine: their order is written in the code, not chosen by LLVM.

:func:`evolve.eval.fastpath.kernels.reduce_fitness_counts` sums thresholds, TV and false-reject terms in 8
partial sums combined in a fixed tree (``_lane_sum``'s docstring). When the loop was compiled with reassociation allowed,
LLVM picked the partial sums from the host CPU's vector width, and an expected acceptance could differ in its
last bit between two machines (tests/test_previous_format.py). Here: the kernel equals an explicit Python
emulation of the documented order, bit for bit, and a fresh compilation for a generic x86-64 CPU (no AVX, a
different vector width) gives the same bits as this machine's.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from evolve.eval.fastpath.kernels import reduce_fitness_counts
from evolve.eval.fastpath.layouts import Count

ROOT = Path(__file__).resolve().parent.parent

TILES = """
import numpy as np
rng = np.random.default_rng(11)
def tiles():
    for trial in range(60):
        m = int(rng.integers(0, 513)) if trial % 3 else int(rng.integers(0, 20))
        tau = rng.uniform(-0.2, 1.2, m) ** 2 * rng.choice([1.0, 1e-3, 1e3])
        k = rng.random(m)
        tau[k < 0.03] = np.nan
        tau[(k > 0.03) & (k < 0.05)] = np.inf
        r = np.minimum(1.0, rng.random(m) / (rng.random(m) + 1e-3))
        yield tau, r, rng.random(m)
"""
RUN = TILES + """
from evolve.eval.fastpath.kernels import reduce_fitness_counts
out = []
for tau, r, u in tiles():
    acc = np.zeros(16)
    reduce_fitness_counts(tau, r, u, tau.size, acc, np.empty((3, tau.size)))
    out.append(acc)
print(np.array(out).tobytes().hex())
"""


def _tiles():
    scope: dict = {}
    exec(TILES, scope)
    return scope["tiles"]()


def _documented_sum(x: np.ndarray) -> float:
    """8 lanes (x_j into lane j mod 8) over the first m - m mod 8 values, ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)),
    then the rest one by one."""
    m = x.size
    main = m - m % 8
    lane = [0.0] * 8
    for j in range(main):
        lane[j % 8] += float(x[j])
    s = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]))
    for j in range(main, m):
        s += float(x[j])
    return s


def test_the_sums_follow_the_documented_order():
    for tau, r, u in _tiles():
        acc = np.zeros(16)
        reduce_fitness_counts(tau, r, u, tau.size, acc, np.empty((3, tau.size)))
        t = np.where(np.isfinite(tau), np.clip(tau, 0.0, 1.0), 0.0)
        want = [_documented_sum(t), _documented_sum(np.maximum(t - r, 0.0)), _documented_sum(np.maximum(r - t, 0.0))]
        got = [acc[Count.SUM_TAU], acc[Count.SUM_TV], acc[Count.SUM_EXPECTED_FR]]
        assert np.array(got).tobytes() == np.array(want).tobytes()


def test_a_generic_cpu_compiles_the_same_bits(tmp_path):
    here = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, check=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(tmp_path / "host")})
    generic = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, check=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(tmp_path / "generic"),
                                  "NUMBA_CPU_NAME": "generic"})
    assert here.stdout and here.stdout == generic.stdout

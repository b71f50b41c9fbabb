"""Helpers shared by several test files (plain functions; the fixtures are in ``conftest.py``).

Test files import it as ``helpers``: pytest's default ``prepend`` import mode puts ``tests/`` (a
directory without ``__init__.py``) on ``sys.path`` when it collects the tests, and
``pythonpath = ["tests"]`` in pyproject.toml does so in every import mode.

* :func:`split_verdict`: the lines a ``benchmark.py`` table ends with, before its verdict and the verdict;
* :func:`assert_same_floats` (:data:`RTOL`, :data:`ATOL`): Numba kernels against numpy;
* :func:`chi_square_pvalue`: the exactness tests of the decode-loop simulator;
* :func:`rebind`: a test-only variant of a jitted kernel (a deliberately wrong decode loop, so
  that the exactness tests show they can fail) built from the production kernel's own code.
"""
from __future__ import annotations

import types

import numpy as np

#: Relative difference allowed between the Numba kernels and numpy. Their exp and log come from
#: different math libraries (LLVM's libm calls against numpy's SIMD loops) that may round the last
#: bit differently, and a random program compounds such a difference through its later operations.
RTOL = 1e-9
#: Absolute difference allowed on top (a threshold is compared with u in [0, 1): a difference of
#: 1e-12 changes an accept decision with probability 1e-12), for values that cancel to near 0.
ATOL = 1e-12


def assert_same_floats(got, want, err_msg: str = "", branch_flips: int = 0) -> None:
    """``got`` equals ``want`` within :data:`RTOL` (relative) plus :data:`ATOL`, with NaN, +inf and -inf
    in exactly the same places (float64 arrays of one shape).

    ``branch_flips``: how many elements may differ beyond that. A random program compares two
    computed values with ``if_gt``; when they tie to within the last bit, a one-bit difference of
    exp/log between the two math libraries picks the other branch and the results differ entirely.
    Random-program tests allow a few such elements (a real evaluator bug changes many)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, err_msg
    same = (np.isnan(got) & np.isnan(want)) | (got == want)
    finite = np.isfinite(got) & np.isfinite(want)
    close = np.zeros_like(same)
    close[finite] = np.abs(got[finite] - want[finite]) <= ATOL + RTOL * np.abs(want[finite])
    bad = np.flatnonzero(~(same | close))
    if len(bad) > branch_flips:
        np.testing.assert_allclose(got[bad], want[bad], rtol=RTOL, atol=ATOL,
                                   err_msg=f"{err_msg} ({len(bad)} elements differ, {branch_flips} allowed)")


def chi_square_pvalue(counts, probs, min_expected: float = 5.0) -> float:
    """Pearson chi-square goodness-of-fit p-value of token ``counts`` (int (V,)) against ``probs`` (float (V,)).

    Cells whose expected count is below ``min_expected`` are pooled into one
    cell (dropped if its expected count is 0 and nothing was observed there).
    With a lossless loop the emitted tokens at a fixed context are distributed as p.
    """
    from scipy import stats

    counts = np.asarray(counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    expected = probs / probs.sum() * counts.sum()
    keep = expected >= min_expected
    obs = list(counts[keep])
    exp = list(expected[keep])
    rest_o, rest_e = counts[~keep].sum(), expected[~keep].sum()
    if rest_e > 0 or rest_o > 0:
        obs.append(rest_o)
        exp.append(max(rest_e, 1e-300))
    return float(stats.chisquare(np.asarray(obs), np.asarray(exp)).pvalue)


def rebind(kernel, **names):
    """An uncached copy of the jitted function ``kernel`` whose code sees ``names`` instead of the module
    globals of the same names (same bytecode, same Numba options except ``cache``).

    Numba binds the jitted functions a kernel calls when it compiles it, so monkeypatching a callee's
    module attribute does not reach an already compiled caller; a test swaps a callee by rebinding
    every caller on the way up (``rebind(outer, inner=rebind(inner, leaf=wrong_leaf))``) and
    monkeypatches the module attribute the Python driver calls. The copy is never written to
    Numba's on-disk cache (it has the production kernel's name and source line, so a cached copy
    could be taken for the production kernel).
    """
    from numba import njit

    fn = kernel.py_func
    unknown = sorted(set(names) - set(fn.__code__.co_names))
    if unknown:
        raise ValueError(f"{fn.__name__} does not use the global name(s) {unknown}")
    copy = types.FunctionType(fn.__code__, {**fn.__globals__, **names}, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__qualname__ = fn.__qualname__
    copy.__doc__ = fn.__doc__
    options = {k: v for k, v in kernel.targetoptions.items() if k not in ("cache", "nopython")}
    return njit(**options)(copy)


def split_verdict(lines: list[str]) -> tuple[list[str], str]:
    """(the lines before the verdict, the verdict joined into one line) of the lines of a ``benchmark.py`` table:
    the verdict is the last paragraph starting ``verdict:``, wrapped to 100 columns with indented continuation
    lines (:func:`evolve.report.compare.format.printed_verdict`)."""
    start = max(i for i, line in enumerate(lines) if line.startswith("verdict: "))
    return lines[:start], " ".join(line.strip() for line in lines[start:])

"""Shared fixtures: small seed-model splits (fast to make, schema-valid)."""
from __future__ import annotations

import pytest

from data.io import Traces
from data.synth.independent import generate_split


@pytest.fixture(scope="session")
def independent_traces() -> Traces:
    """About 2,500 records of seed 004's data model (seed 7)."""
    return Traces.from_frame(generate_split(50, 7), source="independent_traces")


#: Relative difference allowed between the Numba kernels and numpy. Their exp and log come from
#: different math libraries (LLVM's libm calls against numpy's SIMD loops) that may round the last
#: bit differently, and a random program compounds such a difference through its later operations.
RTOL = 1e-9
#: Absolute difference allowed on top (a threshold is compared with u in [0, 1): a difference of
#: 1e-12 changes an accept decision with probability 1e-12), for values that cancel to near 0.
ATOL = 1e-12


def assert_same_floats(got, want, err_msg: str = "") -> None:
    """``got`` equals ``want`` within :data:`RTOL` (relative) plus :data:`ATOL`, with NaN, +inf and -inf in exactly the
    same places (float64 arrays of one shape)."""
    import numpy as np

    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, err_msg
    for kind in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(kind(got), kind(want), err_msg=err_msg)
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=RTOL, atol=ATOL, err_msg=err_msg)

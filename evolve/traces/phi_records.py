"""The checks of ``block_residual_phi``, each record for what it means (:func:`check_phi_records`).

phi(a) = sum_v max(0, a p'(v) - q'(v)) of the next drafted position (p', q'), on the grid a = k/K, k = 1..K: the
residual masses of relaxed block verification (:mod:`evolve.verification.block`; Sun et al. 2024, block
verification). :func:`evolve.traces.schema.validate` calls :func:`check_phi_records` with the schema's slack
(:data:`evolve.traces.schema.PHI_TOLERANCE`) once the columns are coerced.
"""
from __future__ import annotations

import numpy as np

from evolve.errors import InputError


def _first_true(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _phi_first_bad(phi, tol):
    """Index of the first record of ``phi`` (float64 (n, K), rows all NaN or all finite) that decreases, rises
    with a slope above 1 or is not convex on the grid a = 0, 1/K, ..., 1 (phi(0) = 0 prepended), beyond
    ``tol``; -1 if none (NaN records are never bad). Plain Python, compiled by Numba on first use
    (:func:`_phi_kernel`): one pass, no temporary arrays, about 0.1 s per million records."""
    n, K = phi.shape
    h = 1.0 / K
    for i in range(n):
        if phi[i, 0] != phi[i, 0]:
            continue
        prev = 0.0
        last_step = -1e300
        for k in range(K):
            step = phi[i, k] - prev  # h * (the slope between a = k/K and (k + 1)/K)
            if step < -tol or step > h + tol or step < last_step - tol:
                return i
            last_step = step
            prev = phi[i, k]
    return -1


_PHI_KERNEL: list = []


def _phi_kernel():
    """:func:`_phi_first_bad` compiled (Numba is imported only when a split has ``block_residual_phi``)."""
    if not _PHI_KERNEL:
        from numba import njit
        _PHI_KERNEL.append(njit(cache=True)(_phi_first_bad))
    return _PHI_KERNEL[0]


def _phi_shape_problem(row: np.ndarray, tol: float) -> str:
    """What is wrong with one record of ``block_residual_phi`` that :func:`_phi_first_bad` refused beyond ``tol``
    (one phrase)."""
    K = row.shape[0]
    values = np.concatenate(([0.0], row))
    step = np.diff(values)

    def at(k: int) -> str:
        return f"phi({k}/{K}) = {float(values[k])!r}"

    for k in range(1, K + 1):
        if step[k - 1] < -tol:
            return f"decreases in a: {at(k - 1)}, {at(k)} (phi is non-decreasing)"
    for k in range(1, K + 1):
        if step[k - 1] > 1.0 / K + tol:
            return (f"rises with slope {float(step[k - 1] * K):.6g} > 1 between a = {k - 1}/{K} and {k}/{K}: "
                    f"{at(k - 1)}, {at(k)} (the slope of phi is a probability mass, at most 1)")
    for k in range(1, K):
        if step[k] < step[k - 1] - tol:
            return (f"not convex in a: slope {float(step[k - 1] * K):.6g} then {float(step[k] * K):.6g} around "
                    f"a = {k}/{K} ({at(k - 1)}, {at(k)}, {at(k + 1)}; the slope of phi never decreases)")
    return "not a valid phi record"  # not reached


def check_phi_records(cols: dict[str, np.ndarray], source: str, tol: float) -> None:
    """Check that ``block_residual_phi`` means what it says (:mod:`evolve.verification.block`).

    phi(a) = sum_v max(0, a p'(v) - q'(v)) of the next drafted position (p', q') is, on the grid
    a = k/K, k = 1..K with phi(0) = 0: non-decreasing, convex (its slope, the p'-mass of
    {v : q'(v) < a p'(v)}, never decreases) with slopes in [0, 1]; with ``draft_index`` it is all NaN
    exactly on a block's last record (there is no next position) and finite elsewhere; with ``overlap``
    too, phi(1) = sum_v max(0, p'(v) - q'(v)) equals 1 - ``overlap`` of the next record. Each comparison
    allows ``tol`` (:data:`evolve.traces.schema.PHI_TOLERANCE`).

    Args: the coerced columns (``block_residual_phi`` float64 (n, K), records all NaN or all finite and in
    [0, 1]); ``source``, the file named in messages.
    Raises: InputError naming ``source``, the column, the first offending row and what is wrong.
    """
    phi = cols["block_residual_phi"]
    n, K = phi.shape
    name = "block_residual_phi"

    def refuse(i: int, why: str) -> InputError:
        return InputError(f"{source}: column '{name}', row {i}: {why}")

    nan = np.isnan(phi[:, 0])
    if "draft_index" in cols:
        d = cols["draft_index"]
        last = np.concatenate((d[1:] == 0, [True]))  # a block's last record: the next row starts a block
        bad = nan & ~last
        if bad.any():
            raise refuse(_first_true(bad), "null (NaN) is only valid at a block's last record (the next depth is "
                                      "needed otherwise)")
        bad = ~nan & last
        if bad.any():
            i = _first_true(bad)
            raise refuse(i, f"a block's last record must be null (NaN): phi describes the next drafted position "
                            f"of the block and there is none (draft_index {int(d[i])}, the next row starts a block"
                            f"{'' if i + 1 < n else ' or the split ends'}; value {_short_list(phi[i])})")
    i = int(_phi_kernel()(np.ascontiguousarray(phi), tol))
    if i >= 0:
        raise refuse(i, _phi_shape_problem(phi[i], tol))
    if "draft_index" in cols and "overlap" in cols and n > 1:
        top = phi[:-1, K - 1]
        expected = 1.0 - cols["overlap"][1:]
        bad = ~np.isnan(top) & (np.abs(top - expected) > tol)
        if bad.any():
            i = _first_true(bad)
            raise refuse(i, f"phi(1) = {float(top[i])!r} but 1 - overlap of the next record (row {i + 1}) is "
                            f"{float(expected[i])!r}: phi(1) = sum_v max(0, p'(v) - q'(v)) = 1 - overlap of the "
                            f"next drafted position (difference {float(abs(top[i] - expected[i])):.3g}, more than "
                            f"the round-off allowed, {tol:g})")


def _short_list(values: np.ndarray) -> str:
    """A record of a list column in a message: its first three values and how many there are."""
    head = ", ".join(repr(float(v)) for v in values[:3])
    return f"[{head}, ...] ({values.size} values)" if values.size > 3 else f"[{head}]"


__all__ = ["check_phi_records"]

"""The numpy target of ``python -m evolve export``: a module importing only ``math`` and numpy.

The protected operators are numpy versions of the scalar ones of :mod:`evolve.gp.primitives`
(the same formulas as its numpy reference path, :data:`evolve.export.codegen.OPERATORS` with
``np``), evaluated in float64 under ``numpy.errstate(all="ignore")``; constants are
``numpy.float64`` scalars, so a division by a zero constant gives inf/NaN as in the evaluator
instead of raising. This module holds numpy's row of the per-backend table (:data:`TARGET`).
"""
from __future__ import annotations

from evolve.export.codegen import Layout, Target, core_source, render_module
from evolve.gp.compiler import Node
from evolve.verification.tokenwise import residual_distribution

COLUMNS = '''
def _columns(columns):
    x = {name: np.asarray(value, dtype=np.float64) for name, value in columns.items()}
    return x, np.broadcast_shapes(*(v.shape for v in x.values())), None
'''

#: ``residual_distribution``: the verification core's function, word for word.
RESIDUAL = core_source(residual_distribution)

TARGET = Target(
    library="numpy",
    imports="import numpy as np",
    alias="np",
    columns=COLUMNS,
    residual=RESIDUAL,
    constant=lambda v: f"np.float64({v!r})",
    array=lambda text, like: f"np.asarray({text}, dtype=np.float64)",
    body_open='with np.errstate(all="ignore"):',
    finish=lambda result, value, clamp=True: [
        f"{value} = np.broadcast_to({result}, shape)",
        f"return np.where(np.isfinite({value}), np.clip({value}, 0.0, 1.0), 0.0)" if clamp else
        f"return np.where(np.isnan({value}), 0.0, {value})"],
)


def numpy_source(name: str, nodes: list[Node], layout: Layout, source: str = "") -> str:
    """Text of the standalone numpy module of the program ``nodes`` (see :func:`evolve.export.codegen.render_module`;
    ``layout``: its kind's, from the kind's ``export`` hook)."""
    return render_module(name, nodes, TARGET, layout, source)


__all__ = ["TARGET", "numpy_source"]

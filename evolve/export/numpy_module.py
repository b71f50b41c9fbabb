"""The numpy target of ``python -m evolve export``: a module importing only ``math`` and numpy.

The protected operators are numpy versions of the scalar ones of :mod:`evolve.gp.primitives`
(the same formulas as its numpy reference path), evaluated in float64 under
``numpy.errstate(all="ignore")``; constants are ``numpy.float64`` scalars, so a division by
a zero constant gives inf/NaN as in the evaluator instead of raising.
"""
from __future__ import annotations

from evolve.export.codegen import Target, render_module
from evolve.gp.compiler import Node

HELPERS = '''
def _columns(columns):
    x = {name: np.asarray(value, dtype=np.float64) for name, value in columns.items()}
    return x, np.broadcast_shapes(*(v.shape for v in x.values())), None


def _div(a, b):
    return np.where(np.abs(b) > _DIV_EPS, a / b, 1.0)


def _min(a, b):
    return np.where(a < b, a, b)


def _max(a, b):
    return np.where(a > b, a, b)


def _log(a):
    x = np.abs(a)
    return np.where(x > _LOG_EPS, np.log(x), 0.0)


def _exp(a):
    return np.where(a <= _EXP_MAX, np.exp(a), _EXP_CAP)


def _sqrt(a):
    return np.sqrt(np.abs(a))


def _if_gt(a, b, c, d):
    return np.where(a > b, c, d)


def residual_distribution(target_probs, draft_probs, tau):
    """norm(max(0, p - q * tau)) over the last axis (float64); p itself where that is all zero."""
    p = np.asarray(target_probs, dtype=np.float64)
    r = np.maximum(p - np.asarray(draft_probs, dtype=np.float64) * np.asarray(tau, dtype=np.float64), 0.0)
    s = r.sum(axis=-1, keepdims=True)
    return np.where(s > 0, r / np.where(s > 0, s, 1.0), p)
'''

TARGET = Target(
    library="numpy",
    imports="import numpy as np",
    helpers=HELPERS,
    constant=lambda v: f"np.float64({v!r})",
    body_open='with np.errstate(all="ignore"):',
    finish=lambda result: [f"tau = np.broadcast_to({result}, shape)",
                           "return np.where(np.isfinite(tau), np.clip(tau, 0.0, 1.0), 0.0)"],
)


def numpy_source(name: str, nodes: list[Node], source: str = "") -> str:
    """Text of the standalone numpy module of the rule ``nodes`` (see :func:`evolve.export.codegen.render_module`)."""
    return render_module(name, nodes, TARGET, source)


__all__ = ["TARGET", "numpy_source"]

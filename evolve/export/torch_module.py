"""The torch target of ``python -m evolve export``: a module importing only ``math`` and torch.

Every column is converted to a float64 tensor on the device of the first tensor given (CPU
when none is), so the thresholds follow the evaluator's float64 semantics on any device;
constants are 0-d float64 tensors on that device. torch's vectorised ``exp`` and ``log`` may
round the last bit differently from the C library the evaluator calls.
"""
from __future__ import annotations

from evolve.export.codegen import Target, render_module
from evolve.gp.compiler import Node

HELPERS = '''
def _columns(columns):
    device = next((v.device for v in columns.values() if isinstance(v, torch.Tensor)), None)
    x = {name: torch.as_tensor(value, dtype=torch.float64, device=device) for name, value in columns.items()}
    return x, torch.broadcast_shapes(*(v.shape for v in x.values())), device


def _div(a, b):
    return torch.where(torch.abs(b) > _DIV_EPS, a / b, 1.0)


def _min(a, b):
    return torch.where(a < b, a, b)


def _max(a, b):
    return torch.where(a > b, a, b)


def _log(a):
    x = torch.abs(a)
    return torch.where(x > _LOG_EPS, torch.log(x), 0.0)


def _exp(a):
    return torch.where(a <= _EXP_MAX, torch.exp(a), _EXP_CAP)


def _sqrt(a):
    return torch.sqrt(torch.abs(a))


def _if_gt(a, b, c, d):
    return torch.where(a > b, c, d)


def residual_distribution(target_probs, draft_probs, tau):
    """norm(max(0, p - q * tau)) over the last axis (float64); p itself where that is all zero."""
    p = torch.as_tensor(target_probs, dtype=torch.float64)
    q = torch.as_tensor(draft_probs, dtype=torch.float64, device=p.device)
    r = torch.clamp(p - q * torch.as_tensor(tau, dtype=torch.float64, device=p.device), min=0.0)
    s = r.sum(dim=-1, keepdim=True)
    return torch.where(s > 0, r / torch.where(s > 0, s, torch.ones_like(s)), p)
'''

TARGET = Target(
    library="torch",
    imports="import torch",
    helpers=HELPERS,
    constant=lambda v: f"torch.tensor({v!r}, dtype=torch.float64, device=device)",
    body_open="",
    finish=lambda result: [f"tau = torch.broadcast_to({result}, shape)",
                           "return torch.where(torch.isfinite(tau), tau.clamp(0.0, 1.0), 0.0)"],
)


def torch_source(name: str, nodes: list[Node], source: str = "") -> str:
    """Text of the standalone torch module of the rule ``nodes`` (see :func:`evolve.export.codegen.render_module`)."""
    return render_module(name, nodes, TARGET, source)


__all__ = ["TARGET", "torch_source"]

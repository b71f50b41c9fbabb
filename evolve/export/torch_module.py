"""The torch target of ``python -m evolve export``: a module importing only ``math`` and torch.

Every column is converted to a float64 tensor on the device of the first tensor given (CPU
when none is), so the values follow the evaluator's float64 semantics on any device;
constants are 0-d float64 tensors on that device. torch's vectorised ``exp`` and ``log`` may
round the last bit differently from the C library the evaluator calls. The protected operators
are :data:`evolve.export.codegen.OPERATORS` with ``torch``; this module holds torch's row of the
per-backend table (:data:`TARGET`).
"""
from __future__ import annotations

from evolve.export.codegen import Layout, Target, render_module
from evolve.gp.compiler import Node
from evolve.verification.tokenwise import TORCH_RESIDUAL

COLUMNS = '''
def _columns(columns):
    device = next((v.device for v in columns.values() if isinstance(v, torch.Tensor)), None)
    x = {name: torch.as_tensor(value, dtype=torch.float64, device=device) for name, value in columns.items()}
    return x, torch.broadcast_shapes(*(v.shape for v in x.values())), device
'''

def _array(text: str, like: str | None) -> str:
    device = "" if like is None else f", device={like}.device"
    return f"torch.as_tensor({text}, dtype=torch.float64{device})"


TARGET = Target(
    library="torch",
    imports="import torch",
    alias="torch",
    columns=COLUMNS,
    residual=TORCH_RESIDUAL,
    constant=lambda v: f"torch.tensor({v!r}, dtype=torch.float64, device=device)",
    array=_array,
    body_open="",
    finish=lambda result, value, clamp=True: [
        f"{value} = torch.broadcast_to({result}, shape)",
        f"return torch.where(torch.isfinite({value}), {value}.clamp(0.0, 1.0), 0.0)" if clamp else
        f"return torch.where(torch.isnan({value}), 0.0, {value})"],
)


def torch_source(name: str, nodes: list[Node], layout: Layout, source: str = "") -> str:
    """Text of the standalone torch module of the program ``nodes`` (see :func:`evolve.export.codegen.render_module`;
    ``layout``: its kind's, from the kind's ``export`` hook)."""
    return render_module(name, nodes, TARGET, layout, source)


__all__ = ["TARGET", "torch_source"]

"""What a tensor read from a file must be before it is computed with: one check for every reader of torch files.

``torch.load(weights_only=True)`` and safetensors build only tensors and plain containers, but a tensor can still be
one no computation here takes: a sparse or other non-strided layout, a meta tensor (a shape without data), a quantized
tensor, or a value that is no tensor at all where a weight should be. :func:`tensor_problem` says which, so that every
reader (the EAGLE head's weights, ``train-drafter``'s features and checkpoint) refuses it in one line naming the file
and the key instead of failing inside torch.
"""
from __future__ import annotations

from typing import Any

#: dtype kinds a check can ask for: floating point, integer (not bool), bool.
KINDS = ("float", "integer", "bool")


def tensor_problem(value: Any, kind: str = "float") -> str | None:
    """Why ``value`` is not a dense tensor of ``kind`` (:data:`KINDS`) holding data on a real device, or None.

    Refused: a value that is not a :class:`torch.Tensor`; a layout other than strided (sparse COO/CSR/...); a meta
    tensor; a quantized tensor; a dtype of another kind (``kind`` ``integer`` accepts the int8..int64 and uint8
    dtypes, ``float`` any floating-point dtype, ``bool`` only torch.bool)."""
    import torch

    if not isinstance(value, torch.Tensor):
        return f"is a {type(value).__name__}, not a tensor"
    if value.layout != torch.strided:
        return f"is a {str(value.layout).replace('torch.', '')} tensor, not a dense one"
    if value.is_meta:
        return "is a meta tensor (a shape without data)"
    if value.is_quantized:
        return "is a quantized tensor"
    if kind == "float" and not value.is_floating_point():
        return f"is a {value.dtype} tensor, not a float tensor"
    if kind == "integer" and (value.is_floating_point() or value.is_complex() or value.dtype == torch.bool):
        return f"is a {value.dtype} tensor, not an integer tensor"
    if kind == "bool" and value.dtype != torch.bool:
        return f"is a {value.dtype} tensor, not a bool tensor"
    return None


__all__ = ["KINDS", "tensor_problem"]

"""Timing work queued on a device: a CUDA kernel launch returns before the kernel has run, so a wall-clock timer
read right after a forward pass measures the launch, not the pass. :func:`synchronize` waits for the device's queued
work where the device runs asynchronously (CUDA) and does nothing elsewhere; every timer around device work calls it
before reading the clock (and before starting it, so that earlier queued work is not counted)."""
from __future__ import annotations

from typing import Any


def synchronize(device: Any) -> None:
    """Wait until the work queued on ``device`` (a ``torch.device`` or its name: ``cpu``, ``cuda``, ``cuda:1``) has
    run: ``torch.cuda.synchronize(device)`` for a CUDA device, nothing for any other. Raises nothing."""
    import torch

    found = device if isinstance(device, torch.device) else torch.device(str(device))
    if found.type == "cuda":
        torch.cuda.synchronize(found)


__all__ = ["synchronize"]

"""A cost file (the format of ``evolve/eval/costs.py``) from one group's timings: the document, the machine and
versions it was measured on, the loader's checks restated, and the atomic write."""
from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess

import torch

from gpu_timing.engines import transformers


def versions(device) -> dict:
    v = {"torch": torch.__version__, "transformers": getattr(transformers, "__version__", None),
         "cuda": torch.version.cuda, "python": platform.python_version()}
    if device.type == "cuda":
        v["cudnn"] = torch.backends.cudnn.version()
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20)
            v["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
        except Exception:  # noqa: BLE001
            v["driver"] = None
    return v


def gpu_name(device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else (platform.processor() or platform.machine()
                                                                              or "cpu")


def gpu_slug(device) -> str:
    if device.type != "cuda":
        return "cpu"
    found = re.findall(r"[A-Za-z]+\d+\w*", torch.cuda.get_device_name(device))
    return (found[0] if found else "gpu").lower()


def config_summary(c: dict) -> dict:
    return dict(c)


def cost_doc(res: dict, drafter_key: str, meta: dict, grid, curve_points, gamma: int) -> dict:
    fwd = res["curve"]
    draft = res["draft"][drafter_key]
    plain = res["plain"]
    tokens = [r * t for r, t in curve_points]
    seconds = [res["grid"][rt] for rt in curve_points]
    doc = {
        "target_forward_s": fwd,
        "draft_token_s": draft,
        "plain_token_s": plain,
        "batch_forward_s": {"tokens": tokens, "seconds": seconds,
                            "requests": [r for r, _ in curve_points],
                            "tokens_per_request": [t for _, t in curve_points]},
        "target_forward_relative": [t / fwd[0] for t in fwd],
        "draft_token_relative": draft / fwd[0],
        "plain_tokens_per_s": 1.0 / plain,
        "drafted_tokens_per_call": gamma,
        "batch_tokens_per_s": [n / s for n, s in zip(tokens, seconds)],
        "batch_grid": {"requests": [r for r, _ in grid], "tokens_per_request": [t for _, t in grid],
                       "seconds": [res["grid"][rt] for rt in grid]},
        "timing_spread": res["spread"],
    }
    doc.update(meta)
    return doc


def write_json(path: str, doc: dict) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def check_doc(doc: dict) -> None:
    """The checks of the project's loader (evolve.eval.costs.costs_from_dict), restated (standalone script)."""
    curve = doc["target_forward_s"]
    assert isinstance(curve, list) and curve and all(math.isfinite(v) and v > 0 for v in curve), curve
    assert math.isfinite(doc["draft_token_s"]) and doc["draft_token_s"] >= 0
    assert math.isfinite(doc["plain_token_s"]) and doc["plain_token_s"] > 0
    b = doc["batch_forward_s"]
    assert len(b["tokens"]) == len(b["seconds"]) and all(s > 0 for s in b["seconds"])
    assert all(x < y for x, y in zip(b["tokens"], b["tokens"][1:])), b["tokens"]

"""The cost files shipped in docs/costs load, and the measured ones say how they were measured.

The measured GPU files (``measured_*.json``, ``scripts/gpu_costs.py`` on a CUDA machine) must load as any cost file
does (:func:`evolve.eval.costs.load_costs`) and carry the machine, the engine, the dtype and that their weights
were random (timings only), so that no reader takes them for a quality measurement.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolve.eval.costs import load_costs

COSTS = Path(__file__).resolve().parent.parent / "docs" / "costs"
FILES = sorted(COSTS.glob("*.json"))
MEASURED = [p for p in FILES if p.name.startswith("measured_")]


def test_there_are_measured_files():
    assert len(MEASURED) >= 3 and len(FILES) > len(MEASURED)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_cost_file_loads(path):
    costs = load_costs(path)
    assert costs.plain_token_s > 0 and costs.draft_token_s >= 0
    assert all(t > 0 for t in costs.target_forward_s)


@pytest.mark.parametrize("path", MEASURED, ids=lambda p: p.name)
def test_a_measured_file_says_how(path):
    doc = json.loads(path.read_text())
    assert doc["device"] == "cuda" and doc["dtype"] == "bfloat16"
    assert "random" in json.dumps(doc["machine"]).lower()
    assert len(doc["target_forward_s"]) >= 16

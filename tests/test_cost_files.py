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


@pytest.mark.slow
def test_the_measuring_script_s_smoke_run_writes_files_of_the_shipped_layout(tmp_path):
    """``scripts/gpu_costs.py --smoke`` (tiny configs, a CPU, seconds) through its parts in ``scripts/gpu_timing``:
    the eager transformers file and the pure-torch file of the CUDA-graph variant's code are written, with the keys
    (top level, drafter, batch grid) of the shipped measured files. (Two repeats on a shared CPU are too noisy for
    the loader's monotonicity checks, so the timings themselves are not loaded.)"""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import subprocess
    import sys
    script = COSTS.parent.parent / "scripts" / "gpu_costs.py"
    run = subprocess.run([sys.executable, str(script), "--smoke", "--device", "cpu", "--graphs", "on",
                          "--only", "smollm2_135m", "--out", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    written = sorted(p.name for p in tmp_path.glob("*.json"))
    assert written == ["measured_cpu_smollm2_135m_eagle.json", "measured_cpu_smollm2_135m_eagle_pure.json"]
    shipped = json.loads((COSTS / "measured_h200_smollm2_135m_eagle.json").read_text())
    for name in written:
        doc = json.loads((tmp_path / name).read_text())
        assert set(doc) == set(shipped)
        assert set(doc["drafter"]) == set(shipped["drafter"]) and set(doc["batch_grid"]) == set(shipped["batch_grid"])
        assert len(doc["target_forward_s"]) == 16 and doc["script"] == "scripts/gpu_costs.py --smoke"

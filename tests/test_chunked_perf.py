"""`benchmark.py perf --islands`: the large dataset generated on disk in chunks and scored from disk (tiny sizes)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from evolve.traces.chunks import split_row_groups
from evolve.traces.io import load_metadata
from evolve.perf import islands as perf_islands
from evolve.perf.islands import measure_large

KEYS = {"tokens_100m_seconds", "resident_bytes_per_token_100m", "cost_per_token_ratio", "resident_peak_bytes_100m",
        "large_generate_seconds", "large_tokens_actual", "large_method"}


@pytest.mark.slow
def test_measure_large_generates_then_reuses(tmp_path):
    said = []
    first = measure_large(20_000, tmp_path, reference_tokens=5_000, reference_repeats=1,
                                       progress=said.append)
    assert KEYS <= set(first)
    path = tmp_path / "vocab-seed42-20000"
    assert first["large_path"] == str(path) and not first["large_reused"] and first["large_generate_seconds"] > 0
    meta = load_metadata(path)
    groups = split_row_groups(path, "train")
    assert first["large_tokens_actual"] == sum(groups) == meta["statistics"]["train"]["tokens"]
    assert abs(first["large_tokens_actual"] - 20_000) < 1_000  # sequences chosen from the expected length
    assert first["large_row_groups"] == len(groups) == 4 and first["large_reference_row_groups"] == 1
    assert 0 < first["resident_peak_bytes_100m"] < 2 * 1024 ** 3 and first["cost_per_token_ratio"] > 0
    assert any("generating" in line for line in said)
    again = measure_large(20_000, tmp_path, reference_tokens=5_000, reference_repeats=1,
                                       reference_every=1)
    assert again["large_reused"] and again["large_generate_seconds"] is None
    # one reference pass before and one after each row group of the large pass but the last
    assert again["large_reference_passes"] == 1 + again["large_row_groups"] - 1
    assert again["large_tokens_actual"] == first["large_tokens_actual"]
    # other settings (here the chunk size) in the same directory: generated again
    meta["chunk_sequences"] = 1
    (path / "metadata.json").write_text(json.dumps(meta))
    third = measure_large(20_000, tmp_path, reference_tokens=5_000, reference_repeats=1)
    assert not third["large_reused"] and load_metadata(path)["chunk_sequences"] == first["large_chunk_sequences"]


@pytest.mark.slow
def test_perf_islands_large_only_command(tmp_path, monkeypatch):
    from evolve.cli.perf import perf
    monkeypatch.setattr(perf_islands, "REFERENCE_TOKENS", 3_000)
    out = tmp_path / "perf.json"
    out.write_text(json.dumps({"rule_tokens_per_s": 1.0, "scale_targets_met": {"parallel_efficiency": True}}))
    result = CliRunner().invoke(perf, ["--islands", "--large-only", "--large-tokens", "9000", "--large-dir",
                                       str(tmp_path / "large"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert KEYS <= set(report) and report["rule_tokens_per_s"] == 1.0 and "islands_generations_per_s" not in report
    assert report["scale_targets_met"]["parallel_efficiency"] is True  # kept from the earlier report
    assert set(report["scale_targets_met"]) >= {"cost_per_token_ratio", "resident_peak_bytes_100m"}
    assert "large dataset: cost per token vs reference" in result.output
    assert (tmp_path / "large" / "vocab-seed42-9000" / "train.parquet").is_file()
    bad = CliRunner().invoke(perf, ["--islands", "--large-only", "--large-dir", str(out), "--output",
                                    str(tmp_path / "x.json")])
    assert bad.exit_code == 2 and "--large-dir" in bad.output

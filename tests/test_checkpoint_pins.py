"""Every file a run reads is pinned when it starts (issue 29, part 2).

* a relative ``costs`` or ``verify_with`` file is recorded as an absolute path with its SHA-256 in the
  checkpoint header (``inputs``); a resume from another working directory reads the run's file, not the one of
  the same name there;
* a pinned file that changed or vanished refuses the resume in one line naming the file;
* a checkpoint without pins (earlier versions) still resumes;
* the dataset's digests come from the bytes the run parsed (a split swapped after the read does not change
  them), and a resume reads the dataset where the run read it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from evolve.errors import InputError
from evolve.search.checkpoint import CHECKPOINT_FILE, read_checkpoint, read_header, split_sha256, write_checkpoint
from evolve.search.config import resolve
from evolve.search.rundir import dataset_info, resume, run
from evolve.traces.io import load_split
from heuristics.champions import Champion, champion_json

SETTINGS = {"evolve": "verify-length", "objective": "tokens_per_second", "population": 20, "generations": 3,
            "migration_interval": 1, "seed": 2}
COSTS = {"target_forward_s": [0.01, 0.011, 0.012, 0.013, 0.014, 0.015, 0.016, 0.017], "draft_token_s": 0.001,
         "plain_token_s": 0.01}
OTHER_COSTS = {**COSTS, "draft_token_s": 0.004}


def _stopped(cfg_values: dict, tmp: Path) -> Path:
    """The checkpoint directory of a run stopped by Ctrl-C after its first generation."""
    gens: list[int] = []
    info = run(resolve({**SETTINGS, **cfg_values, "out": str(tmp / "out")}), progress=lambda r: gens.append(r["gen"]),
               stop=lambda: len(gens) >= 2)
    assert info.checkpoint_dir is not None
    return info.checkpoint_dir


@pytest.fixture
def two_dirs(tmp_path, vocab_dataset):
    a, b = tmp_path / "a", tmp_path / "b"
    for d, costs in ((a, COSTS), (b, OTHER_COSTS)):
        d.mkdir()
        (d / "c.json").write_text(json.dumps(costs))
    return a, b


def test_relative_costs_are_pinned_and_a_resume_elsewhere_reads_them(two_dirs, vocab_dataset, tmp_path, monkeypatch):
    a, b = two_dirs
    monkeypatch.chdir(a)
    partial = _stopped({"data": str(vocab_dataset), "costs": "c.json"}, tmp_path)
    head = read_header(partial / CHECKPOINT_FILE)
    assert head["config"]["costs"] == str(a / "c.json")
    assert head["inputs"] == {"costs": {"path": str(a / "c.json"),
                                        "sha256": hashlib.sha256((a / "c.json").read_bytes()).hexdigest()}}
    monkeypatch.chdir(b)  # holds another c.json: never read
    info = resume(partial)
    assert info.result.config.costs == str(a / "c.json")
    run_json = json.loads((info.run_dir / "run.json").read_text())
    assert run_json["config"]["costs"] == str(a / "c.json")


@pytest.mark.parametrize("change", ["edit", "delete"])
def test_a_changed_or_vanished_pinned_file_refuses_the_resume(change, two_dirs, vocab_dataset, tmp_path, monkeypatch):
    a, _ = two_dirs
    monkeypatch.chdir(a)
    partial = _stopped({"data": str(vocab_dataset), "costs": "c.json"}, tmp_path)
    before = (partial / CHECKPOINT_FILE).read_bytes()
    if change == "edit":
        (a / "c.json").write_text(json.dumps(OTHER_COSTS))
        match = f"cost file {a / 'c.json'} \\(setting 'costs'\\) changed since the run started"
    else:
        (a / "c.json").unlink()
        match = f"cost file {a / 'c.json'} \\(setting 'costs'\\) the run read is gone"
    with pytest.raises(InputError, match=match) as exc:
        resume(partial)
    assert "\n" not in str(exc.value)
    assert (partial / CHECKPOINT_FILE).read_bytes() == before


def test_a_verifier_champion_file_is_pinned(vocab_dataset, tmp_path, monkeypatch):
    a = tmp_path / "a"
    a.mkdir()
    champ = Champion(name="v", expression="min(1.0, div(target_prob, draft_prob))", description="test verifier",
                     metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}}, provenance={"test": True})
    (a / "v.json").write_text(champion_json(champ))
    monkeypatch.chdir(a)
    partial = _stopped({"data": str(vocab_dataset), "verify_with": "v.json"}, tmp_path)
    head = read_header(partial / CHECKPOINT_FILE)
    assert head["config"]["verify_with"] == str(a / "v.json") and head["inputs"]["verify_with"]["path"] == \
        str(a / "v.json")
    monkeypatch.chdir(tmp_path)
    (a / "v.json").write_text(champion_json(Champion(name="v", expression="0.5", description="another",
                                                     metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}}, provenance={})))
    with pytest.raises(InputError, match="verifier's champion file .*v.json \\(setting 'verify_with'\\) changed"):
        resume(partial)


def test_a_checkpoint_without_pins_still_resumes(vocab_dataset, tmp_path):
    costs = tmp_path / "c.json"
    costs.write_text(json.dumps(COSTS))
    partial = _stopped({"data": str(vocab_dataset), "costs": str(costs)}, tmp_path)
    path = partial / CHECKPOINT_FILE
    raw = path.read_bytes()
    head = json.loads(raw.split(b"\n")[1])
    payload = raw.split(b"\n", 2)[2]
    assert "inputs" in head
    old = {k: v for k, v in head.items() if k not in ("inputs", "payload_bytes", "sha256")}
    _, snapshot = read_checkpoint(path)
    assert snapshot is not None and payload
    write_checkpoint(path, old, snapshot)  # as an earlier version wrote it: no pins
    assert "inputs" not in read_header(path)
    info = resume(partial)
    assert info.run_dir.is_dir()


def test_dataset_digests_come_from_the_bytes_parsed(vocab_dataset, tmp_path):
    d = tmp_path / "d"
    shutil.copytree(vocab_dataset, d)
    train, valid = load_split(d, "train"), load_split(d, "valid")
    digest = hashlib.sha256((d / "train.parquet").read_bytes()).hexdigest()
    assert train.sha256 == digest
    expected = split_sha256(d / "train.parquet", "train")  # with the split's tree table
    # the dataset is swapped (an atomic rename) after the read: the digests stay those of what was parsed
    other = tmp_path / "other.parquet"
    shutil.copy(d / "valid.parquet", other)
    os.replace(other, d / "train.parquet")
    info = dataset_info(str(d), train, valid)
    assert info["sha256"]["train"] == expected


def test_resume_reads_the_dataset_where_the_run_read_it(vocab_dataset, tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    shutil.copytree(vocab_dataset, a / "data")
    monkeypatch.chdir(a)
    partial = _stopped({"data": "data"}, tmp_path)
    shutil.copytree(vocab_dataset, b / "data")
    (b / "data" / "train.parquet").write_bytes(b"not this one")
    monkeypatch.chdir(b)
    info = resume(partial)  # reads a/data, not b/data (which would be refused as changed)
    assert info.run_dir.is_dir()


def test_a_cost_file_changed_while_the_run_reads_it_is_refused(vocab_dataset, tmp_path, monkeypatch):
    """The file is swapped between its digest and its read: the run refuses before its search, naming it."""
    import evolve.eval.costs as costs_module

    costs = tmp_path / "c.json"
    costs.write_text(json.dumps(COSTS))
    real = costs_module.cached_costs

    def swap_then_read(path):
        other = tmp_path / "swap.json"
        other.write_text(json.dumps(OTHER_COSTS))
        os.replace(other, costs)
        return real(path)
    monkeypatch.setattr(costs_module, "cached_costs", swap_then_read)
    out = tmp_path / "out"
    # refused by the read itself (the bytes parsed are not the pinned ones), or by the check after it
    with pytest.raises(InputError, match=f"{costs}: the cost file changed since the run started|cannot start the "
                                         f"run: the cost file {costs} \\(setting 'costs'\\) changed while the run "
                                         "read it"):
        run(resolve({**SETTINGS, "data": str(vocab_dataset), "costs": str(costs), "out": str(out)}))
    assert not out.exists() or not any(out.iterdir())

"""Files a run reads again after it recorded their digests are read with the recorded content or refused
(issue 29, part 2: "the dataset's digests and the scored arrays come from the same read").

* the cost file, served per file state by :func:`evolve.eval.costs.cached_costs`, swapped while the search
  goes: the next read refuses in one line naming it (no generation is scored with another cost model);
* an island task reads the cost file with the pinned digest the client gives it (``EpochJob.inputs``), so a
  file swapped between two epochs of an island run is refused too;
* a tree-shape run's tree table swapped between the digest the run records and the read its scorers parse;
* a promoted champion given to ``verify_with`` by its name is pinned by its file: a resume refuses a changed
  file or a name that now resolves to another file;
* the pins are dropped when the run ends (a later read of a changed file is not refused).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from evolve.errors import InputError
from evolve.files.pins import pinned
from evolve.search.checkpoint import CHECKPOINT_FILE, read_header
from evolve.search.config import resolve
from evolve.search.island_task import EpochJob, run_epoch
from evolve.search.rundir import resume, run
from evolve.search.state import TIMING_COLUMNS
from evolve.traces.tree_tables import load_trees, tree_path
from heuristics.champions import Champion, champion_json

SETTINGS = {"evolve": "verify-length", "objective": "tokens_per_second", "population": 12, "generations": 3,
            "migration_interval": 1, "seed": 2}
COSTS = {"target_forward_s": [0.01, 0.011, 0.012, 0.013, 0.014, 0.015, 0.016, 0.017], "draft_token_s": 0.001,
         "plain_token_s": 0.01}
#: Another cost model, of another size (so the file's state changes whatever the clock's resolution).
OTHER_COSTS = {**COSTS, "draft_token_s": 0.0045}


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_a_cost_file_swapped_during_the_search_is_refused(vocab_dataset, tmp_path):
    costs = tmp_path / "c.json"
    costs.write_text(json.dumps(COSTS))
    rows: list[dict] = []

    def swap(row):
        rows.append(row)
        if len(rows) == 1:  # after generation 0: the file is replaced (an atomic rename) while the run goes
            other = tmp_path / "swap.json"
            other.write_text(json.dumps(OTHER_COSTS, indent=1))
            os.replace(other, costs)
    with pytest.raises(InputError, match=f"^{costs}: the cost file changed since the run started") as exc:
        run(resolve({**SETTINGS, "data": str(vocab_dataset), "costs": str(costs), "out": str(tmp_path / "out")}),
            progress=swap)
    assert "SHA-256" in _one_line(exc) and len(rows) == 1
    assert pinned(costs) is None  # released with the run


def test_an_unchanged_cost_file_gives_the_same_run_as_before(vocab_dataset, tmp_path):
    costs = tmp_path / "c.json"
    costs.write_text(json.dumps(COSTS))
    cfg = {**SETTINGS, "data": str(vocab_dataset), "costs": str(costs)}
    a = run(resolve({**cfg, "out": str(tmp_path / "a")}))
    b = run(resolve({**cfg, "out": str(tmp_path / "b")}))
    def strip(rows):
        return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]
    assert strip(a.result.logbook) == strip(b.result.logbook)
    costs.write_text(json.dumps(OTHER_COSTS, indent=1))  # changed after the run: read afresh, not refused
    run(resolve({**cfg, "out": str(tmp_path / "c")}))


def test_a_cost_file_swapped_during_an_island_run_is_refused(vocab_dataset, tmp_path):
    pytest.importorskip("distributed")
    from evolve.cluster import ClusterOptions

    costs = tmp_path / "c.json"
    costs.write_text(json.dumps(COSTS))
    rows: list[dict] = []

    def swap(row):
        rows.append(row)
        if len(rows) == 1:  # after the first epoch: the workers' next read finds another file
            other = tmp_path / "swap.json"
            other.write_text(json.dumps(OTHER_COSTS, indent=1))
            os.replace(other, costs)
    cfg = resolve({**SETTINGS, "data": str(vocab_dataset), "costs": str(costs), "out": str(tmp_path / "out"),
                   "islands": 2, "migrants": 2})
    with pytest.raises(InputError, match=f"{costs}: the cost file changed since the run started") as exc:
        run(cfg, progress=swap, cluster=ClusterOptions(workers=1))
    _one_line(exc)
    assert rows[-1]["gen"] < cfg.generations  # refused at the next epoch, before the run ended


def test_an_island_task_refuses_a_cost_file_other_than_the_pinned_one(vocab_dataset, tmp_path):
    costs = tmp_path / "c.json"
    costs.write_text(json.dumps(COSTS))
    cfg = resolve({**SETTINGS, "data": str(vocab_dataset), "costs": str(costs), "islands": 2})
    pins = {"costs": {"path": str(costs), "sha256": hashlib.sha256(json.dumps(OTHER_COSTS).encode()).hexdigest()}}
    job = EpochJob(cfg.to_dict(), ("target_prob", "draft_prob"), str(vocab_dataset), {}, 1, 1, inputs=pins)
    with pytest.raises(InputError, match=f"{costs}: the cost file changed since the run started") as exc:
        run_epoch(job)
    _one_line(exc)


def test_a_tree_table_swapped_after_its_digest_is_refused(vocab_dataset, tmp_path, monkeypatch):
    import evolve.search.rundir as rundir

    data = tmp_path / "data"
    shutil.copytree(vocab_dataset, data)
    table = tree_path(data, "train")
    real = rundir.dataset_info

    def digest_then_swap(*args):
        info = real(*args)  # the run records the tree table's digest here...
        other = tmp_path / "other.parquet"
        shutil.copy(tree_path(data, "valid"), other)
        os.replace(other, table)  # ...and the table is replaced before the scorers parse it
        return info
    monkeypatch.setattr(rundir, "dataset_info", digest_then_swap)
    cfg = resolve({"evolve": "tree-shape", "objective": "tokens_per_second", "population": 8, "generations": 1,
                   "data": str(data), "out": str(tmp_path / "out"), "seed": 1})
    with pytest.raises(InputError, match=f"^{table}: the tree table changed since the run started") as exc:
        run(cfg)
    _one_line(exc)
    assert pinned(table) is None  # released with the run
    shutil.copy(tree_path(vocab_dataset, "train"), table)  # another file state, no pin: read as any table
    assert load_trees(data, "train").trees > 0


def _champion(name: str, expression: str) -> str:
    return champion_json(Champion(name=name, expression=expression, description="test verifier",
                                  metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}},
                                  provenance={"test": True}))


def _stopped(cfg_values: dict, tmp: Path) -> Path:
    gens: list[int] = []
    info = run(resolve({**SETTINGS, **cfg_values, "out": str(tmp / "out")}), progress=lambda r: gens.append(r["gen"]),
               stop=lambda: len(gens) >= 2)
    assert info.checkpoint_dir is not None
    return info.checkpoint_dir


@pytest.mark.parametrize("change", ["edit", "other_directory"])
def test_a_promoted_verifier_named_by_name_is_pinned(change, vocab_dataset, tmp_path, monkeypatch):
    champions = tmp_path / "champions"
    champions.mkdir()
    (champions / "vname.json").write_text(_champion("vname", "min(1.0, div(target_prob, draft_prob))"))
    monkeypatch.setenv("SPECDEC_CHAMPIONS_DIR", str(champions))
    partial = _stopped({"data": str(vocab_dataset), "verify_with": "vname"}, tmp_path)
    head = read_header(partial / CHECKPOINT_FILE)
    assert head["config"]["verify_with"] == "vname"
    assert head["inputs"]["verify_with"] == {"path": str(champions / "vname.json"), "sha256": hashlib.sha256(
        (champions / "vname.json").read_bytes()).hexdigest()}
    if change == "edit":
        (champions / "vname.json").write_text(_champion("vname", "0.5"))
        match = f"verifier's champion file {champions / 'vname.json'} \\(setting 'verify_with'\\) changed since"
    else:
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "vname.json").write_text(_champion("vname", "0.5"))
        monkeypatch.setenv("SPECDEC_CHAMPIONS_DIR", str(elsewhere))
        match = (f"cannot resume: the verifier 'vname' \\(setting 'verify_with'\\) is now {elsewhere / 'vname.json'}, "
                 f"but the run read {champions / 'vname.json'}")
    with pytest.raises(InputError, match=match) as exc:
        resume(partial)
    _one_line(exc)

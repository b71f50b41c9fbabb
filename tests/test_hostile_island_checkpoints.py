"""Hostile checkpoints of an island run, re-signed after a change (the digest recomputed): a logbook that does
not describe the populations held (after migration a migrant is a copy of an individual of the last row, so every
individual lies within the row's ranges and the best is kept), or evaluations that are not the rows' nevals.
Each refused by ``python -m evolve resume`` in one line naming the checkpoint file and the field (exit 2, no
traceback, nothing written); the checkpoint the run wrote reads back.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from evolve.cluster import ClusterOptions
from evolve.search.checkpoint import CHECKPOINT_FILE, read_checkpoint, read_header
from evolve.search.config import resolve
from evolve.search.rundir import run
from evolve.traces.io import write_dataset
from evolve.traces.synth.independent import generate_split
from test_checkpoint_hostile import _forge, _refused, _set

pytest.importorskip("distributed")

#: Two islands exchanging 3 migrants after every epoch of 2 generations; stopped after generation 2 of 4.
SETTINGS = {"population": 16, "generations": 4, "migration_interval": 2, "seed": 1, "islands": 2, "migrants": 3}


@pytest.fixture(scope="module")
def island_partial(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-islands")
    data = root / "data"
    write_dataset(data, {"train": generate_split(40, 1), "valid": generate_split(15, 2)}, {"generator": "independent"})
    rows: list = []
    stopped = run(resolve({"data": str(data), "out": str(root / "out"), **SETTINGS}), progress=rows.append,
                  stop=lambda: len(rows) > 2, cluster=ClusterOptions(workers=1))
    assert stopped.checkpoint_dir is not None
    assert read_header(stopped.checkpoint_dir / CHECKPOINT_FILE)["generation"] == 2
    return stopped.checkpoint_dir


def _copy(partial: Path, tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / "out" / partial.name
    shutil.copytree(partial, target)
    return target


def _shift(column, delta):
    def edit(data):
        data["logbook"][2][column] += delta
    return edit


def _fitness_above_the_row(data):
    data["islands"][1]["population"][0]["wvalues"] = [data["logbook"][2]["train_max"] + 0.25]


def _lowest(data) -> float:
    return min(p["wvalues"][0] for island in data["islands"] for p in island["population"])


def _min_above_an_individual(data):
    data["logbook"][2]["train_min"] = _lowest(data) + 1e-3
    data["logbook"][2]["train_median"] = max(data["logbook"][2]["train_median"], data["logbook"][2]["train_min"])
    data["logbook"][2]["train_avg"] = max(data["logbook"][2]["train_avg"], data["logbook"][2]["train_min"])


CASES = {
    "train_max above the best held": (_shift("train_max", 0.5), ("'logbook[2].train_max'",)),
    "an individual above train_max": (_fitness_above_the_row, ("'logbook[2].train_max'", "islands[1].population[0]")),
    "train_min above an individual": (_min_above_an_individual, ("'logbook[2].train_max'", "train_min")),
    "size_max below the largest": (_set("logbook", 2, "size_max", value=1), ("'logbook[2]",)),
    "evaluations not the logbook's": (_set("evaluations", value=1000), ("'evaluations'", "nevals add up")),
}


def test_the_island_checkpoint_the_run_wrote_reads_back(island_partial, tmp_path):
    partial = _copy(island_partial, tmp_path)
    _forge(partial / CHECKPOINT_FILE)  # re-signed, unchanged
    _, snapshot = read_checkpoint(partial / CHECKPOINT_FILE)
    assert snapshot is not None and len(snapshot.islands) == 2 and len(snapshot.logbook) == 3


@pytest.mark.parametrize("case", list(CASES))
def test_a_re_signed_island_checkpoint_whose_logbook_disagrees_is_refused(case, island_partial, tmp_path):
    edit, culprits = CASES[case]
    partial = _copy(island_partial, tmp_path)
    _forge(partial / CHECKPOINT_FILE, edit_data=edit)
    _refused(partial, watch=(partial.parent,), culprits=(str(partial / CHECKPOINT_FILE), *culprits))

"""Sharded harvesting on Dask: the same dataset as one process, resume of missing shards only, the CLI.

The tiny offline Llama models of ``test_harvest.py`` (its ``files`` fixture) are harvested on a Dask
LocalCluster of two worker processes on the loopback interface.
"""
from __future__ import annotations

import pandas as pd
import pytest

from test_harvest import MAX_NEW, _config, files, hv  # noqa: F401 (fixture)

from click.testing import CliRunner  # noqa: E402

from data.cluster import ClusterOptions  # noqa: E402
from data.harvest.prompts import assign_splits, processing_order  # noqa: E402
from data.harvest.resume import WORK_DIR, part_path  # noqa: E402
from data.harvest.shards import harvest_sharded, shard_texts  # noqa: E402
from data.io import SPLITS, load_metadata  # noqa: E402
from evolve.cli.harvest import harvest as harvest_cmd  # noqa: E402

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    import logging

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR) as c:
        yield c


def _same(a, b) -> None:
    for name in SPLITS:
        pd.testing.assert_frame_equal(pd.read_parquet(a / f"{name}.parquet"), pd.read_parquet(b / f"{name}.parquet"))
    assert (a / "texts.jsonl").read_text() == (b / "texts.jsonl").read_text()
    assert load_metadata(a)["statistics"] == load_metadata(b)["statistics"]


def test_shards_cut_the_processing_order():
    order = processing_order(assign_splits(10, 11))
    pieces = shard_texts(order, 3)
    assert [len(p) for p in pieces] == [3, 3, 4] and sum(pieces, []) == order
    assert shard_texts(order[:2], 5) == [[order[0]], [order[1]]]


@pytest.mark.slow
def test_sharded_harvest_equals_one_process_and_resumes_missing_shards(files, cluster, tmp_path):
    kw = {"draft": files["draft"], "threads": 1, "max_new_tokens": MAX_NEW // 2}
    one = tmp_path / "one"
    hv.harvest(_config(files, one, **kw), progress=False)
    many = tmp_path / "many"
    where = ClusterOptions(scheduler=cluster.scheduler_address)
    res = harvest_sharded(_config(files, many, **kw), 3, where, progress=False)
    assert res.texts_done == res.texts_total == 10 and res.consolidated and not res.interrupted
    _same(one, many)
    # a killed harvest: one shard's texts lost, the others on disk
    order = processing_order(assign_splits(10, 11))
    lost = shard_texts(order, 3)[1]
    kept = {t: part_path(many / WORK_DIR, t).stat().st_mtime_ns for t in order if t not in lost}
    for t in lost:
        part_path(many / WORK_DIR, t).unlink()
    again = harvest_sharded(_config(files, many, **kw), 3, where, progress=False)
    assert again.texts_done == 10
    assert {t: part_path(many / WORK_DIR, t).stat().st_mtime_ns for t in kept} == kept  # only the lost shard ran
    _same(one, many)


def test_cli_shards(files, cluster, tmp_path):
    out = tmp_path / "cli"
    res = CliRunner().invoke(harvest_cmd, ["--target", files["target"], "--draft-window", "2,4", "--prompts",
                                           files["prompts"], "--max-new-tokens", "6", "--gamma", "2", "--out",
                                           str(out), "--no-progress", "--threads", "1", "--shards", "2",
                                           "--scheduler", cluster.scheduler_address])
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1] == str(out)
    assert load_metadata(out)["complete"] is True

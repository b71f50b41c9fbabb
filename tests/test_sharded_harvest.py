"""Sharded harvesting on Dask: the same dataset as one process, one part file per shard, resume of the
missing shards only (also over the parts of a one-process harvest or of another shard count), the CLI.

The tiny offline Llama models of the harvest tests (the ``llama_files`` fixture of ``conftest.py``) are
harvested on a Dask LocalCluster of two worker processes on the loopback interface.
"""
from __future__ import annotations

import json
import os

import pandas as pd
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
pytest.importorskip("torch")
pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402

from evolve.cluster import ClusterOptions  # noqa: E402
from evolve.harvest import loop as hv  # noqa: E402
from evolve.harvest.prompts import assign_splits, processing_order  # noqa: E402
from evolve.harvest import shards as sh  # noqa: E402
from evolve.harvest.resume import WORK_DIR, finished_texts, part_texts, shard_part_path  # noqa: E402
from evolve.harvest.shards import harvest_sharded, shard_texts  # noqa: E402
from evolve.traces.io import SPLITS, load_metadata  # noqa: E402
from evolve.cli.harvest import harvest as harvest_cmd  # noqa: E402

from harvest_helpers import MAX_NEW, harvest_config, stop_after  # noqa: E402

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


def _kw(llama_files) -> dict:
    return {"draft": llama_files["draft"], "threads": 1, "max_new_tokens": MAX_NEW // 2}


@pytest.fixture(scope="module")
def reference(llama_files, tmp_path_factory):
    """A one-process harvest with the options of the sharded ones."""
    out = tmp_path_factory.mktemp("sharded") / "one"
    hv.harvest(harvest_config(llama_files, out, **_kw(llama_files)), progress=False)
    return out


@pytest.fixture
def written(monkeypatch):
    """The shard parts the client writes: [(file name, texts of the run)], in order of writing."""
    log = []
    real = sh.write_shard

    def spy(path, outcome, work=None):
        real(path, outcome, work)
        log.append((path.name, sorted(t for t, _, _ in outcome.texts)))
    monkeypatch.setattr(sh, "write_shard", spy)
    return log


def _tokens(out, texts) -> int:
    rows = [json.loads(line) for line in (out / "texts.jsonl").read_text().splitlines()]
    return sum(r["tokens"] for r in rows if r["seq_id"] in texts)


@pytest.mark.slow
def test_sharded_harvest_equals_one_process_and_resumes_missing_shards(llama_files, cluster, reference, written,
                                                                       tmp_path):
    many = tmp_path / "many"
    where = ClusterOptions(scheduler=cluster.scheduler_address)
    res = harvest_sharded(harvest_config(llama_files, many, **_kw(llama_files)), 3, where, progress=False)
    assert res.texts_done == res.texts_total == 10 and res.consolidated and not res.interrupted
    _same(reference, many)
    # one part per shard, holding exactly the shard's texts
    pieces = shard_texts(processing_order(assign_splits(10, 11)), 3)
    parts = [shard_part_path(many / WORK_DIR, k, 3) for k in range(3)]
    assert sorted(p.name for p in (many / WORK_DIR / "parts").iterdir()) == [p.name for p in parts]
    assert [sorted(part_texts(p)) for p in parts] == [sorted(p) for p in pieces]
    assert sorted(name for name, _ in written) == [p.name for p in parts]
    # a killed harvest: one shard's part lost, the others on disk
    kept = {p: p.stat().st_mtime_ns for k, p in enumerate(parts) if k != 1}
    parts[1].unlink()
    written.clear()
    again = harvest_sharded(harvest_config(llama_files, many, **_kw(llama_files)), 3, where, progress=False)
    assert again.texts_done == 10
    assert written == [(parts[1].name, sorted(pieces[1]))]  # only the lost shard ran, whole
    assert again.tokens_generated == _tokens(reference, set(pieces[1]))
    assert {p: p.stat().st_mtime_ns for p in kept} == kept
    _same(reference, many)


@pytest.mark.slow
def test_resume_over_parts_of_one_process_and_of_another_shard_count(llama_files, cluster, reference, written,
                                                                     tmp_path):
    out = tmp_path / "mixed"
    config = harvest_config(llama_files, out, **_kw(llama_files))
    where = ClusterOptions(scheduler=cluster.scheduler_address)
    order = processing_order(assign_splits(10, 11))

    first = hv.harvest(config, progress=False, on_text_done=stop_after(4))
    assert first.interrupted and sorted(finished_texts(out / WORK_DIR)) == sorted(order[:4])

    real = sh.write_shard

    def crash_after_one_shard(path, outcome, work=None):  # the client killed after writing one shard part
        real(path, outcome, work)
        raise KeyboardInterrupt
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sh, "write_shard", crash_after_one_shard)
        second = harvest_sharded(config, 3, where, progress=False)
    assert second.interrupted
    (name, texts), = [(p.name, sorted(part_texts(p))) for p in (out / WORK_DIR / "parts").glob("shard-*")]
    k = int(name[6:11])
    assert k in (1, 2) and texts == sorted(set(shard_texts(order, 3)[k]) - set(order[:4]))  # only texts in no part

    written.clear()
    third = harvest_sharded(config, 2, where, progress=False)  # resumed with another shard count
    assert third.texts_done == 10 and not third.interrupted
    done = set(order[:4]) | set(texts)
    assert sorted(t for _, ts in written for t in ts) == sorted(set(order) - done)
    assert third.tokens_generated == _tokens(reference, set(order) - done)
    _same(reference, out)
    # nothing left to do, in either mode; each text is in exactly one part (finished_texts would refuse)
    assert sorted(finished_texts(out / WORK_DIR)) == sorted(order)
    written.clear()
    assert harvest_sharded(config, 3, where, progress=False).tokens_generated == 0 and written == []
    assert hv.harvest(config, progress=False).tokens_generated == 0
    _same(reference, out)


def test_cli_shards(llama_files, cluster, tmp_path):
    out = tmp_path / "cli"
    res = CliRunner().invoke(harvest_cmd, ["--target", llama_files["target"], "--draft-window", "2,4", "--prompts",
                                           llama_files["prompts"], "--max-new-tokens", "6", "--gamma", "2", "--out",
                                           str(out), "--no-progress", "--threads", "1", "--shards", "2",
                                           "--scheduler", cluster.scheduler_address])
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1] == str(out)
    assert load_metadata(out)["complete"] is True


def test_sharded_tree_harvest_equals_one_process(llama_files, cluster, tmp_path):
    """A tree harvest sharded over two workers writes the same records, texts and tree tables as in one process."""
    kw = dict(_kw(llama_files), tree_nodes=5, tree_width=2)
    one, many = tmp_path / "one", tmp_path / "many"
    hv.harvest(harvest_config(llama_files, one, **kw), progress=False)
    res = harvest_sharded(harvest_config(llama_files, many, **kw), 2, ClusterOptions(scheduler=cluster.scheduler_address),
                          progress=False)
    assert res.texts_done == res.texts_total == 10 and res.consolidated
    _same(one, many)
    for name in SPLITS:
        pd.testing.assert_frame_equal(pd.read_parquet(one / f"{name}.trees.parquet"),
                                      pd.read_parquet(many / f"{name}.trees.parquet"))

"""Part files of a harvest (evolve/harvest/resume.py): one part per shard, one per text, both together.

No model runs here: the records are random frames with the schema's columns. The sharded harvest
itself (one part per shard written, resume of the missing shards, mixed parts) is tested on tiny
models in ``test_sharded_harvest.py``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evolve.errors import InputError
from evolve.harvest.config import HarvestConfig
from evolve.harvest.resume import (
    COLUMN_ORDER, WORK_DIR, consolidate, finished_texts, part_path, part_texts, read_parts, shard_part_path,
    write_part, write_shard_part,
)
from evolve.harvest.shards import ShardOutcome, write_shard
from evolve.traces.schema import COLUMNS

pytest.importorskip("pyarrow")

_VALUE_TYPE = {c.name: c.value_type for c in COLUMNS}


def _frame(seq_id: int, rows: int, seed: int) -> pd.DataFrame:
    """``rows`` random records of text ``seq_id`` with the schema's column names and dtypes."""
    rng = np.random.default_rng([seed, seq_id])
    cols = {}
    for name in COLUMN_ORDER:
        kind = _VALUE_TYPE[name]
        if name == "seq_id":
            cols[name] = np.full(rows, seq_id, dtype=np.int64)
        elif kind == "int":
            cols[name] = rng.integers(0, 50, rows).astype(np.int64)
        elif kind == "bool":
            cols[name] = rng.random(rows) < 0.5
        else:
            cols[name] = rng.random(rows)
    return pd.DataFrame(cols)


def _info(seq_id: int, rows: int) -> dict:
    return {"seq_id": seq_id, "split": "train", "line": seq_id + 1, "prompt": f"p{seq_id}", "completion": "c",
            "completion_ids": [1, 2], "prompt_tokens": 3, "tokens": rows, "finish": "length",
            "target_calls": 1, "blocks": 1}


def _texts(ids, seed=0):
    return [(_frame(t, 2 + t % 4, seed), _info(t, 2 + t % 4)) for t in ids]


def _same(got, want) -> None:
    assert [info for _, info in got] == [info for _, info in want]
    for (a, _), (b, _) in zip(got, want):
        pd.testing.assert_frame_equal(a, b)


def test_shard_part_gives_back_each_text(tmp_path):
    texts = _texts([4, 9, 2])
    texts.insert(1, (_frame(7, 0, 0), _info(7, 0)))  # a text without records keeps its place
    path = shard_part_path(tmp_path, 1, 3)
    write_shard_part(path, texts)
    assert path.name == "shard-00001-of-00003.parquet"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    _same(read_parts(path), texts)
    assert part_texts(path) == [4, 7, 9, 2]
    one = part_path(tmp_path, 5)
    write_part(one, *_texts([5])[0])
    _same(read_parts(one), _texts([5]))
    assert part_texts(one) == [5]


def test_finished_texts_reads_both_kinds_and_ignores_temporary_files(tmp_path):
    write_shard_part(shard_part_path(tmp_path, 0, 2), _texts([0, 3]))
    write_shard_part(shard_part_path(tmp_path, 1, 4), _texts([6]))  # from a harvest with another --shards
    for t in (1, 8):
        write_part(part_path(tmp_path, t), *_texts([t])[0])
    (tmp_path / "parts" / ".text-000002.parquet.tmp-abcdefgh").write_bytes(b"half")  # a killed write
    (tmp_path / "parts" / "notes.txt").write_text("x")
    done = finished_texts(tmp_path)
    assert sorted(done) == [0, 1, 3, 6, 8]
    assert done[3].name == "shard-00000-of-00002.parquet" and done[8].name == "text-000008.parquet"
    assert finished_texts(tmp_path / "nothing") == {}


@pytest.mark.parametrize("kind", ["text", "shard"])
def test_a_text_in_two_parts_is_refused(tmp_path, kind):
    out = tmp_path / "out"
    work = out / WORK_DIR
    write_shard_part(shard_part_path(work, 0, 2), _texts([0, 3, 5]))
    if kind == "text":
        write_part(part_path(work, 3), *_texts([3])[0])
    else:
        write_shard_part(shard_part_path(work, 1, 3), _texts([1, 3]))
    with pytest.raises(InputError) as err:
        finished_texts(work)
    msg = str(err.value)
    assert "text 3 is in two part files" in msg and "shard-00000-of-00002.parquet" in msg and "\n" not in msg
    config = HarvestConfig(target="t", prompts="p", out=str(out))
    splits = {"train": [0, 1, 2, 4, 5, 6, 7], "valid": [3], "test": [8]}
    with pytest.raises(InputError, match="text 3 is in two part files"):
        consolidate(out, config, {}, splits, "sha")
    assert not (out / "train.parquet").exists()


def test_damaged_shard_part_is_named(tmp_path):
    path = shard_part_path(tmp_path, 0, 1)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not parquet")
    with pytest.raises(InputError, match="shard-00000-of-00001.parquet: damaged harvest part file"):
        finished_texts(tmp_path)
    with pytest.raises(InputError, match="damaged harvest part file"):
        read_parts(path)


def test_shard_written_again_keeps_the_texts_of_its_old_part(tmp_path):
    path = shard_part_path(tmp_path, 2, 4)
    write_shard_part(path, _texts([5, 11]))
    outcome = ShardOutcome(2, texts=[(t, df, info) for (df, info), t in zip(_texts([8, 1]), [8, 1])])
    write_shard(path, outcome)
    _same(read_parts(path), _texts([1, 5, 8, 11]))

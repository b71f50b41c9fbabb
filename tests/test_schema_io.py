"""Loader validation: every kind of bad dataset gives one InputError naming file, column and row."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from evolve.errors import InputError
from evolve.traces.io import Traces, load_dataset, load_metadata, load_split, write_dataset
from evolve.traces.schema import REQUIRED_COLUMNS, derive_seq_id, split_stats
from evolve.traces.synth.independent import generate_split


@pytest.fixture()
def frame() -> pd.DataFrame:
    return generate_split(5, 3)


def _write(tmp_path, df, fmt="parquet"):
    write_dataset(tmp_path, {"train": df, "valid": df, "test": df}, {"generator": {"name": "test"}}, fmt)
    return tmp_path


def _error(tmp_path, df, fmt="parquet") -> str:
    _write(tmp_path, df, fmt)
    with pytest.raises(InputError) as err:
        load_split(tmp_path, "train")
    msg = str(err.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_round_trip(tmp_path, frame, fmt):
    _write(tmp_path, frame, fmt)
    splits = load_dataset(tmp_path)
    for traces in splits.values():
        assert traces.n == len(frame)
        for col in REQUIRED_COLUMNS:
            np.testing.assert_array_equal(traces[col], frame[col].to_numpy())
    assert load_metadata(tmp_path)["schema_version"] == 1
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_switching_format_removes_stale_files(tmp_path, frame):
    _write(tmp_path, frame, "json")
    _write(tmp_path, frame, "parquet")
    assert not list(tmp_path.glob("*.json.*")) and not (tmp_path / "train.json").exists()


def test_seed_json_without_seq_id(tmp_path, frame):
    records = frame.drop(columns=["seq_id"]).to_dict(orient="records")
    (tmp_path / "train.json").write_text(json.dumps(records))
    traces = load_split(tmp_path, "train")
    np.testing.assert_array_equal(traces["seq_id"], frame["seq_id"].to_numpy())


def test_derive_seq_id():
    np.testing.assert_array_equal(derive_seq_id(np.array([0, 1, 2, 0, 1, 0])), [0, 0, 0, 1, 1, 2])


def test_missing_dataset_names_the_command(tmp_path):
    with pytest.raises(InputError, match="generate_data.py"):
        load_split(tmp_path / "nowhere", "train")
    with pytest.raises(InputError, match="generate_data.py"):
        load_split(tmp_path, "test")


def test_truncated_parquet(tmp_path, frame):
    _write(tmp_path, frame)
    data = (tmp_path / "train.parquet").read_bytes()
    (tmp_path / "train.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"train\.parquet: not a readable Parquet file"):
        load_split(tmp_path, "train")


def test_truncated_json(tmp_path, frame):
    _write(tmp_path, frame, "json")
    text = (tmp_path / "train.json").read_text()
    (tmp_path / "train.json").write_text(text[:100])
    with pytest.raises(InputError, match="not valid JSON"):
        load_split(tmp_path, "train")


def test_json_not_a_list(tmp_path):
    (tmp_path / "train.json").write_text('{"a": 1}')
    with pytest.raises(InputError, match="array of records"):
        load_split(tmp_path, "train")


def test_missing_column(tmp_path, frame):
    msg = _error(tmp_path, frame.drop(columns=["target_entropy"]))
    assert "missing required column 'target_entropy'" in msg


def test_misspelt_column(tmp_path, frame):
    msg = _error(tmp_path, frame.rename(columns={"draft_prob": "draft_porb"}))
    assert "'draft_porb'" in msg and "did you mean 'draft_prob'" in msg


def test_wrong_dtype(tmp_path, frame):
    bad = frame.astype({"draft_entropy": object})
    bad.loc[4, "draft_entropy"] = "high"
    msg = _error(tmp_path, bad, "json")
    assert "column 'draft_entropy', row 4" in msg and "'high'" in msg


@pytest.mark.parametrize("column,value,row,why", [
    ("draft_prob", 0.0, 7, "outside (0, 1]"),
    ("target_prob", 1.5, 2, "outside [0, 1]"),
    ("draft_entropy", -0.1, 9, "outside [0, inf)"),
    ("rand_value", 1.0, 3, "outside [0, 1)"),
    ("target_entropy", np.nan, 5, "NaN or infinite"),
    ("target_prob", np.inf, 6, "NaN or infinite"),
])
def test_bad_values(tmp_path, frame, column, value, row, why):
    bad = frame.copy()
    bad.loc[row, column] = value
    if column != "rand_value":
        bad["baseline_accepts"] = bad["rand_value"] < np.minimum(1, bad["target_prob"] / bad["draft_prob"])
    msg = _error(tmp_path, bad)
    assert f"column '{column}', row {row}" in msg and why in msg and "train.parquet" in msg


def test_inconsistent_baseline(tmp_path, frame):
    bad = frame.copy()
    bad.loc[11, "baseline_accepts"] = not bad.loc[11, "baseline_accepts"]
    msg = _error(tmp_path, bad)
    assert "column 'baseline_accepts', row 11" in msg and "inconsistent" in msg


def test_empty_split(tmp_path, frame):
    msg = _error(tmp_path, frame.iloc[:0])
    assert "empty" in msg


def test_bad_draft_index_order(tmp_path, frame):
    bad = frame.assign(draft_index=np.arange(len(frame)) % 4)
    bad.loc[6, "draft_index"] = 3
    msg = _error(tmp_path, bad)
    assert "column 'draft_index', row 6" in msg


def test_top_prob_below_token_prob(tmp_path, frame):
    bad = frame.assign(target_top_prob=frame["target_prob"])
    bad.loc[8, "target_top_prob"] = bad.loc[8, "target_prob"] / 2
    msg = _error(tmp_path, bad)
    assert "column 'target_top_prob', row 8" in msg


def test_boolean_from_integers(frame):
    traces = Traces.from_frame(frame.astype({"top_token_match": np.int64}))
    assert traces["top_token_match"].dtype == bool


def test_unsupported_schema_version(tmp_path, frame):
    _write(tmp_path, frame)
    (tmp_path / "metadata.json").write_text('{"schema_version": 99}')
    with pytest.raises(InputError, match="schema_version 99"):
        load_split(tmp_path, "train")


def test_failed_write_keeps_previous_dataset(tmp_path, frame):
    _write(tmp_path, frame)
    before = (tmp_path / "train.parquet").read_bytes()

    class Boom(pd.DataFrame):
        def to_parquet(self, *a, **k):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_dataset(tmp_path, {"train": frame, "valid": Boom(frame)}, {}, "parquet")
    assert (tmp_path / "train.parquet").read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_split_stats(frame):
    cols = Traces.from_frame(frame).columns
    stats = split_stats(cols)
    assert stats["tokens"] == len(frame)
    assert stats["sequences"] == 5
    assert stats["standard_acceptance"] == pytest.approx(frame["baseline_accepts"].mean())


# --- block_residual_mass (NaN at a block's last record) and target_rank ------------------------

def _with_block_columns(frame: pd.DataFrame, gamma: int = 3) -> pd.DataFrame:
    """``frame`` with draft_index 0..gamma-1 per block (blocks inside sequences) and the two columns."""
    df = frame.copy()
    depth = df.groupby("seq_id").cumcount().to_numpy() % gamma
    last = np.append(depth[1:] == 0, True)
    df["draft_index"] = depth
    df["block_residual_mass"] = np.where(last, np.nan, 0.25)
    df["target_rank"] = np.arange(len(df)) % 4
    return df


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_block_columns_round_trip_with_nan_at_block_ends(tmp_path, frame, fmt):
    df = _with_block_columns(frame)
    _write(tmp_path, df, fmt)
    if fmt == "json":  # plain JSON: NaN is written as null
        assert "NaN" not in (tmp_path / "train.json").read_text()
        assert json.loads((tmp_path / "train.json").read_text())[2]["block_residual_mass"] is None
    traces = load_split(tmp_path, "train")
    np.testing.assert_array_equal(traces["block_residual_mass"], df["block_residual_mass"].to_numpy())
    assert traces["block_residual_mass"].dtype == np.float64 and traces["target_rank"].dtype == np.int64
    np.testing.assert_array_equal(traces["target_rank"], df["target_rank"].to_numpy())


def test_block_columns_all_null_in_json(tmp_path, frame):
    df = _with_block_columns(frame, gamma=1)  # every record ends its block: the column is all null
    _write(tmp_path, df, "json")
    assert np.isnan(load_split(tmp_path, "train")["block_residual_mass"]).all()


@pytest.mark.parametrize("column, value, row, why", [
    ("block_residual_mass", np.nan, 0, "NaN is only valid at a block's last record"),
    ("block_residual_mass", np.inf, 0, "infinite"),
    ("block_residual_mass", 1.5, 0, "outside"),
    ("target_rank", -1, 0, "outside"),
])
def test_bad_block_columns(tmp_path, frame, column, value, row, why):
    df = _with_block_columns(frame)
    df[column] = df[column].astype(float if column == "block_residual_mass" else np.int64)
    df.loc[row, column] = value
    msg = _error(tmp_path, df)
    assert f"column '{column}'" in msg and f"row {row}" in msg and why in msg
    # NaN stays refused in the other float columns
    df = _with_block_columns(frame)
    df["overlap"] = 0.5
    df.loc[1, "overlap"] = np.nan
    assert "NaN or infinite" in _error(tmp_path, df)

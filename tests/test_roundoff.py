"""Round-off tolerance of the loader: [0, 1]-bounded values at most 1e-9 outside are clipped with one warning."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from evolve.errors import InputError
from evolve.traces.io import Traces, load_split, write_dataset
from evolve.traces.schema import ROUNDOFF_TOLERANCE, RoundOffWarning
from evolve.traces.synth.independent import generate_split


@pytest.fixture()
def frame() -> pd.DataFrame:
    df = generate_split(5, 3)
    return df.assign(overlap=np.minimum(df["target_prob"], df["draft_prob"]),
                     target_top_prob=df["target_prob"], draft_top_prob=df["draft_prob"])


def _rebase(df: pd.DataFrame) -> pd.DataFrame:
    """baseline_accepts recomputed from the (changed) probabilities, as a generator would write it."""
    return df.assign(baseline_accepts=df["rand_value"] < np.minimum(1, df["target_prob"] / df["draft_prob"]))


def _write(tmp_path, df):
    write_dataset(tmp_path, {"train": df, "valid": df, "test": df}, {"generator": {"name": "test"}})
    return tmp_path


def _load(tmp_path, df) -> tuple[Traces, list[warnings.WarningMessage]]:
    _write(tmp_path, df)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traces = load_split(tmp_path, "train")
    return traces, [w for w in caught if issubclass(w.category, RoundOffWarning)]


def test_the_reported_value_is_clipped_with_one_warning(tmp_path, frame):
    bad = frame.copy()
    bad.loc[3, "overlap"] = 1.0000000000000007  # the value of the bug report
    bad.loc[5, "overlap"] = -1e-12
    bad.loc[2, "target_prob"] = bad.loc[2, "target_top_prob"] = 1.0 + 5e-10
    bad = _rebase(bad)
    traces, caught = _load(tmp_path, bad)
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert "\n" not in msg and "train.parquet" in msg and "clipped 4 values" in msg
    assert "'overlap' 2" in msg and "'target_prob' 1" in msg and "'target_top_prob' 1" in msg
    assert traces["overlap"][3] == 1.0 and traces["overlap"][5] == 0.0
    assert traces["target_prob"][2] == 1.0 and traces["target_top_prob"][2] == 1.0
    keep = np.ones(len(bad), dtype=bool)
    keep[[2, 3, 5]] = False
    np.testing.assert_array_equal(traces["overlap"][keep], bad["overlap"].to_numpy()[keep])
    assert bad.loc[3, "overlap"] == 1.0000000000000007  # the caller's frame is left alone


def test_clean_data_gives_no_warning(tmp_path, frame):
    _, caught = _load(tmp_path, frame)
    assert caught == []


def test_in_memory_frames_are_clipped_too(frame):
    bad = frame.copy()
    bad.loc[1, "overlap"] = 1.0 + ROUNDOFF_TOLERANCE
    with pytest.warns(RoundOffWarning, match=r"<memory>: clipped 1 value lying within 1e-9"):
        traces = Traces.from_frame(bad)
    assert traces["overlap"][1] == 1.0


@pytest.mark.parametrize("column,value,why", [
    ("overlap", 1.0 + 2e-9, "outside [0, 1]"),
    ("target_prob", -1.1e-9, "outside [0, 1]"),
    ("draft_prob", -1e-12, "outside (0, 1]"),  # an open end is never clipped onto
    ("rand_value", 1.0 + 1e-12, "outside [0, 1)"),
    ("draft_entropy", -1e-12, "outside [0, inf)"),  # only [0, 1]-bounded columns have the tolerance
])
def test_beyond_the_tolerance_or_at_an_open_end_is_refused(tmp_path, frame, column, value, why):
    bad = frame.copy()
    bad.loc[4, column] = value
    if column != "rand_value":
        bad = _rebase(bad)
    _write(tmp_path, bad)
    with pytest.raises(InputError) as err:
        load_split(tmp_path, "train")
    msg = str(err.value)
    assert f"column '{column}', row 4" in msg and why in msg and "\n" not in msg


def test_the_command_line_prints_one_warning_line(tmp_path, frame):
    import click

    from evolve.cli.errors import CliCommand

    @click.command(cls=CliCommand)
    @click.argument("data_dir")
    def count(data_dir):
        click.echo(load_split(data_dir, "test").n)

    bad = frame.copy()
    bad.loc[3, "overlap"] = 1.0000000000000007
    _write(tmp_path, bad)
    result = CliRunner().invoke(count, [str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(len(bad))
    assert result.stderr.splitlines() == [f"warning: {tmp_path / 'test.parquet'}: clipped 1 value lying within "
                                          f"1e-9 outside [0, 1] to the interval as round-off (per column: 'overlap' 1)"]

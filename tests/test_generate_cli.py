"""generate_data.py and data/generate.py: splits, seeds, metadata, statistics, bad options."""
from __future__ import annotations

import json
import os

import click
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from evolve.traces.synth import generate
from evolve.errors import InputError
from evolve.traces.io import SPLITS, load_dataset, load_metadata
from evolve.traces.schema import (LOOKUP_COLUMNS, OPTIONAL_COLUMNS, REQUIRED_COLUMNS, SCHEMA_VERSION, SUFFIX_COLUMNS,
                                  TEXT_COLUMNS, split_stats)
from evolve.cli.generate import cli

SMALL = ["--sequences", "20", "--vocab-size", "64"]


def run(args):
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    return result


def files(path):
    return sorted(os.listdir(path)) if path.exists() else []


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_vocab_dataset_round_trip(tmp_path, fmt):
    out = tmp_path / "ds"
    result = run(["--out", str(out), "--format", fmt, "--seed", "7", *SMALL])
    assert result.exit_code == 0, result.output
    assert files(out) == sorted([f"{s}.{fmt}" for s in SPLITS] + ["metadata.json"])  # no temp files left
    data = load_dataset(out)
    meta = load_metadata(out)
    assert meta["schema_version"] == SCHEMA_VERSION and meta["format"] == fmt
    assert meta["generator"] == "vocab" and meta["generator_version"] >= 1
    assert meta["seed"] == 7
    assert meta["config"]["vocab_size"] == 64 and meta["config"]["gamma"] == 5
    assert meta["sequences"] == {"train": 20, "valid": 6, "test": 6}
    assert len(set(meta["split_seeds"].values())) == 3
    for name, traces in data.items():
        drafters = set(LOOKUP_COLUMNS) | set(SUFFIX_COLUMNS)  # the columns of prompt lookup and suffix decoding
        assert set(traces.columns) == set(REQUIRED_COLUMNS) | (set(OPTIONAL_COLUMNS) - drafters - set(TEXT_COLUMNS))
        assert np.unique(traces["seq_id"]).size == meta["sequences"][name]
        assert meta["statistics"][name] == split_stats(traces.columns)  # float64 round trips exactly
        # the printed table carries the same figures
        s = meta["statistics"][name]
        line = next(l for l in result.output.splitlines() if l.startswith(name + " ") and "by draft_index" not in l)
        assert f"{s['tokens']}" in line and f"{s['standard_acceptance']:.4f}" in line
        assert f"{s['top_token_match']:.4f}" in line and f"{s['mean_target_entropy']:.3f}" in line
    assert "E[accept] by draft_index" in result.output
    assert not np.array_equal(data["train"]["rand_value"][:20], data["test"]["rand_value"][:20])


def test_seed_model_json_has_the_seed_field_names(tmp_path):
    out = tmp_path / "seed"
    result = run(["--model", "independent", "--format", "json", "--out", str(out), "--sequences", "10"])
    assert result.exit_code == 0, result.output
    records = json.loads((out / "test.json").read_text())
    assert set(records[0]) == set(REQUIRED_COLUMNS)
    data = load_dataset(out)
    assert load_metadata(out)["generator"] == "independent"
    assert load_metadata(out)["config"] == {"avg_length": 50, "match_rate": 0.72}
    assert data["valid"].n > 0 and not data["train"].has("overlap")


def test_same_seed_same_dataset_and_split_seeds_are_documented(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for out, seed in ((a, "3"), (b, "3"), (c, "4")):
        assert run(["--out", str(out), "--seed", seed, *SMALL]).exit_code == 0
    for split in SPLITS:
        pd.testing.assert_frame_equal(pd.read_parquet(a / f"{split}.parquet"), pd.read_parquet(b / f"{split}.parquet"))
    assert (a / "metadata.json").read_text() == (b / "metadata.json").read_text()
    assert not pd.read_parquet(a / "train.parquet").equals(pd.read_parquet(c / "train.parquet"))
    # each split can be regenerated alone from its recorded seed
    meta = load_metadata(a)
    from evolve.traces.synth.vocab_blocks import generate_split
    from evolve.traces.synth.vocab_model import VocabModelConfig
    again = generate_split(6, meta["split_seeds"]["test"], VocabModelConfig(**meta["config"]))
    pd.testing.assert_frame_equal(again, pd.read_parquet(a / "test.parquet"))


def test_default_output_directory_and_sizes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run(["--sequences", "4", "--vocab-size", "32"])
    assert result.exit_code == 0, result.output
    assert load_metadata(tmp_path / "data")["sequences"] == {"train": 4, "valid": 1, "test": 1}
    assert generate.split_sizes(1000) == {"train": 1000, "valid": 300, "test": 300}
    assert generate.split_sizes(1) == {"train": 1, "valid": 1, "test": 1}


def test_rewriting_replaces_the_other_format(tmp_path):
    out = tmp_path / "ds"
    assert run(["--out", str(out), *SMALL]).exit_code == 0
    assert run(["--out", str(out), "--format", "json", *SMALL]).exit_code == 0
    assert files(out) == sorted([f"{s}.json" for s in SPLITS] + ["metadata.json"])


BAD = [
    (["--sequences", "-5"], "--sequences"),
    (["--sequences", "0"], "--sequences"),
    (["--gamma", "0"], "--gamma"),
    (["--vocab-size", "1"], "--vocab-size"),
    (["--draft-quality", "0"], "--draft-quality"),
    (["--draft-quality", "1.5"], "--draft-quality"),
    (["--difficulty-drift", "-0.1"], "--difficulty-drift"),
    (["--early-boost", "1"], "--early-boost"),
    (["--sharpness-min", "2", "--sharpness-max", "1"], "--sharpness-max"),
    (["--draft-temperature", "nan"], "--draft-temperature"),
    (["--seed", "-1"], "--seed"),
    (["--model", "gpt"], "--model"),
    (["--format", "csv"], "--format"),
    (["--gamma", "three"], "--gamma"),
    (["--model", "independent", "--gamma", "4"], "--gamma"),
    (["--match-rate", "0.5"], "--match-rate"),
    (["--model", "independent", "--match-rate", "1.5"], "--match-rate"),
    (["--model", "independent", "--avg-length", "1"], "--avg-length"),
    (["--no-such-option", "1"], "--no-such-option"),
]


@pytest.mark.parametrize("args, option", BAD)
def test_bad_options_exit_2_with_one_line_and_write_nothing(tmp_path, args, option):
    out = tmp_path / "ds"
    result = run(["--out", str(out), *args])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and option in lines[0]
    assert "Traceback" not in result.output
    assert not out.exists()


def test_bad_options_leave_an_existing_dataset_untouched(tmp_path):
    out = tmp_path / "ds"
    assert run(["--out", str(out), *SMALL]).exit_code == 0
    before = {name: (out / name).read_bytes() for name in files(out)}
    result = run(["--out", str(out), "--gamma", "-2"])
    assert result.exit_code == 2
    assert {name: (out / name).read_bytes() for name in files(out)} == before


def test_output_path_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "taken"
    target.write_text("not a directory")
    result = run(["--out", str(target), *SMALL])
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and "--out" in result.stderr
    assert target.read_text() == "not a directory"


def test_subcommands_can_be_added_to_the_group(tmp_path, monkeypatch):
    calls = []

    @click.command("probe")
    @click.argument("value")
    def probe(value):
        calls.append(value)
        click.echo(f"probe {value}")

    monkeypatch.chdir(tmp_path)
    cli.add_command(probe)
    try:
        result = run(["probe", "x"])
        assert result.exit_code == 0 and "probe x" in result.output
        assert not (tmp_path / "data").exists()  # no dataset generated when a subcommand runs
    finally:
        cli.commands.pop("probe")
    assert calls == ["x"]


def test_build_config_and_model_options():
    flags = {o.flag for o in generate.model_options()}
    assert {"--vocab-size", "--gamma", "--draft-quality", "--sharpness-min", "--sharpness-max", "--depth-decay",
            "--difficulty-drift", "--avg-length", "--match-rate"} <= flags
    shared = next(o for o in generate.model_options() if o.field == "avg_length")
    assert set(shared.models) == {"vocab", "independent"}
    assert generate.build_config("vocab", {"gamma": 3, "vocab_size": None}).gamma == 3
    with pytest.raises(InputError, match="unknown model"):
        generate.build_config("nope")
    with pytest.raises(InputError, match="^seed: "):
        generate.split_seeds(2 ** 64)

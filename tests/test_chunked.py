"""Datasets generated in chunks (generate_data.py --chunk-sequences) and scored chunk by chunk from disk."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from evolve.errors import InputError
from evolve.traces.chunks import iter_split_chunks, split_row_groups
from evolve.traces.io import SPLITS, load_dataset, load_metadata, load_split, write_dataset
from evolve.traces.schema import split_stats
from evolve.traces.synth import chunked
from evolve.eval.chunked import score_split_chunks
from evolve.eval.evaluator import EvalData
from evolve.eval.fastpath.layouts import Count
from evolve.eval.population import score_counts
from evolve.gp.compiler import compile_nodes, from_tree, parse
from evolve.cli.generate import cli

SMALL = ["--sequences", "30", "--chunk-sequences", "7", "--vocab-size", "64"]
#: Counts that are integers (exact whatever the summation order).
INTEGER_COUNTS = [Count.ACCEPT, Count.FALSE_ACCEPT, Count.FALSE_REJECT, Count.INVALID, Count.BLOCKS]


def run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_chunk_seed_is_the_spawned_child():
    for split_seed, index in ((5, 0), (5, 3), (2 ** 64 - 1, 11)):
        child = np.random.SeedSequence(split_seed).spawn(index + 2)[index]
        assert chunked.chunk_seed(split_seed, index) == int(child.generate_state(1, dtype=np.uint64)[0])
    assert chunked.chunk_seed(5, 0) != chunked.chunk_seed(5, 1)
    assert chunked.chunk_sizes(30, 7) == [7, 7, 7, 7, 2] and chunked.chunk_sizes(14, 7) == [7, 7]
    with pytest.raises(InputError, match="^chunk_sequences: must be an integer >= 1"):
        chunked.chunk_sizes(30, 0)


@pytest.mark.parametrize("model", ["vocab", "independent"])
def test_chunked_dataset_is_reproducible_and_loads_whole(tmp_path, model):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    args = [*SMALL] if model == "vocab" else ["--model", model, *SMALL[:4]]
    for out, seed in ((a, "3"), (b, "3"), (c, "4")):
        result = run(["--out", str(out), "--seed", seed, *args])
        assert result.exit_code == 0, result.output
    assert sorted(os.listdir(a)) == sorted([f"{s}.parquet" for s in SPLITS] + ["metadata.json"])  # no temp files
    for split in SPLITS:  # same seed and chunk size: the same bytes
        assert (a / f"{split}.parquet").read_bytes() == (b / f"{split}.parquet").read_bytes()
    assert (a / "metadata.json").read_text() == (b / "metadata.json").read_text()
    assert not pd.read_parquet(a / "train.parquet").equals(pd.read_parquet(c / "train.parquet"))
    meta = load_metadata(a)
    assert meta["chunk_sequences"] == 7 and meta["sequences"] == {"train": 30, "valid": 9, "test": 9}
    assert meta["chunks"] == {"train": 5, "valid": 2, "test": 2}
    data = load_dataset(a)  # the ordinary loader reads the chunked files whole
    for split, traces in data.items():
        groups = split_row_groups(a, split)
        assert len(groups) == meta["chunks"][split] and sum(groups) == traces.n
        # row groups hold whole sequences: chunk c holds seq_id c*7 .. c*7+6
        ends = np.cumsum(groups)
        seq = traces["seq_id"]
        assert np.array_equal(np.unique(seq), np.arange(meta["sequences"][split]))
        for k, (lo, hi) in enumerate(zip(np.concatenate(([0], ends[:-1])), ends)):
            assert set(np.unique(seq[lo:hi])) == set(range(7 * k, min(7 * k + 7, meta["sequences"][split])))
        # the statistics of the whole split: counts and median exact, means up to rounding
        want, got = split_stats(traces.columns), meta["statistics"][split]
        assert want.keys() == got.keys()
        for key in ("tokens", "sequences", "standard_acceptance", "top_token_match", "median_target_entropy"):
            assert got[key] == want[key], key
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-15), key
    assert "chunks of 7 sequences" in result.output and "E[accept]" in result.output


def test_chunked_is_another_draw_and_its_first_chunks_do_not_depend_on_the_size(tmp_path):
    full, short, plain = tmp_path / "full", tmp_path / "short", tmp_path / "plain"
    assert run(["--out", str(full), "--seed", "3", *SMALL]).exit_code == 0
    assert run(["--out", str(short), "--seed", "3", "--sequences", "14", *SMALL[2:]]).exit_code == 0
    assert run(["--out", str(plain), "--seed", "3", *SMALL[:2], *SMALL[4:]]).exit_code == 0
    big, small = pq.ParquetFile(full / "train.parquet"), pq.ParquetFile(short / "train.parquet")
    for k in range(2):
        assert big.read_row_group(k).equals(small.read_row_group(k))
    chunked_train, plain_train = load_split(full, "train"), load_split(plain, "train")
    assert not np.array_equal(chunked_train["rand_value"][:50], plain_train["rand_value"][:50])


def test_chunk_option_errors(tmp_path):
    result = CliRunner().invoke(cli, ["--out", str(tmp_path / "x"), "--chunk-sequences", "0"])
    assert result.exit_code == 2 and "--chunk-sequences" in result.output
    result = CliRunner().invoke(cli, ["--out", str(tmp_path / "y"), "--chunk-sequences", "5", "--format", "json"])
    assert result.exit_code == 2 and "--chunk-sequences" in result.output and "parquet" in result.output
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_failed_chunked_write_keeps_previous_dataset(tmp_path):
    from evolve.traces.synth.independent import generate_split
    write_dataset(tmp_path, {"train": generate_split(5, 1)}, {})
    before = (tmp_path / "train.parquet").read_bytes()

    def chunks():
        yield generate_split(5, 2)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_dataset(tmp_path, {"train": chunks()}, {})
    assert (tmp_path / "train.parquet").read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    with pytest.raises(InputError, match="no rows"):
        write_dataset(tmp_path, {"train": iter(())}, {})
    with pytest.raises(InputError, match="parquet"):
        write_dataset(tmp_path, {"train": iter([generate_split(2, 1)])}, {}, "json")


@pytest.mark.parametrize("n", [1, 2, 1001, 1000])
def test_streaming_median_is_exact(n):
    rng = np.random.default_rng(n)
    values = np.round(rng.gamma(2.0, 1.5, size=n), 2)  # ties included
    values[: n // 3] = 0.0
    stats = chunked.StreamingStats()
    parts = np.array_split(values, 7)
    for part in parts:
        stats.buckets += np.bincount(chunked._bucket(part), minlength=stats.buckets.size)
    stats.n = n
    assert stats.median(iter(parts)) == np.median(values)


@pytest.fixture(scope="module")
def chunked_vocab(tmp_path_factory):
    path = tmp_path_factory.mktemp("chunked") / "data"
    chunked.generate_chunked(path, "vocab", 11, 60, 13, overrides={"vocab_size": 64})
    return path


def _programs(data: EvalData):
    from evolve.gp.primitives import build_pset
    from evolve.perf.measure import random_programs
    from heuristics.registry import get_rule
    trees = random_programs(build_pset(data.available), 24, 5)
    texts = ["min(1.0, mul(1.3, div(target_prob, draft_prob)))", "sub(overlap, 0.2)", "log(draft_prob)"]
    return ([get_rule("standard_rejection").program] + [compile_nodes(from_tree(t)) for t in trees]
            + [compile_nodes(parse(t)) for t in texts])


@pytest.mark.parametrize("gamma", [None, 3, 5])
def test_chunked_scoring_equals_whole_scoring(chunked_vocab, gamma):
    whole = EvalData.from_traces(load_split(chunked_vocab, "train"))
    programs = _programs(whole)
    want = score_counts(programs, whole, gamma or 0)
    seen = []
    got = score_split_chunks(programs, chunked_vocab, "train", gamma, on_chunk=lambda k, n: seen.append((k, n)))
    assert got.chunks == 5 and got.tokens == whole.n and seen[-1] == (5, whole.n)
    assert np.array_equal(got.counts[:, INTEGER_COUNTS], want[:, INTEGER_COUNTS])
    np.testing.assert_allclose(got.counts, want, rtol=1e-12, atol=1e-9)
    assert want[:, Count.ACCEPT].min() < want[:, Count.ACCEPT].max()  # the programs differ
    if gamma:
        assert got.counts[0, Count.BLOCKS] > 0
        assert got.metrics(0).tokens_per_call == pytest.approx(want[0, Count.SUM_TOKENS] / want[0, Count.BLOCKS])
    else:
        assert got.metrics(0).tokens_per_call is None
    assert got.metrics(0).fitness == pytest.approx(got.counts[0, Count.ACCEPT] / whole.n)


def test_chunked_scoring_of_a_json_split_and_bad_input(tmp_path, independent_dataset, chunked_vocab):
    from heuristics.registry import get_rule
    write_dataset(tmp_path / "j", {"train": load_split(independent_dataset, "train")}, {}, "json")
    program = [get_rule("standard_rejection").program]
    got = score_split_chunks(program, tmp_path / "j")
    whole = EvalData.from_traces(load_split(independent_dataset, "train"))
    assert got.chunks == 1 and np.array_equal(got.counts, score_counts(program, whole))
    with pytest.raises(InputError, match="no dataset directory"):
        score_split_chunks(program, tmp_path / "missing")
    with pytest.raises(InputError, match="overlap"):
        score_split_chunks([compile_nodes(parse("overlap"))], tmp_path / "j")
    with pytest.raises(InputError, match="gamma"):
        score_split_chunks(program, chunked_vocab, gamma=9)
    damaged = tmp_path / "d"
    damaged.mkdir()
    (damaged / "train.parquet").write_bytes((chunked_vocab / "train.parquet").read_bytes()[:5000])
    with pytest.raises(InputError, match="Parquet"):
        next(iter_split_chunks(damaged, "train"))

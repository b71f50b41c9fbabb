"""A split is scored by text, not by row order: the same records in any order of whole blocks score the same.

The cases are generated: for every split of the vocab dataset, the records' speculation blocks are put in several
orders (texts interleaved block by block, each text's blocks reversed, a seeded shuffle), each text's first block kept
in the texts' first-appearance order, so the reading order (:mod:`evolve.traces.order`) is the original order and
every figure must be the same to the last bit: the history policies' metrics (whose history walks each text's blocks
in drafting order), a fixed length's, and the whole ``benchmark.py`` comparison under a cost file. Before the
reading order, the history restarted at every run of one text's records and the figures moved by 0.1-0.5%.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from evolve.eval.evaluator import EvalData
from evolve.kinds.verify_length.eval_policy import LengthPopulationEvaluator
from evolve.traces.io import load_split
from evolve.traces.order import reading_order
from test_history import CHEAP, HISTORY_POLICIES
from tree_helpers import record_files

SPLITS = ("train", "valid", "test")


def _blocks(df: pd.DataFrame) -> list[np.ndarray]:
    d = df["draft_index"].to_numpy()
    starts = np.flatnonzero(d == 0)
    ends = np.append(starts[1:], len(df))
    return [np.arange(a, b) for a, b in zip(starts, ends)]


def _orders(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """Row orders of whole blocks, each text's first block where the texts first appear (module doc)."""
    blocks = _blocks(df)
    text = [int(df["seq_id"].iloc[b[0]]) for b in blocks]
    first = {}
    for i, t in enumerate(text):
        first.setdefault(t, i)
    heads = [first[t] for t in dict.fromkeys(text)]
    rest = [i for i in range(len(blocks)) if i not in set(heads)]
    by_text: dict[int, list[int]] = {}
    for i in rest:
        by_text.setdefault(text[i], []).append(i)
    interleaved, k = [], 0
    while any(by_text.values()):
        for t in list(by_text):
            if by_text[t]:
                interleaved.append(by_text[t].pop(0))
        k += 1
    reversed_ = [i for t in dict.fromkeys(text) for i in reversed([j for j in rest if text[j] == t])]
    shuffled = list(np.random.default_rng(3).permutation(rest))
    out = {}
    for name, tail in (("interleaved", interleaved), ("reversed", reversed_), ("shuffled", shuffled)):
        order = heads + [int(i) for i in tail]
        assert sorted(order) == list(range(len(blocks)))
        out[name] = np.concatenate([blocks[i] for i in order])
    return out


@pytest.fixture(scope="module")
def permuted(vocab_dataset, tmp_path_factory):
    """{order name: a copy of the vocab dataset whose three splits hold their blocks in that order}."""
    out = {}
    frames = {s: pd.read_parquet(vocab_dataset / f"{s}.parquet") for s in SPLITS}
    orders = {s: _orders(frames[s]) for s in SPLITS}
    for name in orders["train"]:
        d = tmp_path_factory.mktemp(name) / "d"
        shutil.copytree(vocab_dataset, d)
        for s in SPLITS:
            frames[s].iloc[orders[s][name]].reset_index(drop=True).to_parquet(d / f"{s}.parquet", index=False)
            assert not (frames[s].iloc[orders[s][name]]["seq_id"].to_numpy() == frames[s]["seq_id"].to_numpy()).all()
        record_files(d)
        out[name] = d
    return out


def test_a_file_written_here_is_in_reading_order(vocab_dataset):
    for s in SPLITS:
        df = pd.read_parquet(vocab_dataset / f"{s}.parquet")
        assert reading_order({c: df[c].to_numpy() for c in ("seq_id", "position", "draft_index")}) is None


@pytest.mark.parametrize("name", ["interleaved", "reversed", "shuffled"])
def test_blocks_in_any_order_are_read_in_drafting_order(vocab_dataset, permuted, name):
    for s in SPLITS:
        want, got = load_split(vocab_dataset, s), load_split(permuted[name], s)
        for column, values in want.columns.items():
            assert np.array_equal(values, got[column], equal_nan=values.dtype.kind == "f"), (s, column)


@pytest.mark.parametrize("name", ["interleaved", "reversed", "shuffled"])
def test_history_policies_score_the_same_whatever_the_row_order(vocab_dataset, permuted, name):
    for s in SPLITS:
        want = EvalData.from_traces(load_split(vocab_dataset, s))
        got = EvalData.from_traces(load_split(permuted[name], s))
        policies = [*HISTORY_POLICIES, "sub(2.5, draft_index)"]
        a = LengthPopulationEvaluator(want, gamma=5, costs=CHEAP).evaluate(policies)
        b = LengthPopulationEvaluator(got, gamma=5, costs=CHEAP).evaluate(policies)
        assert a == b, (s, name)


def test_the_comparison_is_the_same_whatever_the_row_order(vocab_dataset, permuted, tmp_path):
    from evolve.cli.benchmark import cli

    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"target_forward_s": list(CHEAP.target_forward_s), "draft_token_s": 0.003,
                                 "plain_token_s": 0.06}))

    def rows(d):
        res = CliRunner().invoke(cli, ["--data", str(d), "--split", "test", "--format", "json", "--costs", str(costs),
                                       "--repeats", "1"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        return {(r["heuristic"], r["split"]): {k: v for k, v in r.items() if "time" not in k and k not in ("source", "data")}
                for r in doc["rows"]}

    want = rows(vocab_dataset)
    assert any(r.get("tokens_per_second") for r in want.values())
    for name, d in permuted.items():
        assert rows(d) == want, name

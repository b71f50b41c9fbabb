"""The paired bootstrap over texts (evolve/eval/bootstrap.py) and `benchmark.py trees --bootstrap`."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from evolve.eval.bootstrap import NOT_ESTIMATED, group_weights, interval_text, percentile_interval, ratio_interval


def test_weights_draw_whole_groups_with_replacement():
    groups = np.array([3, 3, 7, 7, 7, 9])
    w = group_weights(groups, 500, seed=1)
    assert w.shape == (500, 6)
    # calls of one group share a weight, and each replicate draws as many groups as there are
    assert np.array_equal(w[:, 0], w[:, 1]) and np.array_equal(w[:, 2], w[:, 4])
    assert np.array_equal(w[:, [0, 2, 5]].sum(axis=1), np.full(500, 3.0))
    assert set(np.unique(w)) <= {0.0, 1.0, 2.0, 3.0} and abs(w[:, 5].mean() - 1.0) < 0.15
    assert np.array_equal(group_weights(groups, 50, seed=1), group_weights(groups, 50, seed=1))  # seeded


def test_ratio_interval_against_the_replicates_by_hand():
    rng = np.random.default_rng(2)
    groups = np.repeat(np.arange(8), 5)
    values = np.column_stack([rng.uniform(1, 3, 40), rng.uniform(0.5, 1, 40)])
    reference = np.column_stack([rng.uniform(1, 3, 40), rng.uniform(0.5, 1, 40)])
    w = group_weights(groups, 400, seed=3)
    point, low, high = ratio_interval(w, values, reference)
    assert point == pytest.approx((values[:, 0].sum() / values[:, 1].sum())
                                  / (reference[:, 0].sum() / reference[:, 1].sum()))
    by_hand = [((values[:, 0] * r).sum() / (values[:, 1] * r).sum())
               / ((reference[:, 0] * r).sum() / (reference[:, 1] * r).sum()) for r in w]
    assert (low, high) == pytest.approx(tuple(np.percentile(by_hand, [2.5, 97.5])))
    assert low < point < high
    # a row against itself is exactly 1; one group only: every replicate is the sample; neither gives an interval
    # (the replicates take one value: nothing to estimate it from)
    same = ratio_interval(w, values, values)
    assert same[0] == pytest.approx(1.0) and np.isnan(same[1:]).all()
    one = group_weights(np.zeros(40, dtype=np.int64), 50)
    alone = ratio_interval(one, values, reference)
    assert alone[0] == pytest.approx(point) and np.isnan(alone[1:]).all()


def test_replicates_equal_up_to_rounding_take_one_value():
    # one group's replicates, summed by a matrix product, can differ from the sample in the last bit (a BLAS kernel's
    # order): that is one value, not an interval; a spread of a part in a million is an interval
    point = 1.0735451582788758
    rounding = np.full(100, point)
    rounding[::3] = np.nextafter(point, 2.0)
    assert np.isnan(percentile_interval(rounding)).all()
    assert interval_text(point, float(np.nextafter(point, 2.0))) == NOT_ESTIMATED
    varying = point * (1.0 + 1e-6 * np.arange(100))
    low, high = percentile_interval(varying)
    assert point < low < high < varying[-1]
    assert interval_text(low, high, ".7f") != NOT_ESTIMATED


def test_benchmark_trees_bootstrap_column(vocab_dataset):
    from evolve.cli.benchmark import cli as benchmark_cli

    res = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(vocab_dataset), "--split", "test",
                                             "--bootstrap", "200", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["heuristic"]: r for r in json.loads(res.stdout)}
    assert rows["fixed_width"]["vs_fixed_width"] == pytest.approx(1.0)
    assert rows["shape_oracle"]["vs_fixed_width"] is None  # a bound gets no interval
    for name in ("specinfer", "chain", "eagle2", "eagle2_topk"):
        r = rows[name]
        assert r["vs_fixed_width"] == pytest.approx(r["tokens_per_second"] / rows["fixed_width"]["tokens_per_second"])
        if r["vs_fixed_width_low"] is None:  # the same trees as fixed_width here: no interval from one value
            assert r["vs_fixed_width"] == pytest.approx(1.0) and r["vs_fixed_width_high"] is None
            continue
        assert r["vs_fixed_width_low"] <= r["vs_fixed_width"] <= r["vs_fixed_width_high"]
    table = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(vocab_dataset), "--bootstrap", "50"])
    assert table.exit_code == 0 and "vs fixed_width [95%]" in table.output
    plain = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(vocab_dataset), "--format", "json"])
    assert "vs_fixed_width" not in plain.stdout  # off by default
    bad = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(vocab_dataset), "--bootstrap", "-1"])
    assert bad.exit_code != 0 and "--bootstrap" in bad.output and "Traceback" not in bad.output


@pytest.mark.parametrize("replicates", [1, 2, 39])
def test_too_few_replicates_for_a_95_interval_are_refused(vocab_dataset, replicates):
    from evolve.cli.benchmark import cli as benchmark_cli
    from evolve.errors import InputError
    from evolve.eval.bootstrap import MIN_REPLICATES

    assert MIN_REPLICATES == 40
    with pytest.raises(InputError, match="at least 40"):
        group_weights(np.arange(6), replicates)
    res = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(vocab_dataset), "--bootstrap", str(replicates)])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "option '--bootstrap': a 95% percentile interval needs at least 40" in res.output
    assert f"value {replicates})" in res.output
    ok = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(vocab_dataset), "--bootstrap", "40",
                                            "--format", "json"])
    assert ok.exit_code == 0, ok.output
    for r in json.loads(ok.stdout):  # every interval holds its point
        if r["vs_fixed_width"] is not None and r["vs_fixed_width_low"] is not None:
            assert r["vs_fixed_width_low"] <= r["vs_fixed_width"] <= r["vs_fixed_width_high"]


def test_interval_caveat_by_number_of_texts():
    from evolve.eval.bootstrap import MIN_GROUPS, interval_caveat

    assert interval_caveat(np.arange(MIN_GROUPS)) is None
    assert "only 5 texts" in interval_caveat(np.repeat(np.arange(5), 3))
    assert "interval is the point itself" in interval_caveat(np.zeros(7, dtype=np.int64))


def test_few_texts_give_the_caveat_in_every_format(vocab_dataset, tmp_path):
    import shutil

    import pandas as pd

    from evolve.cli.benchmark import cli as benchmark_cli
    from evolve.traces.tree_tables import tree_path

    # the fixture's tree tables have 5 texts per split
    table = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(vocab_dataset), "--bootstrap", "50"])
    assert table.exit_code == 0 and "Caveat, test: only 5 texts" in table.stdout
    as_json = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(vocab_dataset), "--bootstrap", "50",
                                                 "--format", "json"])
    assert as_json.exit_code == 0 and "caveat: test: only 5 texts" in as_json.stderr
    json.loads(as_json.stdout)
    # one text: no interval, and the caveat says why
    from tree_helpers import record_files

    one = tmp_path / "one"
    shutil.copytree(vocab_dataset, one)
    path = tree_path(one, "test")
    frame = pd.read_parquet(path)
    frame[frame["seq_id"] == frame["seq_id"].iloc[0]].to_parquet(path)  # the trees of the first text only
    record_files(one)  # the cut table as part of the dataset
    res = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(one), "--bootstrap", "50"])
    assert res.exit_code == 0, res.output
    assert "only 1 text: every replicate is the sample" in res.stdout

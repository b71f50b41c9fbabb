"""Statistics that cannot lie: an interval is printed only when it was estimated from more than one distinct value,
and NaN or infinity never reaches a table.

* Intervals (:mod:`evolve.eval.bootstrap`): over generated data (one to several texts, values that differ or are all
  equal, a row against itself), :func:`ratio_interval` gives an interval exactly when its replicates take more than
  one value, and :func:`interval_text` prints anything else as ``n/a (one value)``, never ``[x, x]``.
* Tables: generated tables with non-finite cells through the shared helpers (plain text through ``fit_width``,
  Markdown through ``markdown_table``), and every formatter of the comparison table (``FORMATTERS``, found in the
  code) given rows whose every float field is NaN, +inf or -inf: no ``nan``/``inf`` token in a table, valid JSON
  (no NaN constant), empty CSV cells.
* ``benchmark.py trees --bootstrap`` on a split of one text prints no interval.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evolve.eval.bootstrap import NOT_ESTIMATED, group_weights, interval_text, one_value, ratio_interval
from evolve.report.markdown import markdown_table
from evolve.report.finite import has_non_finite
from evolve.report.width import fit_width


@settings(max_examples=60, deadline=None)
@given(groups=st.integers(1, 6), per=st.integers(1, 4), equal=st.booleans(), seed=st.integers(0, 10 ** 6))
def test_an_interval_only_from_more_than_one_value(groups, per, equal, seed):
    rng = np.random.default_rng(seed)
    n = groups * per
    reference = np.column_stack([rng.uniform(1, 3, n), rng.uniform(0.5, 1, n)])
    values = reference * 1.5 if equal else np.column_stack([rng.uniform(1, 3, n), rng.uniform(0.5, 1, n)])
    weights = group_weights(np.repeat(np.arange(groups), per), 60, seed=seed % 1000)
    point, low, high = ratio_interval(weights, values, reference)
    with np.errstate(all="ignore"):
        reps = (weights @ values[:, 0]) / (weights @ values[:, 1]) / ((weights @ reference[:, 0])
                                                                      / (weights @ reference[:, 1]))
    finite = reps[np.isfinite(reps)]
    text = interval_text(low, high)
    if finite.size == 0 or one_value(finite):  # one text, or every text in the same ratio: no interval
        assert math.isnan(low) and math.isnan(high) and text == NOT_ESTIMATED
    else:
        assert low <= high and math.isfinite(point)
        assert text == NOT_ESTIMATED if low == high else text.startswith("[")
    assert not has_non_finite(text)


def test_interval_text_never_prints_a_zero_width_or_non_finite_interval():
    for low, high in ((1.0, 1.0), (math.nan, 2.0), (1.0, math.inf), (-math.inf, math.inf), (math.nan, math.nan)):
        assert interval_text(low, high) == NOT_ESTIMATED
    assert interval_text(0.9, 1.1) == "[0.900, 1.100]"


@settings(max_examples=40, deadline=None)
@given(texts=st.integers(2, 8), same=st.booleans(), seed=st.integers(0, 10 ** 6))
def test_a_headroom_share_has_an_interval_only_from_shares_that_vary(texts, same, seed):
    """A champion that is the best fixed setting takes a share of 0 on every replicate: its share is printed alone,
    never as the "interval" [0.00, 0.00] (before: it was)."""
    from evolve.eval.headroom import headroom
    from evolve.eval.headroom import share_text

    rng = np.random.default_rng(seed)
    fixed = np.column_stack([rng.uniform(1, 3, texts), rng.uniform(0.5, 1, texts)])
    champion = fixed.copy() if same else np.column_stack([fixed[:, 0] * rng.uniform(1.0, 1.3, texts), fixed[:, 1]])
    bound = np.column_stack([fixed[:, 0] * 1.5, fixed[:, 1]])
    found = headroom(champion, fixed, bound, np.arange(texts), replicates=200)
    text = share_text(found.to_dict())
    if same:
        assert found.share == 0.0 and math.isnan(found.low) and text == "0.00" == found.text()
    assert "[0.00, 0.00]" not in text and "[0.00, 0.00]" not in found.text()
    if not math.isnan(found.low):
        assert found.low < found.high


NON_FINITE = [f"{v:.3f}" for v in (math.nan, math.inf, -math.inf)] + ["nanx", "inf%", "-infx", "[nan, inf]"]


@settings(max_examples=60, deadline=None)
@given(cells=st.lists(st.lists(st.sampled_from(NON_FINITE + ["1.250", "abc", "information", "0.5x", "12%"]),
                               min_size=3, max_size=3), min_size=1, max_size=5),
       wide=st.booleans())
def test_tables_of_the_shared_helpers_show_no_non_finite_number(cells, wide):
    header = ["Rule" + ("x" * 60 if wide else ""), "Tokens/s", "Speedup"]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    lines = ["caption", "", "  ".join(h.rjust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    text = fit_width("\n".join(lines))
    assert not has_non_finite(text), text
    assert "information" in text or not any("information" in c for r in cells for c in r)  # words are kept
    if not wide:
        rows = text.splitlines()[2:]
        assert len({len(line) for line in rows if line.strip()}) <= 2  # alignment kept (header may be shorter)
    md = markdown_table(header, cells, measured=True)
    assert not has_non_finite(md), md


def test_a_setting_in_words_or_a_range_keeps_its_infinity():
    """Only measured cells change: a setting (``T=inf``), a word, or a reference table's range stays as written."""
    from evolve.report.finite import finite_cell

    for cell in ("T=inf", "keep inf children", "information", "[0, inf) nats"):
        assert finite_cell(cell) == cell
    assert finite_cell("  nanx") == "   n/a" and finite_cell("1.000 [nan, inf]") == "1.000 [n/a, n/a]"
    assert "[0, inf)" in markdown_table(["range"], [["[0, inf)"]])


def _comparison_with(value: float):
    from evolve.eval.evaluator import EvalData
    from evolve.report.compare.rows import ComparedRule, Comparison
    from evolve.commands.compare.table import baseline_entries, score_split
    from evolve.traces.io import Traces
    from evolve.traces.synth.independent import generate_split
    from heuristics.contract import Rule

    split = EvalData.from_traces(Traces.from_frame(generate_split(20, 11), source="mem/test.parquet", split="test"))
    entries = baseline_entries() + [ComparedRule(Rule("c", expression="0.9"), "champion", "c.json")]
    rows, notes = score_split(entries, split, 1)

    def spoil(obj):
        if obj is None or not dataclasses.is_dataclass(obj):
            return obj
        changes = {f.name: value for f in dataclasses.fields(obj) if isinstance(getattr(obj, f.name), float)}
        return dataclasses.replace(obj, **changes)

    spoiled = [dataclasses.replace(spoil(r), metrics=spoil(r.metrics), verifier=spoil(r.verifier)) for r in rows]
    return Comparison(spoiled, notes, 1, ("test",), {"test": split.n}, {"test": split.source})


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_every_comparison_format_shows_no_non_finite_number(value):
    from evolve.report.compare.format import FORMATTERS

    comp = _comparison_with(value)
    assert FORMATTERS  # found in the code: every format the comparison offers
    for fmt, formatter in FORMATTERS.items():
        text = formatter(comp)
        if fmt == "json":
            json.loads(text, parse_constant=lambda c: pytest.fail(f"JSON holds {c}"))
        elif fmt == "csv":
            for record in csv.DictReader(io.StringIO(text)):
                assert not any(has_non_finite(v) for v in record.values() if v), record
        else:
            table_part = text.split("\n\n")[0]
            assert not has_non_finite(table_part), (fmt, table_part)


def test_benchmark_trees_on_one_text_prints_no_interval(vocab_dataset, tmp_path):
    import shutil

    import pandas as pd
    from click.testing import CliRunner

    from evolve.cli.benchmark import cli as benchmark_cli
    from evolve.traces.tree_tables import tree_path

    data = tmp_path / "one"
    shutil.copytree(vocab_dataset, data)
    for split in ("train", "valid", "test"):
        path = tree_path(data, split)
        trees = pd.read_parquet(path)
        trees[trees["seq_id"] == trees["seq_id"].iloc[0]].to_parquet(path, index=False)
    from tree_helpers import record_files

    record_files(data)  # the cut tables as part of the dataset
    res = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(data), "--split", "test", "--bootstrap", "60"])
    assert res.exit_code == 0, res.output
    rows = [line for line in res.stdout.splitlines() if line.startswith("test ")]
    assert rows and all("[" not in line for line in rows), res.stdout
    assert any(NOT_ESTIMATED in line for line in rows) and "only 1 text" in res.stdout


def test_a_tree_champion_that_never_drafts_takes_no_share_where_drafting_does_not_pay(vocab_dataset):
    """The best fixed setting of draft trees includes a chain of depth 0 (plain decoding): where every drafted node
    costs more than it brings, a champion that never drafts is that setting and takes no share of the headroom (before:
    it was measured from the best fixed top-K tree and credited with most of it)."""
    from evolve.commands.trees import BOUND_SHAPE, add_headroom, best_fixed
    from evolve.eval.costs import Costs
    from evolve.eval.tree_competitors import competitors
    from evolve.eval.tree_scoring import shape_data
    from evolve.traces.tree_tables import load_trees

    d = shape_data(load_trees(vocab_dataset, "valid"))
    costs = Costs((1.0, 1.5, 1.9, 2.3, 2.7, 3.1, 3.5, 3.9, 4.3), 0.05, 1.0)  # verifying a node costs half a step
    assert best_fixed(d, costs) == "best_chain"
    per_tree: dict[str, np.ndarray] = {}
    found = competitors(d, costs, tuned_on=d, per_tree=per_tree)
    assert found["best_chain"][0] == "depth=0"
    rows = [{"role": "champion", "heuristic": "plain", "split": "valid", "_per_tree": per_tree["best_chain"]},
            {"role": "shape", "heuristic": "fixed_width", "split": "valid", "_per_tree": per_tree["fixed_width"]}]
    add_headroom(rows, d, per_tree, 200, best_fixed(d, costs))
    assert found[BOUND_SHAPE][1].tokens_per_second > found["best_chain"][1].tokens_per_second  # there is headroom
    assert found["fixed_width"][1].tokens_per_second < found["best_chain"][1].tokens_per_second
    assert rows[0]["_headroom"]["fixed_name"] == "best_chain" and rows[0]["headroom_share"] == 0.0

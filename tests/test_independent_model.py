"""The independent-features model (evolve/traces/synth/independent.py): the showcase benchmark's published baseline table and its formulas."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evolve.traces.synth.generate import generate_dataset
from evolve.traces.synth.independent import IndependentModelConfig, generate_split
from evolve.eval.evaluator import EvalData, evaluate
from heuristics.registry import get_rule

# The showcase benchmark's published "Baseline Performance": accept %, accuracy %, fitness.
PUBLISHED = {
    "standard_rejection": (78.5, 100.0, 0.785),
    "always_accept": (100.0, 78.5, 0.000),
    "conservative": (33.2, 54.7, 0.317),
    "entropy_aware": (61.6, 83.2, 0.606),
    "ratio_floor_0.3": (78.7, 99.7, 0.766),
}


@pytest.fixture(scope="module")
def independent_dataset_full():
    return generate_dataset(model="independent")  # default size and seed, as `generate_data.py --model seed`


@pytest.mark.parametrize("rule", list(PUBLISHED))
def test_default_dataset_reproduces_the_published_table(independent_dataset_full, rule):
    test = independent_dataset_full.splits["test"]
    assert 14_000 < test.n < 16_000  # the showcase benchmark's own test split had 14,855 tokens
    m = evaluate(get_rule(rule), EvalData.from_traces(test))
    accept, accuracy, fitness = PUBLISHED[rule]
    assert abs(100 * m.acceptance_rate - accept) <= 1.0
    assert abs(100 * m.accuracy - accuracy) <= 1.0
    assert abs(m.fitness - fitness) <= 0.01


def test_default_sizes_follow_showcase(independent_dataset_full):
    tokens = {name: t.n for name, t in independent_dataset_full.splits.items()}
    assert 47_000 < tokens["train"] < 51_000  # seed: 49,185 / 14,602 / 14,855
    assert 14_000 < tokens["valid"] < 16_000
    meta = independent_dataset_full.metadata
    assert meta["generator"] == "independent" and meta["sequences"] == {"train": 1000, "valid": 300, "test": 300}
    stats = meta["statistics"]["train"]
    assert abs(stats["top_token_match"] - 0.72) < 0.01
    assert abs(stats["standard_acceptance"] - 0.785) < 0.01


def test_formulas_of_section_5():
    df = generate_split(300, 5)
    pos, match = df["position"].to_numpy(), df["top_token_match"].to_numpy()
    q, p = df["draft_prob"].to_numpy(), df["target_prob"].to_numpy()
    lengths = df.groupby("seq_id").size().to_numpy()
    assert lengths.min() >= 25 and lengths.max() <= 74
    np.testing.assert_array_equal(pos, np.concatenate([np.arange(n) for n in lengths]))
    assert q.min() >= 0.05 and q.max() <= 0.95
    # Beta(3, 1.5) for the first five tokens has mean 2/3, Beta(2, 1.5) 4/7
    assert 0.05 + 0.9 * 2 / 3 - 0.02 < q[pos < 5].mean() < 0.05 + 0.9 * 2 / 3 + 0.02
    assert 0.05 + 0.9 * 4 / 7 - 0.01 < q[pos >= 5].mean() < 0.05 + 0.9 * 4 / 7 + 0.01
    assert p[match].min() >= 0.01 and p[match].max() <= 0.99
    assert p[~match].min() >= 0.01 and p[~match].max() <= 0.5
    miss = ~match & (p > 0.01)
    assert np.all(p[miss] <= 0.7 * q[miss] + 1e-12) and np.all(p[miss] >= 0.2 * q[miss] - 1e-12)
    hq, hp = df["draft_entropy"].to_numpy(), df["target_entropy"].to_numpy()
    assert hq.min() >= 2.0 and hq.max() <= 6.0 * 1.3
    assert hp.min() >= 2.0 * 0.8 and hp.max() <= 6.0 * 1.5
    np.testing.assert_array_equal(df["baseline_accepts"], df["rand_value"] < np.minimum(1.0, p / q))


def test_seeded_and_configurable():
    pd.testing.assert_frame_equal(generate_split(20, 1), generate_split(20, 1))
    assert not generate_split(20, 1).equals(generate_split(20, 2))
    rare = generate_split(200, 3, IndependentModelConfig(match_rate=0.2))
    assert abs(rare["top_token_match"].mean() - 0.2) < 0.02
    short = generate_split(200, 3, IndependentModelConfig(avg_length=10))
    assert abs(len(short) / 200 - 10) < 1.0

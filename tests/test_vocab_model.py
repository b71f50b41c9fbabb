"""The vocabulary trace model (evolve/traces/synth/vocab_model.py, vocab_blocks.py): calibration, consistency,
determinism, jitted API."""
from __future__ import annotations

import math

import numba
import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from evolve.errors import InputError
from evolve.traces.io import Traces
from evolve.traces.schema import split_stats
from evolve.verification.tokenwise import standard_threshold
from evolve.traces.synth.rng import next_double, next_normal, sample_index, seed_state
from evolve.traces.synth.softmax import _exp_nonpos, overlap, softmax_inplace
from evolve.traces.synth.vocab_blocks import block_distributions, generate_split, measure_throughput
from evolve.traces.synth.vocab_model import VocabModelConfig, difficulty_step, draw_logits, draw_pair, zipf_log_rank

# ~20k rows: acceptance, match and overlap estimates have standard errors of about
# 0.004, 0.007 and 0.001 across seeds, well inside the tolerances below.
CALIBRATION_SEQUENCES = 400


@pytest.fixture(scope="module")
def default_split() -> pd.DataFrame:
    return generate_split(CALIBRATION_SEQUENCES, 2024)


@pytest.fixture(scope="module")
def default_stats(default_split) -> dict:
    return split_stats(Traces.from_frame(default_split).columns)


# --- calibration against the showcase benchmark ---------------------------------------------------------

def test_default_calibration_matches_showcase(default_stats):
    s = default_stats
    assert s["tokens"] > 15_000
    assert abs(s["standard_acceptance"] - 0.785) <= 0.02
    assert abs(s["expected_standard_acceptance"] - 0.785) <= 0.02
    assert abs(s["top_token_match"] - 0.72) <= 0.03
    assert 2.0 <= s["median_target_entropy"] <= 6.0


def test_acceptance_falls_with_depth(default_stats):
    by_depth = default_stats["acceptance_by_depth"]
    assert len(by_depth) == VocabModelConfig().gamma
    assert by_depth[0] > by_depth[-1] + 0.03
    assert all(a > b for a, b in zip(by_depth, by_depth[1:]))


def test_early_positions_accept_more(default_split):
    r = standard_threshold(default_split["target_prob"].to_numpy(), default_split["draft_prob"].to_numpy())
    early = default_split["position"].to_numpy() < 5
    assert r[early].mean() > r[~early].mean() + 0.02


def test_difficulty_makes_neighbours_and_block_depths_alike(default_split):
    ov = default_split["overlap"].to_numpy()
    same = default_split["seq_id"].to_numpy()[1:] == default_split["seq_id"].to_numpy()[:-1]
    assert np.corrcoef(ov[:-1][same], ov[1:][same])[0, 1] > 0.3
    blocks = ov.reshape(-1, VocabModelConfig().gamma)
    assert np.corrcoef(blocks[:, 0], blocks[:, -1])[0, 1] > 0.25
    # hard positions: flat target and low overlap together
    assert np.corrcoef(ov, default_split["target_entropy"])[0, 1] < -0.2


def test_knobs_move_the_statistics_the_right_way():
    small = dict(vocab_size=200, avg_length=30)
    good = split_stats(Traces.from_frame(generate_split(120, 5, VocabModelConfig(draft_quality=0.99, **small))).columns)
    bad = split_stats(Traces.from_frame(generate_split(120, 5, VocabModelConfig(draft_quality=0.7, **small))).columns)
    assert good["expected_standard_acceptance"] > bad["expected_standard_acceptance"] + 0.1
    flat = split_stats(Traces.from_frame(generate_split(
        120, 5, VocabModelConfig(sharpness_min=0.5, sharpness_max=0.8, **small))).columns)
    sharp = split_stats(Traces.from_frame(generate_split(
        120, 5, VocabModelConfig(sharpness_min=2.5, sharpness_max=3.0, **small))).columns)
    assert flat["median_target_entropy"] > sharp["median_target_entropy"] + 1.0
    no_decay = split_stats(Traces.from_frame(generate_split(
        120, 5, VocabModelConfig(depth_decay=0.0, early_boost=0.0, gamma=4, **small))).columns)
    assert len(no_decay["acceptance_by_depth"]) == 4
    assert abs(no_decay["acceptance_by_depth"][0] - no_decay["acceptance_by_depth"][-1]) < 0.03


# --- consistency: every column derived from (p, q, x) ------------------------------------------

def test_mean_standard_threshold_equals_mean_overlap(default_split):
    r = standard_threshold(default_split["target_prob"].to_numpy(), default_split["draft_prob"].to_numpy())
    assert abs(r.mean() - default_split["overlap"].mean()) < 0.005


def test_columns_are_consistent_with_the_schema(default_split):
    traces = Traces.from_frame(default_split, source="vocab")  # full schema validation
    c = traces.columns
    assert set(c) == set(default_split.columns)
    assert np.all(c["draft_prob"] <= c["draft_top_prob"])
    assert np.all(c["target_prob"] <= c["target_top_prob"])
    r = standard_threshold(c["target_prob"], c["draft_prob"])
    np.testing.assert_array_equal(c["baseline_accepts"], c["rand_value"] < r)
    # a matched top token with q(x) = max q and p(x) = max p can only happen when x is the shared argmax
    both_top = (c["draft_prob"] == c["draft_top_prob"]) & (c["target_prob"] == c["target_top_prob"])
    assert np.all(c["top_token_match"][both_top])
    # overlap = sum_v min(p, q) >= min(p(x), q(x)), and 1 - overlap = TV >= |p(x) - q(x)|
    tol = 1e-12
    assert np.all(c["overlap"] >= np.minimum(c["target_prob"], c["draft_prob"]) - tol)
    assert np.all(1.0 - c["overlap"] >= np.abs(c["target_prob"] - c["draft_prob"]) - tol)


def test_blocks_emulate_speculative_decoding(default_split):
    gamma = VocabModelConfig().gamma
    c = {k: default_split[k].to_numpy() for k in default_split.columns}
    n = len(default_split)
    assert n % gamma == 0
    np.testing.assert_array_equal(c["draft_index"], np.tile(np.arange(gamma), n // gamma))
    pos = c["position"].reshape(-1, gamma)
    np.testing.assert_array_equal(pos - pos[:, :1], np.tile(np.arange(gamma), (len(pos), 1)))
    acc = c["baseline_accepts"].reshape(-1, gamma)
    prefix = np.argmin(np.concatenate([acc, np.zeros((len(acc), 1), bool)], axis=1), axis=1)
    seq = c["seq_id"].reshape(-1, gamma)[:, 0]
    first = np.concatenate(([True], seq[1:] != seq[:-1]))
    assert np.all(pos[first, 0] == 0)
    # the next block starts after the accepted prefix plus the corrected/bonus token
    np.testing.assert_array_equal(pos[1:, 0][~first[1:]], (pos[:-1, 0] + prefix[:-1] + 1)[~first[1:]])


def test_sequence_lengths_follow_showcase(default_split):
    rows = default_split.groupby("seq_id").size().to_numpy()
    gamma = VocabModelConfig().gamma
    assert np.all(rows % gamma == 0)
    assert rows.min() >= 25 and rows.max() <= 75
    assert abs(rows.mean() - 50) < 2
    assert default_split["seq_id"].nunique() == CALIBRATION_SEQUENCES


# --- determinism -----------------------------------------------------------------------------

SMALL = VocabModelConfig(vocab_size=64, avg_length=20)


def test_same_seed_same_frame_different_seed_differs():
    a = generate_split(30, 11, SMALL)
    pd.testing.assert_frame_equal(a, generate_split(30, 11, SMALL))
    b = generate_split(30, 12, SMALL)
    assert len(a) != len(b) or not np.array_equal(a["draft_prob"].to_numpy(), b["draft_prob"].to_numpy())
    assert not np.array_equal(a["rand_value"].to_numpy()[:50], b["rand_value"].to_numpy()[:50])


def test_sequences_do_not_depend_on_split_size_or_threads():
    big = generate_split(40, 3, SMALL)
    small = generate_split(10, 3, SMALL)  # sequence i has its own stream: a prefix of the bigger split
    pd.testing.assert_frame_equal(small, big[big["seq_id"] < 10].reset_index(drop=True))
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = generate_split(40, 3, SMALL)
    finally:
        numba.set_num_threads(threads)
    pd.testing.assert_frame_equal(one, big)


def test_large_seed_and_bad_arguments():
    assert len(generate_split(2, 2 ** 64 - 1, SMALL)) > 0
    with pytest.raises(InputError, match="^seed: "):
        generate_split(2, -1, SMALL)
    with pytest.raises(InputError, match="^sequences: "):
        generate_split(0, 1, SMALL)


@pytest.mark.parametrize("knob, value", [
    ("gamma", 0), ("vocab_size", 1), ("draft_quality", 0.0), ("draft_quality", 1.2), ("sharpness_min", -1.0),
    ("sharpness_max", 0.1), ("difficulty_drift", 0.0), ("early_boost", 1.0), ("depth_decay", -0.1),
    ("draft_temperature", float("nan")), ("logit_jitter", float("inf")), ("avg_length", 2.5),
])
def test_config_validation_names_the_knob(knob, value):
    """The error names the knob as its parameter (the command line shows the option ``--knob-name``)."""
    with pytest.raises(InputError, match=f"^{knob}: ") as bad:
        VocabModelConfig(**{knob: value}).validate()
    assert bad.value.param == knob


# --- the jitted building blocks --------------------------------------------------------------

def test_draw_pair_returns_normalised_distributions_and_exact_summaries():
    config = VocabModelConfig(vocab_size=500)
    params, log_rank = config.params(), zipf_log_rank(500)
    state = seed_state(5, 1, 0)
    p, q, work = np.empty(500), np.empty(500), np.empty(500)
    for depth, difficulty in [(0, -1.0), (2, 0.0), (4, 2.0)]:
        hp, hq, top_p, top_q, arg_p, arg_q, ov = draw_pair(state, difficulty, depth, 3, params, log_rank, p, q, work)
        assert p.sum() == pytest.approx(1.0, abs=1e-12) and q.sum() == pytest.approx(1.0, abs=1e-12)
        assert hp == pytest.approx(stats.entropy(p), abs=1e-10)
        assert hq == pytest.approx(stats.entropy(q), abs=1e-10)
        assert (top_p, arg_p, top_q, arg_q) == (p.max(), p.argmax(), q.max(), q.argmax())
        assert ov == pytest.approx(np.minimum(p, q).sum(), abs=1e-12) and ov == overlap(p, q)
        assert overlap(p, p) == pytest.approx(1.0, abs=1e-12)


def test_draw_logits_follow_the_documented_model():
    config = VocabModelConfig(vocab_size=300, draft_quality=1.0, draft_temperature=1.0)
    lp, lq = np.empty(300), np.empty(300)
    mp, ap, mq, aq = draw_logits(seed_state(1, 2, 3), 0.0, 0, 10, config.params(), zipf_log_rank(300), lp, lq)
    np.testing.assert_allclose(lq, lp)  # a perfect draft at temperature 1 is the target
    assert (mp, ap, mq, aq) == (lp.max(), lp.argmax(), lq.max(), lq.argmax())
    # the shared perturbation is around the Zipf base: the logits fall with rank on average
    assert np.polyfit(np.log(np.arange(1, 301)), lp, 1)[0] < -0.5


def test_softmax_matches_scipy_and_exp_is_accurate():
    x = np.random.default_rng(0).normal(0, 5, 1001)
    p, work = x.copy(), np.empty_like(x)
    h, top, arg = softmax_inplace(p, work)
    expected = special.softmax(x)
    np.testing.assert_allclose(p, expected, rtol=1e-13)
    assert h == pytest.approx(stats.entropy(expected), abs=1e-12)
    assert top == pytest.approx(expected.max(), rel=1e-14) and arg == expected.argmax()
    c = -np.concatenate([np.linspace(0, 1, 500), np.linspace(1, 700, 5000)])
    got = np.array([_exp_nonpos(v) for v in c])
    np.testing.assert_allclose(got, np.exp(c), rtol=3e-16, atol=0)
    assert _exp_nonpos(-800.0) == 0.0 and _exp_nonpos(0.0) == 1.0


def test_sample_index_draws_from_q_and_the_standard_rule_averages_to_the_overlap():
    config = VocabModelConfig(vocab_size=50)
    p, q, work = np.empty(50), np.empty(50), np.empty(50)
    *_, ov = draw_pair(seed_state(9, 9, 9), 0.5, 1, 20, config.params(), zipf_log_rank(50), p, q, work)
    state = seed_state(1, 0, 0)
    n = 40_000
    xs = np.array([sample_index(state, q) for _ in range(n)])
    counts = np.bincount(xs, minlength=50)
    keep = q * n >= 5
    chi = stats.chisquare(np.append(counts[keep], counts[~keep].sum()),
                          np.append(q[keep], q[~keep].sum()) * n)
    assert chi.pvalue > 1e-4
    r = np.minimum(1.0, p[xs] / q[xs])
    assert abs(r.mean() - ov) < 4 * r.std() / math.sqrt(n)
    zero = np.array([0.0, 0.5, 0.0, 0.5, 0.0])
    picks = {sample_index(state, zero) for _ in range(200)}
    assert picks == {1, 3}


def test_random_streams_are_uniform_normal_and_keyed():
    state = seed_state(123, 0, 0)
    u = np.array([next_double(state) for _ in range(50_000)])
    assert u.min() >= 0.0 and u.max() < 1.0
    assert stats.kstest(u, "uniform").pvalue > 1e-4
    z = np.array([next_normal(state) for _ in range(100_000)])
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1.0) < 0.02
    assert stats.kstest(z, "norm").pvalue > 1e-4
    assert abs(stats.kurtosis(z)) < 0.1  # the ziggurat's tail is right
    a, b, c = seed_state(1, 0, 0), seed_state(1, 1, 0), seed_state(1, 0, 1)
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    np.testing.assert_array_equal(seed_state(1, 0, 0), a)
    d = np.empty(20_000)
    d[0] = next_normal(state)
    params = VocabModelConfig(difficulty_drift=0.2).params()
    for i in range(1, d.size):
        d[i] = difficulty_step(state, d[i - 1], params)
    assert abs(d.std() - 1.0) < 0.15
    assert np.corrcoef(d[:-1], d[1:])[0, 1] == pytest.approx(math.sqrt(1 - 0.2 ** 2), abs=0.02)


def test_measure_throughput_reports_its_figures():
    result = measure_throughput(tokens=2_000, seed=1)
    assert set(result) >= {"tokens", "seconds", "tokens_per_s", "vocab_size", "threads"}
    assert 2_000 <= result["tokens"] < 2_000 + 80 and result["seconds"] > 0  # fewest whole sequences
    assert result["tokens_per_s"] == pytest.approx(result["tokens"] / result["seconds"])
    assert result["vocab_size"] == VocabModelConfig().vocab_size and result["threads"] >= 1


# --- block_residual_mass and target_rank ------------------------------------------------------

def test_block_columns_match_the_whole_distributions():
    """Brute force from each block's (p, q): block weights, residual masses, ranks; NaN at the last depth."""
    cfg = VocabModelConfig(vocab_size=64, avg_length=20, gamma=4)
    df = generate_split(6, 11, cfg)
    starts = np.flatnonzero(df["draft_index"].to_numpy() == 0)
    checked = 0
    for seq, block in ((0, 0), (0, 2), (3, 1), (5, 3)):
        row0 = starts[np.flatnonzero(df["seq_id"].to_numpy()[starts] == seq)[block]]
        rows = df.iloc[row0:row0 + cfg.gamma]
        p, q = block_distributions(11, seq, block, cfg)
        assert p.shape == q.shape == (cfg.gamma, cfg.vocab_size)
        weight = 1.0
        for k in range(cfg.gamma):
            row = rows.iloc[k]
            # the drafted token: the one whose (q, p) are the record's (the distributions are the right ones)
            x = np.flatnonzero((q[k] == row["draft_prob"]) & (p[k] == row["target_prob"]))
            assert x.size >= 1
            x = int(x[0])
            assert row["target_rank"] == np.sum(p[k] > p[k, x])
            weight = min(1.0, weight * p[k, x] / q[k, x])
            if k + 1 < cfg.gamma:
                mass = np.maximum(0.0, weight * p[k + 1] - q[k + 1]).sum()
                assert row["block_residual_mass"] == pytest.approx(mass, rel=1e-12, abs=1e-15)
            else:
                assert np.isnan(row["block_residual_mass"])
            checked += 1
    assert checked == 16
    assert df["target_rank"].dtype == np.int64 and df["block_residual_mass"].dtype == np.float64
    assert (df["target_rank"] == 0).mean() > 0.2 and df["target_rank"].max() > 5
    with pytest.raises(InputError, match="block: sequence 0 has blocks"):
        block_distributions(11, 0, 99, cfg)


def test_new_columns_leave_the_other_columns_as_they_were():
    """The two columns take no random draws: every other column is what the model wrote before them
    (figures of the generator without the two columns: discrete columns hashed, float columns summed)."""
    import hashlib

    df = generate_split(30, 5, VocabModelConfig(vocab_size=64, avg_length=20, gamma=3))
    assert len(df) == 600
    h = hashlib.sha256()
    for c in ("seq_id", "position", "draft_index", "top_token_match", "baseline_accepts"):
        h.update(np.ascontiguousarray(df[c].to_numpy()).astype(np.int64).tobytes())
    assert h.hexdigest() == "f02b36d39db704c2f6e9608c2d8a69b40821716356d2c68998f5261f702af7d0"
    sums = {"draft_prob": 131.15352688431827, "target_prob": 136.19014903022003, "draft_entropy": 1450.909708764047,
            "target_entropy": 1357.184921796129, "rand_value": 291.35540087210654,
            "draft_top_prob": 221.0673584198151, "target_top_prob": 240.8495441879753, "overlap": 495.3890905254166}
    for c, total in sums.items():
        assert df[c].sum() == pytest.approx(total, rel=1e-12), c

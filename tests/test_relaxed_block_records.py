"""Relaxed block verification from records (evolve/eval/relaxed_block.py) against brute force.

* ``block_residual_phi``: the grid values equal sum_x max(0, a p(x) - q(x)) computed directly, the
  interpolation never falls below phi and stays within the chord bound, the vocab model's column is
  phi of the next depth's whole distributions (NaN at the last depth), and the column survives
  Parquet and JSON and is refused when malformed;
* the record scorer: with w = 0 it is lossless block verification to round-off; for any w its tokens
  per call and damage per block agree with a brute-force computation from each block's whole
  distributions (exact residual masses, no interpolation) within the interpolation bound; the fused
  population kernel equals the scorer of materialised weights; weights that read the drafted token
  are refused.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evolve.errors import InputError
from evolve.traces.io import Traces, load_split, write_dataset
from evolve.verification.block import (
    PHI_ERROR_BOUND, PHI_POINTS, block_phi, interpolate_phi, interpolate_phi_anchored, residual_phi,
)
from evolve.traces.synth.vocab_blocks import block_distributions, generate_split
from evolve.traces.synth.vocab_model import VocabModelConfig
from evolve.eval.block_verification import block_verification_tokens
from evolve.eval.evaluator import EvalData
from evolve.eval.relaxed_block import (
    N_CARRY, N_RELAXED, RelaxedCount, attach, close_block, reduce_relaxed, relaxed_counts, relaxed_metrics,
)
from evolve.kinds.relaxation.eval_population import evaluate_relaxed, weight_thresholds
from evolve.gp.compiler import compile_nodes, parse

CFG = VocabModelConfig(vocab_size=64, avg_length=20, gamma=4)
SEED = 11
WEIGHTS = ("0.0", "0.05", "0.3", "if_gt(draft_index, 0.5, 0.02, 0.4)", "mul(0.5, overlap)")


@pytest.fixture(scope="module")
def split():
    """(traces, EvalData) of 8 sequences of a small vocab model, the relaxed columns attached."""
    traces = Traces.from_frame(generate_split(8, SEED, CFG), "vocab")
    data = EvalData.from_traces(traces, share=False)
    attach(data, traces)
    return traces, data


def _random_pairs(rng, count):
    for t in range(count):
        V = int(rng.integers(2, 200))
        p = rng.dirichlet(np.full(V, rng.uniform(0.05, 2.0)))
        q = rng.dirichlet(np.full(V, rng.uniform(0.05, 2.0)))
        if t % 3 == 0:
            q = 0.7 * p + 0.3 * q
        yield p, q


def test_phi_grid_and_interpolation_against_brute_force():
    rng = np.random.default_rng(0)
    grid = np.arange(1, PHI_POINTS + 1) / PHI_POINTS
    worst = 0.0
    for p, q in _random_pairs(rng, 200):
        phi = np.empty(PHI_POINTS)
        residual_phi(p, q, phi)
        brute = np.array([np.maximum(0.0, a * p - q).sum() for a in grid])
        np.testing.assert_allclose(phi, brute, rtol=0, atol=1e-14)
        assert phi[-1] == pytest.approx(1.0 - np.minimum(p, q).sum(), abs=1e-14)  # phi(1) = 1 - overlap
        anchor = float(rng.uniform(0, 1))
        exact_anchor = np.maximum(0.0, anchor * p - q).sum()
        for a in np.concatenate([rng.uniform(0, 1, 40), [0.0, 1.0, anchor]]):
            true = np.maximum(0.0, a * p - q).sum()
            for est in (interpolate_phi(phi, a), interpolate_phi_anchored(phi, a, anchor, exact_anchor)):
                assert true - 1e-12 <= est <= true + PHI_ERROR_BOUND + 1e-12
                worst = max(worst, est - true)
        assert interpolate_phi_anchored(phi, anchor, anchor, exact_anchor) == exact_anchor
    print(f"largest interpolation error {worst:.5f} (bound {PHI_ERROR_BOUND:.5f})")
    assert worst > 0.1 * PHI_ERROR_BOUND  # the bound is not vacuous for these pairs


def test_vocab_column_is_phi_of_the_next_depth(split):
    traces, _ = split
    df = generate_split(8, SEED, CFG)
    starts = np.flatnonzero(df["draft_index"].to_numpy() == 0)
    phi = traces["block_residual_phi"]
    assert phi.shape == (traces.n, PHI_POINTS)
    for seq, block in ((0, 0), (3, 1), (7, 2)):
        row0 = starts[np.flatnonzero(df["seq_id"].to_numpy()[starts] == seq)[block]]
        p, q = block_distributions(SEED, seq, block, CFG)
        np.testing.assert_allclose(phi[row0:row0 + CFG.gamma], block_phi(p, q), rtol=0, atol=1e-14, equal_nan=True)
        assert np.isnan(phi[row0 + CFG.gamma - 1]).all() and np.isfinite(phi[row0:row0 + CFG.gamma - 1]).all()


def test_phi_column_round_trips_and_bad_values_are_refused(split, tmp_path):
    traces, _ = split
    for fmt in ("parquet", "json"):
        write_dataset(tmp_path / fmt, {"test": traces}, {}, fmt)
        back = load_split(tmp_path / fmt, "test")
        np.testing.assert_array_equal(back["block_residual_phi"], traces["block_residual_phi"])
    frame = traces.to_frame()
    rows = list(frame["block_residual_phi"])
    for bad, match in (([0.1] * (PHI_POINTS - 1), "expected a list of 32 numbers"),
                       ([0.1] * (PHI_POINTS - 1) + [np.nan], "a record must be all finite numbers or all NaN"),
                       ([0.1] * (PHI_POINTS - 1) + [1.5], r"a value outside \[0, 1\]"),
                       ("text", "expected a list of 32 numbers")):
        broken = frame.copy()
        broken["block_residual_phi"] = rows[:1] + [bad] + rows[2:]
        with pytest.raises(InputError, match=f"column 'block_residual_phi', row 1: {match}"):
            Traces.from_frame(broken, "f")
    broken = frame.copy()
    broken["block_residual_phi"] = [None] + rows[1:]  # row 0 is not a block's last record
    with pytest.raises(InputError, match="row 0: null .NaN. is only valid at a block's last record"):
        Traces.from_frame(broken, "f")


def _brute_block(p, q, drafts, w, gamma):
    """(1 + E[tau], expected damage) of relaxed block verification of one block, from whole distributions."""
    L = min(gamma, len(drafts))
    pt = [(1 - w[i]) * p[i] + w[i] * q[i] for i in range(L)]
    weight, h = 1.0, []
    weights = []
    for i in range(L):
        x = drafts[i]
        weight = min(1.0, weight * pt[i][x] / q[i][x])
        weights.append(weight)
    for i in range(L - 1):
        m = np.maximum(0.0, weights[i] * pt[i + 1] - q[i + 1]).sum()
        den = m + 1.0 - weights[i]
        h.append(1.0 if den <= 0 else m / den)
    h.append(weights[-1])
    # P(tau = t), t = 0..L, and the damage of the emitted positions 1..t+1 (the bonus has none)
    dmg = [w[i] * (1.0 - np.minimum(p[i], q[i]).sum()) for i in range(L)]
    tokens, damage = 1.0, 0.0
    for t in range(L + 1):
        prob = (h[t - 1] if t > 0 else 1.0) * np.prod([1.0 - h[j] for j in range(t, L)])
        tokens += t * prob
        damage += prob * sum(dmg[:min(t + 1, L)])
    return tokens, damage


def _blocks(traces):
    """(sequence, block index, first row) of every block of the split."""
    d, seq = traces["draft_index"], traces["seq_id"]
    starts = np.flatnonzero(d == 0)
    out, count = [], {}
    for s in starts:
        k = count.get(int(seq[s]), 0)
        count[int(seq[s])] = k + 1
        out.append((int(seq[s]), k, int(s)))
    return out


@pytest.mark.parametrize("expression", WEIGHTS)
def test_record_scorer_matches_brute_force_from_whole_distributions(split, expression):
    traces, data = split
    rd = data.relaxed_block
    w_all = np.clip(weight_thresholds(compile_nodes(parse(expression)), data), 0.0, 1.0)
    for gamma in (CFG.gamma, 2):
        brute_tok, brute_dmg, rec_tok, rec_dmg = [], [], [], []
        st, acc = np.zeros(N_CARRY), np.zeros(N_RELAXED)
        for seq, block, row0 in _blocks(traces)[:40]:
            p, q = block_distributions(SEED, seq, block, CFG)
            x = traces["draft_index"][row0:row0 + CFG.gamma]
            assert list(x) == list(range(CFG.gamma))
            drafts = [int(np.flatnonzero((q[k] == traces["draft_prob"][row0 + k])
                                         & (p[k] == traces["target_prob"][row0 + k]))[0]) for k in range(CFG.gamma)]
            tok, dmg = _brute_block(p, q, drafts, w_all[row0:row0 + CFG.gamma], gamma)
            brute_tok.append(tok)
            brute_dmg.append(dmg)
            st[:], acc[:] = 0.0, 0.0
            reduce_relaxed(w_all[row0:row0 + CFG.gamma], row0, CFG.gamma, rd.columns(gamma), st, acc)
            close_block(st, acc)
            rec_tok.append(acc[RelaxedCount.SUM_TOKENS])
            rec_dmg.append(acc[RelaxedCount.SUM_TV])
        brute_tok, rec_tok = np.array(brute_tok), np.array(rec_tok)
        # the interpolated residual mass is never below the exact one, so neither are the tokens
        assert np.all(rec_tok >= brute_tok - 1e-12)
        assert np.max(rec_tok - brute_tok) <= gamma * PHI_ERROR_BOUND / 0.1  # loose: h moves by <= dm / (1 - P~)
        assert abs(rec_tok.mean() - brute_tok.mean()) < 2e-3
        np.testing.assert_allclose(rec_dmg, brute_dmg, rtol=0, atol=2e-3)
        if expression == "0.0":  # exact: the anchor is the lossless residual mass
            np.testing.assert_allclose(rec_tok, brute_tok, rtol=1e-12)
            assert np.all(np.array(rec_dmg) == 0.0)


def test_zero_weight_is_lossless_block_verification(split):
    traces, data = split
    rd = data.relaxed_block
    for gamma in (1, 2, CFG.gamma):
        bv = block_verification_tokens(traces["target_prob"], traces["draft_prob"], traces["draft_index"],
                                       traces["block_residual_mass"], gamma)
        m = relaxed_metrics(0.0, rd, gamma)
        assert m.tokens_per_call == pytest.approx(bv.mean(), rel=1e-13)
        assert m.tv_per_token == 0.0 and m.blocks == bv.size
    # more weight: more tokens and more damage (the family is monotone on this split)
    values = [relaxed_metrics(w, rd, CFG.gamma) for w in (0.0, 0.05, 0.2, 0.5)]
    assert all(a.tokens_per_call < b.tokens_per_call and a.tv_per_token < b.tv_per_token
               for a, b in zip(values, values[1:]))
    one = relaxed_metrics(1.0, rd, CFG.gamma)  # p~ = q: every drafted token is kept
    assert one.tokens_per_call == pytest.approx(CFG.gamma + 1.0)


def test_population_kernel_equals_materialised_weights(split):
    _, data = split
    rd = data.relaxed_block
    metrics = evaluate_relaxed(list(WEIGHTS) + ["div(1.0, sub(overlap, overlap))", "log(0.0)"], data, CFG.gamma)
    for expr, m in zip(WEIGHTS, metrics):
        counts = relaxed_counts(weight_thresholds(compile_nodes(parse(expr)), data), rd, CFG.gamma)
        assert m.tokens_per_call == counts[RelaxedCount.SUM_TOKENS] / counts[RelaxedCount.BLOCKS]
        assert m.tv_per_token == counts[RelaxedCount.SUM_TV] / counts[RelaxedCount.SUM_TOKENS]
    assert metrics[-2].n_invalid == 0  # protected division: 1.0, a valid (clamped) weight
    assert metrics[-1].mean_weight == 0.0  # protected log(0) = 0


def test_weights_that_read_the_drafted_token_or_lack_columns_are_refused(split, independent_traces):
    _, data = split
    for expr in ("mul(0.1, target_prob)", "div(draft_prob, 2.0)", "mul(0.01, target_rank)"):
        with pytest.raises(InputError, match="depends on the drafted token"):
            evaluate_relaxed([expr], data, CFG.gamma)
    frame = generate_split(2, 3, CFG).drop(columns="block_residual_phi")
    plain = Traces.from_frame(frame, "plain")
    with pytest.raises(InputError, match="plain: relaxed block verification needs column 'block_residual_phi'"):
        attach(EvalData.from_traces(plain), plain)
    memory = Traces.from_frame(generate_split(2, 3, CFG), "memory")  # not from a file, nothing attached
    with pytest.raises(InputError, match="memory: relaxed block verification needs the split's columns"):
        evaluate_relaxed(["0.1"], EvalData.from_traces(memory), 3)
    with pytest.raises(InputError, match="independent_traces: relaxed block verification needs column 'draft_index'"):
        evaluate_relaxed(["0.1"], EvalData.from_traces(independent_traces), 3)


def test_harvest_records_carry_phi():
    from evolve.engine.distributions import block_records
    p = np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6], [0.1, 0.1, 0.8]])
    q = np.array([[0.25, 0.5, 0.25], [0.5, 0.25, 0.25], [0.3, 0.3, 0.4]])
    rec = block_records(p, q, np.zeros(3), np.zeros(3), [0, 1, 2], np.array([0.1, 0.9, 0.5]))
    phi = np.stack(rec["block_residual_phi"])
    # record 0 holds phi of depth 1: at a = 1, 1 - overlap(p_2, q_2) = 0.35; at a = 1/2, max(0, 0.3 - 0.25) = 0.05
    assert phi[0, -1] == pytest.approx(0.35) and phi[0, PHI_POINTS // 2 - 1] == pytest.approx(0.05)
    assert np.isnan(phi[2]).all()
    assert len(pd.DataFrame(rec)) == 3

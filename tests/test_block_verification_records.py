"""Block verification from records (evolve.eval.block_verification) against exact enumeration.

Tiny context-dependent draft/target pairs over a vocabulary of 2 or 3 tokens: every draft block and
every outcome of the stopping coins is enumerated, so expected accepted lengths and output
distributions are exact. ``block_residual_mass`` is computed here from the whole distributions with the
shared definition m_i = sum_x max(0, P_i p_{i+1}(x) - q_{i+1}(x)).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from evolve.errors import InputError
from evolve.traces.io import Traces
from evolve.eval.block_verification import block_verification_metrics, block_verification_tokens
from evolve.eval.costs import ratio_costs
from evolve.eval.evaluator import EvalData, evaluate
from evolve.gp.primitives import FEATURES
from evolve.report.compare.rows import Comparison
from evolve.report.compare.rows import ROW_KEYS
from evolve.commands.compare.table import block_verification_row
from evolve.report.compare.format import format_table
from heuristics.contract import STANDARD_RULE


class TinyModels:
    """p(.|prefix) and q(.|prefix) for every prefix up to ``depth`` tokens, drawn once from a seeded rng."""

    def __init__(self, vocab: int, depth: int, seed: int, independent: tuple | None = None) -> None:
        rng = np.random.default_rng(seed)
        self.vocab = vocab
        self.p, self.q = {}, {}
        for n in range(depth + 1):
            for prefix in itertools.product(range(vocab), repeat=n):
                if independent is not None:
                    self.p[prefix], self.q[prefix] = map(np.asarray, independent)
                else:
                    self.p[prefix] = rng.dirichlet(np.full(vocab, 0.7))
                    self.q[prefix] = rng.dirichlet(np.full(vocab, 0.7))


def block_quantities(m: TinyModels, draft: tuple, context: tuple = ()) -> tuple[list, list, list]:
    """(P_1..P_g, m_1..m_{g-1}, h_1..h_g) of one draft, straight from the shared definitions."""
    g = len(draft)
    weights, masses, h = [], [], []
    w = 1.0
    for i in range(1, g + 1):
        pre = context + draft[:i - 1]
        w = min(1.0, w * m.p[pre][draft[i - 1]] / m.q[pre][draft[i - 1]])
        weights.append(w)
    for i in range(1, g):
        pre = context + draft[:i]
        mass = float(np.maximum(0.0, weights[i - 1] * m.p[pre] - m.q[pre]).sum())
        masses.append(mass)
        denom = mass + 1.0 - weights[i - 1]
        h.append(1.0 if denom <= 0 else mass / denom)
    h.append(weights[-1])
    return weights, masses, h


def tau_distribution(h: list) -> np.ndarray:
    """P(tau = i), i = 0..g, by enumerating every outcome of the coins eta_i <= h_i."""
    g = len(h)
    out = np.zeros(g + 1)
    for success in itertools.product([False, True], repeat=g):
        prob = np.prod([hi if s else 1.0 - hi for hi, s in zip(h, success)])
        tau = max((i + 1 for i, s in enumerate(success) if s), default=0)
        out[tau] += prob
    return out


def draft_probability(m: TinyModels, draft: tuple, context: tuple = ()) -> float:
    return float(np.prod([m.q[context + draft[:i]][x] for i, x in enumerate(draft)]))


def exact_block_tokens(m: TinyModels, gamma: int) -> float:
    """1 + E[tau] over every draft block of length gamma (exact)."""
    total = 0.0
    for draft in itertools.product(range(m.vocab), repeat=gamma):
        dist = tau_distribution(block_quantities(m, draft)[2])
        total += draft_probability(m, draft) * float(np.dot(np.arange(gamma + 1), dist))
    return 1.0 + total


def exact_tokenwise_tokens(m: TinyModels, gamma: int) -> float:
    """1 + sum_k prod_{i<=k} min(1, p/q) averaged over every draft block (standard verification)."""
    total = 0.0
    for draft in itertools.product(range(m.vocab), repeat=gamma):
        reach, tokens = 1.0, 1.0
        for i, x in enumerate(draft):
            pre = draft[:i]
            reach *= min(1.0, m.p[pre][x] / m.q[pre][x])
            tokens += reach
        total += draft_probability(m, draft) * tokens
    return total


def records(m: TinyModels, gamma: int, data_gamma: int | None = None) -> tuple[dict, np.ndarray]:
    """Every draft block of length ``data_gamma`` as records, and each block's draft probability."""
    data_gamma = data_gamma or gamma
    cols = {k: [] for k in ("target_prob", "draft_prob", "draft_index", "block_residual_mass")}
    weights = []
    for draft in itertools.product(range(m.vocab), repeat=data_gamma):
        _, masses, _ = block_quantities(m, draft)
        for i, x in enumerate(draft):
            pre = draft[:i]
            cols["target_prob"].append(m.p[pre][x])
            cols["draft_prob"].append(m.q[pre][x])
            cols["draft_index"].append(i)
            cols["block_residual_mass"].append(masses[i] if i < data_gamma - 1 else np.nan)
        weights.append(draft_probability(m, draft))
    out = {k: np.asarray(v, dtype=np.int64 if k == "draft_index" else np.float64) for k, v in cols.items()}
    return out, np.asarray(weights)


def record_level_tokens(m: TinyModels, gamma: int, data_gamma: int | None = None) -> float:
    cols, w = records(m, gamma, data_gamma)
    per_block = block_verification_tokens(cols["target_prob"], cols["draft_prob"], cols["draft_index"],
                                          cols["block_residual_mass"], gamma)
    assert per_block.shape == w.shape and (per_block >= 1.0).all() and (per_block <= gamma + 1.0).all()
    return float(np.dot(per_block, w))


# --- the definitions are block verification: lossless -----------------------------------------------

def first_tokens(m: TinyModels, gamma: int, context: tuple, count: int) -> np.ndarray:
    """Exact distribution of the next ``count`` (1 or 2) emitted tokens after ``context`` under block verification.

    After tau accepted tokens the next one comes from norm(max(0, P_tau p_{tau+1} - q_{tau+1})), or from
    p_{gamma+1} after a full block; a second token still missing comes from the next call, whose first
    token is checked (count 1) to follow p.
    """
    V = m.vocab
    out = np.zeros((V,) * count)
    for draft in itertools.product(range(V), repeat=gamma):
        weight = draft_probability(m, draft, context)
        weights, _, h = block_quantities(m, draft, context)
        for tau, pt in enumerate(tau_distribution(h)):
            if pt == 0.0:
                continue
            pre = context + draft[:tau]
            base = 1.0 if tau == 0 else weights[tau - 1]
            if tau == gamma:
                nxt = m.p[pre]
            else:
                resid = np.maximum(0.0, base * m.p[pre] - m.q[pre])
                nxt = resid / resid.sum()
            emitted = list(draft[:tau])
            for y in range(V):
                seq = emitted + [y]
                if len(seq) >= count:
                    out[tuple(seq[:count])] += weight * pt * nxt[y]
                else:  # count 2, tau 0: the second token is the next call's first, distributed as p
                    out[seq[0]] += weight * pt * nxt[y] * m.p[context + (y,)]
    return out


@pytest.mark.parametrize("gamma, vocab, seed", [(2, 3, 1), (3, 2, 2), (3, 3, 3)])
def test_the_shared_definitions_are_lossless(gamma, vocab, seed):
    m = TinyModels(vocab, gamma + 2, seed)
    one = first_tokens(m, gamma, (), 1)
    np.testing.assert_allclose(one, m.p[()], rtol=0, atol=1e-12)
    for a in range(vocab):  # the first call's first token from any context is exact: used for the next call
        np.testing.assert_allclose(first_tokens(m, gamma, (a,), 1), m.p[(a,)], rtol=0, atol=1e-12)
    two = first_tokens(m, gamma, (), 2)
    want = np.array([[m.p[()][a] * m.p[(a,)][b] for b in range(vocab)] for a in range(vocab)])
    np.testing.assert_allclose(two, want, rtol=0, atol=1e-12)


# --- the record-level formula ------------------------------------------------------------------------

@pytest.mark.parametrize("gamma, vocab, seed", [(2, 2, 5), (2, 3, 6), (3, 2, 7), (3, 3, 8)])
def test_record_level_formula_matches_enumeration(gamma, vocab, seed):
    m = TinyModels(vocab, gamma + 1, seed)
    assert record_level_tokens(m, gamma) == pytest.approx(exact_block_tokens(m, gamma), rel=1e-12, abs=1e-12)


def test_the_papers_binary_example():
    # context-independent p = (1/3, 2/3), q = (2/3, 1/3), gamma 2: token-wise verification accepts
    # 10/9 tokens per block in expectation, block verification 11/9 (Sun et al. 2024, arXiv 2403.10444)
    m = TinyModels(2, 3, 0, independent=((1 / 3, 2 / 3), (2 / 3, 1 / 3)))
    assert exact_tokenwise_tokens(m, 2) == pytest.approx(1 + 10 / 9, rel=1e-12)
    assert record_level_tokens(m, 2) == pytest.approx(1 + 11 / 9, rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_block_verification_is_never_worse_than_tokenwise(seed):
    gamma = 2 + seed % 2
    m = TinyModels(3, gamma + 1, 100 + seed)
    assert record_level_tokens(m, gamma) >= exact_tokenwise_tokens(m, gamma) - 1e-12


def test_a_shorter_gamma_truncates_every_block():
    m = TinyModels(3, 4, 11)
    # data drafted 3 tokens per block; at gamma 2 each block is verified as a block of 2
    assert record_level_tokens(m, 2, data_gamma=3) == pytest.approx(exact_block_tokens(m, 2), rel=1e-12)
    assert record_level_tokens(m, 1, data_gamma=3) == pytest.approx(exact_tokenwise_tokens(m, 1), rel=1e-12)


def test_blocks_rows_before_the_first_start_and_short_blocks():
    #            ignored  | block 1 (3 rows)  | block 2 (1 row: the last record uses h = P)
    p = np.array([0.5, 0.5, 0.9, 0.2, 0.4, 0.3])
    q = np.array([0.5, 0.5, 0.3, 0.4, 0.4, 0.6])
    d = np.array([1, 2, 0, 1, 2, 0])
    mass = np.array([np.nan, np.nan, 0.25, 0.1, np.nan, np.nan])
    got = block_verification_tokens(p, q, d, mass, 3)
    # block 1: P = 1, 0.5, 0.5; h1 = 0.25 / (0.25 + 0) = 1, h2 = 0.1 / (0.1 + 0.5) = 1/6, h3 = 0.5
    a1 = 1.0
    a2 = 2 * (1 / 6) + (5 / 6) * a1
    a3 = 3 * 0.5 + 0.5 * a2
    assert got.tolist() == pytest.approx([1 + a3, 1 + 0.5], rel=1e-15)
    with pytest.raises(InputError, match=r"column 'block_residual_mass', row 3"):
        block_verification_tokens(p, q, d, np.where(np.arange(6) == 3, np.nan, mass), 3)
    with pytest.raises(InputError, match="row 2"):
        block_verification_tokens(p, q, d, np.where(np.arange(6) == 2, -0.1, mass), 3)
    bv = block_verification_metrics(p, q, d, mass, 3, ratio_costs(0.05))
    assert bv.tokens_per_call == pytest.approx(np.mean(got)) and bv.tv_per_token == 0.0 and bv.blocks == 2
    assert bv.speedup == pytest.approx(bv.tokens_per_call / (3 * 0.05 + 1))


# --- the benchmark row ------------------------------------------------------------------------------

def _traces_of(m: TinyModels, gamma: int) -> Traces:
    cols, _ = records(m, gamma)
    n = cols["target_prob"].size
    cols.update(seq_id=np.repeat(np.arange(n // gamma), gamma), position=np.tile(np.arange(gamma), n // gamma),
                draft_entropy=np.ones(n), target_entropy=np.ones(n), top_token_match=np.ones(n, dtype=bool),
                rand_value=np.full(n, 0.5))
    cols["baseline_accepts"] = cols["rand_value"] < np.minimum(1.0, cols["target_prob"] / cols["draft_prob"])
    return Traces(cols, source="tiny", split="test")


def test_the_benchmark_row_and_its_note():
    m = TinyModels(3, 4, 21)
    traces = _traces_of(m, 3)
    data = EvalData.from_traces(traces)
    assert "draft_index" in data.available and "block_residual_mass" not in FEATURES
    row, note = block_verification_row(traces, data, 3, ratio_costs(0.05), repeats=1)
    assert note is None and row.heuristic == "block_verification" and row.role == "verifier"
    want = block_verification_tokens(traces["target_prob"], traces["draft_prob"], traces["draft_index"],
                                     traces["block_residual_mass"], 3).mean()
    rec = row.to_dict()
    assert list(rec) == list(ROW_KEYS)
    assert rec["tokens_per_call"] == pytest.approx(want) and rec["tv_per_token"] == 0.0 and rec["records"] == data.n
    assert rec["speedup"] == pytest.approx(want / 1.15) and rec["fitness"] is None and rec["acceptance_rate"] is None
    comp = Comparison([row], splits=("test",), tokens={"test": data.n}, sources={"test": "tiny"},
                              gamma={"test": 3})
    table = " ".join(format_table(comp).split())  # the caption is wrapped to the table's width
    assert "block_verification" in table and "block verification (Sun et al. 2024" in table
    del traces.columns["block_residual_mass"]
    row, note = block_verification_row(traces, data, 3)
    assert row is None and "lacks column 'block_residual_mass'" in note
    assert block_verification_row(traces, data, None) == (None, None)  # no blocks, no note


def test_block_verification_beats_tokenwise_on_generated_data(vocab_dataset):
    from evolve.traces.io import load_split
    traces = load_split(vocab_dataset, "test")
    if not traces.has("block_residual_mass"):
        pytest.skip("the vocab generator does not write block_residual_mass yet")
    data = EvalData.from_traces(traces)
    gamma = data.block_length
    bv = block_verification_metrics(traces["target_prob"], traces["draft_prob"], traces["draft_index"],
                                    traces["block_residual_mass"], gamma, ratio_costs(0.05))
    assert bv.tokens_per_call >= evaluate(STANDARD_RULE, data, gamma=gamma).tokens_per_call

"""heuristics.shipped: the relaxed rules of SGLang, TensorRT-LLM and mixture verification, by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

from evolve.eval.evaluator import EvalData, thresholds
from evolve.gp.compiler import evaluate_numpy
from evolve.gp.primitives import FEATURES, OPTIONAL_FEATURES
from heuristics import shipped as E
from heuristics import published as P
from heuristics.contract import STANDARD_RULE
from heuristics.registry import get_rule, rule_names


def taus(rule, **given) -> np.ndarray:
    """The rule's thresholds by the fused interpreter, checked against the numpy reference."""
    n = len(next(iter(given.values())))
    cols = {"draft_prob": np.full(n, 0.5), "target_prob": np.full(n, 0.5), "position": np.zeros(n),
            "draft_entropy": np.ones(n), "target_entropy": np.ones(n), "top_token_match": np.ones(n)}
    cols.update({k: np.asarray(v, dtype=np.float64) for k, v in given.items()})
    avail = tuple(f for f in FEATURES if f in cols)
    r = np.minimum(1.0, cols["target_prob"] / cols["draft_prob"])
    u = np.full(n, 0.999)
    fast = thresholds(rule, EvalData(np.stack([cols[f] for f in avail]), r, u, u < r, avail))
    np.testing.assert_array_equal(fast, evaluate_numpy(rule.nodes, cols, n))
    return fast


# --- SGLang ------------------------------------------------------------------------------------------

def test_sglang_thresholds_by_hand():
    rule = E.sglang_threshold(0.5, 0.8)
    assert rule.name == "sglang_0.5_0.8" and not rule.lossless and rule.columns_needed == ()
    got = taus(rule, target_prob=[0.6, 0.5, 0.2, 0.3, 0.1], draft_prob=[0.9, 0.9, 0.5, 0.25, 0.8])
    # p >= t_single -> 1 (0.5 itself too: the kernel tests >=); else min(1, p / (0.8 q)):
    # 0.2 / 0.4 = 0.5; 0.3 / 0.2 = 1.5 -> 1; 0.1 / 0.64 = 0.15625
    np.testing.assert_allclose(got, [1.0, 1.0, 0.5, 1.0, 0.15625], rtol=1e-15, atol=0)


def test_sglang_defaults_of_the_engine_are_the_standard_rule():
    rule = E.sglang_threshold(1.0, 1.0)
    assert rule.lossless
    p = np.array([0.0, 0.1, 0.3, 0.7, 1.0, 0.45])
    q = np.array([0.2, 0.4, 0.3, 0.5, 0.9, 0.6])
    np.testing.assert_array_equal(taus(rule, target_prob=p, draft_prob=q), taus(STANDARD_RULE, target_prob=p,
                                                                                draft_prob=q))
    # t_single = 1 leaves the lenient ratio
    np.testing.assert_allclose(taus(E.sglang_threshold(1.0, 0.5), target_prob=p, draft_prob=q),
                               taus(P.lenient(0.5), target_prob=p, draft_prob=q), rtol=1e-15)


# --- TensorRT-LLM ------------------------------------------------------------------------------------

def test_trt_relaxed_thresholds_by_hand():
    rule = E.trt_relaxed(3, 0.2)
    assert rule.name == "trt_relaxed_3_0.2" and not rule.lossless
    assert set(rule.columns_needed) == {"target_rank", "target_top_prob"}
    got = taus(rule, target_prob=[0.5, 0.35, 0.31, 0.29, 0.3, 0.3],
               target_top_prob=[0.5, 0.5, 0.5, 0.5, 0.5, 0.5], target_rank=[0, 2, 3, 1, 1, 3])
    # argmax; rank 2 < 3 and 0.35 >= 0.5 - 0.2; rank 3 is not among the top 3; 0.29 < 0.3;
    # p = top - delta exactly is kept (the kernel drops a candidate only when top - delta > p); rank 3 again
    assert got.tolist() == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]


def test_trt_relaxed_with_one_candidate_is_greedy_matching():
    rng = np.random.default_rng(3)
    top = rng.uniform(0.2, 1.0, 200)
    p = np.where(rng.random(200) < 0.4, top, top * rng.uniform(0.0, 0.999, 200))
    rank = np.where(p == top, 0, rng.integers(1, 20, 200))
    a = taus(E.trt_relaxed(1, 0.0), target_prob=p, target_top_prob=top, target_rank=rank)
    b = taus(P.greedy_match(), target_prob=p, target_top_prob=top)
    np.testing.assert_array_equal(a, b)
    assert a.sum() == (p == top).sum() > 0


def test_target_rank_is_an_optional_feature_a_search_can_use():
    from evolve.search.warm_start import unusable
    assert "target_rank" in OPTIONAL_FEATURES and "block_residual_mass" not in FEATURES
    rule = get_rule("trt_relaxed_10_0.6")
    assert unusable(rule, FEATURES) is None
    assert unusable(rule, tuple(f for f in FEATURES if f != "target_rank")) is not None


def test_the_simulator_ranks_every_token_like_the_data():
    from evolve.verification.block import target_rank
    from evolve.sim.chain import _target_ranks
    rng = np.random.default_rng(1)
    for V in (1, 2, 7, 50):
        p = rng.dirichlet(np.ones(V))
        if V > 3:
            p[1] = p[2] = p[0]  # ties share a rank
        out = np.empty(V)
        _target_ranks(p, out)
        assert out.tolist() == [target_rank(p, v) for v in range(V)]


# --- mixture --------------------------------------------------------------------------------------------

def test_mixture_thresholds_by_hand():
    rule = E.mixture(0.9)
    assert rule.name == "mixture_0.9" and not rule.lossless and rule.columns_needed == ()
    got = taus(rule, target_prob=[0.2, 0.6, 0.0, 0.45], draft_prob=[0.5, 0.5, 0.5, 0.9])
    # min(1, 0.1 + 0.9 p/q): 0.1 + 0.36; 0.1 + 1.08 -> 1; 0.1; 0.1 + 0.45
    np.testing.assert_allclose(got, [0.46, 1.0, 0.1, 0.55], rtol=1e-14, atol=1e-15)
    assert E.mixture(1.0).lossless and E.mixture(1.0).expression == STANDARD_RULE.expression
    assert taus(E.mixture(0.0), target_prob=[0.0, 0.3], draft_prob=[0.5, 0.9]).tolist() == [1.0, 1.0]


# --- families, grids, registry -------------------------------------------------------------------------

@pytest.mark.parametrize("make, args", [(E.sglang_threshold, (0.0, 1.0)), (E.sglang_threshold, (1.0, 1.5)),
                                        (E.sglang_threshold, (math.nan, 1.0)), (E.trt_relaxed, (0, 0.1)),
                                        (E.trt_relaxed, (2.5, 0.1)), (E.trt_relaxed, (3, -0.1)),
                                        (E.trt_relaxed, (3, 1.5)), (E.mixture, (-0.1,)), (E.mixture, (1.1,))])
def test_parameters_out_of_range_are_refused(make, args):
    with pytest.raises(ValueError):
        make(*args)


def test_families_grids_defaults_labels():
    sg, trt, mix = P.FAMILIES["sglang_threshold"], P.FAMILIES["trt_relaxed"], P.FAMILIES["mixture"]
    assert P.Pair(1, 1) in sg.grid and sg.default == P.Pair(0.5, 0.8) and sg.default in sg.grid
    assert sg.default_rule().name == "sglang_0.5_0.8" and sg.label(sg.default) == "t_single=0.5,t_acc=0.8"
    assert trt.default == P.Pair(10, 0.6) and trt.default in trt.grid and P.Pair(1, 0) in trt.grid
    assert not any(v[0] == 1 and v[1] > 0 for v in trt.grid)  # with one candidate delta changes nothing
    assert trt.columns == ("target_rank", "target_top_prob") and trt.label(P.Pair(10, 0.6)) == "N=10,delta=0.6"
    assert 1.0 in mix.grid and 0.0 in mix.grid and mix.label(0.9) == "w=0.9"
    assert format(P.Pair(0.5, 0.8), "g") == "(0.5, 0.8)" and f"{P.Pair(1, 0.25):.2f}" == "(1.00, 0.25)"
    lossless = [v for v, r in sg.rules() if r.lossless]
    assert lossless == [P.Pair(1, 1)]
    for name in ("sglang_0.5_0.8", "trt_relaxed_10_0.6", "mixture_0.9"):
        assert name in rule_names() and get_rule(name).source
    assert "server_args.py" in sg.source and "mtpKernels.cu" in trt.source and "2405.19261" in mix.source

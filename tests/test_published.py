"""heuristics.published: each family's formula by hand, defaults, grids, registry, declared columns."""
from __future__ import annotations

import math

import numpy as np
import pytest

from evolve.gp.compiler import evaluate_numpy
from evolve.eval.evaluator import EvalData, thresholds
from evolve.gp.primitives import FEATURES
from heuristics import published as P
from heuristics.registry import get_rule, rule_names


def _columns(**given) -> tuple[dict[str, np.ndarray], int]:
    n = len(next(iter(given.values())))
    cols = {"draft_prob": np.full(n, 0.5), "target_prob": np.full(n, 0.5), "position": np.zeros(n),
            "draft_entropy": np.ones(n), "target_entropy": np.ones(n), "top_token_match": np.ones(n)}
    cols.update({k: np.asarray(v, dtype=np.float64) for k, v in given.items()})
    return cols, n


def taus(rule, **given) -> np.ndarray:
    """The rule's thresholds by the fused interpreter, checked against the numpy reference."""
    cols, n = _columns(**given)
    avail = tuple(f for f in FEATURES if f in cols)
    X = np.stack([cols[f] for f in avail])
    r = np.minimum(1.0, cols["target_prob"] / cols["draft_prob"])
    u = np.full(n, 0.999)
    data = EvalData(X, r, u, u < r, avail)
    fast = thresholds(rule, data)
    ref = evaluate_numpy(rule.nodes, cols, n)
    np.testing.assert_array_equal(fast, ref)
    return fast


def test_greedy_match_accepts_exactly_the_argmax_with_ties():
    rule = P.greedy_match()
    top = 0.4
    got = taus(rule, target_prob=[0.4, 0.3, 0.4 - 1e-13, 0.4 - 1e-9, 0.4 + 1e-10],
               target_top_prob=[top] * 5, draft_prob=[0.5] * 5)
    # argmax; below the top; tied within the 1e-12 slack; clearly below; above (rounding in the data)
    assert got.tolist() == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert rule.columns_needed == ("target_top_prob",) and not rule.lossless


def test_typical_acceptance_default_thresholds():
    rule = P.typical_acceptance()
    assert rule.name == "typical_acceptance"
    # H = 1: min(0.09, 0.3*e^-1 = 0.110364) = 0.09;  H = 2: min(0.09, 0.3*e^-2 = 0.0406006) = 0.0406006
    got = taus(rule, target_prob=[0.1, 0.08, 0.05, 0.04, 0.09],
               target_entropy=[1.0, 1.0, 2.0, 2.0, 1.0])
    assert got.tolist() == [1.0, 0.0, 1.0, 0.0, 0.0]  # strict: p = 0.09 exactly is rejected
    assert rule.columns_needed == ()


def test_typical_acceptance_delta_defaults_to_sqrt_eps():
    rule = P.typical_acceptance(0.25)
    # eps 0.25, delta 0.5: H = 0.5 -> min(0.25, 0.5*e^-0.5 = 0.303265) = 0.25; H = 3 -> 0.5*e^-3 = 0.0248935
    got = taus(rule, target_prob=[0.26, 0.24, 0.025, 0.0248], target_entropy=[0.5, 0.5, 3.0, 3.0])
    assert got.tolist() == [1.0, 0.0, 1.0, 0.0]
    assert P.typical_acceptance(0.09, 0.3).expression == P.typical_acceptance().expression


def test_ears_formula():
    rule = P.ears(0.1)
    assert rule.name == "ears_0.1"
    got = taus(rule, target_prob=[0.2, 0.45, 0.6], draft_prob=[0.5, 0.5, 0.5], target_top_prob=[0.6, 0.45, 0.9])
    # 0.4 + 0.1*0.4 = 0.44; 0.9 + 0.1*0.55 = 0.955; min(1, 1.2 + 0.01) = 1
    np.testing.assert_allclose(got, [0.44, 0.955, 1.0], rtol=0, atol=1e-15)
    assert rule.columns_needed == ("target_top_prob",)
    assert P.ears(0.0).lossless and not rule.lossless


def test_fuzzy_sd_accepts_outright_below_the_tv_threshold_else_standard():
    rule = P.fuzzy_sd(0.25)
    got = taus(rule, target_prob=[0.1, 0.1, 0.1, 0.6], draft_prob=[0.5, 0.5, 0.5, 0.5],
               overlap=[0.9, 0.75, 0.5, 0.5])
    # TV 0.1 < 0.25 -> 1; TV = 0.25 exactly (not below) -> p/q = 0.2; TV 0.5 -> 0.2; standard capped at 1
    np.testing.assert_allclose(got, [1.0, 0.2, 0.2, 1.0], rtol=0, atol=1e-15)
    assert rule.columns_needed == ("overlap",)
    assert P.fuzzy_sd(0.0).lossless and not rule.lossless


def test_lenient_ratio():
    rule = P.lenient(0.5)
    got = taus(rule, target_prob=[0.2, 0.3, 0.05], draft_prob=[0.5, 0.5, 0.5])
    np.testing.assert_allclose(got, [0.8, 1.0, 0.2], rtol=0, atol=1e-15)
    std = taus(P.lenient(1.0), target_prob=[0.2, 0.3, 0.05], draft_prob=[0.5, 0.5, 0.5])
    np.testing.assert_array_equal(std, np.minimum(1.0, np.array([0.2, 0.3, 0.05]) / 0.5))
    assert P.lenient(1.0).lossless and not rule.lossless and rule.columns_needed == ()


@pytest.mark.parametrize("make, bad", [(P.typical_acceptance, 0.0), (P.typical_acceptance, 1.5),
                                       (P.ears, -0.1), (P.ears, math.inf), (P.fuzzy_sd, -0.01),
                                       (P.fuzzy_sd, 1.01), (P.lenient, 0.0), (P.lenient, 1.2),
                                       (P.lenient, math.nan)])
def test_parameters_out_of_range_are_refused(make, bad):
    with pytest.raises(ValueError):
        make(bad)


def test_families_grids_defaults_and_sources():
    assert list(P.FAMILIES) == ["standard", "greedy_match", "typical_acceptance", "ears", "fuzzy_sd", "lenient",
                                "sglang_threshold", "trt_relaxed", "mixture"]
    for fam in P.FAMILIES.values():
        assert fam.source and list(fam.grid) == sorted(fam.grid, key=lambda v: -1 if v is None else v)
        rules = fam.rules()
        assert len(rules) == len(fam.grid) >= 1
        assert all(set(r.columns_needed) <= set(fam.columns) for _, r in rules)
        if fam.parameter is not None:
            assert len(fam.grid) >= 30 and fam.grid[0] <= fam.default <= fam.grid[-1]
    # the lossless end of each relaxation is on its grid
    assert 0.0 in P.FAMILIES["ears"].grid and 0.0 in P.FAMILIES["fuzzy_sd"].grid
    assert 1.0 in P.FAMILIES["lenient"].grid
    assert P.FAMILIES["standard"].default_rule().name == "standard_rejection"


def test_defaults_are_registered_after_the_seed_baselines():
    names = rule_names()
    assert names[:7] == ["standard_rejection", "always_accept", "conservative", "top_token_match",
                         "entropy_aware", "position_aware", "ratio_floor_0.3"]
    for name in ("greedy_match", "typical_acceptance", "ears_0.1", "fuzzy_sd_0.1", "lenient_0.5"):
        assert name in names and get_rule(name).source
    assert "0.09" in get_rule("typical_acceptance").expression and "0.3" in get_rule("typical_acceptance").expression

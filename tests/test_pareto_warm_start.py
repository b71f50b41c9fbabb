"""The pareto warm start: every family's best member per budget, depth-limited members, the constant shift,
seeds restored to the final front, and the robustness table of evolve.commands.pareto.seeds."""
from __future__ import annotations

import random

import numpy as np
import pytest

from evolve.traces.io import load_split
from evolve.eval.evaluator import EvalData
from evolve.eval.population import PopulationEvaluator
from evolve.gp.compiler import parse, to_tree
from evolve.gp.primitives import FEATURES, build_pset
from evolve.commands.pareto.seeds import format_table, gap_closed
from evolve.search.state import score
from evolve.search.algorithms import search
from evolve.search.config import resolve
from evolve.eval.objectives import OBJECTIVES
from evolve.search.individuals import deap_types
from evolve.search.operators import mut_constant_shift
from evolve.search.warm_start import choose_seeds, depth_limited, seed_budgets
from heuristics.registry import families, get_rule


@pytest.fixture(scope="module")
def vocab(vocab_dataset):
    return tuple(EvalData.from_traces(load_split(vocab_dataset, s)) for s in ("train", "valid", "test"))


def columns(data: EvalData) -> tuple[str, ...]:
    return tuple(f for f in FEATURES if f in data.available)


def pareto_seeds(train, population=400):
    cfg = resolve({"population": population, "objective": "pareto"})
    return cfg, choose_seeds(cfg, columns(train), train, 5, lambda m: score(m, cfg))


def test_every_familys_fastest_member_within_every_budget_is_seeded(vocab):
    train = vocab[0]
    cfg, warm = pareto_seeds(train)
    seeded = {s.expression for s in warm.seeds}
    scorer = PopulationEvaluator(train, gamma=5, cache_size=0)
    for family in families().values():
        members = [r for _, r in family.rules() if r.expression is not None]
        if any(c not in train.available for c in family.columns):
            continue
        metrics = scorer.evaluate(members)
        for b in seed_budgets(cfg):
            within = [(m.tokens_per_call, -i) for i, m in enumerate(metrics) if m.tv_per_token <= b]
            if within:
                assert members[-max(within)[1]].expression in seeded, (family.name, b)


def test_depth_limited_members_relax_only_the_first_depths(vocab):
    train = vocab[0]
    rule = get_rule("fuzzy_sd_0.1")
    limited = depth_limited(rule, 1)
    assert limited.name == "fuzzy_sd_0.1@draft_index<=1" and "draft_index" in limited.program.features
    from evolve.eval.evaluator import thresholds
    tau, full = thresholds(limited, train), thresholds(rule, train)
    early = train.depth <= 1
    assert np.array_equal(tau[early], full[early])
    assert np.allclose(np.clip(tau[~early], 0, 1), np.minimum(1.0, train.r[~early]))
    _, warm = pareto_seeds(train)
    assert any("depth-limited member" in s.reason and "@draft_index<=" in s.name for s in warm.seeds)
    no_depth = tuple(f for f in columns(train) if f != "draft_index")
    cfg = resolve({"population": 400, "objective": "pareto"})
    plain = choose_seeds(cfg, no_depth, train, 5, lambda m: score(m, cfg))
    assert not any("@draft_index" in s.name for s in plain.seeds)


def test_constant_shift_is_a_small_step_of_one_constant():
    pset = build_pset(("draft_prob", "target_prob", "overlap"))
    individual = deap_types(OBJECTIVES["pareto"])[1]
    text = "if_gt(0.12, sub(1.0, overlap), 1.0, min(1.0, div(target_prob, draft_prob)))"
    random.seed(3)
    for _ in range(50):
        tree = individual(to_tree(parse(text, "t"), pset))
        before = [n.value for n in tree if isinstance(getattr(n, "value", None), float)]
        after = [n.value for n in mut_constant_shift(tree)[0] if isinstance(getattr(n, "value", None), float)]
        changed = [(a, b) for a, b in zip(before, after) if a != b]
        assert len(changed) <= 1 and all(abs(b - a) < 0.1 * max(abs(a), 0.1) * 6 for a, b in changed)
    bare = individual(to_tree(parse("div(target_prob, draft_prob)", "t"), pset))
    assert str(mut_constant_shift(bare)[0]) == "div(target_prob, draft_prob)"


def test_every_seed_is_on_the_final_front_or_dominated_there(vocab):
    train, valid, _ = vocab
    cfg = resolve({"population": 60, "generations": 3, "seed": 2, "objective": "pareto"})
    res = search(cfg, train, valid, columns(train))
    front = [(e.train.tokens_per_call, e.train.tv_per_token, e.size) for e in res.front]
    on_front = {e.expression for e in res.front}
    for s in res.seeded:
        if s.expression in on_front or s.train.tv_per_token > cfg.tv_cap:
            continue
        t, v, n = s.train.tokens_per_call, s.train.tv_per_token, s.size
        assert any(ft >= t and fv <= v and fn <= n and (ft, fv, fn) != (t, v, n) for ft, fv, fn in front), s.expression


def test_gap_closed_and_the_table():
    assert gap_closed(3.9, 3.8, 4.0) == pytest.approx(0.5)
    assert gap_closed(3.7, 3.8, 4.0) == pytest.approx(-0.5)
    assert gap_closed(3.9, 3.8, 3.8) is None and gap_closed(None, 3.8, 4.0) is None
    cell = {"evolved": 3.9, "best_family": 3.8, "family": "fuzzy_sd", "bound": 4.0, "gap_closed": 0.5,
            "learned": 3.85, "learned_gap_closed": 0.25}
    row = {"seed": 1, "population": 500, "generations": 40, "seconds": 12.3, "budgets": {"0.01": cell},
           "hypervolume": 0.157, "family_hypervolume": 0.153, "beats_all": True, "largest_hypervolume": True}
    text = format_table([row])
    assert "| 1 | 500 x 40 | 12 | 3.9000 (50%) | 0.15700 | yes | yes |" in text
    assert "best family fuzzy_sd 3.8000, oracle bound 4.0000" in text and "TV<=0.01: 3.8500 (25%)" in text

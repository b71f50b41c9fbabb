"""evolve.eval.objectives: the speed_at_tv formula (continuity, steepness) and the pareto objectives."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from evolve.errors import InputError
from evolve.eval.evaluator import Metrics
from evolve.eval.objectives import (
    DEFAULT_BUDGET, DEFAULT_PENALTY, TV_UNIT, check_budget, pareto_values, speed_at_tv, speed_at_tv_value,
    within_budget,
)

BASE = Metrics(100, 0.8, 1.0, 0, 0, 1.0, 0.8, 0.8, 0.0, 0.0, 1.0, 0.8, 0)


def metrics(tpc: float | None, tv: float | None) -> Metrics:
    return replace(BASE, tokens_per_call=tpc, speedup=None if tpc is None else tpc / 1.25, tv_per_token=tv)


def test_inside_the_budget_the_objective_is_tokens_per_call():
    for tv in (0.0, 0.004, 0.01):
        assert speed_at_tv_value(3.8, tv, 0.01) == 3.8
    assert speed_at_tv(metrics(4.2, 0.009)) == 4.2 and DEFAULT_BUDGET == 0.01


def test_continuous_at_the_budget_and_steep_beyond():
    b = 0.01
    for eps in (1e-6, 1e-9, 1e-12):
        assert speed_at_tv_value(3.8, b + eps, b) == pytest.approx(3.8, abs=DEFAULT_PENALTY * eps / b * 1.0001)
    # exact formula: 3.8 - 10 * (0.011 - 0.01) / 0.01 = 2.8: 10% over the budget costs a whole token per call
    assert speed_at_tv_value(3.8, 0.011, b) == pytest.approx(2.8, abs=1e-12)
    assert speed_at_tv_value(3.8, 0.02, b) == pytest.approx(3.8 - 10.0, abs=1e-12)
    # slope beyond the budget is K / b, far steeper than any frontier (about 10 tokens per unit TV per token)
    slope = (speed_at_tv_value(3.8, 0.0105, b) - speed_at_tv_value(3.8, 0.0101, b)) / 0.0004
    assert slope == pytest.approx(-DEFAULT_PENALTY / b, rel=1e-9) and -slope >= 100 * 10
    # a rule 10% over the budget with 0.5 more tokens per call still loses to one on the budget
    assert speed_at_tv_value(4.3, 0.011, b) < speed_at_tv_value(3.8, 0.01, b)


def test_budget_zero_uses_the_tv_unit_scale():
    assert speed_at_tv_value(3.8, 0.0, 0.0) == 3.8
    assert speed_at_tv_value(3.8, 0.0001, 0.0) == pytest.approx(3.8 - DEFAULT_PENALTY * 0.0001 / TV_UNIT)


def test_nan_and_missing_block_metrics():
    assert speed_at_tv_value(math.nan, 0.0) == -math.inf
    assert speed_at_tv_value(3.0, math.nan) == -math.inf
    with pytest.raises(ValueError, match="block metrics"):
        speed_at_tv(metrics(None, None))
    with pytest.raises(ValueError):
        pareto_values(metrics(None, None), 5)


def test_pareto_values():
    speed, tv, size = pareto_values(metrics(4.0, 0.03), 7)
    assert (speed, tv, size) == (4.0, 0.03, 7.0)  # inside the default cap 0.05: plain tokens per call
    speed, tv, _ = pareto_values(metrics(6.0, 0.1), 1)  # always_accept-like: far beyond the cap
    assert tv == 0.1 and speed == pytest.approx(6.0 - 10.0 * 0.05 / 0.05)
    # the constant 0 (tpc 1, tv 0, size 1) dominates it
    zero = pareto_values(metrics(1.0, 0.0), 1)
    assert zero[0] > speed and zero[1] < tv and zero[2] <= 1
    assert within_budget(metrics(4.0, 0.01), 0.01) and not within_budget(metrics(4.0, 0.0101), 0.01)


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, math.inf, "0.1", True])
def test_check_budget(bad):
    assert check_budget(0.02) == 0.02
    with pytest.raises(InputError, match="tv_budget"):
        check_budget(bad)


# --- the speed_at_tv search -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def vocab_splits():
    from evolve.traces.synth import generate
    from evolve.eval.evaluator import EvalData
    ds = generate.generate_dataset("vocab", 9, 30)
    return EvalData.from_traces(ds.splits["train"]), EvalData.from_traces(ds.splits["valid"])


def test_speed_at_tv_search(vocab_splits):
    from evolve.gp.compiler import compile_expression
    from evolve.search.config import resolve
    from evolve.eval.evaluator import evaluate
    from evolve.gp.primitives import COLUMN_FEATURES, CORE_FEATURES
    from evolve.search.algorithms import search
    train, valid = vocab_splits
    cfg = resolve({"population": 30, "generations": 3, "seed": 2, "objective": "speed_at_tv", "warm_start": True,
                   "tv_budget": 0.02, "hall_of_fame": 5})
    res = search(cfg, train, valid, tuple(f for f in CORE_FEATURES + COLUMN_FEATURES if f in train.available))
    std = evaluate(compile_expression("min(1.0, div(target_prob, draft_prob))"), train, gamma=5)
    assert res.logbook[0]["train_max"] >= std.tokens_per_call  # standard is seeded: its objective is its speed
    assert all(r["train_max"] >= std.tokens_per_call for r in res.logbook)  # elitism
    for e in res.hall_of_fame:
        m = evaluate(compile_expression(e.expression), train, gamma=5)
        assert e.train.tokens_per_call == pytest.approx(m.tokens_per_call, rel=1e-12)
    scores = [speed_at_tv(e.valid, 0.02) for e in res.hall_of_fame]
    assert speed_at_tv(res.champion.valid, 0.02) == max(scores)
    assert res.front is None and res.logbook[-1]["best_valid"] == pytest.approx(max(scores))


def test_block_objectives_need_draft_index_and_a_valid_gamma(vocab_splits):
    from evolve.traces.io import Traces
    from evolve.traces.synth.independent import generate_split
    from evolve.search.config import resolve
    from evolve.eval.evaluator import EvalData
    from evolve.gp.primitives import CORE_FEATURES
    from evolve.search.algorithms import search
    seed = EvalData.from_traces(Traces.from_frame(generate_split(10, 1), source="seedtrain", split="train"))
    for fitness in ("speed_at_tv", "pareto"):
        with pytest.raises(InputError, match="draft_index"):
            search(resolve({"population": 4, "generations": 0, "objective": fitness}), seed, seed, CORE_FEATURES)
    with pytest.raises(InputError, match="gamma"):
        search(resolve({"population": 4, "generations": 0, "objective": "pareto", "gamma": 6}), *vocab_splits,
               CORE_FEATURES)
    for bad in ({"tv_budget": -0.1}, {"tv_cap": 2.0}, {"gamma": 0}, {"objective": "fastest"}):
        with pytest.raises(InputError):
            resolve(bad)


def test_the_objective_defaults_from_the_kind(tmp_path):
    """Not given, the objective is the kind's own: acceptance_quality for thresholds, else the kind's first
    objective (a block objective for relaxation); one given is kept, and one that does not score the kind is
    still refused."""
    from evolve.errors import InputError
    from evolve.kinds.registry import KINDS
    from evolve.search.config import resolve

    assert resolve({}).objective == "acceptance_quality"
    for name, kind in KINDS.items():
        cfg = resolve({"evolve": name})
        assert cfg.objective in kind.objectives
        assert cfg.objective == ("acceptance_quality" if "acceptance_quality" in kind.objectives else kind.objectives[0])
    assert resolve({"evolve": "relaxation"}).objective_spec.needs_blocks
    assert resolve({"evolve": "verify-length"}).objective == "tokens_per_second"
    assert resolve({"evolve": "relaxation", "objective": "pareto"}).objective == "pareto"
    with pytest.raises(InputError, match="does not score"):
        resolve({"evolve": "verify-length", "objective": "acceptance_quality"})
    toml = tmp_path / "c.toml"
    toml.write_text('evolve = "tree-shape"\n')
    assert resolve(config_file=toml).objective == "tokens_per_second"


def test_a_verify_length_run_without_objective_runs(vocab_dataset, tmp_path):
    import json
    from pathlib import Path

    from click.testing import CliRunner

    from evolve.cli.evolve import cli as evolve_cli

    res = CliRunner().invoke(evolve_cli, ["run", "--data", str(vocab_dataset), "--out", str(tmp_path),
                                          "--evolve", "verify-length", "--population", "12", "--generations", "1",
                                          "--seed", "5", "--no-progress"])
    assert res.exit_code == 0, res.output
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    assert json.loads((run_dir / "champion.json").read_text())["objective"] == "tokens_per_second"

"""Objectives as objects: the registry, a user-defined objective evolved under, and the settings' metadata."""
from __future__ import annotations

import dataclasses
import pathlib
import re

import pytest

from evolve.errors import InputError
from evolve.eval.evaluator import EvalData
from evolve.eval.objectives import OBJECTIVES, Objective, objective_named, register_objective, scores_kind
from evolve.kinds.registry import KINDS
from evolve.report.compare.rows import Row
from evolve.report.compare.verdict import champion_measure
from evolve.gp.primitives import CORE_FEATURES
from evolve.search.algorithms import search
from evolve.search.config import DEFAULTS, FIELD_NAMES, RunConfig, resolve, setting_of
from evolve.traces.io import load_split

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture
def user_objective():
    """A two-value objective (acceptance rate up, expected TV down) registered for one test only."""
    spec = Objective("accept_vs_tv_test", "acceptance rate up, expected TV down (a test objective)",
                     score=lambda m, cfg: m.expected_acceptance - 10.0 * m.expected_tv,
                     values=lambda m, size, cfg: (m.expected_acceptance, m.expected_tv),
                     weights=(1.0, -1.0))
    register_objective(spec)
    yield spec
    del OBJECTIVES[spec.name]


def test_the_builtin_objectives_are_objects():
    assert list(OBJECTIVES) == ["acceptance_quality", "expected", "speed_at_tv", "pareto", "tokens_per_second",
                                "pareto_tokens_per_second"]
    assert OBJECTIVES["pareto"].multi and not OBJECTIVES["speed_at_tv"].multi
    assert OBJECTIVES["pareto_tokens_per_second"].multi and not OBJECTIVES["tokens_per_second"].multi
    assert {o.name for o in OBJECTIVES.values() if o.needs_blocks} == {"speed_at_tv", "pareto", "tokens_per_second",
                                                                       "pareto_tokens_per_second"}
    assert {o.name for o in OBJECTIVES.values() if scores_kind(o, KINDS["relaxation"])} == {"speed_at_tv", "pareto"}
    assert all(set(o.kinds) <= set(KINDS) for o in OBJECTIVES.values())
    with pytest.raises(InputError, match="unknown objective 'fastest'") as exc:
        objective_named("fastest")
    assert exc.value.param == "objective"
    with pytest.raises(ValueError, match="registered already"):
        register_objective(dataclasses.replace(OBJECTIVES["expected"], description="another"))
    with pytest.raises(ValueError, match="measure 'speed' is not one of fitness, tokens_per_call"):
        register_objective(dataclasses.replace(OBJECTIVES["expected"], name="speedy", measure="speed"))
    assert "speedy" not in OBJECTIVES


def test_the_verdict_judges_a_champion_by_its_objectives_measure(user_objective):
    """The benchmark's verdict reads the measure from the objective object, a user's objective included."""
    row = Row("champion", "champion", "test", "data", None, 0.0, program_kind="verify-length")
    assert {name: champion_measure(row, {"objective": name}) for name in OBJECTIVES} == {
        "acceptance_quality": "fitness", "expected": "fitness", "speed_at_tv": "tokens_per_call",
        "pareto": "tokens_per_call", "tokens_per_second": "tokens_per_second",
        "pareto_tokens_per_second": "tokens_per_second", user_objective.name: "fitness"}
    speedy = register_objective(dataclasses.replace(user_objective, name="tps_test", measure="tokens_per_second"))
    try:
        assert champion_measure(row, {"objective": "tps_test"}) == "tokens_per_second"
    finally:
        del OBJECTIVES[speedy.name]
    # no objective recorded: the kind's first objective's measure
    assert champion_measure(row, {}) == "tokens_per_second"


def test_no_objective_is_chosen_by_comparing_its_name():
    """Behaviour follows the objective object: no `fitness == "..."` / `objective == "..."` in the package."""
    pattern = re.compile(r"""(fitness|objective)\s*[!=]=\s*["']""")
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in (ROOT / "evolve").rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []


def test_a_user_defined_objective_is_evolved_under(user_objective, vocab_dataset):
    train, valid = (EvalData.from_traces(load_split(vocab_dataset, s)) for s in ("train", "valid"))
    cfg = resolve({"objective": user_objective.name, "population": 40, "generations": 3, "seed": 5})
    assert cfg.objective_spec is user_objective
    res = search(cfg, train, valid, CORE_FEATURES)
    # two values per individual: NSGA-II ran and kept a front, ordered by the user's values
    assert res.front is not None and len(res.front) >= 1
    for entry in res.front:
        assert 0.0 <= entry.train.expected_acceptance <= 1.0
    best = max(user_objective.score(e.valid, cfg) for e in list(res.front) + list(res.seeded))
    assert user_objective.score(res.champion.valid, cfg) == pytest.approx(best)
    # the same seed gives the same champion
    assert search(cfg, train, valid, CORE_FEATURES).champion.expression == res.champion.expression


def test_an_objective_must_score_the_kind_evolved(user_objective):
    with pytest.raises(InputError, match="does not score relaxation programs") as exc:
        resolve({"objective": user_objective.name, "evolve": "relaxation"})
    assert exc.value.param == "evolve"


def test_every_setting_carries_type_bounds_and_help_once():
    for name in FIELD_NAMES:
        s = setting_of(name)
        assert s.help and s.type in (int, float, str, bool, tuple), name
        if s.low is not None:  # the bound is enforced by resolve, with the parameter named
            if s.type is int and s.low > -2**62:
                with pytest.raises(InputError, match=f"must be at least {s.low}") as exc:
                    resolve({name: int(s.low) - 1})
                assert exc.value.param == name
    assert setting_of("objective").choices == tuple(OBJECTIVES)
    assert setting_of("evolve").choices == tuple(KINDS)
    assert RunConfig().evolve == "threshold" and DEFAULTS.objective == "acceptance_quality"

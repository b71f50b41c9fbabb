"""The evolution loop: determinism, limits, champion choice, the run directory, Ctrl-C, and the finding."""
from __future__ import annotations

import csv
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest

import evolve.search.rundir as search_mod
from evolve.traces.io import Traces, load_split, write_dataset
from evolve.traces.synth.independent import generate_split
from evolve.gp.compiler import compile_expression, parse
from evolve.search.config import DEFAULTS, load_toml, resolve
from evolve.eval.evaluator import EvalData, evaluate
from evolve.gp.primitives import CORE_FEATURES
from evolve.cli.evolve import run_and_plot as run
from evolve.search.state import score
from evolve.search.algorithms import search
from evolve.search.interrupt import graceful_interrupt
from heuristics.champions import read_champion
from heuristics.registry import get_rule


def eval_data(sequences: int, seed: int, name: str) -> EvalData:
    return EvalData.from_traces(Traces.from_frame(generate_split(sequences, seed), source=name, split=name))


@pytest.fixture(scope="module")
def small():
    """About 2,000 train and 1,000 valid tokens of the independent-features model."""
    return eval_data(40, 11, "train"), eval_data(20, 12, "valid")


def small_search(small, **opts):
    train, valid = small
    cfg = resolve({"population": 40, "generations": 4, "seed": 3, "warm_start": False, **opts})
    return search(cfg, train, valid, CORE_FEATURES)


def test_same_seed_same_champion(small):
    a, b = small_search(small), small_search(small)
    assert a.champion.expression == b.champion.expression
    assert [e.expression for e in a.hall_of_fame] == [e.expression for e in b.hall_of_fame]
    keys = ("train_max", "train_avg", "size_avg", "best_valid", "nevals", "new_programs")
    assert [[r[k] for k in keys] for r in a.logbook] == [[r[k] for k in keys] for r in b.logbook]
    c = small_search(small, seed=4)
    assert [e.expression for e in c.hall_of_fame] != [e.expression for e in a.hall_of_fame]


def test_callbacks_cannot_change_the_search(small):
    """A progress bar or stop poll that draws from Python's random must not change the champion."""
    import random
    plain = small_search(small)
    noisy = search(resolve({"population": 40, "generations": 4, "seed": 3, "warm_start": False}), *small, CORE_FEATURES,
                   on_generation=lambda row: random.random(), should_stop=lambda: random.random() > 2)
    assert [e.expression for e in noisy.hall_of_fame] == [e.expression for e in plain.hall_of_fame]
    assert [r["train_avg"] for r in noisy.logbook] == [r["train_avg"] for r in plain.logbook]


def test_logbook_and_cache(small):
    res = small_search(small, generations=5)
    assert [r["gen"] for r in res.logbook] == list(range(6))
    assert res.generations == 5 and not res.interrupted
    assert res.logbook[0]["nevals"] == 40
    assert sum(r["nevals"] for r in res.logbook) == res.evaluations
    assert res.programs == sum(r["new_programs"] for r in res.logbook)
    assert res.programs < res.evaluations  # repeated expressions come from the cache
    for row in res.logbook:
        assert row["train_min"] <= row["train_avg"] <= row["train_max"] <= 1.0
        assert row["size_min"] <= row["size_avg"] <= row["size_max"]
    # elitism keeps the best train fitness from falling
    best = [r["train_max"] for r in res.logbook]
    assert all(b2 >= b1 for b1, b2 in zip(best, best[1:]))


def test_depth_limit(small):
    res = small_search(small, max_depth=4, init_max_depth=3, mutation_max_depth=2, generations=6)
    assert max(r["depth_max"] for r in res.logbook) <= 4
    assert all(e.depth <= 4 for e in res.hall_of_fame)


def test_champion_is_best_on_valid_smallest_on_ties(small):
    res = small_search(small, generations=6)
    fits = [score(e.valid, DEFAULTS) for e in res.hall_of_fame]
    best = max(fits)
    assert score(res.champion.valid, resolve({"objective": "acceptance_quality"})) == best
    assert res.champion.size == min(e.size for e, f in zip(res.hall_of_fame, fits) if f == best)
    train, valid = small
    program = compile_expression(res.champion.expression)
    assert evaluate(program, valid).to_dict() == res.champion.valid.to_dict()
    assert evaluate(program, train).to_dict() == res.champion.train.to_dict()
    # the hall of fame is ordered by train fitness, then size
    ranks = [(-score(e.train, resolve({"objective": "acceptance_quality"})), e.size) for e in res.hall_of_fame]
    assert ranks == sorted(ranks)


def test_hall_of_fame_prefers_smaller_trees_on_ties():
    from evolve.gp.compiler import to_tree
    from evolve.gp.primitives import build_pset
    from evolve.search.individuals import HallOfFame, deap_types as _deap_types

    pset = build_pset(CORE_FEATURES)
    _, Individual = _deap_types(DEFAULTS.objective_spec)

    def ind(text, fit):
        i = Individual(to_tree(parse(text), pset))
        i.fitness.values = (fit,)
        return i

    hof = HallOfFame(2)
    hof.update([ind("min(1.0, div(target_prob, draft_prob))", 0.8), ind("target_prob", 0.5),
                ind("min(1.0, div(target_prob, draft_prob))", 0.8)])
    assert [str(m) for m in hof] == ["min(1.0, div(target_prob, draft_prob))", "target_prob"]
    hof.update([ind("div(target_prob, draft_prob)", 0.8)])  # same fitness, smaller: displaces the worst
    assert [str(m) for m in hof] == ["div(target_prob, draft_prob)", "min(1.0, div(target_prob, draft_prob))"]
    hof.update([ind("draft_prob", 0.1), ind("max(target_prob, div(target_prob, draft_prob))", 0.8)])
    assert len(hof) == 2 and str(hof[0]) == "div(target_prob, draft_prob)"
    assert str(hof[1]) == "min(1.0, div(target_prob, draft_prob))"


def test_population_and_hall_of_fame_round_trip_through_pickle(small):
    """Individuals are module-level classes: they pickle with their fitness, and evolve on identically."""
    import pickle
    import random
    from deap.algorithms import varAnd
    from evolve.eval.population import evaluate_population
    from evolve.gp.primitives import build_pset
    from evolve.search.individuals import HallOfFame, ParetoIndividual
    from evolve.search.operators import toolbox

    train, _ = small
    cfg = resolve({"population": 30, "seed": 3})
    tb = toolbox(cfg, build_pset(CORE_FEATURES))
    random.seed(cfg.seed)
    population = [tb.individual() for _ in range(cfg.population)]
    for ind, m in zip(population, evaluate_population(population, train, cfg.acceptance_quality_fitness())):
        ind.fitness.values = (score(m, cfg),)
    hof = HallOfFame(5)
    hof.update(population)
    population2, hof2 = pickle.loads(pickle.dumps((population, hof)))
    for before, after in ((population, population2), (list(hof), list(hof2))):
        assert [str(i) for i in after] == [str(i) for i in before]
        assert [i.fitness.values for i in after] == [i.fitness.values for i in before]
        assert all(type(a) is type(b) and a.fitness.valid for a, b in zip(after, before))
    hof2.update(population2)  # the copy keeps working: nothing new to add
    assert [str(i) for i in hof2] == [str(i) for i in hof]

    def next_generation(pop):
        random.seed(99)
        offspring = varAnd(tb.select(pop, len(pop)), tb, cfg.crossover_prob, cfg.mutation_prob)
        return [(str(i), i.fitness.values if i.fitness.valid else None) for i in offspring]

    assert next_generation(population2) == next_generation(population)
    # a pareto individual keeps its three objectives and its crowding distance
    ind = ParetoIndividual(population[0])
    ind.fitness.values, ind.fitness.crowding_dist = (2.5, 0.01, 3.0), 0.75
    copy = pickle.loads(pickle.dumps(ind))
    assert str(copy) == str(ind) and copy.fitness.values == (2.5, 0.01, 3.0)
    assert copy.fitness.crowding_dist == 0.75 and copy.fitness.weights == ind.fitness.weights


def test_seed_standard_and_expected_fitness(small):
    train, _ = small
    std = evaluate(get_rule("standard_rejection"), train)
    res = small_search(small, warm_start=True, generations=0, objective="expected")
    assert res.logbook[0]["train_max"] >= std.expected_fitness
    assert score(res.hall_of_fame[0].train, resolve({"objective": "expected"})) == res.logbook[0]["train_max"]
    plain = small_search(small, generations=0)
    assert "div(target_prob, draft_prob)" not in [e.expression for e in plain.hall_of_fame]


def test_should_stop_ends_after_the_current_generation(small):
    calls = []
    res = search(resolve({"population": 30, "generations": 10, "seed": 1}), *small, CORE_FEATURES,
                 on_generation=lambda row: calls.append(row["gen"]), should_stop=lambda: len(calls) >= 3)
    assert calls == [0, 1, 2] and res.generations == 2 and res.interrupted


def test_missing_feature_is_an_input_error(small):
    from evolve.errors import InputError
    with pytest.raises(InputError, match="overlap"):
        search(resolve({"population": 4, "generations": 0}), *small, CORE_FEATURES + ("overlap",))


# --- whole runs --------------------------------------------------------------------------------

@pytest.fixture()
def dataset(search_dataset) -> Path:
    """A dataset directory with train and valid only: a run must not need (or read) test (conftest)."""
    return search_dataset


def test_run_writes_a_complete_run_directory_without_reading_test(dataset, tmp_path, monkeypatch):
    read = []

    def spy(data_dir, split):
        read.append(split)
        return load_split(data_dir, split)

    monkeypatch.setattr(search_mod, "load_split", spy)
    cfg = resolve({"data": str(dataset), "out": str(tmp_path / "out"), "population": 20, "generations": 3,
                   "seed": 5})
    info = run(cfg)
    assert "test" not in read and sorted(read) == ["train", "valid"]
    d = info.run_dir
    assert d.parent == tmp_path / "out" and d.name.startswith("run-") and d.name.endswith("-seed5")
    names = {p.name for p in d.iterdir()}
    assert names == {"config.toml", "run.json", "logbook.csv", "hall_of_fame.json", "champion.json",
                     "champion.py", "fitness.png"}
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no staging left
    assert load_toml(d / "config.toml") == {k: (tuple(v) if isinstance(v, list) else v)
                                            for k, v in cfg.to_dict().items()}
    rows = list(csv.DictReader((d / "logbook.csv").open()))
    assert [int(r["gen"]) for r in rows] == [0, 1, 2, 3]
    assert float(rows[-1]["best_valid"]) == pytest.approx(
        score(info.result.champion.valid, resolve({"objective": "acceptance_quality"})), abs=1e-6)
    assert float(rows[-1]["evals_per_s"]) >= 0
    hof = json.loads((d / "hall_of_fame.json").read_text())
    assert [h["expression"] for h in hof] == [e.expression for e in info.result.hall_of_fame]
    champ = read_champion(d)
    assert champ.expression == info.result.champion.expression
    assert champ.metrics["valid"] == info.result.champion.valid.to_dict()
    prov = champ.provenance
    assert prov["run_dir"] == str(d) and prov["seed"] == 5 and prov["data_dir"] == str(dataset)
    assert prov["data"]["generator"] == "independent" and prov["config"]["population"] == 20
    assert {"python", "deap", "numpy", "numba"} <= set(prov["versions"])
    assert "def acceptance_threshold(" in (d / "champion.py").read_text()
    assert (d / "fitness.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a second run with the same config gets its own directory and the same champion
    info2 = run(cfg)
    assert info2.run_dir != d and info2.result.champion.expression == champ.expression


def test_sigint_finishes_the_generation_and_writes_the_champion(dataset, tmp_path):
    cfg = resolve({"data": str(dataset), "out": str(tmp_path / "out"), "population": 20, "generations": 50,
                   "seed": 2})
    seen = []

    def progress(row):
        seen.append(row["gen"])
        if row["gen"] == 1:
            os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C would, in the middle of the run

    before = signal.getsignal(signal.SIGINT)
    with graceful_interrupt() as stop:
        info = run(cfg, progress=progress, stop=stop)
    assert seen == [0, 1]
    assert info.result.interrupted and info.result.generations == 1
    assert read_champion(info.run_dir).provenance["interrupted"] is True
    assert json.loads((info.run_dir / "run.json").read_text())["generations_completed"] == 1
    assert signal.getsignal(signal.SIGINT) is before


def test_optional_columns_become_terminals(tmp_path):
    df = generate_split(20, 4)
    pos = df["position"].to_numpy()
    df["draft_index"] = pos % 4
    df["draft_top_prob"] = np.maximum(df["draft_prob"], 0.6)
    df["target_top_prob"] = np.maximum(df["target_prob"], 0.5)
    df["overlap"] = np.minimum(1.0, df["target_prob"] / df["draft_prob"])
    d = tmp_path / "data"
    write_dataset(d, {"train": df, "valid": df}, {"generator": "test"})
    cfg = resolve({"data": str(d), "out": str(tmp_path / "out"), "population": 60, "generations": 3, "seed": 0})
    info = run(cfg)
    assert info.result.features == CORE_FEATURES + ("draft_index", "draft_top_prob", "target_top_prob", "overlap")
    used = {n.value for e in info.result.hall_of_fame for n in parse(e.expression) if n.node_type == "feature"}
    assert used & {"draft_index", "draft_top_prob", "target_top_prob", "overlap"}
    only = resolve({"data": str(d), "out": str(tmp_path / "out"), "population": 10, "generations": 0,
                    "features": "draft_prob,target_prob"})
    assert run(only).result.features == ("draft_prob", "target_prob")


# --- the finding: evolution from random trees rediscovers standard rejection ---------------------

#: Settings of the finding test. Measured with GP seeds 0-59 on three independent-features datasets of this size
#: (data seeds 1, 7, 101): 179 of 180 runs reached >= 0.97 of standard rejection on test, about 1 s each.
FINDING = {"population": 500, "generations": 30, "seed": 0, "warm_start": False}


@pytest.mark.slow
def test_finding_evolution_from_random_reaches_standard_rejection(tmp_path):
    """Under the acceptance-quality fitness standard rejection is the optimum: a search from random trees gets there."""
    d = tmp_path / "independent_data"
    write_dataset(d, {"train": generate_split(300, 101), "valid": generate_split(100, 102)},
                  {"generator": "independent"})
    test = EvalData.from_traces(Traces.from_frame(generate_split(100, 103), source="test", split="test"))
    cfg = resolve({"data": str(d), "out": str(tmp_path / "out"), **FINDING})
    assert not cfg.warm_start
    info = run(cfg)
    champion = compile_expression(info.result.champion.expression)
    standard = evaluate(get_rule("standard_rejection"), test).fitness
    got = evaluate(champion, test).fitness
    assert got >= 0.97 * standard, (info.result.champion.expression, got, standard)
    # and nothing beats it by more than sampling noise (docs/reference/math.md: standard rejection is the optimum)
    assert got <= standard + 0.01

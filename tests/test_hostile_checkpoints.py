"""Hostile checkpoints re-signed after a change (the digest recomputed as :mod:`evolve.search.checkpoint` says, so
only the checks of meaning stand between them and a resume): fitness values no objective gives (1e300, "nan"),
logbooks that no generation can produce or that do not describe the population, remembered metrics and
fitness values that are not what the programs score (re-scored on resume), times and seeds out of range.
Each refused by ``python -m evolve resume`` in one line naming the checkpoint file and the field (exit 2, no
traceback, nothing written).
"""
from __future__ import annotations

import base64

import numpy as np
import pytest

from evolve.search.checkpoint import CHECKPOINT_FILE
from test_checkpoint_hostile import _copy, _forge, _refused, _set, made  # noqa: F401 - the fixture `made`


def _wv(island_field, value):
    return _set("islands", 0, island_field, 0, "wvalues", value=value)


def _hof_fitness(value):
    def edit(data):
        data["islands"][0]["hof"]["members"][0][1]["wvalues"] = value
    return edit


def _row(column, value, k=2):
    return _set("logbook", k, column, value=value)


def _row_shift(column, delta, k=2):
    def edit(data):
        data["logbook"][k][column] += delta
    return edit


def _swap_fitness(data):
    """Two sampled individuals (0 and 10 of 20) exchange their fitness values: the population's max and min
    stay, so only re-scoring finds it."""
    people = data["islands"][0]["population"]
    a, b = people[0]["wvalues"], people[10]["wvalues"]
    assert a != b
    people[0]["wvalues"], people[10]["wvalues"] = b, a


def _cache_value(split, column, index, change):
    def edit(data):
        col = data["caches"][split]["columns"][column]
        values = np.frombuffer(base64.b64decode(col["data"]), dtype="<f8").copy()
        k = {"first": 0, "middle": len(values) // 2, "last": len(values) - 1}[index]
        values[k] = change(values[k])
        col["data"] = base64.b64encode(values.tobytes()).decode("ascii")
    return edit


def _plausible(v):
    """Another value in [0, 1] (a plausible fitness or rate)."""
    return 0.25 if abs(v - 0.25) > 1e-3 else 0.75


# case: (edit of the header, edit of the payload, texts the one line holds besides the file)
FORGED = {
    # fitness values no objective gives
    "fitness 1e300": (None, _wv("population", [1e300]), ("'islands[0].population[0].wvalues'", "1e+300")),
    "fitness -1e16": (None, _wv("population", [-1e16]), ("'islands[0].population[0].wvalues'",)),
    "fitness nan": (None, _wv("population", ["nan"]), ("'islands[0].population[0].wvalues'", "finite")),
    "fitness inf": (None, _wv("population", ["inf"]), ("'islands[0].population[0].wvalues'", "finite")),
    "fitness -inf": (None, _wv("population", ["-inf"]), ("'islands[0].population[0].wvalues'", "finite")),
    "fitness true": (None, _wv("population", [True]), ("'islands[0].population[0].wvalues'",)),
    "hall of fame 1e300": (None, _hof_fitness([1e300]), ("'islands[0].hof.members[0][1].wvalues'",)),
    "hall of fame nan": (None, _hof_fitness(["nan"]), ("'islands[0].hof.members[0][1].wvalues'",)),
    # fitness values that are not what the programs score (re-scored on resume)
    "two fitness values swapped": (None, _swap_fitness, ("'islands[0].population[0].wvalues'", "but it scores")),
    "remembered train fitness": (None, _cache_value("train", "fitness", "first", _plausible),
                                 ("'caches.train.keys[0]'", "fitness", "re-scored on resume")),
    "remembered train acceptance": (None, _cache_value("train", "acceptance_rate", "last", _plausible),
                                    ("'caches.train.keys[", "acceptance_rate")),
    "remembered valid quality": (None, _cache_value("valid", "quality_score", "middle", _plausible),
                                 ("'caches.valid.keys[", "quality_score")),
    "remembered fitness 1e300": (None, _cache_value("train", "fitness", "first", lambda v: 1e300),
                                 ("'caches.train.keys[0]'", "1e+300")),
    "remembered fitness nan": (None, _cache_value("valid", "fitness", "first", lambda v: float("nan")),
                               ("'caches.valid.keys[0]'", "nan")),
    # logbooks no generation produces
    "train_max 1e300": (None, _row("train_max", 1e300, 1), ("'logbook[1].train_max'",)),
    "train_avg nan": (None, _row("train_avg", "nan", 0), ("'logbook[0].train_avg'",)),
    "train_avg above train_max": (None, _row_shift("train_avg", 5.0, 1), ("'logbook[1].train_avg'",)),
    "train_median below train_min": (None, _row_shift("train_median", -5.0, 0), ("'logbook[0].train_median'",)),
    "train_std negative": (None, _row("train_std", -0.1, 1), ("'logbook[1].train_std'",)),
    "train_std beyond the range": (None, _row("train_std", 50.0, 1), ("'logbook[1].train_std'",)),
    "nevals beyond the population": (None, _row("nevals", 10 ** 6, 1), ("'logbook[1].nevals'", "1000000")),
    "nevals negative": (None, _row("nevals", -3, 1), ("'logbook[1].nevals'",)),
    "nevals fractional": (None, _row("nevals", 2.5, 1), ("'logbook[1].nevals'", "2.5")),
    "new_programs nan": (None, _row("new_programs", "nan", 1), ("'logbook[1].new_programs'",)),
    "size_min 0": (None, _row("size_min", 0, 1), ("'logbook[1].size_min'",)),
    "size_avg above size_max": (None, _row_shift("size_avg", 100.0, 1), ("'logbook[1].size_avg'",)),
    "depth_max of the largest tree": (None, _row("depth_max", 1000, 1), ("'logbook[1].depth_max'",)),
    "row seconds negative": (None, _row("seconds", -1.0, 1), ("'logbook[1].seconds'",)),
    "row eval_seconds inf": (None, _row("eval_seconds", "inf", 1), ("'logbook[1].eval_seconds'",)),
    "evals_per_s negative": (None, _row("evals_per_s", -2.0, 0), ("'logbook[0].evals_per_s'",)),
    # the last row describes the population the checkpoint holds
    "last train_max not the population's": (None, _row_shift("train_max", 0.5), ("'logbook[2].train_max'",
                                                                                 "population")),
    "last train_min not the population's": (None, _row_shift("train_min", -0.5), ("'logbook[2].train_min'",)),
    "last size_max not the population's": (None, _row_shift("size_max", 7), ("'logbook[2].size_max'",)),
    # times and seeds
    "seconds nan": (None, _set("seconds", value="nan"), ("'seconds'",)),
    "seconds inf": (None, _set("seconds", value="inf"), ("'seconds'",)),
    "seconds negative": (None, _set("seconds", value=-5.0), ("'seconds'",)),
    "seed negative": (_set("config", "seed", value=-1), None, ("key 'seed'",)),
    "seed beyond 64 bits": (_set("config", "seed", value=2 ** 64), None, ("key 'seed'",)),
    "seed fractional": (_set("config", "seed", value=1.5), None, ("key 'seed'",)),
    "seed as text": (_set("config", "seed", value="1"), None, ("key 'seed'",)),
    "random state word beyond 32 bits": (None, _set("islands", 0, "rng", 1, 0, value=2 ** 32),
                                         ("'islands[0].rng[1]'",)),
    "numpy state key negative": (None, _set("islands", 0, "np_rng", 1, 3, value=-1), ("'islands[0].np_rng[1]'",)),
    "evaluations fractional": (None, _set("evaluations", value=3.5), ("'evaluations'",)),
    "evaluations not the logbook's": (None, _set("evaluations", value=1000), ("'evaluations'", "nevals add up")),
}


@pytest.mark.parametrize("case", list(FORGED))
def test_a_re_signed_checkpoint_that_makes_no_sense_is_refused(case, made, tmp_path):  # noqa: F811
    edit_head, edit_data, culprits = FORGED[case]
    partial = _copy(made, tmp_path)
    _forge(partial / CHECKPOINT_FILE, edit_head, edit_data)
    line = _refused(partial, watch=(tmp_path, made["data"]), culprits=(str(partial / CHECKPOINT_FILE),) + culprits)
    assert "option '" not in line


def test_a_re_signed_but_unchanged_checkpoint_resumes(made, tmp_path):  # noqa: F811
    """Re-scoring and the logbook checks accept what the run wrote (re-signed without a change)."""
    from click.testing import CliRunner

    from evolve.cli.evolve import cli as evolve_cli

    partial = _copy(made, tmp_path)
    _forge(partial / CHECKPOINT_FILE, None, None)
    res = CliRunner().invoke(evolve_cli, ["resume", str(partial), "--no-progress"])
    assert res.exit_code == 0, res.output

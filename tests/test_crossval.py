"""Selection by cross-validation over the texts of train and valid (``selection = "cv"``, evolve.search.crossval)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from evolve.errors import InputError
from evolve.eval.evaluator import EvalData
from evolve.search.config import resolve
from evolve.search.crossval import folds, pooled
from evolve.search.rundir import run
from evolve.traces.io import load_split


@pytest.fixture(scope="module")
def two(vocab_dataset):
    return EvalData.from_traces(load_split(vocab_dataset, "train")), EvalData.from_traces(load_split(vocab_dataset,
                                                                                                      "valid"))


def test_pooled_texts_stay_whole_and_distinct(two):
    train, valid = two
    both = pooled(train, valid)
    assert both.n == train.n + valid.n and both.texts == train.texts + valid.texts
    assert np.array_equal(both.X[:, train.n:], valid.X) and both.no_draft_calls == train.no_draft_calls + valid.no_draft_calls
    back = both.resample_texts(np.arange(train.texts, both.texts))
    assert np.array_equal(back.X, valid.X) and np.array_equal(back.u, valid.u)


def test_folds_deal_every_text_once(two):
    both = pooled(*two)
    parts = folds(both, 4, 7)
    assert sorted(np.concatenate(parts).tolist()) == list(range(both.texts))
    assert max(p.size for p in parts) - min(p.size for p in parts) <= 1
    assert all(np.array_equal(a, b) for a, b in zip(parts, folds(both, 4, 7)))
    with pytest.raises(InputError, match="fewer than cv_folds"):
        folds(both.resample_texts(np.array([0, 1])), 3, 0)


def test_cross_validation_is_a_setting_that_checks_its_needs():
    assert resolve({}).selection == "valid"
    with pytest.raises(InputError) as e:
        resolve({"evolve": "verify-length", "selection": "cv", "warm_start": False})
    assert e.value.param == "selection"
    with pytest.raises(InputError) as e:
        resolve({"cv_folds": 3})
    assert e.value.param == "cv_folds"
    with pytest.raises(InputError):
        resolve({"evolve": "tree-shape", "selection": "cv"})


def test_a_cross_validated_run_judges_its_champion_out_of_fold(vocab_dataset, tmp_path, two):
    """A run whose champion on valid is a seeded rule has no evolved champion to judge: no fold search runs. A run's
    evolved champion (here its best evolved hall-of-fame program, made the champion) is judged out of fold: every
    fold searched, the difference weighted by the folds' texts, its programs counted in the run's."""
    from dataclasses import replace

    from evolve.search.algorithms import search
    from evolve.search.crossval import cross_validate
    from evolve.search.config import resolve_features

    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"target_forward_s": [0.06, 0.064, 0.1, 0.136, 0.16, 0.18], "draft_token_s": 0.003,
                                 "plain_token_s": 0.06}))
    cfg = resolve({"data": str(vocab_dataset), "out": str(tmp_path / "runs"), "evolve": "verify-length",
                   "costs": str(costs), "population": 40, "generations": 3, "seed": 2, "selection": "cv",
                   "cv_folds": 3})
    info = run(cfg)
    doc = json.loads((info.run_dir / "run.json").read_text())
    if doc["champion_source"].startswith("seeded:") and doc["champion_guard"] is None:
        assert doc["programs_scored"] < 40 * 4 * 3  # the search alone: no fold search ran
    train, valid = two
    features = resolve_features(cfg, tuple(f for f in train.available if f in valid.available), cfg.data)
    result = search(replace(cfg, selection="valid"), train, valid, features)
    warm = result.warm_start
    evolved = [e for e in result.hall_of_fame if warm.name_of(e.expression) is None]
    assert evolved
    best = max(evolved, key=lambda e: cfg.objective_spec.score(e.valid, cfg))
    judged = cross_validate(replace(result, champion=best, champion_source="evolved"), cfg, train, valid, features)
    guard = judged.guard.to_dict()
    detail = guard["cross_validation"]
    assert detail["folds"] == 3 and len(detail["per_fold"]) == 3
    assert detail["texts"] == sum(f["texts"] for f in detail["per_fold"]) == train.texts + valid.texts
    assert guard["difference"] == pytest.approx(sum(f["texts"] * f["difference"] for f in detail["per_fold"])
                                                / detail["texts"])
    assert "cross-validation over" in guard["reason"]
    assert judged.programs == result.programs + detail["programs"] and detail["programs"] > 0
    if not guard["kept"]:  # evolution not ahead out of fold: the run returns a seeded rule
        assert judged.champion_source.startswith("seeded:")
    else:
        assert judged.champion_source == "evolved" and judged.champion is best

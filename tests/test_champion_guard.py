"""The champion guard (evolve.search.guard): an evolved champion replaces the best seeded competitor only when it
is ahead on valid by more than the noise of valid's texts (a paired bootstrap over texts)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from evolve import api
from evolve.eval.evaluator import EvalData
from evolve.eval.population import PopulationEvaluator
from evolve.gp.compiler import parse
from evolve.search import result as result_module
from evolve.search.guard import guard
from evolve.traces.io import load_split

STANDARD = "min(1.0, div(target_prob, draft_prob))"


@pytest.fixture(scope="module")
def valid(vocab_dataset) -> EvalData:
    return EvalData.from_traces(load_split(vocab_dataset, "valid"))


def _scorer(data: EvalData) -> PopulationEvaluator:
    return PopulationEvaluator(data, gamma=data.block_length, cache_size=0)


def test_resample_texts_keeps_texts_and_blocks_whole(valid):
    assert valid.texts > 1
    same = valid.resample_texts(np.arange(valid.texts))
    assert np.array_equal(same.X, valid.X) and np.array_equal(same.u, valid.u) and same.texts == valid.texts
    twice = valid.resample_texts(np.array([0, 0]))
    first = valid.resample_texts(np.array([0]))
    assert twice.n == 2 * first.n and np.array_equal(twice.X[:, first.n:], first.X)
    assert twice.depth[0] == 0 and twice.depth[first.n] == 0  # a text starts a block
    starts, text = twice.text_runs
    assert starts[-1] == twice.n and len(set(text.tolist())) == 1


def test_a_program_clearly_ahead_is_kept(valid):
    found = guard(valid, _scorer, lambda m: m.acceptance_rate, parse("1.0"), parse(STANDARD), "standard_rejection")
    assert found.kept and found.low > 0.0 and found.low <= found.difference <= found.high
    assert found.texts == valid.texts and "ahead by more than the noise" in found.reason


def test_a_tie_is_not_a_win(valid):
    found = guard(valid, _scorer, lambda m: m.acceptance_rate, parse(STANDARD), parse(STANDARD), "standard_rejection")
    assert not found.kept and found.difference == 0.0 and found.low == found.high == 0.0
    assert "the seeded standard_rejection is kept" in found.reason


def test_a_program_behind_is_not_kept(valid):
    behind = guard(valid, _scorer, lambda m: m.acceptance_rate, parse(STANDARD), parse("1.0"), "always_accept")
    assert not behind.kept and behind.high < 0.0


def test_one_text_cannot_measure_the_noise(valid):
    one = valid.resample_texts(np.array([0]))
    found = guard(one, _scorer, lambda m: m.acceptance_rate, parse("1.0"), parse(STANDARD), "standard_rejection")
    assert found.kept and np.isnan(found.low) and "cannot be measured" in found.reason


def test_a_search_returns_the_seed_when_its_evolved_choice_is_within_noise(vocab_dataset, tmp_path, monkeypatch):
    """The choice is forced onto an evolved entry equal to the best seed on valid: the guard finds no margin and the
    run returns the seeded rule, recording the guard in run.json and the champion's provenance."""
    chosen = []

    def choose_evolved(candidates, objective, spec, cfg, guarded):
        evolved = [i for i, c in enumerate(candidates) if c.seed_name is None]
        chosen.append(evolved[0] if evolved else 0)
        return chosen[-1]

    monkeypatch.setattr(result_module, "choose", choose_evolved)
    res = api.run_search({"data": vocab_dataset, "out": tmp_path, "population": 16, "generations": 1, "seed": 3})
    summary = json.loads((res.run_dir / "run.json").read_text())
    checked = summary["champion_guard"]
    assert checked is not None and set(checked) >= {"kept", "seeded", "texts", "difference", "low", "high", "reason"}
    assert summary["champion_source"] == ("evolved" if checked["kept"] else f"seeded:{checked['seeded']}")
    champion = json.loads((res.run_dir / "champion.json").read_text())
    assert champion["provenance"]["champion_guard"] == checked
    if not checked["kept"]:
        assert checked["low"] <= 0.0


def test_a_figure_not_measured_is_written_as_null():
    import json

    from evolve.search.guard import GuardResult

    result = GuardResult(True, "fixed_gamma=1", 1, 0.5, float("nan"), float("nan"), "one text")
    doc = result.to_dict()
    assert doc["low"] is None and doc["high"] is None and doc["difference"] == 0.5
    json.dumps(doc, allow_nan=False)  # a champion file is strict JSON

"""A policy reading the request so far, scored from records by the history walk and decoded live: the same figures.

The walk keeps the harvest's block boundaries (the next block starts where the harvest's call ended, whatever the
policy verified), so it is an approximation (:mod:`evolve.kinds.verify_length.eval_history`); on the tiny offline
models (the ``llama_files`` fixture), greedy decoding, every history feature read by some policy, the expected
tokens per call it predicts are within 5% of live decoding's on the same prompts under both block weightings, and
so are the drafts verified per call under position weighting (each harvested block standing for the positions it
covered; under call weighting a policy that verifies fewer drafts than the harvest makes more calls live than the
records hold, which only position weighting counts).
"""
from __future__ import annotations

import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
pytest.importorskip("torch")
pytest.importorskip("transformers")

from evolve.commands.live import decoder, run_live  # noqa: E402
from evolve.harvest.subset import split_prompts  # noqa: E402
from evolve.eval.costs import DEFAULT_COSTS  # noqa: E402
from evolve.eval.evaluator import EvalData  # noqa: E402
from evolve.harvest.config import HarvestConfig  # noqa: E402
from evolve.harvest.loop import harvest  # noqa: E402
from evolve.kinds.verify_length.eval_policy import LengthPopulationEvaluator  # noqa: E402
from evolve.traces.io import load_split  # noqa: E402
from heuristics.contract import Rule  # noqa: E402

GAMMA = 4
POLICIES = {"prev_accepted": "if_gt(prev_accepted, 1.5, sub(3.5, draft_index), sub(1.5, draft_index))",
            "accept_ewma": "sub(mul(4.0, accept_ewma), add(draft_index, 0.5))",
            "since_reject": "sub(add(0.5, min(since_reject, 3.0)), draft_index)",
            "first_hit_ewma": "if_gt(prev_verified, 0.5, sub(mul(3.0, first_hit_ewma), draft_index), 0.7)"}


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    yield


@pytest.mark.parametrize("drafter", [{"skip_layers": (1, 2)}, {"ngram": (2, 1)}])
def test_the_history_walk_predicts_live_decoding(llama_files, tmp_path, drafter):
    config = HarvestConfig(target=llama_files["target"], prompts=llama_files["prompts"], gamma=GAMMA,
                           max_new_tokens=48, temperature=0.0, seed=11, out=str(tmp_path / "data"), **drafter)
    harvest(config, progress=False)
    data = EvalData.from_traces(load_split(tmp_path / "data", "train"))
    scored = {w: LengthPopulationEvaluator(data, gamma=GAMMA, costs=DEFAULT_COSTS, weighting=w).evaluate(
        list(POLICIES.values())) for w in ("call", "position")}
    rules = [decoder(Rule(name, "", "", expression=e, kind="verify-length", lossless=True))
             for name, e in POLICIES.items()]
    assert all(r.history is not None for r in rules)
    report = run_live(config, rules, texts=split_prompts(config.prompts, tmp_path / "data", "train"))
    for name, call, position, row in zip(POLICIES, scored["call"], scored["position"], report.rows):
        for m in (call, position):
            assert m.tokens_per_call == pytest.approx(row["expected_tokens_per_call"], rel=0.05), name
        assert position.mean_verified == pytest.approx(row["mean_drafted"], rel=0.05), name
    assert len({round(r["mean_drafted"], 3) for r in report.rows}) == len(POLICIES)  # the policies differ live

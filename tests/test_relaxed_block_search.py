"""The relaxed block verification search: ``python -m evolve run --fitness pareto --verify block``.

* a small run writes a front of weights w(features) that read prefix-level features only, is seeded
  with lossless block verification (w = 0) and the fixed-w family, and its front's objectives are
  the record scorer's (evolve/eval/relaxed_block.py) values on train;
* ``benchmark.py pareto --run`` shows that front as ``evolved_relaxed_block`` beside block
  verification, the fixed-w family and the per-token curves, with a verdict per budget;
* bad settings are refused with one line naming the option.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evolve.errors import InputError
from evolve.traces.io import load_split
from evolve.cli.evolve import cli
from evolve.eval.evaluator import EvalData
from evolve.kinds.base import TOKEN_FEATURES
from evolve.kinds.relaxation.eval_population import evaluate_relaxed
from evolve.gp.compiler import parse
from evolve.search.config import resolve, resolve_features


@pytest.fixture(scope="module")
def relaxed_run(vocab_dataset, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("relaxed_runs")
    res = CliRunner().invoke(cli, ["run", "--data", str(vocab_dataset), "--out", str(out), "--objective", "pareto",
                                   "--evolve", "relaxation", "--population", "40", "--generations", "3", "--seed", "2",
                                   "--no-progress"])
    assert res.exit_code == 0, res.output
    return Path(res.stdout.strip().splitlines()[-1])


def test_run_writes_a_front_of_prefix_level_weights(relaxed_run, vocab_dataset):
    run = json.loads((relaxed_run / "run.json").read_text())
    assert run["config"]["evolve"] == "relaxation" and run["kind"] == "relaxation"
    assert not set(run["features"]) & set(TOKEN_FEATURES)
    seeds = [s["name"] for s in run["seeded_rules"]]
    assert seeds[0] == "relaxed_block(w=0)" and len(seeds) > 2
    front = json.loads((relaxed_run / "front.json").read_text())["front"]
    assert front
    exprs = [m["expression"] for m in front]
    for e in exprs:
        assert not {n.value for n in parse(e) if n.node_type == "feature"} & set(TOKEN_FEATURES)
    train = EvalData.from_traces(load_split(vocab_dataset, "train"))
    for member, m in zip(front, evaluate_relaxed(exprs, train, 5)):
        assert member["objectives"]["train"]["tokens_per_call"] == m.tokens_per_call
        assert member["objectives"]["train"]["tv_per_token"] == m.tv_per_token
        assert member["train"]["relaxed_block"] == 1
    # the front goes from lossless (w = 0 scores TV 0) to lossy
    tvs = [m["objectives"]["train"]["tv_per_token"] for m in front]
    assert min(tvs) == 0.0 and max(tvs) > 0.0
    shown = CliRunner().invoke(cli, ["show", str(relaxed_run)])
    assert shown.exit_code == 0, shown.output


def test_pareto_shows_the_relaxed_front_and_its_verdict(relaxed_run, vocab_dataset, tmp_path):
    from evolve.cli.benchmark import cli as benchmark
    out = tmp_path / "pareto.json"
    res = CliRunner().invoke(benchmark, ["pareto", "--data", str(vocab_dataset), "--run", str(relaxed_run),
                                         "--output", str(out), "--no-learned"])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    refs = doc["references"]
    assert {"block_verification", "relaxed_block_fixed_w", "evolved_relaxed_block"} <= set(refs)
    assert "evolved" not in doc["curves"]  # the weights are not scored as per-token thresholds
    bv = refs["block_verification"]["best_at_budget"]["0"]
    assert refs["relaxed_block_fixed_w"]["best_at_budget"]["0"] == pytest.approx(bv, rel=1e-12)
    verdict = doc["relaxed_verdict"]
    assert set(verdict["budgets"]) == {"0.005", "0.01", "0.02", "0.05"}
    for key, m in verdict["budgets"].items():
        assert m["block_verification"] == pytest.approx(bv)
        assert m["margins"]["block_verification"] == pytest.approx(m["evolved_relaxed"] / bv - 1.0)
    table = CliRunner().invoke(benchmark, ["pareto", "--data", str(vocab_dataset), "--run", str(relaxed_run),
                                           "--no-plot", "--no-learned"])
    assert "evolved_relaxed_block vs block_verification" in table.stdout


def test_bad_relaxed_settings_are_refused(vocab_dataset, tmp_path):
    with pytest.raises(InputError, match="objective 'acceptance_quality' does not score relaxation programs") as exc:
        resolve({"evolve": "relaxation", "objective": "acceptance_quality"})
    assert exc.value.param == "evolve"
    with pytest.raises(InputError, match="unknown value 'tree'"):
        resolve({"evolve": "tree", "objective": "pareto"})
    cfg = resolve({"evolve": "relaxation", "objective": "pareto", "features": "overlap,target_prob"})
    with pytest.raises(InputError, match="may not read 'target_prob' .*depend on the drafted token"):
        resolve_features(cfg, ("overlap", "target_prob"), "data")
    auto = resolve_features(resolve({"evolve": "relaxation", "objective": "pareto"}),
                            ("draft_index", "overlap", "target_rank"), "data")
    assert "overlap" in auto and not set(auto) & set(TOKEN_FEATURES)
    # --evolve relaxation without --objective takes the kind's first objective, a block objective
    assert resolve({"evolve": "relaxation"}).objective == "speed_at_tv"
    # the option of older versions is refused with the new spelling; its config key still loads
    res = CliRunner().invoke(cli, ["run", "--data", str(vocab_dataset), "--out", str(tmp_path), "--verify", "block",
                                   "--no-progress"])
    assert res.exit_code == 2 and "--evolve relaxation" in res.output and len(res.output.strip().splitlines()) == 1
    assert resolve({"verify": "block", "fitness": "pareto"}) == resolve({"evolve": "relaxation", "objective": "pareto"})
    assert not list(tmp_path.iterdir())

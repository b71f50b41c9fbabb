"""What verifies a verification-length policy's drafts: the standard rule, a per-token rule (lossy or
not), block verification and relaxed block verification, each scored exactly from the prefix tables;
the calls that drafted nothing; a run's ``verify_with``; the pareto mode; export and live."""
from __future__ import annotations

import json

import numpy as np
import pytest

from evolve.errors import InputError
from evolve.eval.block_verification import block_verification_metrics
from evolve.eval.costs import DEFAULT_COSTS, FREE_DRAFTS, Costs
from evolve.eval.evaluator import EvalData, evaluate, split_target_calls, thresholds
from evolve.eval.relaxed_block import attach, relaxed_metrics
from evolve.kinds.verify_length.eval_competitors import competitors
from evolve.kinds.verify_length.eval_policy import LengthPopulationEvaluator, fixed_gamma_values, policy_metrics
from evolve.kinds.verify_length.settings import BLOCK_VERIFIER, STANDARD_VERIFIER, LengthVerifier
from evolve.gp.compiler import compile_expression
from evolve.search.algorithms import search
from evolve.search.config import resolve
from evolve.traces.io import load_split
from heuristics.contract import Rule
from heuristics.verifiers import verifier_parts
from heuristics.registry import get_rule

CPU = Costs((0.06, 0.084, 0.09, 0.093, 0.099, 0.108, 0.114), 0.048, 0.06, source="cpu-like")
CHEAP = Costs((0.06, 0.064, 0.07, 0.08, 0.09, 0.1), 0.003, 0.06, source="cheap")
#: A relaxation weight of prefix-level features (lossy relaxed block verification).
RELAX = Rule("relax", expression="mul(0.2, sub(1.0, overlap))", kind="relaxation")
#: A lossy per-token rule.
LENIENT = get_rule("fuzzy_sd:T=0.3")


@pytest.fixture(scope="module")
def splits(vocab_dataset):
    out = {}
    for s in ("train", "valid", "test"):
        traces = load_split(vocab_dataset, s)
        out[s] = EvalData.from_traces(traces)
        attach(out[s], traces)
    return out


@pytest.mark.parametrize("gamma", [1, 2, 4])
def test_a_fixed_length_under_each_verifier_is_that_verifiers_block_metrics(splits, gamma):
    data = splits["test"]
    v = fixed_gamma_values(data, gamma)
    standard = evaluate(get_rule("standard_rejection"), data, gamma=gamma)
    m = policy_metrics(v, data, 5, DEFAULT_COSTS, STANDARD_VERIFIER)
    assert m.tokens_per_call == pytest.approx(standard.tokens_per_call, rel=1e-12) and m.tv_per_token == 0.0
    lenient = evaluate(LENIENT, data, gamma=gamma)
    m = policy_metrics(v, data, 5, DEFAULT_COSTS, LengthVerifier(LENIENT.name, LENIENT, lossless=False))
    assert m.tokens_per_call == pytest.approx(lenient.tokens_per_call, rel=1e-12)
    assert m.tv_per_token == pytest.approx(lenient.tv_per_token, rel=1e-12) and m.tv_per_token > 0
    block = block_verification_metrics(data.feature("target_prob"), data.feature("draft_prob"), data.depth,
                                       load_split(data.source.rsplit("/", 1)[0], "test")["block_residual_mass"],
                                       gamma, FREE_DRAFTS)
    m = policy_metrics(v, data, 5, DEFAULT_COSTS, BLOCK_VERIFIER)
    assert m.tokens_per_call == pytest.approx(block.tokens_per_call, rel=1e-12) and m.tv_per_token == 0.0
    from evolve.eval.relaxed_block import relaxed_of
    w = thresholds(RELAX, data)
    relaxed = relaxed_metrics(w, relaxed_of(data), gamma)
    m = policy_metrics(v, data, 5, DEFAULT_COSTS, LengthVerifier("relax", RELAX, block=True, lossless=False))
    assert m.tokens_per_call == pytest.approx(relaxed.tokens_per_call, rel=1e-12)
    assert m.tv_per_token == pytest.approx(relaxed.tv_per_token, rel=1e-12) and m.tv_per_token > 0


def test_block_verification_lets_a_policy_go_further(splits):
    """Block verification is at least the standard rule at every length, so its best fixed length is as fast."""
    data = splits["test"]
    for g in range(1, 6):
        v = fixed_gamma_values(data, g)
        assert policy_metrics(v, data, 5, CHEAP, BLOCK_VERIFIER).tokens_per_call >= \
            policy_metrics(v, data, 5, CHEAP).tokens_per_call - 1e-12
    best = {name: competitors(data, 5, CHEAP, splits["valid"], verifier)["best_fixed_gamma"][1].tokens_per_second
            for name, verifier in (("standard", STANDARD_VERIFIER), ("block", BLOCK_VERIFIER))}
    assert best["block"] >= best["standard"] * (1 - 1e-12)


def test_calls_without_a_draft_are_plain_steps(splits):
    data = splits["test"]
    v = fixed_gamma_values(data, 3)
    without = policy_metrics(v, data, 5, CPU)
    data.no_draft_calls = 40
    try:
        with_calls = policy_metrics(v, data, 5, CPU)
        scorer = LengthPopulationEvaluator(data, gamma=5, costs=CPU).evaluate(["sub(2.5, draft_index)"])[0]
    finally:
        data.no_draft_calls = 0
    blocks = without.blocks
    assert with_calls.blocks == blocks + 40
    want = (without.tokens_per_call * blocks + 40) / (without.seconds_per_call * blocks + 40 * CPU.plain_token_s)
    assert with_calls.tokens_per_second == pytest.approx(want, rel=1e-12)
    assert scorer == with_calls


def test_target_calls_of_a_harvested_split():
    assert split_target_calls({"statistics": {"test": {"target_calls": 12}}}, "test") == 12
    assert split_target_calls({"statistics": {"test": {"generated_tokens": 30, "tokens_per_target_call": 2.5}}},
                              "test") == 12
    assert split_target_calls({}, "test") is None


def test_verifier_names_resolve_and_bad_ones_are_refused(tmp_path):
    assert verifier_parts(None) == ("standard_rejection", None, False)
    assert verifier_parts("block_verification") == ("block_verification", None, True)
    name, rule, block = verifier_parts("fuzzy_sd:T=0.3")
    assert rule.kind == "threshold" and not block
    with pytest.raises(InputError, match="unknown rule 'nope'") as err:
        verifier_parts("nope")
    assert err.value.param == "verify_with"
    with pytest.raises(InputError, match="is a verify-length rule") as err:
        verifier_parts("fixed_gamma:2")
    with pytest.raises(InputError, match="no such champion file"):
        verifier_parts(str(tmp_path / "missing.json"))


def test_verify_with_is_refused_outside_verification_length_runs():
    with pytest.raises(InputError, match="only a verify-length run reads it") as err:
        resolve({"verify_with": "block_verification"})
    assert err.value.param == "verify_with"
    with pytest.raises(InputError, match="unknown rule"):
        resolve({"evolve": "verify-length", "objective": "tokens_per_second", "verify_with": "nope"})


def _small_run(splits, tmp_path, **settings):
    """A short verification-length search under CHEAP with ``settings``; returns its result."""
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(CHEAP.to_dict()))
    cfg = resolve({"evolve": "verify-length", "objective": "tokens_per_second", "costs": str(path),
                   "population": 40, "generations": 3, "seed": 2, **settings})
    return search(cfg, splits["train"], splits["valid"], ("draft_prob", "position", "draft_entropy", "draft_index",
                                                          "draft_top_prob", "draft_cumprob"))


def test_a_run_with_block_verification_scores_its_champion_so(splits, tmp_path):
    res = _small_run(splits, tmp_path, verify_with="block_verification")
    got = LengthPopulationEvaluator(splits["valid"], gamma=5, costs=CHEAP,
                                    verifier=BLOCK_VERIFIER).evaluate([res.champion.expression])[0]
    assert got == res.champion.valid
    standard = LengthPopulationEvaluator(splits["valid"], gamma=5, costs=CHEAP).evaluate([res.champion.expression])[0]
    assert got.tokens_per_second >= standard.tokens_per_second * (1 - 1e-12)


def test_the_pareto_mode_keeps_a_front_over_speed_and_damage(splits, tmp_path):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(CHEAP.to_dict()))
    cfg = resolve({"evolve": "verify-length", "objective": "pareto_tokens_per_second", "costs": str(path),
                   "verify_with": "fuzzy_sd:T=0.2", "population": 40, "generations": 3, "seed": 2, "tv_budget": 0.05,
                   "tv_cap": 0.1})
    res = search(cfg, splits["train"], splits["valid"], ("draft_prob", "position", "draft_entropy", "draft_index",
                                                         "draft_top_prob", "draft_cumprob"))
    assert res.front and len(res.front) >= 2
    tvs = [e.train.tv_per_token for e in res.front]
    assert tvs == sorted(tvs) and tvs[-1] > tvs[0]  # from less damage (shorter drafts) to more
    assert res.champion.valid.tv_per_token <= 0.05


def test_the_policy_scorer_refuses_block_verification_without_its_column(splits):
    data = splits["test"]
    bare = EvalData(data.X, data.r, data.u, data.b, data.available, source="memory")
    with pytest.raises(InputError, match="block_residual_mass|relaxed block verification needs"):
        LengthPopulationEvaluator(bare, gamma=5, verifier=BLOCK_VERIFIER)


def test_policy_values_of_a_compiled_program_are_thresholds(splits):
    """The scorer reads a program as the evaluator does (one code path)."""
    data = splits["valid"]
    from evolve.kinds.verify_length.eval_policy import decision_data
    expr = "sub(draft_top_prob, 0.6)"
    v = thresholds(compile_expression(expr), decision_data(data))
    assert LengthPopulationEvaluator(data, gamma=5, costs=CPU, verifier=BLOCK_VERIFIER).evaluate([expr])[0] == \
        policy_metrics(v, data, 5, CPU, BLOCK_VERIFIER)
    assert np.isfinite(v).all()


def test_an_exported_policy_names_its_verifier():
    from evolve.export.exporter import TARGETS, layout

    policy = Rule("p", expression="sub(2.5, draft_index)", kind="verify-length", settings=(("verify_with", "block_verification"),))
    text = TARGETS["numpy"](policy.name, policy.nodes, layout(policy), "test")
    namespace: dict = {}
    exec(compile(text, "exported", "exec"), namespace)  # noqa: S102 - the module the exporter wrote
    assert namespace["VERIFIER"] == "block_verification" and "VERIFIER names" in namespace["__doc__"]
    plain = Rule("q", expression="sub(2.5, draft_index)", kind="verify-length")
    namespace = {}
    exec(compile(TARGETS["numpy"](plain.name, plain.nodes, layout(plain), "test"), "exported", "exec"), namespace)
    assert namespace["VERIFIER"] == "standard_rejection"


def test_a_run_with_position_weighting_scores_its_champion_so(splits, tmp_path):
    """The run's length_weighting reaches its champion's valid figures, the champion file's rule and the benchmark
    row (length_scores), and the competitors of a benchmark follow the first policy's weighting."""
    from evolve.kinds.verify_length.report_compare import competitor_rows, length_scores
    from heuristics.champions import Champion

    res = _small_run(splits, tmp_path, length_weighting="position")
    expr = res.champion.expression
    got = LengthPopulationEvaluator(splits["valid"], gamma=5, costs=CHEAP, weighting="position").evaluate([expr])[0]
    assert got == res.champion.valid
    champ = Champion("c", expr, kind="verify-length", provenance={"config": {"length_weighting": "position"}})
    rule = champ.rule()
    assert rule.setting("length_weighting") == "position"
    plain = Champion("d", expr, kind="verify-length", provenance={"config": {}}).rule()
    assert plain.setting("length_weighting") is None and plain.settings == ()
    fields, _ = length_scores(rule, splits["valid"], 1, 5, CHEAP)
    assert fields["verifier"] == got
    rows = {r.heuristic: r for r in competitor_rows(splits["valid"], 5, CHEAP, None, "valid", weighting="position")[0]}
    fixed = competitors(splits["valid"], 5, CHEAP, weighting="position")["best_fixed_gamma"][1]
    assert rows["best_fixed_gamma"].verifier == fixed
    assert rows["length_oracle"].expression.startswith("bound")


def test_benchmark_scores_a_position_champion_with_its_weighting(vocab_dataset, tmp_path):
    """benchmark.py's table: the champion row is scored with its run's weighting, the competitors with the first
    policy's, and the caption says so."""
    from evolve.report.compare.format import format_table
    from evolve.commands.compare.table import BenchmarkOptions, benchmark
    from heuristics.champions import Champion, champion_json

    expr = "sub(draft_cumprob, 0.3)"
    champ = Champion("pos", expr, kind="verify-length", features=("draft_cumprob",),
                     metrics={"train": {"tokens_per_second": 1.0}, "valid": {"tokens_per_second": 1.0}},
                     provenance={"config": {"length_weighting": "position"}})
    path = tmp_path / "pos.json"
    path.write_text(champion_json(champ))
    comparison, _ = benchmark(BenchmarkOptions(data_dir=vocab_dataset, split="test", champions=(str(path),),
                                               repeats=1))
    rows = {r.heuristic: r for r in comparison.rows}
    test = EvalData.from_traces(load_split(vocab_dataset, "test"))
    want = LengthPopulationEvaluator(test, gamma=rows["pos"].gamma, weighting="position").evaluate([expr])[0]
    assert rows["pos"].verifier == want
    assert any("(the first policy's length_weighting, position)" in n for n in comparison.notes_of_kinds)
    assert "text positions its harvest call covered" in " ".join(format_table(comparison).split())

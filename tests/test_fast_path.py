"""The fused fast path (register code, batched population scoring) against the reference paths."""
from __future__ import annotations

import random

import numba
import numpy as np
import pandas as pd
import pytest
from deap import gp

from helpers import assert_same_floats
from evolve.errors import InputError
from evolve.traces.io import Traces
from evolve.traces.synth.independent import generate_split
from evolve.gp.compiler import compile_expression, compile_tree, evaluate_numpy, from_tree, parse, to_string
from evolve.eval.evaluator import (
    EvalData, AcceptanceQualityFitness, evaluate, evaluate_thresholds, metrics_from_counts, reference_metrics, thresholds,
)
from evolve.eval.fastpath.layouts import TILE as BLOCK
from evolve.eval.fastpath.lowering import lower, pack
from evolve.eval.reference import program_thresholds, score_program
from evolve.eval.fastpath.scheduler import SCHEDULER, chunk_bounds
from evolve.eval.fastpath.scoring import score_packed
from evolve.eval.population import PopulationEvaluator, evaluate_population, score_counts
from evolve.gp.primitives import FEATURES, PRIMITIVES, build_pset
from heuristics.registry import get_rule, rule_names

def stress_traces(n: int, seed: int = 0, chunk: int = 700) -> tuple[Traces, EvalData]:
    """Records with valid p, q, u and every other feature drawn to hit NaN/inf paths (0, +-1e300, +-60, tiny).

    The traces are built without schema validation (features are deliberately out
    of range); the EvalData has small chunks so that several work items exist.
    """
    rng = np.random.default_rng(seed)
    special = np.array([0.0, -0.0, 1e-12, -1e-12, 1e300, -1e300, 60.0, -60.0, 1.0, 0.5])
    cols = {}
    for f in FEATURES:
        v = rng.normal(0, 3, n)
        idx = rng.random(n) < 0.25
        v[idx] = rng.choice(special, int(idx.sum()))
        cols[f] = v
    cols["draft_prob"] = rng.uniform(0.01, 1.0, n)
    cols["target_prob"] = np.where(rng.random(n) < 0.1, 0.0, rng.uniform(0.0, 1.0, n))
    cols["rand_value"] = rng.random(n)
    cols["baseline_accepts"] = cols["rand_value"] < np.minimum(1.0, cols["target_prob"] / cols["draft_prob"])
    traces = Traces(cols, source="stress")
    X = np.stack([cols[f] for f in FEATURES]) if n else np.zeros((len(FEATURES), 0))
    data = EvalData(X, np.minimum(1.0, cols["target_prob"] / cols["draft_prob"]), cols["rand_value"],
                    cols["baseline_accepts"], FEATURES, "stress", bounds=chunk_bounds(n, chunk=chunk))
    return traces, data


def random_trees(count: int, seed: int, features=FEATURES, min_depth: int = 1, max_depth: int = 6):
    pset = build_pset(features)
    random.seed(seed)
    return [gp.PrimitiveTree(gp.genHalfAndHalf(pset, min_depth, max_depth)) for _ in range(count)]


def assert_metrics_close(got, want, what=""):
    g, w = got.to_dict(), want.to_dict()
    assert g.keys() == w.keys()
    for key in w:
        if key in ("false_accepts", "false_rejects", "n_invalid", "tokens"):
            assert g[key] == w[key], (what, key)
        else:
            assert g[key] == pytest.approx(w[key], rel=1e-12, abs=1e-12), (what, key)


def test_random_programs_match_numpy_reference_including_nan_and_inf():
    traces, data = stress_traces(2 * 700 + 333, seed=1)
    cols = {f: traces[f] for f in FEATURES}
    full_X = np.ascontiguousarray(np.stack([cols[f] for f in FEATURES]))
    nonfinite = 0
    for tree in random_trees(150, seed=5):
        nodes = from_tree(tree)
        want_tau = evaluate_numpy(nodes, cols, data.n)
        program = compile_tree(tree)
        got_tau = thresholds(program, data)
        assert_same_floats(got_tau, want_tau, err_msg=str(tree), branch_flips=data.n // 500)
        nonfinite += int((~np.isfinite(got_tau)).any())
        got = evaluate(program, data)
        assert_metrics_close(got, reference_metrics(want_tau, traces), str(tree))
        ref_counts = score_program(program.ops, program.args, program.consts, program.stack_size, full_X,
                                   data.r, data.u, data.b)
        assert_metrics_close(got, metrics_from_counts(ref_counts, data.n), str(tree))
    assert nonfinite > 10  # the data really exercises the NaN/inf paths


@pytest.mark.parametrize("n", [0, 1, 2, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 17, 700, 701, 1399])
def test_edge_sizes(n):
    traces, data = stress_traces(n, seed=n)
    cols = {f: traces[f] for f in FEATURES}
    texts = ["if_gt(draft_prob, target_prob, div(target_prob, draft_prob), 1.0)", "0.25", "overlap",
             "log(exp(add(position, mul(2.0, 3.0))))"]
    for text in texts:
        nodes = parse(text)
        tau = evaluate_numpy(nodes, cols, n)
        program = compile_expression(text)
        assert_same_floats(thresholds(program, data), tau)
        got = evaluate(program, data)
        if n == 0:
            assert got.records == 0 and got.acceptance_rate == 0.0
        else:
            assert_metrics_close(got, reference_metrics(tau, traces), text)
    counts = PopulationEvaluator(data).evaluate(texts)
    assert counts == [evaluate(compile_expression(t), data) for t in texts]


def test_population_equals_single_programs_exactly():
    _, data = stress_traces(2500, seed=2)
    trees = random_trees(120, seed=9)
    scorer = PopulationEvaluator(data, cache_size=0)
    batch = scorer.evaluate(trees)
    single = [evaluate(compile_tree(t), data) for t in trees]
    assert batch == single  # same kernel, same chunks: equal bit for bit
    assert scorer.stats.calls == 1


def test_baseline_accepts_given_or_counted_give_the_same_counts():
    """The split's baseline-accept count (false rejects start from it) is the same whether passed or counted."""
    _, data = stress_traces(1800, seed=4)
    programs = [compile_tree(t) for t in random_trees(20, seed=5)]
    packed = pack([lower(p.ops, p.args, p.consts, data.feature_rows) for p in programs])
    given = score_packed(packed, data.X, data.r, data.u, data.bounds, baseline=data.baseline)
    counted = score_packed(packed, data.X, data.r, data.u, data.bounds)
    assert data.baseline == int(np.count_nonzero(data.b)) > 0
    assert np.array_equal(given, counted)
    assert np.array_equal(given, score_counts(programs, data))


def test_results_do_not_depend_on_the_thread_count(monkeypatch):
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs at least two Numba threads")
    _, data = stress_traces(3000, seed=3, chunk=500)
    trees = random_trees(60, seed=4)
    rule = get_rule("entropy_aware")
    tau = thresholds(rule, data)
    before = numba.get_num_threads()
    results = {}
    try:
        for threads, small in ((1, 30e-6), (2, 30e-6), (2, 0.0)):
            numba.set_num_threads(threads)
            monkeypatch.setattr(SCHEDULER, "small", small)  # 0: even tiny work runs on both threads
            monkeypatch.setattr(SCHEDULER, "large", small)
            results[threads, small] = (evaluate_population(trees, data), evaluate(rule, data),
                                       thresholds(rule, data).tobytes(), evaluate_thresholds(tau, data))
    finally:
        numba.set_num_threads(before)
    assert results[1, 30e-6] == results[2, 30e-6] == results[2, 0.0]


def test_duplicates_are_scored_once():
    _, data = stress_traces(900, seed=4)
    pset = build_pset(FEATURES)
    text = "min(1.0, div(target_prob, draft_prob))"
    tree = gp.PrimitiveTree.from_string(text, pset)
    individuals = [tree, text, parse(text), gp.PrimitiveTree.from_string(text, pset), "add(draft_prob, 1.0)",
                   get_rule("standard_rejection")]
    scorer = PopulationEvaluator(data)
    got = scorer.evaluate(individuals)
    assert scorer.stats.scored == 2 and scorer.stats.individuals == 6
    assert got[0] == got[1] == got[2] == got[3] == got[5] == evaluate(compile_expression(text), data)
    again = scorer.evaluate([text, "add(draft_prob, 1.0)"])  # remembered across calls
    assert scorer.stats.scored == 2 and scorer.stats.cache_hits == 2 and again == [got[0], got[4]]


def test_built_in_rules_use_the_fused_path_and_match_the_reference(independent_traces):
    data = EvalData.from_traces(Traces(dict(independent_traces.columns), independent_traces.source))
    # rules reading optional columns the seed model lacks (published rules) are left out
    names = [n for n in rule_names() if all(c in data.available for c in get_rule(n).columns_needed)]
    assert "standard_rejection" in names and len(names) >= 7
    fused = evaluate_population([get_rule(n) for n in names], data)
    for name, m in zip(names, fused):
        rule = get_rule(name)
        assert m == evaluate(rule, data)
        assert_metrics_close(m, reference_metrics(thresholds(rule, data), independent_traces), name)


def test_lowering_folds_constants_and_shares_subtrees():
    rows = list(range(len(FEATURES)))
    shared = "add(log(div(target_prob, draft_prob)), log(div(target_prob, draft_prob)))"
    lo = lower(*_arrays(shared), rows)
    assert lo.instructions == 3 and lo.nodes == 9  # div and log once, then add
    folded = lower(*_arrays("mul(draft_prob, exp(add(1.0, 2.0)))"), rows)
    assert folded.instructions == 1 and folded.consts.size == 1
    assert folded.consts[0] == np.exp(3.0)
    leaf = lower(*_arrays("target_prob"), rows)
    assert leaf.instructions == 0 and leaf.result == -FEATURES.index("target_prob") - 1
    arity = {p.opcode: p.arity for p in PRIMITIVES}
    for tree in random_trees(100, seed=8):  # no instruction writes a row it reads (keeps loops vectorised)
        program = compile_tree(tree)
        code = lower(program.ops, program.args, program.consts, rows).code.reshape(-1, 6)
        for op, dst, *opnds in code.tolist():
            assert dst not in opnds[:arity[op]], str(tree)


def _arrays(text):
    p = compile_expression(text)
    return p.ops, p.args, p.consts


def test_missing_feature_is_an_input_error(independent_traces):
    data = EvalData.from_traces(Traces(dict(independent_traces.columns), independent_traces.source))
    with pytest.raises(InputError, match="needs column 'overlap'"):
        evaluate_population(["add(overlap, 1.0)"], data)
    with pytest.raises(InputError, match="needs column 'overlap'"):
        evaluate(compile_expression("overlap"), data)
    with pytest.raises(InputError, match="needs column 'overlap'"):
        score_counts([compile_expression("overlap")], data)


def test_compact_rows_and_shared_columns(independent_traces):
    traces = Traces(dict(independent_traces.columns), independent_traces.source)
    frame = traces.to_frame()
    data = EvalData.from_traces(traces)
    assert data.X.shape == (6, traces.n)  # only the available features are stored
    assert np.shares_memory(traces["draft_prob"], data.X) and traces["rand_value"] is data.u
    assert data.u.base is None and data.b.base is None  # no view keeps a DataFrame block alive
    np.testing.assert_array_equal(traces["draft_prob"], frame["draft_prob"].to_numpy())
    assert data.feature("target_entropy") is not None and data.nbytes() <= 66 * traces.n + 64
    with pytest.raises(KeyError):
        data.feature("overlap")
    with pytest.raises(ValueError, match="baseline_accepts, row 3"):
        b = data.b.copy()
        b[3] = not b[3]
        EvalData(data.X, data.r, data.u, b, data.available)


def test_chunks_start_at_speculation_blocks():
    depth = np.tile(np.arange(5), 400)[:1997].astype(float)
    bounds = chunk_bounds(depth.size, depth, chunk=333)
    assert bounds[0] == 0 and bounds[-1] == depth.size and np.all(np.diff(bounds) > 0)
    assert np.all(depth[bounds[:-1]] == 0)
    assert chunk_bounds(0).tolist() == [0] and chunk_bounds(5, chunk=2).tolist() == [0, 2, 4, 5]


def test_seed_fitness_parameters_pass_through(independent_traces):
    data = EvalData.from_traces(Traces(dict(independent_traces.columns), independent_traces.source))
    custom = AcceptanceQualityFitness(false_accept_weight=1.0, quality_floor=0.5)
    rule = get_rule("ratio_floor_0.3")
    assert evaluate_population([rule], data, custom)[0] == evaluate(rule, data, custom)
    assert evaluate(rule, data, custom).fitness != evaluate(rule, data).fitness


def test_generated_seed_data_population_run(independent_traces):
    """A DEAP population over the seed features, as the evolution loop scores it."""
    frame = generate_split(30, 11)
    traces = Traces.from_frame(pd.DataFrame(frame))
    data = EvalData.from_traces(traces)
    trees = random_trees(200, seed=21, features=FEATURES[:6], min_depth=2, max_depth=6)
    scorer = PopulationEvaluator(data)
    got = scorer.evaluate(trees)
    distinct = {to_string(from_tree(t)) for t in trees}
    assert scorer.stats.scored == len(distinct)
    assert scorer.stats.node_evaluations == sum(len(parse(k)) for k in distinct) * data.n
    for tree, m in list(zip(trees, got))[::17]:
        tau = program_thresholds(*_full(compile_tree(tree)), np.ascontiguousarray(
            np.vstack([data.X, np.full((4, data.n), np.nan)])))
        assert_metrics_close(m, reference_metrics(tau, traces), str(tree))


def _full(program):
    return program.ops, program.args, program.consts, program.stack_size


def test_derived_rows_give_identical_results(monkeypatch):
    _, data = stress_traces(1500, seed=6)
    texts = ["add(log(draft_prob), exp(position))", "mul(log(draft_prob), log(overlap))",
             "exp(div(target_prob, draft_prob))", "sqrt(log(target_entropy))"]
    plain = PopulationEvaluator(data, derive=False).evaluate(texts)
    scorer = PopulationEvaluator(data)
    assert scorer.evaluate(texts) == plain == [evaluate(compile_expression(t), data) for t in texts]
    assert data._derived_count == 4  # log(draft_prob), exp(position), log(overlap), log(target_entropy)
    lo = lower(*_arrays(texts[1]), data.feature_rows, data._derived_map)
    assert lo.instructions == 1  # only the mul runs; both logs are precomputed rows
    import evolve.eval.evaluator as ev
    _, small = stress_traces(1500, seed=6)
    monkeypatch.setattr(ev, "DERIVED_BUDGET_BYTES", 8 * 1500 * 2)  # room for two rows only
    assert PopulationEvaluator(small).evaluate(texts) == plain and small._derived_count == 2


@pytest.mark.slow
def test_perf_harness_smoke(tmp_path):
    """`benchmark.py perf` end to end with tiny sizes: every key is written (no timing is asserted)."""
    import json
    from click.testing import CliRunner
    from evolve.cli.perf import perf
    from evolve.perf.command import REQUIRED_KEYS
    out = tmp_path / "perf.json"
    result = CliRunner().invoke(perf, ["--output", str(out), "--data", str(tmp_path / "none"), "--programs", "12",
                                       "--population", "12", "--generations", "1", "--sizes", "1500,3000",
                                       "--generator-tokens", "3000"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert set(REQUIRED_KEYS) <= set(report)
    assert report["cores"] >= 1 and [p["tokens"] for p in report["scaling"]] == [1500, 3000]
    assert report["details"]["gp"]["metrics_disagreeing_with_deap"] == 0
    assert report["rule_tokens_per_s"] > 0 and report["details"]["scaling"]["data_bytes_per_token"] > 0
    assert "standard_rejection tokens/s" in result.output
    bad = CliRunner().invoke(perf, ["--output", str(tmp_path / "x.json"), "--sizes", "10,abc"])
    assert bad.exit_code == 2 and "'--sizes'" in bad.output and "'abc'" in bad.output
    assert not (tmp_path / "x.json").exists()

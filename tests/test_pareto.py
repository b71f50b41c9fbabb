"""evolve.commands.pareto.command: hypervolume, best_at_budget, lossless check, oracle bound, and `benchmark.py pareto`."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import benchmark
from evolve.traces.synth import generate
from evolve.errors import InputError
from evolve.traces.io import load_split
from evolve.report.pareto.curves import Curve, DEFAULT_BUDGETS, RulePoint, finish_curve, check_budgets
from evolve.report.pareto.curves import best_at_budget, budget_key, hypervolume, nondominated
from evolve.commands.pareto.oracle import block_matrix
from evolve.commands.pareto.command import family_curve, lossless_violation
from evolve.commands.pareto.oracle import oracle_bound
from evolve.commands.pareto.oracle import _oracle_policy
from evolve.eval.evaluator import EvalData, evaluate
from evolve.eval.objectives import OBJECTIVES
from heuristics import published as P
from heuristics.contract import STANDARD
from heuristics.registry import get_rule


@pytest.fixture(scope="module")
def dataset(vocab_dataset) -> Path:
    """The shared vocab-model dataset of conftest (random seed 5, 40 train sequences)."""
    return vocab_dataset


@pytest.fixture(scope="module")
def test_split(dataset) -> EvalData:
    return EvalData.from_traces(load_split(dataset, "test"))


def _run_dir(path: Path, expressions: list[str]) -> Path:
    path.mkdir(parents=True)
    front = [{"expression": e, "size": 1} for e in expressions]
    (path / "front.json").write_text(json.dumps({"objectives": ["tokens_per_call", "tv_per_token", "size"],
                                                 "front": front}))
    return path


def run(*args):
    return CliRunner().invoke(benchmark.cli, ["pareto", *[str(a) for a in args]])


# --- curve arithmetic -----------------------------------------------------------------------------

def test_hypervolume_by_hand():
    # staircase: 1 extra token over [0, 0.01), 2 over [0.01, 0.02]
    assert hypervolume([(0.0, 2.0), (0.01, 3.0)], 0.02) == pytest.approx(0.01 * 1 + 0.01 * 2)
    # a dominated point, a point beyond the reference TV and one not above 1 token add nothing
    pts = [(0.0, 2.0), (0.01, 3.0), (0.015, 2.5), (0.03, 9.0), (0.005, 1.0)]
    assert hypervolume(pts, 0.02) == pytest.approx(0.03)
    # no point at TV 0: nothing is dominated left of the first point
    assert hypervolume([(0.005, 3.0)], 0.02) == pytest.approx(0.015 * 2)
    assert hypervolume([], 0.05) == 0.0
    assert hypervolume([(0.0, 4.0)], 0.05, tokens_ref=2.0) == pytest.approx(0.1)


def test_nondominated_and_best_at_budget():
    assert nondominated([(0.02, 3.0), (0.0, 2.0), (0.01, 1.5), (0.02, 2.9), (0.0, 2.0)]) == \
        [(0.0, 2.0), (0.02, 3.0)]
    rules = [RulePoint("a", 0.0, 3.0, lossless=True), RulePoint("b", 0.0, 3.5, lossless=False),
             RulePoint("c", 0.004, 3.6), RulePoint("d", 0.011, 3.9)]
    assert best_at_budget(rules, 0.0).label == "a"  # b has TV 0 but fails the exact check
    assert best_at_budget(rules, 0.005).label == "c"
    assert best_at_budget(rules, 0.01).label == "c"
    assert best_at_budget(rules, 0.011).label == "d"
    assert best_at_budget(rules[1:], 0.0) is None
    curve = finish_curve(Curve("x", "family", "", None, rules), (0.0, 0.005, 0.01, 0.02))
    assert curve.best_at_budget == {"0": 3.0, "0.005": 3.6, "0.01": 3.6, "0.02": 3.9}
    assert curve.best_rule["0"] == "a"


def test_check_budgets():
    assert check_budgets((0.01, 0, 0.05, 0.01)) == (0.0, 0.01, 0.05)
    for bad, needle in ((["a"], "not a number"), ([-0.1], "[0, 1]"), ([2], "[0, 1]"), ([], "no budget"),
                        ([float("nan")], "[0, 1]"), ([0.1, None], "not a number")):
        with pytest.raises(InputError, match=needle) as err:
            check_budgets(bad)
        assert err.value.param == "budgets"
    assert [budget_key(b) for b in DEFAULT_BUDGETS] == ["0", "0.005", "0.01", "0.02", "0.05"]


# --- lossless check and the bound -----------------------------------------------------------------

def test_lossless_check_passes_standard_and_flags_a_lossy_rule(test_split):
    assert lossless_violation(P.standard(), test_split) is None
    assert lossless_violation(P.fuzzy_sd(0.0), test_split) is None
    first = int(np.flatnonzero(test_split.r < 1.0)[0])  # lenient raises tau exactly where p < q
    assert lossless_violation(P.lenient(0.5), test_split) == first
    # lossy only at depths >= gamma: zero TV per token with gamma 3, but not lossless
    from heuristics.contract import Rule
    sneaky = Rule("sneaky", expression=f"if_gt(draft_index, 3.5, 1.0, {STANDARD})")
    m = evaluate(sneaky, test_split, gamma=3)
    assert m.tv_per_token == 0.0
    bad = lossless_violation(sneaky, test_split)
    assert bad is not None and test_split.depth[bad] == 4 and test_split.r[bad] < 1.0


def test_oracle_policy_matches_brute_force_and_bounds_every_family(test_split):
    gamma = 5
    R, valid = block_matrix(test_split, gamma)
    assert valid.all() and R.shape == (int((test_split.depth == 0).sum()), gamma)
    lam = 2.2
    T, D, V = _oracle_policy(R, valid, lam)
    best = np.full(R.shape[0], -np.inf)
    for subset in itertools.product([False, True], repeat=gamma):  # every tau_k in {r_k, 1}
        tau = np.where(np.array(subset)[None, :], 1.0, R)
        reach, tok, dmg = np.ones(len(R)), np.ones(len(R)), np.zeros(len(R))
        for k in range(gamma):
            dmg += reach * (tau[:, k] - R[:, k])
            reach = reach * tau[:, k]
            tok += reach
        best = np.maximum(best, tok - lam * dmg)
    np.testing.assert_allclose(T - lam * D, best, rtol=1e-12)
    np.testing.assert_allclose(V, best, rtol=1e-12)

    budgets = (0.0, 0.01, 0.05)
    bound = oracle_bound(test_split, gamma, budgets)
    std = evaluate(P.standard(), test_split, gamma=gamma)
    assert bound["upper_bound"]["0"] == pytest.approx(std.tokens_per_call, rel=1e-12)
    assert bound["points"][0] == pytest.approx([0.0, std.tokens_per_call], rel=1e-12)
    for name in ("ears", "fuzzy_sd", "lenient"):
        curve, _ = family_curve(P.FAMILIES[name], test_split, gamma, budgets)
        for b in budgets:
            got = curve.best_at_budget[budget_key(b)]
            assert got is None or got <= bound["upper_bound"][budget_key(b)] + 1e-12
        assert curve.hypervolume <= bound["hypervolume"] + 1e-12


def test_family_curve_on_a_split_without_the_column(tmp_path):
    gen = generate.generate_dataset("independent", 1, 5)
    generate.write(gen, tmp_path)
    data = EvalData.from_traces(load_split(tmp_path, "test"))
    curve, note = family_curve(P.FAMILIES["fuzzy_sd"], data, 5, (0.0,))
    assert curve is None and "fuzzy_sd" in note and "'overlap'" in note


# --- the command ------------------------------------------------------------------------------

def test_pareto_json(dataset, tmp_path, test_split):
    fuzzy = P.fuzzy_sd(0.2).expression
    sneaky = f"if_gt(draft_index, 3.5, 1.0, {STANDARD})"
    runs = [_run_dir(tmp_path / "run1", [STANDARD, fuzzy]), _run_dir(tmp_path / "run2", [fuzzy, "1.0"])]
    res = run("--data", dataset, "--run", runs[0], "--run", runs[1], "--format", "json", "--no-plot")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["budgets"] == [0.0, 0.005, 0.01, 0.02, 0.05] and doc["gamma"] == 5 and doc["split"] == "test"
    assert list(doc["curves"]) == list(P.FAMILIES) + ["evolved"]
    for name, c in doc["curves"].items():
        assert {"points", "best_at_budget", "hypervolume"} <= set(c)
        assert list(c["best_at_budget"]) == ["0", "0.005", "0.01", "0.02", "0.05"]
        assert all(len(p) == 2 for p in c["points"]) and c["hypervolume"] >= 0
    evolved = doc["curves"]["evolved"]
    assert len(evolved["rules"]) == 3  # duplicates across runs are scored once
    std = evaluate(P.standard(), test_split, gamma=5)
    assert evolved["best_at_budget"]["0"] == pytest.approx(std.tokens_per_call)
    assert doc["curves"]["standard"]["best_at_budget"]["0.05"] == pytest.approx(std.tokens_per_call)
    fz = evaluate(P.fuzzy_sd(0.2), test_split, gamma=5)
    for key, value in evolved["best_at_budget"].items():
        if key != "0" and fz.tv_per_token <= float(key):
            assert value == pytest.approx(max(fz.tokens_per_call, std.tokens_per_call))
    assert doc["curves"]["typical_acceptance"]["best_at_budget"]["0"] is None  # never lossless
    assert set(doc["verdict"]) == {"margins", "beats_all_above_0", "largest_hypervolume",
                                   "largest_hypervolume_of_all"}
    assert doc["reference_point"] == {"tv_per_token": 0.05, "tokens_per_call": 1.0}
    # the best published point at a budget is named as a rule: scored alone it gives the family's best value
    margin = doc["verdict"]["margins"]["0.01"]
    member = get_rule(margin["best_family_rule"])
    assert margin["best_family_rule"].startswith(margin["best_family"] + ":")
    scored = evaluate(member, test_split, gamma=5)
    assert scored.tokens_per_call == pytest.approx(margin["best_family_value"]) and scored.tv_per_token <= 0.01

    # a rule with zero TV per token that is not lossless does not count at budget 0
    only = _run_dir(tmp_path / "run3", [sneaky])
    res = run("--data", dataset, "--run", only, "--gamma", "3", "--format", "json", "--no-plot")
    assert res.exit_code == 0, res.output
    ev = json.loads(res.stdout)["curves"]["evolved"]
    assert ev["rules"][0]["tv_per_token"] == 0.0 and ev["rules"][0]["lossless"] is False
    assert ev["best_at_budget"]["0"] is None and ev["best_at_budget"]["0.005"] is not None


def test_pareto_table_output_and_plot(dataset, tmp_path):
    run_dir = _run_dir(tmp_path / "run", [STANDARD, P.fuzzy_sd(0.1).expression])
    out = tmp_path / "pareto.txt"
    res = run("--data", dataset, "--run", run_dir, "--output", out, "--budgets", "0,0.01")
    assert res.exit_code == 0, res.output
    text = out.read_text()
    for word in ["standard", "fuzzy_sd", "lenient", "evolved", "oracle bound", "hypervolume", "TV<=0.01", "✓",
                 "largest hypervolume", "best published point at each budget (a rule name for --rule): 0.01: "]:
        assert word in text
    png = tmp_path / "pareto.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # without a run there is no evolved curve, and a note says so
    res = run("--data", dataset, "--no-plot")
    assert res.exit_code == 0 and "evolved" not in res.stdout.split("oracle bound")[0]
    assert "no --run given" in res.stdout


@pytest.mark.parametrize("args, needle", [
    (["--budgets", "0,x"], "--budgets"),
    (["--budgets", "-0.01"], "--budgets"),
    (["--gamma", "0"], "--gamma"),
    (["--gamma", "9"], "gamma (the draft length) is larger than the block length"),
    (["--gamma", "two"], "--gamma"),
    (["--split", "holdout"], "--split"),
    (["--format", "xml"], "--format"),
    (["--run", "no/such/run"], "no such run directory"),
])
def test_bad_options_one_line_exit_2(args, needle, dataset, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run("--data", dataset, *args, "--no-plot")
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], res.output
    assert not any(tmp_path.iterdir())


def test_bad_run_files_and_data(dataset, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "front.json").write_text('{"front": [{"expression": "__import__(1)"}]}')
    res = run("--data", dataset, "--run", bad, "--no-plot")
    assert res.exit_code == 2 and res.output.startswith("error: ") and "front.json" in res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run("--data", dataset, "--run", empty, "--no-plot")
    assert res.exit_code == 2 and "no front.json" in res.output
    seed = tmp_path / "seeddata"
    generate.write(generate.generate_dataset("independent", 1, 5), seed)
    res = run("--data", seed, "--no-plot")
    assert res.exit_code == 2 and "draft_index" in res.output
    res = run("--data", dataset, "--output", tmp_path / "x.png")
    assert res.exit_code == 2 and "--output" in res.output


# --- NSGA-II runs (python -m evolve run --fitness pareto) -----------------------------------------

def _dominates(a, b) -> bool:
    """(tokens up, tv down, size down): a dominates b."""
    ge = a[0] >= b[0] and a[1] <= b[1] and a[2] <= b[2]
    return ge and (a[0] > b[0] or a[1] < b[1] or a[2] < b[2])


def test_tiny_nsga2_run_writes_its_front(dataset, tmp_path):
    from evolve.cli.evolve import cli as evolve_cli
    from evolve.gp.compiler import compile_expression
    from evolve.eval.objectives import speed_at_tv
    args = ["run", "--data", dataset, "--out", tmp_path / "out", "--population", 24, "--generations", 3,
            "--seed", 1, "--fitness", "pareto", "--warm-start", "--no-progress"]
    res = CliRunner().invoke(evolve_cli, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    assert "front:" in res.stderr and (run_dir / "front.json").is_file()
    doc = json.loads((run_dir / "front.json").read_text())
    assert [o["name"] for o in doc["objectives"]] == ["tokens_per_call", "tv_per_token", "size"]
    assert doc["gamma"] == 5 and doc["tv_budget"] == 0.01 and doc["tv_cap"] == 0.05
    front = doc["front"]
    assert front and len({m["expression"] for m in front}) == len(front)
    train = EvalData.from_traces(load_split(dataset, "train"))
    valid = EvalData.from_traces(load_split(dataset, "valid"))
    objs = []
    for m in front:
        got = evaluate(compile_expression(m["expression"]), train, gamma=5)
        assert m["objectives"]["train"]["tokens_per_call"] == pytest.approx(got.tokens_per_call, rel=1e-12)
        assert m["objectives"]["train"]["tv_per_token"] == pytest.approx(got.tv_per_token, rel=1e-12, abs=1e-15)
        tv = m["objectives"]["train"]["tv_per_token"]
        speed = m["objectives"]["train"]["tokens_per_call"] - 10.0 * max(0.0, tv - 0.05) / 0.05
        objs.append((speed, tv, m["size"]))
    # mutually non-dominated on train, ascending TV
    assert not any(_dominates(a, b) for a in objs for b in objs if a is not b)
    assert [o[1] for o in objs] == sorted(o[1] for o in objs)
    # standard rejection was seeded: the lossless corner of the front is at least as fast
    std = evaluate(P.standard(), train, gamma=5)
    assert max(o[0] for o in objs if o[1] == 0.0) >= std.tokens_per_call - 1e-12
    # champion: the front member with the best speed_at_tv on valid (budget 0.01)
    best = max(front, key=lambda m: (m["speed_at_tv"]["valid"], -m["size"]))
    assert doc["champion"] == best["expression"]
    champ = json.loads((run_dir / "champion.json").read_text())
    assert champ["expression"] == best["expression"] and champ["objective"] == "pareto" and champ["kind"] == "threshold"
    m = evaluate(compile_expression(best["expression"]), valid, gamma=5)
    assert best["speed_at_tv"]["valid"] == pytest.approx(speed_at_tv(m, 0.01), rel=1e-12)
    # the same seed gives the same front; the comparison reads it as the evolved curve
    res2 = CliRunner().invoke(evolve_cli, [str(a) for a in args])
    again = json.loads((Path(res2.stdout.strip().splitlines()[-1]) / "front.json").read_text())
    assert [m["expression"] for m in again["front"]] == [m["expression"] for m in front]
    res = run("--data", dataset, "--run", run_dir, "--format", "json", "--no-plot")
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)["curves"]["evolved"]["rules"]) == len(front)


def test_pareto_search_selection_helpers():
    import random
    from evolve.gp.compiler import parse, to_tree
    from evolve.gp.primitives import FEATURES, build_pset
    from evolve.search.individuals import deap_types as _deap_types
    from evolve.search.operators import dcd_tournament, distinct_first, first_front
    pset = build_pset(FEATURES)
    _, Ind = _deap_types(OBJECTIVES["pareto"])

    def ind(expr, values, crowding=0.0):
        i = Ind(to_tree(parse(expr), pset))
        i.fitness.values = values
        i.fitness.crowding_dist = crowding
        return i

    a = ind("target_prob", (3.0, 0.0, 1.0), 0.5)
    b = ind("draft_prob", (2.0, 0.0, 1.0), 9.0)     # dominated by a (whatever its crowding distance)
    c = ind("overlap", (4.0, 0.01, 1.0), 1.0)       # trades TV for speed: not dominated by a
    a2 = ind("target_prob", (3.0, 0.0, 1.0))        # same expression as a
    assert [str(x) for x in first_front([a, b, c, a2])] == ["target_prob", "overlap"]
    assert distinct_first([a, a2, b, c]) == [a, b, c, a2]
    pop = [a, b, c]
    random.seed(5)
    picks = dcd_tournament(pop, 300)
    random.seed(5)
    expected = []
    for _ in range(300):  # dominance first, then the larger crowding distance, ties to the first drawn
        x, y = random.choice(pop), random.choice(pop)
        if {x.fitness.values[0], y.fitness.values[0]} == {3.0, 2.0}:
            expected.append(a)
        elif x is y:
            expected.append(x)
        else:
            expected.append(max((x, y), key=lambda i: i.fitness.crowding_dist))
    assert picks == expected
    assert b in picks and all(p is b for p in picks if p is b)  # b wins only against itself


def test_show_never_hands_a_large_or_awkward_expression_to_sympy_unguarded(tmp_path):
    import time
    from evolve.cli.evolve import SIMPLIFY_MAX_NODES, _with_time_limit
    from evolve.cli.evolve import cli as evolve_cli
    assert _with_time_limit(lambda: "ok", 5) == "ok"
    assert _with_time_limit(lambda: float("x"), 5) is None  # a ValueError (sympy raises them) is caught
    assert _with_time_limit(lambda: time.sleep(30), 1) is None  # SIGALRM ends a runaway computation
    # a champion far above the limit: shown at once, sympy not attempted
    big = "add(target_prob, " * 60 + "draft_prob" + ")" * 60
    doc = {"format": "specdec-evolve champion", "format_version": 1, "name": "big", "description": "",
           "expression": big, "primitive_set_version": 1, "features": ["draft_prob", "target_prob"],
           "fitness": "pareto", "metrics": {"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}},
           "provenance": {}}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc))
    res = CliRunner().invoke(evolve_cli, ["show", str(path)])
    assert res.exit_code == 0, res.output
    assert f"not attempted: 121 nodes > {SIMPLIFY_MAX_NODES}" in res.stdout


def test_the_largest_hypervolume_line_agrees_with_the_table(dataset):
    """The line names the largest hypervolume of the curves above the first dashed line and, when a reference row
    (block verification, learned, relaxed block verification) is larger, that row too: never a name while larger
    rows stand in the same table."""
    res = run("--data", dataset, "--no-plot", "--no-learned")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    table = {}
    for row in lines[next(i for i, x in enumerate(lines) if x.startswith("curve ")):]:
        if not row.strip():
            break
        cells = row.split()
        if len(cells) > 2 and cells[1].isdigit():
            table[cells[0]] = float(cells[-1])
    start = next(i for i, x in enumerate(lines) if x.startswith("largest hypervolume"))
    line = " ".join(lines[start:start + 2])  # the line may be wrapped to 100 columns
    best = max(table, key=table.get)
    assert f" {best} (" in line
    as_json = json.loads(run("--data", dataset, "--no-plot", "--no-learned", "--format", "json").stdout)
    assert as_json["verdict"]["largest_hypervolume_of_all"] == best

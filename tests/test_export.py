"""Exported rules (`python -m evolve export`): standalone modules that agree with the Numba evaluator.

The thresholds of the exported numpy and torch modules are compared in float64 with the
evaluator's (:func:`evolve.eval.evaluator.thresholds`, then NaN/inf -> 0 and clamped to
[0, 1]) on 100,000 random rows holding NaN, +-inf, zeros, values near the protected
operators' cut-offs and near exp's cap, for every registered expression rule, hand-written
expressions and random trees that together use every primitive and every feature.
"""
from __future__ import annotations

import ast
import random

import numpy as np
import pytest
from click.testing import CliRunner

from helpers import assert_same_floats
from evolve.verification.tokenwise import standard_threshold
from evolve.cli.evolve import cli
from evolve.eval.evaluator import EvalData, thresholds
from evolve.export.codegen import straight_line
from evolve.eval.relaxed_block import WEIGHT_FEATURES
from evolve.kinds.relaxation.eval_population import weight_thresholds
from evolve.export.exporter import TARGETS, resolve_rule
from evolve.kinds.threshold.export_layout import THRESHOLD_LAYOUT
from evolve.kinds.registry import KINDS
from evolve.kinds.relaxation import KIND as RELAXATION
from evolve.export.numpy_module import numpy_source
from evolve.export.torch_module import torch_source
from evolve.gp.compiler import compile_nodes, from_tree, parse, to_string
from evolve.gp.primitives import FEATURES, PRIMITIVES, build_pset
from heuristics.champions import Champion, save_champion
from heuristics.registry import rules

N = 100_000

HAND_WRITTEN = [
    "if_gt(log(div(target_prob, draft_prob)), exp(sub(draft_entropy, target_entropy)), sqrt(overlap), "
    "max(position, draft_index))",
    "min(exp(mul(target_entropy, 60.0)), log(sub(target_top_prob, draft_top_prob)))",
    "div(sqrt(sub(top_token_match, 0.5)), add(log(0.0), div(1.0, 0.0)))",
    "add(div(draft_prob, 0.0), exp(draft_prob))",
    "max(div(-0.0, target_prob), min(log(draft_prob), 1e-10))",
    "if_gt(target_prob, draft_prob, 1.0, div(target_prob, mul(draft_prob, 2.0)))",
    "mul(div(target_prob, draft_prob), draft_prob)",  # a repeated subexpression is computed once
    "0.7",
]


def _random_trees(count: int, seed: int) -> list[str]:
    from deap import gp

    pset = build_pset(FEATURES)
    random.seed(seed)
    return [to_string(from_tree(gp.PrimitiveTree(gp.genHalfAndHalf(pset, min_=2, max_=6)))) for _ in range(count)]


EXPRESSIONS = [r.expression for r in rules() if r.expression is not None] + HAND_WRITTEN + _random_trees(25, 4)


def _random_weight_trees(count: int, seed: int) -> list:
    """Random trees over the features a relaxation weight may read."""
    from deap import gp

    pset = build_pset(WEIGHT_FEATURES)
    random.seed(seed)
    return [gp.PrimitiveTree(gp.genHalfAndHalf(pset, min_=2, max_=5)) for _ in range(count)]


def test_every_primitive_and_feature_is_covered():
    nodes = [n for e in EXPRESSIONS for n in parse(e)]
    assert {p.name for p in PRIMITIVES} <= {n.value for n in nodes if n.node_type == "prim"}
    assert set(FEATURES) <= {n.value for n in nodes if n.node_type == "feature"}


@pytest.fixture(scope="module")
def rows() -> dict[str, np.ndarray]:
    """Every feature as float64 (N,): ordinary and awkward values mixed row by row."""
    rng = np.random.default_rng(12)
    cols = {}
    for f in FEATURES:
        kind = rng.integers(0, 10, N)
        sign = rng.choice([-1.0, 1.0], N)
        values = np.select(
            [kind == 0, kind == 1, kind == 2, kind == 3, kind == 4, kind == 5, kind == 6, kind == 7],
            [rng.uniform(-5, 5, N), sign * 10.0 ** rng.uniform(-12, -8, N), sign * 10.0 ** rng.uniform(0, 4, N),
             np.zeros(N), rng.uniform(45, 55, N), np.full(N, np.nan), np.full(N, np.inf), np.full(N, -np.inf)],
            rng.uniform(0, 1, N))
        cols[f] = values
    return cols


@pytest.fixture(scope="module")
def data(rows) -> EvalData:
    X = np.stack([rows[f] for f in FEATURES])
    with np.errstate(all="ignore"):
        r = standard_threshold(rows["target_prob"], rows["draft_prob"])
    u = np.full(N, 0.5)
    return EvalData(X, r, u, u < r, FEATURES, source="random rows", block_length=1)  # draft_index holds NaN


def _evaluator(expression: str, data: EvalData) -> np.ndarray:
    raw = thresholds(compile_nodes(parse(expression)), data)
    return np.where(np.isfinite(raw), np.clip(raw, 0.0, 1.0), 0.0)


def _load(text: str) -> dict:
    namespace: dict = {}
    exec(compile(text, "<exported>", "exec"), namespace)
    return namespace


def _imports(text: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
    return names


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_numpy_module_agrees_with_the_evaluator(expression, rows, data):
    text = numpy_source("rule", parse(expression), THRESHOLD_LAYOUT)
    assert _imports(text) == {"math", "numpy"}
    got = _load(text)["acceptance_threshold"](**rows)
    assert got.dtype == np.float64 and got.shape == (N,)
    assert_same_floats(got, _evaluator(expression, data), expression)


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_torch_module_agrees_with_the_evaluator(expression, rows, data):
    torch = pytest.importorskip("torch")
    text = torch_source("rule", parse(expression), THRESHOLD_LAYOUT)
    assert _imports(text) == {"math", "torch"}
    got = _load(text)["acceptance_threshold"](**{f: torch.from_numpy(v) for f, v in rows.items()})
    assert got.dtype == torch.float64 and tuple(got.shape) == (N,)
    assert_same_floats(got.numpy(), _evaluator(expression, data), expression)


# --- relaxation weights (kind relaxation): relaxation_weight and relaxed_target ------------------------

#: Rows of the relaxation agreement test.
N_WEIGHT = 10_000
WEIGHT_EXPRESSIONS = [
    "mul(0.1, overlap)",
    "if_gt(target_entropy, 2.0, 0.08, 0.02)",
    "sub(div(overlap, sub(draft_entropy, -0.87)), draft_index)",
    "min(exp(mul(target_entropy, 60.0)), log(sub(target_top_prob, draft_top_prob)))",
    "if_gt(sqrt(position), log(top_token_match), div(1.0, 0.0), max(draft_index, 0.3))",
    "0.05",
] + [to_string(from_tree(t)) for t in _random_weight_trees(10, 5)]


def _weight_rows(rows) -> tuple[dict, EvalData]:
    cols = {f: v[:N_WEIGHT] for f, v in rows.items()}
    X = np.stack([cols[f] for f in FEATURES])
    with np.errstate(all="ignore"):
        r = standard_threshold(cols["target_prob"], cols["draft_prob"])
    u = np.full(N_WEIGHT, 0.5)
    return cols, EvalData(X, r, u, u < r, FEATURES, source="random rows", block_length=1)


@pytest.mark.parametrize("target", ["numpy", "torch"])
@pytest.mark.parametrize("expression", WEIGHT_EXPRESSIONS)
def test_relaxation_module_agrees_with_the_evaluator(expression, target, rows):
    """The exported relaxation_weight equals the relaxation scorer's w (raw weights of
    evolve.kinds.relaxation.eval_population.weight_thresholds, NaN/inf -> 0, clamped to [0, 1]) on 10,000 rows."""
    if target == "torch":
        torch = pytest.importorskip("torch")
    cols, data = _weight_rows(rows)
    nodes = parse(expression, "weight", WEIGHT_FEATURES)
    text = TARGETS[target]("w", nodes, RELAXATION.hooks().export, "test")
    assert _imports(text) == {"math", target}
    module = _load(text)
    assert module["KIND"] == "relaxation" and "acceptance_threshold" not in module
    assert set(module["COLUMNS"]) <= set(WEIGHT_FEATURES)
    given = cols if target == "numpy" else {f: torch.from_numpy(v) for f, v in cols.items()}
    got = np.asarray(module["relaxation_weight"](**given))
    raw = weight_thresholds(compile_nodes(nodes), data)
    want = np.where(np.isfinite(raw), np.clip(raw, 0.0, 1.0), 0.0)
    assert got.dtype == np.float64 and got.shape == (N_WEIGHT,)
    assert_same_floats(got, want, expression)
    assert ((got >= 0.0) & (got <= 1.0)).all()


@pytest.mark.parametrize("target", ["numpy", "torch"])
def test_relaxed_target_is_the_mixture(target):
    if target == "torch":
        torch = pytest.importorskip("torch")
    module = _load(TARGETS[target]("w", parse("0.25"), RELAXATION.hooks().export, ""))
    rng = np.random.default_rng(2)
    p, q = rng.dirichlet(np.ones(6), 4), rng.dirichlet(np.ones(6), 4)
    w = np.array([0.0, 0.25, 0.5, 1.0])
    args = (p, q, w) if target == "numpy" else tuple(torch.from_numpy(a) for a in (p, q, w))
    got = np.asarray(module["relaxed_target"](*args))
    np.testing.assert_allclose(got, (1 - w[:, None]) * p + w[:, None] * q, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(got[0], p[0])  # w = 0: the target itself, bit for bit
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=0, atol=1e-12)


def test_threshold_and_relaxation_layouts_are_the_kinds_tables_entries():
    assert all(k.hooks().export.kind is k for k in KINDS.values()) and set(TARGETS) == {"numpy", "torch"}
    threshold = numpy_source("rule", parse("0.5"), THRESHOLD_LAYOUT)
    assert threshold == TARGETS["numpy"]("rule", parse("0.5"), THRESHOLD_LAYOUT, "")
    assert "def acceptance_threshold(" in threshold and "KIND =" not in threshold


def test_columns_broadcast_and_accept_bools_and_ints():
    module = _load(numpy_source("rule", parse("if_gt(top_token_match, 0.5, position, 0.25)"), THRESHOLD_LAYOUT))
    assert module["COLUMNS"] == ("position", "top_token_match")
    tau = module["acceptance_threshold"](top_token_match=np.array([True, False]), position=np.int64(1),
                                         target_prob=np.zeros((3, 1)))
    np.testing.assert_array_equal(tau, [[1.0, 0.25]] * 3)
    with pytest.raises(TypeError, match="needs the column 'position'"):
        module["acceptance_threshold"](top_token_match=1.0)
    const = _load(numpy_source("rule", parse("2.0"), THRESHOLD_LAYOUT))["acceptance_threshold"](draft_prob=np.ones(4))
    np.testing.assert_array_equal(const, np.ones(4))


def test_residual_distribution():
    module = _load(numpy_source("rule", parse("1.0"), THRESHOLD_LAYOUT))
    p = np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]])
    q = np.array([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5]])
    np.testing.assert_allclose(module["residual_distribution"](p, q, np.minimum(1, p / q)),
                               [[1.0, 0.0, 0.0], p[1]])  # second row: p == q, nothing missing: p itself


def test_straight_line_shares_subexpressions():
    line = straight_line(parse("add(div(target_prob, draft_prob), div(target_prob, draft_prob))"))
    assert [s.primitive for s in line.steps] == ["div", "add"] and line.features == ("draft_prob", "target_prob")


def test_a_deep_expression_exports():
    text = "0.5"
    for _ in range(3000):
        text = f"mul({text}, 1.0)"
    tau = _load(numpy_source("deep", parse(text), THRESHOLD_LAYOUT))["acceptance_threshold"](draft_prob=np.ones(2))
    np.testing.assert_array_equal(tau, [0.5, 0.5])


def _champion(directory) -> str:
    champ = Champion(name="exported", expression="min(1.0, div(add(target_prob, 0.01), draft_prob))",
                     description="test champion", features=("draft_prob", "target_prob"),
                     metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}})
    json_path, _ = save_champion(champ, directory)
    return str(json_path)


@pytest.mark.parametrize("target", ["numpy", "torch"])
def test_command_writes_a_standalone_module(tmp_path, target):
    if target == "torch":
        pytest.importorskip("torch")
    path = _champion(tmp_path / "champions")
    out = tmp_path / "rule_module.py"
    result = CliRunner().invoke(cli, ["export", path, "--to", target, "--output", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert _imports(text) == {"math", target}
    module = _load(text)
    assert module["RULE"] == "exported" and module["SOURCE"] == path
    p, q = np.array([0.1, 0.5]), np.array([0.2, 0.25])
    if target == "torch":
        import torch
        p, q = torch.from_numpy(p), torch.from_numpy(q)
    np.testing.assert_allclose(np.asarray(module["acceptance_threshold"](target_prob=p, draft_prob=q)),
                               [0.55, 1.0])


def test_command_by_name_to_stdout_and_errors(tmp_path):
    result = CliRunner().invoke(cli, ["export", "standard_rejection", "--to", "numpy"])
    assert result.exit_code == 0 and "EXPRESSION = 'min(1.0, div(target_prob, draft_prob))'" in result.stdout
    _champion(tmp_path)
    by_name = CliRunner().invoke(cli, ["export", "exported", "--to", "numpy", "--champions-dir", str(tmp_path)])
    assert by_name.exit_code == 0 and "RULE = 'exported'" in by_name.stdout
    unknown = CliRunner().invoke(cli, ["export", "no_such_rule", "--to", "numpy"])
    assert unknown.exit_code == 2 and "unknown rule 'no_such_rule'" in unknown.stderr
    missing = CliRunner().invoke(cli, ["export", str(tmp_path / "nope.json"), "--to", "numpy"])
    assert missing.exit_code == 2 and "no such champion file" in missing.stderr
    assert resolve_rule("standard_rejection")[1] == "registered rule standard_rejection"

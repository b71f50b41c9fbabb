"""Expressions: parsing, rendering, safety, and the interpreter against the numpy reference."""
from __future__ import annotations

import random

import numpy as np
import pytest
from deap import gp
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import assert_same_floats
from evolve.errors import InputError
from evolve.gp.compiler import (
    Node, compile_nodes, compile_tree, evaluate_numpy, from_tree, parse, simplify, to_string, to_tree,
)
from evolve.eval.fastpath.layouts import TILE as BLOCK
from evolve.eval.reference import program_thresholds
from evolve.gp.primitives import FEATURES, PRIMITIVES, build_pset

PRIM_NAMES = [p.name for p in PRIMITIVES]


def nodes_strategy(max_leaves: int = 12):
    leaf = st.one_of(
        st.sampled_from(FEATURES).map(lambda f: [Node("feature", f)]),
        st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: [Node("const", v)]),
    )

    def extend(children):
        return st.sampled_from(PRIMITIVES).flatmap(
            lambda p: st.lists(children, min_size=p.arity, max_size=p.arity).map(
                lambda args: [Node("prim", p.name)] + [n for a in args for n in a]))

    return st.recursive(leaf, extend, max_leaves=max_leaves)


@given(nodes_strategy())
@settings(max_examples=200, deadline=None)
def test_to_string_parse_round_trip(nodes):
    assert parse(to_string(nodes)) == nodes


def test_parse_deap_format():
    pset = build_pset(FEATURES)
    random.seed(3)
    for _ in range(50):
        tree = gp.PrimitiveTree(gp.genHalfAndHalf(pset, 1, 5))
        nodes = parse(str(tree))
        assert nodes == from_tree(tree)
        assert str(to_tree(nodes, pset)) == str(tree)


@pytest.mark.parametrize("text,fragment", [
    ("__import__('os').system('true')", "unknown name '__import__' at offset 0"),
    ("add(draft_prob, '1')", "unexpected character \"'\" at offset 16"),
    ("lambda: 1", "unknown name 'lambda'"),
    ("draft_prob.real", "unexpected character '.'"),
    ("add(draft_prob)", "expected ','"),
    ("add(draft_prob, target_prob, position)", "takes 2 argument"),
    ("add(draft_prob, ", "unexpected end"),
    ("foo(draft_prob)", "unknown name 'foo'"),
    ("div(1e999, draft_prob)", "not finite"),
    ("draft_prob target_prob", "after the expression"),
    ("", "unexpected end"),
    ("add" + "(" * 50, "expected"),
])
def test_hostile_or_malformed(text, fragment):
    with pytest.raises(InputError) as err:
        parse(text, source="champ.json")
    assert fragment in str(err.value) and str(err.value).startswith("champ.json")


def test_size_limits():
    deep = "sqrt(" * 30000 + "draft_prob" + ")" * 30000
    with pytest.raises(InputError, match="more than"):
        parse(deep)
    with pytest.raises(InputError, match="longer than"):
        parse("draft_prob" + " " * 300_000)
    with pytest.raises(InputError, match="must be a string"):
        parse(["draft_prob"])


def test_nesting_without_recursion_limit():
    text = "sqrt(" * 5000 + "draft_prob" + ")" * 5000
    assert len(parse(text)) == 5001


def _stress_columns(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    special = np.array([0.0, -0.0, 1e-12, -1e-12, 1e300, -1e300, 60.0, -60.0, 1.0, 0.5])
    cols = {}
    for f in FEATURES:
        v = rng.normal(0, 3, n)
        idx = rng.random(n) < 0.2
        v[idx] = rng.choice(special, idx.sum())
        cols[f] = v
    return cols


def test_interpreter_matches_numpy_and_deap_on_random_trees():
    rng = np.random.default_rng(0)
    n = 3 * BLOCK + 17
    cols = _stress_columns(n, rng)
    X = np.ascontiguousarray(np.stack([cols[f] for f in FEATURES]))
    pset = build_pset(FEATURES)
    random.seed(11)
    nonfinite = 0
    for _ in range(300):
        tree = gp.PrimitiveTree(gp.genHalfAndHalf(pset, 1, 6))
        nodes = from_tree(tree)
        prog = compile_tree(tree)
        got = program_thresholds(prog.ops, prog.args, prog.consts, prog.stack_size, X)
        want = evaluate_numpy(nodes, cols, n)
        assert_same_floats(got, want, err_msg=str(tree), branch_flips=n // 500)
        with np.errstate(all="ignore"):
            stock = np.broadcast_to(gp.compile(tree, pset)(*[cols[f] for f in FEATURES]), (n,))
        np.testing.assert_array_equal(stock, want, err_msg=str(tree))
        nonfinite += (~np.isfinite(got)).any()
    assert nonfinite > 0  # the stress data does reach NaN/inf paths


@pytest.mark.parametrize("n", [0, 1, BLOCK - 1, BLOCK, BLOCK + 1])
def test_edge_sizes(n):
    nodes = parse("if_gt(draft_prob, target_prob, div(target_prob, draft_prob), 1.0)")
    prog = compile_nodes(nodes)
    rng = np.random.default_rng(n)
    cols = {f: rng.random(n) + 0.01 for f in FEATURES}
    X = np.ascontiguousarray(np.stack([cols[f] for f in FEATURES])).reshape(len(FEATURES), n)
    np.testing.assert_array_equal(program_thresholds(prog.ops, prog.args, prog.consts, prog.stack_size, X),
                                  evaluate_numpy(nodes, cols, n))


def test_stack_size_and_features():
    prog = compile_nodes(parse("add(mul(draft_prob, 2.0), if_gt(overlap, 0.5, 1.0, target_prob))"))
    assert prog.features == ("draft_prob", "target_prob", "overlap")
    assert prog.size == 9
    assert prog.stack_size >= 2
    assert compile_nodes(parse("0.25")).stack_size == 1


def test_malformed_node_list():
    with pytest.raises(ValueError):
        compile_nodes([Node("prim", "add"), Node("const", 1.0)])
    with pytest.raises(ValueError):
        compile_nodes([Node("const", 1.0), Node("const", 2.0)])


def test_simplify_standard_rule():
    text = simplify(parse("min(1.0, div(mul(target_prob, 1.0), draft_prob))"))
    assert "target_prob/draft_prob" in text.replace(" ", "")

"""Property-based hostile input (hypothesis): the loaders and the expression parser either accept
their input or refuse it with a one-line :class:`evolve.errors.InputError`; nothing else escapes.

* split files: a valid split with one cell replaced by an arbitrary JSON value, arbitrary JSON
  documents, and arbitrary bytes as ``test.json`` or ``test.parquet``;
* champion files: arbitrary JSON documents, and a valid champion with one key replaced;
* expressions: arbitrary text (anything non-ASCII is refused: no fullwidth digits or spaces),
  and random valid trees, which survive printing and parsing unchanged.
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evolve.errors import InputError
from evolve.traces.io import Traces, load_split
from evolve.traces.schema import COLUMNS, REQUIRED_COLUMNS
from evolve.traces.synth.independent import generate_split
from evolve.gp.compiler import Node, parse, to_string
from evolve.gp.primitives import FEATURES, PRIMITIVES
from heuristics.champions import read_champion

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**80, max_value=2**80),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=12)


def one_line_error(fn, *args):
    """``fn(*args)``, or None when it raised an InputError of one line (any other exception fails)."""
    try:
        return fn(*args)
    except InputError as exc:
        text = str(exc)
        assert text and "\n" not in text, text
        return None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("properties")


@pytest.fixture(scope="module")
def records() -> list[dict]:
    """A valid split (2 sequences of the independent-features model) as JSON records."""
    return json.loads(generate_split(2, 11).to_json(orient="records"))


def _write_split(directory: Path, name: str, data: bytes) -> Path:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    (directory / name).write_bytes(data)
    return directory


@SETTINGS
@given(column=st.sampled_from([c.name for c in COLUMNS] + ["draft_prb", "extra"]), row=st.integers(0, 30),
       value=json_values)
def test_split_with_one_hostile_cell(workdir, records, column, row, value):
    rows = json.loads(json.dumps(records))
    rows[min(row, len(rows) - 1)][column] = value
    directory = _write_split(workdir / "cell", "test.json", json.dumps(rows).encode())
    traces = one_line_error(load_split, directory, "test")
    if traces is not None:
        assert traces.n == len(rows)
        for name, values in traces.columns.items():
            assert values.dtype.kind in "ifb", name


@SETTINGS
@given(doc=json_values)
def test_split_that_is_any_json_document(workdir, doc):
    directory = _write_split(workdir / "doc", "test.json", json.dumps(doc).encode())
    one_line_error(load_split, directory, "test")


@SETTINGS
@given(data=st.binary(max_size=3000), name=st.sampled_from(["test.json", "test.parquet"]))
def test_split_that_is_random_bytes(workdir, data, name):
    directory = _write_split(workdir / "bytes", name, data)
    one_line_error(load_split, directory, "test")


@SETTINGS
@given(value=st.one_of(st.floats(), st.integers(min_value=-2**70, max_value=2**70), st.text(max_size=4),
                       st.booleans(), st.none()), column=st.sampled_from(REQUIRED_COLUMNS))
def test_frame_with_one_hostile_value(value, column):
    df = generate_split(1, 5)
    df[column] = df[column].astype(object)
    df.loc[0, column] = value
    traces = one_line_error(Traces.from_frame, df, "frame")
    if traces is not None and isinstance(value, float):
        assert math.isfinite(value)


@pytest.fixture(scope="module")
def champion_doc(small_search_dataset, tmp_path_factory) -> dict:
    from click.testing import CliRunner

    from evolve.cli.evolve import cli

    out = tmp_path_factory.mktemp("property_run")
    res = CliRunner().invoke(cli, ["run", "--data", str(small_search_dataset), "--out", str(out), "--population",
                                   "6", "--generations", "0", "--no-progress", "--from-scratch"])
    assert res.exit_code == 0, res.output
    return json.loads((Path(res.stdout.strip().splitlines()[-1]) / "champion.json").read_text())


@SETTINGS
@given(doc=json_values)
def test_champion_that_is_any_json_document(workdir, doc):
    path = workdir / "any.json"
    path.write_text(json.dumps(doc))
    one_line_error(read_champion, path)


@SETTINGS
@given(key=st.sampled_from(["format", "format_version", "name", "description", "expression",
                            "primitive_set_version", "features", "fitness", "metrics", "provenance", "other"]),
       value=json_values)
def test_champion_with_one_hostile_key(workdir, champion_doc, key, value):
    path = workdir / "one.json"
    path.write_text(json.dumps({**champion_doc, key: value}))
    champion = one_line_error(read_champion, path)
    if champion is not None:
        assert parse(champion.expression, "expression", champion.features or FEATURES)


@SETTINGS
@given(text=st.text(max_size=60))
def test_expression_text(text):
    nodes = one_line_error(parse, text)
    if nodes is not None:
        assert all(ord(ch) < 128 for ch in text), text  # no fullwidth digits, no Unicode spaces
        assert parse(to_string(nodes)) == nodes


@SETTINGS
@given(digit=st.characters(categories=["Nd"]).filter(lambda ch: not ch.isascii()),
       space=st.sampled_from(["\u3000", "\u00a0", "\u2003"]))
def test_non_ascii_digits_and_spaces_are_refused(digit, space):
    for text in (f"add({digit}, 1.0)", f"add(1.{digit}, 1.0)", f"add(1.0,{space}1.0)", f"1.0{space}"):
        with pytest.raises(InputError):
            parse(text)


def _tree(depth: int):
    leaves = st.one_of(st.sampled_from(FEATURES).map(lambda f: [Node("feature", f)]),
                       st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: [Node("const", v)]))
    if depth == 0:
        return leaves
    sub = _tree(depth - 1)
    calls = st.sampled_from(PRIMITIVES).flatmap(
        lambda p: st.lists(sub, min_size=p.arity, max_size=p.arity).map(
            lambda args: [Node("prim", p.name)] + [n for a in args for n in a]))
    return st.one_of(leaves, calls)


@SETTINGS
@given(nodes=_tree(3), spaces=st.sampled_from(["", " ", "  ", "\n\t"]))
def test_valid_trees_round_trip(nodes, spaces):
    text = to_string(nodes)
    assert parse(text) == nodes
    assert parse(text.replace(", ", "," + spaces).replace("(", "(" + spaces)) == nodes

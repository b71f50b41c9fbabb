"""Hostile inputs of ``benchmark.py groups``: what cannot be tabulated side by side is refused in one line naming the
file (and both sides), and no NaN or infinity is printed.

The runs directory is made as ``scripts/spec_bench_groups.sh`` makes it (a harvest of a categorised prompts file, the
subset of each group, a verification-length search on each under one cost file, the benchmark of each group's test
split with both champions), small. The damage cases are generated from the files the command reads
(:func:`evolve.commands.groups.group_files`) and from the keys it reads in each: every file missing, a directory, not
JSON, JSON of another type; every key of a benchmark row and of the dataset's metadata given a value of each wrong
kind. Then the cases of meaning: a group's champion of another kind, of another group's dataset, of another seed or
gamma; a benchmark of another group; a group dataset that is a subset of another harvest. Outputs landing on any of
these files are refused by the inventory test (``test_hostile_round5_inventory.py``, its groups scenario).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from evolve.cli.benchmark import cli as benchmark_cli
from evolve.cli.evolve import cli as evolve_cli
from evolve.cli.generate import cli as generate_cli
from evolve.commands.groups import BENCH_FILE, DATA_DIR, GROUP_FILE, SINGLE_FILE, group_files
from evolve.report.finite import has_non_finite
from test_spec_bench import spec_harvest, spec_prompts  # noqa: F401 - the fixtures
from hostile_helpers import one_line_error as _refused

REPO = Path(__file__).resolve().parent.parent
GROUPS = ("chat", "qa")


def _ok(root, args):
    res = CliRunner().invoke(root, [str(a) for a in args])
    assert res.exit_code == 0, (args, res.output)
    return res


def _run(data, out, costs, *extra):
    res = _ok(evolve_cli, ["run", "--data", data, "--out", out, "--evolve", "verify-length", "--objective",
                           "tokens_per_second", "--costs", costs, "--gamma", "4", "--population", "6",
                           "--generations", "1", "--seed", "1", "--no-progress", *extra])
    return Path(res.stdout.strip().splitlines()[-1]) / "champion.json"


@pytest.fixture(scope="module")
def runs(spec_harvest, tmp_path_factory):  # noqa: F811 - the imported fixture
    whole = spec_harvest[0]
    root = tmp_path_factory.mktemp("groups")
    costs = root / "costs.json"
    shutil.copy(REPO / "docs" / "costs" / "gpu_like.json", costs)
    runs = root / "runs"
    runs.mkdir()
    shutil.copy(_run(whole, root / "single-runs", costs), runs / SINGLE_FILE)
    for g in GROUPS:
        d = runs / g
        _ok(generate_cli, ["subset", "--data", whole, "--categories", g, "--out", d / DATA_DIR])
        shutil.copy(_run(d / DATA_DIR, d / "runs", costs), d / GROUP_FILE)
        _ok(benchmark_cli, ["--data", d / DATA_DIR, "--costs", costs, "--champion", runs / SINGLE_FILE, "--champion",
                            d / GROUP_FILE, "--repeats", "1", "--format", "json", "--output", d / BENCH_FILE])
    return runs, costs, whole


def _copy(runs, tmp_path) -> Path:
    out = tmp_path / "runs"
    shutil.copytree(runs[0], out)
    return out


def _groups(runs_dir, *extra):
    return CliRunner().invoke(benchmark_cli, ["groups", "--runs", str(runs_dir), *extra])


def test_the_table_of_the_script_is_accepted(runs, tmp_path):
    res = _groups(_copy(runs, tmp_path))
    assert res.exit_code == 0, res.output
    assert [ln.split()[0] for ln in res.stdout.splitlines()[1:4]] == ["QA", "chat", "All"]


# --- damaged files, generated from the files the command reads ----------------------------------------------------

def _files(runs_dir: Path) -> list[Path]:
    found = []
    for _, path in group_files(runs_dir):
        found += [path / "metadata.json"] if path.name == DATA_DIR else [path]
    return found


FILE_DAMAGES = {
    "missing": lambda p: p.unlink(),
    "a directory": lambda p: (p.unlink(), p.mkdir()),
    "not JSON": lambda p: p.write_text("{"),
    "a JSON array": lambda p: p.write_text("[]"),
    "a JSON string": lambda p: p.write_text('"x"'),
    "an empty object": lambda p: p.write_text("{}"),
}
#: The file of each damaged file, by its place (relative to the runs directory) in the first group.
PLACES = (SINGLE_FILE, f"qa/{GROUP_FILE}", f"qa/{BENCH_FILE}", f"qa/{DATA_DIR}/metadata.json")


def test_the_places_are_the_files_read(runs):
    assert sorted(str(p.relative_to(runs[0])) for p in _files(runs[0]) if "chat" not in p.parts) == sorted(PLACES)


@pytest.mark.parametrize("damage", list(FILE_DAMAGES))
@pytest.mark.parametrize("place", PLACES)
def test_a_damaged_file_is_named(runs, tmp_path, place, damage):
    d = _copy(runs, tmp_path)
    FILE_DAMAGES[damage](d / place)
    _refused(_groups(d), d / place)


WRONG = {"a string": "x", "NaN": float("nan"), "infinity": float("inf"), "zero": 0, "negative": -1.0, "true": True,
         "null": None, "a list": [1.0]}


def _row_with(path: Path, key: str, value) -> None:
    doc = json.loads(path.read_text())
    for row in doc["rows"]:
        if row.get("tokens_per_second") is not None:
            row[key] = value
    path.write_text(json.dumps(doc))  # NaN and infinity as JSON's extensions, as Python writes them


@pytest.mark.parametrize("value", list(WRONG))
@pytest.mark.parametrize("key", ["tokens_per_second", "speedup"])
def test_a_benchmark_figure_of_the_wrong_kind_is_named(runs, tmp_path, key, value):
    d = _copy(runs, tmp_path)
    _row_with(d / "qa" / BENCH_FILE, key, WRONG[value])
    res = _groups(d)
    line = _refused(res, d / "qa" / BENCH_FILE)
    assert "nan" not in res.stdout.lower() and "inf" not in res.stdout.lower(), line


def test_rows_that_are_not_objects_are_named(runs, tmp_path):
    d = _copy(runs, tmp_path)
    (d / "qa" / BENCH_FILE).write_text(json.dumps({"rows": [1, 2]}))
    _refused(_groups(d), d / "qa" / BENCH_FILE, "row 0")


METADATA_DAMAGES = {
    "no subset": lambda m: m.pop("subset"),
    "categories a string": lambda m: m["subset"].update(categories="qa"),
    "categories empty": lambda m: m["subset"].update(categories=[]),
    "no generated tokens": lambda m: m["statistics"]["test"].pop("generated_tokens"),
    "generated tokens negative": lambda m: m["statistics"]["test"].update(generated_tokens=-3),
    "generated tokens a float": lambda m: m["statistics"]["test"].update(generated_tokens=2.5),
}


@pytest.mark.parametrize("case", list(METADATA_DAMAGES))
def test_a_group_dataset_without_what_the_table_needs_is_named(runs, tmp_path, case):
    d = _copy(runs, tmp_path)
    path = d / "qa" / DATA_DIR / "metadata.json"
    meta = json.loads(path.read_text())
    METADATA_DAMAGES[case](meta)
    path.write_text(json.dumps(meta))
    _refused(_groups(d), path)


def test_a_missing_group_dataset_is_named_missing(runs, tmp_path):
    """Not "not a subset of categories": the directory is not there."""
    d = _copy(runs, tmp_path)
    shutil.rmtree(d / "qa" / DATA_DIR)
    line = _refused(_groups(d), d / "qa" / DATA_DIR, "no such directory")
    assert "not a subset" not in line


@pytest.mark.parametrize("name", [GROUP_FILE, BENCH_FILE])
def test_a_group_without_one_of_its_files_is_refused_not_left_out(runs, tmp_path, name):
    d = _copy(runs, tmp_path)
    (d / "qa" / name).unlink()
    _refused(_groups(d), d / "qa" / name, "no such file")


# --- meaning: what cannot stand side by side ----------------------------------------------------------------------

def test_a_groups_champion_of_another_groups_dataset_is_refused_naming_both(runs, tmp_path):
    d = _copy(runs, tmp_path)
    shutil.copy(d / "chat" / GROUP_FILE, d / "qa" / GROUP_FILE)
    _refused(_groups(d), d / "qa" / GROUP_FILE, d / "qa" / DATA_DIR)


def test_a_benchmark_of_another_group_is_refused(runs, tmp_path):
    d = _copy(runs, tmp_path)
    shutil.copy(d / "chat" / BENCH_FILE, d / "qa" / BENCH_FILE)
    _refused(_groups(d), d / "qa" / BENCH_FILE, d / "qa" / DATA_DIR)


@pytest.mark.parametrize("key, value, words", [("seed", 7, "seed 7"), ("gamma", 3, "gamma 3")])
def test_runs_of_another_seed_or_gamma_are_refused_naming_both(runs, tmp_path, key, value, words):
    d = _copy(runs, tmp_path)
    doc = json.loads((d / "qa" / GROUP_FILE).read_text())
    (doc["provenance"] if key == "seed" else doc["provenance"]["config"])[key] = value
    (d / "qa" / GROUP_FILE).write_text(json.dumps(doc))
    _refused(_groups(d), d / "qa" / GROUP_FILE, words, d / SINGLE_FILE)


def test_a_champion_of_another_kind_is_refused_naming_both(runs, tmp_path):
    d = _copy(runs, tmp_path)
    res = _ok(evolve_cli, ["run", "--data", d / "qa" / DATA_DIR, "--out", tmp_path / "thr", "--population", "6",
                           "--generations", "1", "--seed", "1", "--no-progress"])
    shutil.copy(Path(res.stdout.strip().splitlines()[-1]) / "champion.json", d / "qa" / GROUP_FILE)
    _refused(_groups(d), d / "qa" / GROUP_FILE, "threshold", "verify-length", d / SINGLE_FILE)


def test_a_group_dataset_of_another_harvest_is_refused(runs, tmp_path):
    d = _copy(runs, tmp_path)
    other = tmp_path / "other"
    shutil.copytree(runs[2], other)
    path = d / "qa" / DATA_DIR / "metadata.json"
    meta = json.loads(path.read_text())
    meta["subset"]["of"] = str(other)  # the same records, but the subset of another copy: another harvest
    path.write_text(json.dumps(meta))
    _refused(_groups(d), d / "qa" / DATA_DIR, other)


def test_the_single_policy_of_another_dataset_is_refused(runs, tmp_path):
    d = _copy(runs, tmp_path)
    shutil.copy(d / "qa" / GROUP_FILE, d / SINGLE_FILE)
    _refused(_groups(d), d / SINGLE_FILE)


# --- no NaN or infinity -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["table", "markdown", "json"])
def test_non_finite_figures_never_reach_the_output(fmt):
    """Figures that overflow (a huge tokens per second over a tiny speedup) are shown as n/a, null in JSON."""
    from evolve.report.groups import COLUMNS, format_groups

    rows = [{"label": "QA", "categories": ("qa",), "tokens": 10, "seeded": False, "plain_tps": 1e-320,
             "tps": {c: 1e308 for c in COLUMNS}},
            {"label": "chat", "categories": ("chat",), "tokens": 10, "seeded": True, "plain_tps": 1.0,
             "tps": {c: float("inf") if i == 0 else 2.0 for i, c in enumerate(COLUMNS)}}]
    text = format_groups(rows, fmt)
    if fmt == "json":
        assert "Infinity" not in text and "NaN" not in text
        json.loads(text)
    else:
        assert not has_non_finite(text), text


# --- a benchmark of several splits, or of another, is read on its test split ------------------------------------

def _bench(runs_dir: Path, group: str, split: str) -> None:
    d = runs_dir / group
    costs = runs_dir.parent / "costs.json"
    _ok(benchmark_cli, ["--data", d / DATA_DIR, "--split", split, "--costs", costs, "--champion",
                        runs_dir / SINGLE_FILE, "--champion", d / GROUP_FILE, "--repeats", "1", "--format", "json",
                        "--output", d / BENCH_FILE])


def test_a_benchmark_of_every_split_is_read_on_its_test_split(runs, tmp_path):
    """The figures of a benchmark of train, valid and test are the test split's (the rows of the other splits come
    first in its JSON and were taken before)."""
    d = _copy(runs, tmp_path)
    shutil.copy(runs[1], tmp_path / "costs.json")
    want = _groups(d, "--format", "json")
    assert want.exit_code == 0, want.output
    _bench(d, "qa", "all")
    assert {r["split"] for r in json.loads((d / "qa" / BENCH_FILE).read_text())["rows"]} == {"train", "valid", "test"}
    got = _groups(d, "--format", "json")
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout) == json.loads(want.stdout)


def test_a_benchmark_without_the_test_split_is_refused(runs, tmp_path):
    d = _copy(runs, tmp_path)
    shutil.copy(runs[1], tmp_path / "costs.json")
    _bench(d, "qa", "valid")
    _refused(_groups(d), d / "qa" / BENCH_FILE, "test")


def test_a_data_record_without_the_test_split_is_refused(runs, tmp_path):
    d = _copy(runs, tmp_path)
    path = d / "qa" / BENCH_FILE
    doc = json.loads(path.read_text())
    doc["data"] = {"valid": doc["data"]["test"]}
    path.write_text(json.dumps(doc))
    _refused(_groups(d), path, "data.test")


@pytest.mark.parametrize("value", ["a string", "true", "a list", "NaN"])
def test_a_headroom_figure_of_the_wrong_kind_is_named(runs, tmp_path, value):
    d = _copy(runs, tmp_path)
    path = d / "qa" / BENCH_FILE
    doc = json.loads(path.read_text())
    assert doc["headroom"], "the benchmark of a verification-length champion under a cost file records its share"
    doc["headroom"][0]["headroom"]["share"] = WRONG[value]
    path.write_text(json.dumps(doc))
    _refused(_groups(d), path, "headroom[0].headroom.share")


def test_per_category_figures_without_a_cost_file_are_not_in_seconds(runs, tmp_path):
    """A verification-length champion evolved under the built-in flat model, on a categorised dataset: the per-category
    rows of the JSON, like the main rows, have no tokens per second (the flat model's time unit is a target step)."""
    whole = runs[2]
    res = _ok(evolve_cli, ["run", "--data", whole, "--out", tmp_path / "flat", "--evolve", "verify-length",
                           "--objective", "tokens_per_second", "--gamma", "4", "--population", "6", "--generations",
                           "1", "--seed", "1", "--no-progress"])
    champion = Path(res.stdout.strip().splitlines()[-1]) / "champion.json"
    doc = json.loads(_ok(benchmark_cli, ["--champion", champion, "--repeats", "1", "--format", "json"]).stdout)
    assert all(r["tokens_per_second"] is None for r in doc["rows"])
    cells = [c for rows in doc["categories"]["test"]["rows"].values() for c in rows if c is not None]
    assert cells and all(c["tokens_per_second"] is None and c["speedup"] is not None for c in cells)

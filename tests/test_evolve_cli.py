"""``python -m evolve``: run, show and promote through click's test runner; bad options and configs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evolve.cli.evolve import cli
from heuristics.champions import ENV_DIR, load_champion, read_champion


@pytest.fixture(scope="module")
def dataset(small_search_dataset) -> Path:
    """Train and valid only (the search must never need test): the shared one of conftest."""
    return small_search_dataset


def invoke(*args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)


def run_args(dataset, out, *extra):
    return ["run", "--data", dataset, "--out", out, "--population", 16, "--generations", 2, "--seed", 7,
            "--no-progress", *extra]


@pytest.fixture(scope="module")
def run_dir(dataset, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli_out")
    res = invoke(*run_args(dataset, out))
    assert res.exit_code == 0, res.output
    return Path(res.stdout.strip().splitlines()[-1])


def test_run_prints_the_run_directory_last(run_dir):
    assert run_dir.is_dir() and (run_dir / "champion.json").exists()
    assert (run_dir / "logbook.csv").read_text().count("\n") == 4  # header + generations 0..2


def test_run_prints_only_the_run_directory_on_stdout(dataset, tmp_path):
    """stdout is the run directory alone (README's `"$(python -m evolve run)/champion.json"`); the champion and
    where it comes from are reported on stderr, so the user still reads them."""
    res = invoke(*run_args(dataset, tmp_path))
    assert res.exit_code == 0, res.output
    assert res.stdout.count("\n") == 1 and Path(res.stdout.strip()).is_dir()
    report = res.stderr.splitlines()
    assert report[0] == f"champion: {read_champion(res.stdout.strip()).expression}"
    assert report[1].startswith(("champion: the seeded rule ", "champion: evolved"))
    assert report[2].startswith("size ") and "programs scored" in report[2]


def test_run_with_progress_bar_same_champion(dataset, tmp_path, run_dir):
    res = invoke(*run_args(dataset, tmp_path)[:-1])  # without --no-progress
    assert res.exit_code == 0, res.output
    last = Path(res.stdout.strip().splitlines()[-1])
    assert last.is_dir() and last.parent == tmp_path
    assert "generation" in res.stderr and "best train" in res.stderr
    assert (last / "hall_of_fame.json").read_text() == (run_dir / "hall_of_fame.json").read_text()


def test_progress_off_a_terminal_is_plain_lines_counting_generations_after_the_first(dataset, tmp_path):
    """stderr that is no terminal (CliRunner's, a file) gets plain lines: the initial population as generation 0
    of G, and the last as G/G (was G+1/G+1), each line within 100 columns, no terminal control codes."""
    res = invoke(*run_args(dataset, tmp_path)[:-1])  # --generations 2, progress on
    assert res.exit_code == 0, res.output
    lines = [x for x in res.stderr.splitlines() if x.startswith("generation ")]
    assert lines[0].startswith("generation 0/2  best train ") and lines[-1].startswith("generation 2/2  best train ")
    assert not any(x.startswith("generation 3/") for x in lines)
    assert all(len(x) <= 100 for x in lines) and "\x1b" not in res.stderr


def test_progress_lines_are_throttled():
    from evolve.cli.output import ProgressLines

    now = [0.0]
    printed = []
    lines = ProgressLines("step", interval=5.0, clock=lambda: now[0])
    import click
    original = click.echo
    try:
        click.echo = lambda text, err=False: printed.append(text)
        for step in range(11):
            now[0] = step * 1.0
            lines(step, 10, "x" * 200)
    finally:
        click.echo = original
    assert [p.split()[1] for p in printed] == ["0/10", "5/10", "10/10"]  # first, every 5 s, last
    assert all(len(p) <= 100 for p in printed)


def test_config_file_and_option_precedence(dataset, tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'data = "{dataset}"\npopulation = 12\ngenerations = 5\nseed = 3\nhall-of-fame = 4\n')
    res = invoke("run", "--config", cfg, "--generations", 1, "--out", tmp_path / "o", "--no-progress")
    assert res.exit_code == 0, res.output
    first = Path(res.stdout.strip().splitlines()[-1])
    written = (first / "config.toml").read_text()
    assert "population = 12" in written and "generations = 1" in written and "hall_of_fame = 4" in written
    # the written config repeats the run exactly
    res2 = invoke("run", "--config", first / "config.toml", "--no-progress")
    assert res2.exit_code == 0, res2.output
    second = Path(res2.stdout.strip().splitlines()[-1])
    assert second != first
    assert read_champion(second).expression == read_champion(first).expression
    assert (json.loads((second / "hall_of_fame.json").read_text())
            == json.loads((first / "hall_of_fame.json").read_text()))


def test_show(run_dir):
    res = invoke("show", run_dir)
    assert res.exit_code == 0, res.output
    champ = read_champion(run_dir)
    assert f"champion:   {champ.expression}" in res.stdout
    assert "simplified:" in res.stdout
    assert "expected_tv" in res.stdout and "valid" in res.stdout
    res = invoke("show", run_dir / "champion.json")
    assert res.exit_code == 0


def test_promote_into_a_given_directory(run_dir, tmp_path):
    champs = tmp_path / "champs"
    res = invoke("promote", run_dir, "my_champ", "--champions-dir", champs)
    assert res.exit_code == 0, res.output
    assert Path(res.stdout.strip().splitlines()[-1]) == champs / "my_champ.json"
    rule = load_champion(champs / "my_champ.json")
    assert rule.name == "my_champ" and rule.expression == read_champion(run_dir).expression
    assert (champs / "my_champ.py").exists()
    again = invoke("promote", run_dir, "my_champ", "--champions-dir", champs)
    assert again.exit_code == 2 and again.stderr.startswith("error: ") and "exists already" in again.stderr
    assert invoke("promote", run_dir, "my_champ", "--champions-dir", champs, "--force").exit_code == 0


def test_promote_honours_the_environment_variable(run_dir, tmp_path):
    res = invoke("promote", run_dir, "env_champ", env={ENV_DIR: str(tmp_path / "env")})
    assert res.exit_code == 0, res.output
    assert (tmp_path / "env" / "env_champ.json").exists()


def one_line_error(res, *needles):
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.output
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("extra, needles", [
    (["--population", "1"], ["--population", "2<=x<=1000000", "1"]),
    (["--population", "many"], ["--population"]),
    (["--generations", "-3"], ["--generations", "-3"]),
    (["--fitness", "bogus"], ["--fitness", "bogus"]),
    (["--objective", "bogus"], ["--objective", "bogus", "pareto"]),
    (["--evolve", "tree"], ["--evolve", "tree", "relaxation"]),
    (["--parsimony-size", "3"], ["--parsimony-size", "3"]),
    (["--crossover-prob", "nan"], ["--crossover-prob"]),
    (["--max-depth", "40"], ["--max-depth", "17"]),
    (["--features", "draft_prob,logits"], ["--features", "logits"]),
    (["--features", "overlap"], ["overlap"]),
    (["--elitism", "16"], ["--elitism"]),
    (["--unknown-option", "1"], ["--unknown-option"]),
])
def test_bad_options(dataset, tmp_path, extra, needles):
    out = tmp_path / "out"
    one_line_error(invoke(*run_args(dataset, out, *extra)), *needles)
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("text, needles", [
    ("popsize = 10\n", ["cfg.toml", "popsize", "population"]),
    ("population = 'ten'\n", ["cfg.toml", "population", "ten"]),
    ("population = 1.5\n", ["cfg.toml", "population"]),
    ("warm_start = 1\n", ["cfg.toml", "warm_start"]),
    ("include_standard = true\n", ["cfg.toml", "include_standard", "warm_start"]),
    ("fitness = 'best'\n", ["cfg.toml", "fitness", "best"]),
    ("features = ['draft_prob', 'draft_prob']\n", ["cfg.toml", "features", "twice"]),
    ("init_min_depth = 3\ninit_max_depth = 2\n", ["cfg.toml", "init_min_depth"]),
    ("population = \n", ["cfg.toml", "not valid TOML"]),
    ("[evolve]\npopulation = 10\n", ["cfg.toml", "evolve"]),
])
def test_bad_config_files(dataset, tmp_path, text, needles):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(text)
    out = tmp_path / "out"
    one_line_error(invoke(*run_args(dataset, out, "--config", cfg)), *needles)
    assert not out.exists()


def test_missing_config_file_and_dataset(dataset, tmp_path):
    one_line_error(invoke(*run_args(dataset, tmp_path / "o", "--config", tmp_path / "absent.toml")),
                   "absent.toml")
    one_line_error(invoke(*run_args(tmp_path / "nodata", tmp_path / "o")), "nodata", "generate_data.py")
    assert not (tmp_path / "o").exists()


def test_bad_dataset_content(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "train.json").write_text('[{"draft_prob": 2.0}]')
    (d / "valid.json").write_text("[]")
    one_line_error(invoke(*run_args(d, tmp_path / "o")), "train.json")


def test_show_and_promote_errors(run_dir, tmp_path):
    one_line_error(invoke("show", tmp_path / "nothing"), "nothing")
    hostile = tmp_path / "hostile.json"
    doc = json.loads((run_dir / "champion.json").read_text())
    doc["expression"] = "__import__('os').getcwd()"
    hostile.write_text(json.dumps(doc))
    one_line_error(invoke("show", hostile), "hostile.json", "__import__")
    one_line_error(invoke("promote", run_dir, "../bad", "--champions-dir", tmp_path / "c"), "NAME", "../bad")
    one_line_error(invoke("promote", run_dir, "standard_rejection", "--champions-dir", tmp_path / "c"),
                   "built-in")
    one_line_error(invoke("promote", tmp_path, "ok_name", "--champions-dir", tmp_path / "c"), "not a run directory")
    assert not (tmp_path / "c").exists()

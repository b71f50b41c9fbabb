"""Every line a command prints fits 100 columns: each command runs on small data, and every line of its stdout and
stderr is checked (tables are narrowed, captions, footers and legends wrapped).

Not checked here: what ``python -m evolve export`` prints without ``--output`` (the file it would write: a
Python module, whose lines follow the exported expression, or an engine's configuration, whose ``use:`` comment
is a command to copy whole), and ``--format csv``/``json``/``markdown`` output (data, one record a line).
``python -m evolve export`` is checked with ``--output`` (its gap table and messages) and in its refusals;
``benchmark.py perf`` on the small dataset with the smallest measurements (not ``--islands`` or ``--harvest``).
"""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

WIDTH = 100
COSTS = Path(__file__).resolve().parent.parent / "docs" / "costs" / "gpu_like.json"


def _check(result, what: str, exit_code: int = 0) -> None:
    assert result.exit_code == exit_code, result.output
    long = [f"{len(line)}: {line[:60]}..." for line in (result.stdout + result.stderr).splitlines()
            if len(line) > WIDTH]
    assert not long, f"{what}: {len(long)} lines over {WIDTH} columns: " + " | ".join(long[:4])


def _benchmark(*args):
    from evolve.cli.benchmark import cli
    return CliRunner().invoke(cli, [str(a) for a in args])


def _evolve(*args):
    from evolve.cli.evolve import cli
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def runs(vocab_dataset, tmp_path_factory) -> dict[str, Path]:
    """A small run of each kind scored by benchmark.py on the vocab dataset: threshold, verify-length, tree-shape."""
    out = {}
    for kind in ("threshold", "verify-length", "tree-shape"):
        res = _evolve("run", "--data", vocab_dataset, "--out", tmp_path_factory.mktemp(kind), "--evolve", kind,
                      "--population", 12, "--generations", 2, "--seed", 3)
        _check(res, f"evolve run --evolve {kind}")
        out[kind] = Path(res.stdout.strip().splitlines()[-1])
    return out


def test_evolve_commands(runs, tmp_path):
    for run_dir in runs.values():
        _check(_evolve("show", run_dir), "evolve show")
    _check(_evolve("promote", runs["threshold"], "wide_check", "--champions-dir", tmp_path), "evolve promote")


@pytest.mark.parametrize("extra", [[], ["--costs", COSTS], ["--gamma", 3]])
def test_benchmark_table(vocab_dataset, runs, extra):
    args = ["--data", vocab_dataset, "--repeats", 1, *extra]
    for kind, run_dir in runs.items():
        if kind == "threshold" or kind == "verify-length" and "--gamma" not in extra:  # evolved at gamma 5
            args += ["--champion", run_dir / "champion.json"]
    _check(_benchmark(*args), f"benchmark.py {extra}")
    if "--gamma" in extra:  # another gamma than a policy's run's is refused (one line, naming the long paths)
        res = _benchmark(*args, "--champion", runs["verify-length"] / "champion.json")
        assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1, res.output


@pytest.mark.parametrize("args", [
    ["--lengths", 40, "--samples", 2],
    ["--lengths", 40, "--samples", 2, "--costs", COSTS],
    ["--rule", "standard_rejection", "--verify", "block", "--lengths", 40, "--samples", 2],
    ["--rule", "standard_rejection", "--verify", "fly", "--lengths", 40, "--samples", 2],
    ["--trees", "--budgets", "4,8", "--lengths", 40, "--samples", 2],
], ids=["sweep", "costs", "block", "fly", "trees"])
def test_simulate(args):
    _check(_benchmark("simulate", *args, "--no-plot"), f"simulate {args}")


def test_trees(vocab_dataset, runs):
    _check(_benchmark("trees", "--data", vocab_dataset, "--champion", runs["tree-shape"] / "champion.json",
                      "--bootstrap", 40), "trees")


def test_pareto(vocab_dataset, runs):
    _check(_benchmark("pareto", "--data", vocab_dataset, "--run", runs["threshold"], "--no-plot", "--no-learned"),
           "pareto")
    _check(_benchmark("pareto", "--data", vocab_dataset, "--no-plot", "--no-learned", "--costs", COSTS),
           "pareto --costs")


def test_perf(vocab_dataset, tmp_path):
    _check(_benchmark("perf", "--data", vocab_dataset, "--output", tmp_path / "perf.json", "--programs", 20,
                      "--population", 10, "--generations", 1, "--sizes", 1000, "--generator-tokens", 1000), "perf")


@pytest.mark.parametrize("target", ["vllm", "sglang", "tensorrt-llm", "llama.cpp", "transformers"])
def test_export_to_an_engine(vocab_dataset, runs, target, tmp_path):
    tuned = ["--data", vocab_dataset, "--costs", COSTS]
    champion = runs["threshold"] / "champion.json"
    _check(_evolve("export", champion, "--to", target, *tuned, "--output", tmp_path / "a"), f"export --to {target}")
    if target in ("vllm", "tensorrt-llm"):  # a draft length per batch size: a verification-length champion's
        _check(_evolve("export", runs["verify-length"] / "champion.json", "--to", target, *tuned, "--concurrency",
                       "1,8", "--output", tmp_path / "c"), f"export --to {target} --concurrency")
    _check(_evolve("export", "fixed_gamma:gamma=3", "--to", target, "--output", tmp_path / "b"),
           f"export fixed_gamma --to {target}")


@pytest.mark.parametrize("target", ["numpy", "torch", "llama-cpp-python"])
def test_export_a_module(runs, target, tmp_path):
    run_dir = runs["verify-length" if target == "llama-cpp-python" else "threshold"]
    _check(_evolve("export", run_dir, "--to", target, "--output", tmp_path / "m.py"), f"export --to {target}")
    if target == "llama-cpp-python":  # priced in its engine under the cost file: the table of the settings fits
        _check(_evolve("export", run_dir, "--to", target, "--costs", COSTS, "--output", tmp_path / "p.py"),
               f"export --to {target} --costs")
    else:
        _check(_evolve("export", run_dir, "--to", target, "--costs", COSTS), f"export --to {target} --costs", 2)


def test_live(llama_files):
    _check(_benchmark("live", "--target", llama_files["target"], "--draft", llama_files["draft"], "--prompts",
                      llama_files["prompts"], "--rule", "standard_rejection", "--rule", "fixed_gamma:gamma=2",
                      "--gamma", 2, "--max-new-tokens", 6), "live")


def test_generate_and_harvest(llama_files, tmp_path):
    from evolve.cli.generate import cli

    _check(CliRunner().invoke(cli, ["--out", str(tmp_path / "synthetic"), "--sequences", "12", "--seed", "2"]),
           "generate_data.py")
    _check(CliRunner().invoke(cli, ["harvest", "--target", llama_files["target"], "--draft", llama_files["draft"],
                                    "--prompts", llama_files["prompts"], "--max-new-tokens", "8", "--gamma", "2",
                                    "--no-progress", "--threads", "1", "--out", str(tmp_path / "harvested")]),
           "generate_data.py harvest")

"""A run's context goes with its champion: the commands that score or tune a champion use its run's dataset, gamma
and cost file when none is given, refuse another one in one line naming both, and print every column in the unit its
header says; a verification-length verdict names a champion that never drafts and says what to try next.

The refusal cases are generated from the commands: every command of ``benchmark.py`` and ``python -m evolve`` with a
champion option (:data:`evolve.cli.inventory.CHAMPION_PARAMS`) and any of the options that carry a run's context
(the dataset, the draft length gamma, the cost file) is one case per such option, given a value other than the
champion's run's.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from evolve.cli.benchmark import cli as benchmark_cli
from evolve.cli.evolve import cli as evolve_cli
from evolve.cli.generate import cli as generate_cli
from evolve.cli.inventory import CHAMPION_PARAMS

ROOTS = {"benchmark.py": benchmark_cli, "python -m evolve": evolve_cli}
REPO = Path(__file__).resolve().parent.parent
#: The options that carry a run's context, by parameter name: what the case gives there (an attribute of the world).
CONTEXT = {"data_dir": "other_data", "data": "other_data", "gamma": "other_gamma", "costs": "other_costs"}
#: What each command needs besides its champion to get as far as the check (placeholders: world attributes).
NEEDS = {("benchmark.py", "live"): ["--target", "{target}", "--prompts", "{prompts}"],
         ("python -m evolve", "export"): ["--to", "vllm"]}
#: Context options no champion of a kind the command runs can carry, and why (no case).
NO_CASE = {(("benchmark.py", "simulate"), "costs"): "the simulator runs thresholds and relaxation weights, whose "
                                                     "objectives read no cost file"}
#: A command whose dataset option goes with its cost file (both or neither): the champion's own is given beside.
TOGETHER = {("python -m evolve", "export"): {"data": ["--costs", "{costs}"], "costs": ["--data", "{data}"]}}


def _walk(cmd, path):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from _walk(sub, path + (name,))


def _params(cmd):
    return cmd.get_params(click.Context(cmd, **cmd.context_settings))


def _cases():
    out = []
    for root, top in ROOTS.items():
        for path, cmd in _walk(top, (root,)):
            params = {p.name: p for p in _params(cmd)}
            if not CHAMPION_PARAMS & set(params):
                continue
            for name in CONTEXT:
                if name in params and (name != "data" or isinstance(params[name].type, click.Path)) \
                        and (path, name) not in NO_CASE:
                    out.append(pytest.param(path, name, id=f"{' '.join(path)} {name}"))
    return out


CASES = _cases()


def test_the_cases_cover_the_commands():
    commands = {c.values[0] for c in CASES}
    assert {("benchmark.py",), ("benchmark.py", "trees"), ("benchmark.py", "live"),
            ("python -m evolve", "export")} <= commands
    assert ("benchmark.py", "simulate") in commands  # its gamma (simulate has no dataset)


def _ok(root, args):
    res = CliRunner().invoke(root, [str(a) for a in args])
    assert res.exit_code == 0, (args, res.output)
    return res


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    """Two vocab datasets with tree tables (``data``, ``other_data``), two cost files (``costs``, ``other_costs``),
    and runs on ``data`` under ``costs``: a verification-length policy at gamma 4 (``vl``), a tree shape (``ts``), a
    verification-length policy under the built-in flat model (``vl_flat``), and a threshold rule whose objective reads
    blocks (``speed``, for simulate)."""
    from tree_helpers import write_tree_tables

    root = tmp_path_factory.mktemp("context")
    ns = type("World", (), {})()
    ns.root = root
    ns.data, ns.other_data = root / "d1", root / "d2"
    for seed, d in ((1, ns.data), (2, ns.other_data)):
        _ok(generate_cli, ["--out", d, "--sequences", "40", "--seed", str(seed)])
        write_tree_tables(d, seed=seed)
    ns.costs, ns.other_costs = root / "c1.json", root / "c2.json"
    shutil.copy(REPO / "docs" / "costs" / "gpu_like.json", ns.costs)
    shutil.copy(REPO / "docs" / "costs" / "gpu_batched.json", ns.other_costs)
    ns.gamma, ns.other_gamma = 4, 3
    runs = root / "runs"

    def run(*args):
        res = _ok(evolve_cli, ["run", "--data", ns.data, "--out", runs, "--population", "8", "--generations", "1",
                               "--seed", "1", "--no-progress", *args])
        return Path(res.stdout.strip().splitlines()[-1])

    vl = ["--evolve", "verify-length", "--objective", "tokens_per_second", "--gamma", "4"]
    ns.vl_run = run(*vl, "--costs", ns.costs)
    ns.vl = ns.vl_run / "champion.json"
    ns.vl_flat = run(*vl) / "champion.json"
    ns.ts = run("--evolve", "tree-shape", "--objective", "tokens_per_second", "--costs", ns.costs) / "champion.json"
    ns.speed = run("--objective", "speed_at_tv", "--gamma", "4") / "champion.json"
    ns.target, ns.prompts = root / "no-model", root / "prompts.txt"
    ns.prompts.write_text("w1 w2\n")
    return ns


def _champion_for(path, w) -> Path:
    return {("benchmark.py", "trees"): w.ts, ("benchmark.py", "simulate"): w.speed}.get(path, w.vl)


def _fill(args, w):
    return [a.format(**{k: getattr(w, k) for k in ("target", "prompts", "costs", "data")}) for a in args]


@pytest.mark.parametrize("path, name", CASES)
def test_another_context_than_the_champions_run_is_refused_naming_both(w, path, name):
    cmd = ROOTS[path[0]]
    for sub in path[1:]:
        cmd = cmd.commands[sub]
    params = {p.name: p for p in _params(cmd)}
    champion = _champion_for(path, w)
    champ_param = params[next(iter(CHAMPION_PARAMS & set(params)))]
    lead = [str(champion)] if isinstance(champ_param, click.Argument) else [max(champ_param.opts, key=len),
                                                                            str(champion)]
    other = getattr(w, CONTEXT[name])
    flag = max(params[name].opts, key=len)
    args = [*path[1:], *lead, *_fill(NEEDS.get(path, []), w), *_fill(TOGETHER.get(path, {}).get(name, []), w),
            flag, str(other)]
    res = CliRunner().invoke(ROOTS[path[0]], args)
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert res.exit_code == 2 and len(lines) == 1 and "Traceback" not in res.output, (args, res.output)
    own = {"data_dir": w.data, "data": w.data, "gamma": f"gamma {w.gamma}", "costs": w.costs}[name]
    assert f"option '{flag}'" in lines[0] and str(other) in lines[0] and str(own) in lines[0], lines[0]


def test_benchmark_takes_the_champions_dataset_gamma_and_cost_file(w, tmp_path, monkeypatch):
    """``benchmark.py --champion RUN/champion.json`` from another directory: scored on the run's dataset (not
    ``./data``), at its gamma (4, not the split's block length 5) and under its cost file (tokens per second)."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(w.other_data, tmp_path / "data")  # the default dataset is another one
    res = _ok(benchmark_cli, ["--champion", w.vl, "--repeats", "1", "--format", "json"])
    doc = json.loads(res.stdout)
    assert {Path(r["data"]).parent for r in doc["rows"]} == {w.data}
    champ = next(r for r in doc["rows"] if r["role"] == "champion")
    assert champ["gamma"] == w.gamma and champ["tokens_per_second"] is not None
    assert doc["verdict"]["measure"] == "tokens_per_second"


def test_a_subset_of_the_champions_dataset_is_its_dataset(w, tmp_path):
    """A dataset whose metadata says it is a subset of the champion's dataset is accepted (the groups' benchmarks
    score the single policy on each group's subset), and so is a copy of the same files."""
    from evolve.commands.run_context import made_on, run_context

    sub = tmp_path / "sub"
    shutil.copytree(w.other_data, sub)
    meta = json.loads((sub / "metadata.json").read_text())
    meta["subset"] = {"of": str(w.data), "categories": ["qa"]}
    (sub / "metadata.json").write_text(json.dumps(meta))
    ctx = run_context(w.vl)
    assert made_on(sub, ctx) and made_on(shutil.copytree(w.data, tmp_path / "copy"), ctx)
    assert not made_on(w.other_data, ctx)
    meta["subset"]["of"] = str(w.other_data)
    (sub / "metadata.json").write_text(json.dumps(meta))
    assert not made_on(sub, ctx)


def test_a_dataset_of_the_test_split_alone_is_checked_by_its_metadata(w, tmp_path):
    """A dataset holding the test split alone cannot be checked by its train and valid digests: its metadata must
    say it was made as the champion's dataset was (generator, version, seed, configuration)."""
    from evolve.commands.run_context import made_on, run_context

    ctx = run_context(w.vl)
    for name, d in (("same", w.data), ("other", w.other_data)):
        alone = tmp_path / name
        alone.mkdir()
        meta = json.loads((d / "metadata.json").read_text())
        meta.pop("files", None)  # the test split alone: no record of the files it does not hold
        (alone / "metadata.json").write_text(json.dumps(meta))
        shutil.copy(d / "test.parquet", alone / "test.parquet")
        assert made_on(alone, ctx) == (name == "same")
    res = CliRunner().invoke(benchmark_cli, ["--data", str(tmp_path / "other"), "--champion", str(w.vl)])
    assert res.exit_code == 2 and str(tmp_path / "other" / "metadata.json") in res.stderr


def test_trees_takes_the_champions_dataset_and_cost_file(w, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = _ok(benchmark_cli, ["trees", "--champion", w.ts])
    text = " ".join(res.stdout.split())
    assert f"draft trees of {w.data}" in text and f"costs: {w.costs}" in text


def test_export_tunes_on_the_champions_dataset_at_its_gamma(w, tmp_path):
    """Without --data and --costs an engine's nearest setting is tuned on the champion's own dataset, under its run's
    cost file, at its run's gamma (4: the dataset's block length is 5)."""
    res = _ok(evolve_cli, ["export", w.vl_run, "--to", "vllm", "--output", tmp_path / "vllm.json"])
    written = (tmp_path / "vllm.json").read_text()
    assert f"of {w.data} under cost file {w.costs}" in " ".join(written.split())
    length = json.loads(written.splitlines()[-1].split(": ", 1)[1])["num_speculative_tokens"]
    assert 1 <= length <= w.gamma
    assert "tok/s test" in res.stdout


def test_export_of_a_promoted_champion_by_name_takes_its_run_context(w, tmp_path):
    """A champion promoted into a champions directory and named by its name goes with its run's context as its file
    does: tuned on its own dataset without --data, and another dataset refused naming both."""
    champions = tmp_path / "champions"
    champions.mkdir()
    doc = json.loads(w.vl.read_text())
    (champions / "promoted.json").write_text(json.dumps(doc))
    name = doc["name"]
    out = tmp_path / "vllm.json"
    _ok(evolve_cli, ["export", name, "--to", "vllm", "--champions-dir", champions, "--output", out])
    assert f"of {w.data} under cost file {w.costs}" in " ".join(out.read_text().split())
    res = CliRunner().invoke(evolve_cli, ["export", name, "--to", "vllm", "--champions-dir", str(champions),
                                          "--data", str(w.other_data), "--costs", str(w.costs)])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert str(w.other_data) in res.output and str(w.data) in " ".join(res.output.split()), res.output


def test_live_takes_the_champions_gamma_and_cost_file(w):
    from evolve.cli.live import _run_context, live

    ctx = live.make_context("live", ["--target", str(w.target), "--prompts", str(w.prompts), "--champion", str(w.vl)])
    options = dict(ctx.params)
    _run_context(ctx, options)
    assert options["gamma"] == w.gamma and Path(options["costs"]) == w.costs
    ctx = live.make_context("live", ["--target", str(w.target), "--prompts", str(w.prompts), "--rule", "x"])
    options = dict(ctx.params)
    _run_context(ctx, options)
    assert options["gamma"] == 5 and options["costs"] is None  # no champion: the defaults


def test_a_missing_recorded_dataset_or_cost_file_is_named(w, tmp_path, monkeypatch):
    """A champion whose run's dataset or cost file is no longer there, with none given: refused naming it."""
    doc = json.loads(w.vl.read_text())
    doc["provenance"]["data_dir"] = str(tmp_path / "gone")
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(doc))
    res = CliRunner().invoke(benchmark_cli, ["--champion", str(moved), "--repeats", "1"])
    assert res.exit_code == 2 and f"was evolved on {tmp_path / 'gone'}, which is not there" in res.stderr
    doc = json.loads(w.vl.read_text())
    doc["provenance"]["config"]["costs"] = str(tmp_path / "gone.json")
    moved.write_text(json.dumps(doc))
    res = CliRunner().invoke(benchmark_cli, ["--champion", str(moved), "--repeats", "1"])
    assert res.exit_code == 2 and f"cost file {tmp_path / 'gone.json'}, which is not there" in res.stderr
    res = CliRunner().invoke(benchmark_cli, ["--champion", str(moved), "--repeats", "1", "--costs", str(w.costs)])
    assert res.exit_code == 0 and "warning: " in res.stderr and "taken to be the same measurements" in res.stderr


def test_two_champions_of_different_runs_are_refused_without_a_choice(w, tmp_path):
    doc = json.loads(w.vl.read_text())
    doc["provenance"]["config"]["gamma"] = 3
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    res = CliRunner().invoke(benchmark_cli, ["--champion", str(w.vl), "--champion", str(other), "--repeats", "1"])
    assert res.exit_code == 2 and "gamma 4" in res.stderr and "gamma 3" in res.stderr and str(other) in res.stderr


# --- every column in its unit -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
def test_no_tokens_per_second_without_a_cost_file(w, fmt):
    """A verification-length champion evolved under the built-in flat model: its rows' rate is in target steps, not
    seconds, so no column or key says tokens per second, and the verdict ranks by speedup (before: its speedups
    were printed under Tok/s and the verdict called them tokens per second)."""
    res = _ok(benchmark_cli, ["--champion", w.vl_flat, "--repeats", "1", "--format", fmt])
    if fmt == "json":
        doc = json.loads(res.stdout)
        assert all(r["tokens_per_second"] is None for r in doc["rows"])
        assert doc["verdict"]["measure"] == "speedup"
    elif fmt == "csv":
        import csv
        import io

        rows = list(csv.DictReader(io.StringIO(res.stdout)))
        assert rows and all(r["tokens_per_second"] == "" for r in rows)
    else:
        assert "Tok/s" not in res.stdout.split("\n\n")[0] and "by tokens per second" not in res.stdout
        assert "by speedup" in " ".join(res.stdout.split())
        flat = " ".join(res.stdout.split())  # the headroom line is wrapped
        line = flat[flat.index("headroom, test:"):].split(". ")[0]
        assert "tokens per target step" in line and "tok/s" not in line, line


# --- the verdict of a verification-length champion ----------------------------------------------------------------

def _policy(tmp_path, w, expression: str) -> Path:
    doc = json.loads(w.vl.read_text())
    doc["expression"] = expression
    doc["provenance"]["champion_source"] = "evolved"
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_champion_that_never_drafts_is_named_plain_decoding_with_a_next_line(w, tmp_path):
    from evolve.report.compare.verdict import PLAIN_NEXT_STEPS

    path = _policy(tmp_path, w, "sub(-0.5, draft_index)")
    res = _ok(benchmark_cli, ["--champion", path, "--repeats", "1"])
    text = " ".join(res.stdout.split())
    assert "the champion is plain decoding (it never drafts)" in text
    assert PLAIN_NEXT_STEPS[0] in res.stdout and res.stdout.rstrip().splitlines()[-1].startswith("  ")
    doc = json.loads(_ok(benchmark_cli, ["--champion", path, "--repeats", "1", "--format", "json"]).stdout)
    assert doc["verdict"]["hint"] == list(PLAIN_NEXT_STEPS)


def test_a_champion_behind_gets_a_next_line(w, tmp_path):
    path = _policy(tmp_path, w, "sub(1.5, draft_index)")  # two drafts a call: behind the tuned competitors
    doc = json.loads(_ok(benchmark_cli, ["--champion", path, "--repeats", "1", "--format", "json"]).stdout)
    verdict = doc["verdict"]
    assert verdict["winner"] != "champion" and verdict["hint"] and verdict["hint"][0].startswith("next: ")
    hint = " ".join(verdict["hint"])
    assert all(len(line) <= 100 for line in verdict["hint"] if str(w.root) not in line)
    # the run to make next is the champion's own: its kind, objective, dataset, gamma and cost file
    assert "--evolve verify-length --objective tokens_per_second" in hint
    assert f"--data {w.data} --gamma {w.gamma}" in hint and f"--costs {w.costs}" in hint


def test_a_winner_that_never_drafts_is_named_plain_decoding(w):
    """Rows built by hand: the best fixed length tuned to 0 wins; the verdict calls it plain decoding."""
    from evolve.eval.costs import load_costs
    from evolve.kinds.verify_length.eval_policy import LengthMetrics
    from evolve.report.compare.rows import Comparison, Row
    from evolve.report.compare.verdict import compute_verdict

    def row(name, role, tps, drafted):
        m = LengthMetrics(100, 50, 1.0 + drafted, 0.01, tps, tps * 0.01, drafted, drafted)
        return Row(name, role, "test", "d", None, 1.0, gamma=4, verifier=m, program_kind="verify-length")

    comparison = Comparison([row("champion", "champion", 90.0, 1.0), row("best_fixed_gamma", "policy", 100.0, 0.0)],
                            splits=("test",), costs=load_costs(w.costs))
    verdict = compute_verdict(comparison)
    assert verdict.winner == "best_fixed_gamma" and "best_fixed_gamma (plain decoding: it never drafts) wins" in \
        verdict.text and verdict.hint

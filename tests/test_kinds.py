"""Every registered kind of program (evolve/kinds/registry.py) through every command that takes a champion.

For each kind of :data:`evolve.kinds.registry.KINDS` a real small run (``python -m evolve run --evolve KIND
--objective pareto`` on the vocab dataset) gives a champion, which then goes through ``benchmark.py``
(JSON rows), ``benchmark.py simulate`` (JSON), ``python -m evolve export --to numpy``, ``python -m evolve
promote`` + ``show`` (and the promoted champion's automatic rows and registry lookups) and
``benchmark.py live`` (tiny offline Llama models); each asserts the outcome its kind must have
(:data:`EXPECT`): a threshold is scored, simulated, exported and decoded per token; a relaxation weight
as relaxed block verification against (1 - w) p + w q (tokens per call on valid exactly the run's own
valid figure, simulate's rows block verification with the champion's expression as relaxation, an
exported ``relaxation_weight`` and ``relaxed_target``), never as a per-token threshold.

A kind's commands are those whose hook it implements (:attr:`evolve.kinds.base.ProgramKind.commands`), and a
command a kind does not list must refuse it in one line (:func:`test_every_kind_is_evolved_scored_and_exported`;
``tests/test_new_kind.py`` adds a kind with one registration).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from evolve.cli.benchmark import cli as benchmark_cli
from evolve.cli.evolve import cli as evolve_cli
from evolve.eval.objectives import OBJECTIVES, scores_kind
from evolve.kinds.base import HOOK_COMMANDS
from evolve.kinds.registry import KINDS
from evolve.kinds.relaxation import KIND as RELAXATION
from evolve.kinds.threshold import KIND as THRESHOLD
from evolve.kinds.tree_shape import KIND as TREE_SHAPE
from evolve.kinds.verify_length import KIND as VERIFY_LENGTH
from heuristics.champions import read_champion

#: The small runs (seed 5 evolves a relaxation weight reading features, not a constant w).
RUN_ARGS = ["--population", "40", "--generations", "4", "--seed", "5", "--no-progress"]


def objective_of(kind: str) -> str:
    """The objective a small run of ``kind`` uses: pareto where it scores the kind, else the first that does."""
    scoring = [o.name for o in OBJECTIVES.values() if scores_kind(o, KINDS[kind])]
    return "pareto" if "pareto" in scoring else scoring[0]


def _rows(text: str) -> list[dict]:
    """The rows of a JSON output (an array, or an object holding ``rows``)."""
    doc = json.loads(text)
    return doc["rows"] if isinstance(doc, dict) else doc


@pytest.fixture(scope="module")
def champions(vocab_dataset, tmp_path_factory) -> dict[str, Path]:
    """kind name -> the champion.json of a small run evolving that kind on the vocab dataset."""
    out = {}
    for name in KINDS:
        runs = tmp_path_factory.mktemp(f"runs_{name}")
        res = CliRunner().invoke(evolve_cli, ["run", "--data", str(vocab_dataset), "--out", str(runs),
                                              "--evolve", name, "--objective", objective_of(name), *RUN_ARGS])
        assert res.exit_code == 0, res.output
        path = Path(res.stdout.strip().splitlines()[-1]) / "champion.json"
        assert read_champion(path).kind == name
        out[name] = path
    return out


def _valid_figure(path: Path) -> float:
    return read_champion(path).metrics["valid"]["tokens_per_call"]


# --- what each kind must give in each command ---------------------------------------------------------

def _benchmark_threshold(row: dict, path: Path) -> None:
    assert row["program_kind"] == THRESHOLD.name and row["acceptance_rate"] is not None
    assert row["fitness"] is not None
    assert row["tokens_per_call"] == pytest.approx(_valid_figure(path), rel=1e-12)


def _benchmark_relaxation(row: dict, path: Path) -> None:
    assert row["program_kind"] == RELAXATION.name
    # no per-token threshold: the per-token columns are empty, as block_verification's
    assert row["acceptance_rate"] is None and row["fitness"] is None and row["expected_tv"] is None
    assert row["tokens_per_call"] == _valid_figure(path)  # same records, same gamma: exactly the run's figure
    assert row["tv_per_token"] == read_champion(path).metrics["valid"]["tv_per_token"]
    assert row["gamma"] == read_champion(path).provenance["config"]["gamma"]


def _simulate_threshold(rows: list[dict], champ) -> None:
    assert all(r["verification"] == "token" and r["relaxation"] is None for r in rows)


def _simulate_relaxation(rows: list[dict], champ) -> None:
    assert all(r["verification"] == "block" and r["relaxation"] == champ.expression for r in rows)
    assert all(r["tokens_per_call"] > 2.0 for r in rows)  # not a threshold of w (about 1.1 tokens per call)


def _export_threshold(module: dict, champ) -> None:
    assert "acceptance_threshold" in module and "residual_distribution" in module
    assert "relaxation_weight" not in module and "KIND" not in module


def _export_relaxation(module: dict, champ) -> None:
    assert "relaxation_weight" in module and "relaxed_target" in module and module["KIND"] == RELAXATION.name
    assert "acceptance_threshold" not in module
    assert "2403.10444" in module["__doc__"] and "block verification" in module["__doc__"]


def _benchmark_length(row: dict, path: Path) -> None:
    assert row["program_kind"] == VERIFY_LENGTH.name and row["acceptance_rate"] is None
    recorded = read_champion(path).metrics["valid"]
    assert row["tokens_per_call"] == recorded["tokens_per_call"]  # same records, same default cost model
    assert row["speedup"] == recorded["speedup"] and row["tv_per_token"] == 0.0
    assert row["tokens_per_second"] is None  # the flat cost model's time unit is a target step, not a second


def _export_length(module: dict, champ) -> None:
    assert "keep_drafting" in module and module["KIND"] == VERIFY_LENGTH.name
    assert "acceptance_threshold" not in module and "relaxed_target" not in module
    assert "draft one more token where it is 1.0" in module["__doc__"]
    assert list(module["keep_drafting"](draft_index=np.array([0.0, 1.0]), draft_prob=np.array([np.inf, np.nan]),
                                        draft_cumprob=np.array([1.0, 1.0]), draft_entropy=np.array([0.0, 0.0]),
                                        draft_top_prob=np.array([1.0, 1.0]), position=np.array([0.0, 1.0]))) \
        in ([0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0])  # decisions only, never another value


def _trees_shape(row: dict, path: Path) -> None:
    recorded = read_champion(path).metrics["valid"]
    assert row["role"] == "champion" and row["tv_per_token"] == 0.0
    # same tree table, same default cost model: exactly the run's own valid figures
    assert row["tokens_per_call"] == recorded["tokens_per_call"]
    assert row["tokens_per_second"] == recorded["tokens_per_second"]


def _trees_relaxation(row: dict, path: Path) -> None:
    # every harvested tree verified against the mixture (1 - w) p + w q: lossy, more tokens than lossless SpecInfer
    assert row["role"] == "champion" and row["setting"] == "relaxation, whole tree"
    assert row["tv_per_token"] >= 0.0 and row["tokens_per_call"] >= 1.0


def _export_tree(module: dict, champ) -> None:
    assert "tree_children" in module and module["KIND"] == TREE_SHAPE.name
    assert "acceptance_threshold" not in module and "2305.09781" in module["__doc__"]
    counts = module["tree_children"](draft_index=np.array([0.0, 1.0, 2.0]), draft_prob=np.array([1.0, 0.5, np.nan]),
                                     draft_cumprob=np.array([1.0, 0.5, 0.1]), draft_entropy=np.array([0.0, 1.0, 2.0]),
                                     draft_top_prob=np.array([1.0, 0.6, 0.3]), position=np.array([0.0, 0.0, 0.0]))
    assert np.all((counts >= 0) & ((counts == np.floor(counts)) | np.isinf(counts)))  # counts, never fractions


def _live_threshold(decoded, row: dict, champ) -> None:
    from evolve.live.decoding import BLOCK_VERIFICATION
    assert decoded.name == champ.name and decoded.keep is None and not decoded.tree  # drafts every block in full
    assert decoded.verify is not BLOCK_VERIFICATION.verify and set(decoded.needed) == set(champ.rule().program.features)


def _live_relaxation(decoded, row: dict, champ) -> None:
    from evolve.live.decoding import BLOCK_VERIFICATION
    assert decoded.name == champ.name and decoded.keep is None and not decoded.tree
    assert decoded.verify is not BLOCK_VERIFICATION.verify and set(decoded.needed) == set(champ.rule().program.features)
    assert row["tv_per_token"] >= 0.0 and 1.0 <= row["expected_tokens_per_call"]


def _live_length(decoded, row: dict, champ) -> None:
    assert decoded.name == champ.name and decoded.keep is not None and not decoded.tree  # decides per draft step
    gamma = champ.provenance["config"]["gamma"]  # the run's, which live decodes at (none given)
    assert 0.0 <= row["mean_drafted"] <= gamma  # at most gamma drafts per call, as the policy decides
    assert row["tv_per_token"] < 1e-12 and 1.0 <= row["tokens_per_call"] <= 1.0 + row["mean_drafted"] + 1e-12


def _live_shape(decoded, row: dict, champ) -> None:
    program = champ.rule().program
    assert decoded.tree and decoded.name == champ.name
    assert all(np.array_equal(getattr(decoded.program, a), getattr(program, a)) for a in ("ops", "args", "consts"))
    assert row["tv_per_token"] == 0.0 and 1.0 <= row["tokens_per_call"] <= 1.0 + row["mean_drafted"] + 1e-12


#: The kind-specific outcome of each command, by kind name.
EXPECT = {
    THRESHOLD.name: dict(benchmark=_benchmark_threshold, simulate=_simulate_threshold, export=_export_threshold,
                         live=_live_threshold),
    RELAXATION.name: dict(benchmark=_benchmark_relaxation, simulate=_simulate_relaxation, export=_export_relaxation,
                          live=_live_relaxation, trees=_trees_relaxation),
    VERIFY_LENGTH.name: dict(benchmark=_benchmark_length, export=_export_length, live=_live_length),
    TREE_SHAPE.name: dict(trees=_trees_shape, export=_export_tree, live=_live_shape),
}
#: The command each dispatch table serves, as :attr:`evolve.kinds.base.ProgramKind.commands` names it.
BENCHMARK, SIMULATE, PARETO, LIVE, EXPORT, TREES = ("python benchmark.py", "python benchmark.py simulate",
                                                    "python benchmark.py pareto", "python benchmark.py live",
                                                    "python -m evolve export", "python benchmark.py trees")


def kinds_of(command: str) -> list[str]:
    """The registered kinds that list ``command``."""
    return [name for name, kind in KINDS.items() if command in kind.commands]


def test_every_kind_is_evolved_scored_and_exported():
    """Every kind implements the hooks of a search (scorer, metrics, warm start), the API's scoring and export, and
    an objective scores it; the commands it lists are exactly those whose hook it implements."""
    for kind in KINDS.values():
        hooks = kind.hooks()
        for hook in ("metrics", "population", "score", "seeds", "export"):
            assert getattr(hooks, hook) is not None, f"{kind.name} lacks the {hook} hook"
        assert hooks.export.kind is kind
        assert OBJECTIVES_SCORING(kind.name), f"no objective scores {kind.name}"
        assert kind.objectives[0] in OBJECTIVES
        listed = {command for hook, command in HOOK_COMMANDS if getattr(hooks, hook) is not None}
        assert set(kind.commands) == listed
    assert set(EXPECT) == set(KINDS), "this test's table lacks a kind"


def OBJECTIVES_SCORING(kind: str) -> list[str]:
    return [o.name for o in OBJECTIVES.values() if scores_kind(o, KINDS[kind])]


@pytest.mark.parametrize("kind", kinds_of(BENCHMARK))
def test_benchmark(kind, champions, vocab_dataset):
    path = champions[kind]
    res = CliRunner().invoke(benchmark_cli, ["--data", str(vocab_dataset), "--split", "valid", "--champion", str(path),
                                             "--format", "json", "--repeats", "1"])
    assert res.exit_code == 0, res.output
    rows = [r for r in _rows(res.stdout) if r["heuristic"] == read_champion(path).name and r["role"] == "champion"]
    assert len(rows) == 1
    EXPECT[kind]["benchmark"](rows[0], path)


def test_benchmark_skips_a_relaxation_without_block_columns(champions, independent_dataset, tmp_path):
    """On a split without the block columns (RELAXATION.columns) a relaxation champion is skipped with a note,
    as any rule lacking a column is (a champion file without its run's context: one evolved on the split's dataset
    would be scored on its own dataset, which has them)."""
    doc = json.loads(champions[RELAXATION.name].read_text())
    doc["provenance"] = {}
    path = tmp_path / "relaxation.json"
    path.write_text(json.dumps(doc))
    res = CliRunner().invoke(benchmark_cli, ["--data", str(independent_dataset), "--split", "valid", "--champion",
                                             str(path), "--format", "json", "--repeats", "1"])
    assert res.exit_code == 0, res.output
    assert not [r for r in _rows(res.stdout) if r["role"] == "champion"]
    assert f"note: skipped {read_champion(path).name} on valid: it needs column" in res.stderr


@pytest.mark.parametrize("kind", kinds_of(SIMULATE))
def test_simulate(kind, champions):
    champ = read_champion(champions[kind])
    res = CliRunner().invoke(benchmark_cli, ["simulate", "--champion", str(champions[kind]), "--lengths", "60",
                                             "--samples", "3", "--vocab", "60", "--format", "json", "--no-plot"])
    assert res.exit_code == 0, res.output
    rows = _rows(res.stdout)
    assert rows and all(r["rule"] == champ.name for r in rows)
    EXPECT[kind]["simulate"](rows, champ)


def test_simulate_refuses_other_verifications_with_a_relaxation(champions):
    path = str(champions[RELAXATION.name])
    for extra, option in ((["--verify", "token"], "--verify"), (["--verify", "fly"], "--verify"),
                          (["--relaxation", "0.1"], "--relaxation")):
        res = CliRunner().invoke(benchmark_cli, ["simulate", "--champion", path, "--lengths", "20", "--samples", "1",
                                                 "--no-plot", *extra])
        assert res.exit_code == 2
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and option in lines[0] and "relaxation weight" in lines[0], res.output


@pytest.mark.parametrize("kind", kinds_of(EXPORT))
def test_export_numpy(kind, champions, vocab_dataset):
    from evolve.eval.evaluator import EvalData, thresholds
    from evolve.traces.io import load_split

    champ = read_champion(champions[kind])
    res = CliRunner().invoke(evolve_cli, ["export", str(champions[kind]), "--to", "numpy"])
    assert res.exit_code == 0, res.output
    module: dict = {}
    exec(compile(res.stdout, "<exported>", "exec"), module)
    EXPECT[kind]["export"](module, champ)
    # the module's function computes the champion's values on the valid records (clamped as the evaluator)
    data = EVAL_ROWS.get(kind, lambda d: EvalData.from_traces(load_split(d, "valid")))(vocab_dataset)
    got = module[KINDS[kind].function_name](**{f: data.feature(f) for f in module["COLUMNS"]})
    raw = thresholds(champ.rule().program, data)
    want = EXPORTED.get(kind, lambda v: np.where(np.isfinite(v), np.clip(v, 0.0, 1.0), 0.0))(raw)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def _policy_rows(directory):
    """A policy reads the decision rows (what is known before each draft)."""
    from evolve.eval.evaluator import EvalData
    from evolve.kinds.verify_length.eval_policy import decision_data
    from evolve.traces.io import load_split
    return decision_data(EvalData.from_traces(load_split(directory, "valid")))


def _shape_rows(directory):
    """A tree shape reads the decision rows of the valid tree table (the root and every node)."""
    from evolve.eval.tree_scoring import shape_data
    from evolve.traces.tree_tables import load_trees
    return shape_data(load_trees(directory, "valid")).decisions


#: Where an exported module's columns come from, for the kinds that do not read the records themselves.
EVAL_ROWS = {VERIFY_LENGTH.name: _policy_rows, TREE_SHAPE.name: _shape_rows}
#: What an exported module returns from the program's raw values, where it is not the clamped value.
EXPORTED = {VERIFY_LENGTH.name: lambda v: np.where(v > 0, 1.0, 0.0),  # a policy exports its decision, v > 0
            TREE_SHAPE.name: lambda v: np.where(v > 0, np.ceil(v), 0.0)}  # a shape its children counts


@pytest.mark.parametrize("kind", list(KINDS))
def test_promote_show_and_the_promoted_champion(kind, champions, vocab_dataset, tmp_path):
    from heuristics.registry import get_rule

    cdir = tmp_path / "champions"
    run_dir = champions[kind].parent
    name = f"promoted_{kind.replace('-', '_')}"
    res = CliRunner().invoke(evolve_cli, ["promote", str(run_dir), name, "--champions-dir", str(cdir)])
    assert res.exit_code == 0, res.output
    promoted = cdir / f"{name}.json"
    assert json.loads(promoted.read_text())["kind"] == kind
    assert f"def {KINDS[kind].function_name}(" in (cdir / f"{name}.py").read_text()
    shown = CliRunner().invoke(evolve_cli, ["show", str(promoted)])
    assert shown.exit_code == 0 and f"kind: {kind} ({KINDS[kind].title})" in shown.output
    # registry lookups keep the kind, and the automatic champion rows score it by its kind
    assert get_rule(name, champions=True, directory=cdir).kind == kind
    table = CliRunner().invoke(benchmark_cli, ["--data", str(vocab_dataset), "--split", "valid", "--champions-dir",
                                               str(cdir), "--format", "json", "--repeats", "1"])
    assert table.exit_code == 0, table.output
    rows = [r for r in _rows(table.stdout) if r["heuristic"] == name]
    if kind in kinds_of(BENCHMARK):
        assert len(rows) == 1
        EXPECT[kind]["benchmark"](rows[0], promoted)
    else:  # a promoted champion the table cannot score does not stop it: a note names the commands that can
        assert not rows and f"note: skipped {name}: a {kind} program" in table.stderr


@pytest.mark.parametrize("kind", kinds_of(LIVE))
def test_live(kind, champions, llama_files, tmp_path):
    pytest.importorskip("torch")
    from evolve.commands.live import resolve_rules

    champ = read_champion(champions[kind])
    out = tmp_path / "live.json"
    trees = kind == TREE_SHAPE.name  # a tree shape decodes draft trees, beside the fixed tree's row
    res = CliRunner().invoke(benchmark_cli, ["live", "--target", llama_files["target"], "--draft", llama_files["draft"],
                                             "--prompts", llama_files["prompts"], "--champion", str(champions[kind]),
                                             "--max-new-tokens", "6", "--output", str(out),
                                             "--no-progress", "--threads", "1", *(["--tree-nodes", "4"] if trees else [])])
    assert res.exit_code == 0, res.output
    rows = [r for r in json.loads(out.read_text()) if r["engine"] == "evolve"]  # ours (then transformers plain)
    assert [r["rule"] for r in rows] == ["eagle2_full"] * trees + [champ.name]
    EXPECT[kind]["live"](resolve_rules((), [champions[kind]], trees)[-1], rows[-1], champ)


@pytest.mark.parametrize("kind", kinds_of(TREES))
def test_trees(kind, champions, vocab_dataset):
    from evolve.commands.trees import champion_label

    path = champions[kind]
    res = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(vocab_dataset), "--split", "valid", "--champion",
                                             str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = [r for r in json.loads(res.stdout) if r["heuristic"] == champion_label(path) and r["role"] == "champion"]
    assert len(rows) == 1
    EXPECT[kind]["trees"](rows[0], path)


@pytest.mark.parametrize("kind", [k for k in KINDS if k not in kinds_of(TREES)])
def test_trees_refuses_a_kind_it_cannot_run(kind, champions, vocab_dataset):
    res = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(vocab_dataset), "--champion",
                                             str(champions[kind])])
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and "cannot run it" in lines[0] and kind in lines[0], res.output


@pytest.mark.parametrize("kind", [k for k in KINDS if k not in kinds_of(SIMULATE)])
def test_simulate_refuses_a_kind_it_cannot_run(kind, champions):
    res = CliRunner().invoke(benchmark_cli, ["simulate", "--champion", str(champions[kind]), "--lengths", "20",
                                             "--samples", "1", "--no-plot"])
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and "cannot run it" in lines[0] and kind in lines[0], res.output


@pytest.mark.parametrize("kind", [k for k in KINDS if k not in kinds_of(PARETO)])
def test_pareto_refuses_a_kind_it_cannot_run(kind, champions, vocab_dataset, tmp_path):
    res = CliRunner().invoke(benchmark_cli, ["pareto", "--data", str(vocab_dataset), "--run",
                                             str(champions[kind].parent), "--no-plot", "--no-learned"])
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2 and "cannot run it" in lines[-1] and kind in lines[-1], res.output


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_stopped_run_of_every_kind_resumes_to_the_uninterrupted_result(kind, vocab_dataset, tmp_path):
    """The checkpoint holds each kind's evaluator caches (its own metrics record) and resumes exactly."""
    from evolve.search.config import resolve
    from evolve.search.rundir import resume, run
    from evolve.search.state import TIMING_COLUMNS

    settings = {"data": str(vocab_dataset), "evolve": kind, "objective": objective_of(kind), "population": 30,
                "generations": 4, "seed": 2, "migration_interval": 1}
    whole = run(resolve({**settings, "out": str(tmp_path / "whole")}))
    calls: list[int] = []
    stopped = run(resolve({**settings, "out": str(tmp_path / "stopped")}),
                  progress=lambda row: calls.append(row["gen"]), stop=lambda: len(calls) > 2)
    assert stopped.result.interrupted
    done = resume(stopped.run_dir)

    def outcome(info):
        champion = json.loads((info.run_dir / "champion.json").read_text())
        rows = [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in info.result.logbook]
        return champion["expression"], champion["kind"], champion["metrics"], rows

    assert outcome(done) == outcome(whole)

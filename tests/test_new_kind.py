"""A kind of program added with one registration: a throwaway kind defined here runs through ``python -m evolve
run``, ``benchmark.py``, ``benchmark.py live`` and ``python -m evolve export`` (a module, and an engine's
configuration through its own ``engines`` hook) with no edit anywhere else, and the commands it does not implement
refuse it in one line naming the ones it does.

The kind, ``test-half``, is a per-token acceptance threshold that the commands must apply as half the program's
value: its hooks (defined below, nowhere else) score ``tau = min(1, v) / 2``, so a result equal to the plain
threshold's would show that a command went around the kind's own hooks.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from evolve.cli.benchmark import cli as benchmark_cli
from evolve.cli.evolve import cli as evolve_cli
from evolve.eval.evaluator import EvalData, Metrics, evaluate
from evolve.eval.population import PopulationEvaluator, canonical
from evolve.export.codegen import Layout
from evolve.export.engines.base import KindSupport, Setting
from evolve.gp.compiler import compile_nodes, parse, to_string
from evolve.kinds.base import KindHooks, ProgramKind
from evolve.kinds.registry import KINDS, register_kind, unregister_kind
from evolve.commands.compare.table import KindScorer
from evolve.live.decoding import tokenwise_decoder
from evolve.search.warm_start import WarmStart
from evolve.traces.io import load_split
from heuristics.contract import Rule

HALF = ProgramKind(name="test-half", title="halved acceptance threshold",
                   output="tau = min(1, v) / 2 per drafted token", function_name="half_threshold",
                   objectives=("acceptance_quality",), source="a kind defined by tests/test_new_kind.py")


def _halved_nodes(individual):
    """The expression ``mul(0.5, min(1, v))`` of a program v (what this kind's value means), as prefix nodes."""
    return parse(f"mul(0.5, min(1.0, {canonical(individual)[0]}))")


def _halved(nodes):
    """:func:`_halved_nodes` of prefix nodes, compiled."""
    return compile_nodes(_halved_nodes(nodes))


class HalfScorer(PopulationEvaluator):
    """Scores each program as its halved threshold."""

    def evaluate(self, individuals):
        return super().evaluate([_halved_nodes(ind) for ind in individuals])


def _scores(rule, context, traces, repeats):
    return {"metrics": evaluate(_halved(rule.nodes), context.split_data(), context.fitness, gamma=context.gamma,
                                costs=context.costs)}, 0.0


def _live(rule):
    """The halved threshold decoded token by token, as a row named after the rule."""
    halved = Rule(rule.name, expression=to_string(_halved_nodes(rule.nodes)))
    return tokenwise_decoder(halved, rule.name)


HOOKS = KindHooks(
    metrics=Metrics,
    population=lambda context: HalfScorer(context.data, context.fitness, gamma=context.gamma, cache_size=0),
    score=lambda rule, context: evaluate(_halved(rule.nodes), context.split_data(), context.fitness,
                                         gamma=context.gamma, costs=context.costs),
    seeds=lambda cfg, features, train, gamma, objective: WarmStart(),
    compare=KindScorer(lambda rule, data, traces: [c for c in rule.columns_needed if c not in data.available],
                       _scores),
    live=_live,
    export=Layout(HALF, "tau", lambda name, library: f'"""Halved threshold {name} for {library}."""',
                  lambda target: "\n".join([target.columns, target.operators]),
                  "Halved thresholds; see the module doc.", (f"KIND = {HALF.name!r}",)),
    engines=lambda engine: _engine_support(engine),
)


def _engine_support(engine) -> KindSupport:
    """What an engine can do with a halved threshold, from its capabilities: the constant 1 (tau = 1/2 everywhere)
    is the engine's lossless verification knobs with a note (a test kind: only the mapping matters); an engine without
    such knobs refuses the kind, naming the standard rule."""
    lossless = engine.capabilities.lossless
    if lossless is None:
        return KindSupport.refused("the standard rule (standard_rejection)")

    def exact(rule, gamma):
        return Setting("half-threshold", rule, dict(lossless), "a test kind") if rule.expression == "1.0" else None

    return KindSupport(exact, lambda rule, gamma, depth: [], lambda gamma: None, "a halved threshold of 1")


@pytest.fixture(scope="module")
def half_kind():
    register_kind(HALF, HOOKS)
    yield HALF
    unregister_kind(HALF)


@pytest.fixture(scope="module")
def half_run(half_kind, vocab_dataset, tmp_path_factory):
    runs = tmp_path_factory.mktemp("half_runs")
    res = CliRunner().invoke(evolve_cli, ["run", "--data", str(vocab_dataset), "--out", str(runs), "--evolve",
                                          HALF.name, "--objective", "acceptance_quality", "--population", "30",
                                          "--generations", "3", "--seed", "3", "--no-progress"])
    assert res.exit_code == 0, res.output
    return res.stdout.strip().splitlines()[-1]


def test_registration_derives_the_commands(half_kind):
    assert KINDS[HALF.name] is HALF
    assert HALF.commands == ("python benchmark.py", "python benchmark.py live", "python -m evolve export",
                             "python -m evolve promote", "python -m evolve run")


def test_run_evolves_the_new_kind(half_run, vocab_dataset):
    champ = json.loads((__import__("pathlib").Path(half_run) / "champion.json").read_text())
    assert champ["kind"] == HALF.name
    # the champion's recorded valid fitness is its halved threshold's, not the plain threshold's
    valid = EvalData.from_traces(load_split(vocab_dataset, "valid"))
    halved = evaluate(_halved(parse(champ["expression"])), valid).fitness
    assert math.isclose(champ["metrics"]["valid"]["fitness"], halved, rel_tol=1e-12, abs_tol=1e-12)


def test_benchmark_scores_it_with_its_own_hook(half_run, vocab_dataset):
    res = CliRunner().invoke(benchmark_cli, ["--data", str(vocab_dataset), "--split", "valid", "--champion",
                                             f"{half_run}/champion.json", "--format", "json", "--repeats", "1"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    row = next(r for r in rows if r.get("program_kind") == HALF.name)
    champ = json.loads((__import__("pathlib").Path(half_run) / "champion.json").read_text())
    assert math.isclose(row["fitness"], champ["metrics"]["valid"]["fitness"], rel_tol=1e-12, abs_tol=1e-12)


def test_export_writes_its_layout(half_run, tmp_path):
    out = tmp_path / "half.py"
    res = CliRunner().invoke(evolve_cli, ["export", f"{half_run}/champion.json", "--to", "numpy", "--output",
                                          str(out)])
    assert res.exit_code == 0, res.output
    namespace: dict = {}
    exec(compile(out.read_text(), str(out), "exec"), namespace)
    assert namespace["KIND"] == HALF.name and callable(namespace["half_threshold"])
    columns = {c: np.array([0.5, 0.9]) for c in namespace["COLUMNS"]}
    assert np.all(np.isfinite(namespace["half_threshold"](**columns)))


def test_export_to_an_engine_asks_the_kind(half_kind, tmp_path):
    """The engine export asks the kind's own engines hook: a champion it maps is written with the engine's knobs; an
    engine it refuses names the kind's nearest setting; nothing in evolve/export names the kind."""
    from heuristics.champions import Champion, save_champion

    path = save_champion(Champion(name="half_one", expression="1.0", description="t", features=(), kind=HALF.name,
                                  metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}}), tmp_path)[0]
    res = CliRunner().invoke(evolve_cli, ["export", str(path), "--to", "vllm"])
    assert res.exit_code == 0, res.output
    assert "setting: half-threshold" in res.stdout and '"rejection_sample_method": "standard"' in res.stdout
    res = CliRunner().invoke(evolve_cli, ["export", str(path), "--to", "llama.cpp"])
    assert res.exit_code == 2 and "cannot run a test-half program" in res.stderr and "standard_rejection" in res.stderr


@pytest.mark.parametrize("command", ["simulate", "trees"])
def test_commands_without_its_hook_refuse_it(command, half_run, vocab_dataset):
    args = {"simulate": ["simulate", "--champion", f"{half_run}/champion.json", "--lengths", "20", "--samples", "1",
                         "--no-plot"],
            "trees": ["trees", "--data", str(vocab_dataset), "--champion", f"{half_run}/champion.json"]}[command]
    res = CliRunner().invoke(benchmark_cli, args)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert "is a test-half program" in lines[0]
    assert "use: python benchmark.py; python benchmark.py live; python -m evolve export" in lines[0]


def test_api_scores_it(half_run, vocab_dataset):
    from evolve import api
    rule = api.load_champion(__import__("pathlib").Path(half_run))
    metrics = api.evaluate_rule(rule, vocab_dataset, split="valid")
    champ = json.loads((__import__("pathlib").Path(half_run) / "champion.json").read_text())
    assert math.isclose(metrics.fitness, champ["metrics"]["valid"]["fitness"], rel_tol=1e-12, abs_tol=1e-12)


def test_an_unregistered_kind_is_gone(tmp_path):
    other = ProgramKind(name="test-gone", title="t", output="o", function_name="f")
    register_kind(other, KindHooks())
    unregister_kind(other)
    assert "test-gone" not in KINDS
    with pytest.raises(ValueError):
        unregister_kind(KINDS["threshold"])


def test_live_decodes_it_with_its_own_hook(half_run, llama_files):
    """``benchmark.py live`` decodes the champion by the kind's live hook: its row's texts are those of the halved
    threshold decoded as a plain threshold rule (the same random streams), and they differ from the unhalved
    expression's (the commands did not go around the hook)."""
    pytest.importorskip("torch")
    from evolve.commands.live import resolve_rules, run_live
    from evolve.harvest.config import HarvestConfig
    from heuristics.champions import read_champion

    champ = read_champion(f"{half_run}/champion.json")
    halved = Rule("halved", expression=to_string(_halved_nodes(parse(champ.expression))))
    plain = Rule("plain", expression=champ.expression)
    rows = resolve_rules([], [f"{half_run}/champion.json"])
    assert [r.name for r in rows] == [champ.name] and rows[0].needed
    config = HarvestConfig(target=llama_files["target"], prompts=llama_files["prompts"], gamma=3, max_new_tokens=10,
                           seed=5, draft=llama_files["draft"])
    report = run_live(config, [*rows, halved, plain], texts=[0, 1, 2])
    got = {r["rule"]: r for r in report.rows}
    assert got[champ.name]["tokens_per_call"] == got["halved"]["tokens_per_call"]
    assert got[champ.name]["tv_per_token"] == got["halved"]["tv_per_token"]

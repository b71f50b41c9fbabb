"""heuristics.registry: one explicit registry, and every registered rule through every benchmark.py command."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import benchmark
from evolve.errors import InputError
from evolve.traces.io import load_split
from evolve.traces.synth import generate
from evolve.gp.primitives import OPTIONAL_FEATURES
from heuristics import registry
from heuristics.baselines import BASELINES
from heuristics.champions import ENV_DIR, Champion, save_champion
from heuristics.published import FAMILIES, PUBLISHED

NAMES = registry.rule_names()
SMALL_SIMULATION = ["--lengths", "20", "--samples", "2", "--vocab", "50", "--no-plot"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """A tiny vocab-model dataset (every optional column present)."""
    out = tmp_path_factory.mktemp("vocab_all_columns")
    generate.write(generate.generate_dataset("vocab", 3, 4), out)
    return out


@pytest.fixture(scope="module")
def no_champions(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("no_champions")


@pytest.fixture(scope="module")
def table(dataset, no_champions) -> str:
    result = run("--data", dataset, "--champions-dir", no_champions, "--repeats", "1")
    assert result.exit_code == 0, result.output
    return result.stdout


def run(*args):
    return CliRunner().invoke(benchmark.cli, [str(a) for a in args])


# --- the registry itself ------------------------------------------------------------------------

def test_order_is_baselines_then_published_defaults():
    assert NAMES == [r.name for r in BASELINES] + [r.name for r in PUBLISHED]
    assert len(set(NAMES)) == len(NAMES)
    assert registry.get_rule("standard_rejection") is FAMILIES["standard"].default_rule()
    for family in FAMILIES.values():  # the default member of every published family is registered
        assert family.default_rule().name in NAMES
    assert registry.families() == FAMILIES and registry.get_family("ears") is FAMILIES["ears"]
    assert registry.STANDARD_EXPRESSION == registry.get_rule("standard_rejection").expression


def test_unknown_names_are_refused():
    with pytest.raises(InputError, match="unknown rule 'no_such_rule'.*standard_rejection"):
        registry.get_rule("no_such_rule")
    with pytest.raises(InputError, match="unknown family 'no_such_family'"):
        registry.get_family("no_such_family")


def test_importing_the_rule_modules_registers_nothing_and_has_no_cycle():
    code = ("import sys, heuristics.contract, heuristics.baselines, heuristics.published; "
            "import heuristics.contract as c; "
            "print(hasattr(c, 'REGISTRY'), 'heuristics.registry' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_champions_only_when_asked(tmp_path, monkeypatch):
    champion_dir = tmp_path / "champions"
    save_champion(Champion("my_floor", "max(min(1.0, div(target_prob, draft_prob)), 0.2)",
                           metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}}), champion_dir)
    monkeypatch.setenv(ENV_DIR, str(champion_dir))
    assert "my_floor" not in registry.rule_names()
    assert registry.rule_names(champions=True) == NAMES + ["my_floor"]
    assert registry.get_rule("my_floor", champions=True).expression.startswith("max(")
    with pytest.raises(InputError, match="unknown rule 'my_floor'"):
        registry.get_rule("my_floor")


def test_dataset_has_every_optional_column(dataset):
    assert set(OPTIONAL_FEATURES) <= set(load_split(dataset, "test").columns)


# --- every registered rule through every command --------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_rule_in_the_benchmark_table(table, name):
    assert any(line.split()[:1] == [name] for line in table.splitlines()), name
    assert "skipped" not in table  # every column every rule reads is present


@pytest.mark.parametrize("name", NAMES)
def test_rule_through_simulate(name):
    result = run("simulate", "--rule", name, *SMALL_SIMULATION)
    assert result.exit_code == 0, result.output
    assert f"rule {name}," in result.stdout


@pytest.mark.parametrize("name", NAMES)
def test_rule_through_pareto(dataset, name):
    result = run("pareto", "--data", dataset, "--rule", name, "--no-plot")
    assert result.exit_code == 0, result.output
    rows = [line.split()[0] for line in result.stdout.split("oracle bound")[0].splitlines() if line.strip()]
    assert name in rows, result.stdout


def test_pareto_json_has_one_curve_per_named_rule(dataset):
    result = run("pareto", "--data", dataset, "--rule", "ears_0.1", "--rule", "greedy_match", "--format", "json",
                 "--no-plot")
    assert result.exit_code == 0, result.output
    curves = json.loads(result.stdout)["curves"]
    assert list(curves) == list(FAMILIES) + ["ears_0.1", "greedy_match (rule)"]
    assert curves["ears_0.1"]["category"] == "rule" and len(curves["ears_0.1"]["rules"]) == 1


def test_a_promoted_champion_through_every_command(dataset, tmp_path, monkeypatch):
    champion_dir = tmp_path / "champions"
    save_champion(Champion("my_floor", "max(min(1.0, div(target_prob, draft_prob)), 0.2)",
                           metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}}), champion_dir)
    monkeypatch.setenv(ENV_DIR, str(champion_dir))
    table = run("--data", dataset, "--repeats", "1")
    simulated = run("simulate", "--rule", "my_floor", *SMALL_SIMULATION)
    pareto = run("pareto", "--data", dataset, "--rule", "my_floor", "--no-plot")
    for result in (table, simulated, pareto):
        assert result.exit_code == 0, result.output
        assert "my_floor" in result.stdout


@pytest.mark.parametrize("spec, name", [
    ("fuzzy_sd:T=0.1125", "fuzzy_sd_0.1125"), ("fuzzy_sd:0.1125", "fuzzy_sd_0.1125"),
    ("sglang_threshold:t_single=0.5,t_acc=0.8", "sglang_0.5_0.8"), ("trt_relaxed:10,0.6", "trt_relaxed_10_0.6"),
    ("greedy_match:", "greedy_match")])
def test_family_members_by_name(spec, name):
    from heuristics.registry import get_family, get_rule

    rule = get_rule(spec)
    assert rule.name == name
    family = get_family(spec.split(":")[0])
    if family.parameter is not None:  # the member equals the family's own rule at that parameter
        values = [float(v.split("=")[-1]) for v in spec.split(":")[1].split(",")]
        from heuristics.published import Pair
        assert rule.expression == family.make(values[0] if len(values) == 1 else Pair(*values)).expression


@pytest.mark.parametrize("spec, message", [("nope:1", "unknown family 'nope'"), ("fuzzy_sd:x=1", "no parameter 'x'"),
                                           ("fuzzy_sd:2", "must be in"), ("fuzzy_sd:", "takes T=VALUE"),
                                           ("fuzzy_sd:abc", "'abc' is not a number"), ("standard:1", "takes no value"),
                                           ("fixed_gamma:gamma=inf", "not a finite number"),
                                           ("fixed_gamma:gamma=1e400", "not a finite number"),
                                           ("fixed_gamma:-inf", "not a finite number"),
                                           ("fixed_gamma:gamma=nan", "not a finite number"),
                                           ("confidence_threshold:h=inf", "not a finite number"),
                                           ("fuzzy_sd:T=1e999", "not a finite number")])
def test_family_member_errors(spec, message):
    from evolve.errors import InputError
    from heuristics.registry import get_rule

    with pytest.raises(InputError, match=message) as err:
        get_rule(spec)
    assert "\n" not in str(err.value) and spec in str(err.value)


@pytest.mark.parametrize("command", [["export", "fixed_gamma:gamma=inf", "--to", "numpy"],
                                     ["export", "fixed_gamma:gamma=1e400", "--to", "torch"]])
def test_non_finite_family_values_are_one_line_errors_in_commands(command):
    from evolve.cli.evolve import cli as evolve_cli

    result = CliRunner().invoke(evolve_cli, command)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "not a finite number" in result.output and not isinstance(result.exception, OverflowError)

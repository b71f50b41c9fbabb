"""Round 6 of hostile inputs, by class, through the commands: every case exits 0 with its rows computed or left out
with a note, or exits 2 with one line naming the option or file, and what is printed says what was measured.

Generated from the commands where the class is a property of an option: every output option (a path with a control
character), every list option naming a set of values (a repeat), every checked engine version in every form its help
prints. Then the cases of meaning: a flat cost ratio equal to the default beside a champion evolved under a cost
file; a dataset whose every draft is accepted, or none (the learned rows); a promoted champion of another dataset;
records written again over a tree dataset; upper-case SHA-256 digests; a cost file named ``default``; escapes in a
champion's recorded reasons; the verdict's ties and its longer search; a headroom rival inside the spread; warm-start
seeds reading features ``--features`` leaves out; a vLLM file for an acceptance rule.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from command_world import ROOTS, commands, flag_of, params_of
from engine_helpers import require
from evolve.cli.benchmark import cli as benchmark_cli
from evolve.cli.evolve import cli as evolve_cli
from evolve.cli.generate import cli as generate_cli
from evolve.cli.inventory import OutputPath
from evolve.cli.types import CommaList
from evolve.export.engines.registry import VERSIONS, version_forms
from test_hostile_round5_context import _ok, _policy, w  # noqa: F401 - the world fixture
from tree_helpers import record_files, write_tree_tables
from hostile_helpers import one_line_error as _one_line_error

REPO = Path(__file__).resolve().parent.parent


def _option_cases(predicate):
    out = []
    for path, cmd in commands():
        for p in params_of(cmd):
            if isinstance(p, click.Option) and predicate(p):
                out.append(pytest.param(path, flag_of(p), id=f"{' '.join(path)} {flag_of(p)}"))
    return out


def _invoke(path, args):
    return CliRunner().invoke(ROOTS[path[0]], [*path[1:], *map(str, args)])


OUTPUTS = _option_cases(lambda p: isinstance(p.type, OutputPath))
DISTINCT = _option_cases(lambda p: isinstance(p.type, CommaList) and p.type.distinct)


def test_the_generated_cases_cover_the_commands():
    assert len(OUTPUTS) >= 12 and len(DISTINCT) >= 6
    assert any(c.values[1] == "--concurrency" for c in DISTINCT) and any(c.values[1] == "--features" for c in DISTINCT)


@pytest.mark.parametrize("path, flag", OUTPUTS)
def test_an_output_path_with_a_control_character_is_refused(path, flag, tmp_path):
    for bad in ("out\nput", "out\x1b[2Jput"):
        res = _invoke(path, [flag, str(tmp_path / bad)])
        _one_line_error(res, flag, "control character")
        assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("path, flag", DISTINCT)
def test_a_set_of_values_naming_one_twice_is_refused(path, flag):
    param = next(p for where, c in commands() if where == path for p in params_of(c) if flag_of(p) == flag)
    kind = param.type.item_type
    item = (str(max(kind.min or 1, 1)) if isinstance(kind, click.IntRange) else
            "0.01" if isinstance(kind, click.FloatRange) else "draft_prob")
    res = _invoke(path, [flag, f"{item},{item}"])
    _one_line_error(res, flag, "repeats item 1")


def test_a_peer_named_twice_is_refused():
    for args in (["--peers", "transformers,transformers"], ["--peers", "transformers", "--peer-k", "transformers=2",
                                                            "--peer-k", "transformers=3"]):
        res = CliRunner().invoke(benchmark_cli, ["live", "--target", "no.gguf", "--prompts", "p.txt",
                                                 "--draft-ngram", "3,1", *args])
        _one_line_error(res, "--peer", "twice")


@pytest.mark.parametrize("engine, version", [(e, v) for e, vs in VERSIONS.items() for v in vs])
def test_every_form_the_help_prints_names_the_checked_version(engine, version):
    help_text = " ".join(CliRunner().invoke(evolve_cli, ["export", "--help"]).output.split())
    assert version in help_text
    for form in sorted(version_forms(version)) + [version.upper()]:
        res = CliRunner().invoke(evolve_cli, ["export", "standard_rejection", "--to", engine, "--engine-version", form])
        assert res.exit_code == 0, (form, res.output)
    _one_line_error(CliRunner().invoke(evolve_cli, ["export", "standard_rejection", "--to", engine,
                                                    "--engine-version", "0.0.0"]), "--engine-version")


def test_a_flat_cost_ratio_of_any_value_beside_a_cost_file_champion_is_refused(w):  # noqa: F811
    for ratio in ("0.05", "0.1", "0"):
        res = CliRunner().invoke(benchmark_cli, ["--champion", str(w.vl), "--cost-ratio", ratio, "--repeats", "1"])
        _one_line_error(res, "--cost-ratio", w.costs)
    flat = CliRunner().invoke(benchmark_cli, ["--champion", str(w.vl_flat), "--cost-ratio", "0.05", "--repeats", "1"])
    assert flat.exit_code == 0, flat.output


def _with_outcomes(src: Path, dst: Path, accepted: bool) -> Path:
    """A copy of ``src`` in which every draft is accepted (p = q) or none is (p = 0), the records consistent."""
    shutil.copytree(src, dst)
    for f in dst.glob("*.trees.parquet"):
        f.unlink()
    for s in ("train", "valid", "test"):
        df = pd.read_parquet(dst / f"{s}.parquet")
        keep = ["seq_id", "position", "draft_prob", "target_prob", "draft_entropy", "target_entropy",
                "top_token_match", "rand_value", "baseline_accepts", "draft_index", "draft_top_prob"]
        df = df[keep].copy()
        df["target_prob"] = df["draft_prob"] if accepted else 0.0
        df["baseline_accepts"] = df["rand_value"] < np.minimum(1.0, df["target_prob"] / df["draft_prob"])
        df.to_parquet(dst / f"{s}.parquet", index=False)
    record_files(dst)
    return dst


@pytest.mark.parametrize("accepted", [True, False], ids=["every draft accepted", "none accepted"])
def test_learned_rows_on_one_class_are_left_out_with_a_note(w, tmp_path, accepted):  # noqa: F811
    data = _with_outcomes(w.data, tmp_path / "d", accepted)
    res = CliRunner().invoke(benchmark_cli, ["--data", str(data), "--costs", str(w.costs), "--repeats", "1",
                                             "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    names = {r["heuristic"] for r in doc["rows"]}
    assert "best_fixed_gamma" in names and not names & {"learned_logistic", "learned_gbm"}
    table = CliRunner().invoke(benchmark_cli, ["--data", str(data), "--costs", str(w.costs), "--repeats", "1"])
    text = " ".join(table.output.split())
    assert table.exit_code == 0 and "left out learned_logistic and learned_gbm on test" in text
    assert ("every draft" if accepted else "no draft") in text


def test_a_promoted_champion_of_another_dataset_is_left_out_with_a_note(w, tmp_path):  # noqa: F811
    champs = tmp_path / "champs"
    champs.mkdir()
    shutil.copy(w.vl, champs / "policy.json")
    name = json.loads(w.vl.read_text())["name"]
    base = ["--costs", str(w.costs), "--repeats", "1", "--champions-dir", str(champs), "--format", "json"]
    own = json.loads(_ok(benchmark_cli, ["--data", w.data, *base]).stdout)
    assert name in {r["heuristic"] for r in own["rows"]}
    other = CliRunner().invoke(benchmark_cli, ["--data", str(w.other_data), *base[:-2]])
    assert other.exit_code == 0, other.output
    text = " ".join(other.output.split())
    assert f"left out promoted champion {name}" in text and f"--champion {champs / 'policy.json'}" in text
    assert f"headroom, test: {name}" not in text


def test_records_written_again_over_a_tree_dataset_leave_no_tree_table(tmp_path):
    d = tmp_path / "d"
    _ok(generate_cli, ["--out", d, "--sequences", "30", "--seed", "3"])
    write_tree_tables(d, seed=3)
    assert list(d.glob("*.trees.parquet"))
    _ok(generate_cli, ["--out", d, "--sequences", "30", "--seed", "4"])
    assert not list(d.glob("*.trees.parquet"))
    _ok(benchmark_cli, ["--data", d, "--repeats", "1"])


def test_digests_recorded_in_upper_case_are_the_same_digests(w, tmp_path):  # noqa: F811
    d = tmp_path / "d"
    shutil.copytree(w.data, d)
    meta = json.loads((d / "metadata.json").read_text())
    for entry in meta["files"].values():
        entry["sha256"] = entry["sha256"].upper()
    (d / "metadata.json").write_text(json.dumps(meta))
    _ok(benchmark_cli, ["--data", d, "--repeats", "1"])


def test_a_cost_file_named_default_is_never_taken_for_the_built_in_model(w, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    shutil.copy(w.costs, tmp_path / "default")
    base = ["run", "--data", str(w.data), "--out", str(tmp_path / "runs"), "--population", "6", "--generations", "1",
            "--evolve", "verify-length", "--objective", "tokens_per_second", "--no-progress"]
    _one_line_error(CliRunner().invoke(evolve_cli, [*base, "--costs", "default"]), "--costs", "./default")
    (tmp_path / "c.toml").write_text('costs = "default"\n')
    _one_line_error(CliRunner().invoke(evolve_cli, [*base, "--config", "c.toml"]), "c.toml", "./default")
    res = _ok(evolve_cli, [*base, "--costs", "./default"])
    assert json.loads((Path(res.stdout.strip().splitlines()[-1]) / "champion.json").read_text())


def test_escapes_in_a_champion_file_are_shown_escaped(w, tmp_path):  # noqa: F811
    doc = json.loads(w.vl.read_text())
    doc["provenance"]["champion_guard"] = {"kept": True, "reason": "ahead \x1b[31mred\x1b[0m\nsecond line"}
    doc["provenance"]["champion_source"] = "evolved"
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    res = _ok(evolve_cli, ["show", path])
    assert "\x1b" not in res.output and "\\x1b[31mred" in res.output and "\\nsecond line" in res.output


def test_a_seeded_champion_kept_by_the_guard_says_so(w, tmp_path):  # noqa: F811
    doc = json.loads(w.vl.read_text())
    doc["provenance"]["champion_source"] = "seeded:fixed_gamma=2"
    doc["provenance"]["champion_guard"] = {"kept": False, "reason": "not ahead by more than the noise"}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    out = " ".join(_ok(evolve_cli, ["show", path]).output.split())
    assert "the champion guard kept it" in out and "found nothing better" not in out


def test_the_longer_search_is_longer_than_the_champions_own(w, tmp_path):  # noqa: F811
    path = _policy(tmp_path, w, "sub(1.5, draft_index)")
    doc = json.loads(path.read_text())
    doc["provenance"]["config"].update(population=1000, generations=100)
    path.write_text(json.dumps(doc))
    verdict = json.loads(_ok(benchmark_cli, ["--champion", path, "--repeats", "1", "--format", "json"]).stdout)[
        "verdict"]
    hint = " ".join(verdict["hint"])
    assert "--population 2000 --generations 200" in hint and "--population 300" not in hint


def test_rows_that_share_the_best_value_tie():
    from evolve.eval.costs import DEFAULT_COSTS
    from evolve.kinds.verify_length.eval_policy import LengthMetrics
    from evolve.report.compare.rows import Comparison, Row
    from evolve.report.compare.verdict import compute_verdict

    def row(name, role, tps):
        m = LengthMetrics(100, 50, 2.0, 0.01, tps, tps * 0.01, 1.0, 1.0)
        return Row(name, role, "test", "d", None, 1.0, gamma=4, verifier=m, program_kind="verify-length")

    rows = [row("champion", "champion", 11.67), *(row(f"r{i}", "policy", 11.67) for i in range(4)),
            row("slow", "policy", 9.0)]
    verdict = compute_verdict(Comparison(rows, splits=("test",), costs=DEFAULT_COSTS))
    assert " wins " not in verdict.text and "ties with" in verdict.text and "5 rows share the best value" in \
        verdict.text, verdict.text


def test_a_rival_ahead_inside_the_spread_is_a_tie():
    from evolve.report.headroom import headroom_line

    base = {"champion": "c", "split": "test", "headroom": {"share": 0.3, "fixed": 1.0, "champion": 1.1, "bound": 1.4}}
    tied = headroom_line({**base, "rivals": [{"name": "learned_gbm", "ratio": 0.999, "low": 0.997, "high": 1.001}]})
    assert "tied with learned_gbm 0.999x" in tied and "behind learned" not in tied and "beats" not in tied
    behind = headroom_line({**base, "rivals": [{"name": "learned_gbm", "ratio": 0.95, "low": 0.93, "high": 0.97}]})
    assert "behind learned_gbm 0.950x" in behind and "the learned baseline beats it" in behind


def test_warm_start_seeds_read_only_the_features_given(w, tmp_path):  # noqa: F811
    res = _ok(evolve_cli, ["run", "--data", w.data, "--out", tmp_path / "runs", "--population", "10",
                           "--generations", "1", "--evolve", "verify-length", "--objective", "tokens_per_second",
                           "--costs", w.costs, "--features", "draft_prob,draft_top_prob", "--no-progress"])
    run = Path(res.stdout.strip().splitlines()[-1])
    skipped = json.loads((run / "run.json").read_text())["skipped_rules"]
    assert any("setting 'features'" in s["reason"] and "draft_index" in s["reason"] for s in skipped), skipped


def test_a_vllm_file_for_an_acceptance_rule_carries_its_draft_length(w, tmp_path):  # noqa: F811
    res = _ok(evolve_cli, ["run", "--data", w.data, "--out", tmp_path / "runs", "--population", "6",
                           "--generations", "1", "--gamma", "3", "--no-progress"])
    champion = Path(res.stdout.strip().splitlines()[-1]) / "champion.json"
    text = _ok(evolve_cli, ["export", champion, "--to", "vllm"]).stdout
    spec = json.loads(text.split("speculative-config: ", 1)[1])
    assert spec["num_speculative_tokens"] == 3 and "add num_speculative_tokens" not in text
    speculative = require("vllm.config.speculative")
    spec.update(method="ngram", prompt_lookup_max=3)
    assert speculative.SpeculativeConfig(**spec).num_speculative_tokens == 3

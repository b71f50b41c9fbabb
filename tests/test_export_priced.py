"""``python -m evolve export CHAMPION --to llama-cpp-python --costs FILE``: the module priced in its engine
(:mod:`evolve.export.engines.priced`): the champion re-scored under the engine's cost file beside plain decoding and the
fixed lengths, the fastest on valid written, and a cost file of another engine refused naming both."""
from __future__ import annotations

import json
import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
pytest.importorskip("torch")
pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402

from evolve.cli.evolve import cli  # noqa: E402
from evolve.errors import InputError  # noqa: E402
from evolve.eval.costs import costs_from_dict  # noqa: E402
from evolve.export.engines.priced import check_cost_engine, priced_policy  # noqa: E402
from evolve.commands.rules import rule_named  # noqa: E402

POLICY = "fixed_gamma:gamma=3"


@pytest.fixture(scope="module")
def lookup_data(llama_files):
    """A prompt-lookup harvest of the tiny target (greedy, gamma 3): train, valid and test splits."""
    from harvest_helpers import lookup_harvest

    return lookup_harvest(llama_files, "out-lookup-priced")


def _costs(tmp_path, name: str, forward: list[float], engine: str | None = "llama-cpp-python", loop: bool = True):
    doc = {"target_forward_s": forward, "draft_token_s": 1e-5, "plain_token_s": forward[0]}
    if engine is not None:
        doc["engine"] = engine
    if loop:
        doc["measured_in"] = "engine loop"
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_drafting_that_costs_more_than_it_gains_writes_plain_decoding(lookup_data, tmp_path):
    """Under a steep engine (each verified token half a step more), plain decoding is predicted faster than the
    policy there, so the module written drafts nothing and says so; under a flat one the policy is written."""
    steep = _costs(tmp_path, "steep.json", [0.02 * (1 + 1.5 * t) for t in range(8)])
    flat = _costs(tmp_path, "flat.json", [0.02] * 8)
    lost = priced_policy(rule_named(POLICY), lookup_data, steep, None, "llama-cpp-python")
    kept = priced_policy(rule_named(POLICY), lookup_data, flat, None, "llama-cpp-python")
    assert lost.rule.name == "fixed_gamma:gamma=0" and "in place of the champion" in lost.notes[1]
    assert kept.rule.name != "fixed_gamma:gamma=0"  # flat verification: a kept draft is a free token
    written = [r for r in kept.rows if r.role.endswith("(written)")]
    assert len(written) == 1 and all(r.valid <= written[0].valid for r in kept.rows)
    assert lost.plain == pytest.approx(1 / 0.02)
    out = tmp_path / "draft.py"
    res = CliRunner().invoke(cli, ["export", POLICY, "--to", "llama-cpp-python", "--data", lookup_data, "--costs", steep,
                                   "--output", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "fixed_gamma:gamma=0 in place of the champion" in text.replace("\n", " ")
    assert "plain decoding (written)" in res.output and "speedup test" in res.output
    compile(text, "draft.py", "exec")


@pytest.mark.parametrize("engine,loop,words", [
    ("transformers", True, "timed in transformers's own loop, but the export is for llama-cpp-python"),
    ("llama_cpp", False, "timed in this project's llama_cpp backend, but the export is for llama-cpp-python"),
])
def test_a_cost_file_of_another_engine_is_refused_naming_both(lookup_data, tmp_path, engine, loop, words):
    path = _costs(tmp_path, "other.json", [0.02] * 8, engine, loop)
    res = CliRunner().invoke(cli, ["export", POLICY, "--to", "llama-cpp-python", "--data", lookup_data,
                                   "--costs", path, "--output", str(tmp_path / "x.py")])
    assert res.exit_code == 2 and words in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1 and not (tmp_path / "x.py").exists()


def test_the_transformers_module_is_priced_under_transformers_loop_file_only(lookup_data, tmp_path):
    """``--to transformers-generate --costs FILE``: priced under a file of transformers' own loop (its module runs
    there), plain decoding written where drafting is predicted to lose; a file of llama-cpp-python's loop is refused
    naming both engines."""
    steep = _costs(tmp_path, "tf_steep.json", [0.02 * (1 + 1.5 * t) for t in range(8)], "transformers")
    out = tmp_path / "candidates.py"
    res = CliRunner().invoke(cli, ["export", POLICY, "--to", "transformers-generate", "--data", lookup_data,
                                   "--costs", steep, "--output", str(out)])
    assert res.exit_code == 0, res.output
    text = " ".join(out.read_text().split())
    assert "priced in transformers under cost file" in text and "fixed_gamma:gamma=0 in place of the champion" in text
    assert "class PolicyCandidates(CandidateGenerator)" in out.read_text()
    other = _costs(tmp_path, "lcp.json", [0.02] * 8, "llama-cpp-python")
    res = CliRunner().invoke(cli, ["export", POLICY, "--to", "transformers-generate", "--data", lookup_data,
                                   "--costs", other, "--output", str(tmp_path / "x.py")])
    assert res.exit_code == 2 and "llama-cpp-python's own loop, but the export is for transformers" in res.output
    assert len(res.output.strip().splitlines()) == 1 and not (tmp_path / "x.py").exists()


def test_which_files_price_which_engine(tmp_path):
    def costs(**extra):
        return costs_from_dict({"target_forward_s": [0.02], "draft_token_s": 0.0, **extra}, "c.json")

    check_cost_engine("c.json", costs(), "llama-cpp-python")  # written by hand: the user's statement
    check_cost_engine("c.json", costs(engine="llama-cpp-python", measured_in="engine loop"), "llama-cpp-python")
    check_cost_engine("c.json", costs(engine="torch"), "vllm", own_loop=False)  # a backend's file stands for vLLM
    with pytest.raises(InputError, match="transformers's own loop, but the export is for vllm"):
        check_cost_engine("c.json", costs(engine="transformers", measured_in="engine loop"), "vllm", own_loop=False)


def test_data_without_costs_is_a_usage_error(tmp_path):
    res = CliRunner().invoke(cli, ["export", POLICY, "--to", "llama-cpp-python", "--data", str(tmp_path)])
    assert res.exit_code == 2 and "--data goes with --costs" in res.output


def test_a_run_told_its_target_engine_reads_only_what_that_engine_gives(lookup_data, tmp_path):
    """``run --target-engine llama-cpp-python``: auto features become the engine's step columns (the champion then
    exports there); a feature it cannot give, or a kind it does not run, is refused in one line before the search."""
    from dataclasses import replace

    from evolve.commands.target_engine import for_engine
    from evolve.export.engines.llama_cpp_python import COLUMN_VALUES
    from evolve.search.config import resolve

    cfg = resolve({"data": lookup_data, "evolve": "verify-length", "objective": "tokens_per_second"}, None)
    assert for_engine(cfg, "llama-cpp-python").features == tuple(COLUMN_VALUES)
    with pytest.raises(InputError, match="'draft_prob' is not given by llama-cpp-python's drafter"):
        for_engine(replace(cfg, features=("draft_index", "draft_prob")), "llama-cpp-python")
    res = CliRunner().invoke(cli, ["run", "--data", lookup_data, "--evolve", "threshold", "--target-engine",
                                   "llama-cpp-python", "--out", str(tmp_path / "runs"), "--no-progress"])
    assert res.exit_code == 2 and "not a threshold program" in res.output and "Traceback" not in res.output


@pytest.fixture(scope="module")
def engine_run(lookup_data, tmp_path_factory):
    """A short verify-length run told its target engine, under a cost file of llama-cpp-python's loop."""
    root = tmp_path_factory.mktemp("engine-run")
    costs = _costs(root, "lcp.json", [0.02 * (1 + 0.1 * t) for t in range(8)])
    res = CliRunner().invoke(cli, ["run", "--data", lookup_data, "--evolve", "verify-length", "--objective",
                                   "tokens_per_second", "--gamma", "3", "--costs", costs, "--target-engine",
                                   "llama-cpp-python", "--population", "8", "--generations", "1", "--out",
                                   str(root / "runs"), "--no-progress"])
    assert res.exit_code == 0, res.output
    return res.stdout.strip().splitlines()[-1], root


def test_the_targeted_champion_exports_and_a_loop_file_prices_only_its_engine(engine_run, lookup_data):
    """The champion of a run told its target engine exports there; a file timed in transformers' loop prices an
    export to transformers whatever file the run read, is refused for vLLM naming both engines, and a file of no
    engine that differs from the run's is refused as before (the run's context)."""
    run_dir, root = engine_run
    assert CliRunner().invoke(cli, ["export", run_dir, "--to", "llama-cpp-python"]).exit_code == 0
    loop = _costs(root, "tf.json", [0.05, 0.055, 0.06, 0.07, 0.08], "transformers")
    ok = CliRunner().invoke(cli, ["export", run_dir, "--to", "transformers", "--data", lookup_data, "--costs", loop,
                                  "--output", str(root / "tf.json.out")])
    assert ok.exit_code == 0, ok.output
    refused = CliRunner().invoke(cli, ["export", run_dir, "--to", "vllm", "--data", lookup_data, "--costs", loop])
    assert refused.exit_code == 2 and "transformers's own loop, but the export is for vllm" in refused.output
    other = _costs(root, "other.json", [0.05, 0.06, 0.07, 0.08, 0.09], None, False)
    differs = CliRunner().invoke(cli, ["export", run_dir, "--to", "transformers", "--data", lookup_data, "--costs",
                                       other])
    assert differs.exit_code == 2 and "Traceback" not in differs.output


def test_an_engine_setting_predicted_slower_than_plain_decoding_is_never_written(engine_run, lookup_data):
    """Never a configuration predicted to lose: under an engine file (transformers, its own loop) where every draft
    costs more than it gains, the policy's best expressible setting is drafting nothing (plain decoding, speedup
    1.000x); an exact champion (a fixed length vLLM runs as written) is replaced by plain decoding, named in the
    table's footer and in the file, which vLLM then reads as no speculative-config."""
    run_dir, root = engine_run
    steep = _costs(root, "tf_steep.json", [0.02 * (1 + 2.0 * t) for t in range(8)], "transformers")
    out = root / "tf_steep.out"
    res = CliRunner().invoke(cli, ["export", run_dir, "--to", "transformers", "--data", lookup_data, "--costs", steep,
                                   "--output", str(out)])
    assert res.exit_code == 0, res.output
    best = next(line.split() for line in res.output.splitlines() if line.startswith("best expressible"))
    assert best[2] == "length=0" and best[-1] == "1.000x"
    assert "use: plain decoding" in out.read_text()
    by_hand = _costs(root, "steep.json", [0.02 * (1 + 2.0 * t) for t in range(8)], None, False)
    out = root / "steep.yaml"
    res = CliRunner().invoke(cli, ["export", "fixed_gamma:gamma=3", "--to", "vllm", "--data", lookup_data, "--costs",
                                   by_hand, "--output", str(out)])
    assert res.exit_code == 0, res.output
    shown = " ".join(res.output.split())
    assert "plain decoding (written)" in shown and "deploy without speculation" in shown
    text = " ".join(out.read_text().split())
    assert "written: plain decoding in place of length=3" in text and "use: plain decoding" in text
    from evolve.export.engines.text import read_yaml_text

    assert read_yaml_text(out.read_text()) == {}  # no speculative-config: vLLM decodes plainly


def test_a_run_targeting_llama_cpp_python_with_a_lossy_verifier_is_refused_before_the_search(lookup_data):
    from evolve.commands.target_engine import for_engine
    from evolve.search.config import resolve

    cfg = resolve({"data": lookup_data, "evolve": "verify-length", "objective": "tokens_per_second",
                   "verify_with": "fuzzy_sd_0.1"}, None)
    with pytest.raises(InputError, match="not with 'fuzzy_sd_0.1'") as info:
        for_engine(cfg, "llama-cpp-python")
    assert info.value.param == "verify_with"

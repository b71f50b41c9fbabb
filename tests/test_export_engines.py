"""Engine targets of ``python -m evolve export --to ENGINE``: every kind x every engine writes a configuration the
engine parses with the champion's values, or refuses in one line; a tuned export prints the gap table; the vLLM and
TensorRT-LLM renderers write a per-batch-size schedule."""
from __future__ import annotations

import json
import shlex

import pytest
from click.testing import CliRunner

from evolve.__main__ import cli
from evolve.errors import InputError
from evolve.export.engines.base import Capabilities, Engine, Provenance, Setting
from evolve.export.engines.shapes import tree_paths
from evolve.export.engines.text import read_yaml_text
from evolve.eval.costs import load_costs
from evolve.export.engines.deploy import Scorer, engine_config
from evolve.export.engines.registry import ENGINES, register_engine, unregister_engine
from evolve.export.engines import tensorrt_llm, vllm
from evolve.kinds.tree_shape.export_engines import static_tree_expression
from heuristics.champions import Champion, save_champion
from heuristics.contract import Rule
from heuristics.registry import get_rule

YAML_ENGINES = {"vllm": "speculative-config", "tensorrt-llm": "speculative_config"}
FLAG_ENGINES = {"sglang", "llama.cpp"}


def parse(engine: str, text: str) -> dict:
    """The engine's configuration as a dict: the YAML mapping under the engine's key, the flags (flag -> value
    text), or the JSON of generate() arguments."""
    if engine in YAML_ENGINES:
        try:
            import yaml
            assert yaml.safe_load(text) == read_yaml_text(text) or yaml.safe_load(text) is None
        except ImportError:
            pass
        return read_yaml_text(text).get(YAML_ENGINES[engine], {})
    if engine in FLAG_ENGINES:
        lines = [line for line in text.splitlines() if line and not line.startswith("#")]
        assert len(lines) <= 1  # no line: nothing to set (the engine's own default)
        words = shlex.split(lines[0]) if lines else []
        return dict(zip(words[::2], words[1::2]))
    body = json.loads(text)
    assert "_provenance" in body
    return {k: v for k, v in body.items() if k != "_provenance"}


def _champion(directory, name, expression, kind, features) -> str:
    champ = Champion(name=name, expression=expression, description="test champion", features=features, kind=kind,
                     metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}})
    return str(save_champion(champ, directory)[0])


def export(*args):
    return CliRunner().invoke(cli, ["export", *map(str, args)])


def _refused(result, *words):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) == 1, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


# --- every kind x every engine, exact or refused ----------------------------------------------------------------

#: fixed_gamma:gamma=3 in each engine's knobs.
LENGTH_3 = {"vllm": {"num_speculative_tokens": 3, "rejection_sample_method": "standard",
                     "draft_sample_method": "probabilistic"},
            "sglang": {"--speculative-num-steps": "3", "--speculative-eagle-topk": "1",
                       "--speculative-num-draft-tokens": "4"},
            "tensorrt-llm": {"decoding_type": "Eagle", "max_draft_len": 3},
            "llama.cpp": {"--spec-type": "draft-simple", "--spec-draft-n-max": "3", "--spec-draft-n-min": "0",
                          "--spec-draft-p-min": "0"},
            "transformers": {"num_assistant_tokens": 3, "num_assistant_tokens_schedule": "constant",
                             "assistant_confidence_threshold": 0.0}}


@pytest.mark.parametrize("engine", list(LENGTH_3))
def test_a_fixed_length_is_the_engines_draft_length(engine, tmp_path):
    out = tmp_path / "config.txt"
    result = export("fixed_gamma:gamma=3", "--to", engine, "--output", out)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert parse(engine, text) == LENGTH_3[engine]
    assert "fixed_gamma:gamma=3" in text and "sub(2.5, draft_index)" in text  # the provenance


@pytest.mark.parametrize("engine", list(ENGINES))
def test_the_standard_rule_is_every_engines_lossless_verification(engine):
    result = export("standard_rejection", "--to", engine)
    assert result.exit_code == 0, result.output
    config = parse(engine, result.stdout)
    if engine == "vllm":
        assert config["rejection_sample_method"] == "standard"
    if engine == "sglang":
        assert config == {"--speculative-accept-threshold-single": "1.0", "--speculative-accept-threshold-acc": "1.0"}
    if engine == "tensorrt-llm":
        assert config["use_relaxed_acceptance_for_thinking"] is False


def test_shipped_relaxations_are_their_engines_knobs():
    sglang = parse("sglang", export("sglang_0.5_0.8", "--to", "sglang").stdout)
    assert sglang == {"--speculative-accept-threshold-single": "0.5", "--speculative-accept-threshold-acc": "0.8"}
    trt = parse("tensorrt-llm", export("trt_relaxed_10_0.6", "--to", "tensorrt-llm").stdout)
    assert trt == {"decoding_type": "MTP", "use_relaxed_acceptance_for_thinking": True, "relaxed_topk": 10,
                   "relaxed_delta": 0.6}
    for engine in ("vllm", "llama.cpp", "transformers"):  # no engine but its own runs a relaxed rule
        _refused(export("sglang_0.5_0.8", "--to", engine), "cannot express 'sglang_0.5_0.8'", "--data DIR")


def test_a_static_tree_is_the_engines_tree(tmp_path):
    path = _champion(tmp_path, "tree", static_tree_expression((2, 1)), "tree-shape", ("draft_index",))
    paths = [(0,), (1,), (0, 0), (1, 0)]
    assert tree_paths((2, 1)) == paths
    t = parse("tensorrt-llm", export(path, "--to", "tensorrt-llm").stdout)
    assert t["eagle_choices"] == [list(p) for p in paths] and t["max_draft_len"] == 2
    assert t["max_total_draft_tokens"] == 4
    # vLLM 0.33.0 has no static tree (speculative_token_tree is not a field): its nearest setting is a chain
    for engine in ("vllm", "sglang", "llama.cpp", "transformers"):
        _refused(export(path, "--to", engine), "cannot express 'tree'", "nearest setting family")
    chain = _champion(tmp_path, "chain", static_tree_expression((1, 1, 1)), "tree-shape", ("draft_index",))
    assert parse("llama.cpp", export(chain, "--to", "llama.cpp").stdout)["--spec-draft-n-max"] == "3"
    assert parse("transformers", export(chain, "--to", "transformers").stdout)["num_assistant_tokens"] == 3
    assert parse("sglang", export(chain, "--to", "sglang").stdout)["--speculative-num-steps"] == "3"
    assert parse("vllm", export(chain, "--to", "vllm").stdout)["num_speculative_tokens"] == 3


def test_a_relaxation_weight_of_zero_is_block_verification(tmp_path):
    zero = _champion(tmp_path, "w_zero", "0.0", "relaxation", ())
    text = export(zero, "--to", "vllm").stdout
    assert parse("vllm", text)["rejection_sample_method"] == "block" and "VLLM_USE_V2_MODEL_RUNNER=1" in text
    assert "--speculative-use-block-verification" in export(zero, "--to", "sglang").stdout
    weight = _champion(tmp_path, "w_entropy", "mul(0.5, draft_entropy)", "relaxation", ("draft_entropy",))
    _refused(export(weight, "--to", "vllm"), "cannot express 'w_entropy'", "block")
    for engine in ("tensorrt-llm", "llama.cpp", "transformers"):
        _refused(export(zero, "--to", engine), "cannot run a relaxation program", "standard_rejection")


def test_confidence_stops_transformers_exactly_and_llama_cpp_refuses():
    config = parse("transformers", export("confidence_threshold:h=0.4", "--to", "transformers").stdout)
    assert config["assistant_confidence_threshold"] == 0.4 and config["num_assistant_tokens_schedule"] == "constant"
    # llama.cpp's p-min drops the token it tests; no policy over the records is that stop
    _refused(export("confidence_threshold:h=0.4", "--to", "llama.cpp"), "cannot express",
             "--spec-draft-n-max")


def test_block_verified_length_is_vllms_block_method(tmp_path):
    champ = Champion(name="blocky", expression="sub(1.5, draft_index)", description="test", kind="verify-length",
                     features=("draft_index",), metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}},
                     provenance={"config": {"evolve": "verify-length", "verify_with": "block_verification"}})
    path = save_champion(champ, tmp_path)[0]
    config = parse("vllm", export(path, "--to", "vllm").stdout)
    assert config["rejection_sample_method"] == "block" and config["num_speculative_tokens"] == 2
    _refused(export(path, "--to", "llama.cpp"), "cannot express 'blocky'")


# --- tuned on data ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cost_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("costs") / "costs.json"
    path.write_text(json.dumps({"target_forward_s": [0.02, 0.021, 0.022, 0.023, 0.025, 0.027, 0.03, 0.033],
                                "draft_token_s": 0.004}))
    return path


def test_a_tuned_export_prints_the_gap_and_beats_the_default_on_valid(vocab_dataset, cost_file, tmp_path):
    out = tmp_path / "flags.txt"
    result = export("confidence_threshold:h=0.4", "--to", "llama.cpp", "--data", vocab_dataset, "--costs", cost_file,
                    "--output", out)
    assert result.exit_code == 0, result.output
    table = result.stdout
    for row in ("champion", "best expressible", "engine default", "tok/s valid", "tok/s test"):
        assert row in table
    assert max(len(line) for line in table.splitlines()) <= 100
    flags = parse("llama.cpp", out.read_text())
    assert flags["--spec-draft-p-min"] == "0" and "tuned on split valid" in out.read_text()
    written = engine_config(get_rule("confidence_threshold:h=0.4"), "test", ENGINES["llama.cpp"], vocab_dataset,
                            cost_file)
    champion, best, default, plain = written.rows
    assert not written.exact and best.setting == f"length={flags['--spec-draft-n-max']}"
    assert best.valid >= default.valid  # the default (--spec-draft-n-max 3) is one of the settings tuned


def test_a_lossy_champion_is_tuned_within_its_tv(vocab_dataset, cost_file):
    written = engine_config(get_rule("sglang_0.5_0.8"), "test", ENGINES["tensorrt-llm"], vocab_dataset, cost_file)
    champion, best, _, _ = written.rows
    assert best.tv is not None and champion.tv is not None and best.tv <= champion.tv + 1e-12


def test_data_and_costs_go_together(vocab_dataset):
    result = export("fixed_gamma:gamma=3", "--to", "vllm", "--data", vocab_dataset)
    assert result.exit_code == 2 and "--data and --costs go together" in result.output
    assert export("fixed_gamma:gamma=3", "--to", "numpy", "--data", vocab_dataset).exit_code == 2


# --- schedules ----------------------------------------------------------------------------------------------

SCHEDULE = ((1, 4, 3), (5, 16, 2), (17, 64, 0))


def _setting(engine, rule="fixed_gamma:gamma=3"):
    return engine.support(get_rule(rule).program_kind).exact(get_rule(rule), None)


def test_schedules_render_as_the_engines_lists():
    prov = Provenance("r", "e", "s", "verify-length", True)
    v = read_yaml_text(vllm.render(_setting(vllm.ENGINE), prov, SCHEDULE))["speculative-config"]
    assert v["num_speculative_tokens_per_batch_size"] == [[1, 4, 3], [5, 16, 2], [17, 64, 0]]
    assert v["num_speculative_tokens"] == 3
    t = read_yaml_text(tensorrt_llm.render(_setting(tensorrt_llm.ENGINE), prov, SCHEDULE))["speculative_config"]
    # TensorRT-LLM keys each range by its largest batch size, and drafts nothing above the largest key
    assert t["draft_len_schedule"] == {"4": 3, "16": 2} and t["max_draft_len"] == 3
    with pytest.raises(InputError, match="does not continue the schedule"):
        vllm.render(_setting(vllm.ENGINE), prov, ((1, 4, 3), (6, 8, 2)))
    with pytest.raises(InputError, match="no later length may exceed it"):
        tensorrt_llm.render(_setting(tensorrt_llm.ENGINE), prov, ((1, 4, 2), (5, 8, 3)))
    with pytest.raises(InputError, match="takes no per-batch-size schedule"):
        engine_config(get_rule("fixed_gamma:gamma=3"), "s", ENGINES["llama.cpp"], schedule=SCHEDULE)


# --- the registry ---------------------------------------------------------------------------------------------

def test_every_engine_documents_its_knobs_and_a_new_engine_is_one_registration():
    for engine in ENGINES.values():
        assert engine.knobs and all(k.name and k.source and k.type for k in engine.knobs)
    toy = Engine("toy", "Toy", "nothing", (), Capabilities(step_policy=True), lambda s, p, sch: "", "1")
    try:
        assert register_engine(toy) is toy and ENGINES["toy"] is toy
        with pytest.raises(ValueError, match="registered already"):
            register_engine(Engine("toy", "Other", "", (), Capabilities(), toy.render, "1"))
        with pytest.raises(InputError, match="Toy 1 cannot run a threshold program"):
            engine_config(get_rule("standard_rejection"), "s", toy)
    finally:
        unregister_engine("toy")
    assert isinstance(_setting(vllm.ENGINE), Setting)


def test_the_output_may_not_be_an_input(vocab_dataset, cost_file):
    result = export("confidence_threshold:h=0.4", "--to", "llama.cpp", "--data", vocab_dataset, "--costs", cost_file,
                    "--output", cost_file)
    assert result.exit_code == 2 and "is an input of this command" in result.stderr
    assert json.loads(cost_file.read_text())["draft_token_s"] == 0.004  # untouched


def test_a_tree_is_tuned_among_the_engines_shapes(vocab_dataset, cost_file, tmp_path):
    tree = Rule("entropy_tree", expression="if_gt(0.5, draft_index, add(1.0, mul(2.0, draft_entropy)), "
                                           "if_gt(2.5, draft_index, 1.0, 0.0))", kind="tree-shape")
    for engine in ("vllm", "sglang", "llama.cpp"):
        written = engine_config(tree, "test", ENGINES[engine], vocab_dataset, cost_file)
        assert not written.exact and written.rows[1].valid is not None
        chains = [s for s in ENGINES[engine].support(tree.program_kind).settings(tree, 3, 3)
                  if s.label in ("depth=1", "widths=1")]
        assert chains  # every engine's tree settings include the one-token chain, so the best is at least as good
        assert written.rows[1].valid >= Scorer(tree, vocab_dataset, load_costs(cost_file))(chains[0].rule,
                                                                                            "valid")[0] - 1e-12


def test_settings_are_weighted_as_the_champions_run(vocab_dataset, cost_file):
    import dataclasses
    champion = get_rule("confidence_threshold:h=0.4")
    by_position = dataclasses.replace(champion, settings=(("length_weighting", "position"),))
    fixed = get_rule("fixed_gamma:gamma=3")
    costs = load_costs(cost_file)
    call = Scorer(champion, vocab_dataset, costs)(fixed, "valid")[0]
    position = Scorer(by_position, vocab_dataset, costs)(fixed, "valid")[0]
    assert position == Scorer(champion, vocab_dataset, costs)(dataclasses.replace(fixed, settings=(("length_weighting", "position"),)),
                                                              "valid")[0]
    assert position != call


def test_no_export_module_names_a_kind_but_the_default():
    """Engines ask a kind what it can express (its engines hook): no module under evolve/export imports another
    kind's package, names its descriptor or spells its name (the grep of the kind boundary)."""
    import re
    from pathlib import Path

    from evolve.kinds.registry import KINDS

    root = Path(__file__).resolve().parent.parent / "evolve" / "export"
    others = [k for k in KINDS.values() if k.name != "threshold"]
    packages = [k.plugin.rsplit(".", 1)[0] for k in others if k.plugin]
    pattern = re.compile("|".join([*(re.escape(p) for p in packages),
                                   *(rf"\b{re.escape(k.name.upper().replace('-', '_'))}\b" for k in others),
                                   *(rf"[\"']{re.escape(k.name)}[\"']" for k in others)]))
    found = [f"{p.relative_to(root)}:{i}: {line.strip()}" for p in sorted(root.rglob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert packages and not found, found


def test_engine_versions_are_chosen_among_the_checked(tmp_path):
    from evolve.export.engines.registry import VERSIONS

    for name, versions in VERSIONS.items():
        newest = list(versions)[-1]
        res = export("fixed_gamma:gamma=3", "--to", name, "--engine-version", newest)
        assert res.exit_code == 0 and newest.split()[0] in res.stdout, res.output
        _refused(export("fixed_gamma:gamma=3", "--to", name, "--engine-version", "0.0.1-unchecked"),
                 "checked at", newest)


@pytest.mark.parametrize("engine", ["vllm", "tensorrt-llm"])
def test_a_schedule_is_priced_as_the_engine_reads_the_written_file(vocab_dataset, engine, tmp_path):
    """The table printed with --concurrency: at each batch size listed, the length tuned and the length the engine
    reads from the file it was written into are the same, with its tokens per second."""
    from pathlib import Path

    costs = Path(__file__).resolve().parent.parent / "docs" / "costs" / "gpu_batched.json"
    out = tmp_path / "spec.yaml"
    res = export("fixed_gamma:gamma=3", "--to", engine, "--data", vocab_dataset, "--costs", costs,
                 "--concurrency", "1,8,64", "--output", out)
    assert res.exit_code == 0, res.output
    rows = [line.split() for line in res.stdout.splitlines() if line[:1].isdigit()]
    rows = [r for r in rows if len(r) == 4]
    assert [r[0] for r in rows] == ["1", "8", "64"]
    for batch, tuned, run, rate in rows:
        assert tuned == run and float(rate) > 0
        assert ENGINES[engine].schedule_length(out.read_text(), int(batch)) == int(run)

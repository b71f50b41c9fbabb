"""The vLLM conformance lane: every file the exporter writes for vLLM is read by vLLM 0.33.0's own code (the released
wheel, installed without its GPU dependencies by the ``engines`` extra): its ``--config`` YAML loader and the argument
parser of ``vllm serve`` (``EngineArgs.add_cli_args``), its ``SpeculativeConfig`` (which refuses unknown keys), its
batch-size schedule validator and lookup (``build_dynamic_sd_schedule_lookup``), and its model runners' rejection
samplers; and means what it was scored as: the draft length per step, at every batch size for a schedule, and the
verification method the runner the file selects applies."""
from __future__ import annotations

import inspect
import os
import types
import typing

import pytest

from engine_helpers import BATCHES, DRAFTERS, block, cases, drafted, length_at, require
from evolve.export.engines import vllm as exporter
from evolve.export.engines.deploy import PLAIN

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # vLLM infers no device here otherwise; nothing runs on it


@pytest.fixture(scope="module")
def engine():
    """vLLM's own pieces: the serve parser, SpeculativeConfig, the schedule lookup, the rejection samplers."""
    speculative = require("vllm.config.speculative")
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    import vllm
    assert vllm.__version__ == exporter.VERSION
    parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    return types.SimpleNamespace(parser=parser, config=speculative.SpeculativeConfig,
                                 methods=typing.get_args(speculative.SpeculativeMethod),
                                 lookup=build_dynamic_sd_schedule_lookup)


@pytest.fixture(scope="module")
def written(vocab_dataset, tmp_path_factory):
    import json
    costs = tmp_path_factory.mktemp("costs") / "costs.json"
    costs.write_text(json.dumps({"target_forward_s": [0.02, 0.021, 0.022, 0.023, 0.025, 0.027, 0.03, 0.033],
                                 "draft_token_s": 0.004}))
    return list(cases(exporter.ENGINE, vocab_dataset, costs))


def read(engine, text: str, tmp_path) -> dict | None:
    """The speculative config ``vllm serve MODEL --config FILE`` takes from ``text`` (None: none)."""
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return engine.parser.parse_args(["--model", "m", "--config", str(path)]).speculative_config


def validated(engine, spec: dict, text: str):
    """SpeculativeConfig of ``spec`` read from the file ``text``; a drafter needing a model (draft_model, eagle3) is
    validated as ngram (its model config cannot be built here) after its method is checked against vLLM's methods.
    The draft length is the file's own: only a file whose header says to add one (a rule with no run recording the
    length it was scored at) is given one here, as its user would."""
    spec = dict(spec)
    assert spec.get("method", "ngram") in engine.methods
    if spec.get("method") != "ngram":
        spec.update(method="ngram", prompt_lookup_max=3)
    if "add num_speculative_tokens" in text:
        assert "num_speculative_tokens" not in spec
        spec["num_speculative_tokens"] = 3
    return engine.config(**spec)


def test_every_file_is_read_as_scored(engine, written, tmp_path):
    assert len(written) > 100
    losing = [c for c in written if c.losing]
    assert len(losing) == 6 and sum(c.setting is PLAIN for c in losing) >= 4  # the rest tuned to drafting nothing
    for case in losing:  # never a configuration predicted to lose: vLLM reads no speculative config
        assert read(engine, case.text, tmp_path) is None and drafted(case.setting) == 0, case.label
    for case in written:
        if case.refusal:
            assert "\n" not in case.refusal and "nearest" in case.refusal, case.label
            continue
        spec = read(engine, case.text, tmp_path)
        use = next(line for line in case.text.splitlines() if "use:" in line)
        if spec is None:
            assert "plain decoding" in use, case.label
            assert (drafted(case.setting) == 0 or (case.schedule and not any(n for *_, n in case.schedule))), \
                case.label
            continue
        config = validated(engine, spec, case.text)
        if case.schedule is not None:
            dense = engine.lookup(config.num_speculative_tokens_per_batch_size, 1000, config.num_speculative_tokens)
            for b in (b for b in BATCHES if b <= 1000):
                assert dense[b] == length_at(case.schedule, b) == exporter.schedule_length(case.text, b), \
                    (case.label, b)
        elif drafted(case.setting) is not None:
            assert config.num_speculative_tokens == drafted(case.setting), case.label
        assert (config.rejection_sample_method == "block") == block(case.setting), case.label
        drafter = DRAFTERS[case.drafter]
        assert config.method == ("ngram" if drafter.lookup else config.method)
        if drafter.lookup:
            assert (spec["prompt_lookup_max"], spec["prompt_lookup_min"]) == drafter.ngram
        else:
            assert spec["draft_sample_method"] == "probabilistic"  # the records hold sampled drafts


def test_block_verification_names_the_runner_that_applies_it(engine, written):
    """Only Model Runner V2 verifies blocks (the V1 rejection sampler has no block branch): every file asking for it
    selects V2, which VLLM_USE_V2_MODEL_RUNNER=1 does."""
    from vllm.config.vllm import VllmConfig
    import vllm.v1.sample.rejection_sampler as v1
    import vllm.v1.worker.gpu.spec_decode.rejection_sampler as v2

    assert '"block"' not in inspect.getsource(v1) and '"block"' in inspect.getsource(v2.RejectionSampler)
    blocks = [c for c in written if c.setting is not None and block(c.setting) and "speculative-config:" in c.text]
    assert blocks
    for case in blocks:
        assert "VLLM_USE_V2_MODEL_RUNNER=1 vllm serve" in case.text, case.label
    stub = types.SimpleNamespace(attention_config=types.SimpleNamespace(hisparse_config=None), watermark_config=None)
    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1"
    try:
        assert VllmConfig.use_v2_model_runner.fget(stub) is True
    finally:
        del os.environ["VLLM_USE_V2_MODEL_RUNNER"]
    import torch
    config = validated(engine, {"rejection_sample_method": "block", "num_speculative_tokens": 3}, "")
    sampler = v2.RejectionSampler(None, config, torch.device("cpu"))
    assert sampler.use_block_verification


def test_trees_are_chains_in_this_version(engine, written):
    """vLLM 0.33.0 has no static tree: a chain is written as its length; a wider tree is refused exactly (tuned
    with data to a chain), never written with a key vLLM refuses."""
    assert "speculative_token_tree" not in engine.config.__dataclass_fields__
    trees = [c for c in written if c.rule.kind == "tree-shape" and not c.tuned]
    assert trees
    for case in trees:
        if case.refusal:
            assert "chain" in case.refusal, case.label
        else:
            assert "speculative_token_tree" not in case.text
            assert case.rule.name.startswith("chain:"), case.label


def test_every_suffix_setting_is_vllms_suffix_method(engine, tmp_path):
    """Every setting of vLLM's suffix method the verification-length export tunes (a suffix-decoding harvest), written
    as the exporter writes it, is read by ``vllm serve --config`` and built by SpeculativeConfig, whose
    ``_validate_suffix_decoding`` imports arctic-inference and checks the knobs: method suffix, the draft length and
    the knobs as scored."""
    require("arctic_inference")
    from evolve.engine.drafter_base import EngineFamily
    from evolve.export.engines.base import Drafter, Provenance
    from evolve.kinds.verify_length.export_engines import engine_support, fixed_length_rule

    settings = [s for s in engine_support(exporter.ENGINE).settings(fixed_length_rule(3), 6, 6)
                if s.family is EngineFamily.SUFFIX]
    assert len(settings) > 100
    suffix = Drafter("suffix")
    assert suffix.family is EngineFamily.SUFFIX
    for setting in settings:
        provenance = Provenance(setting.rule.name, setting.rule.expression, "test", "verify-length", False,
                                drafter=suffix, length=6)
        text = exporter.ENGINE.render(setting, provenance, None)
        spec = read(engine, text, tmp_path)
        config = engine.config(**spec)
        assert config.method == "suffix", setting.label
        for key, value in setting.knobs.items():
            assert getattr(config, key) == value, (setting.label, key)

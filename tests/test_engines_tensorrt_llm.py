"""The TensorRT-LLM conformance lane, without TensorRT-LLM: its package cannot be installed here (the registry's
package is a stub that fetches the wheel from elsewhere), so its semantics are stated as facts with their source file
and commit (``evolve.export.engines.tensorrt_llm.FACTS``, NVIDIA/TensorRT-LLM 0004396) and implemented below as the
engine implements them: ``DecodingBaseConfig.validate_draft_len_schedule_and_sort``, ``EagleDecodingConfig``'s
checks, the MTP and NGram configs' bounds, and the runtime lookup ``get_draft_len_for_batch_size`` (each key the upper
end of a batch-size range, ``bisect_left``, 0 above the largest key). Every file the exporter writes must pass them
and mean what it was scored as: the draft length at every batch size, the tree's depth and node count."""
from __future__ import annotations

from bisect import bisect_left

from engine_helpers import BATCHES, DRAFTERS, cases, drafted, losing_cases, length_at
from evolve.export.engines import tensorrt_llm as exporter
from evolve.export.engines.text import read_yaml_text

STRICT = {"Eagle": {"decoding_type", "max_draft_len", "max_total_draft_tokens", "eagle_choices", "draft_len_schedule",
                    "speculative_model"},
          "NGram": {"decoding_type", "max_draft_len", "max_matching_ngram_size", "draft_len_schedule"},
          "Draft_Target": {"decoding_type", "max_draft_len", "draft_len_schedule", "speculative_model"},
          "MTP": {"decoding_type", "max_draft_len", "use_relaxed_acceptance_for_thinking", "relaxed_topk",
                  "relaxed_delta"}}


def validate(config: dict) -> dict:
    """The checks of llm_args.py at 0004396 on a written speculative_config (StrictBaseModel: no unknown key); returns
    the config as TensorRT-LLM completes it (max_total_draft_tokens of a chain, a tree's depth and node count)."""
    kind = config["decoding_type"]
    assert set(config) <= STRICT[kind], config
    out = dict(config)
    if kind in ("Eagle", "NGram", "Draft_Target"):
        assert isinstance(config["max_draft_len"], int) and config["max_draft_len"] > 0  # "must be > 0"
    if kind == "NGram":
        assert config["max_matching_ngram_size"] > 0
    if kind == "MTP":
        assert config.get("relaxed_topk", 1) > 0 and config.get("relaxed_delta", 0.0) >= 0
    if "eagle_choices" in config:
        choices = [tuple(c) for c in config["eagle_choices"]]
        assert all(c[:-1] in choices for c in choices if len(c) > 1)  # "choice ... is not connected"
        out["max_draft_len"] = max(len(c) for c in choices)
        out["max_total_draft_tokens"] = len(set(choices))
    out.setdefault("max_total_draft_tokens", out.get("max_draft_len"))
    schedule = config.get("draft_len_schedule")
    if schedule is not None:
        keys = {int(k): v for k, v in schedule.items()}
        assert all(k >= 1 for k in keys) and all(v >= 0 for v in keys.values())
        assert keys[min(keys)] == config["max_draft_len"]  # the smallest key's length is max_draft_len
        assert all(v <= config["max_draft_len"] for v in keys.values())
        assert "max_concurrency" not in config  # mutually exclusive
    return out


def runtime_length(config: dict, batch: int) -> int:
    """get_draft_len_for_batch_size: the first key >= batch (bisect_left), 0 above the largest key."""
    schedule = config.get("draft_len_schedule")
    if schedule is None:
        return config["max_draft_len"]
    keys = sorted(int(k) for k in schedule)
    i = bisect_left(keys, batch)
    return schedule[str(keys[i])] if i < len(keys) else 0


def test_the_facts_name_their_source():
    assert exporter.COMMIT == "0004396720054fd8e205cbf616f21f0b57c6b412"
    for statement, where in exporter.FACTS.values():
        assert statement and "NVIDIA/TensorRT-LLM" in where and ".py" in where


def test_every_file_passes_the_engines_checks_and_means_what_was_scored(vocab_dataset, tmp_path):
    written = list(cases(exporter.ENGINE)) + list(losing_cases(exporter.ENGINE, vocab_dataset, tmp_path))
    assert len(written) > 80
    for case in written:
        if case.refusal:
            assert "\n" not in case.refusal, case.label
            continue
        config = read_yaml_text(case.text).get("speculative_config")
        use = next(line for line in case.text.splitlines() if "use:" in line)
        if config is None:
            assert "plain decoding" in use, case.label
            continue
        resolved = validate(config)
        drafter = DRAFTERS[case.drafter]
        if case.schedule is not None:
            for b in BATCHES:
                assert runtime_length(resolved, b) == length_at(case.schedule, b) == \
                    exporter.schedule_length(case.text, b), (case.label, b)
            continue
        steps = drafted(case.setting)
        if steps and config["decoding_type"] != "MTP":
            assert resolved["max_total_draft_tokens"] == steps, case.label
        if drafter.lookup and steps and "eagle_choices" not in config:
            assert config["decoding_type"] == "NGram" and config["max_matching_ngram_size"] == drafter.ngram[0]


def test_a_schedule_meant_to_speculate_to_128_does():
    """The defect this lane was written for: ranges written by their start sizes made TensorRT-LLM stop speculating
    at the second key; written by their ends, every batch size up to 128 runs its tuned length."""
    from evolve.export.engines.base import Provenance
    from heuristics.registry import get_rule

    rule = get_rule("fixed_gamma:gamma=4")
    setting = exporter.ENGINE.support(rule.program_kind).exact(rule, None)
    schedule = ((1, 32, 4), (33, 128, 2), (129, 65536, 0))
    text = exporter.render(setting, Provenance("r", "e", "s", "verify-length", True), schedule)
    config = validate(read_yaml_text(text)["speculative_config"])
    assert [runtime_length(config, b) for b in (1, 32, 33, 100, 128, 129)] == [4, 4, 2, 2, 2, 0]

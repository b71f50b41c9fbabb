"""The llama.cpp conformance lane: every flag line the exporter writes for llama.cpp is parsed by llama.cpp's own
argument parser and speculative setup, compiled from the source llama-cpp-python 0.3.36's source package vendors
(``scripts/build_llama_harness.sh`` builds ``llama-spec-args``, run by ``.ci/run``): ``common_params_parse`` as
``llama-server`` calls it, and ``common_speculative_n_max``, the tokens the configured speculation drafts per step.
Each line must turn speculation on with the type of the harvest's drafter and draft the exported length (plain
decoding: none), with the loop's early stops off (p-min 0, n-min 0)."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from engine_helpers import DRAFTERS, cases, drafted, losing_cases
from evolve.export.engines import llama_cpp as exporter

HARNESS = Path(os.environ.get("LLAMA_SPEC_ARGS", Path(__file__).resolve().parent.parent / ".cache" /
                              "llama-harness" / "llama-spec-args"))


@pytest.fixture(scope="module")
def parse():
    if not HARNESS.is_file():
        if os.environ.get("CI"):
            raise AssertionError(f"{HARNESS} is not built: .ci/run runs scripts/build_llama_harness.sh")
        pytest.skip(f"{HARNESS} not built (bash scripts/build_llama_harness.sh)")

    def run(words: list[str]) -> dict | None:
        done = subprocess.run([str(HARNESS), "-m", "model.gguf", *words], capture_output=True, text=True,
                              timeout=60)
        return json.loads(done.stdout) if done.returncode == 0 else None

    return run


def models(use: str) -> list[str]:
    """The model flags of the file's use: line, after ``llama-server`` (-m MODEL dropped: the harness gives it)."""
    words = shlex.split(use.split("llama-server", 1)[1].split("$(", 1)[0])
    return [w if not w.isupper() else "draft.gguf" for w in words[2:]]


def test_every_flag_line_speculates_as_scored(parse, vocab_dataset, tmp_path):
    written = list(cases(exporter.ENGINE)) + list(losing_cases(exporter.ENGINE, vocab_dataset, tmp_path))
    assert len(written) > 60
    for case in written:
        if case.refusal:
            assert "\n" not in case.refusal, case.label
            continue
        lines = [line for line in case.text.splitlines() if line and not line.startswith("#")]
        use = next(line for line in case.text.splitlines() if "use:" in line)
        words = shlex.split(lines[0]) if lines else []
        got = parse(models(use) + words if "plain decoding" not in use else words)
        assert got is not None, case.label  # the parser took every flag
        steps = drafted(case.setting)
        if not words:
            assert "plain decoding" in use and steps in (0, None) and got["drafted_per_step"] == 0, case.label
            continue
        assert got["drafted_per_step"] == steps, (case.label, got)
        drafter = DRAFTERS[case.drafter]
        types = set(got["types"]) - {"none"}
        if drafter.lookup:
            assert types == {"ngram-simple"} and got["draft_model"] == "", case.label
            assert (got["ngram_simple"]["size_n"], got["ngram_simple"]["size_m"]) == (drafter.ngram[0], steps)
        else:
            assert types == {"draft-eagle3" if drafter.kind == "eagle" else "draft-simple"}, case.label
            assert got["draft_model"] and got["n_min"] == 0 and got["p_min"] == 0, case.label


def test_a_draft_model_alone_turns_no_speculation_on(parse):
    """Why every line names its type: a draft GGUF and a length, without --spec-type, draft nothing per step."""
    assert parse(["-md", "draft.gguf", "--spec-draft-n-max", "5"])["drafted_per_step"] == 0
    assert parse(["-md", "draft.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "5"])[
        "drafted_per_step"] == 5


def test_the_knob_tables_defaults_are_the_parsers(parse):
    got = parse([])
    assert got["types"] == ["none"] and got["n_max"] == exporter.DEFAULT_N_MAX and got["p_min"] == 0
    assert parse(["--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", str(exporter.MAX_NGRAM_DRAFT + 1)]) \
        is None  # the longest m-gram the parser takes

"""``python -m evolve export``, tried as a hostile user would (round 5): every class of case generated from the
targets and the values, not listed one by one.

* the output never lands on a file the champion names (the verifier champion of a policy's run);
* a schedule that is plain decoding at every batch size is written as plain decoding (no engine takes a length 0);
* a llama-cpp-python module is never written with lookup settings its class refuses at call time (a boolean, a
  count below 1, the shortest n-gram above the longest, a boolean ``gamma``);
* a long but finite draft length is exported exactly (it was refused as inexpressible);
* a length-0 champion's file says plain decoding in its ``use:`` line and sets nothing;
* the file drafts with the harvest's drafter (prompt lookup, a draft model, an EAGLE head);
* a competitor name (``survival_prefix``) is refused with why no engine runs it;
* champions with extreme trees or values are refused in one line (no traceback, no million-node tree).
"""
from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from evolve.__main__ import cli
from evolve.export.engines.registry import ENGINES
from evolve.export.engines.shapes import MAX_LENGTH, MAX_TREE_NODES
from evolve.export.engines.text import read_yaml_text
from heuristics.champions import Champion, save_champion

LENGTH_ENGINES = [name for name, e in ENGINES.items() if e.capabilities.length is not None]
SCHEDULE_ENGINES = [name for name, e in ENGINES.items() if e.schedule]
TARGETS = [*ENGINES, "llama-cpp-python", "numpy", "torch"]


def export(*args):
    return CliRunner().invoke(cli, ["export", *map(str, args)])


def one_line_refusal(result, *words):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def champion(directory: Path, name: str, expression: str, kind: str, features: tuple, provenance=None) -> Path:
    champ = Champion(name=name, expression=expression, description="hostile test", features=features, kind=kind,
                     metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}}, provenance=provenance or {})
    return save_champion(champ, directory)[0]


def config_of(engine: str, text: str) -> dict:
    """The engine's settings in a written file (empty: nothing set)."""
    if engine in ("vllm", "tensorrt-llm"):
        return read_yaml_text(text).get({"vllm": "speculative-config"}.get(engine, "speculative_config"), {})
    if engine == "transformers":
        return {k: v for k, v in json.loads(text).items() if k != "_provenance"}
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return dict.fromkeys(shlex.split(lines[0]), True) if lines else {}


def use_line(text: str) -> str:
    found = [line for line in text.splitlines() if "use:" in line]
    assert len(found) == 1, text
    return found[0]


class TestOutputOntoTheVerifierChampion:
    """A policy's run names its verifier champion (``provenance.config.verify_with``); export reads it, so
    ``--output`` may not replace it, for the champion given as its file or its run directory."""

    @pytest.mark.parametrize("as_run", [False, True])
    @pytest.mark.parametrize("target", ["vllm", "llama.cpp", "numpy", "llama-cpp-python"])
    def test_refused_and_untouched(self, tmp_path, target, as_run):
        verifier = champion(tmp_path / "verifiers", "thr", "min(1.0, div(target_prob, draft_prob))", "threshold",
                            ("target_prob", "draft_prob"))
        before = verifier.read_bytes()
        run = tmp_path / "run"
        policy = champion(run, "champion", "sub(2.5, draft_index)", "verify-length", ("draft_index",),
                          {"config": {"evolve": "verify-length", "verify_with": str(verifier)}})
        spec = run if as_run else policy
        result = export(spec, "--to", target, "--output", verifier)
        assert result.exit_code == 2 and "is an input of this command" in result.stderr, result.output
        assert verifier.read_bytes() == before


class TestPlainDecodingSchedules:
    """A schedule of length 0 at every batch size is no speculation: written as plain decoding, never as a length
    0 the engines refuse (vLLM: num_speculative_tokens > 0; TensorRT-LLM: max_draft_len > 0)."""

    @pytest.mark.parametrize("engine", SCHEDULE_ENGINES)
    @pytest.mark.parametrize("ranges", [((1, 65536, 0),), ((1, 4, 0), (5, 65536, 0)), ((1, 1, 0), (2, 9, 0))])
    def test_all_zero_is_plain_decoding(self, engine, ranges):
        from evolve.export.engines.base import Provenance
        from heuristics.registry import get_rule

        e = ENGINES[engine]
        rule = get_rule("fixed_gamma:gamma=3")
        setting = e.support(rule.program_kind).exact(rule, None)
        text = e.render(setting, Provenance("r", "e", "s", "verify-length", True), ranges)
        assert config_of(engine, text) == {}
        assert "plain decoding" in use_line(text)
        assert all(e.schedule_length(text, b) == 0 for b in (1, 2, 5, 100, 65536))


HOSTILE_LOOKUP = [({"data": {"generator_config": {"drafter": {"kind": "ngram", "max": hi, "min": lo}}}},
                   "generator_config.drafter")
                  for hi, lo in ((0, 1), (-2, 1), (True, 1), (1.5, 1), ("3", 1), (3, 0), (1, 3), (3, False),
                                 (3, None), (None, 2), ([3], 1))] + \
                 [({"config": {"gamma": bad}}, "gamma") for bad in (True, False, 0, -1, 2.5, "8", 10 ** 9)]


class TestLlamaCppPythonSettings:
    """Lookup settings and draft lengths a champion's run records are checked as the module's class checks them:
    one the class would refuse at call time (or a boolean read as 1) is refused at export, naming the key."""

    @pytest.mark.parametrize("provenance,key", HOSTILE_LOOKUP)
    def test_refused_at_export(self, tmp_path, provenance, key):
        path = champion(tmp_path, "p", "sub(2.5, draft_index)", "verify-length", ("draft_index",), provenance)
        out = tmp_path / "m.py"
        one_line_refusal(export(path, "--to", "llama-cpp-python", "--output", out), key)
        assert not out.exists()

    @pytest.mark.parametrize("ngram,gamma", [((3, 1), 8), ((2, 2), 1), ((5, 5), 4096), ((4, 2), 6), (None, 6)])
    def test_valid_settings_are_the_class_defaults(self, tmp_path, ngram, gamma):
        """The harvest drafter's n-gram lengths (its ``max`` and ``min``, as the harvest records them; the module's
        defaults 3 and 1 when it records none) and the run's draft length."""
        drafter = {"kind": "ngram"} | ({"max": ngram[0], "min": ngram[1]} if ngram else {})
        prov = {"config": {"gamma": gamma}, "data": {"generator_config": {"drafter": drafter}}}
        path = champion(tmp_path, "p", "sub(2.5, draft_index)", "verify-length", ("draft_index",), prov)
        result = export(path, "--to", "llama-cpp-python")
        assert result.exit_code == 0, result.output
        line = next(ln for ln in result.stdout.splitlines() if ln.startswith("MAX_NGRAM, MIN_NGRAM, GAMMA"))
        assert line.endswith(f"{(ngram or (3, 1))[0]}, {(ngram or (3, 1))[1]}, {gamma}")

    @pytest.mark.parametrize("kind", ["model", "eagle"])
    def test_another_harvest_drafter_is_refused(self, tmp_path, kind):
        prov = {"data": {"generator_config": {"drafter": {"kind": kind}}}}
        path = champion(tmp_path, "p", "sub(2.5, draft_index)", "verify-length", ("draft_index",), prov)
        one_line_refusal(export(path, "--to", "llama-cpp-python"), f"drafted with '{kind}'", "prompt lookup")


class TestLongDrafts:
    """A policy that stops after many drafts is still a fixed length: exported exactly for every engine with a
    draft-length knob; one that never stops within MAX_LENGTH drafts is refused as such, not as inexpressible."""

    @pytest.mark.parametrize("length", [65, 100, 1000, MAX_LENGTH])
    @pytest.mark.parametrize("engine", LENGTH_ENGINES)
    def test_exact(self, tmp_path, engine, length):
        path = champion(tmp_path, "long", f"sub({length - 0.5}, draft_index)", "verify-length", ("draft_index",))
        result = export(path, "--to", engine)
        assert result.exit_code == 0, result.output
        assert f"setting: length={length}" in result.stdout and str(length) in str(config_of(engine, result.stdout))

    @pytest.mark.parametrize("expression", [f"sub({MAX_LENGTH + 0.5}, draft_index)", "sub(1e300, draft_index)",
                                            "add(1.0, draft_index)"])
    def test_never_stopping_is_refused_as_such(self, tmp_path, expression):
        path = champion(tmp_path, "endless", expression, "verify-length", ("draft_index",))
        one_line_refusal(export(path, "--to", "vllm"), "never stops")


class TestLengthZero:
    """A champion that never drafts is plain decoding everywhere: nothing set, and a ``use:`` line that says so
    (not one loading a draft model or naming a speculative algorithm)."""

    @pytest.mark.parametrize("engine", list(ENGINES))
    @pytest.mark.parametrize("spec", ["fixed_gamma:gamma=0", "TREE0"])
    def test_plain(self, tmp_path, engine, spec):
        if spec == "TREE0":
            spec = champion(tmp_path, "none", "0.0", "tree-shape", ())
        result = export(spec, "--to", engine)
        assert result.exit_code == 0, result.output
        assert config_of(engine, result.stdout) == {}
        use = use_line(result.stdout)
        assert "plain decoding" in use
        for word in ("-md", "DRAFT", "--speculative-algorithm ALGO", "--config FILE", "assistant_model"):
            assert word not in use, use


DRAFTERS = {"ngram": {"kind": "ngram", "max": 4, "min": 2}, "model": {"kind": "model", "path": "d.gguf"},
            "eagle": {"kind": "eagle", "path": "head"}}
#: What each engine's file must hold for each harvest drafter (a chain of 3 drafts).
EXPECT = {
    "vllm": {"ngram": {"method": "ngram", "prompt_lookup_max": 4, "prompt_lookup_min": 2},
             "model": {"method": "draft_model"}, "eagle": {"method": "eagle3"}},
    "sglang": {"ngram": {"--speculative-algorithm": True, "NGRAM": True}, "model": {"STANDALONE": True},
               "eagle": {"EAGLE3": True}},
    "tensorrt-llm": {"ngram": {"decoding_type": "NGram", "max_matching_ngram_size": 4},
                     "model": {"decoding_type": "Draft_Target"}, "eagle": {"decoding_type": "Eagle"}},
    "llama.cpp": {"ngram": {"ngram-simple": True, "--spec-ngram-simple-size-m": True, "3": True, "4": True},
                  "model": {"draft-simple": True}, "eagle": {"draft-eagle3": True}},
    "transformers": {"ngram": {"prompt_lookup_num_tokens": 3, "max_matching_ngram_size": 4},
                     "model": {"num_assistant_tokens": 3}, "eagle": {"num_assistant_tokens": 3}},
}


class TestHarvestDrafter:
    """The file drafts with the champion's harvest drafter (its dataset's metadata), for every engine."""

    @pytest.mark.parametrize("drafter", list(DRAFTERS))
    @pytest.mark.parametrize("engine", list(ENGINES))
    def test_follows(self, tmp_path, engine, drafter):
        prov = {"data": {"generator_config": {"drafter": DRAFTERS[drafter]}}}
        path = champion(tmp_path, "p", "sub(2.5, draft_index)", "verify-length", ("draft_index",), prov)
        result = export(path, "--to", engine)
        assert result.exit_code == 0, result.output
        config = config_of(engine, result.stdout)
        for key, value in EXPECT[engine][drafter].items():
            assert config.get(key) == value, (key, config)
        if drafter == "ngram":  # no draft model to add
            assert "DRAFT" not in use_line(result.stdout) and "assistant_model" not in use_line(result.stdout)
        assert f"harvest drafter: {drafter}" in result.stdout


class TestCompetitorNames:
    """``survival_prefix`` (and the other competitor rows of verification-length policies) is refused for every
    target with why no engine runs it and the nearest setting, not as an unknown rule."""

    @pytest.mark.parametrize("target", TARGETS)
    @pytest.mark.parametrize("name", ["survival_prefix", "best_fixed_gamma", "length_oracle"])
    def test_refused_with_the_reason(self, target, name):
        result = export(name, "--to", target)
        one_line_refusal(result, "competitor", "not a rule program")
        assert "unknown rule" not in result.stderr


EXTREME_TREES = ["if_gt(0.5, draft_index, 1e300, 0.0)", "if_gt(0.5, draft_index, 1000.0, if_gt(1.5, draft_index, "
                 "1000.0, 0.0))", "if_gt(50.5, draft_index, 2.0, 0.0)", f"if_gt(0.5, draft_index, {MAX_TREE_NODES + 1}.0, 0.0)",
                 "add(1.0, draft_index)"]
EXTREME_VALUES = [("verify-length", "sub(1e308, mul(1e308, draft_index))"), ("relaxation", "1e300"),
                  ("relaxation", "div(1.0, 0.0)"), ("threshold", "mul(1e300, 1e300)"),
                  ("verify-length", "div(0.0, 0.0)")]


class TestExtremeChampions:
    """Trees of huge width or depth and programs of huge or undefined values: exported or refused in one line,
    never a traceback and never a tree over the node budget."""

    @pytest.mark.parametrize("expression", EXTREME_TREES)
    @pytest.mark.parametrize("engine", list(ENGINES))
    def test_trees(self, tmp_path, engine, expression):
        path = champion(tmp_path, "t", expression, "tree-shape", ("draft_index",))
        result = export(path, "--to", engine)
        assert "Traceback" not in result.output
        if result.exit_code == 0:
            paths = config_of(engine, result.stdout).get("eagle_choices", [])
            assert len(paths) <= MAX_TREE_NODES
        else:
            one_line_refusal(result)

    @pytest.mark.parametrize("kind,expression", EXTREME_VALUES)
    @pytest.mark.parametrize("target", TARGETS)
    def test_values(self, tmp_path, target, kind, expression):
        features = ("draft_index",) if "draft_index" in expression else ()
        path = champion(tmp_path, "v", expression, kind, features)
        result = export(path, "--to", target)
        assert "Traceback" not in result.output, result.output
        assert result.exit_code in (0, 2)
        if result.exit_code == 2:
            one_line_refusal(result)
        elif target in ENGINES:  # every number written is finite
            values = [v for v in config_of(target, result.stdout).values() if isinstance(v, (int, float))]
            assert all(math.isfinite(v) for v in values), values


def test_tree_budget_is_checked_before_building(tmp_path):
    """A static tree over the node budget is refused in one line naming the budget, in well under a second."""
    import time

    path = champion(tmp_path, "wide", "if_gt(3.5, draft_index, 1000.0, 0.0)", "tree-shape", ("draft_index",))
    start = time.perf_counter()
    result = export(path, "--to", "tensorrt-llm")
    assert time.perf_counter() - start < 30
    one_line_refusal(result, "node budget", f"{MAX_TREE_NODES:,}")
    assert math.isfinite(MAX_TREE_NODES)

"""A drafter is one module and one registration: a throwaway drafter defined here (its class, with its option as
plain data, and one :func:`evolve.engine.drafters.register_drafter` call) is an option of ``generate_data.py
harvest``, ``benchmark.py live`` and ``benchmark.py perf``, a field of the harvest config, and harvests, with no
edit anywhere else; a drafter whose option is a path (a model it reads) is an input of those commands by its value
type: in their input inventory, and no output may land on it."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from evolve.engine.drafter_base import DrafterOption
from evolve.engine.drafters import DRAFTERS, register_drafter
from evolve.engine.early_exit import EarlyExitDrafter
from evolve.engine.model_drafter import ModelDrafter
from evolve.errors import InputError
from evolve.harvest.config import HarvestConfig


class EchoDrafter(EarlyExitDrafter):
    """The target's first N decoder layers (a throwaway drafter: the registry test's)."""

    name = "echo"
    field = "echo"
    option = DrafterOption("--draft-echo", "N", "Throwaway: the target's first N layers.", value="count")
    unsupported = {"llama_cpp": "the echo drafter is a test's"}

    @classmethod
    def check_value(cls, value) -> None:
        if value > 8:
            raise InputError(f"at most 8 (value {value})", param="echo")



@pytest.fixture()
def echo():
    register_drafter(EchoDrafter)
    try:
        yield EchoDrafter
    finally:
        DRAFTERS.remove(EchoDrafter)


class TwinDrafter(ModelDrafter):
    """A second draft model under another option (a throwaway drafter whose option is a path)."""

    name = "twin"
    field = "twin"
    option = DrafterOption("--draft-twin", "DIR", "Throwaway: another draft model.")


@pytest.fixture()
def twin():
    register_drafter(TwinDrafter)
    try:
        yield TwinDrafter
    finally:
        DRAFTERS.remove(TwinDrafter)


def _help(command) -> str:
    result = CliRunner().invoke(command, ["--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def test_a_registered_drafter_is_an_option_of_harvest_live_and_perf(echo):
    from evolve.cli.harvest import harvest
    from evolve.cli.live import live
    from evolve.cli.perf import perf

    for command in (harvest, live, perf):
        text = _help(command)
        assert "--draft-echo N" in text and "Throwaway: the target's first N layers." in text
        assert "--draft-ngram" in text  # the others are still there


def test_an_unregistered_drafter_is_gone_from_the_commands():
    from evolve.cli.harvest import harvest

    register_drafter(EchoDrafter)
    DRAFTERS.remove(EchoDrafter)
    assert "--draft-echo" not in _help(harvest)


def test_the_config_takes_its_field_and_checks_its_value(echo):
    config = HarvestConfig(target="t", prompts="p", echo=3)
    config.check()
    assert config.echo == 3 and config.draft is None and config.drafters == (("echo", 3),)
    assert config.to_dict()["echo"] == 3
    with pytest.raises(InputError, match="at most 8") as err:
        HarvestConfig(target="t", prompts="p", echo=9).check()
    assert err.value.param == "echo"
    drafters = "draft, skip_layers, window, ngram, exit_layer, eagle, suffix, echo"
    with pytest.raises(InputError, match=f"choose exactly one of {drafters}"):
        HarvestConfig(target="t", prompts="p", echo=3, ngram=(2,)).check()
    from evolve.engine.backends import get_backend

    with pytest.raises(InputError, match="the echo drafter is a test's") as err:
        get_backend("llama_cpp").check(HarvestConfig(target="t.gguf", prompts="p", echo=3, backend="llama_cpp"))
    assert err.value.param == "echo"


def test_any_backend_refuses_a_drafter_naming_it(echo, monkeypatch):
    from evolve.engine.backends import get_backend

    config = HarvestConfig(target="t", prompts="p", echo=3)
    get_backend("torch").check(config)
    monkeypatch.setattr(EchoDrafter, "unsupported", {"torch": "no torch for echoes"})
    with pytest.raises(InputError, match=r"drafter 'echo' is not supported by backend 'torch' \(no torch") as err:
        get_backend("torch").check(config)
    assert err.value.param == "echo"


def test_an_unknown_keyword_is_refused():
    with pytest.raises(TypeError, match="unexpected keyword 'echo'"):
        HarvestConfig(target="t", prompts="p", echo=3)


def test_the_registered_drafter_harvests(echo, llama_files, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from harvest_helpers import run_harvest
    from evolve.traces.io import load_metadata

    base = ["--target", llama_files["target"], "--prompts", llama_files["prompts"], "--gamma", "2",
            "--max-new-tokens", "6", "--no-progress"]
    code, out = run_harvest(base + ["--draft-echo", "2", "--out", str(tmp_path / "d")])
    assert code == 0, out
    meta = load_metadata(tmp_path / "d")
    assert meta["config"]["echo"] == 2 and meta["config"]["drafter"]["kind"] == "echo"
    code, out = run_harvest(base + ["--draft-echo", "9", "--out", str(tmp_path / "e")])
    assert code == 2 and "--draft-echo" in out and "at most 8" in out
    code, out = run_harvest(base + ["--draft-echo", "2", "--draft-ngram", "2", "--out", str(tmp_path / "f")])
    assert code == 2 and "got --draft-ngram and --draft-echo" in out


def _path_commands():
    from evolve.cli.benchmark import cli as benchmark_cli
    from evolve.cli.generate import cli as generate_cli

    return [(generate_cli, ["harvest", "--target", "t", "--prompts", "p"], "--out"),
            (benchmark_cli, ["live", "--target", "t", "--prompts", "p"], "--output"),
            (benchmark_cli, ["perf"], "--output")]


def test_a_registered_drafter_s_path_option_is_an_input_of_harvest_live_and_perf(twin, tmp_path, monkeypatch):
    from evolve.cli.inventory import Entry, inventory

    monkeypatch.chdir(tmp_path)
    model = tmp_path / "twin-model"
    for root, args, _ in _path_commands():
        command = root.commands[args[0]]
        with command.make_context(args[0], [*args[1:], "--draft-twin", str(model)]) as ctx:
            inputs, _ = inventory(ctx)
        assert Entry("--draft-twin", model) in inputs, (args[0], inputs)


def test_an_output_onto_a_registered_drafter_s_path_is_refused(twin, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "twin.gguf"
    model.write_bytes(b"the draft model's bytes\n")
    for root, args, output in _path_commands():
        result = CliRunner().invoke(root, [*args, "--draft-twin", str(model), output, str(model)])
        assert result.exit_code == 2, (args[0], result.output)
        assert result.output.strip() == (f"error: option '{output}': {model} is an input of this command "
                                         f"(--draft-twin)"), (args[0], result.output)
        assert model.read_bytes() == b"the draft model's bytes\n"


def test_an_engine_drafts_a_registered_drafter_by_its_family(twin):
    """The export writes a harvest's drafter by the drafter's engine family, never its name: a throwaway drafter
    declaring the draft-model family is written as vLLM's draft_model with no engine edit."""
    from evolve.engine.drafter_base import EngineFamily
    from evolve.export.engines.base import Drafter, Provenance
    from evolve.export.engines.vllm import _drafter

    assert Drafter("twin").family is EngineFamily.DRAFT_MODEL and not Drafter("twin").lookup
    keys, use = _drafter(Provenance("r", "e", "s", "verify-length", True, drafter=Drafter("twin")))
    assert keys["method"] == "draft_model" and "draft model" in use
    assert Drafter("unregistered").family is None

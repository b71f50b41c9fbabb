"""A drafter is one module and one registration: a throwaway drafter defined here (its class, with its option as
plain data, and one :func:`evolve.engine.drafters.register_drafter` call) is an option of ``generate_data.py
harvest``, ``benchmark.py live`` and ``benchmark.py perf``, a field of the harvest config, and harvests, with no
edit anywhere else."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from evolve.engine.drafter_base import DrafterOption
from evolve.engine.drafters import DRAFTERS, register_drafter
from evolve.engine.early_exit import EarlyExitDrafter
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
    with pytest.raises(InputError, match="choose exactly one of draft, skip_layers, window, ngram, exit_layer, eagle, echo"):
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

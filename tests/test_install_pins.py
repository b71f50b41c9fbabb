"""The README's two commands install one pinned environment, CI installs the README's, and every version a test
asserts is the version pinned where they install it.

* Both README commands install with ``-c constraints.txt``; ``.ci/run`` reads its test command from the README (so
  the two cannot drift apart) and installs the conformance lane's engines at the versions the exporters are checked
  against.
* Every pin of ``constraints.txt`` lies in ``pyproject.toml``'s range for that package (a pin outside it could not be
  installed), every dependency of the README's extras is pinned, and the packages whose versions the conformance lane
  asserts (transformers, vLLM, SGLang, llama-cpp-python) are pinned to the exporters' ``VERSION``.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def _pins() -> dict[str, Version]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not a pin (NAME==VERSION)"
            out[canonicalize_name(name)] = Version(version)
    return out


def _requirements(*extras: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return reqs


def test_the_readme_commands_install_the_pinned_environment():
    commands = re.findall(r"^pip install [^\n]*$", README, re.M)
    assert len(commands) >= 2
    first, second = commands[0], commands[1]
    assert first.startswith("pip install -e . -c constraints.txt && ")
    assert second.startswith('pip install -e ".[test,models]" -c constraints.txt && ')
    assert second.endswith("&& python -m pytest -n 2 --dist loadfile")  # two workers (pytest-xdist), a file each


def test_ci_runs_the_readme_test_command():
    assert "grep -m1 -E '^pip install -e \"\\.\\[test' README.md" in CI
    assert 'eval "python -m $install --quiet"' in CI and 'eval "$tests"' in CI
    assert "-c constraints.txt" in CI  # the engines too, in the pinned environment


def test_every_pin_is_in_range_and_every_dependency_is_pinned():
    pins = _pins()
    for req in _requirements("test", "models", "engines", "suffix"):
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is installed by the README or CI but not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"constraints.txt pins {req.name} {pins[name]}, outside pyproject.toml's {req.specifier}"


def test_asserted_versions_are_the_pinned_ones():
    from evolve.engine.suffix import VERSION as ARCTIC
    from evolve.export.engines import llama_cpp, sglang, transformers, vllm

    assert _pins()["transformers"] == Version(transformers.VERSION)
    assert [str(r.specifier) for r in _requirements("models") if r.name == "transformers"] == \
        [f"=={transformers.VERSION}"]
    assert f"vllm=={vllm.VERSION}" in CI and f"sglang=={sglang.VERSION}" in CI
    llama_python = re.search(r"llama-cpp-python (\d+\.\d+\.\d+)", llama_cpp.VERSION).group(1)
    assert f"llama_cpp_python-{llama_python}.tar.gz" in CI
    assert f"--no-build-isolation arctic-inference=={ARCTIC}" in CI and _pins()["arctic-inference"] == Version(ARCTIC)

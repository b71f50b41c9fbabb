"""A newcomer's defects: the documented commands do what the text says.

* Every ``find`` command of the docs that deletes Numba's cache files (``*.nbi``, ``*.nbc``) is run, as written,
  in a scratch tree: it exits 0, prints no complaint, deletes every cache file outside ``.venv`` (and keeps those
  inside when the command says it spares ``.venv``).
* ``--no-progress``: loading a GGUF target through transformers draws no progress bar of transformers' own.
* The glossary names each identifier beside the module that holds it: for every list of identifiers followed by a
  module path in parentheses, each identifier occurs in that module.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _cache_commands() -> list[tuple[str, str]]:
    """(document, command) of every documented ``find`` command that deletes Numba cache files: fenced lines and
    inline code spans alike."""
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for cmd in re.findall(r"`([^`\n]*find [^`\n]*)`", text) + re.findall(r"^(find .*)$", text, flags=re.M):
            if "nb" in cmd and "-delete" in cmd:
                found.append((doc.relative_to(ROOT).as_posix(), cmd.strip()))
    return found


def test_the_documented_cleanup_commands_are_found():
    docs = {doc for doc, _ in _cache_commands()}
    assert "docs/tutorial/getting-started.md" in docs and "docs/architecture.md" in docs


@pytest.mark.skipif(shutil.which("find") is None or shutil.which("bash") is None, reason="needs find and bash")
@pytest.mark.parametrize("doc,command", _cache_commands())
def test_a_documented_cleanup_command_deletes_the_cache(doc, command, tmp_path):
    caches = [tmp_path / "evolve" / "__pycache__" / "m.f-1.py311.nbi", tmp_path / "evolve" / "__pycache__" /
              "m.f-1.py311.1.nbc", tmp_path / "heuristics" / "sub" / "__pycache__" / "k.nbc"]
    venv = tmp_path / ".venv" / "lib" / "__pycache__" / "numba.nbi"
    keep = tmp_path / "evolve" / "m.py"
    for p in (*caches, venv, keep):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    res = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and not res.stderr, (doc, command, res.stderr)
    left = [str(p) for p in caches if p.exists()]
    assert not left, (doc, command, left)
    assert keep.exists()
    if ".venv" in command:
        assert venv.exists(), (doc, command)


def test_no_transformers_progress_bar_under_no_progress(llama_files, tmp_path):
    pytest.importorskip("gguf")
    from test_harvest import _gguf_pair

    path, directory = _gguf_pair(tmp_path)
    prompts = tmp_path / "p.txt"
    prompts.write_text("abc de\nxyz\nhello world\n")
    from click.testing import CliRunner

    from evolve.cli.harvest import harvest

    res = CliRunner().invoke(harvest, ["--target", str(path), "--draft", str(directory), "--prompts", str(prompts),
                                       "--gamma", "2", "--max-new-tokens", "4", "--out", str(tmp_path / "out"),
                                       "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "%|" not in res.stderr and "Converting" not in res.stderr and "it/s" not in res.stderr, res.stderr


def _module_references(text: str) -> list[tuple[list[str], str]]:
    """([identifier, ...], module path) for every run of backticked identifiers followed by ``(`path.py`)``."""
    out = []
    pattern = r"((?:`[A-Za-z_][A-Za-z0-9_]*`(?:,\s*|\s+and\s+|\s+or\s+)?)+)\s*\(`([\w./]+\.py)`\)"
    for names, module in re.findall(pattern, text):
        out.append((re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", names), module))
    return out


def test_the_glossary_names_each_identifier_beside_its_module():
    text = (ROOT / "docs" / "reference" / "glossary.md").read_text(encoding="utf-8")
    refs = _module_references(text)
    assert any("fixed_gamma" in names for names, _ in refs)
    for names, module in refs:
        if module.split("/")[0] not in ("evolve", "heuristics", "scripts", "tests") and "/" in module:
            continue  # a file of another project (an engine's source)
        source = (ROOT / module).read_text(encoding="utf-8")
        for name in names:
            assert re.search(rf"\b{re.escape(name)}\b", source), f"glossary: `{name}` is not in {module}"

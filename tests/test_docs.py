"""The documentation: every generated table is current, every link resolves, nothing points outside the repo.

* Each table block of README.md and docs/**/*.md (``<!-- table: NAME -->`` ... ``<!-- /table -->``)
  is compared with what ``python -m evolve.docs`` would write now (``--check --table NAME``);
  the slow ones (searches, the pareto rescoring, the tree simulation) are marked ``slow``.
* Relative links (``[text](path#anchor)``) point at files of the repository and, for Markdown
  files, at headings that exist (GitHub's anchor rules).
* No document, docstring or source file of the project points outside the repository.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evolve.cli.docs import docs, producers
from evolve.commands.doctables import ROOT, blocks, doc_files, replace_blocks

DOCS = doc_files()
USED = sorted({name for path in DOCS for name, _, _ in blocks(path.read_text(encoding="utf-8"))})
TABLES = producers()


def _param(name: str):
    return pytest.param(name, marks=pytest.mark.slow) if TABLES[name].slow else name


def test_documents_exist_and_use_known_tables():
    names = {p.relative_to(ROOT).as_posix() for p in DOCS}
    for page in ("README.md", "docs/README.md", "docs/reference/math.md", "docs/reference/schema.md",
                 "docs/reference/commands.md", "docs/reference/rules.md", "docs/reference/glossary.md",
                 "docs/results/synthetic.md", "docs/reference/api.md", "docs/architecture.md"):
        assert page in names
    assert set(USED) <= set(TABLES)
    assert (ROOT / "docs/fronts/pareto_default.json").is_file()


@pytest.mark.parametrize("name", [_param(n) for n in USED])
def test_table_is_current(name):
    result = CliRunner().invoke(docs, ["--check", "--table", name])
    assert result.exit_code == 0, result.output


def test_check_names_a_stale_table(tmp_path, monkeypatch):
    text = "# t\n\n<!-- table: schema_columns -->\nold\n<!-- /table -->\n"
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(text)
    from evolve.commands import doctables
    stale = doctables.refresh(TABLES, ["schema_columns"], check=True, root=tmp_path)
    assert [(p.name, n) for p, n in stale.stale] == [("README.md", "schema_columns")]
    assert (tmp_path / "README.md").read_text() == text  # --check writes nothing
    done = doctables.refresh(TABLES, ["schema_columns"], root=tmp_path)
    assert done.written == [tmp_path / "README.md"]
    assert doctables.refresh(TABLES, ["schema_columns"], check=True, root=tmp_path).stale == []


def test_entry_point_exit_codes():
    run = subprocess.run([sys.executable, "-m", "evolve.docs", "--check", "--table", "no_such_table"],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 2
    assert "no_such_table" in run.stderr


def test_replace_blocks_keeps_everything_else():
    text = "a\n<!-- table: x -->\nold\n<!-- /table -->\nb\n<!-- table: y -->\n<!-- /table -->\n"
    assert replace_blocks(text, {"x": "new\n"}) == text.replace("old\n", "new\n")
    assert replace_blocks(text, {}) == text


# --- links ----------------------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]{2,}|`", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_resolve(path):
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    for target in LINK.findall(text):
        assert "://" not in target, f"{path.name}: external link {target} (documents link inside the repo only)"
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        assert dest.exists(), f"{path.relative_to(ROOT)}: broken link {target}"
        assert ROOT in dest.parents or dest == ROOT, f"{path.relative_to(ROOT)}: link {target} leaves the repository"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{path.relative_to(ROOT)}: no heading for #{anchor} in {dest.name}"


def test_nothing_points_outside_the_repository():
    # the pattern is assembled so that this file does not match it itself
    pattern = re.compile("|".join([r"\.\./" + "shared", "seed" + " 00", "notes" + " section"]))
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for pkg in ("data", "evolve", "heuristics", "tests"):
        files += sorted((ROOT / pkg).rglob("*.py"))
    files += [ROOT / "generate_data.py", ROOT / "benchmark.py"]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in files
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not hits, "lines pointing outside the repository:\n" + "\n".join(hits)

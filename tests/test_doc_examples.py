"""Every Python code block of the documentation runs in the test suite, so a documented example cannot crash.

Each fenced ``python`` block of README.md and docs/**/*.md is one of:

* a doctest (its first line starts with ``>>>``): run by :mod:`doctest`;
* marked ``<!-- runnable -->`` on the line before the fence: executed as a script;
* marked ``<!-- not run: REASON -->`` on the line before the fence (a signature, a sketch needing a GPU or
  an exported module, a process that keeps running).

An unmarked block fails :func:`test_every_python_block_is_run_or_says_why_not`. Both kinds of run happen in a
fresh working directory holding ``data``, a tiny dataset of the vocab model (10 texts), with every
``api.run_search`` cut to 12 programs and 1 generation (the example's own settings are for a real run), and
with the registered objectives restored afterwards.
"""
from __future__ import annotations

import doctest
import re

import pytest

from evolve.commands.doctables import ROOT, doc_files

_FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
_MARK = re.compile(r"<!-- (runnable|not run: [^>]+) -->\n$")


def python_blocks() -> list[tuple[str, int, str, str]]:
    """(file relative to the root, line, marker or "", code) of every fenced python block."""
    out = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            before = text[: match.start()]
            line = before.count("\n") + 1
            previous = before.rsplit("\n", 2)[-2] + "\n" if before.count("\n") >= 1 else ""
            mark = _MARK.search(previous)
            code = match.group(1)
            kind = "doctest" if code.lstrip().startswith(">>>") else (mark.group(1) if mark else "")
            out.append((str(path.relative_to(ROOT)), line, kind, code))
    return out


BLOCKS = python_blocks()
RUN = [b for b in BLOCKS if b[2] in ("doctest", "runnable")]


def test_every_python_block_is_run_or_says_why_not():
    unmarked = [f"{f}:{line}" for f, line, kind, _ in BLOCKS if not kind]
    assert not unmarked, ("python blocks neither doctests nor marked <!-- runnable --> or <!-- not run: REASON -->: "
                          + ", ".join(unmarked))
    assert any(kind == "runnable" for _, _, kind, _ in BLOCKS)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory with ``data`` (tiny vocab dataset), small searches and the objectives restored."""
    from evolve import api
    from evolve.eval import objectives
    from evolve.traces.synth import generate

    generate.write(generate.generate_dataset("vocab", seed=1, sequences=10), tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    full = api.run_search

    def small(config, progress=None):
        config = dict(config)
        config.update(population=min(int(config.get("population", 12)), 12),
                      generations=min(int(config.get("generations", 1)), 1))
        config.setdefault("out", str(tmp_path / "results"))
        return full(config, progress)

    monkeypatch.setattr(api, "run_search", small)
    saved = dict(objectives.OBJECTIVES)
    yield tmp_path
    objectives.OBJECTIVES.clear()
    objectives.OBJECTIVES.update(saved)


@pytest.mark.parametrize("source, line, kind, code", RUN, ids=[f"{f}:{line}" for f, line, _, _ in RUN])
def test_documented_example_runs(workdir, source, line, kind, code):
    if kind == "doctest":
        parser = doctest.DocTestParser()
        test = parser.get_doctest(code, {}, f"{source}:{line}", source, line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        runner.run(test)
        assert runner.failures == 0, f"{source}:{line}: {runner.failures} doctest failures"
    else:
        exec(compile(code, f"{source}:{line}", "exec"), {"__name__": "__doc_example__"})
    partial = [p for p in workdir.rglob("*.partial")]
    assert not partial, f"{source}:{line} left {partial}"

"""A newcomer's tour runs with no surprise: what the documentation tells a user to type is what the commands take.

Found by running the commands of README.md, docs/tutorial/getting-started.md and docs/tutorial/your-model-pair.md
from a fresh copy of the repository (with the test suite's tiny models in place of real ones):

* the documented ``python -m evolve export RUN --to torch --output my_rule.py`` was refused from the repository's
  root, where every command of the tour runs (a new top-level Python file would be imported in place of a module of
  its name), with a message calling the new file "a source file of the repository". The cases are generated from
  every fenced bash block of the documentation: each path given to an output option (``--output``, ``--out``,
  ``--write-costs``, ``--champions-dir``) must be one the output guard lets a command write from the root;
* the guard's message for such a new file says why and where to write it instead;
* the verdict's "next:" line of a verification-length champion gave a command without the run's dataset and gamma
  (``test_hostile_round5_context.py`` checks it names them).
"""
from __future__ import annotations

import re
import shlex

import pytest

from evolve.commands.doctables import ROOT, doc_files
from evolve.files.guard import source_location

_BASH = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)
#: Options whose value is a path a command writes.
OUTPUT_OPTIONS = ("--output", "--out", "--write-costs", "--champions-dir", "--large-dir")


def _outputs() -> list[tuple[str, str]]:
    """(file, path) of every literal path given to an output option in a bash block of the documentation."""
    found = []
    for doc in [ROOT / "README.md", *doc_files()]:
        for block in _BASH.findall(doc.read_text(encoding="utf-8")):
            text = block.replace("\\\n", " ")
            for line in text.splitlines():
                try:
                    words = shlex.split(line.split(" #")[0], comments=True)
                except ValueError:
                    continue
                for flag, value in zip(words, words[1:]):
                    if flag in OUTPUT_OPTIONS and not re.search(r"[$<>{}]|[A-Z]{3,}", value):
                        found.append((str(doc.relative_to(ROOT)), value))
    return sorted(set(found))


OUTPUTS = _outputs()


def test_the_documentation_has_outputs():
    assert len(OUTPUTS) > 20
    assert ("docs/tutorial/your-model-pair.md", "results/my_rule.py") in OUTPUTS


@pytest.mark.parametrize("doc, value", OUTPUTS, ids=[f"{d}:{v}" for d, v in OUTPUTS])
def test_every_documented_output_can_be_written_from_the_root(doc, value):
    assert source_location(ROOT / value) is None, (doc, value, source_location(ROOT / value))


def test_a_new_python_file_at_the_root_is_refused_saying_why():
    why = source_location(ROOT / "my_rule_of_a_newcomer.py")
    assert why is not None and "new Python file" in why and "would import in place of a module" in why
    assert "a source file of the repository" in source_location(ROOT / "benchmark.py")

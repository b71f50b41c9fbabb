"""The source-edits workload (prompts/source_edits): scripts/source_edit_prompts.py picks click's functions of 6 to
30 lines in file order, shows each whole and asks for three successive edits; the shipped file is that script's
output for click 8.5.1 and reads as a Spec-Bench-style prompts file."""
from __future__ import annotations

import importlib.util
import json
from importlib.metadata import version
from pathlib import Path

import pytest

from evolve.harvest.prompts import read_prompt_file

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "prompts" / "source_edits" / "question.jsonl"


def _script():
    spec = importlib.util.spec_from_file_location("source_edit_prompts", ROOT / "scripts" / "source_edit_prompts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = '''
def short(a):
    return a


class Box:
    @staticmethod
    def later(cls, value, *, other=1):
        if value:
            return value
        if other:
            return other
        return None

def first(x, y):
    """Doc."""
    z = x + y
    if z:
        return z
    return x


def noargs():
    a = 1
    b = 2
    c = 3
    d = 4
    return a + b + c + d
'''


def test_questions_pick_functions_in_file_order_and_name_the_first_parameter():
    script = _script()
    rows = script.questions(SOURCE, "mod.py")
    names = [r["turns"][0].split("`")[1] for r in rows]
    assert names == ["later", "first", "noargs"]  # file order; `short` (2 lines) is too short
    later = rows[0]["turns"][0]
    assert "@staticmethod\ndef later(cls, value, *, other=1):\n    if value:" in later  # dedented, decorator kept
    assert all(r["category"] == "mod.py" and len(r["turns"]) == 3 for r in rows)
    assert "`value` to `value_value`" in rows[0]["turns"][2]  # cls skipped
    assert "`x` to `x_value`" in rows[1]["turns"][2]
    assert "guard clause" in rows[2]["turns"][2]  # no parameter to rename
    assert [r["turns"][0].split("`")[1] for r in script.questions(SOURCE, "mod.py", cap=2)] == ["later", "first"]


def test_the_shipped_file_reads_as_a_prompts_file_of_three_turns_per_function():
    prompts = read_prompt_file(str(SHIPPED))
    assert prompts.questions == 90
    assert prompts.categories == ("core.py", "shell_completion.py", "termui.py", "types.py", "utils.py")
    assert {t.turn for t in prompts.texts} == {1, 2, 3} and len(prompts.texts) == 270
    first = [t.prompt for t in prompts.texts if t.turn == 1]
    assert all("```python\n" in p and p.count("```") == 2 for p in first)
    ids = [json.loads(line)["question_id"] for line in SHIPPED.read_text(encoding="utf-8").splitlines()]
    assert ids == list(range(1, 91))


def test_the_shipped_file_is_the_scripts_output_for_click_8_5_1(tmp_path):
    if version("click") != "8.5.1":
        pytest.skip(f"the shipped file was built from click 8.5.1, click {version('click')} is installed")
    out = tmp_path / "q.jsonl"
    _script().main(str(out))
    assert out.read_bytes() == SHIPPED.read_bytes()

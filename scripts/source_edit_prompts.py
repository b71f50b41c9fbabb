"""Build the source-edits workload: successive edits of functions of click's own source files, in Spec-Bench's
JSON Lines format (prompts/source_edits/question.jsonl; its README.md says what the texts are).

Each question is one function or method of one of click's modules (its category), shown in full as click's authors
wrote it; its three turns ask for three successive edits, each answered with the whole function again, so every
answer repeats most of the previous one and the code of the prompt. The functions are taken in file order, those of
MIN_LINES to MAX_LINES lines, at most PER_MODULE per module; the edits are the same three templates for every
function (the third names the function's first parameter other than self/cls, or asks for a guard clause where it
has none). Nothing is drawn at random: the file is a function of click's version alone.

    python scripts/source_edit_prompts.py prompts/source_edits/question.jsonl

The output is written to a temporary file and renamed; the installed click's version is printed (the shipped file
was built from click 8.5.1).
"""
from __future__ import annotations

import ast
import json
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

MODULES = ("core.py", "types.py", "shell_completion.py", "termui.py", "utils.py")
PER_MODULE = 20
MIN_LINES, MAX_LINES = 6, 30

FIRST = ("Here is `{name}` from click's `{module}`:\n\n```python\n{source}\n```\n\n"
         "Add a docstring that says what it returns. Reply with the whole updated function in a Python code block.")
SECOND = "Now add a short comment above every `if` and `return` statement. Reply with the whole updated function."
THIRD_RENAME = ("Now rename the parameter `{param}` to `{param}_value` everywhere in the function. Reply with the "
                "whole updated function.")
THIRD_GUARD = ("Now add a guard clause at the top that returns early when there is nothing to do. Reply with the "
               "whole updated function.")


def _first_parameter(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The function's first positional or keyword parameter other than self and cls, or None."""
    names = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
    names = [n for n in names if n not in ("self", "cls")]
    return names[0] if names else None


def questions(source: str, module: str, cap: int = PER_MODULE) -> list[dict]:
    """The questions of one module's source text: one per function or method of MIN_LINES to MAX_LINES lines, in
    file order (by first line), at most ``cap``; each a dict with ``category`` (the module) and three ``turns``."""
    nodes = [n for n in ast.walk(ast.parse(source))
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and MIN_LINES <= n.end_lineno - n.lineno + 1 <= MAX_LINES]
    rows = []
    for node in sorted(nodes, key=lambda n: n.lineno)[:cap]:
        start = min([d.lineno for d in node.decorator_list] + [node.lineno])
        code = textwrap.dedent("\n".join(source.split("\n")[start - 1:node.end_lineno]))  # ast counts \n lines
        param = _first_parameter(node)
        third = THIRD_RENAME.format(param=param) if param else THIRD_GUARD
        rows.append({"category": module,
                     "turns": [FIRST.format(name=node.name, module=module, source=code), SECOND, third]})
    return rows


def main(out: str) -> None:
    import click  # the installed click's own source files

    from evolve.files.atomic import atomic_write_text

    root = Path(click.__file__).parent
    rows = [q for module in MODULES for q in questions((root / module).read_text(encoding="utf-8"), module)]
    text = "".join(json.dumps({"question_id": i + 1, **q}, ensure_ascii=False) + "\n" for i, q in enumerate(rows))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, text)
    print(f"{out}: {len(rows)} questions from click {version('click')}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/source_edit_prompts.py OUT.jsonl")
    main(sys.argv[1])

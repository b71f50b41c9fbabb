"""Headroom under the size limits: a warning at 550 lines per module and at 9 parameters per function.

The ceilings are 600 lines per module (``tests/test_layers.py::test_modules_are_short``; here for ``scripts/``,
which that test does not cover) and 10 parameters per function (:func:`test_no_function_takes_more_than_10_parameters`):
crossing one fails. They are ceilings, not targets: a module or function that comes within reach of one
(:data:`WARN_LINES` lines, :data:`WARN_PARAMS` parameters) is listed as a :class:`HeadroomWarning`, one warning each,
in pytest's warnings summary; the test never fails on them (it lets them through whatever ``-W`` says), so a
module can be split, or parameters grouped, when there is a natural seam rather than in a hurry.

Scope: every ``.py`` file under ``evolve/``, ``heuristics/`` and ``scripts/``, and the top-level scripts
(``generate_data.py``, ``benchmark.py``). Lines are ``str.splitlines()`` of the file. Parameters are counted from
the source (:mod:`ast`) for every ``def`` and ``async def``, methods and nested functions included, lambdas not:
each positional-only, positional (``self`` and ``cls`` included) and keyword-only parameter counts one, and
``*args`` and ``**kwargs`` count one each.
"""
from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("evolve", "heuristics", "scripts")
TOP_LEVEL = ("generate_data.py", "benchmark.py")
#: The ceilings (crossing one fails).
MAX_LINES, MAX_PARAMS = 600, 10
#: Where the warnings start.
WARN_LINES, WARN_PARAMS = 550, 9


class HeadroomWarning(UserWarning):
    """A module of more than :data:`WARN_LINES` lines or a function of :data:`WARN_PARAMS` parameters or more."""


@dataclass(frozen=True)
class Function:
    """One ``def`` of a source file: where it is, its (qualified) name and its parameter count."""

    path: str
    line: int
    name: str
    params: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name} takes {self.params} parameters"


def source_files() -> list[Path]:
    files = [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py")) if "__pycache__" not in p.parts]
    return files + [ROOT / name for name in TOP_LEVEL]


def parameter_count(args: ast.arguments) -> int:
    """Positional-only, positional and keyword-only parameters, one each; ``*args`` and ``**kwargs`` one each."""
    return (len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
            + (args.vararg is not None) + (args.kwarg is not None))


def functions(source: str, path: str) -> list[Function]:
    """Every ``def``/``async def`` of ``source`` (nested ones too), named ``Class.method`` or ``outer.inner``."""
    found: list[Function] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                found.append(Function(path, child.lineno, name, parameter_count(child.args)))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source, filename=path), "")
    return found


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def module_lines() -> dict[str, int]:
    return {_relative(p): len(p.read_text(encoding="utf-8").splitlines()) for p in source_files()}


def all_functions() -> list[Function]:
    return [f for p in source_files() for f in functions(p.read_text(encoding="utf-8"), _relative(p))]


@pytest.mark.parametrize("source, want", [
    ("def f(a, b, /, c, *args, d, e=1, **kw): pass", [("f", 7)]),
    ("class C:\n    def m(self, a): pass\n    @classmethod\n    def k(cls): pass", [("C.m", 2), ("C.k", 1)]),
    ("async def g(*, x): pass", [("g", 1)]),
    ("def outer(a):\n    def inner(b, c): pass\n    h = lambda p, q, r: p\n", [("outer", 1), ("outer.inner", 2)]),
    ("def none(): pass", [("none", 0)]),
])
def test_parameters_are_counted(source, want):
    assert [(f.name, f.params) for f in functions(source, "m.py")] == want


def test_the_scope_is_found():
    names = {_relative(p) for p in source_files()}
    assert {"evolve/traces/schema.py", "heuristics/contract.py", "scripts/gpu_costs.py", "benchmark.py"} <= names
    assert len(all_functions()) > 1000


def test_no_function_takes_more_than_10_parameters():
    over = [str(f) for f in all_functions() if f.params > MAX_PARAMS]
    assert over == [], f"functions over {MAX_PARAMS} parameters (group them: a settings record, a context):\n" \
        + "\n".join(over)


def test_scripts_are_short():
    long = {path: n for path, n in module_lines().items() if path.startswith("scripts/") and n > MAX_LINES}
    assert long == {}, f"scripts over {MAX_LINES} lines: {long}"


def headroom_report() -> list[tuple[str, int, str]]:
    """(file, line, what) of every module over :data:`WARN_LINES` lines and every function of :data:`WARN_PARAMS`
    parameters or more, modules first."""
    modules = [(path, 1, f"{n} lines (warning over {WARN_LINES}, ceiling {MAX_LINES})")
               for path, n in sorted(module_lines().items()) if n > WARN_LINES]
    params = [(f.path, f.line, f"{f.name} takes {f.params} parameters (warning at {WARN_PARAMS}, ceiling {MAX_PARAMS})")
              for f in all_functions() if f.params >= WARN_PARAMS]
    return modules + params


def test_headroom_under_the_limits():
    """One :class:`HeadroomWarning` per module over 550 lines and per function of 9 parameters or more, located at
    the module or the ``def`` (never a failure: see the module doc), then one with the counts."""
    report = headroom_report()
    with warnings.catch_warnings():
        warnings.simplefilter("always", HeadroomWarning)
        for path, line, what in report:
            warnings.warn_explicit(what, HeadroomWarning, str(ROOT / path), line)
        if report:
            modules = sum(1 for _, _, what in report if what.endswith(f"ceiling {MAX_LINES})"))
            warnings.warn(HeadroomWarning(f"{modules} modules over {WARN_LINES} lines, {len(report) - modules} "
                                          f"functions of {WARN_PARAMS} parameters or more"), stacklevel=1)

"""The package layout: imports only go down the floors, whole folders at a time; no import cycles, click only in the
CLI, short modules.

Every ``.py`` file under ``evolve/`` and ``heuristics/`` (and the two top-level scripts)
is parsed with :mod:`ast`; every ``import``/``from ... import`` of a project module counts,
including imports inside functions (a deferred import is still a dependency). Relative imports
are resolved against the importing module's package.

Floors are given to whole folders (every module of a directory shares its folder's floor; the modules directly in
``evolve/`` are units of their own), bottom to top; a module may import modules of lower floors, and of its own
group on its own floor:

0. ``evolve/verification`` (the verification core: the standard rule and its residual, block
   verification, tree verification; numpy and Numba only, no other project module)
1. ``evolve.errors``, ``evolve.cluster``, ``evolve/files`` (atomic writes, locks, the output-path guard) and
   ``evolve/traces`` (schema, io, the synthetic models of ``evolve/traces/synth``)
2. ``evolve/engine`` (the real-model engine: loading, KV cache, drafters, distributions),
   ``evolve/gp`` (primitive set, expressions, parsing, compiler) and ``evolve/kinds`` (what a kind of program
   is, the hooks and the registry, which loads the kinds' packages by name)
3. ``evolve/harvest`` (traces from real models, on the engine), ``evolve/eval`` and
   ``heuristics`` (none imports another)
4. ``evolve/search``, ``evolve/sim`` and ``evolve/train`` (none imports another); then ``evolve/live`` (live
   decoding on real models, above the simulator's verification)
5. ``evolve/report`` (output: each command's rendering, tables, Markdown, plots); then ``evolve/export`` (with
   ``evolve/export/engines``, the engine targets); then ``evolve/commands`` (the command drivers: the live command
   runs exported modules); then ``evolve/perf`` (the speed harness of ``benchmark.py perf``)
6. each kind's folder ``evolve/kinds/<kind>`` (everything a kind is: scoring, warm start, rows, live decoder,
   exported layout, what the engines can express of it, its hooks): above every shared layer it uses, so no shared
   module imports a kind; they reach it through the registry (:mod:`evolve.kinds.registry`)
7. ``evolve/cli`` and ``evolve.api`` (the CLI may use the API; the API never imports the CLI)
8. ``generate_data``, ``benchmark``, ``evolve.__main__``, ``evolve.docs`` (entry points: nothing
   imports them)

An import that climbs a floor is allowed only where :data:`CLIMBING` names it (at most two, each with its reason).
A package's ``__init__`` runs before any of its modules, so the ``evolve`` package itself sits on
floor 0 (its lowest subpackage) and may import nothing.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("evolve", "heuristics")
SCRIPTS = ("generate_data", "benchmark")
#: Hard limit of lines per module (the goal is about 500).
MAX_LINES = 600

#: (folder, floor, group): a folder is a directory of the packages (its modules share the floor) or a module directly
#: in ``evolve/``; a folder not listed takes its parent folder's floor and group.
FLOORS: tuple[tuple[str, float, str], ...] = (
    ("evolve/verification", 0, "verification"),
    ("evolve/errors.py", 1, "base"),
    ("evolve/cluster.py", 1, "base"),
    ("evolve/files", 1, "base"),
    ("evolve/traces", 1, "base"),
    ("evolve/engine", 2, "engine"),
    ("evolve/gp", 2, "gp"),
    ("evolve/kinds", 2, "kinds"),
    ("evolve/harvest", 3, "harvest"),
    ("evolve/eval", 3, "eval"),
    ("heuristics", 3, "heuristics"),
    ("evolve/search", 4, "search"),
    ("evolve/sim", 4, "sim"),
    ("evolve/train", 4, "train"),
    ("evolve/live", 4.5, "live"),
    ("evolve/report", 5, "report"),
    ("evolve/commands", 5.3, "commands"),
    ("evolve/export", 5.2, "export"),
    ("evolve/perf", 5.5, "perf"),
    ("evolve/cli", 7, "cli"),
    ("evolve/api.py", 7, "api"),
    ("evolve/__main__.py", 8, "evolve.__main__"),
    ("evolve/docs.py", 8, "evolve.docs"),
    ("generate_data.py", 8, "generate_data"),
    ("benchmark.py", 8, "benchmark"),
)
#: The floor of each kind's folder (``evolve/kinds/<kind>``): above every shared floor it uses.
KIND_FLOOR = 6
#: Package ``evolve`` itself (its ``__init__``): the floor of its lowest subpackage.
PACKAGE_FLOORS: dict[str, tuple[float, str]] = {"evolve/__init__.py": (0, "evolve")}
#: Imports between different groups of one floor that are allowed: (importer group, imported group).
SIBLINGS: frozenset[tuple[str, str]] = frozenset({("cli", "api"), ("kinds", "gp")})
#: The imports that climb a floor, allowed by name ((importer module, imported module): why); at most two.
CLIMBING: dict[tuple[str, str], str] = {}
#: Third-party packages the verification core may import (besides the standard library).
CORE_THIRD_PARTY: frozenset[str] = frozenset({"numpy", "numba"})
#: Where ``click`` may be imported (module prefixes).
CLICK_ALLOWED: tuple[str, ...] = ("evolve.cli", *SCRIPTS)


@dataclass(frozen=True)
class Import:
    """One import statement's project module: who imports what, where."""

    importer: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{module_path(self.importer)}:{self.line}: {self.importer} imports {self.target}"


def module_name(path: Path) -> str:
    """``evolve/eval/evaluator.py`` -> ``evolve.eval.evaluator``; ``evolve/traces/__init__.py`` -> ``evolve.traces``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> list[Path]:
    """Every ``.py`` file of the three packages, plus the top-level scripts."""
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py")) if "__pycache__" not in p.parts]
    return files + [ROOT / f"{s}.py" for s in SCRIPTS]


FILES: list[Path] = source_files()
MODULES: dict[str, Path] = {module_name(p): p for p in FILES}


def module_path(module: str) -> str:
    return str(MODULES[module].relative_to(ROOT)) if module in MODULES else module


def _is_package(module: str) -> bool:
    return MODULES.get(module, Path()).name == "__init__.py"


def _project(name: str) -> bool:
    return name.split(".")[0] in PACKAGES + SCRIPTS


def _resolve(name: str) -> str:
    """The longest known module that ``name`` (a dotted import path) starts with."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return name  # unknown: reported as is


def _base(importer: str, node: ast.ImportFrom) -> str:
    """The absolute module a ``from X import ...`` statement names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    package = importer.split(".") if _is_package(importer) else importer.split(".")[:-1]
    package = package[:len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def imports_of(module: str) -> list[Import]:
    """Project imports of one module: ``import a.b`` -> a.b; ``from a.b import c`` -> a.b.c if it is
    a module, else a.b."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"), filename=str(MODULES[module]))
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, node)
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for name in names:
            if _project(name):
                found.append(Import(module, _resolve(name), node.lineno))
    return sorted(set(found), key=lambda i: (i.line, i.target))


def absolute_imports(module: str) -> list[tuple[int, str]]:
    """(line, imported module name) of every absolute ``import``/``from ... import`` of ``module``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append((node.lineno, node.module or ""))
    return found


def third_party_imports(module: str, package: str) -> list[int]:
    """Lines of ``module`` that import ``package`` (or one of its submodules)."""
    return sorted({line for line, n in absolute_imports(module) if n == package or n.startswith(package + ".")})


def folder_of(module: str) -> str:
    """The folder of a module: its directory relative to the root (``evolve/eval``), or, for a module directly in
    ``evolve/`` or at the root, its own file (``evolve/api.py``, ``benchmark.py``); a package's ``__init__`` belongs
    to its own directory (``evolve/kinds/threshold``), the ``evolve`` package's to ``evolve/__init__.py``."""
    path = MODULES[module].relative_to(ROOT)
    if path.name == "__init__.py":
        return str(path.parent) if path.parent != Path("evolve") else "evolve/__init__.py"
    return str(path) if path.parent in (Path("."), Path("evolve")) else str(path.parent)


def floor_of(module: str) -> tuple[float, str] | None:
    """(floor, group) of a module: its folder's (:func:`folder_of`, :data:`FLOORS`), or None when none covers it."""
    if module not in MODULES:
        return None
    folder = folder_of(module)
    if folder in PACKAGE_FLOORS:
        return PACKAGE_FLOORS[folder]
    parts = folder.split("/")
    if parts[:2] == ["evolve", "kinds"] and len(parts) == 3:
        return KIND_FLOOR, folder
    for prefix, floor, group in FLOORS:
        if folder == prefix or folder.startswith(prefix + "/"):
            return floor, group
    return None


ALL_IMPORTS: list[Import] = [i for m in sorted(MODULES) for i in imports_of(m)]


def test_the_tree_is_found():
    for module in ("evolve.traces.io", "evolve.gp.compiler", "evolve.eval.evaluator", "heuristics.contract",
                   "evolve.search.config", "evolve.api", "benchmark", "generate_data"):
        assert module in MODULES, module
    assert ALL_IMPORTS


def test_every_module_has_a_floor():
    assert [m for m in sorted(MODULES) if floor_of(m) is None] == []


def test_every_import_names_an_existing_module():
    assert [str(i) for i in ALL_IMPORTS if i.target not in MODULES] == []


def climbing_imports() -> list[str]:
    """Every import that goes up a floor, or sideways between groups of one floor (:data:`SIBLINGS` aside), as
    ``file:line: importer imports target (floor F group -> floor F' group)``."""
    bad = []
    for imp in ALL_IMPORTS:
        src, dst = floor_of(imp.importer), floor_of(imp.target)
        if src is None or dst is None:
            continue  # reported by the two tests above
        (f_src, g_src), (f_dst, g_dst) = src, dst
        if f_dst < f_src or g_src == g_dst or (f_src == f_dst and (g_src, g_dst) in SIBLINGS):
            continue
        if (imp.importer, imp.target) in CLIMBING:
            continue
        bad.append(f"{imp} (floor {f_src} {g_src} -> floor {f_dst} {g_dst})")
    return bad


def test_imports_only_go_down_the_floors():
    assert climbing_imports() == [], "imports that go up or sideways:\n" + "\n".join(climbing_imports())


def test_at_most_two_climbing_imports_are_allowed():
    assert len(CLIMBING) <= 2 and all(why for why in CLIMBING.values())


def _kind_module(module: str) -> str | None:
    """The kind's folder a module belongs to (``threshold`` of ``evolve.kinds.threshold.report_hooks``), or None."""
    parts = folder_of(module).split("/") if module in MODULES else []
    return parts[2] if parts[:2] == ["evolve", "kinds"] and len(parts) == 3 else None


def test_no_kind_imports_another_kind():
    """A kind's folder holds the kind alone: what two kinds share is in a shared layer below them."""
    bad = [str(i) for i in ALL_IMPORTS if _kind_module(i.importer) and _kind_module(i.target)
           and _kind_module(i.importer) != _kind_module(i.target)]
    assert bad == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module, or with a self-import (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"a"}}) == [["a"]]


def test_no_import_cycles():
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in ALL_IMPORTS:
        if imp.target in MODULES:
            edges[imp.importer].add(imp.target)
    cycles = _cycles(edges)
    detail = ["  " + " <-> ".join(c) + ": " + "; ".join(str(i) for i in ALL_IMPORTS
                                                       if i.importer in c and i.target in c) for c in cycles]
    assert cycles == [], "import cycles:\n" + "\n".join(detail)


def test_click_only_in_the_cli():
    bad = [f"{module_path(m)}:{line}" for m in sorted(MODULES)
           if not any(m == p or m.startswith(p + ".") for p in CLICK_ALLOWED)
           for line in third_party_imports(m, "click")]
    assert bad == [], "click imported outside evolve/cli/: " + ", ".join(bad)


def test_the_verification_core_imports_only_numpy_and_numba():
    import sys
    core = [m for m in sorted(MODULES) if m == "evolve.verification" or m.startswith("evolve.verification.")]
    assert core
    bad = [f"{module_path(m)}:{line}: {name}" for m in core for line, name in absolute_imports(m)
           if not (name.startswith("evolve.verification") or name.split(".")[0] in CORE_THIRD_PARTY
                   or name.split(".")[0] in sys.stdlib_module_names)]
    assert bad == [], "the verification core imports more than numpy, Numba and itself: " + ", ".join(bad)


def test_the_file_helpers_depend_on_nothing_above_them():
    """``evolve.files`` (atomic writes, locks, pins, the output-path guard) imports no project module but
    ``evolve.errors`` and its own: a dataset's file names reach the guard by registration
    (:func:`evolve.files.guard.register_dataset_files`), not by an import of ``evolve.traces``."""
    helpers = [m for m in sorted(MODULES) if m == "evolve.files" or m.startswith("evolve.files.")]
    assert "evolve.files.guard" in helpers
    bad = [str(i) for m in helpers for i in imports_of(m)
           if not (i.target == "evolve.errors" or i.target == "evolve.files" or i.target.startswith("evolve.files."))]
    assert bad == [], "evolve.files imports more of the project than evolve.errors and itself:\n" + "\n".join(bad)


def test_modules_are_short():
    long = {str(p.relative_to(ROOT)): n for p in FILES if p.parent != ROOT
            and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"modules over {MAX_LINES} lines: {long}"


@pytest.mark.parametrize("text, module, want", [
    ("import evolve.traces.io", "heuristics.contract", ["evolve.traces.io"]),
    ("from evolve.traces.io import Traces", "heuristics.contract", ["evolve.traces.io"]),
    ("from evolve.eval import evaluator", "evolve.search.config", ["evolve.eval.evaluator"]),
    ("from . import io", "evolve.traces.schema", ["evolve.traces.io"]),
    ("from .io import Traces", "evolve.traces", ["evolve.traces.io"]),
    ("def f():\n    import evolve.commands.compare.table\n", "evolve.traces.io", ["evolve.commands.compare.table"]),
    ("import numpy, click", "evolve.traces.io", []),
])
def test_import_parsing(text, module, want, monkeypatch, tmp_path):
    source = tmp_path / ("__init__.py" if module == "evolve.traces" else "m.py")
    source.write_text(text)
    monkeypatch.setitem(MODULES, module, source)
    assert [i.target for i in imports_of(module)] == want

"""A kind of program is contained in its folder: outside ``evolve/kinds/`` only a few files name a kind other than
the default one (the per-token threshold), and each of them is listed here with its reason.

A file *names* a kind when (parsed with :mod:`ast`, docstrings left out) it imports the kind's package
(``evolve.kinds.relaxation``, ...), uses the kind's descriptor by a name of its own (``RELAXATION``,
``VERIFY_LENGTH``, ``TREE_SHAPE``), or spells the kind's name as a string where a kind is named: a ``kind=``
argument, an argument of ``program_kind``, an index of ``KINDS`` or a constant assigned the name. The simulator's
setting ``relaxation`` (the weight of relaxed block verification, ``benchmark.py simulate --relaxation``) is a
setting's name, not the kind's, and is not counted. The grep that approximates it:
``grep -rlE "evolve\\.kinds\\.(relaxation|verify_length|tree_shape)|\\b(RELAXATION|VERIFY_LENGTH|TREE_SHAPE)\\b|kind=\\"(verify-length|tree-shape|relaxation)\\"" evolve heuristics scripts``.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The kinds' packages and descriptors' names other than the default kind's.
PACKAGES = {"relaxation", "verify_length", "tree_shape"}
DESCRIPTORS = {"RELAXATION", "VERIFY_LENGTH", "TREE_SHAPE"}
KIND_NAMES = {"relaxation", "verify-length", "tree-shape"}
#: The files outside evolve/kinds/ that may name a kind, and why (at most six).
ALLOWED: dict[str, str] = {
    "heuristics/length_policies.py": "the published verification-length families (fixed lengths, confidence "
                                     "thresholds) are rules of that kind, in the rules package as every family is",
    "scripts/verify_length_summary.py": "a results script of the verification-length searches reads its scorer",
    "scripts/deploy_e2e_transformers.py": "the end-to-end run of the exports writes verification-length champions to "
                                          "export (a fixed length, a confidence stop, a prompt-lookup length)",
}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _is_kind_package(module: str) -> bool:
    parts = module.split(".")
    return parts[:2] == ["evolve", "kinds"] and len(parts) > 2 and parts[2] in PACKAGES


def _kind_string(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in KIND_NAMES


def names_of_kinds(source: str) -> list[str]:
    """Where ``source`` names a kind other than the default one (module doc), as ``line: what``."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and _is_kind_package(node.module):
            hits.append(f"{node.lineno}: imports {node.module}")
        elif isinstance(node, ast.Import):
            hits += [f"{node.lineno}: imports {a.name}" for a in node.names if _is_kind_package(a.name)]
        elif isinstance(node, ast.Name) and node.id in DESCRIPTORS:
            hits.append(f"{node.lineno}: uses {node.id}")
        elif isinstance(node, ast.keyword) and node.arg == "kind" and _kind_string(node.value):
            hits.append(f"{node.value.lineno}: kind={node.value.value!r}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "program_kind" and \
                any(_kind_string(a) for a in node.args):
            hits.append(f"{node.lineno}: program_kind of a kind's name")
        elif isinstance(node, ast.Subscript) and getattr(node.value, "id", None) == "KINDS" and _kind_string(node.slice):
            hits.append(f"{node.lineno}: KINDS[{node.slice.value!r}]")
        elif isinstance(node, ast.Assign) and _kind_string(node.value) and id(node.value) not in docs:
            hits.append(f"{node.lineno}: a constant holding {node.value.value!r}")
    return hits


def _files() -> list[Path]:
    files = [p for d in ("evolve", "heuristics", "scripts") for p in sorted((ROOT / d).rglob("*.py"))]
    return [p for p in files + [ROOT / "benchmark.py", ROOT / "generate_data.py"]
            if "__pycache__" not in p.parts and not p.relative_to(ROOT).as_posix().startswith("evolve/kinds/")]


def test_the_scanner_finds_every_way_of_naming_a_kind():
    source = ('"""The relaxation kind."""\nfrom evolve.kinds.relaxation import KIND\nimport evolve.kinds.tree_shape\n'
              'X = VERIFY_LENGTH\nRule("r", kind="verify-length")\nprogram_kind("tree-shape")\nKINDS["relaxation"]\n'
              'NAME = "relaxation"\nInputError("x", param="relaxation")\nf("relaxation")\n')
    found = names_of_kinds(source)
    assert sorted(int(h.split(":")[0]) for h in found) == [2, 3, 4, 5, 6, 7, 8], found


def test_at_most_six_files_outside_the_kinds_name_a_kind():
    found = {p.relative_to(ROOT).as_posix(): hits for p in _files() if (hits := names_of_kinds(p.read_text()))}
    assert len(ALLOWED) <= 6
    assert {f: h for f, h in found.items() if f not in ALLOWED} == {}
    assert set(ALLOWED) <= set(found), "an allowed file no longer names a kind: drop it from ALLOWED"

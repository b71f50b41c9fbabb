"""Numba's on-disk cache (``cache=True``) holds no file of a module that no longer exists.

Numba writes each compiled function's index and code beside its module (``__pycache__/MODULE.FUNCTION-LINE.pyXY.nbi``
and ``.nbc``). After a module is renamed or moved, the files of its old name stay, and a new module that takes the
name (with a function of the same name on the same line) can be served them. The remedy is to delete them
(``find . -name '*.nb[ic]' -delete``); this test names any that are left.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def stale_cache_files(root: Path = ROOT) -> list[Path]:
    """Numba cache files (``*.nbi``, ``*.nbc``) under ``root`` (its virtual environment left out) whose module
    (the part of the name before the first dot, a ``.py`` file in the directory above ``__pycache__``) is gone."""
    stale = []
    for path in sorted(root.rglob("__pycache__/*.nb[ic]")):
        if ".venv" in path.relative_to(root).parts:
            continue
        module = path.name.split(".")[0]
        if not (path.parent.parent / f"{module}.py").is_file():
            stale.append(path)
    return stale


def test_no_numba_cache_of_a_missing_module():
    stale = stale_cache_files()
    assert not stale, (f"{len(stale)} Numba cache files of modules that no longer exist, e.g. "
                       f"{stale[0].relative_to(ROOT)}: delete them (find . -name '*.nb[ic]' -delete)")


def test_a_renamed_module_leaves_stale_files_that_are_named(tmp_path):
    cache = tmp_path / "pkg" / "__pycache__"
    cache.mkdir(parents=True)
    (tmp_path / "pkg" / "kept.py").write_text("")
    for name in ("kept.f-3.py311.nbi", "kept.f-3.py311.1.nbc", "renamed.f-3.py311.nbi"):
        (cache / name).write_bytes(b"")
    assert stale_cache_files(tmp_path) == [cache / "renamed.f-3.py311.nbi"]

"""The workspace of the hostile-input tests (``test_hostile.py``, ``test_hostile_faults.py``) and the
checks they share; the fixtures ``base_run``, ``ws`` and ``vocab_ws`` are in ``conftest.py``.

A workspace is a fresh directory holding a copy of a small dataset, a run directory, a champions
directory, a plain file and an empty directory; :func:`check` runs one command in it and asserts
its exit code, its one-line message and that no file changed (:func:`snapshot`).
"""
from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from click.testing import CliRunner

from evolve.traces.io import write_dataset
from tree_helpers import record_files
from evolve.files.guard import ROOT
from evolve.cli.benchmark import cli as benchmark_cli
from evolve.cli.evolve import cli as evolve_cli
from evolve.cli.generate import cli as generate_cli
from heuristics.champions import ENV_DIR

COMMANDS = {"benchmark": benchmark_cli, "evolve": evolve_cli, "generate": generate_cli}
#: Files and directories of the repository that no case may touch (directories: their names).
REPO_FILES = ("heuristics/registry.py", "heuristics/champions.py")
REPO_DIRS = ("heuristics", "heuristics/champions", "evolve", "evolve/traces/synth", "data")


@dataclass
class Workspace:
    """The files a case may damage or name: all inside ``root``."""

    root: Path
    data: Path
    run: Path
    champs: Path
    champion: Path
    file: Path
    adir: Path

    def frame(self, split: str = "test") -> pd.DataFrame:
        return pd.read_parquet(self.data / f"{split}.parquet")

    def save(self, df: pd.DataFrame, split: str = "test") -> None:
        """Write a (hostile) split as part of the dataset: recorded in its metadata (``tree_helpers.record_files``),
        so the checks of the records themselves are what a case meets (a file written on its own is refused before,
        by the binding of the dataset's files: tests/test_hostile_round5_binding.py)."""
        df.to_parquet(self.data / f"{split}.parquet", index=False)
        record_files(self.data)

    def put(self, column: str, row: int, value, split: str = "test") -> None:
        """Set one cell of a split. Parquet columns have one type: a string value turns the
        whole column into strings (so the first bad row is 0), an integer in a boolean column
        turns it into int64."""
        df = self.frame(split)
        if isinstance(value, str):
            df[column] = df[column].astype(str)
        elif isinstance(value, int) and df[column].dtype == bool:
            df[column] = df[column].astype(np.int64)
        df.loc[row, column] = value
        self.save(df, split)

    def as_json(self) -> None:
        """Rewrite the dataset as JSON records (same rows)."""
        frames = {s: self.frame(s) for s in ("train", "valid", "test")}
        write_dataset(self.data, frames, json.loads((self.data / "metadata.json").read_text()), "json")

    def records(self, split: str = "test") -> list:
        return json.loads((self.data / f"{split}.json").read_text())

    def write_records(self, records, split: str = "test") -> None:
        """Write a (hostile) JSON split as part of the dataset (as :meth:`save`)."""
        (self.data / f"{split}.json").write_text(json.dumps(records))
        record_files(self.data)

    def bad_champion(self, **changes) -> Path:
        doc = json.loads(self.champion.read_text())
        doc.update(changes)
        path = self.root / "bad.json"
        path.write_text(json.dumps(doc))
        return path


def make_workspace(tmp_path: Path, dataset: Path, base_run: Path, monkeypatch) -> Workspace:
    """A workspace in ``tmp_path`` around a copy of ``dataset`` and of the run directory ``base_run``;
    the current directory becomes ``tmp_path`` (through ``monkeypatch``, so it is restored)."""
    data = tmp_path / "d"
    shutil.copytree(dataset, data)
    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    champs = tmp_path / "champs"
    champs.mkdir()
    (tmp_path / "file.txt").write_text("a plain file\n")
    (tmp_path / "adir").mkdir()
    champion = tmp_path / "champ.json"
    shutil.copy(run / "champion.json", champion)
    monkeypatch.chdir(tmp_path)
    return Workspace(tmp_path, data, run, champs, champion, tmp_path / "file.txt", tmp_path / "adir")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(root: Path) -> dict[str, str]:
    """{path: sha256} of every file below ``root`` plus the protected repository files and listings
    (a protected directory that does not exist is recorded as absent, so creating it changes the snapshot)."""
    state = {str(p): _digest(p) for p in sorted(root.rglob("*")) if p.is_file()}
    state.update({f"dir {p}": "" for p in sorted(root.rglob("*")) if p.is_dir()})
    for name in REPO_FILES:
        state[f"repo {name}"] = _digest(ROOT / name)
    for name in REPO_DIRS:
        directory = ROOT / name
        state[f"repo-ls {name}"] = (" ".join(sorted(p.name for p in directory.iterdir() if p.name != "__pycache__"))
                                    if directory.is_dir() else "(absent)")
    return state


def invoke(command: str, args: list, env: dict | None = None):
    return CliRunner().invoke(COMMANDS[command], [str(a) for a in args], env=env)


def check(ws: Workspace, command: str, args: list, code: int, culprits: tuple[str, ...],
          env: dict | None = None):
    """Run one case and assert exit code, one-line message naming ``culprits`` and untouched files."""
    before = snapshot(ws.root)
    res = invoke(command, args, {ENV_DIR: str(ws.champs), **(env or {})})
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    assert res.exit_code == code, (res.stdout, res.stderr)
    after = snapshot(ws.root)
    changed = [k for k, v in before.items() if after.get(k) != v]
    assert not changed, changed
    lines = res.stderr.strip().splitlines()
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
        assert sorted(after) == sorted(before), sorted(set(after) - set(before))
        message = lines[0]
    else:
        warned = [line for line in lines if line.startswith("warning: ")]
        assert warned, res.stderr
        message = " ".join(warned)
    for culprit in culprits:
        assert str(culprit) in message, (culprit, message)
    assert "np.float64" not in message and "np.int64" not in message
    return res


def one_line_error(res, *culprits) -> str:
    """The one ``error:`` line of a refused command (exit 2, no traceback), checked to name every one of
    ``culprits``."""
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.startswith("error: ")]
    assert res.exit_code == 2 and len(lines) == 1 and "Traceback" not in res.output, res.output
    for c in culprits:
        assert str(c) in lines[0], (c, lines[0])
    return lines[0]

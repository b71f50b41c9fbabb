"""Faults while a command works: Ctrl-C, SIGKILL, and writes that fail only at the end.

* ``python -m evolve run`` stopped by one SIGINT finishes the generation, writes the run
  directory, says so (``run.json``, ``config.toml``, ``evolve show``) and exits with 130; a
  second SIGINT aborts with 130 and writes nothing; SIGKILL leaves no half-written run
  directory. The runs are real subprocesses whose stderr is a pseudo-terminal, so the progress
  bar tells the test that the search has started before the signal is sent.
* ``generate_data.py`` killed while it works leaves the earlier dataset intact, and temporary
  files of a killed write are removed by the next successful write.
* When writing fails at the end (simulated by a failing write function), the result is saved
  into a rescue directory named in the one-line error; unwritable places are refused before work.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from evolve.traces.io import load_split
from heuristics.champions import ENV_DIR

from hostile_helpers import Workspace, check, invoke, snapshot

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and pseudo-terminals")


class Child:
    """A command in a subprocess with stderr on a pseudo-terminal that is drained continuously."""

    def __init__(self, args: list, cwd: Path, env: dict | None = None):
        import pty

        master, slave = pty.openpty()
        self.proc = subprocess.Popen([sys.executable, *map(str, args)], cwd=cwd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=slave, env={**os.environ, **(env or {})})
        os.close(slave)
        self.master, self.stderr = master, b""
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            self.stderr += chunk

    def wait_for(self, text: bytes, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.stderr:
            assert self.proc.poll() is None, (self.proc.returncode, self.stderr[-2000:])
            assert time.monotonic() < deadline, self.stderr[-2000:]
            time.sleep(0.05)

    def finish(self, timeout: float = 120.0) -> tuple[int, str, str]:
        out, _ = self.proc.communicate(timeout=timeout)
        self.reader.join(timeout=5)
        os.close(self.master)
        return self.proc.returncode, out.decode(), self.stderr.decode(errors="replace")


def _search(ws: Workspace, out: Path) -> Child:
    return Child(["-m", "evolve", "run", "--data", ws.data, "--out", out, "--population", 8,
                  "--generations", 1_000_000, "--from-scratch"], ws.root, {ENV_DIR: str(ws.champs)})


def _unchanged(before: dict, after: dict) -> list[str]:
    return [k for k, v in before.items() if after.get(k) != v]


def test_ctrl_c_finishes_the_generation_writes_the_run_and_exits_130(ws):
    before = snapshot(ws.root)
    child = _search(ws, ws.root / "out")
    child.wait_for(b"best train")
    child.proc.send_signal(signal.SIGINT)
    code, out, err = child.finish()
    assert code == 130, (out, err[-2000:])
    assert "Traceback" not in err and "interrupted after generation" in err
    run_dir = Path(out.strip().splitlines()[-1])
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["interrupted"] is True and 0 <= summary["generations_completed"] < 1_000_000
    done = summary["generations_completed"]
    assert f"# interrupted: {done} of the 1000000 generations were completed" in (run_dir / "config.toml").read_text()
    shown = invoke("evolve", ["show", run_dir])
    assert shown.exit_code == 0, shown.output
    assert f"interrupted: by Ctrl-C after {done} of 1000000 generations" in shown.stdout
    assert not _unchanged(before, snapshot(ws.root))


def test_a_second_ctrl_c_aborts_with_130_and_writes_nothing(ws):
    before = snapshot(ws.root)
    child = _search(ws, ws.root / "out")
    child.wait_for(b"best train")
    child.proc.send_signal(signal.SIGINT)
    time.sleep(0.01)
    child.proc.send_signal(signal.SIGINT)
    code, out, err = child.finish()
    if code == 130 and "aborted" in err:  # the second signal came before the run directory was written
        assert not (ws.root / "out").exists() or not any(p for p in (ws.root / "out").iterdir()
                                                       if not p.name.startswith("."))
    else:  # both signals fell into one generation's wait: the run was written as for one Ctrl-C
        assert code == 130, (out, err[-2000:])
    assert "Traceback" not in err
    assert not _unchanged(before, snapshot(ws.root))


def test_sigkill_leaves_no_half_written_run_directory(ws):
    before = snapshot(ws.root)
    child = _search(ws, ws.root / "out")
    child.wait_for(b"best train")
    child.proc.kill()
    code, _, _ = child.finish()
    assert code == -signal.SIGKILL
    out = ws.root / "out"
    assert not out.exists() or not [p for p in out.iterdir() if not p.name.startswith(".")]
    assert not _unchanged(before, snapshot(ws.root))
    check(ws, "evolve", ["show", out], 2, ("out",))


def test_killed_generate_keeps_the_old_dataset_and_the_next_write_cleans_up(ws):
    before = snapshot(ws.root)
    child = Child([Path(__file__).resolve().parents[1] / "generate_data.py", "--model", "independent", "--out",
                   ws.data, "--sequences", 200_000], ws.root)
    time.sleep(1.5)
    child.proc.kill()
    code, _, err = child.finish()
    if code == -signal.SIGKILL:
        assert not _unchanged(before, snapshot(ws.root) | {k: v for k, v in before.items() if ".tmp-" in k})
    else:  # the machine was fast enough to finish: a complete new dataset
        assert code == 0, err
    (ws.data / ".train.parquet.tmp-abcd1234").write_bytes(b"x" * 1000)  # as a kill during the write leaves
    (ws.data / ".metadata.json.tmp-zz_9yy8x").write_bytes(b"{")
    (ws.data / ".notes.txt.tmp-abcd1234").write_bytes(b"not ours to remove")
    res = invoke("generate", ["--model", "independent", "--out", ws.data, "--sequences", 5])
    assert res.exit_code == 0, res.output
    left = sorted(p.name for p in ws.data.iterdir() if ".tmp-" in p.name)
    assert left == [".notes.txt.tmp-abcd1234"]
    assert load_split(ws.data, "train").n > 0


def _fail_writes_under(monkeypatch, module, name: str, directory: Path) -> None:
    """Make ``module.name`` (a write function taking a path first) fail with EACCES below ``directory``."""
    original = getattr(module, name)

    def failing(path, *args, **kwargs):
        if Path(directory) in Path(path).parents or Path(path) == Path(directory):
            raise PermissionError(13, "Permission denied", str(path))
        return original(path, *args, **kwargs)
    monkeypatch.setattr(module, name, failing)


@pytest.fixture()
def rescue(ws, monkeypatch) -> Path:
    """Rescue directories go into the workspace (``tempfile.gettempdir``)."""
    place = ws.root / "rescue"
    place.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(place))
    return place


def test_table_that_cannot_be_written_is_rescued(ws, rescue, monkeypatch):
    import evolve.report.output as output

    target = ws.root / "results" / "table.json"
    _fail_writes_under(monkeypatch, output, "atomic_write_bytes", target.parent)
    res = invoke("benchmark", ["--data", ws.data, "--repeats", 1, "--output", target], {ENV_DIR: str(ws.champs)})
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
    saved = list(rescue.glob("specdec-rescued-*/table.json"))
    assert len(saved) == 1 and str(saved[0].parent) in res.stderr and "Permission denied" in res.stderr
    assert "standard_rejection" in saved[0].read_text()


def test_run_directory_that_cannot_be_written_is_rescued(ws, rescue, monkeypatch):
    import evolve.search.rundir as rundir
    from evolve.search.run_files import write_run as original

    out = ws.root / "out"

    def write_run(result, where, *args, **kwargs):
        if Path(where) == out:
            raise PermissionError(13, "Permission denied", str(out))
        return original(result, where, *args, **kwargs)
    monkeypatch.setattr(rundir, "write_run", write_run)
    res = invoke("evolve", ["run", "--data", ws.data, "--out", out, "--population", 4, "--generations", 1,
                            "--no-progress", "--from-scratch"])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
    runs = list(rescue.glob("specdec-rescued-*/run-*"))
    assert len(runs) == 1 and str(runs[0]) in res.stderr
    assert (runs[0] / "champion.json").is_file() and (runs[0] / "fitness.png").is_file()


def test_dataset_that_cannot_be_written_is_rescued(ws, rescue, monkeypatch):
    import evolve.traces.synth.generate as generate

    out = ws.root / "new"
    _fail_writes_under(monkeypatch, generate, "write_dataset", out)
    res = invoke("generate", ["--model", "independent", "--out", out, "--sequences", 5])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
    saved = list(rescue.glob("specdec-rescued-*"))
    assert len(saved) == 1 and str(saved[0]) in res.stderr
    assert load_split(saved[0], "test").n > 0


def _deny_access(monkeypatch, directory: Path) -> None:
    """``os.access`` says ``directory`` cannot be written (root may write anywhere, so chmod would not do)."""
    import evolve.files.guard as paths

    original = os.access
    monkeypatch.setattr(paths.os, "access", lambda p, mode, **k: False if Path(p) == directory and mode & os.W_OK
                        else original(p, mode, **k))


def test_unwritable_run_output_is_refused_before_the_search(ws, monkeypatch):
    locked = ws.root / "locked"
    locked.mkdir()
    _deny_access(monkeypatch, locked)
    res = check(ws, "evolve", ["run", "--data", ws.data, "--out", locked / "runs", "--generations", 1_000_000],
                2, ("locked", "cannot write"))
    assert "champion" not in res.stdout


def test_unwritable_champions_directory_is_refused(ws, monkeypatch):
    _deny_access(monkeypatch, ws.champs)
    check(ws, "evolve", ["promote", ws.run, "fine"], 2, ("champs", "cannot write"))


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write into any directory")
def test_really_unwritable_directory_is_refused(ws):
    locked = ws.root / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        check(ws, "benchmark", ["--data", ws.data, "--output", locked / "t.txt"], 2, ("locked",))
        check(ws, "evolve", ["promote", ws.run, "fine", "--champions-dir", locked], 2, ("locked",))
    finally:
        locked.chmod(0o700)


def test_stale_staging_directories_are_removed_by_the_next_run(ws):
    out = ws.root / "out"
    stale, fresh = out / ".run-20200101-000000-seed0.tmp-abcd1234", out / ".run-20200101-000001-seed0.tmp-efgh5678"
    for staging in (stale, fresh):
        staging.mkdir(parents=True)
        (staging / "run.json").write_text("{}")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))  # two hours: no write takes that long
    res = invoke("evolve", ["run", "--data", ws.data, "--out", out, "--population", 4, "--generations", 0,
                            "--no-progress", "--from-scratch"])
    assert res.exit_code == 0, res.output
    assert not stale.exists() and fresh.exists()



def test_a_ctrl_c_inside_a_c_callback_prints_no_traceback_and_arrives_again():
    """A KeyboardInterrupt raised in a callback from C (as in numba's cache writer in llvmlite) cannot
    propagate; with the hook installed it prints nothing and interrupts the main thread again."""
    code = (
        "import ctypes, signal, time\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's Python has it\n"
        "from evolve.errors import redeliver_swallowed_interrupts\n"
        "redeliver_swallowed_interrupts()\n"
        "redeliver_swallowed_interrupts()  # idempotent: one delivery, not two\n"
        "def callback():\n"
        "    raise KeyboardInterrupt\n"
        "ctypes.CFUNCTYPE(None)(callback)()\n"
        "print('carried on', flush=True)\n"
        "try:\n"
        "    time.sleep(10)\n"
        "    print('lost')\n"
        "except KeyboardInterrupt:\n"
        "    print('arrived again')\n"
        "time.sleep(0.5)\n"
        "print('once')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["carried on", "arrived again", "once"]
    assert done.stderr == ""
    plain = subprocess.run([sys.executable, "-c", code.replace("redeliver_swallowed_interrupts()", "pass")
                            .replace("time.sleep(10)", "time.sleep(0.2)")], capture_output=True, text=True, timeout=60)
    assert "Traceback" in plain.stderr and "lost" in plain.stdout  # without the hook: printed, and lost


def test_after_a_ctrl_c_half_built_objects_print_nothing_but_before_it_they_do():
    """A Ctrl-C inside a constructor (llvmlite's PassBuilder) leaves an object whose ``__del__`` fails;
    once interrupted that error prints nothing; the same error without an interrupt is still printed."""
    code = (
        "import gc, os, signal, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from evolve.errors import redeliver_swallowed_interrupts\n"
        "redeliver_swallowed_interrupts()\n"
        "class Half:\n"
        "    def __init__(self, interrupt):\n"
        "        if interrupt:\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "        self.handle = 1\n"
        "    def __del__(self):\n"
        "        del self.handle\n"
        "INTERRUPT = sys.argv[1] == '1'\n"
        "try:\n"
        "    Half(INTERRUPT)\n"
        "except KeyboardInterrupt:\n"
        "    print('aborted', flush=True)\n"
        "h = Half(False); del h.handle; del h\n"
        "gc.collect()\n")
    for interrupt in ("1", "0"):
        done = subprocess.run([sys.executable, "-c", code, interrupt], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        if interrupt == "1":
            assert done.stdout == "aborted\n" and done.stderr == ""
        else:
            assert done.stdout == "" and "AttributeError" in done.stderr

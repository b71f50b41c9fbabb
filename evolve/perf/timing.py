"""Timing and memory tools of the performance harness (``benchmark.py perf``), and the machine it runs on.

Timings are wall-clock (``time.perf_counter``) with the process's CPU time
beside them (``time.process_time``), so that a run on a machine shared with
other processes can be read: CPU utilisation = CPU seconds / wall seconds /
threads. Memory is the process's resident set size in bytes.
"""
from __future__ import annotations

import os
import platform
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numba


@dataclass
class Timing:
    """Wall and process-CPU seconds of one measured call."""

    wall: float
    cpu: float


def timed(fn: Callable[[], Any]) -> tuple[Any, Timing]:
    """Run ``fn`` once; return its value and the wall/CPU seconds it took."""
    c0, t0 = time.process_time(), time.perf_counter()
    value = fn()
    return value, Timing(time.perf_counter() - t0, time.process_time() - c0)


def repeat(fn: Callable[[], Any], min_repeats: int = 5, budget: float = 1.0, warm_up: bool = True) -> list[Timing]:
    """Time ``fn`` at least ``min_repeats`` times and until ``budget`` seconds have passed (after one warm-up call)."""
    if warm_up:
        fn()
    out: list[Timing] = []
    start = time.perf_counter()
    while len(out) < min_repeats or time.perf_counter() - start < budget:
        out.append(timed(fn)[1])
        if len(out) >= 100_000:
            break
    return out


def utilisation(timings: list[Timing], threads: int) -> float:
    """CPU seconds / (wall seconds x threads) over ``timings`` (1.0: every thread busy all the time)."""
    wall = sum(t.wall for t in timings)
    return sum(t.cpu for t in timings) / (wall * threads) if wall > 0 else float("nan")


def rss_bytes() -> int:
    """Resident set size of this process, bytes (``/proc/self/statm``; psutil elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import psutil
        return int(psutil.Process().memory_info().rss)


class RssSampler:
    """Samples the resident set size every ``interval`` seconds in a background thread; ``peak`` in bytes."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval = interval
        self.peak = self.rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def rss() -> int:
        """Current resident set size, bytes."""
        return rss_bytes()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.interval)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())


def environment() -> dict:
    """Cores, threads, CPU model, load average and versions."""
    from importlib import metadata
    versions = {"python": platform.python_version()}
    for pkg in ("numpy", "numba", "llvmlite", "deap", "pandas", "pyoperon", "psutil"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import llvmlite.binding as llvm
        llvm_svml = bool(llvm.targets.has_svml())
    except Exception:  # noqa: BLE001
        llvm_svml = False
    return {"cores": os.cpu_count(), "threads": numba.get_num_threads(), "threading_layer": _layer(),
            "cpu": cpu, "platform": platform.platform(), "versions": versions,
            "svml": {"numba_using_svml": bool(numba.config.USING_SVML), "llvmlite_built_with_svml": llvm_svml},
            "load_average_start": list(os.getloadavg())}


def _layer() -> str:
    try:
        return numba.threading_layer()
    except ValueError:
        return "not initialised"


__all__ = ["Timing", "timed", "repeat", "utilisation", "rss_bytes", "RssSampler", "environment"]

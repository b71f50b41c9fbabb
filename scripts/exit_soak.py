"""Exit codes of the default benchmark run many times in a row under load: every run must exit 0.

    python scripts/exit_soak.py [--runs 200] [--load 2] [--data data] [--output results/exit_soak.json]

Runs ``python benchmark.py --data DATA --split test --format json --output F`` (the README's comparison on the default
dataset, which ``python generate_data.py`` writes) ``--runs`` times one after another while ``--load`` busy processes
keep the cores occupied, and writes every run's exit code, its seconds and the last line of its standard error when it
failed to ``--output`` (JSON, written atomically), with the counts. It exits 1 when any run exited non-zero.

Why it exists: pyarrow's dataset scanner kept a Python file object on its worker threads, whose release at
interpreter exit aborted the process (exit 134, ``terminate called without an active exception``) in about 1% of runs
on a loaded 2-core machine; :mod:`evolve.files.parquet` gives Arrow only its own buffers. Not run by CI (minutes).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evolve.files.atomic import atomic_write_text  # noqa: E402


def _busy(stop) -> None:
    while not stop.is_set():
        sum(range(10_000))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="consecutive runs (default 200)")
    parser.add_argument("--load", type=int, default=2, help="busy processes beside the runs (default 2, the cores)")
    parser.add_argument("--data", default="data", help="the dataset (default data/, python generate_data.py)")
    parser.add_argument("--output", default="results/exit_soak.json", help="the record (JSON)")
    args = parser.parse_args()
    if not (Path(args.data) / "metadata.json").is_file():
        print(f"error: {args.data}: no dataset (run python generate_data.py first)", file=sys.stderr)
        return 2
    stop = multiprocessing.Event()
    load = [multiprocessing.Process(target=_busy, args=(stop,), daemon=True) for _ in range(args.load)]
    for p in load:
        p.start()
    runs = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            command = [sys.executable, str(REPO / "benchmark.py"), "--data", args.data, "--split", "test",
                       "--format", "json", "--output", str(Path(tmp) / "bench.json")]
            for i in range(args.runs):
                start = time.perf_counter()
                done = subprocess.run(command, capture_output=True, text=True)
                run = {"run": i + 1, "exit_code": done.returncode, "seconds": round(time.perf_counter() - start, 2)}
                if done.returncode != 0:
                    run["stderr_tail"] = (done.stderr.strip().splitlines() or [""])[-1]
                runs.append(run)
                print(f"run {i + 1}/{args.runs}: exit {done.returncode}", flush=True)
    finally:
        stop.set()
        for p in load:
            p.join()
    failed = [r for r in runs if r["exit_code"] != 0]
    record = {"command": " ".join(command[1:]), "runs": len(runs), "load_processes": args.load,
              "exit_0": len(runs) - len(failed), "failed": len(failed), "python": sys.version.split()[0],
              "versions": _versions(), "every_run": runs}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(args.output), json.dumps(record, indent=2) + "\n")
    print(f"{record['exit_0']} of {len(runs)} runs exited 0; wrote {args.output}")
    return 1 if failed else 0


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("pyarrow", "pandas", "numpy", "numba")}


if __name__ == "__main__":
    sys.exit(main())

"""The evaluator's headline speed figures as the median and range of several runs of ``benchmark.py perf``.

    python scripts/perf_repeats.py [--runs 5] [--output results/perf_repeats.json] [-- PERF OPTIONS...]

One run of ``python benchmark.py perf`` is one sample of a machine's speed; the README quotes the median of
``--runs`` runs made one after another, with their range. Each run writes its own report (``--output`` with the run's
number before the suffix); this script then writes, atomically to ``--output``, every run's headline figures
(``rule_tokens_per_s``, ``gp_node_evals_per_s``, ``deap_node_evals_per_s``, ``gp_vs_deap``,
``evolve_generations_per_s``), their median, minimum and maximum, and the machine's load average before and after.
Options after ``--`` go to every ``benchmark.py perf`` run (the defaults: the scaling at 10,000 and 100,000 tokens
only, which the headline figures do not read).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evolve.files.atomic import atomic_write_text  # noqa: E402

#: The figures summarised.
HEADLINE = ("rule_tokens_per_s", "gp_node_evals_per_s", "deap_node_evals_per_s", "gp_vs_deap",
            "evolve_generations_per_s")
#: ``benchmark.py perf`` options used when none are given after ``--``.
DEFAULT_PERF = ("--sizes", "10000,100000")


def main() -> int:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else list(DEFAULT_PERF)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of benchmark.py perf (default 5)")
    parser.add_argument("--output", default="results/perf_repeats.json", help="the summary (JSON)")
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    runs = []
    for i in range(args.runs):
        report = out.with_name(f"{out.stem}-run{i + 1}.json")
        done = subprocess.run([sys.executable, str(REPO / "benchmark.py"), "perf", "--output", str(report), *extra],
                              cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return done.returncode
        figures = json.loads(report.read_text())
        runs.append({key: figures[key] for key in HEADLINE if key in figures})
        print(f"run {i + 1}/{args.runs}: ours/DEAP {runs[-1].get('gp_vs_deap', float('nan')):.2f}", flush=True)
    summary = {key: {"median": statistics.median(r[key] for r in runs), "min": min(r[key] for r in runs),
                     "max": max(r[key] for r in runs)} for key in HEADLINE if all(key in r for r in runs)}
    doc = {"command": f"python benchmark.py perf {' '.join(extra)}", "runs": args.runs, "summary": summary,
           "every_run": runs, "load_average": {"before": load_before, "after": os.getloadavg()[0]},
           "cores": os.cpu_count()}
    atomic_write_text(out, json.dumps(doc, indent=2) + "\n")
    ratio = summary.get("gp_vs_deap", {})
    print(f"ours/DEAP median {ratio.get('median', float('nan')):.2f} [{ratio.get('min', float('nan')):.2f}, "
          f"{ratio.get('max', float('nan')):.2f}] over {args.runs} runs; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

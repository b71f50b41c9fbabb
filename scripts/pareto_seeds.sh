#!/usr/bin/env bash
# The robustness table of the pareto search (docs/results/synthetic.md, section "Speed against damage"):
# six runs of `python -m evolve run --objective pareto` (random seeds 1, 2, 3 with the default options,
# and the same seeds with --population 500 --generations 40), each front scored on the test split by
# `python benchmark.py pareto`, and the table of evolve/commands/pareto/seeds.py.
#
#   scripts/pareto_seeds.sh [DATA_DIR [OUT_DIR]]      (defaults: data, results/pareto_seeds)
#
# Run it from the repository root after `python generate_data.py` (the default dataset). The runs go
# one after the other into OUT_DIR/runs, the JSON comparisons into OUT_DIR, the table to stdout and
# OUT_DIR/table.md. NICE (default 0) sets the niceness of the runs.
set -euo pipefail
DATA="${1:-data}"
OUT="${2:-results/pareto_seeds}"
NICE="${NICE:-0}"
mkdir -p "$OUT/runs"
files=()
for size in default small; do
  if [ "$size" = default ]; then opts=(); else opts=(--population 500 --generations 40); fi
  for seed in 1 2 3; do
    run=$(nice -n "$NICE" python -m evolve run --data "$DATA" --out "$OUT/runs" --objective pareto \
          --seed "$seed" "${opts[@]}" | tail -n 1)
    json="$OUT/$size-seed$seed.json"
    nice -n "$NICE" python benchmark.py pareto --data "$DATA" --run "$run" --format json --no-plot \
         --output "$json" > /dev/null
    files+=("$json")
  done
done
python -m evolve.commands.pareto.seeds "${files[@]}" | tee "$OUT/table.md"

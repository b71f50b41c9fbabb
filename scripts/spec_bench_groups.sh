#!/usr/bin/env bash
# One verification-length policy for all of Spec-Bench's task groups, or one per group? (docs/tutorial/spec-bench.md)
# Given a harvest of Spec-Bench's questions (scripts/spec_bench_smollm2.sh), its cost file and the champion of the
# search on all categories, for each task group present:
#   1. the group's dataset: `generate_data.py subset` (same splits, only the group's texts) -> RUNS/GROUP/data;
#   2. a verification-length search on it with the same settings as the search on all categories
#      -> RUNS/GROUP/group.json;
#   3. the benchmark of the group's test split with both champions (the best fixed length and the confidence
#      threshold tuned on the group's valid split come with it) -> RUNS/GROUP/bench.json;
# then `benchmark.py groups` tabulates them -> RUNS/groups.md. A finished step's file is kept (remove it to redo).
# Options through the environment: PYTHON, DATA (the harvest), COSTS (its cost file), SINGLE (the champion of
# the search on all categories), RUNS (output directory, default DATA.groups), GAMMA (5), POPULATION (300),
# GENERATIONS (30), SEED (1): the search settings of scripts/spec_bench_smollm2.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
: "${DATA:?set DATA to a harvest of a categorised prompts file}" "${COSTS:?set COSTS to its cost file}"
: "${SINGLE:?set SINGLE to the champion of the search on all categories}"
RUNS=${RUNS:-$DATA.groups}
GAMMA=${GAMMA:-5}
POPULATION=${POPULATION:-300}
GENERATIONS=${GENERATIONS:-30}
SEED=${SEED:-1}
stamp() { echo "[$(date +%H:%M:%S)] $*" >&2; }
mkdir -p "$RUNS"
cp "$SINGLE" "$RUNS/single.json"

# the task groups of the harvest: "slug categories" per line
"$PYTHON" - "$DATA" > "$RUNS/groups.txt" <<'PY'
import re, sys
from evolve.harvest.subset import read_texts
from evolve.report.spec_bench import groups_of
for g in groups_of(t["category"] for t in read_texts(sys.argv[1])):
    print(re.sub(r"[^a-z0-9]+", "_", g.label.lower()).strip("_"), ",".join(g.categories))
PY
while read -r slug categories; do
    dir="$RUNS/$slug"
    if [ ! -f "$dir/data/metadata.json" ]; then
        stamp "subset $slug ($categories)"
        "$PYTHON" generate_data.py subset --data "$DATA" --categories "$categories" --out "$dir/data" > /dev/null
    fi
    if [ ! -f "$dir/group.json" ]; then
        stamp "verification-length search $slug"
        run=$("$PYTHON" -m evolve run --data "$dir/data" --out "$dir/runs" --evolve verify-length \
              --objective tokens_per_second --costs "$COSTS" --gamma "$GAMMA" --length-weighting position \
              --population "$POPULATION" --generations "$GENERATIONS" --seed "$SEED" --no-progress | tail -n 1)
        cp "$run/champion.json" "$dir/group.json"
    fi
    if [ ! -f "$dir/bench.json" ]; then
        stamp "benchmark $slug"
        "$PYTHON" benchmark.py --data "$dir/data" --split test --costs "$COSTS" --champion "$RUNS/single.json" \
            --champion "$dir/group.json" --repeats 1 --format json --output "$dir/bench.json"
    fi
done < "$RUNS/groups.txt"
"$PYTHON" benchmark.py groups --runs "$RUNS" --format markdown --output "$RUNS/groups.md"
cat "$RUNS/groups.md"

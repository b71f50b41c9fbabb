#!/usr/bin/env bash
# An evolved verification-length policy against its competitors on synthetic data, under the hand-written
# GPU-like cost file docs/costs/gpu_like.json (verification nearly flat in T, a drafter at 0.2 of a target step).
# Then a policy evolved for 128 concurrent requests under docs/costs/gpu_batched.json (the same curve plus a batch
# curve that turns compute-bound past 64 tokens), against throughput at 1..512 requests.
# Writes OUT/bench-seedS.txt (one per seed of SEEDS) and OUT/bench_batched.txt (comparisons on the test split).
# A few minutes on 2 cores. Options through the environment: PYTHON (python), OUT (results/verify_length),
# SEEDS ("1 2 3 4"), SEED (1).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
OUT=${OUT:-results/verify_length}
SEED=${SEED:-1}    # the seed of the policy evolved for 128 requests
SEEDS=${SEEDS:-"1 2 3 4"}  # the seeds of the single-request policies
COSTS=docs/costs/gpu_like.json
mkdir -p "$OUT"
"$PYTHON" generate_data.py --out "$OUT/data" --gamma 8
for seed in $SEEDS; do  # one evolved policy per seed, each against the same competitors
    run=$("$PYTHON" -m evolve run --data "$OUT/data" --out "$OUT/runs" --evolve verify-length \
          --objective tokens_per_second --costs "$COSTS" --gamma 8 --population 300 --generations 30 --seed "$seed" \
          --no-progress)
    "$PYTHON" benchmark.py --data "$OUT/data" --costs "$COSTS" --champion "$run/champion.json" --repeats 1 \
        > "$OUT/bench-seed$seed.txt"
    echo "seed $seed: $(grep -E '^champion {2,}' "$OUT/bench-seed$seed.txt")  $(grep -o '"expression": "[^"]*"' "$run/champion.json")"
done
grep -E "^(standard_rejection|block_verification|best_fixed_gamma|confidence_threshold|survival_prefix) " \
    "$OUT/bench-seed${SEEDS%% *}.txt"
run=$("$PYTHON" -m evolve run --data "$OUT/data" --out "$OUT/runs" --evolve verify-length \
      --objective tokens_per_second --costs docs/costs/gpu_batched.json --concurrency 128 --gamma 8 \
      --population 300 --generations 30 --seed "$SEED" --no-progress)
"$PYTHON" benchmark.py --data "$OUT/data" --costs docs/costs/gpu_batched.json --concurrency 1,8,32,128,512 \
    --champion "$run/champion.json" --repeats 1 > "$OUT/bench_batched.txt"
grep -E "^(plain decoding|standard_rejection|champion|best_fixed_gamma|confidence_threshold|survival_prefix|per-batch-size schedule) .*x$" \
    "$OUT/bench_batched.txt"

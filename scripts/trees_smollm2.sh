#!/usr/bin/env bash
# Draft trees on SmolLM2-135M-Instruct on this CPU, end to end (docs/results/trees.md):
#   1. fetch the model (scripts/smollm2_common.sh);
#   2. measure the cost file of the layer-skipping drafter (layers 10, 15, 20 skipped) with forwards over
#      T = 1..17 new tokens (`benchmark.py perf --write-costs --gamma-max 16`; one thread, median of 15 repeats; run
#      alone) -> OUT/costs/skip16.json;
#   3. harvest draft trees of at most TREE_NODES (16) nodes, TREE_WIDTH (2) i.i.d. children per expanded node
#      (EAGLE-2-style best-first growth), on the first 100 prompts of prompts/smollm2_prompts.txt (temperature 1,
#      at most 40 new tokens, seed 0; splits by prompt, 10% valid, 10% test) -> OUT/data;
#   4. evolve tree shapes under each cost file (the CPU file of step 2 and docs/costs/gpu_like.json, a
#      hypothetical GPU: verification nearly flat in T, drafts at 0.2 of a target step), seeds 1 2 3
#      (population 2000, 80 generations; a few minutes each) -> OUT/shape-COSTS-sSEED.champion.json, and under
#      the GPU-like file without the level features (level_cumprob, level_rank) -> OUT/shape-nolevel-gpu_like-sSEED;
#   5. evolve a relaxation weight on the dataset's chains (the trees' first paths; NSGA-II over tokens per
#      call, TV per token and size, draft length RELAX_GAMMA (5; at most the first paths' longest block), seed 1)
#      -> OUT/relaxation.champion.json;
#   6. `benchmark.py trees` on the held-out test split (named shapes tuned on valid) under each cost file,
#      with every champion and 2000 bootstrap replicates over texts against fixed_width
#      -> OUT/trees-COSTS.{txt,json,md}.
# Everything goes under OUT (results/trees_smollm2, git-ignored); a finished step's file is kept (remove it to
# redo the step). About 30 minutes on 2 cores for the harvest and 25 for the searches. Options through the
# environment: PYTHON, MODELS, OUT, SEEDS, TREE_NODES, TREE_WIDTH, RELAX_GAMMA.
OUT=${OUT:-results/trees_smollm2}
source "$(dirname "$0")/smollm2_common.sh"
SEEDS=${SEEDS:-"1 2 3"}
TREE_NODES=${TREE_NODES:-16}
TREE_WIDTH=${TREE_WIDTH:-2}
RELAX_GAMMA=${RELAX_GAMMA:-5}
DRAFTER="--draft-skip-layers 10,15,20"
mkdir -p "$OUT/costs"
fetch_model
head -n 100 "$PROMPTS" > "$OUT/prompts.txt"
cp docs/costs/gpu_like.json "$OUT/costs/gpu_like.json"

if [ ! -f "$OUT/costs/skip16.json" ]; then
    stamp "cost file skip16"
    # shellcheck disable=SC2086
    "$PYTHON" benchmark.py perf --write-costs "$OUT/costs/skip16.json" --harvest "$MODEL" $DRAFTER --gamma-max 16 \
        --threads 1 --cost-repeats 15 > "$OUT/costs/skip16.log" 2>&1
fi

if [ ! -f "$OUT/data/metadata.json" ]; then
    stamp "harvest trees"
    # shellcheck disable=SC2086
    "$PYTHON" generate_data.py harvest --target "$MODEL" $DRAFTER --prompts "$OUT/prompts.txt" \
        --tree-nodes "$TREE_NODES" --tree-width "$TREE_WIDTH" --temperature 1.0 --max-new-tokens 40 --seed 0 --threads 1 --no-progress \
        --out "$OUT/data" > "$OUT/harvest.log" 2>&1
fi

# the ablation: the same searches without the level features (a node's own features only)
NODE_FEATURES=draft_prob,position,draft_entropy,draft_index,draft_top_prob,draft_cumprob
for spec in skip16:shape:auto gpu_like:shape:auto gpu_like:shape-nolevel:$NODE_FEATURES; do
    IFS=: read -r costs prefix features <<< "$spec"
    for seed in $SEEDS; do
        name="$prefix-$costs-s$seed"
        if [ ! -f "$OUT/$name.champion.json" ]; then
            stamp "tree-shape search $name"
            run=$("$PYTHON" -m evolve run --data "$OUT/data" --out "$OUT/runs-$name" --evolve tree-shape \
                  --objective tokens_per_second --costs "$OUT/costs/$costs.json" --population 2000 --generations 80 \
                  --features "$features" --seed "$seed" --no-progress | tail -n 1)
            cp "$run/champion.json" "$OUT/$name.champion.json"
        fi
    done
done
if [ ! -f "$OUT/relaxation.champion.json" ]; then
    stamp "relaxation search"
    run=$("$PYTHON" -m evolve run --data "$OUT/data" --out "$OUT/runs-relaxation" --evolve relaxation \
          --objective pareto --gamma "$RELAX_GAMMA" --population 600 --generations 40 --seed 1 --no-progress \
          | tail -n 1)
    cp "$run/champion.json" "$OUT/relaxation.champion.json"
fi

for costs in skip16 gpu_like; do
    args=(--champion "$OUT/relaxation.champion.json")
    for seed in $SEEDS; do args+=(--champion "$OUT/shape-$costs-s$seed.champion.json"); done
    if [ "$costs" = gpu_like ]; then
        for seed in $SEEDS; do args+=(--champion "$OUT/shape-nolevel-$costs-s$seed.champion.json"); done
    fi
    for fmt in txt json md; do
        [ -f "$OUT/trees-$costs.$fmt" ] && continue
        "$PYTHON" benchmark.py trees --data "$OUT/data" --split test --costs "$OUT/costs/$costs.json" "${args[@]}" --bootstrap 2000 \
            --output "$OUT/trees-$costs.$fmt" --format "$(case $fmt in txt) echo table;; json) echo json;; md) echo markdown;; esac)"
    done
done
stamp "done: $OUT/trees-skip16.txt, $OUT/trees-gpu_like.txt"

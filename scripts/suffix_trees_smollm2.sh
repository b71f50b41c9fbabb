#!/usr/bin/env bash
# Suffix decoding's draft trees on successive source edits, SmolLM2-135M-Instruct on this CPU
# (docs/results/suffix.md#suffix-decodings-trees-do-branches-pay):
#   1. fetch the model (scripts/smollm2_common.sh); the prompts are prompts/source_edits/question.jsonl;
#   2. the torch backend's cost file with suffix decoding, forwards over T = 1..17 tokens (`benchmark.py perf
#      --write-costs --gamma-max 16`, one thread; run alone) -> OUT/costs_torch_suffix.json;
#   3. a tree harvest with suffix decoding (arctic-inference 0.3.0, depth 24): trees of at most TREE_NODES (16)
#      nodes, at most TREE_WIDTH (4) children per node, greedy, 48 new tokens, on torch -> OUT/suffix_trees_torch;
#   4. tree shapes evolved under each cost file (step 2's and the H200 file
#      docs/costs/measured_h200_smollm2_135m_eagle_cudagraph.json), seeds SEEDS (population 300, 30 generations;
#      seconds each) -> OUT/trees-COSTS-sSEED.champion.json;
#   5. `benchmark.py trees` on test (named shapes tuned on valid) with the champions, 1000 bootstrap replicates over
#      texts -> OUT/trees-COSTS.txt;
#   6. live on torch (unless LIVE=0; run alone): the test turns, 2 repeats, the whole tree (eagle2_full), the seed-1
#      champion of step 2's file and a chain of 6 drafts, each predicted from its own calls -> OUT/trees.live.txt.
# A finished step's file is kept (remove it to redo the step). Options through the environment: PYTHON, MODELS,
# OUT (results/edits), SEEDS ("1 2 3"), TREE_NODES, TREE_WIDTH, LIVE.
OUT=${OUT:-results/edits}
source "$(dirname "$0")/smollm2_common.sh"
SEEDS=${SEEDS:-"1 2 3"}
TREE_NODES=${TREE_NODES:-16}
TREE_WIDTH=${TREE_WIDTH:-4}
LIVE=${LIVE:-1}
PROMPTS=prompts/source_edits/question.jsonl
DATA="$OUT/suffix_trees_torch"
H200=docs/costs/measured_h200_smollm2_135m_eagle_cudagraph.json
mkdir -p "$OUT"
fetch_model

if [ ! -f "$OUT/costs_torch_suffix.json" ]; then
    stamp "cost file (torch backend, suffix decoding)"
    "$PYTHON" benchmark.py perf --write-costs "$OUT/costs_torch_suffix.json" --backend torch --harvest "$MODEL" \
        --draft-suffix 24 --gamma-max 16 --threads 1 --cost-repeats 5 > "$OUT/costs_torch_suffix.log" 2>&1
fi
if [ ! -f "$DATA/metadata.json" ]; then
    stamp "tree harvest"
    "$PYTHON" generate_data.py harvest --target "$MODEL" --backend torch --draft-suffix 24 --tree-nodes "$TREE_NODES" \
        --tree-width "$TREE_WIDTH" --gamma 6 --temperature 0 --prompts "$PROMPTS" --max-new-tokens 48 --threads 1 \
        --no-progress --out "$DATA" > "$DATA.harvest.log" 2>&1
fi
for costs in "$OUT/costs_torch_suffix.json" "$H200"; do
    name=$(basename "$costs" .json)
    champions=()
    for seed in $SEEDS; do
        champion="$OUT/trees-$name-s$seed.champion.json"
        if [ ! -f "$champion" ]; then
            stamp "tree-shape search, $name, seed $seed"
            run=$("$PYTHON" -m evolve run --data "$DATA" --out "$OUT/runs-trees" --evolve tree-shape \
                  --objective tokens_per_second --costs "$costs" --population 300 --generations 30 --seed "$seed" \
                  --no-progress | tail -n 1)
            cp "$run/champion.json" "$champion"
        fi
        champions+=(--champion "$champion")
    done
    [ -f "$OUT/trees-$name.txt" ] || "$PYTHON" benchmark.py trees "${champions[@]}" --split test --bootstrap 1000 \
        --output "$OUT/trees-$name.txt"
done
if [ "$LIVE" != 0 ] && [ ! -f "$OUT/trees.live.txt" ]; then
    stamp "live (torch)"
    first=${SEEDS%% *}
    "$PYTHON" benchmark.py live --target "$MODEL" --backend torch --draft-suffix 24 --prompts "$PROMPTS" \
        --max-new-tokens 48 --data "$DATA" --split test --temperature 0 --threads 1 --repeats 2 \
        --tree-nodes "$TREE_NODES" --tree-width "$TREE_WIDTH" --champion "$OUT/trees-costs_torch_suffix-s$first.champion.json" \
        --rule fixed_gamma:gamma=6 --costs "$OUT/costs_torch_suffix.json" --no-progress \
        --output "$OUT/trees.live.txt" > "$OUT/trees.live.log" 2>&1
fi
stamp "done"

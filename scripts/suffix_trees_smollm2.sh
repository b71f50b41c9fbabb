#!/usr/bin/env bash
# Suffix decoding's draft trees, SmolLM2-135M-Instruct on this CPU (docs/results/suffix.md#suffix-decodings-trees-do-branches-pay),
# on WORKLOAD "edits" (successive source edits, prompts/source_edits; OUT results/edits) or "spec_bench" (all 480
# Spec-Bench questions, MT-bench's second turns seeing their first answers; OUT results/sbtrees):
#   1. fetch the model (scripts/smollm2_common.sh);
#   2. the torch backend's cost file with suffix decoding, forwards over T = 1..17 tokens (`benchmark.py perf
#      --write-costs --gamma-max 16`, one thread; run alone) -> COSTS (OUT/costs_torch_suffix.json);
#   3. a tree harvest with suffix decoding (arctic-inference 0.3.0, depth 24): trees of at most TREE_NODES (16 on
#      edits, 8 on spec_bench) nodes, at most TREE_WIDTH (4) children per node, greedy, 48 new tokens, on torch; texts
#      decoded train, then valid, then test, earlier answers filling the global cache -> OUT/suffix_trees_torch;
#   4. tree shapes evolved under each cost file (step 2's and the H200 file
#      docs/costs/measured_h200_smollm2_135m_eagle_cudagraph.json), seeds SEEDS (population 300, 30 generations;
#      seconds each) -> OUT/trees-COSTS-sSEED.champion.json;
#   5. `benchmark.py trees` on test (named shapes tuned on valid) with the champions, 1000 bootstrap replicates over
#      texts -> OUT/trees-COSTS.txt;
#   6. live on torch (unless LIVE=0; run alone): the test turns, REPEATS (2 on edits, 1 on spec_bench) repeats, the
#      whole tree (eagle2_full), the seed-1 champion of step 2's file and a chain of CHAIN (6 on edits, 2 on
#      spec_bench) drafts, each predicted from its own calls under step 2's file, beside transformers' plain decoding
#      -> OUT/trees.live.txt;
#   7. on spec_bench (unless LIVE=0; run alone): the chains deployed inside transformers' own generate(): the chain of
#      CHAIN drafts and suffix decoding at vLLM 0.33.0's defaults (at most 6), each on the backend and exported into
#      generate(), beside transformers' plain decoding and its prompt lookup at K = 10 and at PEER_K (2: the K tuned
#      on valid in the chain run of docs/results/suffix.md), the engine's rows predicted under ENGINE_COSTS (a file
#      of transformers' loop: scripts/engine_speed.sh's results/engine/costs/transformers.json) -> OUT/chains.live.txt.
# A finished step's file is kept (remove it to redo the step). Options through the environment: PYTHON, MODELS,
# WORKLOAD (edits), OUT, COSTS, ENGINE_COSTS, SEEDS ("1 2 3"), TREE_NODES, TREE_WIDTH, CHAIN, PEER_K, REPEATS,
# LIVE.
WORKLOAD=${WORKLOAD:-edits}
case $WORKLOAD in
    edits) OUT=${OUT:-results/edits}; WORK_PROMPTS=prompts/source_edits/question.jsonl; NODES=16; GAMMA=6; TIMES=2 ;;
    spec_bench) OUT=${OUT:-results/sbtrees}; WORK_PROMPTS=prompts/spec_bench/question.jsonl; NODES=8; GAMMA=2; TIMES=1 ;;
    *) echo "WORKLOAD: edits or spec_bench (value '$WORKLOAD')" >&2; exit 2 ;;
esac
source "$(dirname "$0")/smollm2_common.sh"
PROMPTS=$WORK_PROMPTS
SEEDS=${SEEDS:-"1 2 3"}
TREE_NODES=${TREE_NODES:-$NODES}
TREE_WIDTH=${TREE_WIDTH:-4}
CHAIN=${CHAIN:-$GAMMA}
COSTS=${COSTS:-$OUT/costs_torch_suffix.json}
ENGINE_COSTS=${ENGINE_COSTS:-results/engine/costs/transformers.json}
PEER_K=${PEER_K:-2}
REPEATS=${REPEATS:-$TIMES}
LIVE=${LIVE:-1}
DATA="$OUT/suffix_trees_torch"
H200=docs/costs/measured_h200_smollm2_135m_eagle_cudagraph.json
mkdir -p "$OUT"
fetch_model

if [ ! -f "$COSTS" ]; then
    stamp "cost file (torch backend, suffix decoding)"
    "$PYTHON" benchmark.py perf --write-costs "$COSTS" --backend torch --harvest "$MODEL" \
        --draft-suffix 24 --gamma-max 16 --threads 1 --cost-repeats 5 > "${COSTS%.json}.log" 2>&1
fi
if [ ! -f "$DATA/metadata.json" ]; then
    stamp "tree harvest"
    "$PYTHON" generate_data.py harvest --target "$MODEL" --backend torch --draft-suffix 24 --tree-nodes "$TREE_NODES" \
        --tree-width "$TREE_WIDTH" --gamma 6 --temperature 0 --prompts "$PROMPTS" --max-new-tokens 48 --threads 1 \
        --no-progress --out "$DATA" > "$DATA.harvest.log" 2>&1
fi
for costs in "$COSTS" "$H200"; do
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
        --max-new-tokens 48 --data "$DATA" --split test --temperature 0 --threads 1 --repeats "$REPEATS" \
        --tree-nodes "$TREE_NODES" --tree-width "$TREE_WIDTH" \
        --champion "$OUT/trees-$(basename "$COSTS" .json)-s$first.champion.json" --rule "fixed_gamma:gamma=$CHAIN" \
        --costs "$COSTS" --no-progress --output "$OUT/trees.live.txt" > "$OUT/trees.live.log" 2>&1
fi
if [ "$WORKLOAD" = spec_bench ] && [ "$LIVE" != 0 ] && [ ! -f "$OUT/chains.live.txt" ]; then
    [ -f "$OUT/suffix_vllm_default.json" ] || "$PYTHON" scripts/headroom_summary.py --vllm-default 6 \
        "$OUT/suffix_vllm_default.json"
    stamp "live (chains inside transformers' generate())"
    "$PYTHON" benchmark.py live --target "$MODEL" --backend torch --draft-suffix 24 --prompts "$PROMPTS" \
        --max-new-tokens 48 --data "$DATA" --split test --temperature 0 --threads 1 --repeats "$REPEATS" --gamma 6 \
        --rule "fixed_gamma:gamma=$CHAIN" --champion "$OUT/suffix_vllm_default.json" --peers transformers \
        --peer-k "transformers=$PEER_K" --costs "$ENGINE_COSTS" --no-progress --output "$OUT/chains.live.txt" \
        > "$OUT/chains.live.log" 2>&1
fi
stamp "done"

#!/usr/bin/env bash
# An EAGLE-3-style draft head for SmolLM2-135M-Instruct, trained and measured on this CPU, end to end
# (docs/results/eagle.md):
#   1. fetch the model (scripts/smollm2_common.sh); train the head with `python -m evolve train-drafter` on the
#      target's greedy responses (MAX_TRAIN_NEW tokens) to prompts/eagle_train_prompts.txt (309 prompts of our
#      own, none of them in prompts/smollm2_prompts.txt or Spec-Bench), draft vocabulary DRAFT_VOCAB, 3 unrolled
#      steps, to each of BUDGETS steps in turn -> OUT/head (the published layout: config.json,
#      model.safetensors; the last budget's) and OUT/head_STEPS; the acceptance of each on 40 other held-out
#      general prompts (lines 201-240 of prompts/smollm2_prompts.txt, greedy, gamma GAMMA, 64 new tokens)
#      -> OUT/budgets.txt;
#   2. the cost file of the head (`benchmark.py perf --write-costs`, T = 1..17 new tokens so trees of 16 nodes are
#      priced; one thread, median of 15 repeats; run alone) -> OUT/costs/eagle.json;
#   3. harvests on the first N_PROMPTS (120) general prompts of prompts/smollm2_prompts.txt (held out from
#      training; splits by prompt, 10% valid, 10% test): chains (greedy, gamma GAMMA, MAX_NEW new tokens)
#      -> OUT/chain, and draft trees (TREE_NODES nodes, TREE_WIDTH i.i.d. children per expanded node,
#      temperature 1: a tree of greedy children would repeat one token) -> OUT/tree;
#   4. a verification-length search on the chains and a tree-shape search on the trees, under the cost file;
#   5. benchmark tables on the test prompts: OUT/chain.bench.{txt,json} (best fixed length and confidence
#      threshold tuned on valid, the shape bound) and OUT/tree.trees.txt (EAGLE-2's tree and the other named
#      shapes, with 2000 bootstrap replicates over texts);
#   6. live decoding of the test prompts with REPEATS (3) repeats: plain decoding, the standard rule on full
#      chains, the best fixed length, the evolved policy -> OUT/chain.live.txt; and (where `benchmark.py live`
#      has --tree-nodes) at temperature 1: plain decoding, the standard rule on chains of GAMMA, the tree grown to
#      LIVE_TREE_NODES (2) nodes (row eagle2_full; 2 nodes of width 2: the root's two children) and the evolved
#      shape pruning that tree -> OUT/tree.live.txt. Live decoding grows the whole tree before a shape prunes it, so
#      a shape pays the drafting of LIVE_TREE_NODES nodes; 2 is the fixed tree benchmark.py trees tunes on valid
#      here (fixed_width 2 wide, depth 1) and holds what the evolved shape keeps on nearly every call.
# Everything goes under OUT (results/eagle_smollm2, git-ignored); a finished step's file is kept (remove it to
# redo the step). Options through the environment: PYTHON, MODELS, OUT, BUDGETS ("1000 2000 3000"), DRAFT_VOCAB (2048),
# MAX_TRAIN_NEW (128), N_PROMPTS (120), GAMMA (6), MAX_NEW (96), TREE_NODES (16), TREE_WIDTH (2), LIVE_TREE_NODES (2), REPEATS (3), TREE_POPULATION (2000) and TREE_GENERATIONS (80) of the tree-shape search,
# SELECTION (valid; cv: the verification-length search's champion guard on cross-validation over train and valid
# in 4 folds; the tree-shape kind is scored from its trees, not resampled records, so its search judges on valid).
OUT=${OUT:-results/eagle_smollm2}
source "$(dirname "$0")/smollm2_common.sh"
BUDGETS=${BUDGETS:-"1000 2000 3000"}
DRAFT_VOCAB=${DRAFT_VOCAB:-2048}
MAX_TRAIN_NEW=${MAX_TRAIN_NEW:-128}
NPROMPTS=${N_PROMPTS:-120}
GAMMA=${GAMMA:-6}
MAX_NEW=${MAX_NEW:-96}
TREE_NODES=${TREE_NODES:-16}
TREE_WIDTH=${TREE_WIDTH:-2}
REPEATS=${REPEATS:-3}
LIVE_TREE_NODES=${LIVE_TREE_NODES:-2}
TREE_POPULATION=${TREE_POPULATION:-2000}
TREE_GENERATIONS=${TREE_GENERATIONS:-80}
SELECTION=${SELECTION:-valid}
HEAD="$OUT/head"
mkdir -p "$OUT/costs"
fetch_model
head -n "$NPROMPTS" "$PROMPTS" > "$OUT/prompts.txt"

for budget in $BUDGETS; do  # the same run, stopped and resumed at each budget (a resumed run equals an uninterrupted one)
    [ -f "$OUT/head_$budget/model.safetensors" ] && continue
    stamp "train the head to $budget steps"
    "$PYTHON" -m evolve train-drafter --target "$MODEL" --prompts prompts/eagle_train_prompts.txt --out "$HEAD" \
        --max-new-tokens "$MAX_TRAIN_NEW" --temperature 0 --draft-vocab "$DRAFT_VOCAB" --steps "$budget" \
        --save-every 100 --threads 1 --response-batch 16 >> "$OUT/train.log" 2>&1
    mkdir -p "$OUT/head_$budget"
    cp "$HEAD/config.json" "$HEAD/model.safetensors" "$OUT/head_$budget/"
done
# acceptance per training budget on other held-out general prompts (lines 201-240, in no split below)
sed -n 201,240p "$PROMPTS" > "$OUT/budget_prompts.txt"
for budget in $BUDGETS; do
    [ -f "$OUT/budget_$budget/metadata.json" ] && continue
    stamp "acceptance of the head at $budget steps"
    "$PYTHON" generate_data.py harvest --target "$MODEL" --draft-eagle "$OUT/head_$budget" \
        --prompts "$OUT/budget_prompts.txt" --gamma "$GAMMA" --temperature 0 --max-new-tokens 64 --seed 0 \
        --threads 1 --no-progress --out "$OUT/budget_$budget" > "$OUT/budget_$budget.log" 2>&1
done
for budget in $BUDGETS; do
    "$PYTHON" - "$budget" "$OUT/budget_$budget/metadata.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[2]))["statistics"].values()
calls, tokens = sum(v["target_calls"] for v in s), sum(v["generated_tokens"] for v in s)
records = sum(v["tokens"] for v in s)
accept = sum(v["standard_acceptance"] * v["tokens"] for v in s) / records
print(f"{sys.argv[1]} steps: {tokens / calls:.3f} tokens per target call, acceptance {accept:.3f} per drafted token")
PY
done > "$OUT/budgets.txt"
cat "$OUT/budgets.txt"

if [ ! -f "$OUT/costs/eagle.json" ]; then
    stamp "cost file of the head"
    "$PYTHON" benchmark.py perf --write-costs "$OUT/costs/eagle.json" --harvest "$MODEL" --draft-eagle "$HEAD" \
        --gamma-max 16 --threads 1 --cost-repeats 15 > "$OUT/costs/eagle.log" 2>&1
fi
COSTS="$OUT/costs/eagle.json"

common=(--target "$MODEL" --draft-eagle "$HEAD" --prompts "$OUT/prompts.txt" --seed 0 --threads 1 --no-progress)
if [ ! -f "$OUT/chain/metadata.json" ]; then
    stamp "harvest chains"
    "$PYTHON" generate_data.py harvest "${common[@]}" --gamma "$GAMMA" --temperature 0 --max-new-tokens "$MAX_NEW" \
        --out "$OUT/chain" > "$OUT/chain.harvest.log" 2>&1
fi
if [ ! -f "$OUT/tree/metadata.json" ]; then
    stamp "harvest trees"
    "$PYTHON" generate_data.py harvest "${common[@]}" --tree-nodes "$TREE_NODES" --tree-width "$TREE_WIDTH" \
        --temperature 1 --max-new-tokens "$MAX_NEW" --out "$OUT/tree" > "$OUT/tree.harvest.log" 2>&1
fi

if [ ! -f "$OUT/chain.champion.json" ]; then
    stamp "verification-length search"
    run=$("$PYTHON" -m evolve run --data "$OUT/chain" --out "$OUT/runs-chain" --evolve verify-length \
          --objective tokens_per_second --costs "$COSTS" --gamma "$GAMMA" --length-weighting position \
          --selection "$SELECTION" --population 300 --generations 30 --seed 1 --no-progress | tail -n 1)
    cp "$run/champion.json" "$OUT/chain.champion.json"
fi
if [ ! -f "$OUT/tree.champion.json" ]; then
    stamp "tree-shape search"
    run=$("$PYTHON" -m evolve run --data "$OUT/tree" --out "$OUT/runs-tree" --evolve tree-shape \
          --objective tokens_per_second --costs "$COSTS" --population "$TREE_POPULATION" \
          --generations "$TREE_GENERATIONS" --seed 1 \
          --no-progress | tail -n 1)
    cp "$run/champion.json" "$OUT/tree.champion.json"
fi
for fmt in txt json; do
    [ -f "$OUT/chain.bench.$fmt" ] && continue
    "$PYTHON" benchmark.py --data "$OUT/chain" --split test --costs "$COSTS" --champion "$OUT/chain.champion.json" \
        --repeats 1 --format "$([ $fmt = txt ] && echo table || echo json)" --output "$OUT/chain.bench.$fmt"
done
if [ ! -f "$OUT/tree.trees.txt" ]; then
    "$PYTHON" benchmark.py trees --data "$OUT/tree" --split test --costs "$COSTS" \
        --champion "$OUT/tree.champion.json" --bootstrap 2000 --format table --output "$OUT/tree.trees.txt"
fi

if [ ! -f "$OUT/chain.live.txt" ]; then
    mapfile -t tuned < <("$PYTHON" scripts/verify_length_summary.py --tuned "$OUT/chain.bench.json")
    stamp "live chains: standard_rejection, ${tuned[0]}, champion"
    "$PYTHON" benchmark.py live "${common[@]}" --data "$OUT/chain" --split test --gamma "$GAMMA" --temperature 0 \
        --max-new-tokens "$MAX_NEW" --costs "$COSTS" --rule standard_rejection --rule "${tuned[0]}" \
        --champion "$OUT/chain.champion.json" --repeats "$REPEATS" --format table --output "$OUT/chain.live.txt"
fi
if "$PYTHON" benchmark.py live --help | grep -q -- "--tree-nodes" && [ ! -f "$OUT/tree.live.txt" ]; then
    stamp "live trees: EAGLE-2's tree, the evolved shape"
    "$PYTHON" benchmark.py live "${common[@]}" --data "$OUT/tree" --split test --temperature 1 \
        --max-new-tokens "$MAX_NEW" --costs "$COSTS" --tree-nodes "$LIVE_TREE_NODES" --tree-width "$TREE_WIDTH" \
        --gamma "$GAMMA" --rule standard_rejection --champion "$OUT/tree.champion.json" --repeats "$REPEATS" --format table --output "$OUT/tree.live.txt"
fi
stamp "done: $OUT/chain.{bench,live}.txt, $OUT/tree.{trees,live}.txt"

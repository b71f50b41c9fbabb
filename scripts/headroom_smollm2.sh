#!/usr/bin/env bash
# The headroom of verification-length policies on SmolLM2-135M-Instruct on this CPU (docs/results/speed.md,
# "The headroom"): for each workload of WORKLOADS,
#   1. a cost file of its drafter and backend (`benchmark.py perf --write-costs`, one thread, 15 repeats);
#   2. a harvest with GAMMA drafts per block (splits by prompt: 80% train, 10% valid, 10% test; seed 0);
#   3. a verification-length search under the cost file (population POPULATION, GENERATIONS generations, seed SEED,
#      blocks weighted by the positions their harvest call covered, the history features among the terminals as
#      every verification-length run has them, and selection by cross-validation over the texts of train and
#      valid in 4 folds: --selection cv) -> OUT/NAME.champion.json, OUT/NAME.run.json;
#   4. the benchmark on the held-out test split: every competitor (the engines' controllers and the learned stopping
#      rules among them) tuned on valid, the bound, the champion's share of the headroom with its interval over texts
#      -> OUT/NAME.bench.{txt,json};
#   5. live decoding of the test prompts, REPEATS repeats interleaved: plain decoding, standard rejection at GAMMA,
#      the best fixed length tuned on valid, the learned logistic rule (its formula as a champion file) and the
#      champion, each with the cost model's prediction for the same calls and the live headroom shares
#      -> OUT/NAME.live.json;
#   6. OUT/summary.md (scripts/headroom_summary.py).
# Workloads: grounded (prompt lookup on the 60 input-grounded prompts, greedy, 64 new tokens, torch), ngram
# (prompt lookup on the first 100 general prompts, temperature 1, 48 new tokens, torch), spec_bench (prompt lookup on
# the first SPEC_QUESTIONS questions of each Spec-Bench category, greedy, 48 new tokens per turn, torch),
# spec_bench_llama (prompt lookup on all 480 Spec-Bench questions, greedy, 48 new tokens per turn, on llama.cpp's
# kernels: the optional extra 'llama'; harvested one text at a time in one process, as MT-bench's second turns need
# their first answers; live decoding adds llama-cpp-python's own prompt lookup, --peers llama-cpp-python),
# suffix_spec_bench_llama (suffix decoding, --draft-suffix 24: vLLM's tree depth and global cache, on all 480 questions,
# greedy, 48 new tokens per turn, llama.cpp's kernels; texts decoded one at a time, train then valid then test, so
# earlier splits' answers fill the cache; live adds suffix decoding's own rule at vLLM's defaults and tuned on valid),
# suffix_grounded (the same drafter on the 60 input-grounded prompts, torch), suffix_source_edits_llama (the same
# drafter and kernels on prompts/source_edits: three successive edits of each of 90 functions of click's source, each
# answered with the whole function, greedy, 48 new tokens per turn). All 480 questions on torch:
# WORKLOADS=spec_bench SPEC_QUESTIONS=80. Each backend and drafter has its cost file (OUT/costs/ngram.json for
# torch, OUT/costs/ngram_llama_cpp.json for llama.cpp, OUT/costs/suffix*.json for suffix decoding).
# Everything goes under OUT (results/headroom, git-ignored); a finished step's file is kept (remove it to redo it).
# Options through the environment: PYTHON, MODELS, OUT, WORKLOADS (default "grounded"), GAMMA (6), POPULATION (300),
# GENERATIONS (30), SEED (1), REPEATS (3), SPEC_QUESTIONS (8), LIVE (1; 0: no live decoding, step 5).
OUT=${OUT:-results/headroom}
source "$(dirname "$0")/smollm2_common.sh"
GAMMA=${GAMMA:-6}
POPULATION=${POPULATION:-300}
GENERATIONS=${GENERATIONS:-30}
SEED=${SEED:-1}
REPEATS=${REPEATS:-3}
SPEC_QUESTIONS=${SPEC_QUESTIONS:-8}
LIVE=${LIVE:-1}
read -r -a WORKLOADS <<< "${WORKLOADS:-grounded}"
mkdir -p "$OUT/costs"
fetch_model
head -n 100 prompts/smollm2_prompts.txt > "$OUT/general.txt"
if [ ! -f "$OUT/spec_bench.jsonl" ]; then  # the first SPEC_QUESTIONS questions of every category
    "$PYTHON" - "$SPEC_QUESTIONS" "$OUT/spec_bench.jsonl" <<'PY'
import json, sys
cap, out, seen, rows = int(sys.argv[1]), sys.argv[2], {}, []
for line in open("prompts/spec_bench/question.jsonl", encoding="utf-8"):
    q = json.loads(line)
    seen[q["category"]] = seen.get(q["category"], 0) + 1
    if seen[q["category"]] <= cap:
        rows.append(line if line.endswith("\n") else line + "\n")
open(out, "w", encoding="utf-8").write("".join(rows))
PY
fi

declare -A PROMPTS=([grounded]=prompts/grounded_prompts.txt [ngram]="$OUT/general.txt" [spec_bench]="$OUT/spec_bench.jsonl"
                    [spec_bench_llama]=prompts/spec_bench/question.jsonl
                    [suffix_spec_bench_llama]=prompts/spec_bench/question.jsonl
                    [suffix_grounded]=prompts/grounded_prompts.txt
                    [suffix_source_edits_llama]=prompts/source_edits/question.jsonl)
declare -A SAMPLING=([grounded]="--temperature 0 --max-new-tokens 64" [ngram]="--temperature 1.0 --max-new-tokens 48"
                     [spec_bench]="--temperature 0 --max-new-tokens 48" [spec_bench_llama]="--temperature 0 --max-new-tokens 48"
                     [suffix_spec_bench_llama]="--temperature 0 --max-new-tokens 48"
                     [suffix_grounded]="--temperature 0 --max-new-tokens 64"
                     [suffix_source_edits_llama]="--temperature 0 --max-new-tokens 48")
declare -A BACKEND=([grounded]=torch [ngram]=torch [spec_bench]=torch [spec_bench_llama]=llama_cpp
                    [suffix_spec_bench_llama]=llama_cpp [suffix_grounded]=torch [suffix_source_edits_llama]=llama_cpp)
declare -A DRAFTERS=([grounded]="--draft-ngram 3,1" [ngram]="--draft-ngram 3,1" [spec_bench]="--draft-ngram 3,1"
                     [spec_bench_llama]="--draft-ngram 3,1" [suffix_spec_bench_llama]="--draft-suffix 24"
                     [suffix_grounded]="--draft-suffix 24" [suffix_source_edits_llama]="--draft-suffix 24")
declare -A COSTS=([torch.ngram]="$OUT/costs/ngram.json" [llama_cpp.ngram]="$OUT/costs/ngram_llama_cpp.json"
                  [torch.suffix]="$OUT/costs/suffix.json" [llama_cpp.suffix]="$OUT/costs/suffix_llama_cpp.json")
# texts decoded together: llama.cpp's backend decodes one at a time, and so does suffix decoding (its cache is shared)
declare -A BATCH=([torch.ngram]=16 [llama_cpp.ngram]=1 [torch.suffix]=1 [llama_cpp.suffix]=1)
declare -A PEERS=([torch]="" [llama_cpp]="--peers llama-cpp-python")

for name in "${WORKLOADS[@]}"; do
    backend=${BACKEND[$name]}
    DRAFTER=${DRAFTERS[$name]}
    family=$([[ $DRAFTER == --draft-suffix* ]] && echo suffix || echo ngram)
    costs=${COSTS[$backend.$family]}
    peers=$([ "$family" = ngram ] && echo "${PEERS[$backend]}" || true)  # the engines' own prompt lookup
    if [ ! -f "$costs" ]; then
        stamp "cost file ($backend)"
        # shellcheck disable=SC2086
        "$PYTHON" benchmark.py perf --write-costs "$costs" --harvest "$MODEL" $DRAFTER --gamma-max "$GAMMA" \
            --threads 1 --cost-repeats 15 --backend "$backend" > "${costs%.json}.log" 2>&1
    fi
    if [ ! -f "$OUT/$name/metadata.json" ]; then
        stamp "harvest $name"
        # shellcheck disable=SC2086
        "$PYTHON" generate_data.py harvest --target "$MODEL" $DRAFTER --backend "$backend" --prompts "${PROMPTS[$name]}" \
            --gamma "$GAMMA" ${SAMPLING[$name]} --seed 0 --batch-size "${BATCH[$backend.$family]}" --threads 1 --no-progress \
            --out "$OUT/$name" > "$OUT/$name.harvest.log" 2>&1
    fi
    if [ ! -f "$OUT/$name.champion.json" ]; then
        stamp "search $name"
        run=$("$PYTHON" -m evolve run --data "$OUT/$name" --out "$OUT/runs-$name" --evolve verify-length \
              --objective tokens_per_second --costs "$costs" --gamma "$GAMMA" --length-weighting position \
              --selection cv --population "$POPULATION" --generations "$GENERATIONS" --seed "$SEED" --no-progress \
              | tail -n 1)
        cp "$run/run.json" "$OUT/$name.run.json"
        cp "$run/champion.json" "$OUT/$name.champion.json"
    fi
    for fmt in json txt; do
        [ -f "$OUT/$name.bench.$fmt" ] && continue
        stamp "benchmark $name ($fmt)"
        "$PYTHON" benchmark.py --data "$OUT/$name" --split test --costs "$costs" --champion "$OUT/$name.champion.json" \
            --repeats 1 --format "$([ $fmt = txt ] && echo table || echo json)" --output "$OUT/$name.bench.$fmt"
    done
    [ -f "$OUT/$name.logistic.json" ] || "$PYTHON" scripts/headroom_summary.py --logistic "$OUT/$name.bench.json" \
        "$OUT/$name.logistic.json"
    rows=()
    if [ "$family" = suffix ]; then  # suffix decoding's own rule, at vLLM's defaults and tuned on valid
        for row in suffix_vllm_default suffix_tuned; do
            [ -f "$OUT/$name.$row.json" ] || "$PYTHON" scripts/headroom_summary.py --suffix "$OUT/$name.bench.json" \
                "$row" "$GAMMA" "$OUT/$name.$row.json"
            rows+=(--champion "$OUT/$name.$row.json")
        done
    fi
    if [ "$LIVE" = 1 ] && [ ! -f "$OUT/$name.live.json" ]; then
        fixed=$("$PYTHON" scripts/headroom_summary.py --tuned "$OUT/$name.bench.json")
        stamp "live $name: $fixed"
        # shellcheck disable=SC2086
        "$PYTHON" benchmark.py live --target "$MODEL" $DRAFTER --prompts "${PROMPTS[$name]}" --data "$OUT/$name" \
            --split test --gamma "$GAMMA" ${SAMPLING[$name]} --seed 0 --threads 1 --backend "$backend" --no-progress \
            --repeats "$REPEATS" --costs "$costs" --rule standard_rejection --rule "$fixed" $peers "${rows[@]}" \
            --champion "$OUT/$name.logistic.json" --champion "$OUT/$name.champion.json" \
            --format json --output "$OUT/$name.live.json" > "$OUT/$name.live.log" 2>&1
    fi
done
"$PYTHON" scripts/headroom_summary.py --out "$OUT" "${WORKLOADS[@]}" > "$OUT/summary.md"
cat "$OUT/summary.md"

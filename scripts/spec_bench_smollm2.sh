#!/usr/bin/env bash
# SmolLM2-135M-Instruct on Spec-Bench's questions (prompts/spec_bench/question.jsonl), end to end on CPU
# (docs/tutorial/spec-bench.md):
#   1. fetch the model (scripts/smollm2_common.sh) and take the questions: the first QUESTIONS of each
#      category (default: all 480; both turns of MT-bench's questions are decoded);
#   2. a cost file per configuration with `benchmark.py perf --write-costs` (one thread, run alone): prompt
#      lookup (--draft-ngram 3,1) on the torch and the llama.cpp backends, the layer-skipping drafter (layers
#      10, 15, 20 of 30 skipped) on torch;
#   3. harvest the questions with each (greedy, as Spec-Bench; gamma GAMMA; at most MAX_NEW new tokens per
#      turn; splits by question within each category: every split holds every category);
#   4. on each: a verification-length search under its cost file (it reads train and valid), then the benchmark
#      table on the held-out test questions with the per-task-group tables of Spec-Bench's layout and the
#      13 categories (--by-category) -> OUT/NAME.bench.{txt,json};
#   5. live decoding of the test questions (REPEATS repeats where `benchmark.py live` has --repeats): plain
#      decoding, standard rejection, the best fixed length tuned on valid, the evolved policy, and on llama.cpp
#      llama-cpp-python's own prompt lookup at its shipped setting and the policy exported into it
#      (--peers llama-cpp-python) -> OUT/NAME.live.txt.
# Everything goes under OUT (results/spec_bench_smollm2, git-ignored); a finished step's file is kept (remove it
# to redo the step). Options through the environment: PYTHON, MODELS, OUT, QUESTIONS (per category; default
# all), CATEGORIES (comma-separated; default all 13), MAX_NEW (new tokens per turn, default 48), GAMMA (5), POPULATION (300), GENERATIONS (30), REPEATS (3),
# CONFIGS (the configurations to run, default "ngram ngram_llama skip").
OUT=${OUT:-results/spec_bench_smollm2}
source "$(dirname "$0")/smollm2_common.sh"
QUESTIONS=${QUESTIONS:-all}
MAX_NEW=${MAX_NEW:-48}
GAMMA=${GAMMA:-5}
POPULATION=${POPULATION:-300}
GENERATIONS=${GENERATIONS:-30}
REPEATS=${REPEATS:-3}
read -r -a CONFIGS <<< "${CONFIGS:-ngram ngram_llama skip}"
mkdir -p "$OUT/costs"
fetch_model

# 1. the questions: the first QUESTIONS of every category (of CATEGORIES), in the file's order (a .jsonl name: read as JSON Lines)
QFILE="$OUT/questions.jsonl"
"$PYTHON" - "$QUESTIONS" "$QFILE" "${CATEGORIES:-all}" <<'PY'
import json, sys
cap, out, cats = sys.argv[1], sys.argv[2], sys.argv[3]
seen, rows = {}, []
for line in open("prompts/spec_bench/question.jsonl", encoding="utf-8"):
    q = json.loads(line)
    if cats != "all" and q["category"] not in cats.split(","):
        continue
    seen[q["category"]] = seen.get(q["category"], 0) + 1
    if cap == "all" or seen[q["category"]] <= int(cap):
        rows.append(line if line.endswith("\n") else line + "\n")
text = "".join(rows)
try:
    unchanged = open(out, encoding="utf-8").read() == text
except OSError:
    unchanged = False
if not unchanged:  # rewritten only when it changes, so a finished harvest of it resumes
    open(out, "w", encoding="utf-8").write(text)
print(f"{len(rows)} questions -> {out}", file=sys.stderr)
PY

declare -A DRAFTER=([ngram]="--draft-ngram 3,1" [ngram_llama]="--draft-ngram 3,1" [skip]="--draft-skip-layers 10,15,20")
declare -A BACKEND=([ngram]=torch [ngram_llama]=llama_cpp [skip]=torch)

for c in "${CONFIGS[@]}"; do  # 2. cost files
    [ -f "$OUT/costs/$c.json" ] && continue
    stamp "cost file $c"
    # shellcheck disable=SC2086
    "$PYTHON" benchmark.py perf --write-costs "$OUT/costs/$c.json" --harvest "$MODEL" ${DRAFTER[$c]} \
        --gamma-max "$GAMMA" --threads 1 --cost-repeats 15 --backend "${BACKEND[$c]}" > "$OUT/costs/$c.log" 2>&1
done

for c in "${CONFIGS[@]}"; do  # 3. harvests
    [ -f "$OUT/$c/metadata.json" ] && grep -q '"complete": true' "$OUT/$c/metadata.json" && continue
    stamp "harvest $c"
    # shellcheck disable=SC2086
    "$PYTHON" generate_data.py harvest --target "$MODEL" ${DRAFTER[$c]} --backend "${BACKEND[$c]}" \
        --prompts "$QFILE" --gamma "$GAMMA" --temperature 0 --max-new-tokens "$MAX_NEW" --seed 0 --threads 1 \
        --no-progress --out "$OUT/$c" > "$OUT/$c.harvest.log" 2>&1
done

LIVE_REPEATS=()
if "$PYTHON" benchmark.py live --help | grep -q -- "--repeats"; then LIVE_REPEATS=(--repeats "$REPEATS"); fi
for c in "${CONFIGS[@]}"; do
    costs="$OUT/costs/$c.json"
    if [ ! -f "$OUT/$c.champion.json" ]; then  # 4. search and tables
        stamp "verification-length search $c"
        run=$("$PYTHON" -m evolve run --data "$OUT/$c" --out "$OUT/runs-$c" --evolve verify-length \
              --objective tokens_per_second --costs "$costs" --gamma "$GAMMA" --length-weighting position \
              --population "$POPULATION" --generations "$GENERATIONS" --seed 1 --no-progress | tail -n 1)
        cp "$run/champion.json" "$OUT/$c.champion.json"
    fi
    for fmt in txt json; do
        [ -f "$OUT/$c.bench.$fmt" ] && continue
        stamp "benchmark $c ($fmt)"
        "$PYTHON" benchmark.py --data "$OUT/$c" --split test --costs "$costs" --champion "$OUT/$c.champion.json" \
            --repeats 1 --by-category --format "$([ $fmt = txt ] && echo table || echo json)" \
            --output "$OUT/$c.bench.$fmt"
    done
    if [ ! -f "$OUT/$c.live.txt" ]; then  # 5. live decoding of the test questions
        # the best fixed length tuned on valid, as a named policy (fixed_gamma:gamma=G)
        mapfile -t tuned < <("$PYTHON" scripts/verify_length_summary.py --tuned "$OUT/$c.bench.json")
        fixed=${tuned[0]}
        PEERS=()
        [ "${BACKEND[$c]}" = llama_cpp ] && PEERS=(--peers llama-cpp-python)
        stamp "live $c: standard_rejection, $fixed, champion ${PEERS[*]}"
        # shellcheck disable=SC2086
        "$PYTHON" benchmark.py live --target "$MODEL" ${DRAFTER[$c]} --backend "${BACKEND[$c]}" --prompts "$QFILE" \
            --data "$OUT/$c" --split test --gamma "$GAMMA" --temperature 0 --max-new-tokens "$MAX_NEW" --seed 0 \
            --threads 1 --costs "$costs" --rule standard_rejection --rule "$fixed" \
            --champion "$OUT/$c.champion.json" "${LIVE_REPEATS[@]}" "${PEERS[@]}" --no-progress --format table \
            --output "$OUT/$c.live.txt"
    fi
done
stamp "done: $OUT/{$(IFS=,; echo "${CONFIGS[*]}")}.{bench,live}.txt"

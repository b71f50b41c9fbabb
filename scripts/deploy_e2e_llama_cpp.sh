#!/usr/bin/env bash
# End to end, llama.cpp: build llama-server from the llama.cpp source that llama-cpp-python's source package vendors
# (no other download), export two champions for llama.cpp and run the exported flags exactly as their `use:` line says
# on SmolLM2-135M-Instruct, with plain decoding beside; the server's own counters (timings.draft_n,
# timings.draft_n_accepted of /completion, and its log's "draft acceptance ... mean len" line) show speculation ran with
# the exported lengths, and the texts are compared with plain greedy decoding's.
#   1. fixed_gamma:gamma=4 (no harvest drafter recorded): --spec-type draft-simple, SmolLM2 as its own draft model;
#   2. a prompt-lookup champion (its harvest drafter ngram 3..1): --spec-type ngram-simple, no draft model.
# Not run by CI. Options through the environment: PYTHON, MODELS (models), OUT (results/deploy_e2e), LLAMA_BUILD
# (.cache/llama-server), PORT (8931), N_PREDICT (96).
OUT=${OUT:-results/deploy_e2e}
source "$(dirname "$0")/smollm2_common.sh"
LLAMA_BUILD=${LLAMA_BUILD:-.cache/llama-server}
PORT=${PORT:-8931}
N_PREDICT=${N_PREDICT:-96}
mkdir -p "$OUT"

build_server() {
    if [ -x "$LLAMA_BUILD/bin/llama-server" ]; then return; fi
    OUT=.cache/llama-harness bash scripts/build_llama_harness.sh > /dev/null || true  # fetches and unpacks the source
    local src=.cache/llama-harness/llama_cpp_python-0.3.36/vendor/llama.cpp
    stamp "building llama-server from $src (-j2)"
    cmake -S "$src" -B "$LLAMA_BUILD" -DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DGGML_OPENMP=OFF > "$OUT/llama_cmake.log" 2>&1
    cmake --build "$LLAMA_BUILD" --target llama-server -j2 > "$OUT/llama_build.log" 2>&1
}

# serve NAME FLAGS...: start llama-server with FLAGS, complete the prompt greedily, save $OUT/NAME.json and the log.
serve() {
    local name=$1; shift
    "$LLAMA_BUILD/bin/llama-server" --port "$PORT" -c 2048 -t 2 "$@" > "$OUT/$name.log" 2>&1 &
    local pid=$!
    for _ in $(seq 120); do curl -sf "localhost:$PORT/health" > /dev/null && break; sleep 1; done
    curl -sf "localhost:$PORT/completion" -H 'Content-Type: application/json' -d "$(printf '%s' \
        '{"prompt": "List the days of the week, then list them again in the same order, then once more:", '\
        '"n_predict": '"$N_PREDICT"', "temperature": 0, "seed": 0, "cache_prompt": false}')" > "$OUT/$name.json"
    kill "$pid"; wait "$pid" 2> /dev/null || true
    "$PYTHON" -c "import json, sys; d = json.load(open(sys.argv[1])); t = d['timings']; print(sys.argv[2], \
'predicted', t['predicted_n'], 'draft_n', t.get('draft_n', 0), 'draft_n_accepted', t.get('draft_n_accepted', 0))" \
        "$OUT/$name.json" "$name"
    grep -h "draft acceptance" "$OUT/$name.log" || true
}

build_server
fetch_model
stamp "exporting for llama.cpp"
"$PYTHON" -m evolve export fixed_gamma:gamma=4 --to llama.cpp --output "$OUT/draft_simple.flags"
"$PYTHON" -c "
from heuristics.champions import Champion, save_champion
save_champion(Champion(name='lookup_length_5', expression='sub(4.5, draft_index)', description='e2e', kind='verify-length',
              features=('draft_index',), metrics={'train': {'fitness': 0.5}, 'valid': {'fitness': 0.5}},
              provenance={'data': {'generator_config': {'drafter': {'kind': 'ngram', 'max': 3, 'min': 1}}}}),
              '$OUT', overwrite=True)"
"$PYTHON" -m evolve export "$OUT/lookup_length_5.json" --to llama.cpp --output "$OUT/ngram.flags"
grep "use:" "$OUT/draft_simple.flags" "$OUT/ngram.flags"
serve plain -m "$MODEL"
# shellcheck disable=SC2046
serve draft_simple -m "$MODEL" -md "$MODEL" $(grep -v '^#' "$OUT/draft_simple.flags")
# shellcheck disable=SC2046
serve ngram -m "$MODEL" $(grep -v '^#' "$OUT/ngram.flags")
"$PYTHON" -c "
import json, sys
texts = {n: json.load(open(f'$OUT/{n}.json'))['content'] for n in ('plain', 'draft_simple', 'ngram')}
for n in ('draft_simple', 'ngram'):
    print(n, 'text equals plain greedy decoding:', texts[n] == texts['plain'])
"

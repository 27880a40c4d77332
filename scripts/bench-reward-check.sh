#!/usr/bin/env bash
# Throughput of `rulegym reward-check`: 10,000 cases (about 21,700 lines: each case, its
# duplicate for the determinism check, and the bases of the pair properties) against reward
# commands in Rust (`rulegym score --reward-lines`) and Python (rulegym's TRL reward and verl's
# search_r1_like_qa_em through scripts/reward-peer.py), three runs each, median wall seconds.
# Usage: scripts/bench-reward-check.sh [PYTHON]   (PYTHON: a venv with the rulegym wheel and verl)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${RULEGYM_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/rulegym}"
PY="${1:-.venv-test/bin/python}"
CASES="${CASES:-10000}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "load: $(cut -d' ' -f1-3 /proc/loadavg), cases: $CASES"
for cmd in "$BIN score --reward-lines" "$PY scripts/reward-peer.py rulegym-trl" "$PY scripts/reward-peer.py verl-search-r1"; do
  times=()
  for run in 1 2 3; do
    start=$(date +%s.%N)
    "$BIN" reward-check --cmd "$cmd" --cases "$CASES" --out "$out/report.json" 2>/dev/null || true
    end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc)")
  done
  median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)
  lines=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['lines'])" "$out/report.json")
  printf '%-45s median %6.2f s  (%s)  %s lines\n' "$cmd" "$median" "${times[*]}" "$lines"
done

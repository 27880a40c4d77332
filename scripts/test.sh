#!/usr/bin/env bash
# Runs the whole rulegym test suite on a fresh Debian machine: installs the system packages and
# Python wheels the tests need, then runs every Rust test with every feature (release profile:
# the Prolog engine is 4x slower in debug builds).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=$(grep -v '^\s*#' scripts/apt-packages.txt | xargs || true)
missing=""
for p in $packages; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "== installing Debian packages:$missing"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

if grep -qv '^\s*\(#\|$\)' scripts/test-requirements.txt 2>/dev/null; then
  echo "== installing Python test requirements into .venv-test"
  [ -x .venv-test/bin/python ] || python3 -m venv .venv-test
  .venv-test/bin/pip install -q -r scripts/test-requirements.txt
  export RULEGYM_TEST_PYTHON="$PWD/.venv-test/bin/python"
fi

echo "== cargo test --release --all-features"
cargo test --release --all-features "$@"

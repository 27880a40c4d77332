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

# Python package: build the abi3 wheel once with maturin (sharing target/), install it into the
# test venv like a user would (no Rust needed to install), run the pytest suite against it and
# the CLI built above. RULEGYM_SKIP_PYTHON=1 skips this part.
if [ -z "${RULEGYM_SKIP_PYTHON:-}" ]; then
  echo "== Python package: maturin build, pytest python/tests"
  [ -x .venv-test/bin/python ] || python3 -m venv .venv-test
  .venv-test/bin/pip install -q -r scripts/test-requirements.txt
  rm -f target/wheels/rulegym-*.whl
  .venv-test/bin/maturin build --release --strip -m python/Cargo.toml \
    -i .venv-test/bin/python -o target/wheels
  .venv-test/bin/pip install -q --force-reinstall --no-deps target/wheels/rulegym-*.whl
  RULEGYM_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/rulegym" RULEGYM_WHEEL="$(ls target/wheels/rulegym-*.whl)" \
    .venv-test/bin/python -m pytest python/tests -q -rs
fi

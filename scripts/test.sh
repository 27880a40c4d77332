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

# The test venv uses Python 3.12 where there is one: skyrl 0.4.0 requires 3.12+ and verl 0.9.1
# below 3.13.
# (pyenv's python3.12 shim fails unless 3.12 is selected, so each candidate is tried.)
PYTHON_BASE="${RULEGYM_TEST_PYTHON_BASE:-}"
if [ -z "$PYTHON_BASE" ]; then
  PYTHON_BASE=python3
  for candidate in python3.12 "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.12*/bin/python3; do
    if "$candidate" -c 'import sys, venv; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      PYTHON_BASE="$candidate"
      break
    fi
  done
fi
want_version="$("$PYTHON_BASE" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ -x .venv-test/bin/python ] &&
  [ "$(.venv-test/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != "$want_version" ]; then
  echo "== .venv-test is not Python $want_version: recreating it"
  rm -rf .venv-test
fi

if grep -qv '^\s*\(#\|$\)' scripts/test-requirements.txt 2>/dev/null; then
  echo "== installing Python test requirements into .venv-test (Python $want_version)"
  [ -x .venv-test/bin/python ] || "$PYTHON_BASE" -m venv .venv-test
  .venv-test/bin/pip install -q -r scripts/test-requirements.txt
  .venv-test/bin/pip install -q --no-deps -r scripts/test-requirements-nodeps.txt
  export RULEGYM_TEST_PYTHON="$PWD/.venv-test/bin/python"
fi

# Venvs of their own for packages whose pins conflict with the test venv's mcp 2.3.0: openenv
# 0.10 (its fastmcp needs mcp < 2; python/tests/test_openenv.py runs its clients there).
# RULEGYM_SKIP_PYTHON=1 skips them with the Python tests.
if [ -z "${RULEGYM_SKIP_PYTHON:-}" ]; then
  echo "== installing openenv into .venv-openenv"
  [ -x .venv-openenv/bin/python ] || "$PYTHON_BASE" -m venv .venv-openenv
  .venv-openenv/bin/pip install -q -r scripts/openenv-requirements.txt
  export RULEGYM_OPENENV_PYTHON="$PWD/.venv-openenv/bin/python"
  # verifiers 0.4 (pins mcp==2.0.0): python/tests/test_verifiers.py runs its loader, serving and
  # scoring there, with the rulegym wheel (installed below, once it is built).
  echo "== installing verifiers into .venv-verifiers"
  [ -x .venv-verifiers/bin/python ] || "$PYTHON_BASE" -m venv .venv-verifiers
  .venv-verifiers/bin/pip install -q -r scripts/verifiers-requirements.txt
  export RULEGYM_VERIFIERS_PYTHON="$PWD/.venv-verifiers/bin/python"
  # nemo-gym 0.4 (Python >= 3.12, mcp < 2): python/tests/test_nemo_gym.py runs its OpenEnv
  # resources server there, in process, with the rulegym wheel (installed below).
  echo "== installing nemo-gym into .venv-nemo-gym"
  [ -x .venv-nemo-gym/bin/python ] || "$PYTHON_BASE" -m venv .venv-nemo-gym
  .venv-nemo-gym/bin/pip install -q -r scripts/nemo-gym-requirements.txt
  export RULEGYM_NEMO_GYM_PYTHON="$PWD/.venv-nemo-gym/bin/python"
fi

echo "== cargo test --release --all-features (the library and the CLI package)"
cargo test --release --all-features "$@"

# The library as a vendoring stack takes it: no feature at all (its unit tests).
echo "== the lean library: cargo test --release -p rulegym --no-default-features --lib"
cargo test --release -p rulegym --no-default-features --lib

# Python package: build the abi3 wheel once with maturin (sharing target/), install it into the
# test venv like a user would (no Rust needed to install), run the pytest suite against it and
# the CLI built above. RULEGYM_SKIP_PYTHON=1 skips this part.
if [ -z "${RULEGYM_SKIP_PYTHON:-}" ]; then
  echo "== Python package: maturin build, pytest python/tests"
  [ -x .venv-test/bin/python ] || "$PYTHON_BASE" -m venv .venv-test
  .venv-test/bin/pip install -q -r scripts/test-requirements.txt
  .venv-test/bin/pip install -q --no-deps -r scripts/test-requirements-nodeps.txt
  rm -f target/wheels/rulegym-*.whl
  .venv-test/bin/maturin build --release --strip -m python/Cargo.toml \
    -i .venv-test/bin/python -o target/wheels
  .venv-test/bin/pip install -q --force-reinstall --no-deps target/wheels/rulegym-*.whl
  .venv-verifiers/bin/pip install -q --force-reinstall --no-deps target/wheels/rulegym-*.whl
  .venv-nemo-gym/bin/pip install -q --force-reinstall --no-deps target/wheels/rulegym-*.whl
  RULEGYM_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/rulegym" RULEGYM_WHEEL="$(ls target/wheels/rulegym-*.whl)" \
    .venv-test/bin/python -m pytest python/tests -q -rs
fi

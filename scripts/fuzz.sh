#!/usr/bin/env bash
# Long fuzz run of every parser and loader a user's text reaches (tests/integration/fuzz.rs,
# proptest on stable Rust; the dataset-directory mutations of tests/integration/dataset_load.rs
# run with it). CI runs the same loops with the default budget (512 cases each, 32 for the CLI
# JSON inputs). A failing input is printed shrunk and recorded by proptest under
# tests/proptest-regressions/; keep that file and add the case to the test it came from.
#
#   scripts/fuzz.sh            # 200,000 cases per in-process loop (20,000 took 23 s on 2 cores)
#   scripts/fuzz.sh 2000000    # a longer budget
set -euo pipefail
cd "$(dirname "$0")/.."
export RULEGYM_FUZZ_CASES="${1:-200000}"
echo "== fuzz: $RULEGYM_FUZZ_CASES cases per loop ($((RULEGYM_FUZZ_CASES / 16)) for the CLI JSON inputs)"
cargo test --release --all-features --test integration -- fuzz:: dataset_load:: --test-threads 2

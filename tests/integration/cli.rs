//! Running the `rulegym` binary from the integration tests.

use std::path::Path;
use std::process::{Command, Output};

/// A command for the `rulegym` binary built with these tests.
pub fn rulegym() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rulegym"))
}

/// Runs `cmd` to completion with stdout and stderr captured.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

/// Runs `cmd` as [`run`] and asserts that it succeeded (its stderr is the failure message).
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `rulegym generate` of the small test dataset (5 family trees, seed 3) into `out`.
pub fn generate_small(out: &Path) {
    run_ok(
        rulegym()
            .args([
                "generate",
                "--quiet",
                "--num-family-trees",
                "5",
                "--seed",
                "3",
                "--out",
            ])
            .arg(out),
    );
}

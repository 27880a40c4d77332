//! Skipping a test whose external tool is missing (a browser, SWI-Prolog, a GPU adapter, the test
//! venv, a model wheel): said loudly, and a failure where skipping would hide a gap: when `CI` is
//! set (CI installs every tool: scripts/test.sh), or the variable `require` names is set.

/// Skips `test` with `why` on stderr (the caller then returns), or panics when `CI` or
/// `require` (e.g. `RULEGYM_REQUIRE_GPU`) is set.
pub fn skip(test: &str, why: &str, require: Option<&str>) {
    for var in std::iter::once("CI").chain(require) {
        if std::env::var_os(var).is_some() {
            panic!("{test}: {why}; {var} is set, so this test may not be skipped");
        }
    }
    eprintln!("SKIPPED: {test}: {why}");
}

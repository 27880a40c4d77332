//! The `rulegym` command inside the wheel: `pip install rulegym` puts a `rulegym` script on
//! PATH (`rulegym._cli:main`) that runs the same CLI as the release binary.

use pyo3::prelude::*;

/// Runs the `rulegym` command line with `argv` (the program name first) and returns its exit
/// status. The GIL is released for the whole run, so a server or a long generation does not
/// hold up other Python threads.
#[pyfunction]
pub fn run_cli(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.allow_threads(|| rulegym_cli::main(argv))
}

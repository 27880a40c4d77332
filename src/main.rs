//! The `rulegym` command-line tool: parses flags and calls the library.

fn main() -> std::process::ExitCode {
    rulegym::cli::main()
}

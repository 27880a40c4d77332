//! The `rulegym` binary: the whole tool is the library's [`rulegym_cli::main`].

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(rulegym_cli::main(std::env::args_os()))
}

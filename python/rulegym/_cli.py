"""The ``rulegym`` console script of the wheel: the Rust CLI, run in this process."""

import signal
import sys


def main() -> None:
    """Runs ``rulegym`` with this process's arguments and exits with its status."""
    # Ctrl-C and a closed pipe end the command as they end the release binary: the Rust code
    # never returns to Python to run Python's own handlers.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    from ._rulegym import run_cli

    sys.exit(run_cli(["rulegym", *sys.argv[1:]]))


if __name__ == "__main__":
    main()

"""What every command of pyops-conformance shares: its exit codes and its one-line usage errors.

Its own module, so that the grading command (cli.py) and the class commands (classroom/) each
import it, and neither imports the other back.
"""

import argparse

EXIT_PASSED, EXIT_FAILED, EXIT_ERROR = 0, 1, 2
# Stopped by Ctrl-C, kill or a closed terminal: the shell's 128 + SIGINT.
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A command line the suite cannot run; the message is one line."""


class Parser(argparse.ArgumentParser):
    """argparse, with its errors raised as UsageError (the caller says them in one line)."""

    def error(self, message: str) -> "None":  # type: ignore[override]
        raise UsageError(message)

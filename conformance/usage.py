"""What every command of pyops-conformance shares: its exit codes and its one-line usage errors.

Its own module, so that the grading command (cli.py) and the class commands (classroom/) each
import it, and neither imports the other back.
"""

import argparse
import os
import signal
import sys
from typing import List, Optional

from conformance.harness.scratch import STOPPING_SIGNALS

EXIT_PASSED, EXIT_FAILED, EXIT_ERROR = 0, 1, 2
# Stopped by Ctrl-C, kill or a closed terminal: the shell's 128 + SIGINT.
EXIT_INTERRUPTED = 130


# The interpreter that runs the runners when a command is given no --python. A machine whose base
# Python runs code at every start (a .pth hook) or holds packages a learner's machine would not,
# names a plain venv of it here once, for every command: each runner start costs what it would on
# a learner's machine, and sees what it would there (the project's tests do this).
PYTHON_VAR = "PYOPS_PYTHON"


def default_python() -> Optional[str]:
    """$PYOPS_PYTHON, the --python of every command that is given none; None when unset."""
    return os.environ.get(PYTHON_VAR) or None


# The stopping signals received so far (see stop_on_signals).
stopped_by: List[int] = []


def stop_on_signals() -> None:
    """Turn SIGINT, SIGTERM and SIGHUP into KeyboardInterrupt from now on, so that a command stopped
    by `kill`, a closed terminal, `docker stop` or a class's timeout unwinds as on Ctrl-C: its
    folders removed, its processes reaped, whatever moment it was stopped at."""
    for signum in STOPPING_SIGNALS:
        signal.signal(signum, _stop)
    sys.unraisablehook = _unraisable


def _stop(signum, frame):
    stopped_by.append(signum)
    raise KeyboardInterrupt("signal %d" % signum)


def _unraisable(unraisable) -> None:  # type: ignore[no-untyped-def]
    """A stop that landed where Python cannot raise (a __del__, or a weakref callback, which an
    import's module lock runs) is swallowed there, and Python printed it as "Exception ignored in:
    ... Traceback". It is kept in stopped_by, which a grading honours at the end of the check
    (plugin.pytest_runtest_logfinish), and said nowhere; any other such exception, as Python would."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and stopped_by:
        return
    sys.__unraisablehook__(unraisable)


class UsageError(Exception):
    """A command line the suite cannot run; the message is one line."""


class Parser(argparse.ArgumentParser):
    """argparse, with its errors raised as UsageError (the caller says them in one line)."""

    def error(self, message: str) -> "None":  # type: ignore[override]
        raise UsageError(message)

"""The grader's own temporary folders, made so that a signal that stops it leaves none behind.

A command stopped by SIGINT, SIGTERM or SIGHUP unwinds as on Ctrl-C (usage.stop_on_signals) and
removes what it made. A signal that lands between a folder's making and the line that is to
remove it would still leave it, so a folder is made with those signals held: they arrive once
its removal is in place.
"""

import contextlib
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Iterator, Optional

STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold STOPPING_SIGNALS back (in this thread) until the block ends; then they arrive."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextlib.contextmanager
def folder(prefix: str) -> Iterator[Path]:
    """A new private folder in the temporary folder, removed with everything in it at the end."""
    made: Optional[Path] = None
    try:
        with signals_held():
            made = Path(tempfile.mkdtemp(prefix=prefix))
        yield made
    finally:
        if made is not None:
            shutil.rmtree(str(made), ignore_errors=True)

"""What the gradings on one machine share: a folder for their locks, and turns to play alone.

A check whose timing a busy machine left unsettled (expect.Unsettled) is played again; played
again among the same crowd it would likely be unsettled again. So every play of a check holds a
claim on the machine: a first play a shared one, a replay an exclusive one, which waits for the
checks in flight (of every grading on the machine) to end and holds new ones back while it plays.
Replays are rare, and a replay is the one play whose timing matters most.

Two flocks make the exclusive claim fair: a play takes the gate briefly on its way to the claim,
so a replay waiting at the gate is not starved by a stream of shared claims that overlap.
"""

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator, Optional

# One folder per machine, whatever TMPDIR says (tox gives each env its own): gradings that kept
# their locks in different folders would not see each other.
MACHINE_DIR = Path("/run" if os.access("/run", os.W_OK) else "/tmp")

# How long a play waits for its turn at most (a replay waits for the longest check in flight,
# some 20 s); then it plays anyway, and so does every later play of this process: a turn is help,
# not a rule, and a holder that never lets go (a grading stopped with Ctrl-Z) must not make every
# check of every grading wait this long.
PATIENCE_S = 60.0
# How many replays one grading process plays alone at most: a runner that keeps its own checks
# unsettled (busy children of its own) must not hold back every other grading on the machine.
ALONE_BUDGET = 8
_POLL_S = 0.02

_alone_played = 0
_gave_up = False


def _lock_file(name: str) -> Optional[int]:
    """A lock file of this machine's gradings (one set per uid: the grader's, never a runner's)."""
    path = MACHINE_DIR / ("pyops-conformance-%d.%s" % (os.geteuid(), name))
    try:
        return os.open(str(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None  # a read-only or foreign folder: play without turns


def _take(fd: int, how: int, until: float) -> bool:
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= until:
                return False
            time.sleep(_POLL_S)


@contextlib.contextmanager
def turn(alone: bool) -> Iterator[bool]:
    """Hold this machine for one play of a check: with others, or alone. Yields whether it is alone.

    An exclusive turn beyond ALONE_BUDGET, or any turn not had within PATIENCE_S, is played
    without one (and, after such a wait, every later turn of this process too).
    """
    global _alone_played, _gave_up
    if alone and _alone_played >= ALONE_BUDGET:
        alone = False
    gate, claim = (None, None) if _gave_up else (_lock_file("gate"), _lock_file("plays"))
    claimed = False
    try:
        if gate is not None and claim is not None:
            until = time.monotonic() + PATIENCE_S
            how = fcntl.LOCK_EX if alone else fcntl.LOCK_SH
            if _take(gate, how, until):
                claimed = _take(claim, how, until)
                if not (alone and claimed):  # through the gate: a waiting replay may close it behind us
                    fcntl.flock(gate, fcntl.LOCK_UN)
            _gave_up = not claimed
        alone = alone and claimed
        _alone_played += alone
        yield alone
    finally:
        for fd in (gate, claim):
            if fd is not None:
                os.close(fd)  # closing the last descriptor releases its flock

"""When a process ends, timed by a watcher a busy machine cannot starve.

A check that polls for a process's end reads the time when it next gets the CPU: on a loaded
machine that is late, and a runner that killed its command on time would look late. The kernel
keeps no end time a grader could read afterwards, so the end is timed as it happens: a pidfd
becomes readable the moment its process exits (Linux 5.3), and one thread per grading process
waits on all the pidfds it is given, at real-time priority where the grader may set one (root), so
it runs as soon as the kernel wakes it, ahead of every ordinary process. Where it may not, its
times are as late as any other reading, and the check's CPU-wait excuse (cpuwait.py) still covers
that.
"""

import os
import select
import threading
from typing import Dict, Optional

from conformance.harness.libc import LIBC
from conformance.lab import timing

_PIDFD_OPEN = 434  # the same number on every architecture Linux gives it


class Ending:
    """One watched process: `ended` is when it exited (timing.now()'s clock), once it has."""

    def __init__(self) -> None:
        self.ended: Optional[float] = None
        self.event = threading.Event()

    def wait(self, seconds: float) -> Optional[float]:
        """When it ended, waiting up to `seconds` for it to (None: it has not yet)."""
        self.event.wait(seconds)
        return self.ended


class _Clock:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: Dict[int, Ending] = {}
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self.real_time = False
        thread = threading.Thread(target=self._run, name="exit clock", daemon=True)
        thread.start()

    def watch(self, fd: int) -> Ending:
        ending = Ending()
        with self._lock:
            self._watched[fd] = ending
        os.write(self._wake_w, b"w")
        return ending

    def _run(self) -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            self.real_time = True
        except (OSError, AttributeError):
            pass
        while True:
            with self._lock:
                fds = list(self._watched)
            ready, _, _ = select.select(fds + [self._wake_r], [], [])
            now = timing.now()  # first: the time is what this thread is for
            for fd in ready:
                if fd == self._wake_r:
                    try:
                        os.read(self._wake_r, 4096)
                    except BlockingIOError:
                        pass
                    continue
                with self._lock:
                    ending = self._watched.pop(fd)
                os.close(fd)
                ending.ended = now
                ending.event.set()


_clock: Optional[_Clock] = None
_clock_pid = 0


def watch(pid: int) -> Optional[Ending]:
    """Start timing the end of process `pid` (None where the kernel gives no pidfd, or `pid` is
    gone already). The caller checks, after this, that `pid` is still the process it means."""
    global _clock, _clock_pid
    fd = _pidfd_open(pid)
    if fd is None:
        return None
    if _clock is None or _clock_pid != os.getpid():  # a fork has no thread of its parent's
        _clock, _clock_pid = _Clock(), os.getpid()
    return _clock.watch(fd)


def _pidfd_open(pid: int) -> Optional[int]:
    opener = getattr(os, "pidfd_open", None)
    try:
        if opener is not None:
            return opener(pid, 0)
    except OSError:
        return None
    fd = LIBC.syscall(_PIDFD_OPEN, pid, 0)
    if fd < 0:
        return None
    os.set_inheritable(fd, False)
    return fd

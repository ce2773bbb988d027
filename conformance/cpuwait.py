"""How long a runner waited for a CPU: what tells a late runner from a busy machine.

Linux counts, for every thread, the time it was ready to run but had to wait for a CPU: the
second field of /proc/PID/task/TID/schedstat, in nanoseconds (a container's CPU quota counts
too: a throttled thread waits). A runner that missed a timing bound by less than it waited for
a CPU may be right: the machine, not the runner, made it late. Such a check is played again
(see expect.Unsettled), never failed on that measurement; a bound missed by more than the wait
is the runner's own doing, however busy the machine.
"""

import os
from typing import Dict, Tuple


def _waited_ns(schedstat: str) -> int:
    """A thread's CPU wait so far, from its schedstat file."""
    with open(schedstat, "rb") as handle:
        return int(handle.read().split()[1])


class CpuWait:
    """The CPU wait of some processes, summed over their threads, kept as it grows.

    Sample the processes while they live: a thread's count is gone once it has ended, so the
    last sample of each thread is what it waited (up to the few ms since).
    """

    def __init__(self) -> None:
        self._waited: Dict[Tuple[int, int], int] = {}
        self._also_ns = 0

    def sample(self, pid: int) -> None:
        try:
            threads = os.listdir("/proc/%d/task" % pid)
        except OSError:
            return  # ended: what it waited was counted at the last sample
        for tid in threads:
            try:
                waited = _waited_ns("/proc/%d/task/%s/schedstat" % (pid, tid))
            except (OSError, IndexError, ValueError):
                continue
            key = (pid, int(tid))
            # The largest count seen: a pid taken over by a new process starts again from 0.
            if waited > self._waited.get(key, 0):
                self._waited[key] = waited

    def add(self, seconds: float) -> None:
        """Count a wait measured some other way (the harness's own, while it started the runner)."""
        self._also_ns += int(seconds * 1e9)

    @property
    def seconds(self) -> float:
        return (sum(self._waited.values()) + self._also_ns) / 1e9


def own_thread_waited() -> float:
    """Seconds the calling thread has waited for a CPU so far (0 where the kernel does not say)."""
    try:
        return _waited_ns("/proc/thread-self/schedstat") / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0

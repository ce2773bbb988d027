"""How long a runner waited for a CPU: what tells a late runner from a busy machine.

Linux counts, for every thread, the time it was ready to run but had to wait for a CPU: the
second field of /proc/PID/task/TID/schedstat, in nanoseconds (a container's CPU quota counts
too: a throttled thread waits). A runner that missed a timing bound by less than it waited for
a CPU may be right: the machine, not the runner, made it late. Such a check is played again
(see expect.Unsettled), never failed on that measurement; a bound missed by more than the wait
is the runner's own doing, however busy the machine.

A runner can also make the machine busy itself (threads or processes that keep the CPUs turning
while its command runs) and so manufacture the wait that would excuse it. So the wait excuses
only a runner that kept the CPU no busier than a runner that waits for its command does
(SELF_BUSY_S and SELF_BUSY_SHARE of the time): one that used more is judged by the bounds alone.
Nor can it add up waits it makes cheaply: many threads or processes that sleep and wake use
little CPU, but each wake waits for a CPU on a busy machine. What a late runner waited on its
way is its main thread's wait, and its commands' while they start: only those count (the few
ms a timer or relay thread of a right runner waits on a wake are within every bound's margin).
The CPU a runner used is that of its whole family (sample_family): what it let go of (orphans its
stand-in adopted) and what has already ended keep the CPUs as busy as its own threads do.

A runner can also make only itself wait: pin itself to a CPU others keep busy, or lower its own
share of the CPU, while the machine has room for everyone else. So the last play of a check,
played alone, also measures the machine itself (Probe: a process of the grader's that computes a
little and sleeps, started as a runner is, in a session of its own): its wait per second on a
CPU is what the machine makes a process that asks for the CPU wait. A runner late by more than
that rate could explain (machine_wait_s), generously counted, made its own wait: it fails.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Dict, Iterator, List, Optional, Tuple

from conformance.harness import procfs
from conformance.harness.libc import LIBC
from conformance.lab import timing

# How long a process under a runner runs (STARTING_NS) or lives (STARTING_S, from when it was first
# seen) before its CPU wait no longer counts, and how many of them count (see CpuWait.sample).
STARTING_NS = 50_000_000
STARTING_S = 0.5
STARTING_COUNTED = 8
# CPU time a runner and its commands may use and still be excused by their CPU wait: a runner that
# waits for its command uses some 15 ms to start and little after; a megabyte relayed, tens of ms.
SELF_BUSY_S, SELF_BUSY_SHARE = 0.5, 0.2


def _schedstat(path: str) -> Tuple[int, int]:
    """A thread's time on a CPU and its CPU wait so far (ns), from its schedstat file."""
    fields = procfs.read(path).split()
    return int(fields[0]), int(fields[1])


# Of procfs.stat_fields: utime, stime, cutime, cstime, in clock ticks. The last two are those of the
# children a process has reaped (and theirs): what has ended below it still counts.
_CPU_TICKS = slice(11, 15)


class CpuWait:
    """The CPU wait of some processes, summed over their threads, kept as it grows.

    Sample the processes while they live: a thread's count is gone once it has ended, so the
    last sample of each thread is what it waited (up to the few ms since).
    """

    def __init__(self) -> None:
        self._waited: Dict[Tuple[int, int], int] = {}
        self._ran: Dict[Tuple[int, int], int] = {}  # each thread's time on a CPU, the largest seen
        self._also_ns = 0
        self._starting: Dict[int, float] = {}  # processes under the sampled one: when first seen
        self._family_ticks = 0  # CPU of a sampled family, the largest seen (see sample_family)

    def sample(self, pid: int, below: bool = False) -> None:
        """Sample process `pid`; with `below`, also what waits to start under it.

        What counts is the wait of each process's main thread: the waits of the other threads
        are those a runner could multiply at will (see the module's docstring), though their time
        on a CPU counts in busy_s. A timing measured by a runner's command (the stamps S3.2's
        command writes) includes the time the command waited to start running, so the processes
        under `pid` count, but only the first STARTING_COUNTED seen and only until they have run
        for STARTING_NS or lived for STARTING_S: what they wait after that is the contention of a
        process that keeps the CPU busy or wakes again and again, which a runner could start for
        itself to excuse its lateness.
        """
        now = time.monotonic()
        # Each process with whether its wait still counts.
        pending: List[Tuple[int, bool]] = [(pid, True)]
        while pending:
            current, counts = pending.pop()
            try:
                threads = os.listdir("/proc/%d/task" % current)
            except OSError:
                continue  # ended: what it waited was counted at the last sample
            for tid in threads:
                try:
                    ran, waited = _schedstat("/proc/%d/task/%s/schedstat" % (current, tid))
                except (OSError, IndexError, ValueError):
                    continue
                key = (current, int(tid))
                self._ran[key] = max(ran, self._ran.get(key, 0))
                main_thread = int(tid) == current
                starting = current == pid or ran < STARTING_NS
                # The largest count seen: a pid taken over by a new process starts again from 0.
                if counts and main_thread and starting and waited > self._waited.get(key, 0):
                    self._waited[key] = waited
                if below:
                    pending += [(child, self._still_starting(child, now)) for child in procfs.children(current, tid)]

    def sample_family(self, root: int) -> None:
        """Sample the CPU used by process `root` and everything below it, ended or not (busy_s).

        A process's reaped children count in its own stat file, so `root`, the stand-in or PID
        namespace init that adopts every orphan and reaps the runner, accounts for all that ended
        once reaped. The largest total seen is kept: a process that ended and was not waited for
        (children of a runner that ignores SIGCHLD) leaves the sum.
        """
        ticks = 0
        pending = [root]
        while pending:
            current = pending.pop()
            try:
                ticks += sum(int(field) for field in procfs.stat_fields("/proc/%d/stat" % current)[_CPU_TICKS])
                threads = os.listdir("/proc/%d/task" % current)
            except (OSError, ValueError):
                continue  # ended: reaped, its time is its parent's now
            for tid in threads:
                pending += procfs.children(current, tid)
        self._family_ticks = max(self._family_ticks, ticks)

    def _still_starting(self, child: int, now: float) -> bool:
        """Does what process `child` (under the sampled one) waits still count, by its age?"""
        first_seen = self._starting.get(child)
        if first_seen is None:
            if len(self._starting) >= STARTING_COUNTED:
                return False
            first_seen = self._starting[child] = now
        return now - first_seen < STARTING_S

    def add(self, seconds: float) -> None:
        """Count a wait measured some other way (the harness's own, while it started the runner)."""
        self._also_ns += int(seconds * 1e9)

    @property
    def seconds(self) -> float:
        return (sum(self._waited.values()) + self._also_ns) / 1e9

    @property
    def busy_s(self) -> float:
        """Seconds the sampled processes ran on a CPU: their threads' time (to the ns, but what ended
        between samples is partly missed) or their family's (to the clock tick), the larger."""
        return max(sum(self._ran.values()) / 1e9, self._family_ticks / timing.CLOCK_TICKS)

    def excuse_s(self, elapsed_s: float) -> float:
        """The wait that may excuse lateness over `elapsed_s`: none for a runner that kept the CPUs
        busy itself (see the module's docstring)."""
        return self.seconds if self.busy_s <= SELF_BUSY_S + SELF_BUSY_SHARE * elapsed_s else 0.0


def own_thread_waited() -> float:
    """Seconds the calling thread has waited for a CPU so far (0 where the kernel does not say)."""
    try:
        return _schedstat("/proc/thread-self/schedstat")[1] / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


# The probe computes PROBE_BUSY_S of CPU, then sleeps PROBE_SLEEP_S: a tenth of one CPU, only while
# the last play of an unsettled check runs. Measured on two cores, its wait per second on a CPU
# follows that of a process computing on the same CPUs (0.07 against 3.0 where that process had
# pinned itself to a CPU three others kept busy; 1.8 against 2.0, 4.2 against 3.8 on a machine
# busy for everyone).
PROBE_BUSY_S, PROBE_SLEEP_S = 0.0005, 0.0045
_PROBE_SOURCE = (
    "import time\n"
    "while True:\n"
    "    busy_until = time.thread_time() + %r\n"
    "    while time.thread_time() < busy_until:\n"
    "        pass\n"
    "    time.sleep(%r)\n" % (PROBE_BUSY_S, PROBE_SLEEP_S)
)
# How much of the machine's wait rate, and what more, may excuse a runner's lateness: twice the
# rate over all the CPU its family used, and 0.1 s for the wakes on its way.
MACHINE_MARGIN, MACHINE_WAKES_S = 2.0, 0.1
_PR_SET_PDEATHSIG = 1

_probe: Optional["subprocess.Popen[bytes]"] = None


@contextlib.contextmanager
def probing() -> Iterator[None]:
    """Measure the machine (see the module's docstring) while the block runs: machine_wait_s
    then says how late the machine can have made a runner."""
    global _probe

    def preexec() -> None:
        LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # never outlives the grading

    _probe = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _PROBE_SOURCE],
        stdin=subprocess.DEVNULL,
        # In a session of its own, as a runner is: the scheduler shares a CPU between sessions.
        start_new_session=True,
        preexec_fn=preexec,
    )
    try:
        yield
    finally:
        probe, _probe = _probe, None
        probe.kill()
        probe.wait()


def probe_reading() -> Optional[Tuple[int, int]]:
    """The probe's time on a CPU and its wait so far (ns), or None when nothing is probing."""
    if _probe is None:
        return None
    try:
        return _schedstat("/proc/%d/schedstat" % _probe.pid)
    except (OSError, IndexError, ValueError):
        return None


def machine_wait_s(since: Optional[Tuple[int, int]], busy_s: float) -> Optional[float]:
    """How late a machine as busy as the probe found it since `since` can have made a runner whose
    family used `busy_s` of CPU; None when the machine was not probed (or the probe never ran)."""
    now = probe_reading()
    if since is None or now is None or now[0] <= since[0]:
        return None
    rate = (now[1] - since[1]) / (now[0] - since[0])  # seconds waited per second on a CPU
    return MACHINE_MARGIN * rate * busy_s + MACHINE_WAKES_S

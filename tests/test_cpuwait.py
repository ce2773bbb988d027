"""A busy machine never fails a runner, and never passes one (conformance/harness/cpuwait.py).

The CPU wait is real here: processes pinned to one CPU, each in a session of its own (so the
scheduler's autogroups cannot shield one from the others), must take turns on it.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import psutil
import pytest

from conformance.harness import cpuwait
from conformance.harness.cpuwait import CpuWait
from conformance.harness.result import Result
from conformance.judging import expect
from tests.grading import grade

# The CPU-wait judgement, judged by grading: the same on every interpreter (tox.ini runs it once).
pytestmark = pytest.mark.once

BUSY = [sys.executable, "-c", "while True: pass"]
# The check a self-contending runner is graded on: `run --retries 3 --backoff 5 -- ...exit 0`
# must end within 1.5 s, with no wait after the success.
SUCCESS_CHECK = ["--clause", "S3.4", "-k", "success_ends_the_run_at_once"]


def pinned(argv, cpu: int) -> "subprocess.Popen[bytes]":
    return subprocess.Popen(argv, start_new_session=True, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))


def test_a_process_sharing_its_cpu_is_counted_waiting_and_a_sleeping_one_is_not():
    cpu = min(os.sched_getaffinity(0))
    busy = [pinned(BUSY, cpu) for _ in range(2)]
    sleeper = subprocess.Popen(["sleep", "1"], start_new_session=True)
    waits = {process.pid: CpuWait() for process in busy + [sleeper]}
    try:
        until = time.monotonic() + 0.8
        while time.monotonic() < until:
            for pid, wait in waits.items():
                wait.sample(pid)
            time.sleep(0.01)
    finally:
        for process in busy + [sleeper]:
            process.kill()
            process.wait()
    # Two busy processes on one CPU: each waits about half the time.
    shown = [w.seconds for w in waits.values()]
    assert all(waits[process.pid].seconds > 0.2 for process in busy), shown
    # A sleeper waits only to start and to wake, which a loaded machine makes longer than an idle one.
    assert waits[sleeper.pid].seconds < min(waits[process.pid].seconds for process in busy) / 4, shown
    gone = CpuWait()
    gone.sample(sleeper.pid)  # ended and reaped: nothing to read, nothing counted
    assert gone.seconds == 0


def test_what_a_process_started_waits_counts_until_it_got_going():
    # A sleeping parent whose two children share one CPU: what they wait to get going counts (a
    # command that waits to start), what they wait once each has had STARTING_NS does not (hogs).
    # Judged by when each child got going, not by a share of the total: how long a child takes to
    # get its first STARTING_NS depends on how busy the machine is.
    cpu = min(os.sched_getaffinity(0))
    parent_code = (
        "import os, subprocess, sys, time\n"
        "for _ in range(2):\n"
        "    subprocess.Popen(%r, preexec_fn=lambda: os.sched_setaffinity(0, {%d}))\n"
        "time.sleep(60)\n" % (BUSY, cpu)
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], start_new_session=True)
    alone, below = CpuWait(), CpuWait()

    def sample() -> None:
        alone.sample(parent.pid)
        below.sample(parent.pid, below=True)

    def children_ran_and_waited():
        stats = [
            Path("/proc/%d/schedstat" % child.pid).read_text().split()
            for child in psutil.Process(parent.pid).children()
        ]
        return [int(fields[0]) for fields in stats], sum(int(fields[1]) for fields in stats) / 1e9

    try:
        deadline = time.monotonic() + 60
        ran: list = []
        while not (len(ran) == 2 and min(ran) >= cpuwait.STARTING_NS) and time.monotonic() < deadline:
            sample()
            ran, _ = children_ran_and_waited()
            time.sleep(0.01)
        sample()  # after both got going: the last sample that may still count anything of theirs
        got_going = below.seconds - alone.seconds, children_ran_and_waited()[1]
        until = time.monotonic() + 0.5
        while time.monotonic() < until:
            sample()
            time.sleep(0.01)
        later = below.seconds - alone.seconds, children_ran_and_waited()[1]
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    assert len(ran) == 2 and min(ran) >= cpuwait.STARTING_NS, ran
    # They waited to get going, and that counted.
    assert 0.02 < got_going[0] <= got_going[1] + 0.005, got_going
    # They kept waiting on each other after (two hogs on one CPU), and none of that counted.
    assert later[1] > got_going[1] + 0.1, (got_going, later)
    assert abs(later[0] - got_going[0]) < 0.005, (got_going, later)


def _result(duration_s: float, cpu_wait_s: float, machine_wait_s: Optional[float] = None) -> Result:
    files = {"runs": b"", "applied": [], "markers": [], "work": {}}
    return Result(
        ["run", "--", "true"],
        0,
        None,
        duration_s,
        0.0,
        0.0,
        b"",
        b"",
        [],
        None,  # type: ignore[arg-type]
        lab_files=files,
        cpu_wait_s=cpu_wait_s,
        machine_wait_s=machine_wait_s,
    )


@pytest.mark.parametrize(
    "duration_s,cpu_wait_s,machine_wait_s,verdict",
    [
        (1.0, 0.0, None, None),  # within the bound
        (1.0, 5.0, None, None),  # within it however busy the machine was
        (2.0, 0.6, None, expect.Unsettled),  # 0.5 s late, but 0.6 s waiting for a CPU: judged again
        (2.0, 0.4, None, expect.ClauseFailure),  # later than the wait explains: the runner's own doing
        (0.1, 5.0, None, expect.ClauseFailure),  # too early: a busy machine never makes a runner early
        # The last play, alone, measured the machine too:
        (2.0, 0.6, 0.5, expect.Unsettled),  # the machine can have made it 0.5 s late: not judged
        (2.0, 0.6, 0.3, expect.ClauseFailure),  # it can explain only 0.3 s: the wait was the runner's own
        (1.0, 5.0, 0.0, None),  # and a runner within its bound passes, whatever it measured
    ],
)
def test_a_bound_missed_by_no_more_than_the_cpu_wait_is_unsettled(duration_s, cpu_wait_s, machine_wait_s, verdict):
    result = _result(duration_s, cpu_wait_s, machine_wait_s)
    if verdict is None:
        expect.took_between(result, 0.5, 1.5, "S2.1", "quick")
    else:
        with pytest.raises(verdict) as raised:
            expect.took_between(result, 0.5, 1.5, "S2.1", "quick")
        if verdict is expect.Unsettled:
            assert "S2.1" in str(raised.value) and "0.60s for a CPU" in str(raised.value)
        elif machine_wait_s is not None:
            assert "late by 0.30s at most" in str(raised.value) and "the runner's own" in str(raised.value)


def test_the_machine_is_measured_only_while_a_probe_runs():
    assert cpuwait.probe_reading() is None and cpuwait.machine_wait_s(None, 1.0) is None
    with cpuwait.probing():
        since = cpuwait.probe_reading()
        assert since is not None
        time.sleep(0.3)  # the probe computes a tenth of the time: some ms on a CPU by now
        measured = cpuwait.machine_wait_s(since, 1.0)
        assert measured is not None and measured >= cpuwait.MACHINE_WAKES_S
        probe = cpuwait._probe
    assert cpuwait.probe_reading() is None
    assert probe is not None and probe.returncode is not None  # gone with the block


# A runner on a CPU that others keep busy, in the check's call (the one with --backoff; the
# grading's first basic call runs plainly): before running its command it moves to that CPU and
# computes for 0.6 s of CPU time, so it ends late, by less than it waited. With LINGER it also
# waits after its command succeeds, which no CPU wait can explain. With HOGS it starts the busy
# processes itself, and its own load excuses nothing; with ORPHANS it lets go of them (a double
# fork: they run on as orphans, no longer under the runner).
CONTENDED = """
import os, signal, subprocess, sys, time
args = sys.argv[1:]
if "--backoff" not in args:
    sys.exit(subprocess.call(args[args.index("--") + 1:]))
os.sched_setaffinity(0, {CPU})
hogs = []
for _ in range(HOGS):
    told, tell = os.pipe()
    pid = os.fork()
    if pid == 0:
        if ORPHANS and os.fork():
            os._exit(0)
        os.write(tell, str(os.getpid()).encode())
        while True:
            pass
    if ORPHANS:
        os.waitpid(pid, 0)
    hogs.append(int(os.read(told, 32)))
spent = time.process_time() + 0.6
while time.process_time() < spent:
    pass
for pid in hogs:
    os.kill(pid, signal.SIGKILL)
    if not ORPHANS:
        os.waitpid(pid, 0)
code = subprocess.call(args[args.index("--") + 1:])
time.sleep(LINGER)
sys.exit(code)
"""
CONTENDED_CPU = min(os.sched_getaffinity(0))  # the one conftest's busy_cpu keeps busy

# A runner late by LINGER after its command succeeds, with WAKERS threads on the busy CPU that
# sleep and wake every 10 ms while it runs: they use little CPU, but each wake waits for the CPU,
# and summed over many threads those waits would excuse any lateness.
WAKING = """
import os, subprocess, sys, threading, time
args = sys.argv[1:]
if "--backoff" not in args:
    sys.exit(subprocess.call(args[args.index("--") + 1:]))
os.sched_setaffinity(0, {CPU})
done = threading.Event()
def wake():
    while not done.is_set():
        time.sleep(0.01)
wakers = [threading.Thread(target=wake) for _ in range(WAKERS)]
for waker in wakers:
    waker.start()
code = subprocess.call(args[args.index("--") + 1:])
time.sleep(LINGER)
done.set()
for waker in wakers:
    waker.join()
sys.exit(code)
"""


def contended_runner(tmp_path: Path, linger: float, hogs: int = 0, orphans: bool = False) -> Path:
    runner = tmp_path / ("linger-%g-hogs-%d-%s" % (linger, hogs, orphans)) / "runner.py"
    runner.parent.mkdir()
    source = CONTENDED.replace("LINGER", repr(linger)).replace("HOGS", str(hogs)).replace("ORPHANS", str(orphans))
    runner.write_text(source.replace("CPU", str(CONTENDED_CPU)))
    return runner


def test_a_runner_late_only_by_its_cpu_wait_is_played_again_then_not_judged(tmp_path, busy_cpu):
    # The whole grading on the busy CPU: the machine is as busy for the grader as for the runner.
    graded = grade(tmp_path, contended_runner(tmp_path, 0), *SUCCESS_CHECK, workers=0, cpus={CONTENDED_CPU})
    (check,) = graded.report["tests"]
    # Never a failure: the lateness is the CPU's; never a pass either: it was never on time.
    assert graded.rc == 2 and check["outcome"] == "error", graded.explain()
    assert check["plays"] == 3 and graded.report["timing"]["played_again"] == 1
    assert "not judged" in check["message"] and "for a CPU" in check["message"]
    assert check["not_judged"] is True  # what a class grades again, alone (classroom/batch.py)


# A runner that makes only itself wait: on the busy CPU, it lowers its own share of it to almost
# nothing (its autogroup's nice 19: a weight of 15 against the hogs' 1024 each), then computes for
# 20 ms, which takes it seconds. No load the machine puts on everyone explains a wait like that.
STARVES_ITSELF = """
import os, subprocess, sys, time
args = sys.argv[1:]
if "--backoff" not in args:
    sys.exit(subprocess.call(args[args.index("--") + 1:]))
os.sched_setaffinity(0, {CPU})
with open("/proc/self/autogroup", "w") as autogroup:
    autogroup.write("19")
spent = time.process_time() + 0.02
while time.process_time() < spent:
    pass
sys.exit(subprocess.call(args[args.index("--") + 1:]))
"""


def test_a_runner_that_makes_only_itself_wait_fails_when_played_alone(tmp_path, busy_cpu):
    # Its wait is its own doing, which the last play, alone and with the machine measured, shows.
    runner = tmp_path / "runner.py"
    runner.write_text(STARVES_ITSELF.replace("CPU", str(CONTENDED_CPU)))
    graded = grade(tmp_path, runner, *SUCCESS_CHECK, workers=0)
    (check,) = graded.report["tests"]
    # Never excused as "not judged". A play may already show it later than even its own wait
    # (starved, it also waits off the CPU's queue); if only the last play judges it, that play
    # says the machine cannot explain the wait.
    assert graded.rc == 1 and check["outcome"] == "failed" and "not_judged" not in check, graded.explain()
    # Which play decides, and so its words, varies with the load: the last one may already find it
    # later than even its own wait. The words of the case where only the machine's measure tells
    # (late within its own wait) are unit-tested above (test_a_bound_missed_by_no_more_than...).
    assert "not judged" not in check["message"], check["message"]


def test_a_runner_that_waits_fails_however_long_it_waited_for_a_cpu(tmp_path, busy_cpu):
    graded = grade(tmp_path, contended_runner(tmp_path, 2), *SUCCESS_CHECK, workers=0)
    (check,) = graded.report["tests"]
    assert graded.rc == 1 and check["outcome"] == "failed" and "not_judged" not in check, graded.explain()
    # However often it is played, the verdict is the failure: late, or (on a machine loaded
    # besides) so late that it never ended within the check's bound.
    assert check["clause"] == "S3.4", check["message"]
    assert "no wait after a success" in check["message"] or "finishes by itself" in check["message"], check["message"]


def test_a_runner_cannot_excuse_its_lateness_with_threads_that_wait(tmp_path, busy_cpu):
    runner = tmp_path / "runner.py"
    runner.write_text(WAKING.replace("CPU", str(CONTENDED_CPU)).replace("WAKERS", "60").replace("LINGER", "3"))
    graded = grade(tmp_path, runner, *SUCCESS_CHECK, workers=0)
    (check,) = graded.report["tests"]
    assert graded.rc == 1 and check["outcome"] == "failed", graded.explain()
    assert "no wait after a success" in check["message"]


@pytest.mark.parametrize("orphans", [False, True], ids=["children", "orphans"])
def test_a_runner_late_by_the_load_it_makes_itself_fails(tmp_path, orphans, own_busy_cpu):
    # The same lateness as the first test's, from busy processes the runner started itself: a
    # runner could always do that to be excused, so it is judged by the bound alone. Busy
    # processes it let go of (orphans, which its stand-in adopts) are its own load all the same.
    graded = grade(tmp_path, contended_runner(tmp_path, 0, hogs=3, orphans=orphans), *SUCCESS_CHECK, workers=0)
    (check,) = graded.report["tests"]
    assert graded.rc == 1 and check["outcome"] == "failed" and "not_judged" not in check, graded.explain()
    # Late, or (on a machine loaded besides) so late that it never ended in the check's bound:
    # either is the runner's own failure, charged to the clause.
    assert check["clause"] == "S3.4", check["message"]
    assert "no wait after a success" in check["message"] or "finishes by itself" in check["message"], check["message"]

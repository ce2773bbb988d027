"""Benchmark the reference runner against the floor it is measured by.

    python bench/bench_runner.py [--python EXE] [--runs N]

Prints three figures, each as a median over N runs, inside a private copy of the lab (the
conformance suite's sandbox, so the runner writes its runs.jsonl as in the lab):

* start-up: `runner.py run -- true` against a bare `python -c pass` (goal: at most 1.2x);
* timeout: `runner.py run --timeout 1 -- hang.sh` against GNU `timeout 1 hang.sh` (goal: 1.05x);
* SIGTERM to exit, for a command that exits at once on TERM (goal: at most 100 ms).

Run it as root (it needs a mount namespace); the interpreter is called by its full path, since a
version-manager shim would add tens of milliseconds to every start. The lab's root holds the
interpreter's own folders, as a grading's does. A goal missed is said, not an exit status: exit 0
when every figure was measured, 2 when one could not be (bad input, no mount namespace, a command
that did not end as it should), in one line.
"""

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from oneline import Parser, fail  # this folder's shared parts

from conformance.harness.processes import RUNNER_PATH
from conformance.harness.sandbox import BIN_DIR, NAMESPACE, Lab, probe_namespace
from conformance.plugin import Refused, real_interpreter, reference_runner

HANG = str(BIN_DIR / "hang.sh")


class Unmeasured(Exception):
    """A figure could not be measured (the message says why, in one line)."""


def timed(argv, lab, runs, status=0):
    """Median wall time of `argv` run to completion inside the lab; each run must exit `status`."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            argv, preexec_fn=lab.preexec(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        times.append(time.perf_counter() - started)
        if done.returncode != status:
            raise Unmeasured("%s exited %d, not %d: %s" % (" ".join(argv), done.returncode, status, said(done.stderr)))
    return statistics.median(times)


def said(stderr):
    """The last line a command wrote on stderr, or that it wrote nothing."""
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else "(nothing on stderr)"


def sigterm_to_exit(python, lab, runs):
    """Median time from SIGTERM to the runner's exit (143), its command being a plain `sleep`."""
    times = []
    for _ in range(runs):
        with tempfile.TemporaryFile() as stderr:  # not a pipe: a `sleep` left behind would hold it open
            runner = subprocess.Popen(
                [python, RUNNER_PATH, "run", "--", "sleep", "60"],
                preexec_fn=lab.preexec(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
            try:
                deadline = time.monotonic() + 10
                while runner.poll() is None and not psutil.Process(runner.pid).children():
                    if time.monotonic() > deadline:
                        raise Unmeasured("the runner started no command within 10 s")
                    time.sleep(0.005)
                if runner.returncode is not None:
                    raise Unmeasured("the runner exited %d before its command started" % runner.returncode)
                started = time.perf_counter()
                runner.send_signal(signal.SIGTERM)
                try:
                    runner.wait(timeout=30)
                except subprocess.TimeoutExpired as error:
                    raise Unmeasured("the runner did not exit within 30 s of SIGTERM") from error
                times.append(time.perf_counter() - started)
            finally:
                end(runner)
            stderr.seek(0)
            if runner.returncode != 128 + signal.SIGTERM:
                raise Unmeasured(
                    "the runner exited %d on SIGTERM, not 143: %s" % (runner.returncode, said(stderr.read()))
                )
    return statistics.median(times)


def end(runner):
    """Kill whatever of a runner and its commands is still running (when a figure failed)."""
    try:
        left = psutil.Process(runner.pid).children(recursive=True) if runner.poll() is None else []
    except psutil.Error:
        left = []
    if runner.poll() is None:
        runner.kill()
    for process in left:
        try:
            process.kill()
        except psutil.Error:
            pass
    runner.wait()


def row(what, mine, floor, goal, unit="s"):
    ratio = mine / floor if floor else float("nan")
    verdict = "ok" if ratio <= goal else "over goal"
    print(
        "%-34s %9.4f%s  vs %9.4f%s  = %.2fx (goal <= %.2fx: %s)" % (what, mine, unit, floor, unit, ratio, goal, verdict)
    )


def main():
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter to time (default: this one)")
    parser.add_argument(
        "--runs", type=int, default=20, help="repetitions of the quick figures (default: %(default)s; 1: a short form)"
    )
    options = parser.parse_args()
    if options.runs < 1:
        fail("--runs needs 1 or more")
    try:
        # The executable itself, by its full path: a venv's python or a pyenv shim resolved.
        python = os.path.realpath(real_interpreter(options.python))
    except Refused as error:
        fail("--python: %s" % error)
    source = reference_runner()
    if source is None:
        fail("no bundled reference runner here (runner/runner.py beside the suite)")
    # The lab's root holds the system's folders and the interpreter's own: one outside them (pyenv's
    # in /root, a venv's base) could not be started in a root without them.
    plan, why = probe_namespace(interpreters=[python])
    if plan is None:
        fail("needs a private mount namespace (run as root): %s" % why)
    root = Path(tempfile.mkdtemp(prefix="pyops-bench-"))
    try:
        lab = Lab(root, NAMESPACE, source, plan)
        print("python %s, %d runs each, medians" % (python, options.runs), flush=True)
        bare = timed([python, "-c", "pass"], lab, options.runs)
        start = timed([python, RUNNER_PATH, "run", "--", "true"], lab, options.runs)
        row("start-up: run -- true", start, bare, 1.2)
        # Two seconds a run: a fifth as many, at least three (fewer when fewer runs were asked for).
        slow_runs = min(options.runs, max(3, options.runs // 5))
        gnu = timed(["timeout", "1", HANG], lab, slow_runs, status=124)
        ours = timed([python, RUNNER_PATH, "run", "--timeout", "1", "--", HANG], lab, slow_runs, status=124)
        row("timeout 1 on hang.sh", ours, gnu, 1.05)
        term = sigterm_to_exit(python, lab, options.runs)
        print(
            "%-34s %9.1fms (goal <= 100ms: %s)" % ("SIGTERM to exit", term * 1000, "ok" if term <= 0.1 else "over goal")
        )
    except Unmeasured as error:
        fail(str(error))
    finally:
        shutil.rmtree(str(root), ignore_errors=True)


if __name__ == "__main__":
    main()

"""Benchmark the reference runner against the floor it is measured by.

    python bench/bench_runner.py [--python EXE] [--runs N]

Prints three figures, each as a median over N runs, inside a private copy of the lab (the
conformance suite's sandbox, so the runner writes its runs.jsonl as in the lab):

* start-up: `runner.py run -- true` against a bare `python -c pass` (goal: at most 1.2x);
* timeout: `runner.py run --timeout 1 -- hang.sh` against GNU `timeout 1 hang.sh` (goal: 1.05x);
* SIGTERM to exit, for a command that exits at once on TERM (goal: at most 100 ms).

Run it as root (it needs a mount namespace); the interpreter is called by its full path, since a
version-manager shim would add tens of milliseconds to every start.
"""

import argparse
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

from conformance.harness.processes import RUNNER_PATH
from conformance.harness.sandbox import BIN_DIR, NAMESPACE, Lab, probe_namespace
from conformance.plugin import reference_runner

HANG = str(BIN_DIR / "hang.sh")


def timed(argv, lab, runs):
    """Median wall time of `argv` run to completion inside the lab."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, preexec_fn=lab.preexec(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def sigterm_to_exit(python, lab, runs):
    """Median time from SIGTERM to the runner's exit, its command being a plain `sleep`."""
    times = []
    for _ in range(runs):
        runner = subprocess.Popen(
            [python, RUNNER_PATH, "run", "--", "sleep", "60"],
            preexec_fn=lab.preexec(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not psutil.Process(runner.pid).children() and time.monotonic() < deadline:
            time.sleep(0.005)
        started = time.perf_counter()
        runner.send_signal(signal.SIGTERM)
        runner.wait()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def row(what, mine, floor, goal, unit="s"):
    ratio = mine / floor if floor else float("nan")
    verdict = "ok" if ratio <= goal else "over goal"
    print(
        "%-34s %9.4f%s  vs %9.4f%s  = %.2fx (goal <= %.2fx: %s)" % (what, mine, unit, floor, unit, ratio, goal, verdict)
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter to time (full path)")
    parser.add_argument("--runs", type=int, default=20, help="repetitions of the quick figures")
    options = parser.parse_args()
    plan, why = probe_namespace()
    if plan is None:
        sys.exit("bench_runner: needs a private mount namespace (run as root): %s" % why)
    python = os.path.realpath(shutil.which(options.python) or options.python)
    root = Path(tempfile.mkdtemp(prefix="pyops-bench-"))
    try:
        lab = Lab(root, NAMESPACE, reference_runner(), plan)
        print("python %s, %d runs each, medians" % (python, options.runs))
        bare = timed([python, "-c", "pass"], lab, options.runs)
        start = timed([python, RUNNER_PATH, "run", "--", "true"], lab, options.runs)
        row("start-up: run -- true", start, bare, 1.2)
        slow_runs = max(3, options.runs // 5)
        gnu = timed(["timeout", "1", HANG], lab, slow_runs)
        ours = timed([python, RUNNER_PATH, "run", "--timeout", "1", "--", HANG], lab, slow_runs)
        row("timeout 1 on hang.sh", ours, gnu, 1.05)
        term = sigterm_to_exit(python, lab, options.runs)
        print(
            "%-34s %9.1fms (goal <= 100ms: %s)" % ("SIGTERM to exit", term * 1000, "ok" if term <= 0.1 else "over goal")
        )
    finally:
        shutil.rmtree(str(root), ignore_errors=True)


if __name__ == "__main__":
    main()

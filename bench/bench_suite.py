"""Benchmark the conformance suite: the core profile against the reference, parallel and not.

    python bench/bench_suite.py [--profile core] [--python EXE]

Prints the wall time with the default workers and with one worker, their ratio (goals: at most
20 s, at least 3x faster), and the slowest checks. Run as root on an otherwise idle machine.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def graded(workers, profile, python):
    """Wall time and JSON report of one `python -m conformance` run."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        argv = [
            sys.executable,
            "-m",
            "conformance",
            "--reference",
            "--profile",
            profile,
            "--json",
            str(report),
            "--python",
            python,
        ]
        if workers is not None:
            argv += ["-n", str(workers)]
        started = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        took = time.perf_counter() - started
        if done.returncode != 0:
            sys.exit("bench_suite: the suite failed (exit %d): %s" % (done.returncode, done.stderr.strip()))
        return took, json.loads(report.read_text())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="core", choices=("core", "extended"))
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs the reference")
    options = parser.parse_args()
    parallel, report = graded(None, options.profile, options.python)
    serial, _ = graded(1, options.profile, options.python)
    total = report["summary"]["total"]
    print("%s profile, %d checks, isolation %s" % (options.profile, total, report["isolation"]))
    print("default workers: %6.1fs (goal <= 20s: %s)" % (parallel, "ok" if parallel <= 20 else "over goal"))
    print("one worker:      %6.1fs" % serial)
    ratio = serial / parallel
    print("speed-up:        %6.1fx (goal >= 3x: %s)" % (ratio, "ok" if ratio >= 3 else "under goal"))
    print("slowest checks:")
    for test in sorted(report["tests"], key=lambda t: -t["duration_s"])[:10]:
        print("  %6.2fs  %s" % (test["duration_s"], test["id"]))


if __name__ == "__main__":
    main()

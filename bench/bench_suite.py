"""Benchmark the conformance suite: the core profile against the reference, parallel and not.

    python bench/bench_suite.py [--profile core] [--python EXE] [--clause ID]...

Prints the wall time with the default workers and with one worker, their ratio (goals: at most
20 s, at least 3x faster), and the slowest checks. --clause grades only that clause's checks (a
short form: the goals are the whole profile's). Run as root on an otherwise idle machine. A goal
missed is said, not an exit status: exit 0 when both gradings passed, 2 when one did not (bad
input, or a check the reference failed), in one line.
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from oneline import Parser, fail  # this folder's shared parts


def graded(workers, profile, python, clauses):
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
        for clause in clauses:
            argv += ["--clause", clause]
        started = time.perf_counter()
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        took = time.perf_counter() - started
        if done.returncode == 1 and report.exists():
            failed = [test["id"] for test in json.loads(report.read_text())["tests"] if test["outcome"] != "passed"]
            fail("the reference did not pass %d checks: %s" % (len(failed), ", ".join(failed[:5])))
        if done.returncode != 0:
            # The suite's own last word: a refusal is said on stderr.
            lines = (done.stderr.strip() or done.stdout.strip()).splitlines()
            fail("the suite failed (exit %d): %s" % (done.returncode, lines[-1] if lines else "it said nothing"))
        return took, json.loads(report.read_text())


def main():
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="core", choices=("core", "extended"))
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs the reference")
    parser.add_argument(
        "--clause", action="append", default=[], metavar="ID", help="only this clause's checks (S1, S2.4); repeatable"
    )
    options = parser.parse_args()
    parallel, report = graded(None, options.profile, options.python, options.clause)
    serial, _ = graded(1, options.profile, options.python, options.clause)
    total = report["summary"]["total"]
    only = " (%s only)" % ", ".join(options.clause) if options.clause else ""
    print("%s profile%s, %d checks, isolation %s" % (options.profile, only, total, report["isolation"]))
    print("default workers: %6.1fs (goal <= 20s: %s)" % (parallel, "ok" if parallel <= 20 else "over goal"))
    print("one worker:      %6.1fs" % serial)
    ratio = serial / parallel
    print("speed-up:        %6.1fx (goal >= 3x: %s)" % (ratio, "ok" if ratio >= 3 else "under goal"))
    print("slowest checks:")
    for test in sorted(report["tests"], key=lambda t: -t["duration_s"])[:10]:
        print("  %6.2fs  %s" % (test["duration_s"], test["id"]))


if __name__ == "__main__":
    main()

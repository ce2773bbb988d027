"""Benchmark class grading: a generated class of 24 graded at once against its CPU floor.

    python bench/bench_class.py [-j N] [-n N] [--python EXE] [--size N] [--keep DIR]

The class: the reference, the correct runners of runner/styles and zoo mutants (every clause's kind of
mistake), under student names. Each submission is first graded alone, one after the other, as
`pyops-conformance class` grades one (same call, same configuration): that gives its verdict and
the CPU-seconds of one grading. Then the whole class is graded by `pyops-conformance class` and
graded again with nothing changed; then each submission is graded alone once more, so that the
CPU-seconds of a grading alone are measured both before and after the class (what a process
costs on a machine drifts over minutes; the floor uses the mean of the two). Prints:

* wall time, submissions per minute and CPU-seconds per submission of the class grading;
* the CPU floor, N x (mean CPU-seconds of one grading alone) / cores: the shortest wall time any
  schedule could reach; and the floor's share of the wall time (goal: at least 80%); and how busy
  the class kept the CPU (its own CPU-seconds / (wall x cores));
* the submissions whose verdict (every check's outcome) differs from their grading alone, in the
  class or in the second pass alone (goal: none), and the second run's wall time (goal: under 5 s).

Run as root on an otherwise idle machine (the gradings need mount namespaces); takes about fifteen
minutes on two cores (`--size 1`, the reference alone, is a short form of a minute). Exit status 1
when a goal is missed, 2 when the figures could not be measured (bad input, a grading that failed),
in one line.
"""

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from oneline import Parser, fail  # this folder's shared parts

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the zoo lives with the project's tests, not in the package

from conformance.classroom.command import CHECKS_PER_GRADING  # noqa: E402
from conformance.classroom.grading import grade  # noqa: E402
from conformance.lab.config import DEFAULT_FILE  # noqa: E402
from conformance.selftest.zoo import MUTANTS, build  # noqa: E402

GOOD = sorted((REPO / "runner" / "styles").glob("*_runner.py"))
SHARE_GOAL, RERUN_GOAL_S = 0.80, 5.0

Verdict = Tuple[Tuple[str, str], ...]


def make_class(folder: Path, size: int) -> Dict[str, str]:
    """SIZE submissions in FOLDER/studentNN/runner.py; returns student -> what it is."""
    kinds: List[Tuple[str, str]] = [("reference", (REPO / "runner" / "runner.py").read_text())]
    kinds += [("good " + path.stem, path.read_text()) for path in GOOD]
    wrong = max(0, size - len(kinds))
    for index in range(wrong):  # spread over the zoo, which runs clause by clause
        mutant = MUTANTS[index * len(MUTANTS) // wrong]
        with tempfile.TemporaryDirectory() as scratch:
            kinds.append(("mutant " + mutant.name, build(mutant, Path(scratch)).read_text()))
    students = {}
    for number, (kind, text) in enumerate(kinds[:size], start=1):
        student = "student%02d" % number
        (folder / student).mkdir(parents=True)
        (folder / student / "runner.py").write_text(text)
        students[student] = kind
    return students


def verdict(report: Dict) -> Verdict:
    return tuple(sorted((test["id"], test["outcome"]) for test in report["tests"]))


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def alone(
    submissions: Path, students: Dict[str, str], workers: int, python: Optional[str], label: str
) -> Tuple[Dict[str, Verdict], float]:
    """Each submission graded by itself: its verdict, and the mean CPU-seconds of a grading."""
    config_text = DEFAULT_FILE.read_text(encoding="utf-8")
    verdicts, cpu = {}, []
    for student in sorted(students):
        before = children_cpu()
        runner_text = (submissions / student / "runner.py").read_bytes()
        outcome = grade(runner_text, config_text, workers=workers, python=python)
        cpu.append(children_cpu() - before)
        if outcome["status"] != "graded":
            fail("%s could not be graded alone: %s" % (student, last_line(outcome["message"])))
        verdicts[student] = verdict(outcome["report"])
        print("  %s %s  %5.1fs %5.1f CPU-s  %s" % (label, student, outcome["seconds"], cpu[-1], students[student]))
    return verdicts, sum(cpu) / len(cpu)


def class_run(submissions: Path, out: Path, jobs: List[str]) -> Tuple[float, float]:
    """Wall and CPU-seconds of one `pyops-conformance class` run."""
    argv = [sys.executable, "-m", "conformance", "class", str(submissions), "--out", str(out)] + jobs
    before, started = children_cpu(), time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        fail("the class grading failed (exit %d): %s" % (done.returncode, last_line(done.stdout)))
    return wall, children_cpu() - before


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "(it said nothing)"


def main() -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--jobs", type=int, help="submissions at once (default: the class command's)")
    parser.add_argument(
        "-n",
        "--workers",
        type=int,
        default=CHECKS_PER_GRADING,
        help="checks at once per grading (default: %(default)s)",
    )
    parser.add_argument("--python", help="interpreter that runs the runners (default: the class command's)")
    parser.add_argument("--size", type=int, default=24, help="submissions in the class (default: %(default)s)")
    parser.add_argument("--keep", metavar="DIR", help="keep the class and its results in DIR (must not exist)")
    options = parser.parse_args()
    if options.size < 1:
        fail("--size needs 1 or more")
    if options.jobs is not None and options.jobs < 1:
        fail("-j needs 1 or more")
    if options.workers < 0:
        fail("-n needs 0 (no parallel checks) or more")
    if options.python and not shutil.which(options.python):
        fail("--python: no interpreter %s" % options.python)
    if options.keep and os.path.lexists(options.keep):
        fail("--keep: %s exists already" % options.keep)
    if options.keep and not os.path.isdir(os.path.dirname(os.path.abspath(options.keep))):
        fail("--keep: no folder %s to make it in" % os.path.dirname(os.path.abspath(options.keep)))
    cores = os.cpu_count() or 1
    work = Path(options.keep or tempfile.mkdtemp(prefix="pyops-bench-class-"))
    submissions, out = work / "submissions", work / "out"
    try:
        students = make_class(submissions, options.size)
        print("%d submissions, %d cores; each graded alone first" % (len(students), cores), flush=True)
        expected, cpu_before = alone(submissions, students, options.workers, options.python, "alone before")
        jobs = (["-j", str(options.jobs)] if options.jobs else []) + ["-n", str(options.workers)]
        jobs += ["--python", options.python] if options.python else []
        print("the class, graded at once (%s)" % " ".join(jobs), flush=True)
        wall, cpu = class_run(submissions, out, jobs)
        rerun, _ = class_run(submissions, out, jobs)
        print("each graded alone again, after the class", flush=True)
        again, cpu_after = alone(submissions, students, options.workers, options.python, "alone after")
        differ = [
            "%s (%s)" % (student, students[student])
            for student in sorted(students)
            if verdict(json.loads((out / student / "results.json").read_text())) != expected[student]
            or again[student] != expected[student]
        ]
    finally:
        if not options.keep:
            shutil.rmtree(str(work), ignore_errors=True)
    size = len(students)
    cpu_alone = (cpu_before + cpu_after) / 2
    floor = size * cpu_alone / cores
    share = floor / wall
    print("wall time:           %7.1f s" % wall)
    print("submissions/minute:  %7.1f" % (size * 60 / wall))
    print("CPU-s per submission:%7.1f (alone: %.1f before the class, %.1f after)" % (cpu / size, cpu_before, cpu_after))
    print("CPU floor:           %7.1f s  (%d x %.1f CPU-s / %d cores)" % (floor, size, cpu_alone, cores))
    print("share of the floor:  %7.0f %%  (goal >= %d %%)" % (share * 100, SHARE_GOAL * 100))
    # How busy the class kept the CPU, from its own CPU-seconds: unlike the share, it does not move
    # with the alone baseline, nor with what a grading costs more under load than alone.
    print("CPU in use:          %7.0f %%  (the class's CPU-seconds / (wall x cores))" % (cpu / (wall * cores) * 100))
    print("verdicts unlike alone: %s" % (", ".join(differ) or "none"))
    print("second run:          %7.1f s  (goal < %g s)" % (rerun, RERUN_GOAL_S))
    return 0 if share >= SHARE_GOAL and not differ and rerun < RERUN_GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())

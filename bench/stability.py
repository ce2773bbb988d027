"""Stable verdicts: the same runner graded again and again gets the same verdict, idle or loaded.

    python bench/stability.py [--runs 20] [--s6-runs 20] [--condition idle|loaded|crowded|both]
                              [--wrong] [-- SUITE OPTIONS]

Grades the reference and every correct runner in runner/styles (with --wrong, also three wrong
runners of the zoo) with `pyops-conformance --repeat`: the whole core profile --runs times, then
the SIGTERM step alone (`--clause S6`, where start-up windows once made verdicts vary) --s6-runs
times; first on an idle machine, then while two CPU-bound processes load both cores. `crowded`
grades while --crowd other gradings of the reference run over and over (-n 4 each), the load of a
class graded at once or of the project's own tests, where a check played again waits for its
turn alone on the machine. Prints, per runner, condition and selection, how many distinct
verdicts (sets of failed checks) the rounds gave, and of the last round how many checks did not
pass (failed or not judged; the goal is 1 and 0 everywhere) and how many were played again.
Exits 1 if any verdict varied, 2 when a grading could not be done (bad input, a suite option it
refused), in one line. Options after `--` go to every grading (for example
`-- --isolation chroot --python /usr/bin/python3`, with PYOPS_ROOTS set). A short form:
`--runs 1 --s6-runs 1 --condition idle --only reference`.
"""

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from oneline import Parser, fail  # this folder's shared parts

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance.selftest.zoo import MUTANTS, build  # noqa: E402

WRONG = ("kills-only-the-child", "marker-before-apply-sh", "sigterm-not-forwarded")
SELECTIONS = {"core": [], "S6": ["--clause", "S6"]}
CONDITIONS = {"idle": ["idle"], "loaded": ["loaded"], "crowded": ["crowded"], "both": ["idle", "loaded"]}


class Ungraded(Exception):
    """A grading gave no report (the message says why, in one line)."""


def spin():
    while True:
        pass


def crowd(scratch: Path, count: int, suite_options) -> "list[subprocess.Popen]":
    """`count` gradings of the reference, each started again as soon as it ends, in sessions of their own."""
    grading = [sys.executable, "-m", "conformance", "--runner", str(REPO / "runner" / "runner.py"), "-n", "4"]
    loop = "while :; do %s >/dev/null 2>&1; done" % " ".join(grading + list(suite_options))
    return [subprocess.Popen(["sh", "-c", loop], cwd=str(scratch), start_new_session=True) for _ in range(count)]


def disperse(crowded: "list[subprocess.Popen]") -> None:
    for loop in crowded:
        os.killpg(loop.pid, signal.SIGTERM)  # the loop and its grading, which puts its lab back
    for loop in crowded:
        loop.wait()


def runners(scratch: Path, wrong: bool, only=None):
    """The runners to grade, by name (only `only` when given: it must be one of them)."""
    found = {"reference": REPO / "runner" / "runner.py"}
    found.update((path.stem, path) for path in sorted((REPO / "runner" / "styles").glob("*_runner.py")))
    names = list(found) + (list(WRONG) if wrong else [])
    if only is not None and only not in names:
        also = " (with --wrong: %s)" % ", ".join(WRONG) if not wrong else ""
        fail("--only %s: no such runner; one of %s%s" % (only, ", ".join(names), also))
    if wrong:
        by_name = {mutant.name: mutant for mutant in MUTANTS}
        for name in WRONG:
            if only is None or only == name:
                folder = scratch / name
                folder.mkdir()
                found[name] = build(by_name[name], folder)
    return {name: path for name, path in found.items() if only is None or name == only}


def repeated(runner: Path, rounds: int, selection, scratch: Path, suite_options=()):
    """Grade `runner` `rounds` times: (distinct verdicts, and of the last round the checks not passed and
    played again; the checks that varied)."""
    report, said = scratch / "report.json", scratch / "grading.err"
    if report.exists():
        report.unlink()  # an earlier grading's is no verdict of this one
    argv = [sys.executable, "-m", "conformance", "--runner", str(runner), "--json", str(report)] + list(suite_options)
    with open(str(said), "w+") as stderr:
        try:
            done = subprocess.run(
                argv + ["--repeat", str(rounds)] + selection,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                timeout=7200,
            )
        except subprocess.TimeoutExpired as error:
            raise Ungraded("the grading took over %d s" % error.timeout) from error
        stderr.seek(0)
        lines = stderr.read().strip().splitlines()
    if not report.exists():
        why = lines[-1] if lines else "it said nothing"
        raise Ungraded("the grading wrote no report (exit %d): %s" % (done.returncode, why))
    data = json.loads(report.read_text())
    varied = data["repeat"]["varied"] if rounds > 1 else []
    # A round's verdict is the steady failures plus its own outcomes of the checks that varied.
    verdicts = {tuple(entry["outcomes"][number] for entry in varied) for number in range(rounds)}
    failed = sum(test["outcome"] != "passed" for test in data["tests"])
    return len(verdicts), failed, data["timing"].get("played_again", 0), varied


def main():
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="rounds of the whole core profile per runner")
    parser.add_argument("--s6-runs", type=int, default=20, help="rounds of --clause S6 per runner")
    parser.add_argument("--condition", choices=sorted(CONDITIONS), default="both")
    parser.add_argument("--crowd", type=int, default=3, help="other gradings at once when crowded (default 3)")
    parser.add_argument("--only", help="grade this runner only (reference, a runner/styles stem, or a --wrong one)")
    parser.add_argument("--wrong", action="store_true", help="also grade three wrong runners of the zoo")
    parser.add_argument("suite_options", nargs="*", help="after --: options for every grading")
    options = parser.parse_args()
    if options.runs < 0 or options.s6_runs < 0:
        fail("--runs and --s6-runs need 0 (none) or more")
    if options.runs + options.s6_runs == 0:
        fail("--runs and --s6-runs are both 0: nothing to grade")
    if options.crowd < 1 and options.condition == "crowded":
        fail("--crowd needs 1 or more")
    scratch = Path(tempfile.mkdtemp(prefix="pyops-stability-"))
    try:
        any_varied = measure(options, scratch)
    except Ungraded as error:
        fail(str(error))
    finally:
        shutil.rmtree(str(scratch), ignore_errors=True)
    sys.exit(1 if any_varied else 0)


def measure(options, scratch: Path) -> bool:
    """Grade and print every line; whether any verdict varied."""
    graded = runners(scratch, options.wrong, options.only)
    conditions = CONDITIONS[options.condition]
    print(
        "%-8s %-26s %-5s %6s %9s %8s %7s  %s"
        % ("machine", "runner", "what", "rounds", "verdicts", "failed", "again", "time"),
        flush=True,
    )
    any_varied = False
    for condition in conditions:
        load = [multiprocessing.Process(target=spin, daemon=True) for _ in range(2 if condition == "loaded" else 0)]
        for process in load:
            process.start()
        crowded = crowd(scratch, options.crowd, options.suite_options) if condition == "crowded" else []
        try:
            for name, runner in graded.items():
                for selection, rounds in (("core", options.runs), ("S6", options.s6_runs)):
                    if rounds < 1:
                        continue
                    began = time.monotonic()
                    try:
                        distinct, failed, again, varied = repeated(
                            runner, rounds, SELECTIONS[selection], scratch, options.suite_options
                        )
                    except Ungraded as error:
                        raise Ungraded("%s, %s, %s: %s" % (condition, name, selection, error)) from error
                    print(
                        "%-8s %-26s %-5s %6d %9d %8d %7d  %.0fs"
                        % (condition, name, selection, rounds, distinct, failed, again, time.monotonic() - began),
                        flush=True,
                    )
                    for entry in varied:
                        any_varied = True
                        print("    varied: %s %s" % (entry["id"].split("::")[-1], entry["outcomes"]), flush=True)
        finally:
            for process in load:
                process.terminate()
            disperse(crowded)
    return any_varied


if __name__ == "__main__":
    main()

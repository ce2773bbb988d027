"""Run the conformance suite on a runner as a user would (a subprocess), and read its report."""

import csv
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Set

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "runner" / "runner.py"
GOOD = sorted((REPO / "runner" / "styles").glob("*_runner.py"))
# Generous: a whole profile takes well under a minute; more than this is a hang.
SUITE_TIMEOUT_S = 300


@dataclass
class Grading:
    rc: int
    stdout: str
    stderr: str
    report: Optional[Dict]

    def __repr__(self) -> str:
        return "<Grading exit %d, %s>" % (self.rc, (self.report or {}).get("summary", "no report"))

    def failed(self) -> List[Dict]:
        return [t for t in (self.report or {}).get("tests", []) if t["outcome"] == "failed"]

    def explain(self) -> str:
        """What to show when an assertion about this grading fails: the first failures in full."""
        summary = (self.report or {}).get("summary")
        failures = "\n\n".join("%s [%s]:\n%s" % (t["id"], t["clause"], t["message"]) for t in self.failed()[:3])
        return "exit %d, summary %s\n%s\n--- stdout tail ---\n%s\n--- stderr tail ---\n%s" % (
            self.rc,
            summary,
            failures,
            self.stdout[-3000:],
            self.stderr[-2000:],
        )


def grade(
    tmp_path: Path,
    runner: Optional[Path] = None,
    *options: str,
    workers: int = 4,
    env: Optional[Dict] = None,
    suite_python: str = sys.executable,
    cpus: Optional[Set[int]] = None,
) -> Grading:
    """`python -m conformance [--runner RUNNER] OPTIONS --json ... -n WORKERS`, on `cpus` only if given."""
    report = tmp_path / "report.json"
    argv = [suite_python, "-m", "conformance", "--json", str(report), "-n", str(workers)]
    argv += ["--runner", str(runner)] if runner is not None else ["--reference"]
    done = subprocess.run(
        argv + list(options),
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT_S,
        cwd=str(tmp_path),
        env=env,
        preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
    )
    data = json.loads(report.read_text()) if report.exists() else None
    return Grading(done.returncode, done.stdout, done.stderr, data)


def submissions(folder: Path, runners: Dict[str, Path]) -> Path:
    """A class's SUBMISSIONS folder: STUDENT/runner.py, a copy of each runner, per student."""
    for student, runner in runners.items():
        (folder / student).mkdir(parents=True)
        (folder / student / "runner.py").write_bytes(runner.read_bytes())
    return folder


def class_command(*args: str) -> List[str]:
    """`python -m conformance class ARGS`: a whole class graded (conformance/classroom)."""
    return [sys.executable, "-m", "conformance", "class", *args]


def cpu_spent_s() -> float:
    """CPU seconds spent so far by this process and its ended children (and the children they
    waited for).

    The difference over a command is what it cost, the same on an idle machine and a busy one: a
    bound on its wall time would measure the machine's load as much as the command.
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + usage.ru_utime + usage.ru_stime


def not_passed(out: Path, student: str) -> str:
    """What a student's grading did not pass, each check with its message: why a grade is short."""
    report = out / student / "results.json"
    if not report.exists():
        return "no results.json for %s" % student
    tests = json.loads(report.read_text(encoding="utf-8"))["tests"]
    return "\n".join("%s %s: %s" % (t["outcome"], t["id"], t["message"]) for t in tests if t["outcome"] != "passed")


def class_rows(out: Path) -> Dict[str, Dict[str, str]]:
    """A class folder's grades.csv, by student."""
    with open(str(out / "grades.csv"), newline="") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}

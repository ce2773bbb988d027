"""Load as a test: correct runners graded on a machine kept busy by processes outside the grading.

Four CPU-bound processes per CPU, a scanner that reads every process's /proc files over and over
(as monitoring agents and other graders do) and a disk writer that syncs run for the whole test.
Under them the reference is graded alone, then every correct runner (the reference and each style
of runner/styles) as a class with `class`'s default -j. No check may fail: a busy machine may make
a check be played again, or at worst leave it not judged (an error, never a failure). What was
played again or left not judged is written to the artifacts folder ($PYOPS_ARTIFACTS, when set)
as load.json: docs/benchmarks.md quotes it.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.selftest.zoo import CORRECT
from tests.grading import REFERENCE, grade

pytestmark = [pytest.mark.load, pytest.mark.slow(400)]

HOGS_PER_CPU = 4
SPIN = "while True:\n    pass\n"
SCAN = (
    "import os\n"
    "while True:\n"
    "    for name in os.listdir('/proc'):\n"
    "        for part in ('stat', 'status', 'cmdline'):\n"
    "            try:\n"
    "                with open('/proc/%s/%s' % (name, part), 'rb') as handle:\n"
    "                    handle.read()\n"
    "            except OSError:\n"
    "                pass\n"
)
WRITE = (
    "import os, sys\n"
    "block = b'x' * (1 << 20)\n"
    "while True:\n"
    "    with open(sys.argv[1], 'wb') as handle:\n"
    "        for _ in range(64):\n"
    "            handle.write(block)\n"
    "        handle.flush()\n"
    "        os.fsync(handle.fileno())\n"
)


@pytest.fixture
def busy_machine(tmp_path):
    """Processes that keep the machine at HOGS_PER_CPU times its CPUs, scan /proc and write to disk."""
    cpus = len(os.sched_getaffinity(0))
    programs = [[sys.executable, "-c", SPIN]] * (HOGS_PER_CPU * cpus)
    programs += [[sys.executable, "-c", SCAN], [sys.executable, "-c", WRITE, str(tmp_path / "written")]]
    load = [subprocess.Popen(argv, start_new_session=True) for argv in programs]
    time.sleep(1)  # running before the grading starts
    try:
        yield len(load)
    finally:
        for process in load:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _record(name: str, figures: dict) -> None:
    folder = os.environ.get("PYOPS_ARTIFACTS")
    if not folder:
        return
    path = Path(folder) / "load.json"
    kept = json.loads(path.read_text()) if path.exists() else {}
    kept[name] = figures
    path.write_text(json.dumps(kept, indent=2, sort_keys=True) + "\n")


def _problems(report: dict) -> list:
    return ["%s: %s" % (test["id"], test["outcome"]) for test in report["tests"] if test["outcome"] != "passed"]


def test_the_reference_graded_alone_on_a_busy_machine_fails_nothing(tmp_path, busy_machine):
    started = time.monotonic()
    graded = grade(tmp_path, REFERENCE)
    report = graded.report
    assert report is not None, graded.explain()
    failed = [test["id"] for test in report["tests"] if test["outcome"] == "failed"]
    not_judged = [test["id"] for test in report["tests"] if test.get("not_judged")]
    _record(
        "alone",
        {
            "load processes": busy_machine,
            "checks": report["summary"]["total"],
            "failed": len(failed),
            "not judged": len(not_judged),
            "played again": report["timing"]["played_again"],
            "seconds": round(time.monotonic() - started, 1),
        },
    )
    assert not failed, graded.explain()


def test_every_correct_runner_graded_as_a_class_on_a_busy_machine_fails_nothing(tmp_path, busy_machine):
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    for runner in CORRECT:
        (submissions / (runner.stem.replace("_", "-") + ".py")).write_bytes(runner.read_bytes())
    out = tmp_path / "class"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "class", str(submissions), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=3000,
        cwd=str(tmp_path),
    )
    reports = {
        path.parent.name: json.loads(path.read_text(encoding="utf-8")) for path in sorted(out.glob("*/results.json"))
    }
    assert len(reports) == len(CORRECT), (done.returncode, done.stdout[-3000:], done.stderr[-3000:])
    failed = {
        student: [test["id"] for test in report["tests"] if test["outcome"] == "failed"]
        for student, report in reports.items()
    }
    _record(
        "class",
        {
            "load processes": busy_machine,
            "runners": len(reports),
            "checks": sum(report["summary"]["total"] for report in reports.values()),
            "failed": sum(len(ids) for ids in failed.values()),
            "not judged": sum(1 for report in reports.values() for test in report["tests"] if test.get("not_judged")),
            "played again": sum(report["timing"]["played_again"] for report in reports.values()),
            "seconds": round(time.monotonic() - started, 1),
        },
    )
    assert not any(failed.values()), failed

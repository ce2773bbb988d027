"""Observe once, judge many: checks that need the same scenario judge one run of the runner."""

import json
import os
from collections import Counter

import pytest

from conformance.harness.result import WORK_FILE_LIMIT, small_files
from conformance.judging.blocking import BASIC_NAME, TRACE
from tests.grading import GOOD, grade

# Scenarios shared between checks, judged by grading: the same on every interpreter (tox.ini runs it once).
pytestmark = pytest.mark.once

# A correct runner that first notes how it was called, where the test can read it (its uid
# cannot reach the test's tmp_path).
NOTE_THE_CALL = (
    "import json as _json, sys as _sys\n"
    "with open(%r, 'a') as _log:\n"
    "    _log.write(_json.dumps(_sys.argv[1:]) + '\\n')\n"
)


def noting_runner(tmp_path, drop_box, good: str):
    """The good runner named `good`, made to note every call in a file the test reads: (runner, calls)."""
    calls = drop_box / "calls"
    calls.touch()
    calls.chmod(0o666)
    runner = tmp_path / "runner.py"
    base = next(path for path in GOOD if path.name == good)
    runner.write_text(NOTE_THE_CALL % str(calls) + base.read_text())
    return runner, calls


def test_a_scenario_is_played_once_per_grading_whatever_the_workers(tmp_path, drop_box):
    runner, calls = noting_runner(tmp_path, drop_box, "int_timeout_runner.py")
    # Three workers: a scenario one worker played is judged by checks that run on the others.
    clauses = ["S2", "S3.3", "S4.3", "S5.1", "S5.2", "S7.3"]
    graded = grade(tmp_path, runner, *["--clause=%s" % clause for clause in clauses], workers=3)
    assert graded.rc == 0, graded.explain()
    runs = Counter(tuple(json.loads(line)) for line in calls.read_text().splitlines())
    hang = ("run", "--timeout", "1", "--", "/opt/fixtures/pyops/bin/hang.sh")
    retried = [call for call in runs if call[:6] == ("run", "--timeout", "1", "--retries", "1", "--backoff")]
    # S2.1, S2.2, S2.3, S2.4 and S7.3 judge one timed-out hang.sh; S3.3 and S7.3 one retried one;
    # S4.3, S5.1 and S5.2 one apply in progress (the first runner, then two refused ones).
    assert runs[hang] == 1, runs
    assert runs[("run", "--timeout", "1", "--", "sleep", "60")] == 1, runs
    assert [runs[call] for call in retried] == [1], runs
    assert runs[("apply", "first")] == 2 and runs[("apply", "second")] == 1, runs
    # The basic calls that tell a blocked check (blocking.py) are made once, not once a worker.
    basic_runs = sum(count for call, count in runs.items() if any(TRACE in word for word in call))
    assert runs[("apply", BASIC_NAME)] == 1 and basic_runs == 1, runs
    checks = {test["id"].split("::")[-1] for test in graded.report["tests"]}
    assert {
        "test_s2_1_killed_once_the_timeout_passes[hang.sh]",
        "test_s7_3_timed_out_attempt_is_recorded_with_124",
    } <= checks
    assert sum(runs.values()) < len(checks), "fewer runs than checks: checks judge scenarios others played"


def test_an_observation_keeps_small_plain_files_of_the_work_folder_and_follows_no_link(tmp_path):
    # The work folder is the runner's to write: a link to a secret, a FIFO that would block the
    # reader, or a flood of data must neither be read nor make the grader wait or swell.
    (tmp_path / "calls").write_bytes(b"1.5\n2.5\n")
    (tmp_path / "flood").write_bytes(b"x" * (WORK_FILE_LIMIT + 1))
    (tmp_path / "secret").symlink_to("/etc/shadow")
    os.mkfifo(str(tmp_path / "fifo"))
    (tmp_path / "tmp").mkdir()
    assert small_files(tmp_path) == {"calls": b"1.5\n2.5\n"}


def test_the_longest_scenario_is_played_ahead_once_and_counted_in_the_timing(tmp_path, drop_box):
    runner, calls = noting_runner(tmp_path, drop_box, "timer_runner.py")
    graded = grade(tmp_path, runner, "--clause", "S3.2", workers=2)
    assert graded.rc == 0, graded.explain()
    runs = Counter(tuple(json.loads(line))[:5] for line in calls.read_text().splitlines())
    # One 1-2-4 s schedule for the three checks that judge it, played on the grading's own
    # process (namespace mode); its 7 s of forced waits are in the report's timing like any call.
    assert runs[("run", "--retries", "3", "--backoff", "1")] == 1, runs
    assert graded.report["isolation"] == "namespace"
    assert graded.report["timing"]["forced_wait_s"] >= 7, graded.report["timing"]

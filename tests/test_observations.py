"""Observe once, judge many: checks that need the same scenario judge one run of the runner."""

import json
import os
from collections import Counter

from conformance.result import WORK_FILE_LIMIT, small_files
from tests.grading import GOOD, grade

# A correct runner that first notes how it was called, where the test can read it (its uid
# cannot reach the test's tmp_path).
NOTE_THE_CALL = (
    "import json as _json, sys as _sys\n"
    "with open(%r, 'a') as _log:\n"
    "    _log.write(_json.dumps(_sys.argv[1:]) + '\\n')\n"
)


def test_a_scenario_is_run_once_and_judged_by_every_check_that_needs_it(tmp_path, drop_box):
    calls = drop_box / "calls"
    calls.touch()
    calls.chmod(0o666)
    runner = tmp_path / "runner.py"
    base = next(path for path in GOOD if path.name == "int_timeout_runner.py")
    runner.write_text(NOTE_THE_CALL % str(calls) + base.read_text())
    # One process (-n 0): every check sees the others' observations. (S2.1 watches its own runs
    # live, to time the kill from the command's start.)
    clauses = ["--clause=S2.2", "--clause=S2.3", "--clause=S2.4", "--clause=S7.3"]
    graded = grade(tmp_path, runner, *clauses, workers=0)
    assert graded.rc == 0, graded.explain()
    runs = Counter(tuple(json.loads(line)) for line in calls.read_text().splitlines())
    hang = next(call for call in runs if call[-1].endswith("/hang.sh") and call[:3] == ("run", "--timeout", "1"))
    # S2.2, S2.3 (twice), S2.4 and S7.3 judge the timed-out hang.sh; S2.3, S2.4 and S7.3 a timed-out sleep.
    assert runs[hang] == 1, runs
    assert runs[("run", "--timeout", "1", "--", "sleep", "60")] == 1, runs
    checks = {test["id"].split("::")[-1] for test in graded.report["tests"]}
    assert {"test_s2_3_timeout_exits_124[hang.sh]", "test_s7_3_timed_out_attempt_is_recorded_with_124"} <= checks
    assert sum(runs.values()) < len(checks), "fewer runs than checks, or nothing was shared"


def test_an_observation_keeps_small_plain_files_of_the_work_folder_and_follows_no_link(tmp_path):
    # The work folder is the runner's to write: a link to a secret, a FIFO that would block the
    # reader, or a flood of data must neither be read nor make the grader wait or swell.
    (tmp_path / "calls").write_bytes(b"1.5\n2.5\n")
    (tmp_path / "flood").write_bytes(b"x" * (WORK_FILE_LIMIT + 1))
    (tmp_path / "secret").symlink_to("/etc/shadow")
    os.mkfifo(str(tmp_path / "fifo"))
    (tmp_path / "tmp").mkdir()
    assert small_files(tmp_path) == {"calls": b"1.5\n2.5\n"}

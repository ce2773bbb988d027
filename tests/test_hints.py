"""A hint says what the grader's evidence shows the runner did, not the usual cause of a symptom."""

from conformance.judging import expect
from tests.grading import REFERENCE, grade

# After SIGTERM it logs the attempt (143), then runs the command again: its retries do not stop.
# Under S6.3's retries the command hangs again, so the runner never ends, as one that waits for a
# process that outlived its signal would; here the process it waits for started after the signal.
RETRIES_AFTER_SIGTERM = (
    (
        "        if wakeup.signum is not None:\n            break\n        rc = attempt(",
        "        wakeup.signum = None\n        rc = attempt(",
    ),
    (
        "        if rc == 0 or wakeup.signum is not None:\n            break\n        if number < attempts:",
        "        if rc == 0:\n            break\n        if number < attempts:",
    ),
    ("            if wakeup.sleep(delay):\n                break\n", "            wakeup.sleep(delay)\n"),
)


def test_a_runner_that_runs_its_command_again_after_sigterm_is_told_so(tmp_path):
    source = REFERENCE.read_text()
    for before, after in RETRIES_AFTER_SIGTERM:
        assert source.count(before) == 1, before
        source = source.replace(before, after)
    runner = tmp_path / "runner.py"
    runner.write_text(source)
    graded = grade(tmp_path, runner, "--clause", "S6.3", "-k", "retries_left", workers=2)
    assert graded.rc == 1, graded.explain()
    (failure,) = graded.failed()
    assert failure["clause"] == "S6.3", failure
    said = expect._HUNG_WORDS["en"]["again"].split("%s")[0]
    assert said in failure["message"], failure["message"]
    assert "communicate()" not in failure["message"], failure["message"]

"""S2: `--timeout S` kills the whole command after S seconds, says `timeout`, exits 124."""

import pytest

from conformance import expect, timing
from conformance.commands import HANG, py, sh

clause = pytest.mark.clause

# Commands that outlive a one-second timeout, each hard to kill in its own way.
NEVER_ENDING = {
    "hang.sh": [HANG],
    "sleep": ["sleep", "60"],
    "ignores-TERM": py("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"),
    "background-child": sh("sleep 60 & sleep 60"),
    "deep-tree": sh("sh -c 'sh -c \"sleep 60\"' & wait"),
}


def timed_out(runner, name, seconds="1"):
    """One timed-out run of NEVER_ENDING[name], observed once and judged by S2.2, S2.3 and S2.4."""
    return runner.observe("run", "--timeout", seconds, "--", *NEVER_ENDING[name], expect_s=float(seconds))


@clause("S2.1")
@pytest.mark.parametrize("name", ["hang.sh", "sleep", "ignores-TERM"])
def test_s2_1_killed_once_the_timeout_passes(runner, name):
    command = NEVER_ENDING[name]
    invocation = runner.start("run", "--timeout", "1", "--", *command, expect_s=1)
    started = invocation.command_started(command, "S2.1")
    expect.killed_after(invocation.finish(), started, 1, "S2.1")


@clause("S2.1")
def test_s2_1_a_command_within_the_timeout_is_not_killed(runner):
    result = runner.run("run", "--timeout", "3", "--", *sh("sleep 1; echo finished"), expect_s=1)
    expect.exit_code(result, 0, "S2.1")
    expect.stdout_is(result, b"finished\n", "S2.1")


@clause("S2.1")
def test_s2_1_a_quick_command_does_not_wait_for_the_timeout(runner):
    result = runner.run("run", "--timeout", "5", "--", "true")
    expect.exit_code(result, 0, "S2.1")
    expect.took_between(result, 0, timing.OVERHEAD_S, "S2.1", "done as soon as the command is")


@clause("S2.2")
@pytest.mark.parametrize("name", ["hang.sh", "sleep"])
def test_s2_2_timeout_is_said_on_stderr(runner, name):
    result = timed_out(runner, name)
    expect.finished(result, "S2.2")
    lines = [line for line in result.err.splitlines() if "timeout" in line]
    expect.that(lines, "S2.2", "a stderr line containing 'timeout'", "no such line", result)


@clause("S2.2")
def test_s2_2_timeout_line_is_not_on_stdout(runner):
    result = timed_out(runner, "sleep")
    expect.finished(result, "S2.2")
    expect.that(
        "timeout" not in result.out,
        "S2.2",
        "the timeout line on stderr, stdout untouched",
        "stdout says %r" % result.out,
        result,
    )


@clause("S2.3")
@pytest.mark.parametrize("name", sorted(NEVER_ENDING))
def test_s2_3_timeout_exits_124(runner, name):
    expect.exit_code(timed_out(runner, name), 124, "S2.3")


@clause("S2.3")
def test_s2_3_output_before_the_timeout_still_passes(runner):
    result = timed_out(runner, "hang.sh")
    expect.exit_code(result, 124, "S2.3")
    expect.stdout_has(result, "hang.sh: started", "S1.2")


@clause("S2.3")
def test_s2_3_a_command_exiting_124_itself_is_not_a_special_case(runner):
    # 124 from the command passes through like any code (S1.3); no timeout line is needed for it.
    result = runner.run("run", "--timeout", "5", "--", *sh("exit 124"))
    expect.exit_code(result, 124, "S2.3")
    expect.took_between(result, 0, timing.OVERHEAD_S, "S2.3", "no waiting for the timeout")


@clause("S2.4")
@pytest.mark.parametrize("name", sorted(NEVER_ENDING))
def test_s2_4_nothing_of_the_command_survives(runner, name):
    result = timed_out(runner, name)
    expect.finished(result, "S2.4")
    expect.no_survivors(result, "S2.4")


@clause("S2.4")
def test_s2_4_hang_sh_grandchild_sleep_is_killed(runner):
    invocation = runner.start("run", "--timeout", "2", "--", HANG, expect_s=2)
    invocation.wait_for_descendant(["sleep", "60"], "S2.4")
    result = invocation.finish()
    expect.exit_code(result, 124, "S2.3")
    expect.no_survivors(result, "S2.4")


@clause("S2.4")
def test_s2_4_python_child_with_grandchildren(runner):
    command = py(
        "import subprocess, time; subprocess.Popen(['sleep', '60']); subprocess.Popen(['sleep', '61']); time.sleep(60)"
    )
    result = runner.run("run", "--timeout", "1", "--", *command, expect_s=1)
    expect.exit_code(result, 124, "S2.3")
    expect.no_survivors(result, "S2.4")

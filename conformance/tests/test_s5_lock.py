"""S5: apply holds flock(LOCK_EX | LOCK_NB) on state/lock; a second run gets exit 3 at once."""

import pytest

from conformance import expect, timing

clause = pytest.mark.clause
LOCKED = expect.LOCKED


@clause("S5.2")
@pytest.mark.parametrize("shared", [False, True], ids=["exclusive-holder", "shared-holder"])
def test_s5_2_held_lock_exits_3(runner, shared):
    runner.hold_lock(shared=shared)
    expect.refused_by_lock(runner.run("apply", "feature"), shared)


@clause("S5.2")
@pytest.mark.parametrize("shared", [False, True], ids=["exclusive-holder", "shared-holder"])
def test_s5_2_held_lock_changes_nothing(runner, shared):
    runner.hold_lock(shared=shared)
    result = runner.run("apply", "feature")
    expect.finished(result, "S5.2")
    expect.that(result.applied() == [], "S5.2", "apply.sh not called", "applied.log: %s" % result.applied(), result)
    expect.that(result.markers() == [], "S5.2", "no marker", "markers: %s" % result.markers(), result)


@clause("S5.2")
def test_s5_2_held_lock_message_is_not_on_stdout(runner):
    runner.hold_lock()
    result = runner.run("apply", "feature")
    expect.finished(result, "S5.2")
    expect.that(LOCKED not in result.out, "S5.2", "the message on stderr only", "stdout %r" % result.out, result)


@clause("S5.2")
@pytest.mark.parametrize("names", [("first", "second"), ("same", "same")], ids=["other-name", "same-name"])
def test_s5_2_second_runner_while_the_first_applies(runner, names):
    first_name, second_name = names
    first = runner.start("apply", first_name, env={"APPLY_DELAY": "3"}, expect_s=3)
    first.wait_until(lambda: runner.lab.applied_log.exists(), "apply.sh started by the first runner", "S4.2")
    second = runner.run("apply", second_name)
    done = first.finish()
    expect.refused_by_lock(second, shared_holder=False)
    expect.exit_code(done, 0, "S5.1")
    expect.that(
        done.applied() == [first_name],
        "S5.2",
        "apply.sh called by the first runner only",
        "applied.log: %s" % done.applied(),
        second,
    )


@clause("S5.2")
def test_s5_2_refusal_is_quick_not_a_wait(runner):
    runner.hold_lock()
    result = runner.run("apply", "feature")
    expect.refused_by_lock(result, shared_holder=False)
    expect.took_between(result, 0, timing.OVERHEAD_S, "S5.2", "an immediate refusal (LOCK_NB), not a wait")


@clause("S5.2")
def test_s5_2_marker_present_and_lock_held(runner):
    # Settled: `already applied` with 0 and a refusal with 3 both conform.
    runner.put_marker("feature")
    runner.hold_lock()
    result = runner.run("apply", "feature")
    expect.exit_code_in(result, (0, 3), "S5.2")
    expect.that(result.applied() == [], "S5.2", "apply.sh not called", "applied.log: %s" % result.applied(), result)


@clause("S5.1")
def test_s5_1_lock_held_while_apply_sh_runs(runner):
    invocation = runner.start("apply", "slow", env={"APPLY_DELAY": "2"}, expect_s=2)
    invocation.wait_until(lambda: runner.lab.applied_log.exists(), "apply.sh started", "S4.2")
    free = runner.lock_is_free()
    result = invocation.finish()
    expect.that(
        not free,
        "S5.1",
        "state/lock locked (LOCK_EX) while apply.sh runs",
        "another process could take LOCK_EX on state/lock meanwhile",
        result,
    )
    expect.exit_code(result, 0, "S5.1")


@clause("S5.1")
def test_s5_1_lock_file_is_state_lock(runner):
    result = runner.run("apply", "feature")
    expect.exit_code(result, 0, "S5.1")
    expect.that(
        (runner.lab.state / "lock").exists(),
        "S5.1",
        "the lock file /root/pyops/sub/state/lock",
        "no state/lock after an apply",
        result,
    )


@clause("S5.1")
@pytest.mark.parametrize("env", [{}, {"APPLY_FAIL": "1"}], ids=["after-success", "after-failure"])
def test_s5_1_lock_released_after_exit(runner, env):
    result = runner.run("apply", "feature", env=env)
    expect.finished(result, "S5.1")
    expect.that(
        runner.lock_is_free(),
        "S5.1",
        "state/lock free once the runner has exited",
        "still locked: a process the runner left holds it",
        result,
    )
    again = runner.run("apply", "other")
    expect.exit_code(again, 0, "S5.1")

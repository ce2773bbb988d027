"""S3: `--retries N --backoff S` retries a failure up to N times, waiting S * 2**(k-1) before retry k."""

import pytest

from conformance.judging import expect, scenarios
from conformance.judging.scenarios import backoff_schedule, calls, hang_retried
from conformance.lab import draws, timing
from conformance.lab.commands import FLAKY, counted, flaky_calls, sh

clause = pytest.mark.clause
slow = pytest.mark.slow
judges = pytest.mark.judges


def counter(runner):
    return runner.lab.counter


@clause("S3.1")
@pytest.mark.parametrize("retries", [0, 1, 2, 3])
def test_s3_1_a_failure_is_retried_exactly_n_times(runner, retries):
    result = runner.run("run", "--retries", str(retries), "--backoff", "0", "--", *counted(counter(runner)))
    expect.finished(result, "S3.1")
    expect.count_is(
        result,
        expect.say("attempts (1 + retries)", "試行回数(1 + retries)"),
        len(calls(result, "S3.1")),
        retries + 1,
        "S3.1",
    )


@clause("S3.1")
def test_s3_1_flaky_succeeds_on_its_third_call(runner):
    result = runner.run("run", "--retries", "2", "--backoff", "0", "--", FLAKY)
    expect.exit_code(result, 0, "S3.1")
    expect.count_is(result, expect.say("flaky.sh calls", "flaky.sh の呼び出し回数"), flaky_calls(result), 3, "S3.1")
    expect.stdout_has(result, "succeeded", "S1.2")


@clause("S3.1")
def test_s3_1_retries_apply_to_any_nonzero_code(runner):
    result = scenarios.retried_twice(runner)
    expect.exit_code(result, 42, "S3.5")
    expect.count_is(result, expect.say("attempts", "試行回数"), len(calls(result, "S3.1")), 3, "S3.1")


@clause("S3.2")
@slow(8)
@judges("backoff-1")
def test_s3_2_waits_double_each_time_measured_by_the_command(runner):
    result = backoff_schedule(runner)
    expect.exit_code(result, 1, "S3.2")
    waits_measured_by_the_command(result)


def waits_measured_by_the_command(result):
    """S3.2 judged by when the calls of the counted command started (scenarios.calls: the kernel's
    times where the lab has a witness, else those the command wrote).

    Three waits tell exponential from linear (1, 2, 3), constant (1, 1, 1) and off-by-one
    (2, 4, 8 or 0.5, 1, 2) schedules.
    """
    __tracebackhide__ = True
    started = calls(result, "S3.2")
    expect.count_is(result, expect.say("attempts", "試行回数"), len(started), 4, "S3.1")
    gaps = [later - earlier for earlier, later in zip(started, started[1:])]
    for k, (gap, wanted) in enumerate(zip(gaps, (1, 2, 4)), start=1):
        expect.within(
            gap,
            wanted - timing.EARLY_S,
            wanted + timing.REACTION_S,
            "S3.2",
            expect.say(
                "retry %d starts %ds after attempt %d (backoff * 2**%d)",
                "%d 回目の再試行が %d 秒後に始まる(%d 回目の試行の開始から。backoff * 2**%d)",
            )
            % (k, wanted, k, k - 1),
            expect.say("it started %.2fs after (all gaps: %s)", "%.2f 秒後に始まりました(すべての間隔: %s)")
            % (gap, ", ".join("%.2f" % g for g in gaps)),
            result,
            expect.schedule_hint(gaps),
        )


@clause("S3.2")
@slow(3)
def test_s3_2_no_wait_after_the_last_attempt(runner):
    # One retry with a drawn backoff B (2 or 3): B seconds of waiting; a wait after the last attempt
    # would add 2B more. (Its own scenario: the only core check of a backoff other than 0 and 1.)
    backoff = draws.CURRENT.last_backoff_s
    command = counted(counter(runner))
    result = runner.run("run", "--retries", "1", "--backoff", str(backoff), "--", *command, expect_s=backoff)
    expect.exit_code(result, 1, "S3.5")
    expect.waited_after_the_last(result, backoff, calls(result, "S3.2"))


@clause("S3.2")
def test_s3_2_backoff_zero_retries_at_once(runner):
    result = runner.run("run", "--retries", "3", "--backoff", "0", "--", "false")
    expect.exit_code(result, 1, "S3.5")
    expect.took_between(
        result,
        0,
        timing.OVERHEAD_S,
        "S3.2",
        expect.say("four quick attempts with no waits", "待たずにすばやく 4 回試行する"),
    )


@clause("S3.2")
@judges("backoff-1")
def test_s3_2_the_first_wait_is_the_backoff_itself(runner):
    result = backoff_schedule(runner)
    expect.exit_code(result, 1, "S3.2")
    started = calls(result, "S3.2")
    expect.count_is(result, expect.say("attempts", "試行回数"), len(started), 4, "S3.1")
    gap = started[1] - started[0]
    expect.within(
        gap,
        1 - timing.EARLY_S,
        1 + timing.REACTION_S,
        "S3.2",
        expect.say(
            "the retry starts 1s (backoff * 2**0) after the first attempt",
            "再試行が最初の試行の 1 秒後(backoff * 2**0)に始まる",
        ),
        expect.say("it started after %.2fs", "%.2f 秒後に始まりました") % gap,
        result,
        expect.schedule_hint([gap]),
    )


@clause("S3.3")
@slow(3)
def test_s3_3_a_timeout_is_retried(runner):
    result = hang_retried(runner)
    scenarios.finished(runner, result, "S3.3")
    attempts = len(calls(result, "S3.3"))
    scenarios.attempts_are(runner, result, expect.say("attempts", "試行回数"), attempts, 2, "S3.3", ("timeout",))
    scenarios.exits_124(runner, result, "S3.3")


@clause("S3.3")
@slow(2)
def test_s3_3_a_timeout_then_a_success(runner):
    seen = runner.lab.work / "seen"
    then = 'if [ -e "%s" ]; then echo second-try; exit 0; fi; touch "%s"; exec sleep 30' % (seen, seen)
    command = counted(counter(runner), then)
    result = runner.run("run", "--timeout", "1", "--retries", "2", "--backoff", "0", "--", *command, expect_s=1)
    scenarios.finished(runner, result, "S3.3")
    # A timeout, retried, then a success that ends the run: two attempts.
    made = len(calls(result, "S3.3"))
    scenarios.attempts_are(runner, result, expect.say("attempts", "試行回数"), made, 2, "S3.3", ("timeout", "success"))
    expect.exit_code(result, 0, "S3.3")
    scenarios.stdout_is(runner, result, b"second-try\n", "S3.3")


@clause("S3.3")
def test_s3_3_hang_sh_timed_out_twice_leaves_nothing(runner):
    result = hang_retried(runner)
    scenarios.finished(runner, result, "S3.3")
    # Twice timed out, as the calls it counted say (its output would tie this check to S1.2).
    calls_made = len(calls(result, "S3.3"))
    scenarios.attempts_are(
        runner, result, expect.say("hang.sh calls", "hang.sh の呼び出し"), calls_made, 2, "S3.3", ("timeout",)
    )
    scenarios.exits_124(runner, result, "S3.3")
    expect.no_survivors(result, "S2.4")


@clause("S3.4")
def test_s3_4_success_ends_the_run_at_once(runner):
    result = runner.run("run", "--retries", "3", "--backoff", "5", "--", *counted(counter(runner), "exit 0"))
    expect.exit_code(result, 0, "S3.4")
    expect.count_is(result, expect.say("attempts", "試行回数"), len(calls(result, "S3.4")), 1, "S3.4")
    expect.took_between(
        result, 0, timing.OVERHEAD_S, "S3.4", expect.say("no wait after a success", "成功のあとは待たない")
    )


@clause("S3.4")
def test_s3_4_flaky_stops_at_the_first_success(runner):
    result = scenarios.stops_at_success(runner)
    expect.exit_code(result, 0, "S3.4")
    expect.count_is(
        result,
        expect.say("flaky.sh calls", "flaky.sh の呼び出し回数"),
        flaky_calls(result),
        3,
        "S3.4",
    )


@clause("S3.5")
def test_s3_5_flaky_out_of_retries_exits_1(runner):
    result = runner.run("run", "--retries", "1", "--backoff", "0", "--", FLAKY)
    scenarios.attempts_are(
        runner, result, expect.say("flaky.sh calls", "flaky.sh の呼び出し回数"), flaky_calls(result), 2, "S3.5"
    )
    expect.exit_code(result, 1, "S3.5")


@clause("S3.5")
def test_s3_5_the_last_code_not_the_first(runner):
    # Exit codes 3, 4, 5 on successive calls: the run ends with 5.
    count = counter(runner)
    command = sh('n=$(cat "%s" 2>/dev/null | wc -l); date +%%s.%%N >> "%s"; exit $((n + 3))' % (count, count))
    result = runner.run("run", "--retries", "2", "--backoff", "0", "--", *command)
    made = len(calls(result, "S3.5"))
    scenarios.attempts_are(runner, result, expect.say("attempts", "試行回数"), made, 3, "S3.5")
    expect.exit_code(result, 5, "S3.5")


@clause("S3.5")
@slow(2)
def test_s3_5_last_attempt_timed_out_gives_124(runner):
    seen = runner.lab.work / "seen"
    command = counted(counter(runner), 'if [ -e "%s" ]; then exec sleep 30; fi; touch "%s"; exit 9' % (seen, seen))
    result = runner.run("run", "--timeout", "1", "--retries", "1", "--backoff", "0", "--", *command, expect_s=1)
    scenarios.finished(runner, result, "S3.5")
    made = len(calls(result, "S3.5"))
    scenarios.attempts_are(runner, result, expect.say("attempts", "試行回数"), made, 2, "S3.5")
    scenarios.exits_124(runner, result, "S3.5")


@clause("S3.5")
@slow(2)
def test_s3_5_last_code_after_a_timeout(runner):
    seen = runner.lab.work / "seen"
    command = counted(counter(runner), 'if [ -e "%s" ]; then exit 9; fi; touch "%s"; exec sleep 30' % (seen, seen))
    result = runner.run("run", "--timeout", "1", "--retries", "1", "--backoff", "0", "--", *command, expect_s=1)
    scenarios.finished(runner, result, "S3.5")
    made = len(calls(result, "S3.5"))
    scenarios.attempts_are(runner, result, expect.say("attempts", "試行回数"), made, 2, "S3.5", ("timeout",))
    expect.exit_code(result, 9, "S3.5")

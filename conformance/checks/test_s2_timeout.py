"""S2: `--timeout S` kills the whole command after S seconds, says `timeout`, exits 124."""

import pytest

from conformance.judging import expect, scenarios
from conformance.judging.scenarios import (
    HANG_SLEEP,
    NEVER_ENDING,
    calls,
    never_seen,
    seen_timed_out,
    timed_out,
    within_timeout,
)
from conformance.lab import draws, timing
from conformance.lab.commands import counted

clause = pytest.mark.clause
# One check of each shared scenario carries its length (see the plugin's ordering).
slow = pytest.mark.slow


@clause("S2.1")
@pytest.mark.parametrize("name", ["hang.sh", "sleep", "ignores-TERM"])
def test_s2_1_killed_once_the_timeout_passes(runner, name):
    watched = timed_out(runner, name)
    if watched.started is None:
        never_seen(watched, watched.command, "S2.1")
    late_hint = None
    if name == "ignores-TERM":  # late for it alone: it outlived a SIGTERM (or `timeout -k N`'s grace)
        late_hint = expect.say(
            "This command ignores SIGTERM, so when the time is up, kill it with SIGKILL (proc.kill(), or "
            "os.killpg(pgid, signal.SIGKILL) for its group) at once; a SIGTERM with a grace period (as "
            "`timeout -k N` gives) lets it run N seconds past the timeout.",
            "このコマンドは SIGTERM を無視します。時間が来たらすぐに SIGKILL で止めてください(proc.kill()、"
            "グループなら os.killpg(pgid, signal.SIGKILL))。猶予つきの SIGTERM(`timeout -k N` など)では"
            "タイムアウトから N 秒動き続けます。",
        )
    expect.killed_after(watched.result, watched.started, 1, "S2.1", late_hint, scenarios.killed_at(watched))


@clause("S2.1")
@slow(4)
def test_s2_1_killed_at_the_timeout_it_was_given(runner):
    # A timeout drawn per grading (3 or 4 s): a runner that kills at a time of its own, not the
    # one it is given, is killed early or late here.
    given = draws.CURRENT.kill_timeout_s
    watched = timed_out(runner, "sleep", given)
    if watched.started is None:
        never_seen(watched, watched.command, "S2.1")
    expect.killed_after(watched.result, watched.started, given, "S2.1", None, scenarios.killed_at(watched))


@clause("S2.1")
@slow(4)
def test_s2_1_a_command_within_the_timeout_is_not_killed(runner):
    result = within_timeout(runner).result
    expect.exit_code(result, 0, "S2.1")
    scenarios.stdout_is(runner, result, b"finished\n", "S2.1")


@clause("S2.1")
def test_s2_1_a_quick_command_does_not_wait_for_the_timeout(runner):
    result = scenarios.quick_under_a_timeout(runner)
    expect.exit_code(result, 0, "S2.1")
    expect.took_between(
        result,
        0,
        timing.OVERHEAD_S,
        "S2.1",
        expect.say("done as soon as the command is", "コマンドが終わったらすぐに終了する"),
    )


@clause("S2.2")
@pytest.mark.parametrize("name", ["hang.sh", "sleep"])
def test_s2_2_timeout_is_said_on_stderr(runner, name):
    result = seen_timed_out(runner, name).result
    expect.finished(result, "S2.2")
    lines = [line for line in result.err.splitlines() if "timeout" in line]
    expect.that(
        lines,
        "S2.2",
        expect.say("a stderr line containing 'timeout'", "標準エラーに 'timeout' を含む行"),
        expect.say("no such line", "そのような行はありませんでした"),
        result,
    )


@clause("S2.2")
def test_s2_2_timeout_line_is_not_on_stdout(runner):
    result = seen_timed_out(runner, "sleep").result
    expect.finished(result, "S2.2")
    expect.that(
        "timeout" not in result.out,
        "S2.2",
        expect.say(
            "the timeout line on stderr, stdout untouched",
            "タイムアウトの行は標準エラーに出て、標準出力は変わらない",
        ),
        expect.say("stdout says %r", "標準出力に %r と出ていました") % result.out,
        result,
    )


@clause("S2.3")
@slow(1)
@pytest.mark.parametrize("name", sorted(set(NEVER_ENDING) - {"python-grandchildren"}))
def test_s2_3_timeout_exits_124(runner, name):
    expect.exit_code(seen_timed_out(runner, name).result, 124, "S2.3")


@clause("S2.3")
def test_s2_3_output_before_the_timeout_still_passes(runner):
    result = seen_timed_out(runner, "hang.sh").result
    expect.exit_code(result, 124, "S2.3")
    expect.stdout_has(result, "hang.sh: started", "S1.2")


@clause("S2.3")
def test_s2_3_a_command_exiting_124_itself_is_not_a_special_case(runner):
    # 124 from the command passes through like any code (S1.3); no timeout line is needed for it.
    counter = runner.lab.counter
    result = runner.run("run", "--timeout", "5", "--", *counted(counter, "exit 124"))
    expect.finished(result, "S2.3")
    # Run, not faked: a runner that exits 124 for any --timeout without running its command fails
    # S2.1 (its command never ran under the runner), and this check is blocked by it.
    expect.count_is(
        result, expect.say("command calls", "コマンドの呼び出し回数"), len(calls(result, "S2.3")), 1, "S2.1"
    )
    expect.exit_code(result, 124, "S2.3")
    # Waiting out the timeout for every command is S2.1's defect, which this only runs into.
    late = result.duration_s > timing.OVERHEAD_S and scenarios.waits_out_the_timeout(runner)
    expect.took_between(
        result,
        0,
        timing.OVERHEAD_S,
        "S2.1" if late else "S2.3",
        expect.say("no waiting for the timeout", "タイムアウトまで待たない"),
    )


@clause("S2.4")
@pytest.mark.parametrize("name", sorted(set(NEVER_ENDING) - {"python-grandchildren"}))
def test_s2_4_nothing_of_the_command_survives(runner, name):
    result = seen_timed_out(runner, name).result
    expect.finished(result, "S2.4")
    expect.no_survivors(result, "S2.4")


@clause("S2.4")
def test_s2_4_hang_sh_grandchild_sleep_is_killed(runner):
    watched = seen_timed_out(runner, "hang.sh")
    if not watched.grandchild_seen:
        never_seen(watched, HANG_SLEEP, "S2.4")
    expect.exit_code(watched.result, 124, "S2.3")
    expect.no_survivors(watched.result, "S2.4")


@clause("S2.4")
@slow(1)
def test_s2_4_python_child_with_grandchildren(runner):
    result = seen_timed_out(runner, "python-grandchildren").result
    expect.exit_code(result, 124, "S2.3")
    expect.no_survivors(result, "S2.4")

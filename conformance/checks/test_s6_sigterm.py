"""S6: on SIGTERM the runner forwards it to the command, waits for it, leaves nothing, exits 143."""

import re
import signal
import time
from typing import Optional

import pytest

from conformance.harness import labfiles
from conformance.judging import expect, scenarios
from conformance.judging.scenarios import calls
from conformance.lab import timing
from conformance.lab.commands import HANG, counted, sh, term_trap

clause = pytest.mark.clause
slow = pytest.mark.slow
# Settled reading: a normal exit with 143 and a death by SIGTERM (-15 to the parent) both conform.
EXIT_143 = (143, -signal.SIGTERM)


def terminated(runner, command, ready_argv, *options, **start):
    """Start `run OPTIONS -- COMMAND`, wait until `ready_argv` runs under it, SIGTERM the runner."""
    invocation = runner.start("run", *options, "--", *command, expect_s=start.pop("expect_s", 0))
    invocation.wait_for_descendant(ready_argv, "S6.1")
    sent = invocation.send_signal(signal.SIGTERM)
    return invocation, sent


def trapped(runner, delay=0.0):
    """A command that traps TERM: returns (command, ready file, file it writes on TERM)."""
    ready, on_term = runner.lab.work / "ready", runner.lab.work / "got-term"
    return term_trap(ready, on_term, delay), ready, on_term


def start_trapped(runner, delay=0.0, *options):
    command, ready, on_term = trapped(runner, delay)
    invocation = runner.start("run", *options, "--", *command, expect_s=delay)
    invocation.wait_until(
        lambda: labfiles.look(ready.parent, ready.name).exists,
        expect.say("the command started (it writes a ready file)", "コマンドが開始する(ready ファイルを書く)"),
        "S6.1",
    )
    return invocation, on_term


def handler_ended_at(result, on_term) -> Optional[float]:
    """When the trapped command's TERM handler ended, as it wrote (None: it never ran). Read as the
    runner left its work folder, never through a link: the runner's uid can put one there that
    leads to a file that exists, which followed would read as the handler having run."""
    written = result.work_file(on_term.name).strip()
    return float(written) if re.fullmatch(rb"[0-9]+(\.[0-9]+)?", written) else None


def passes_sigterm_on(runner) -> bool:
    """Does the runner pass SIGTERM on to a plain command at all (the trapped command's handler
    ran)? Played once per grading, in a lab of its own; a command that never started under the
    runner shows nothing either way (True: the asking check judges by itself)."""

    def play() -> bool:
        try:
            invocation, on_term = start_trapped(aside)
        except expect.ClauseFailure:
            return True
        invocation.send_signal(signal.SIGTERM)
        return handler_ended_at(invocation.finish(), on_term) is not None

    aside = runner.aside()
    return aside.scenario("sigterm passed on", play)


def finished(runner, result, clause):
    """expect.finished for a check of S6 after SIGTERM: a runner that never ended because it never
    passes SIGTERM on, even to a plain command, is charged to S6.1, whatever its command became
    (an exec'd one no longer shows the argv it was given)."""
    __tracebackhide__ = True
    if result.rc is None and clause != "S6.1" and not passes_sigterm_on(runner):
        expect.finished(result, "S6.1")
    expect.finished(result, clause)


@clause("S6.1")
def test_s6_1_sigterm_reaches_the_command(runner):
    invocation, on_term = start_trapped(runner)
    invocation.send_signal(signal.SIGTERM)
    result = invocation.finish()
    expect.finished(result, "S6.1")
    expect.that(
        handler_ended_at(result, on_term) is not None,
        "S6.1",
        expect.say("the command's TERM handler ran", "コマンドの TERM ハンドラーが動く"),
        expect.say(
            "the command never got SIGTERM (killed some other way, or left running)",
            "コマンドに SIGTERM が届きませんでした(別の方法で止められたか、動いたまま残されました)",
        ),
        result,
    )


@clause("S6.1")
def test_s6_1_sigterm_reaches_the_command_with_a_timeout_set(runner):
    try:
        invocation, on_term = start_trapped(runner, 0.0, "--timeout", "30")
    except expect.ClauseFailure:
        # Never started under a timeout: S2.1's failure when no timed command ever runs.
        scenarios.seen_timed_out(runner.aside(), "sleep")
        raise
    invocation.send_signal(signal.SIGTERM)
    result = invocation.finish()
    scenarios.finished(runner, result, "S6.1")  # a runner that sleeps out its timeout never looks
    expect.that(
        handler_ended_at(result, on_term) is not None,
        "S6.1",
        expect.say("the command's TERM handler ran", "コマンドの TERM ハンドラーが動く"),
        expect.say("it did not run", "ハンドラーは動きませんでした"),
        result,
    )


@clause("S6.2")
@slow(3)
def test_s6_2_waits_for_a_command_that_takes_time_to_stop(runner):
    invocation, on_term = start_trapped(runner, 1.5)
    invocation.send_signal(signal.SIGTERM)
    time.sleep(0.75)  # mid-way through the command's 1.5s of cleaning up: a runner must still wait
    still_running = invocation.running()
    result = invocation.finish()
    finished(runner, result, "S6.2")
    expect.that(
        still_running,
        "S6.2",
        expect.say(
            "the runner still running while the command cleans up after SIGTERM",
            "SIGTERM のあとコマンドが後始末をしている間も、runner がまだ動いている",
        ),
        expect.say(
            "it had already exited 0.75s after SIGTERM, before its command ended",
            "SIGTERM の 0.75 秒後には、コマンドが終わる前にもう終了していました",
        ),
        result,
    )
    expect.that(
        handler_ended_at(result, on_term) is not None,
        "S6.2",
        expect.say(
            "the command allowed to finish its 1.5s TERM handler",
            "コマンドが 1.5 秒かかる TERM ハンドラーを最後まで実行できる",
        ),
        expect.say(
            "the handler never finished: the command was killed before it ended",
            "ハンドラーが終わりませんでした。コマンドはハンドラーが終わる前に強制終了されました",
        ),
        result,
    )
    expect.exit_code_in(result, EXIT_143, "S6.3")


@clause("S6.2")
def test_s6_2_not_finished_before_the_command(runner):
    invocation, on_term = start_trapped(runner, 0.5)
    invocation.send_signal(signal.SIGTERM)
    result = invocation.finish()
    ended = result.ended_at
    finished(runner, result, "S6.2")
    handler_done = handler_ended_at(result, on_term)
    expect.that(
        handler_done is not None,
        "S6.2",
        expect.say("the command ended its TERM handler", "コマンドが TERM ハンドラーを終える"),
        expect.say("it did not", "終えませんでした"),
        result,
    )
    expect.that(
        handler_done <= ended,
        "S6.2",
        expect.say("the runner exits after its command ends", "runner はコマンドが終わってから終了する"),
        expect.say("it exited %.2fs before its command", "コマンドより %.2f 秒早く終了しました")
        % (handler_done - ended),
        result,
    )


@clause("S6.3")
@pytest.mark.parametrize(
    "command,fragment",
    [([HANG], ["sleep", "60"]), (["sleep", "60"], ["sleep", "60"]), (sh("exec sleep 61"), ["sleep", "61"])],
    ids=["hang.sh", "sleep", "exec-sleep"],
)
def test_s6_3_sigterm_exits_143(runner, command, fragment):
    invocation, _ = terminated(runner, command, fragment)
    result = invocation.finish()
    finished(runner, result, "S6.3")
    expect.exit_code_in(result, EXIT_143, "S6.3")


@clause("S6.3")
def test_s6_3_143_even_when_the_command_exits_0_on_term(runner):
    invocation, _ = start_trapped(runner)
    invocation.send_signal(signal.SIGTERM)
    result = invocation.finish()
    finished(runner, result, "S6.3")
    expect.exit_code_in(result, EXIT_143, "S6.3")


@clause("S6.3")
def test_s6_3_prompt_exit_after_the_command_ends(runner):
    invocation, sent = terminated(runner, [HANG], ["sleep", "60"])
    result = invocation.finish()
    finished(runner, result, "S6.3")
    expect.exit_code_in(result, EXIT_143, "S6.3")
    expect.in_time(
        result.ended - sent - timing.REACTION_S,
        "S6.3",
        expect.say(
            "exit within %.1fs of SIGTERM for a command that stops at once",
            "すぐ止まるコマンドなら、SIGTERM から %.1f 秒以内に終了する",
        )
        % timing.REACTION_S,
        expect.say("it took %.2fs", "%.2f 秒かかりました") % (result.ended - sent),
        result,
    )


@clause("S6.3")
def test_s6_3_retries_left_do_not_run(runner):
    counter = runner.lab.counter
    invocation, _ = terminated(
        runner, counted(counter, "exec sleep 62"), ["sleep", "62"], "--retries", "3", "--backoff", "0"
    )
    result = invocation.finish()
    finished(runner, result, "S6.3")
    expect.exit_code_in(result, EXIT_143, "S6.3")
    expect.count_is(
        result,
        expect.say("attempts (none after SIGTERM)", "試行回数(SIGTERM のあとはなし)"),
        len(calls(result, "S6.3")),
        1,
        "S6.3",
    )


@clause("S6.4")
@pytest.mark.parametrize(
    "command,fragment",
    [
        ([HANG], ["sleep", "60"]),
        (sh("sleep 63 & sleep 64"), ["sleep", "64"]),
        (sh("sleep 65 & wait"), ["sleep", "65"]),
    ],
    ids=["hang.sh-grandchild", "background-and-foreground", "shell-waiting"],
)
def test_s6_4_nothing_survives_sigterm(runner, command, fragment):
    invocation, _ = terminated(runner, command, fragment)
    result = invocation.finish()
    finished(runner, result, "S6.4")
    expect.no_survivors(result, "S6.4")


@clause("S6.4")
def test_s6_4_a_grandchild_that_ignores_term_is_killed_too(runner):
    command = sh("(trap '' TERM; exec sleep 66) & wait")
    invocation, _ = terminated(runner, command, ["sleep", "66"])
    result = invocation.finish()
    finished(runner, result, "S6.4")
    expect.no_survivors(result, "S6.4")

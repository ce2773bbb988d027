"""S7: every attempt appends one JSON line to runs.jsonl: ts, cmd, attempt, rc, duration_ms."""

import json
from datetime import datetime, timezone

import pytest

from conformance.harness import labfiles
from conformance.judging import expect, scenarios
from conformance.judging.scenarios import calls, hang_retried, seen_timed_out, within_timeout
from conformance.lab import draws, timing
from conformance.lab.commands import FLAKY, counted, exits, flaky_calls, sh
from conformance.lab.records import KEYS

clause = pytest.mark.clause
slow = pytest.mark.slow


def duration_is_about(result, record, wanted_ms, clause, what, longest_ms=None):
    """duration_ms agrees with an attempt known to take `wanted_ms` (up to `longest_ms` when its
    length is known only that far): not shorter, and not by much longer."""
    __tracebackhide__ = True
    duration = expect.field(result, record, "duration_ms")
    high = max(wanted_ms, longest_ms or 0) + int(timing.REACTION_S * 1000)
    expect.within(
        duration / 1000.0,
        wanted_ms / 1000.0 - timing.EARLY_S,
        high / 1000.0,
        clause,
        expect.say(
            "duration_ms %d to %d for %s (milliseconds, as an int)",
            "duration_ms が %d から %d(ミリ秒の整数)で、%s の長さに合う",
        )
        % (wanted_ms - timing.EARLY_S * 1000, high, what),
        expect.say("duration_ms %r", "duration_ms は %r でした") % (duration,),
        result,
    )


def appends(runner) -> bool:
    """Does the runner keep earlier lines of runs.jsonl at all (`successive_runs`, asked aside)?"""
    *_, last = successive_runs(runner.aside())
    try:
        expect.records(last, 4)
    except (expect.ClauseFailure, labfiles.LabFileRefused):
        return False
    return True


def timed_out_records(runner, result, count):
    """expect.records(result, count, "S7.3") for the timed-out attempts of `result`: too few lines
    are S7.1's defect when the runner keeps no earlier line of runs.jsonl even in plain runs."""
    __tracebackhide__ = True
    try:
        return expect.records(result, count, "S7.3")
    except expect.ClauseFailure as failure:
        if failure.clause != "S7.3" or count < 2 or appends(runner):
            raise
        return expect.records(result, count, "S7.1")


def rc_are_124(runner, result, records) -> None:
    """Each timed-out attempt's record says rc 124: S7.3's, unless the runner's code for a timeout
    is wrong everywhere (then it is S2.3's defect, which these records only repeat)."""
    wanted = [124] * len(records)
    right = [record.value.get("rc") for record in records] == wanted
    expect.values_are(result, records, "rc", wanted, "S7.3" if right else scenarios.timeout_code_clause(runner, "S7.3"))


def one_record(runner, *command):
    result = runner.observe("run", "--", *command)
    expect.finished(result, "S7.1")
    return expect.records(result, 1)[0], result


def counted_run(runner, retries, code):
    """`run --retries RETRIES --backoff 0` of a command that exits `code` and counts its calls, so
    that a check of runs.jsonl compares its lines with the attempts the runner really made: a
    wrong number of attempts is S3's defect; a line per attempt made is all S7 asks."""
    command = counted(runner.lab.counter, "exit %d" % code)
    return runner.observe(
        "run", "--retries", str(retries), "--backoff", "0", "--", *command, scenario="counted %d %d" % (retries, code)
    )


def attempts_made(result):
    """How many attempts a run made: the calls of its counted command, else flaky.sh's."""
    made = calls(result, "S7.1")
    return len(made) if made else flaky_calls(result)


def lines_are_attempts(runner, result, clause, wanted, after=()):
    """runs.jsonl's records of `result`, one per attempt made. When no attempt was seen, or fewer
    than the check needs (`wanted`), the attempts are what is wrong (scenarios.attempts_are)."""
    made = attempts_made(result)
    if made < min(wanted, 2):
        scenarios.attempts_are(runner, result, expect.say("attempts", "試行回数"), made, wanted, clause, after)
    return expect.records(result, made)


@clause("S7.1")
@pytest.mark.parametrize(
    "retries,code,lines",
    [(0, 0, 1), (0, 1, 1), (2, 1, 3), (3, None, 3), (1, 0, 1)],
    ids=["true", "false", "false-retried-twice", "flaky-retried", "success-no-retry"],
)
def test_s7_1_one_line_per_attempt(runner, retries, code, lines):
    if code is None:
        result = runner.observe("run", "--retries", str(retries), "--backoff", "0", "--", FLAKY)
    else:
        result = counted_run(runner, retries, code)
    expect.finished(result, "S7.1")
    lines_are_attempts(runner, result, "S7.1", lines, ("success",) if code != 1 else ())


@clause("S7.1")
def test_s7_1_appends_to_an_existing_file(runner):
    earlier = b'{"ts": "2020-01-01T00:00:00+00:00", "cmd": ["earlier"], "attempt": 1, "rc": 0, "duration_ms": 1}\n'
    labfiles.write(runner.lab.sub, "runs.jsonl", earlier)
    result = runner.run("run", "--", "true")
    expect.finished(result, "S7.1")
    data = result.runs_bytes()
    expect.that(
        data.startswith(earlier),
        "S7.1",
        expect.say("the earlier line kept, the new one appended", "前からある行が残り、新しい行が追記される"),
        expect.say("runs.jsonl was rewritten", "runs.jsonl が書き直されていました"),
        result,
    )
    expect.records(result, 2)


def successive_runs(runner):
    """`run -- true` three times in one lab, then `run -- false` there, observed once: S7.1's
    lines that accumulate and S7.2's attempt that restarts at 1 judge it."""

    def play():
        earlier = tuple(runner.run("run", "--", "true").kept_apart() for _ in range(3))  # each as its call left it
        return earlier + (runner.run("run", "--", "false"),)

    return runner.scenario("successive runs", play)


@clause("S7.1")
def test_s7_1_successive_runs_accumulate(runner):
    *earlier, result = successive_runs(runner)
    for each in earlier:
        expect.finished(each, "S7.1")
    records = expect.records(result, 4)
    expect.values_are(result, records, "rc", [0, 0, 0, 1], "S7.1")


@clause("S7.1")
def test_s7_1_each_line_is_one_compact_object(runner):
    # json.dumps(record, indent=2) spreads one record over lines, none of them an object.
    result = counted_run(runner, 1, 1)
    expect.finished(result, "S7.1")
    lines_are_attempts(runner, result, "S7.1", 2)


@clause("S7.1")
def test_s7_1_command_output_is_not_logged_as_records(runner):
    result = runner.observe("run", "--", *sh('echo \'{"not": "a record"}\''))
    expect.finished(result, "S7.1")
    expect.records(result, 1)


@clause("S7.2")
def test_s7_2_all_five_keys(runner):
    record, result = one_record(runner, "true")
    missing = [name for name in KEYS if name not in record.value]
    expect.that(
        not missing,
        "S7.2",
        expect.say("keys ts, cmd, attempt, rc, duration_ms", "キー ts, cmd, attempt, rc, duration_ms がそろっている"),
        expect.say("missing %s", "%s がありませんでした") % missing,
        result,
    )


@clause("S7.2")
def test_s7_2_ts_is_iso_8601_and_now(runner):
    record, result = one_record(runner, "true")
    when = expect.field(result, record, "ts")
    ts = record.value["ts"]
    now = datetime.fromtimestamp(result.ended_at, timezone.utc)  # when it ran, not when it is judged
    # Without an offset, ts may be local time or UTC: accept either, within a minute.
    candidates = [when] if when.tzinfo else [when.replace(tzinfo=timezone.utc), when.astimezone()]
    skew = min(abs((now - c).total_seconds()) for c in candidates)
    expect.that(
        skew <= 60,
        "S7.2",
        expect.say("ts within a minute of the attempt", "ts が試行の時刻から 1 分以内"),
        expect.say("ts %r is %.0fs off", "ts %r は %.0f 秒ずれていました") % (ts, skew),
        result,
    )


@clause("S7.2")
@pytest.mark.parametrize(
    "command",
    [
        ["true"],
        ["printf", "%s", "a b"],
        ["sh", "-c", "exit 0"],
        ["echo", "--retries", "1"],
        ["echo", "日本語", ""],
        # Beyond the BMP: JSON escapes each as a surrogate pair, never as one \uXXXX.
        ["echo", "\U0001f642 \U0001d11e"],
        # What JSON must escape: a quote, a backslash and every control character (NUL cannot be in
        # an argv). json.dumps does it; a line written by hand that misses one is not JSON (S7.1).
        ["true", 'a "quote", a \\ backslash', "".join(map(chr, range(1, 0x20))) + "\x7f"],
    ],
    ids=[
        "true",
        "space",
        "sh-c",
        "option-like",
        "unicode-and-empty",
        "beyond-the-bmp",
        "quotes-and-control-characters",
    ],
)
def test_s7_2_cmd_is_the_argv_after_dashes(runner, command):
    record, result = one_record(runner, *command)
    cmd = expect.field(result, record, "cmd")
    expect.that(
        cmd == command,
        "S7.2",
        expect.say(
            "cmd %s (the argv after --, as a list of strings)", "cmd が %s(-- の後の argv を文字列のリストにしたもの)"
        )
        % json.dumps(command, ensure_ascii=False),
        expect.say("cmd %s", "cmd は %s でした") % json.dumps(cmd, ensure_ascii=False),
        result,
    )


@clause("S7.2")
def test_s7_2_attempt_counts_from_1(runner):
    result = counted_run(runner, 2, 1)
    expect.finished(result, "S7.2")
    records = lines_are_attempts(runner, result, "S7.2", 3)
    expect.values_are(result, records, "attempt", list(range(1, len(records) + 1)), "S7.2")


@clause("S7.2")
def test_s7_2_a_line_apply_writes_is_a_record_like_any_other(runner):
    """Whether `apply` logs to runs.jsonl is the runner's choice (settled reading); a line it does
    write follows S7.2: all five keys with their types, and its one run of apply.sh is attempt 1."""
    name = draws.CURRENT.name("db-migration")
    result = runner.observe("apply", name)  # the apply S4.2 judges, played once
    scenarios.applied_once(result, name)  # no apply made, no line of it to judge
    records = expect.records(result, len(result.records()))
    for key in KEYS:
        for record in records:
            expect.field(result, record, key)
    expect.values_are(result, records, "attempt", list(range(1, len(records) + 1)), "S7.2")


@clause("S7.2")
def test_s7_2_attempt_restarts_at_1_for_each_run(runner):
    first, result = successive_runs(runner)[:2]
    expect.finished(first, "S7.2")
    records = expect.records(result, 2)
    expect.values_are(result, records, "attempt", [1, 1], "S7.2")


@clause("S7.2")
@pytest.mark.parametrize("code", [0, 1, 7, 255])
def test_s7_2_rc_is_the_int_exit_code(runner, code):
    record, result = one_record(runner, *exits(code))
    expect.values_are(result, [record], "rc", [code], "S7.2")


@clause("S7.2")
def test_s7_2_rc_per_attempt_for_flaky(runner):
    result = scenarios.stops_at_success(runner)
    expect.finished(result, "S7.2")
    records = lines_are_attempts(runner, result, "S7.2", 3, ("success",))
    # flaky.sh fails its first two calls and succeeds from its third on.
    expect.values_are(result, records, "rc", [1 if k <= 2 else 0 for k in range(1, len(records) + 1)], "S7.2")


@clause("S7.2")
@pytest.mark.parametrize("command", [["true"], ["false"]], ids=["true", "false"])
def test_s7_2_duration_ms_is_an_int(runner, command):
    record, result = one_record(runner, *command)
    expect.field(result, record, "duration_ms")  # a non-negative int, not a float or a bool


@clause("S7.2")
def test_s7_2_duration_ms_agrees_with_the_real_length(runner):
    survived = within_timeout(runner)
    result = survived.result
    scenarios.finished(runner, result, "S7.2")
    made = len(calls(result, "S7.2"))  # a record of an attempt that never ran says nothing
    scenarios.attempts_are(runner, result, expect.say("attempts", "試行回数"), made, 1, "S7.2")
    records = expect.records(result, 1, "S7.2")
    length_s = draws.CURRENT.survived_command_s
    what = "`sleep %g; echo finished`" % length_s
    # Killed before its end, which S2.1 judges, the attempt is recorded truly by the length it had.
    real_s = survived.real_length_s(length_s)
    if real_s != length_s:
        what = expect.say("an attempt killed after %.1fs", "%.1f 秒で強制終了された試行") % real_s
    duration_is_about(result, records[0], int(real_s * 1000), "S7.2", what)


@clause("S7.3")
def test_s7_3_timed_out_attempt_is_recorded_with_124(runner):
    result = seen_timed_out(runner, "hang.sh").result
    scenarios.finished(runner, result, "S7.3")
    records = timed_out_records(runner, result, 1)
    rc_are_124(runner, result, records)


@clause("S7.3")
def test_s7_3_timed_out_attempt_has_its_real_duration(runner):
    timed = seen_timed_out(runner, "sleep")
    scenarios.finished(runner, timed.result, "S7.3")
    records = timed_out_records(runner, timed.result, 1)
    # The attempt lasted from its command's start until its kill, which S2.1 judges: killed late,
    # it is still recorded truly by the length it had.
    lasted_ms = None if timed.started is None else int((scenarios.killed_at(timed) - timed.started) * 1000)
    duration_is_about(
        timed.result,
        records[0],
        1000,
        "S7.3",
        expect.say("an attempt killed at 1s", "1 秒で強制終了された試行"),
        lasted_ms,
    )


@clause("S7.3")
def test_s7_3_every_timed_out_retry_is_recorded(runner):
    result = hang_retried(runner)
    scenarios.finished(runner, result, "S7.3")
    # Two attempts made (else the retries are what is wrong, and this cannot judge S7.3).
    made = len(calls(result, "S7.3"))
    scenarios.attempts_are(
        runner, result, expect.say("hang.sh calls", "hang.sh の呼び出し"), made, 2, "S3.3", ("timeout",)
    )
    records = timed_out_records(runner, result, 2)
    rc_are_124(runner, result, records)
    expect.values_are(result, records, "attempt", [1, 2], "S7.2")

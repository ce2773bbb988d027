"""S7: every attempt appends one JSON line to runs.jsonl: ts, cmd, attempt, rc, duration_ms."""

import json
from datetime import datetime, timezone

import pytest

from conformance import expect, timing
from conformance.commands import FLAKY, HANG, exits, sh

clause = pytest.mark.clause
slow = pytest.mark.slow


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def one_record(runner, *command):
    result = runner.run("run", "--", *command)
    expect.finished(result, "S7.1")
    return expect.records(result, 1)[0], result


def key(record, name, result):
    __tracebackhide__ = True
    expect.that(name in record, "S7.2", "the key %r" % name, "keys: %s" % sorted(record), result)
    return record[name]


@clause("S7.1")
@pytest.mark.parametrize(
    "retries,command,lines",
    [
        (0, ["true"], 1),
        (0, ["false"], 1),
        (2, ["false"], 3),
        (3, [FLAKY], 3),
        (1, ["true"], 1),
    ],
    ids=["true", "false", "false-retried-twice", "flaky-retried", "success-no-retry"],
)
def test_s7_1_one_line_per_attempt(runner, retries, command, lines):
    result = runner.run("run", "--retries", str(retries), "--backoff", "0", "--", *command)
    expect.finished(result, "S7.1")
    expect.records(result, lines)


@clause("S7.1")
def test_s7_1_appends_to_an_existing_file(runner):
    earlier = b'{"ts": "2020-01-01T00:00:00+00:00", "cmd": ["earlier"], "attempt": 1, "rc": 0, "duration_ms": 1}\n'
    runner.lab.runs_log.write_bytes(earlier)
    result = runner.run("run", "--", "true")
    expect.finished(result, "S7.1")
    data = result.runs_bytes()
    expect.that(
        data.startswith(earlier),
        "S7.1",
        "the earlier line kept, the new one appended",
        "runs.jsonl was rewritten",
        result,
    )
    expect.records(result, 2)


@clause("S7.1")
def test_s7_1_successive_runs_accumulate(runner):
    for _ in range(3):
        expect.finished(runner.run("run", "--", "true"), "S7.1")
    result = runner.run("run", "--", "false")
    records = expect.records(result, 4)
    expect.values_are(result, records, "rc", [0, 0, 0, 1], "S7.1")


@clause("S7.1")
def test_s7_1_each_line_is_one_compact_object(runner):
    result = runner.run("run", "--retries", "1", "--backoff", "0", "--", "false")
    expect.finished(result, "S7.1")
    expect.records(result, 2)
    for line in result.runs_bytes().splitlines():
        expect.that(isinstance(json.loads(line), dict), "S7.1", "a JSON object per line", repr(line), result)


@clause("S7.1")
def test_s7_1_command_output_is_not_logged_as_records(runner):
    result = runner.run("run", "--", *sh('echo \'{"not": "a record"}\''))
    expect.finished(result, "S7.1")
    expect.records(result, 1)


@clause("S7.2")
def test_s7_2_all_five_keys(runner):
    record, result = one_record(runner, "true")
    missing = [name for name in ("ts", "cmd", "attempt", "rc", "duration_ms") if name not in record]
    expect.that(not missing, "S7.2", "keys ts, cmd, attempt, rc, duration_ms", "missing %s" % missing, result)


@clause("S7.2")
def test_s7_2_ts_is_iso_8601_and_now(runner):
    record, result = one_record(runner, "true")
    ts = key(record, "ts", result)
    expect.that(isinstance(ts, str), "S7.2", "ts a string", "ts %r (%s)" % (ts, type(ts).__name__), result)
    try:
        when = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        expect.fail("S7.2", "ts in ISO 8601 (datetime.fromisoformat parses it)", "ts %r" % ts, result)
    now = datetime.now(timezone.utc)
    # Without an offset, ts may be local time or UTC: accept either, within a minute.
    candidates = [when] if when.tzinfo else [when.replace(tzinfo=timezone.utc), when.astimezone()]
    skew = min(abs((now - c).total_seconds()) for c in candidates)
    expect.that(skew <= 60, "S7.2", "ts within a minute of the attempt", "ts %r is %.0fs off" % (ts, skew), result)


@clause("S7.2")
@pytest.mark.parametrize(
    "command",
    [["true"], ["printf", "%s", "a b"], ["sh", "-c", "exit 0"], ["echo", "--retries", "1"], ["echo", "日本語", ""]],
    ids=["true", "space", "sh-c", "option-like", "unicode-and-empty"],
)
def test_s7_2_cmd_is_the_argv_after_dashes(runner, command):
    record, result = one_record(runner, *command)
    cmd = key(record, "cmd", result)
    expect.that(
        cmd == command,
        "S7.2",
        "cmd %s (the argv after --, as a list of strings)" % json.dumps(command),
        "cmd %s" % json.dumps(cmd, ensure_ascii=False),
        result,
    )


@clause("S7.2")
def test_s7_2_attempt_counts_from_1(runner):
    result = runner.run("run", "--retries", "2", "--backoff", "0", "--", "false")
    records = expect.records(result, 3)
    attempts = [r.get("attempt") for r in records]
    expect.that(
        attempts == [1, 2, 3] and all(is_int(a) for a in attempts),
        "S7.2",
        "attempt 1, 2, 3 (ints)",
        "attempt %s" % attempts,
        result,
    )


@clause("S7.2")
def test_s7_2_attempt_restarts_at_1_for_each_run(runner):
    expect.finished(runner.run("run", "--", "true"), "S7.2")
    result = runner.run("run", "--", "true")
    records = expect.records(result, 2)
    expect.values_are(result, records, "attempt", [1, 1], "S7.2")


@clause("S7.2")
@pytest.mark.parametrize("code", [0, 1, 7, 255])
def test_s7_2_rc_is_the_int_exit_code(runner, code):
    record, result = one_record(runner, *exits(code))
    rc = key(record, "rc", result)
    expect.that(
        is_int(rc) and rc == code, "S7.2", "rc %d, an int" % code, "rc %r (%s)" % (rc, type(rc).__name__), result
    )


@clause("S7.2")
def test_s7_2_rc_per_attempt_for_flaky(runner):
    result = runner.run("run", "--retries", "3", "--backoff", "0", "--", FLAKY)
    records = expect.records(result, 3)
    expect.values_are(result, records, "rc", [1, 1, 0], "S7.2")


@clause("S7.2")
@pytest.mark.parametrize("command", [["true"], ["false"]], ids=["true", "false"])
def test_s7_2_duration_ms_is_an_int(runner, command):
    record, result = one_record(runner, *command)
    duration = key(record, "duration_ms", result)
    expect.that(
        is_int(duration) and duration >= 0,
        "S7.2",
        "duration_ms a non-negative int (not float, not bool)",
        "duration_ms %r (%s)" % (duration, type(duration).__name__),
        result,
    )


@clause("S7.2")
@slow(2)
def test_s7_2_duration_ms_agrees_with_the_real_length(runner):
    record, result = one_record(runner, "sleep", "1")
    duration = key(record, "duration_ms", result)
    high = 1000 + int(timing.OVERHEAD_S * 1000)
    expect.that(
        is_int(duration) and 1000 - timing.EARLY_S * 1000 <= duration <= high,
        "S7.2",
        "duration_ms about 1000 for `sleep 1` (milliseconds, as an int)",
        "duration_ms %r" % (duration,),
        result,
    )


@clause("S7.3")
@slow(2)
def test_s7_3_timed_out_attempt_is_recorded_with_124(runner):
    result = runner.run("run", "--timeout", "1", "--", HANG, expect_s=1)
    expect.finished(result, "S7.3")
    records = expect.records(result, 1, "S7.3")
    expect.that(records[0].get("rc") == 124, "S7.3", "rc 124", "rc %r" % records[0].get("rc"), result)


@clause("S7.3")
@slow(2)
def test_s7_3_timed_out_attempt_has_its_real_duration(runner):
    result = runner.run("run", "--timeout", "1", "--", "sleep", "30", expect_s=1)
    records = expect.records(result, 1, "S7.3")
    duration = records[0].get("duration_ms")
    expect.that(
        is_int(duration) and 1000 - timing.EARLY_S * 1000 <= duration <= 1000 + timing.OVERHEAD_S * 1000,
        "S7.3",
        "duration_ms about 1000 for an attempt killed at 1s",
        "duration_ms %r" % (duration,),
        result,
    )


@clause("S7.3")
@slow(3)
def test_s7_3_every_timed_out_retry_is_recorded(runner):
    result = runner.run("run", "--timeout", "1", "--retries", "1", "--backoff", "0", "--", "sleep", "30", expect_s=2)
    records = expect.records(result, 2, "S7.3")
    expect.values_are(result, records, "rc", [124, 124], "S7.3")
    expect.values_are(result, records, "attempt", [1, 2], "S7.2")

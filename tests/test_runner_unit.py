"""Unit tests of the reference runner's pure parts, in process: parsing, backoff, the JSON record."""

import json
import time
from datetime import datetime, timezone

import pytest
from freezegun import freeze_time

from runner import runner


@pytest.mark.parametrize(
    "backoff,attempt,delay",
    [
        (1, 1, 1),
        (1, 2, 2),
        (1, 3, 4),
        (1, 4, 8),
        (0.5, 1, 0.5),
        (0.25, 3, 1.0),
        (0, 5, 0),
    ],
)
def test_backoff_doubles_from_the_backoff_itself(backoff, attempt, delay):
    assert runner.backoff_delay(backoff, attempt) == delay


@freeze_time("2026-01-02 03:04:05.678")
def test_iso_utc_has_milliseconds_and_an_offset():
    text = runner.iso_utc(time.time())
    assert text == "2026-01-02T03:04:05.678+00:00"
    assert datetime.fromisoformat(text) == datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)


@freeze_time("2026-01-02 03:04:05")
def test_run_record_is_one_json_line_with_int_fields():
    line = runner.run_record(["printf", "%s", "a b"], 2, 124, time.time(), 1.0004)
    assert line.endswith("\n") and line.count("\n") == 1
    record = json.loads(line)
    assert record == {
        "ts": "2026-01-02T03:04:05.000+00:00",
        "cmd": ["printf", "%s", "a b"],
        "attempt": 2,
        "rc": 124,
        "duration_ms": 1000,
    }
    assert all(type(record[key]) is int for key in ("attempt", "rc", "duration_ms"))


@pytest.mark.parametrize(
    "word",
    [
        "",
        "plain",
        "a b",
        'quote " and \\ back',
        "tab\tnew\nline\r",
        "\x00\x01\x1f\x7f",
        "日本語 ✓",
        "\udcff\udc80 (undecodable argv bytes)",
        "\U0001f600",
        "</script>",
        "\\u0041",
    ],
)
def test_json_string_reads_back_exactly(word):
    assert json.loads(runner.json_string(word)) == word
    assert json.loads(runner.run_record([word], 1, 0, 0.0, 0.0))["cmd"] == [word]


def test_json_string_writes_what_json_dumps_writes_for_printable_text():
    for word in ["a b", 'q"', "back\\slash", "日本", "ctl\x01"]:
        assert runner.json_string(word) == json.dumps(word, ensure_ascii=False)


def test_duration_is_rounded_to_whole_milliseconds():
    assert json.loads(runner.run_record(["x"], 1, 0, 0.0, 0.0015))["duration_ms"] == 2
    assert json.loads(runner.run_record(["x"], 1, 0, 0.0, 0.0))["duration_ms"] == 0


class TestParseRun:
    def test_options_then_command(self):
        args = runner.parse_args(["run", "--timeout", "1", "--retries", "2", "--backoff", "0.5", "--", "ls", "-l"])
        assert args == {"action": "run", "timeout": 1.0, "retries": 2, "backoff": 0.5, "cmd": ["ls", "-l"]}

    def test_defaults(self):
        assert runner.parse_args(["run", "--", "true"]) == {
            "action": "run",
            "timeout": None,
            "retries": 0,
            "backoff": 0.0,
            "cmd": ["true"],
        }

    def test_equals_form(self):
        assert runner.parse_args(["run", "--timeout=2.5", "--", "true"])["timeout"] == 2.5

    def test_everything_after_dashes_is_the_command(self):
        args = runner.parse_args(["run", "--", "echo", "--timeout", "3", "--"])
        assert args["cmd"] == ["echo", "--timeout", "3", "--"] and args["timeout"] is None

    def test_command_without_dashes(self):
        assert runner.parse_args(["run", "echo", "-n", "x"])["cmd"] == ["echo", "-n", "x"]

    @pytest.mark.parametrize(
        "argv,message",
        [
            (["run"], "no command"),
            (["run", "--"], "no command"),
            (["run", "--timeout"], "needs a value"),
            (["run", "--timeout", "soon", "--", "true"], "needs a number"),
            (["run", "--timeout", "0", "--", "true"], "more than 0"),
            (["run", "--timeout", "-1", "--", "true"], "more than 0"),
            (["run", "--timeout", "nan", "--", "true"], "finite"),
            (["run", "--backoff", "inf", "--", "true"], "finite"),
            (["run", "--retries", "1.5", "--", "true"], "needs a number"),
            (["run", "--retries", "-1", "--", "true"], "at least 0"),
            (["run", "--bogus", "--", "true"], "unknown option"),
            (["fly"], "unknown action"),
            ([], "no action"),
        ],
    )
    def test_usage_errors(self, argv, message):
        with pytest.raises(runner.UsageError, match=message):
            runner.parse_args(argv)


class TestParseApply:
    def test_name(self):
        assert runner.parse_args(["apply", "db"]) == {"action": "apply", "dry_run": False, "name": "db"}

    @pytest.mark.parametrize("argv", [["apply", "--dry-run", "db"], ["apply", "db", "--dry-run"]])
    def test_dry_run_either_side(self, argv):
        assert runner.parse_args(argv) == {"action": "apply", "dry_run": True, "name": "db"}

    def test_dashes_allow_a_name_starting_with_a_dash(self):
        assert runner.parse_args(["apply", "--", "-x"])["name"] == "-x"

    @pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../x", "/abs", "nul\0"])
    def test_names_that_leave_state_are_refused(self, name):
        with pytest.raises(runner.UsageError, match="invalid NAME"):
            runner.parse_args(["apply", name])

    @pytest.mark.parametrize("argv", [["apply"], ["apply", "a", "b"], ["apply", "--force", "a"]])
    def test_usage_errors(self, argv):
        with pytest.raises(runner.UsageError):
            runner.parse_args(argv)


def test_main_usage_error_is_one_line_and_exit_2(capsys):
    assert runner.main(["run", "--timeout", "x", "--", "true"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "Traceback" not in err


def test_main_help(capsys):
    assert runner.main(["--help"]) == 0
    assert "runner.py run" in capsys.readouterr().out

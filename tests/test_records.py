"""The runs.jsonl reader against whatever a learner's runner may write: it never raises, and
every malformed line or field becomes a clause failure that quotes it (property-based)."""

import json
import math
from datetime import datetime
from types import SimpleNamespace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conformance.harness.result import Result
from conformance.judging import expect
from conformance.lab import records
from conformance.lab.records import MAX_DIGITS, FieldProblem, Record, parse

# The runs.jsonl reader's verdicts, judged by grading: the same on every interpreter (tox.ini runs it once).
pytestmark = pytest.mark.once

# JSON a record may hold: no NaN or infinities, no numbers longer than any exit code.
small_ints = st.integers(min_value=-(10 ** (MAX_DIGITS - 1)), max_value=10 ** (MAX_DIGITS - 1))
json_values = st.recursive(
    st.none() | st.booleans() | small_ints | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=12), json_values, max_size=8)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=4096))
@example(b"[" * 100_000)
@example(b"{" * 30_000)
@example(b"\xef\xbb\xbf{}\n")
@example(b"\xff\xfe\n\x00")
@example(b'{"rc": ' + b"9" * 5000 + b"}")
def test_any_bytes_give_one_record_per_line_and_no_exception(data):
    found = parse(data)
    assert len(found) == len(data.splitlines())
    for number, record in enumerate(found, start=1):
        assert record.number == number
        assert record.ok == (record.problem is None)
        assert (record.value is not None) == record.ok
        if record.ok:
            assert isinstance(record.value, dict)
        else:
            assert isinstance(record.problem, str) and record.problem
        record.shown()  # always printable


# Generating nested objects is the cost here (15 CPU-s for 300 examples of up to five): fewer and
# shorter files find the same (a line is read alone, so more lines add little).
@settings(max_examples=150, deadline=None)
@given(st.lists(json_objects, min_size=1, max_size=3), st.sampled_from([b"\n", b"\r\n"]))
def test_well_formed_objects_read_back_as_written(objects, newline):
    data = b"".join(json.dumps(obj).encode() + newline for obj in objects)
    found = parse(data)
    assert [record.problem for record in found] == [None] * len(objects)
    assert [record.value for record in found] == objects


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(records.KEYS + ("extra",)), json_values)
def test_a_field_of_any_value_is_typed_or_a_field_problem(key, value):
    record = Record(1, b"(line)", value={key: value})
    try:
        got = record.field(key)
    except FieldProblem as problem:
        assert problem.expected and problem.actual
        return
    if key in ("attempt", "rc", "duration_ms"):
        assert type(got) is int
    elif key == "ts":
        assert isinstance(got, datetime)
    elif key == "cmd":
        assert isinstance(got, list) and all(isinstance(word, str) for word in got)


@pytest.mark.parametrize(
    "line,problem",
    [
        (b"", "blank"),
        (b"   ", "blank"),
        (b"\xef\xbb\xbf{}", "byte order mark"),
        (b"[" * 20_000 + b"]" * 20_000, "nested too deeply"),
        (b"[" * 100_000, "longer than any record"),
        (b'{"rc": NaN}', "NaN is not JSON"),
        (b'{"rc": Infinity}', "Infinity is not JSON"),
        (b'{"rc": -Infinity}', "Infinity is not JSON"),
        (b'{"rc": 1e999}', "out of range"),
        (b'{"rc": ' + b"9" * 5000 + b"}", "5000 digits"),
        (b'{"rc": 1, "rc": 2}', "'rc' appears twice"),
        (b'{"rc": 1', "not JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[1, 2]", "a list, not a JSON object"),
        (b'"text"', "a string, not a JSON object"),
        (b"null", "null, not a JSON object"),
    ],
)
def test_each_malformed_line_says_why(line, problem):
    (record,) = parse(line + b"\n")
    assert not record.ok
    assert problem in record.problem


@pytest.mark.parametrize(
    "value,key,expected",
    [
        ({}, "duration_ms", "the key 'duration_ms'"),
        ({"duration": 3}, "duration_ms", "the key 'duration_ms'"),
        ({"rc": True}, "rc", "rc an int"),
        ({"rc": 1.0}, "rc", "rc an int"),
        ({"rc": "0"}, "rc", "rc an int"),
        ({"attempt": 0}, "attempt", "attempt an int of at least 1"),
        ({"duration_ms": -1}, "duration_ms", "duration_ms an int of at least 0"),
        ({"duration_ms": 12.5}, "duration_ms", "duration_ms an int of at least 0"),
        ({"cmd": "echo hi"}, "cmd", "cmd a list of strings"),
        ({"cmd": ["echo", 1]}, "cmd", "cmd a list of strings"),
        ({"ts": 1700000000.0}, "ts", "ts an ISO 8601 string"),
        ({"ts": "yesterday"}, "ts", "ts in ISO 8601"),
    ],
)
def test_a_wrong_field_names_what_was_expected(value, key, expected):
    with pytest.raises(FieldProblem) as raised:
        Record(1, json.dumps(value).encode(), value=value).field(key)
    assert raised.value.expected.startswith(expected)


def test_extra_keys_and_good_fields_are_read():
    line = b'{"ts": "2026-01-02T03:04:05Z", "cmd": ["true"], "attempt": 1, "rc": 0, "duration_ms": 3, "host": "x"}'
    (record,) = parse(line + b"\n")
    assert record.field("ts").utcoffset() is not None
    assert record.field("cmd") == ["true"]
    assert (record.field("attempt"), record.field("rc"), record.field("duration_ms")) == (1, 0, 3)
    assert record.field("host") == "x"


def test_non_finite_floats_never_reach_a_check():
    (record,) = parse(b'{"duration_ms": 1e400, "rc": -1e400}\n')
    assert not record.ok and "out of range" in record.problem
    assert not any(isinstance(v, float) and math.isinf(v) for v in (record.value or {}).values())


# ------------------------------------------------------------------ the same through expect


def result_with_runs(tmp_path, data: bytes) -> Result:
    (tmp_path / "runs.jsonl").write_bytes(data)
    lab = SimpleNamespace(sub=tmp_path, work=tmp_path / "work")  # the lab's files, read as a check reads them
    return Result(["run", "--", "true"], 0, None, 0.1, 0.0, 0.0, b"", b"", [], lab)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(
    data=st.binary(max_size=512)
    | st.lists(json_objects, max_size=3).map(lambda objs: b"".join(json.dumps(obj).encode() + b"\n" for obj in objs))
)
def test_expect_turns_any_runs_jsonl_into_a_pass_or_a_clause_failure(tmp_path_factory, data):
    result = result_with_runs(tmp_path_factory.mktemp("lab"), data)
    saved = expect.LANG
    try:
        for lang, label in (("en", "expected:"), ("ja", "期待:")):  # the same judgement in each language
            expect.LANG = lang
            try:
                found = expect.records(result, 1)
                for key in records.KEYS:
                    expect.field(result, found[0], key)
            except expect.ClauseFailure as failure:
                assert failure.clause in ("S7.1", "S7.2")
                assert label in str(failure)
    finally:
        expect.LANG = saved


def test_a_missing_key_fails_s7_2_quoting_the_line(tmp_path):
    result = result_with_runs(tmp_path, b'{"ts": "2026-01-02T03:04:05+00:00", "cmd": [], "attempt": 1, "rc": 0}\n')
    (record,) = expect.records(result, 1)
    with pytest.raises(expect.ClauseFailure) as raised:
        expect.field(result, record, "duration_ms")
    assert raised.value.clause == "S7.2"
    assert 'in line 1: {"ts"' in str(raised.value)


def test_a_deeply_nested_line_fails_s7_1(tmp_path):
    result = result_with_runs(tmp_path, b"[" * 20_000 + b"]" * 20_000 + b"\n")
    with pytest.raises(expect.ClauseFailure) as raised:
        expect.records(result, 1)
    assert raised.value.clause == "S7.1"
    assert "nested too deeply" in str(raised.value)


def test_every_evidence_hint_is_said_in_both_languages():
    # A key missing from one language would fall back to English in the middle of a Japanese report.
    tables = (expect._FIELD_WORDS, expect._LOCK_WORDS, expect._SURVIVOR_WORDS, expect._EVIDENCE_WORDS)
    for table in tables + (expect._SCHEDULE_WORDS, expect._HUNG_WORDS, expect._JUDGEMENT_WORDS):
        assert set(table["en"]) == set(table["ja"]), sorted(set(table["en"]) ^ set(table["ja"]))


@pytest.mark.parametrize(
    "line,key,says",
    [
        (b'{"ts": 1700000000.5}', "ts", "ts is a number of seconds"),
        (b'{"ts": "Tue Dec  1 10:00:00 2026"}', "ts", "is not ISO 8601"),
        (b'{"cmd": "echo hi"}', "cmd", "cmd is one string"),
        (b'{"attempt": 0}', "attempt", "attempt counts from 1"),
        (b'{"rc": "0"}', "rc", "rc is a string"),
        (b'{"rc": true}', "rc", "rc is a boolean"),
        (b'{"duration_ms": 12.5}', "duration_ms", "duration_ms is a float"),
        (b'{"exit_code": 0}', "rc", "the key is `rc`, not `exit_code`"),
        (b'{"other": 0}', "rc", "add `rc`"),
    ],
)
def test_a_runs_jsonl_hint_names_the_mistake_the_value_shows(line, key, says):
    record = parse(line + b"\n")[0]
    with pytest.raises(FieldProblem) as problem:
        record.field(key)
    assert says in expect.field_hint(problem.value, "en")
    assert expect.field_hint(problem.value, "ja")


@pytest.mark.parametrize(
    "waits,mistake",
    [
        ([0.01, 0.02, 0.01], "none"),
        ([1.0, 1.02, 0.98], "constant"),
        ([1.0, 2.01, 3.02], "linear"),
        ([2.01, 4.0, 8.02], "one_late"),
        ([2.02], "one_late"),
        ([0.51, 1.0, 2.02], "one_early"),
        ([1.0, 2.0, 6.5], None),  # wrong, but like no known mistake: the clause's own hint
        ([1.7], None),
    ],
)
def test_a_backoff_schedule_s_shape_names_the_mistake(waits, mistake):
    hint = expect.schedule_hint(waits)
    if mistake is None:
        assert hint is None
    else:
        wanted = expect._SCHEDULE_WORDS["en"][mistake]
        assert hint == (wanted if "%s" not in wanted else wanted % ", ".join("%.1f" % w for w in waits))


# A line for every kind of problem that keeps it from being a record.
LINES_BY_PROBLEM = {
    "blank": b"  ",
    "bom": b"\xef\xbb\xbf{}",
    "too_long": b"1" * (records.MAX_LINE + 1),
    "not_utf8": b"\xff",
    "too_deep": b"[" * 30000 + b"]" * 30000,  # under MAX_LINE, deeper than any recursion limit
    "not_json": b"{",
    "not_object": b"null",
    "twice": b'{"a": 1, "a": 2}',
    "constant": b"NaN",
    "digits": b"1" * (records.MAX_DIGITS + 1),
    "out_of_range": b"1e999",
}


def test_every_line_problem_has_a_line_that_shows_it():
    assert set(LINES_BY_PROBLEM) == set(records.LINE_PROBLEMS)


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("kind", sorted(LINES_BY_PROBLEM))
def test_a_line_problem_is_worded_in_each_language(kind, lang):
    record = records.parse_line(1, LINES_BY_PROBLEM[kind])
    assert record.problem_kind == kind
    text = expect.line_problem(record, lang)
    assert text and (text == record.problem) == (lang == "en")
    assert lang == "en" or any(ord(c) > 127 for c in text), text


def test_a_control_character_written_raw_in_a_string_is_not_json_and_says_where():
    record = records.parse_line(1, b'{"cmd": ["a\x1fb"]}')
    assert record.problem_kind == "not_json"
    assert record.problem == "not JSON (Invalid control character, at column 12)"

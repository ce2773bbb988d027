"""The one reader of runs.jsonl: bytes in, one Record per line out, never an exception.

A learner's file may hold anything (a missing key, a float, a line of a million brackets, bytes
that are not UTF-8). Each line becomes a Record that is either one JSON object or says why not,
and each field is read through `Record.field`, which returns the value with the type S7.2 names
or raises FieldProblem saying what is wrong. Checks turn both into clause failures that quote the
line, so a malformed file is the runner's failure, never an error of the suite.
"""

import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Dict, List, Optional, Tuple

# A record is a few hundred bytes; a longer line is refused unread (parsing a megabyte of digits
# or brackets costs seconds and recursion, and proves nothing more).
MAX_LINE = 64 * 1024
# No exit code, attempt or duration needs more digits; Python would parse a 4000-digit number
# slowly or not at all (3.11+ limits int() to 4300 digits), so longer ones are refused first.
MAX_DIGITS = 30
KEYS = ("ts", "cmd", "attempt", "rc", "duration_ms")


class FieldProblem(Exception):
    """A key of a record is missing or has the wrong type: `expected` and `actual`, for a message.

    `key` and `kind` (missing, type, format, minimum; line: no object at all) say what exactly, and `value` what was
    there (the record's keys, when the key was missing): a hint can then name the mistake.
    """

    def __init__(self, expected: str, actual: str, key: str = "", kind: str = "", value: Any = None) -> None:
        super().__init__("%s; %s" % (expected, actual))
        self.expected = expected
        self.actual = actual
        self.key = key
        self.kind = kind
        self.value = value


def is_int(value: Any) -> bool:
    """An int as JSON means it: not a bool (True is an int in Python), not a float."""
    return isinstance(value, int) and not isinstance(value, bool)


def parse_ts(text: str) -> datetime:
    """ISO 8601 as datetime.fromisoformat reads it, a trailing Z allowed (3.8-3.10 lack it)."""
    return datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)


def _ts(key: str, value: Any) -> datetime:
    if not isinstance(value, str):
        raise FieldProblem("ts an ISO 8601 string", "ts %s" % _typed(value), key, "type", value)
    try:
        return parse_ts(value)
    except ValueError:
        expected = "ts in ISO 8601 (datetime.fromisoformat parses it)"
        raise FieldProblem(expected, "ts %s" % _typed(value), key, "format", value) from None


def _cmd(key: str, value: Any) -> List[str]:
    if not isinstance(value, list) or not all(isinstance(word, str) for word in value):
        raise FieldProblem("cmd a list of strings", "cmd %s" % _typed(value), key, "type", value)
    return value


def _counting(minimum: int) -> Callable[[str, Any], int]:
    def check(key: str, value: Any) -> int:
        if not is_int(value) or value < minimum:
            kind = "minimum" if is_int(value) else "type"
            raise FieldProblem(
                "%s an int of at least %d" % (key, minimum), "%s %s" % (key, _typed(value)), key, kind, value
            )
        return value

    return check


def _int(key: str, value: Any) -> int:
    if not is_int(value):
        raise FieldProblem("%s an int" % key, "%s %s" % (key, _typed(value)), key, "type", value)
    return value


# The smallest value of each counting key (attempts count from 1).
MINIMUMS = {"attempt": 1, "duration_ms": 0}
_FIELDS: Dict[str, Callable[[str, Any], Any]] = {
    "ts": _ts,
    "cmd": _cmd,
    "attempt": _counting(MINIMUMS["attempt"]),
    "rc": _int,
    "duration_ms": _counting(MINIMUMS["duration_ms"]),
}


def _typed(value: Any) -> str:
    return "%s (%s)" % (json_text(value), json_type(value))


def json_text(value: Any) -> str:
    """`value` as JSON, cut to 80 characters, for a message."""
    shown = json.dumps(value, ensure_ascii=False) if value is not None else "null"
    return shown if len(shown) <= 80 else shown[:77] + "..."


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if is_int(value):
        return "an int"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "null"


@dataclass(frozen=True)
class Record:
    """One line of runs.jsonl (numbered from 1): its object, or the problem that keeps it from being one."""

    number: int
    line: bytes
    value: Optional[Dict[str, Any]] = None
    problem: Optional[str] = None
    # The problem as data, for other languages: a key of LINE_PROBLEMS and what fills it in.
    problem_kind: Optional[str] = None
    problem_values: Tuple[Any, ...] = ()

    @property
    def ok(self) -> bool:
        return self.problem is None

    def field(self, key: str) -> Any:
        """The value of `key` with the type S7.2 gives it; FieldProblem if missing or mistyped."""
        if self.value is None:
            raise FieldProblem("a JSON object", self.problem or "no object", kind="line", value=self)
        if key not in self.value:
            shown = "keys: %s" % (", ".join(sorted(self.value)) or "(none)")
            raise FieldProblem("the key %r" % key, shown, key, "missing", sorted(self.value))
        check = _FIELDS.get(key)
        return self.value[key] if check is None else check(key, self.value[key])

    def shown(self, limit: int = 160, more: str = "... (%d bytes in all)") -> str:
        """The line as it is in the file, cut to `limit` characters (then `more` says its length)."""
        text = self.line.decode("utf-8", "backslashreplace")
        return text if len(text) <= limit else text[:limit] + more % len(self.line)


def parse(data: bytes) -> List[Record]:
    """Every line of `data` as a Record. Never raises: whatever the bytes, the problem is data."""
    return [parse_line(number, line) for number, line in enumerate(data.splitlines(), start=1)]


def parse_line(number: int, line: bytes) -> Record:
    problem = _line_problem(line)
    if problem:
        return _broken(number, line, *problem)
    try:
        value = json.loads(
            line.decode("utf-8"),
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_int=_bounded_int,
            parse_float=_finite_float,
        )
    except UnicodeDecodeError:
        return _broken(number, line, "not_utf8")
    except _Refused as refused:
        return _broken(number, line, *refused.args)
    except RecursionError:
        return _broken(number, line, "too_deep")
    except ValueError as error:  # json's JSONDecodeError: one line, so its column says where
        message = getattr(error, "msg", str(error))
        if message.endswith(" at"):  # "Invalid control character at": the column follows
            message = message[: -len(" at")]
        return _broken(number, line, "not_json", message, getattr(error, "colno", 0))
    if not isinstance(value, dict):
        return _broken(number, line, "not_object", json_type(value))
    return Record(number, line, value=value)


# What keeps a line from being a record, in English (expect.py words them in other languages).
LINE_PROBLEMS = {
    "blank": "a blank line",
    "bom": "starts with a byte order mark (write plain UTF-8)",
    "too_long": "a line of %d bytes, longer than any record could be",
    "not_utf8": "not UTF-8",
    "too_deep": "nested too deeply to be a record",
    "not_json": "not JSON (%s, at column %d)",
    "not_object": "%s, not a JSON object",
    "twice": "the key %r appears twice",
    "constant": "%s is not JSON (json.dumps(..., allow_nan=False) refuses it)",
    "digits": "a number of %d digits",
    "out_of_range": "the number %s is out of range",
}


def _broken(number: int, line: bytes, kind: str, *values: Any) -> Record:
    return Record(number, line, problem=LINE_PROBLEMS[kind] % values, problem_kind=kind, problem_values=values)


def _line_problem(line: bytes) -> Optional[Tuple[Any, ...]]:
    """(kind, values...) of what keeps `line` from being read as JSON at all, or None."""
    if not line.strip():
        return ("blank",)
    if line.startswith(b"\xef\xbb\xbf"):
        return ("bom",)
    if len(line) > MAX_LINE:
        return ("too_long", len(line))
    return None


class _Refused(ValueError):
    """Valid to Python's json module, but not JSON a record may hold."""


def _no_duplicates(pairs: List[Any]) -> Dict[str, Any]:
    seen: Dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Refused("twice", key)
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise _Refused("constant", name)


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise _Refused("digits", len(text.lstrip("-")))
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused("out_of_range", text[:40])
    return value

"""Every hint the suite can give names a cause only where its evidence shows that cause.

HINTS is the table: each hint of expect.py's tables, the cause it claims and the evidence that
cause needs, as a predicate of what the grader saw. Each judgement that chooses a hint is run over
a grid of evidence, and every hint it gives must have its evidence there: a hint whose condition
lets it be given where the evidence says otherwise (the LOCK_NB hint for a runner that went ahead
while the lock stayed held) fails here, with the evidence that contradicts it.
"""

import itertools
import re
from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

import pytest

from conformance.harness.result import ProcessInfo, Result
from conformance.judging import expect
from conformance.lab import timing
from conformance.lab.records import FieldProblem

Evidence = Mapping[str, object]
# (table, key) -> (the cause the hint claims, the evidence that cause needs)
HINTS: Dict[Tuple[str, str], Tuple[str, Optional[Callable[[Evidence], bool]]]] = {}


def hint(table: str, key: str, claims: str, needs: Optional[Callable[[Evidence], bool]]) -> None:
    HINTS[(table, key)] = (claims, needs)


def _running_when_let_go(e: Evidence) -> bool:
    started = float(e["ended"]) - float(e["duration_s"])  # type: ignore[arg-type]
    return e["let_go"] is not None and started < float(e["let_go"]) < float(e["ended"])  # type: ignore[arg-type]


def _went_ahead(e: Evidence) -> bool:
    return bool(e["applied_more"]) or e["rc"] == 0


# The lock (S5.2, S8.1): evidence is the runner's end, exit code, what it applied, and when the holder let go.
hint(
    "_LOCK_WORDS",
    "waited",
    "it waited for the lock",
    lambda e: e["rc"] is None or (_went_ahead(e) and _running_when_let_go(e)),
)
hint(
    "_LOCK_WORDS",
    "went_ahead",
    "it went ahead while the lock was held",
    lambda e: _went_ahead(e) and not _running_when_let_go(e) and not e["shared"],
)
hint(
    "_LOCK_WORDS",
    "went_ahead_shared",
    "it went ahead past a shared holder",
    lambda e: _went_ahead(e) and not _running_when_let_go(e) and bool(e["shared"]),
)
hint(
    "_LOCK_WORDS",
    "late",
    "it refused (or failed) late, without getting past the lock",
    lambda e: not _went_ahead(e) and float(e["duration_s"]) > timing.OVERHEAD_S,  # type: ignore[arg-type]
)
hint(
    "_LOCK_WORDS",
    "other_code",
    "it refused at once with another exit code",
    lambda e: not _went_ahead(e) and e["rc"] not in (None, 3),
)
hint("_LOCK_WORDS", "at_once", "(what a check expects: not a hint)", None)

# Processes left running: each one's SigIgn mask.
hint("_SURVIVOR_WORDS", "ignores", "the processes it names ignore SIGTERM", lambda e: e["ignores"] is True)
hint("_SURVIVOR_WORDS", "unsignalled", "the processes it names got no signal", lambda e: e["ignores"] is False)

# The backoff schedule: the waits measured between attempts (seconds, with --backoff 1).
SLACK = expect._SCHEDULE_SLACK_S


def _like(waits: Sequence[float], pattern: Sequence[float]) -> bool:
    return bool(waits) and all(abs(w - p) <= SLACK for w, p in zip(waits, pattern))


hint("_SCHEDULE_WORDS", "none", "it did not wait", lambda e: all(w < SLACK for w in e["waits"]))  # type: ignore[attr-defined]
hint("_SCHEDULE_WORDS", "constant", "the same wait each time", lambda e: _like(e["waits"], (1, 1, 1)))  # type: ignore[arg-type]
hint("_SCHEDULE_WORDS", "linear", "waits growing by the backoff", lambda e: _like(e["waits"], (1, 2, 3)))  # type: ignore[arg-type]
hint("_SCHEDULE_WORDS", "one_late", "the doubling one attempt late", lambda e: _like(e["waits"], (2, 4, 8)))  # type: ignore[arg-type]
hint("_SCHEDULE_WORDS", "one_early", "the doubling one attempt early", lambda e: _like(e["waits"], (0.5, 1, 2)))  # type: ignore[arg-type]
hint(
    "_SCHEDULE_WORDS",
    "after_last",
    "a wait after the last attempt",
    lambda e: float(e["after_last"]) > timing.OVERHEAD_S,  # type: ignore[arg-type]
)
hint("_SCHEDULE_WORDS", "one_wait", "(what a check expects: not a hint)", None)

# A runner that never finished: what it left running, and when that began.
hint("_HUNG_WORDS", "waiting", "it waited while processes remained", lambda e: bool(e["survivors"]))
hint(
    "_HUNG_WORDS",
    "not_killed",
    "its timed-out command was never signalled",
    lambda e: bool(e["itself_untouched"]) and bool(e["timeout"]),
)
hint(
    "_HUNG_WORDS",
    "not_forwarded",
    "SIGTERM never reached its command",
    lambda e: bool(e["itself_untouched"]) and str(e["clause"]).startswith("S6"),
)
hint("_HUNG_WORDS", "again", "it started the command after SIGTERM", lambda e: bool(e["began_after_term"]))

# A runs.jsonl line that is not JSON, but starts as an object.
hint("_BY_HAND_WORDS", "repr", "Python's dict notation", lambda e: bytes(e["line"]).startswith(b"{'"))  # type: ignore[call-overload]
hint(
    "_BY_HAND_WORDS",
    "format",
    "an object formatted by hand",
    lambda e: bytes(e["line"]).startswith(b"{") and not bytes(e["line"]).startswith(b"{'"),  # type: ignore[call-overload]
)

# A runs.jsonl value: the problem records.py found, and the value.
_FIELD_CLAIMS = {
    "renamed": ("a key near it was written instead", lambda e: e["kind"] == "missing" and e["near"]),
    "missing": ("the key is missing", lambda e: e["kind"] == "missing"),
    "attempt_from_1": ("attempt counted from 0", lambda e: e["kind"] == "minimum" and e["key"] == "attempt"),
    "negative": ("a value below 0", lambda e: e["kind"] == "minimum"),
    "ts_format": ("ts not ISO 8601", lambda e: e["kind"] == "format"),
    "ts_number": ("ts a number", lambda e: e["key"] == "ts" and isinstance(e["value"], (int, float))),
    "ts_type": ("ts not a string", lambda e: e["key"] == "ts" and not isinstance(e["value"], str)),
    "cmd_string": ("cmd one string", lambda e: e["key"] == "cmd" and isinstance(e["value"], str)),
    "cmd_items": ("cmd not a list of strings", lambda e: e["key"] == "cmd"),
    "bool": ("a boolean", lambda e: isinstance(e["value"], bool)),
    "duration_float": ("duration_ms a float", lambda e: e["key"] == "duration_ms" and isinstance(e["value"], float)),
    "float": ("a float", lambda e: isinstance(e["value"], float)),
    "string": ("a string", lambda e: isinstance(e["value"], str)),
}
for _key, (_claims, _needs) in _FIELD_CLAIMS.items():
    hint("_FIELD_WORDS", _key, _claims, _needs)

# A lab file left as something else: the hint names the file the grader refused, by construction.
hint("_REFUSED_WORDS", "hint", "the file is not a regular one", lambda e: bool(e["refused"]))
hint("_REFUSED_WORDS", "expected", "(what a check expects: not a hint)", None)
hint("_REFUSED_WORDS", "actual", "(what the grader saw: not a hint)", None)


def test_the_table_names_every_hint_of_the_suite():
    tables = {name for name, _ in HINTS}
    for name in tables:
        assert set(getattr(expect, name)["en"]) == {key for table, key in HINTS if table == name}, name
    # Every table of words a failure's hint is chosen from is in HINTS.
    chosen = {name for name in dir(expect) if re.fullmatch(r"_[A-Z_]+_WORDS", name)}
    # The evidence, the checks' own words, and what a runs.jsonl line is (an actual value).
    not_hints = {"_EVIDENCE_WORDS", "_JUDGEMENT_WORDS", "_LINE_PROBLEM_WORDS"}
    assert chosen - not_hints == tables


def which(text: str, table: str) -> str:
    """The key of `table` whose English words made `text`."""
    found = []
    for key, words in getattr(expect, table)["en"].items():
        pattern = re.escape(words)
        pattern = re.sub(r"%(\\\.\d)?[sdrgf]", ".*", pattern)
        if re.fullmatch(pattern, text, re.S):
            found.append(key)
    assert len(found) == 1, (text, found)
    return found[0]


def contradicted(table: str, key: str, evidence: Evidence) -> str:
    claims, needs = HINTS[(table, key)]
    assert needs is not None, "%s.%s is given as a hint" % (table, key)
    return "" if needs(evidence) else "%s.%s claims %s; the evidence: %s" % (table, key, claims, dict(evidence))


def outcome(rc, duration_s, applied=(), hung=False):
    return Result(
        args=["apply", "feature"],
        rc=rc,
        hung_after_s=duration_s if hung else None,
        duration_s=duration_s,
        ended_at=1764633600.0 + duration_s,
        ended=100.0 + duration_s,
        stdout=b"",
        stderr=b"",
        survivors=[],
        lab=None,  # type: ignore[arg-type]
        lab_files={"runs": b"", "applied": list(applied), "markers": [], "work": {}},
    )


def lock_failure_hint(result, shared, others=(), let_go=None) -> str:
    with pytest.raises(expect.ClauseFailure) as failure:
        expect.refused_by_lock(result, shared, "S5.2", others, let_go=let_go)
    line = next(line for line in str(failure.value).splitlines() if line.startswith("  hint:"))
    return line.split(":", 1)[1].strip()


def test_every_lock_hint_has_its_evidence():
    wrong = []
    for rc, duration, applied_more, shared, let_go in itertools.product(
        (None, 0, 1, 2), (0.05, timing.OVERHEAD_S + 2), (False, True), (False, True), (None, 99.0, 100.03, 200.0)
    ):
        result = outcome(rc, duration, ["first", "second"] if applied_more else ["first"], hung=rc is None)
        given = which(lock_failure_hint(result, shared, ["first"], let_go), "_LOCK_WORDS")
        evidence = {
            "rc": rc,
            "duration_s": duration,
            "ended": result.ended,
            "applied_more": applied_more,
            "shared": shared,
            "let_go": let_go,
        }
        wrong.append(contradicted("_LOCK_WORDS", given, evidence))
    assert not [line for line in wrong if line], "\n".join(line for line in wrong if line)


def test_a_runner_that_went_ahead_late_while_the_lock_stayed_held_is_not_told_it_waited():
    # The holder never let go: a runner that ended 3s later with exit 0 and its line in
    # applied.log got past a lock held all along. It did not wait for it.
    said = lock_failure_hint(outcome(0, 3.0, ["feature"]), False)
    assert "went ahead while another process held state/lock" in said and "waited" not in said, said


def test_a_runner_that_retries_a_non_blocking_lock_then_gives_up_is_not_told_it_lacks_lock_nb():
    # A loop of LOCK_NB tries that gives up after 3s with exit 1: its flock never blocked.
    said = lock_failure_hint(outcome(1, 3.0), False)
    assert "answered only after 3.00s, with exit code 1" in said and "without LOCK_NB" not in said, said


def test_a_second_apply_that_went_on_once_the_first_let_go_is_told_it_waited():
    # Running when the first apply ended (at 101.0), and applied after it.
    said = lock_failure_hint(outcome(0, 3.0, ["first", "second"]), False, ["first"], let_go=101.0)
    assert which(said, "_LOCK_WORDS") == "waited", said
    # Started after the first had let go: it never met the lock held.
    said = lock_failure_hint(outcome(0, 3.0, ["first", "second"]), False, ["first"], let_go=99.0)
    assert which(said, "_LOCK_WORDS") == "went_ahead", said


def test_every_survivor_hint_has_its_evidence():
    for flags in itertools.chain.from_iterable(itertools.product((False, True), repeat=n) for n in (1, 2, 3)):
        survivors = [ProcessInfo(pid=10 + i, argv=["sleep", str(i)], ignores_term=f) for i, f in enumerate(flags)]
        said = expect.survivor_hint(survivors, "en")
        for process in survivors:
            named = "`sleep %d` (pid %d)" % (int(process.argv[1]), process.pid)
            part = next(p for p in re.split(r"(?<=\.) (?=`)", said) if named in p)
            assert not contradicted(
                "_SURVIVOR_WORDS", which(part, "_SURVIVOR_WORDS"), {"ignores": process.ignores_term}
            )


def test_every_schedule_hint_has_its_evidence():
    steps = (0.0, 0.2, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0)
    for n in (1, 2, 3):
        for waits in itertools.product(steps, repeat=n):
            said = expect.schedule_hint(list(waits))
            if said is not None:
                key = which(said, "_SCHEDULE_WORDS")
                assert not contradicted("_SCHEDULE_WORDS", key, {"waits": waits}), waits


def test_every_hung_hint_has_its_evidence():
    command = ["sleep", "60"]
    wrong = []
    for clause, timeout, itself, ignores, after_term in itertools.product(
        ("S2.1", "S6.1", "S1.3"), (False, True), (False, True), (False, True), (False, True)
    ):
        args = ["run"] + (["--timeout", "1"] if timeout else []) + ["--", *command]
        survivor = ProcessInfo(
            pid=7,
            argv=command if itself else ["python3", "-c", "pass"],
            ignores_term=ignores,
            group_started=60.0 if after_term else 10.0,
        )
        result = Result(
            args=args,
            rc=None,
            hung_after_s=5.0,
            duration_s=5.0,
            ended_at=0.0,
            ended=105.0,
            stdout=b"",
            stderr=b"",
            survivors=[survivor],
            lab=None,  # type: ignore[arg-type]
            terminated_at=50.0,
        )
        said, _charged = expect._why_hung(result, clause)
        assert said is not None
        evidence = {
            "survivors": [survivor],
            "itself_untouched": itself and not ignores,
            "timeout": timeout,
            "clause": clause,
            "began_after_term": after_term,
        }
        wrong.append(contradicted("_HUNG_WORDS", which(said, "_HUNG_WORDS"), evidence))
    assert not [line for line in wrong if line], "\n".join(line for line in wrong if line)


def test_every_runs_jsonl_hint_has_its_evidence():
    import json

    from conformance.lab.records import parse_line

    good = {"ts": "2025-12-01T00:00:00+00:00", "cmd": ["true"], "attempt": 1, "rc": 0, "duration_ms": 3}
    values = (None, True, 1, 1.5, -1, 0, "1", "x", "Mon Dec  1 00:00:00 2025", ["a"], [1], {}, 1764633600.5)
    records = [dict(good, **{key: value}) for key in good for value in values]
    records += [
        {name if name != key else alias: v for name, v in good.items()}
        for key in good
        for alias in expect._KEY_ALIASES[key] + ("other",)
    ]
    for data in records:
        record = parse_line(1, json.dumps(data).encode())
        for key in good:
            try:
                record.field(key)
            except FieldProblem as problem:
                said = expect.field_hint(problem, "en")
                if said is None:
                    continue
                near = problem.kind == "missing" and any(name in expect._KEY_ALIASES[key] for name in data)
                evidence = {"kind": problem.kind, "key": key, "value": data.get(key), "near": near}
                assert not contradicted("_FIELD_WORDS", which(said, "_FIELD_WORDS"), evidence), data


def test_every_hand_built_line_hint_has_its_evidence():
    from conformance.lab.records import parse_line  # the line as runs.jsonl's reader reads it

    for line in (b"{'ts': 1}", b'{"cmd": ["a "b"]}', b"{ts: 1}", b"[1, 2", b"not json", b"{ 'a': 1}"):
        record = parse_line(1, line)
        said = expect._built_by_hand_hint(record)
        if said is not None:
            stripped = line.replace(b"{ ", b"{")
            assert not contradicted("_BY_HAND_WORDS", which(said, "_BY_HAND_WORDS"), {"line": stripped}), line

"""The learner's view, whole, against a committed snapshot in each language.

Each failure below is made by the suite's own judgements (expect.*) from a fixed runner outcome,
so the snapshot shows exactly what a learner reads: each failed clause once with its cause, the
evidence and a hint chosen from it, the other checks that saw it a line each, a clause blocked by
another's failure, and a harness error set apart. A change to
any wording shows up here as a diff to review; after an intended change, regenerate with
PYOPS_UPDATE_SNAPSHOTS=1 and commit the files.
"""

import json
import os
from pathlib import Path

import pytest

from conformance.checks import test_s3_retries as s3_checks  # a module: its checks are not collected here
from conformance.harness import labfiles
from conformance.harness.result import ProcessInfo, Result
from conformance.judging import expect
from conformance.lab import config
from conformance.reporting import platforms, view

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
HANG = "/opt/fixtures/pyops/bin/hang.sh"
COUNTED = 'date +%s.%N >> "/lab/work/calls"; exit 1'


def outcome(args, rc, duration_s, stdout=b"", stderr=b"", survivors=(), runs=b"", applied=(), markers=()):
    """A runner's outcome as the harness records it, with no lab behind it."""
    files = {"runs": runs, "applied": list(applied), "markers": list(markers)}
    return Result(
        args=list(args),
        rc=rc,
        hung_after_s=None,
        duration_s=duration_s,
        ended_at=1764633600.0 + duration_s,
        ended=100.0 + duration_s,
        stdout=stdout,
        stderr=stderr,
        survivors=list(survivors),
        lab=None,  # type: ignore[arg-type]
        lab_files=dict(files, work={}, counter=labfiles.LabFile("calls")),
    )


class StubRunner:
    """The `runner` fixture of a check, handing it one fixed outcome for the scenario it plays."""

    def __init__(self, fields):
        self.lab = type("Lab", (), {"work": Path("/lab/work"), "counter": Path("/lab/work/calls")})()
        self._fields = fields

    def observe(self, *args, **options):
        fields = dict(self._fields)
        calls = fields.pop("work").get("calls", b"")
        result = outcome(fields.pop("args"), fields.pop("rc"), 3.1)
        # What the counted command wrote, as read where the lab has no witness of its calls.
        result.lab_files["counter"] = labfiles.LabFile("calls", exists=bool(calls), data=calls)
        return result


def judged(test_id, judge, check_clause=None):
    """The report entry of a check (of `check_clause`, else of the clause it broke) whose `judge()` fails."""
    with pytest.raises(expect.ClauseFailure) as failure:
        judge()
    entry = {
        "id": test_id,
        "clause": check_clause or failure.value.clause,
        "outcome": "failed",
        "message": str(failure.value),
        "duration_s": 0.1,
    }
    if entry["clause"] != failure.value.clause:  # as the plugin records it (verdicts.py)
        entry["charged"] = failure.value.clause
    return entry


def passed(test_id, clause):
    return {"id": test_id, "clause": clause, "outcome": "passed", "message": "", "duration_s": 0.1}


def class_report():
    left_behind = outcome(
        ["run", "--timeout", "1", "--", HANG],
        124,
        1.04,
        stdout=b"hang.sh: started, sleeping 60s\n",
        stderr=b"timeout: killed after 1s\n",
        survivors=[ProcessInfo(4242, ("sleep", "60"))],
        runs=b'{"ts": "2026-12-02T00:00:00+00:00", "cmd": ["%s"], "attempt": 1, "rc": 124, "duration_ms": 1003}\n'
        % HANG.encode(),
    )
    retried_left_behind = outcome(
        ["run", "--timeout", "1", "--retries", "1", "--backoff", "0", "--", HANG],
        124,
        2.08,
        stdout=b"hang.sh: started, sleeping 60s\nhang.sh: started, sleeping 60s\n",
        stderr=b"timeout: killed after 1s\ntimeout: killed after 1s\n",
        survivors=[ProcessInfo(4250, ("sleep", "60")), ProcessInfo(4251, ("sleep", "60"))],
    )
    went_ahead = outcome(["apply", "feature"], 0, 0.08, stdout=b"apply.sh: applied feature\n", applied=["feature"])
    constant_outcome = {"args": ["run", "--retries", "3", "--backoff", "1", "--", "sh", "-c", COUNTED], "rc": 1}
    float_ts = outcome(
        ["run", "--", "true"],
        0,
        0.05,
        runs=b'{"ts": 1764633600.5, "cmd": ["true"], "attempt": 1, "rc": 0, "duration_ms": 3}\n',
    )

    def wrong_ts():
        record = expect.records(float_ts, 1)[0]
        expect.field(float_ts, record, "ts")

    def constant_waits():
        # The real check, judging a runner whose command started at these moments (1s apart each).
        calls = b"100.000000000\n101.000000000\n102.010000000\n103.020000000\n"
        s3_checks.test_s3_2_waits_double_each_time_measured_by_the_command(
            StubRunner(dict(constant_outcome, work={"calls": calls}))
        )

    return {
        "profile": "core",
        "tests": [
            judged("test_s7_2_ts_is_iso_8601_and_now", wrong_ts),
            passed("test_s1_3_true_and_false", "S1.3"),
            judged("test_s5_2_held_lock_exits_3[exclusive-holder]", lambda: expect.refused_by_lock(went_ahead, False)),
            judged(
                "test_s2_4_nothing_of_the_command_survives[hang.sh]", lambda: expect.no_survivors(left_behind, "S2.4")
            ),
            # A second check that failed on the same call the same way: shown once, counted.
            judged("test_s2_4_hang_sh_grandchild_sleep_is_killed", lambda: expect.no_survivors(left_behind, "S2.4")),
            judged("test_s3_2_waits_double_each_time_measured_by_the_command", constant_waits),
            # Found by a check of S3 but breaking S2.4: charged to S2.4, and S3.3 is blocked by it.
            judged(
                "test_s3_3_hang_sh_timed_out_twice_leaves_nothing",
                lambda: expect.no_survivors(retried_left_behind, "S2.4"),
                check_clause="S3.3",
            ),
            {
                "id": "test_s6_1_sigterm_reaches_the_command",
                "clause": "S6.1",
                "outcome": "error",
                "message": "HarnessTimeout: waited 5.0s for the runner",
                "duration_s": 5.0,
            },
        ],
    }


def matches_snapshot(shown: str, name: str) -> None:
    snapshot = SNAPSHOTS / name
    if os.environ.get("PYOPS_UPDATE_SNAPSHOTS") == "1":
        snapshot.parent.mkdir(exist_ok=True)
        snapshot.write_text(shown, encoding="utf-8")
    assert snapshot.is_file(), "no snapshot %s: run with PYOPS_UPDATE_SNAPSHOTS=1 and review it" % snapshot.name
    assert shown == snapshot.read_text(encoding="utf-8")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_learner_view_reads_as_its_snapshot(lang, monkeypatch):
    monkeypatch.setattr(expect, "LANG", lang)
    matches_snapshot("\n".join(view.render(class_report(), lang)) + "\n", "learner_view.%s.txt" % lang)


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("platform", ["gradescope", "prairielearn"])
def test_each_platforms_file_reads_as_its_snapshot(platform, lang, monkeypatch):
    # What a platform shows per clause (name, points, output) and above them (the step table).
    monkeypatch.setattr(expect, "LANG", lang)
    report = class_report()
    outcomes = [test["outcome"] for test in report["tests"]]
    counts = {name: outcomes.count(name) for name in ("passed", "failed", "error", "skipped")}
    report.update(isolation="namespace", summary=dict(counts, errors=counts.pop("error"), total=len(outcomes)))
    made = getattr(platforms, platform)(report, config.parse({"lang": lang, "points": {"S1": 4, "S2": 5, "S3": 4}}))
    matches_snapshot(json.dumps(made, ensure_ascii=False, indent=2) + "\n", "%s.%s.json" % (platform, lang))

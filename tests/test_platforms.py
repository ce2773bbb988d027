"""Each platform's result file, made from the suite's JSON report alone."""

import json

import pytest

from conformance.lab import config
from conformance.reporting import platforms

# The points of the two clauses of the report below (S1.1 and S2.3).
LAB = config.parse({"points": {"S1": 3, "S2": 1}})


def report(passed=3, failed=1, message="[S2.3] ...\n  expected: exit code 124"):
    tests = [
        {"id": "test_s1.py::test_ok[%d]" % n, "clause": "S1.1", "outcome": "passed", "message": "", "duration_s": 0.1}
        for n in range(passed)
    ] + [
        {
            "id": "test_s2.py::test_bad[%d]" % n,
            "clause": "S2.3",
            "outcome": "failed",
            "message": message,
            "duration_s": 1.0,
        }
        for n in range(failed)
    ]
    total = passed + failed
    summary = {"passed": passed, "failed": failed, "errors": 0, "skipped": 0, "total": total}
    return {"profile": "core", "isolation": "namespace", "summary": summary, "tests": tests}


def test_prairielearn_scores_a_fraction_and_names_each_clause():
    result = platforms.prairielearn(report(failed=2), LAB)
    assert result["gradable"] is True and result["score"] == 0.75
    # One test per clause, in the lab's order, with the clause's points.
    assert [(t["points"], t["max_points"]) for t in result["tests"]] == [(3, 3), (0, 1)]
    failed = result["tests"][-1]
    assert failed["name"].startswith("S2.3 ") and failed["description"] == failed["name"][len("S2.3 ") :]
    assert failed["message"] == "[S2.3] ..." and "expected: exit code 124" in failed["output"]
    # The cause once; the other check that saw it in one line.
    assert failed["output"].count("expected: exit code 124") == 1 and "- test bad [1]: " in failed["output"]
    assert "S1   " in result["output"] and "1 of 2 clauses passed" in result["message"]


def test_prairielearn_stays_under_its_size_limit_whatever_the_runner_printed():
    flood = report(passed=0, failed=200, message="[S1.2] x\n" + "y" * 20_000)
    size = len(json.dumps(platforms.prairielearn(flood, config.parse({"points": {"S1": 1}}))).encode("utf-8"))
    assert size <= platforms.PRAIRIELEARN_LIMIT


def test_prairielearn_not_gradable_says_why():
    assert platforms.prairielearn_not_gradable("no runner.py") == {"gradable": False, "format_errors": ["no runner.py"]}


def test_gradescope_gives_the_points_of_each_clause():
    result = platforms.gradescope(report(), LAB)
    assert (result["score"], result["max_score"]) == (3, 4)
    assert [(t["number"], t["score"], t["max_score"]) for t in result["tests"]] == [("S1.1", 3, 3), ("S2.3", 0, 1)]
    assert result["tests"][-1]["status"] == "failed" and result["tests"][-1]["number"] == "S2.3"


def test_each_checks_points_add_up_to_the_score_shown():
    # 2 points over 7 checks: each shown to 4 places must still add up to the total, or a
    # learner adding up the checks finds points missing (7 x 0.2857 = 1.9999).
    lab = config.parse({"points": {"S1": 2, "S2": 1}})
    for passed, failed in ((7, 0), (5, 2), (0, 3)):
        result = platforms.gradescope(report(passed, failed), lab)
        assert round(sum(t["score"] for t in result["tests"]), 4) == result["score"]
        assert round(sum(t["max_score"] for t in result["tests"]), 4) == result["max_score"]
        assert all(t["max_score"] == round(t["max_score"], 4) for t in result["tests"])
    assert platforms.gradescope(report(7, 0), lab)["score"] == 2


def with_steps(data):
    data["steps"] = {"S1": {"passed": 3, "total": 3}, "S2": {"passed": 0, "total": 1}}
    return data


def test_github_summary_is_a_markdown_step_table_with_the_failures():
    summary = platforms.github_summary(with_steps(report(message="[S2.3] exit <124>\n  expected: 124")))
    assert "| S1 | run a command, pass its output and exit code | 3/3 | PASS |" in summary
    assert "| S2 | --timeout kills the whole command, exit 124 | 0/1 | FAIL |" in summary
    assert "<summary>[S2.3] exit &lt;124&gt;</summary>" in summary and "  expected: 124" in summary


def test_github_annotations_escape_what_workflow_commands_reserve():
    (line,) = platforms.github_annotations(report(passed=1, message="[S2.3] a, b: 100%\n  expected: 124"))
    assert line == "::error title=[S2.3] a%2C b%3A 100%25::[S2.3] a, b: 100%25%0A  expected: 124"


# Visibility on Gradescope. Its autograder specification (gradescope-autograders.readthedocs.io,
# "Controlling Test Case Visibility"): a test's visibility overrides the top-level one; "if test
# cases are hidden, students will not be able to see their total score"; stdout is shown to
# instructors only unless `stdout_visibility` says otherwise.
POINTS = {"S1": 3, "S2": 1, "S3": 5, "S7": 3}
RETRIES = "--retries with exponential backoff"  # S3's title in the step table


def graded():
    """S1.1 and S2.3 passed, S3.2 failed, and S7.1 blocked: its check ran into S3.1's defect."""
    tests = [
        {"id": "test_s1.py::test_ok", "clause": "S1.1", "outcome": "passed", "message": ""},
        {"id": "test_s2.py::test_ok", "clause": "S2.3", "outcome": "passed", "message": ""},
        {"id": "test_s3.py::test_backoff", "clause": "S3.2", "outcome": "failed", "message": "[S3.2] backoff 0 s"},
        {"id": "test_s3.py::test_plain", "clause": "S3.1", "outcome": "passed", "message": ""},
        {
            "id": "test_s7.py::test_lines",
            "clause": "S7.1",
            "outcome": "failed",
            "charged": "S3.1",
            "message": "[S3.1] made 2 attempts",
        },
    ]
    summary = {"passed": 3, "failed": 2, "errors": 0, "skipped": 0, "total": 5}
    return {"profile": "core", "isolation": "namespace", "summary": summary, "tests": tests}


def visibility(**steps):
    return config.parse({"points": POINTS, "visibility": steps})


def by_clause(result):
    return {test["number"]: test for test in result["tests"]}


def test_a_hidden_step_reaches_no_student_through_the_top_level():
    result = platforms.gradescope(graded(), visibility(S3="hidden"))
    # Its tests stay hidden, as configured...
    assert by_clause(result)["S3.2"]["visibility"] == "hidden"
    # ... and the overview lists and counts the shown steps alone: S3 is not named, its clauses
    # and checks are not counted (S1.1 S2.3 passed, S7.1 blocked: 2 of 3; 2 of 3 checks).
    assert "S3" not in result["output"] and RETRIES not in result["output"]
    assert "2 of 3 clauses passed (2 of 3 checks)" in result["output"]
    assert "2 passed, 1 failed, 0 errors, 0 skipped" in result["output"]
    # The total, which holds S3's points, is hidden with it, and so is the grading's stdout.
    assert result["visibility"] == "hidden" and result["stdout_visibility"] == "hidden"
    assert result["score"] == 4  # still the grade: S1 3 + S2 1 (S3.1 is failed by S7's check)


def test_a_visible_clause_blocked_by_a_hidden_one_does_not_quote_it():
    blocked = by_clause(platforms.gradescope(graded(), visibility(S3="hidden")))["S7.1"]
    assert blocked["visibility"] == "visible" and blocked["score"] == 0
    assert "S3" not in blocked["output"] and "attempts" not in blocked["output"]
    assert "not shown yet" in blocked["output"]
    # Shown as soon as the clause that blocks it: then it says which, and why.
    shown = by_clause(platforms.gradescope(graded(), visibility(S3="after_due_date", S7="hidden")))["S7.1"]
    assert "blocked by S3.1" in shown["output"] and "made 2 attempts" in shown["output"]


@pytest.mark.parametrize(
    "steps,top",
    [
        ({"S3": "after_due_date"}, "after_due_date"),
        ({"S3": "after_due_date", "S2": "after_published"}, "after_published"),
        ({"default": "after_due_date", "S1": "visible", "S2": "hidden"}, "hidden"),
    ],
)
def test_the_total_is_shown_when_the_last_step_is(steps, top):
    result = platforms.gradescope(graded(), visibility(**steps))
    assert result["visibility"] == top and result["stdout_visibility"] == "hidden"


def test_a_hidden_step_worth_nothing_does_not_hide_the_total():
    lab = config.parse({"points": dict(POINTS, S3=0), "visibility": {"S3": "hidden"}})
    result = platforms.gradescope(graded(), lab)
    assert result["visibility"] == "visible" and result["stdout_visibility"] == "hidden"
    assert "S3" not in result["output"]


def test_with_every_step_visible_gradescope_shows_what_it_always_did():
    result = platforms.gradescope(graded(), visibility())
    assert "visibility" not in result and "stdout_visibility" not in result  # Gradescope's defaults
    assert RETRIES in result["output"] and "2 of 5 clauses passed (3 of 5 checks)" in result["output"]
    blocked = by_clause(result)["S7.1"]
    assert "blocked by S3.1" in blocked["output"] and "made 2 attempts" in blocked["output"]

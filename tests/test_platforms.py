"""Each platform's result file, made from the suite's JSON report alone."""

import json

from conformance import config, platforms

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

"""Clause verdicts from checks (conformance/judging/verdicts.py): one defect, one charge."""

from conformance.judging import verdicts


def check(name, clause, outcome="passed", message="", **more):
    return dict({"id": "t.py::%s" % name, "clause": clause, "outcome": outcome, "message": message}, **more)


def test_a_clause_passes_only_when_every_check_of_it_does():
    judged = verdicts.of_tests(
        [check("a", "S1.1"), check("b", "S1.1"), check("c", "S1.2"), check("d", "S1.2", "failed")]
    )
    assert judged["S1.1"]["verdict"] == "passed" and judged["S1.1"]["checks"] == {"passed": 2, "total": 2}
    assert judged["S1.2"]["verdict"] == "failed" and judged["S1.2"]["cause"] == "t.py::d"


def test_the_cause_is_the_first_failing_check_by_id_whatever_order_they_finished_in():
    tests = [check("z", "S2.1", "failed", "late"), check("b", "S2.1", "failed", "never killed")]
    for order in (tests, tests[::-1]):
        judged = verdicts.of_tests(order)["S2.1"]
        assert (judged["cause"], judged["message"], judged["also_seen"]) == ("t.py::b", "never killed", ["t.py::z"])


def test_a_failure_naming_another_clause_is_charged_there_and_blocks_its_own():
    # S3.2's check read runs.jsonl to judge the waits and found no JSON: the defect is S7.1's.
    tests = [
        check("waits", "S3.2", "failed", "[S7.1] not JSON", charged="S7.1"),
        check("lines", "S7.1"),
        check("more", "S3.2"),
    ]
    judged = verdicts.of_tests(tests)
    assert judged["S7.1"]["verdict"] == "failed" and judged["S7.1"]["cause"] == "t.py::waits"
    assert judged["S3.2"]["verdict"] == "blocked" and judged["S3.2"]["blocked_by"] == ["S7.1"]


def test_a_charge_to_a_clause_not_graded_still_fails_it():
    judged = verdicts.of_tests([check("waits", "S3.2", "failed", "[S7.1] not JSON", charged="S7.1")])
    assert list(judged) == ["S3.2", "S7.1"] and judged["S7.1"]["verdict"] == "failed"


def test_the_basic_call_blocks_other_clauses_and_fails_its_own():
    tests = [
        check("exit", "S1.3", "failed", "blocked by S1.3", blocked_by="S1.3"),
        check("timeout", "S2.1", "failed", "blocked by S1.3", blocked_by="S1.3"),
        check("quiet", "S2.2"),
    ]
    judged = verdicts.of_tests(tests)
    assert judged["S1.3"]["verdict"] == "failed"
    assert judged["S2.1"]["verdict"] == "blocked" and judged["S2.1"]["blocked_by"] == ["S1.3"]
    assert judged["S2.2"]["verdict"] == "passed"


def test_a_clause_with_a_failure_of_its_own_is_failed_not_blocked():
    tests = [check("a", "S3.2", "failed", "[S7.1] ...", charged="S7.1"), check("b", "S3.2", "failed", "[S3.2] ...")]
    assert verdicts.of_tests(tests)["S3.2"]["verdict"] == "failed"


def test_a_check_the_suite_could_not_judge_makes_its_clause_an_error_not_a_pass():
    judged = verdicts.of_tests([check("a", "S2.1"), check("b", "S2.1", "error", "not judged", not_judged=True)])
    assert judged["S2.1"]["verdict"] == "error"


def test_the_learner_reads_the_cause_once_and_one_line_per_other_check():
    tests = [
        check("b", "S2.1", "failed", "[S2.1] killed at the timeout\n  actual:   it took 3.1s\n  hint:     ..."),
        check("c", "S2.1", "failed", "[S2.1] killed at the timeout\n  actual:   it took 4.0s\n  hint:     ..."),
    ]
    text = verdicts.explain(verdicts.of_tests(tests)["S2.1"], tests)
    assert text.count("hint:") == 1 and text.endswith("  also seen in 1 more check:\n    - c: it took 4.0s")


def test_a_line_says_which_clauses_did_not_pass():
    tests = [
        check("a", "S2.4", "failed", "[S2.4] ..."),
        check("b", "S3.3", "failed", "[S2.4] ...", charged="S2.4"),
        check("c", "S1.1"),
    ]
    assert verdicts.summary(verdicts.of_tests(tests)) == "failed: S2.4; blocked: S3.3"
    assert verdicts.summary(verdicts.of_tests([check("c", "S1.1")])) == ""

"""What the bundled runners must get from the suite, said as the problems found (none: as expected).

One place for both callers: `pyops-conformance selftest` and the project's tests (tests/test_zoo.py,
tests/test_reference.py) judge a grading's report with these, so a lab author's self-test and the
project's CI hold the suite to the same rules.
"""

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from conformance.lab.clauses import CLAUSES, CORE
from conformance.selftest.zoo import Mutant, charged


def failed_clauses(report: Mapping, within: Optional[Sequence[str]] = None) -> Tuple[str, ...]:
    """The clauses the report failed (blocked ones are not failed), sorted; only `within` if given."""
    return tuple(
        sorted(
            clause
            for clause, entry in report["clauses"].items()
            if entry["verdict"] == "failed" and (within is None or clause in within)
        )
    )


def judged_for(mutant: Mutant) -> List[str]:
    """The clauses a zoo mutant is judged on: the core profile's, and its own X clause (its base is
    correct in those, not necessarily in every X clause)."""
    core = [clause for clause, entry in CLAUSES.items() if entry.profile == CORE]
    return core + ([mutant.breaks] if mutant.breaks not in core else [])


def zoo_problems(mutant: Mutant, report: Optional[Mapping]) -> List[str]:
    """Why the suite's verdict on a wrong runner of the zoo is not what the zoo says of it."""
    if not report:
        return ["no report: the suite could not grade it"]
    failed_tests = [test for test in report["tests"] if test["outcome"] == "failed"]
    # A check "blocked by" a failing basic call (blocking.py) never ran, so it would show that the
    # mutant is broken everywhere, not that this clause's checks catch it; unless the basic call is
    # this clause's own (S1.1, S1.3, S4.2): then that call caught it.
    caught = [
        test
        for test in failed_tests
        if test["clause"] == mutant.breaks and test.get("blocked_by") in (None, mutant.breaks)
    ]
    problems = []
    if not caught:
        problems.append("%s's checks do not catch it (%s)" % (mutant.breaks, mutant.story))
    failed_ids = {test["id"] for test in failed_tests}
    for part in mutant.fails:
        named = [test["id"] for test in report["tests"] if part in test["id"]]
        if not named or not set(named) <= failed_ids:
            problems.append("not every check named %r fails" % part)
    charged_now = failed_clauses(report, judged_for(mutant))
    if charged_now != charged(mutant):
        problems.append("charged in %s, not %s" % (", ".join(charged_now) or "nothing", ", ".join(charged(mutant))))
    return problems


def outcomes_of(report: Mapping) -> Dict[str, str]:
    """Each check's outcome, by id: what two rounds of one runner must agree on."""
    return {test["id"]: test["outcome"] for test in report["tests"]}


def correct_problems(reports: Sequence[Optional[Mapping]]) -> List[str]:
    """Why the rounds of a correct runner are not each a pass with the same verdicts."""
    problems = []
    for number, report in enumerate(reports, start=1):
        if not report:
            problems.append("round %d: no report: the suite could not grade it" % number)
            continue
        failed = failed_clauses(report)
        blocked = sorted(c for c, entry in report["clauses"].items() if entry["verdict"] == "blocked")
        if failed or blocked:
            problems.append("round %d: failed %s" % (number, ", ".join(failed + tuple(blocked))))
    graded = [outcomes_of(report) for report in reports if report]
    if len(graded) > 1 and any(outcomes != graded[0] for outcomes in graded[1:]):
        differ = sorted({i for o in graded[1:] for i in set(o) | set(graded[0]) if o.get(i) != graded[0].get(i)})
        problems.append("rounds differ in %d checks: %s" % (len(differ), ", ".join(differ[:5])))
    return problems

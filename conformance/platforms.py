"""The JSON report in the result formats of the platforms labs are graded on.

Each format is a pure function of the suite's JSON report, so every platform shows the same
verdicts: Gradescope's autograder results.json, PrairieLearn's external-grader results.json, and
GitHub Actions' job summary and error annotations.
"""

import json
from typing import Dict, List, Mapping, Tuple

from conformance.clauses import CLAUSES, steps_for
from conformance.config import LabConfig
from conformance.report import STEP_TITLES, verdict

# PrairieLearn discards results.json files over 1 MB; stay well below, whatever runners print.
PRAIRIELEARN_LIMIT = 900_000
# Where a check's message is cut when the whole file would be too large.
_CUTS = (None, 4000, 1000, 200)


def score(report: Mapping, config: LabConfig) -> Dict[str, float]:
    """The points earned and the most there were, by the configuration's points."""
    return _total(_checks(report, config))


def step_scores(report: Mapping, config: LabConfig) -> Dict[str, Dict[str, float]]:
    """Each step's points earned and the most there were (a class's grades.csv has a column each)."""
    steps: Dict[str, List[Tuple[Mapping, float, float]]] = {step: [] for step in report["steps"]}
    for check in _checks(report, config):
        clause = CLAUSES.get(check[0].get("clause") or "")
        if clause is not None and clause.step in steps:
            steps[clause.step].append(check)
    return {step: _total(checks) for step, checks in steps.items()}


def gradescope(report: Mapping, config: LabConfig) -> Dict:
    """Gradescope's autograder format: each check's points and visibility from the configuration."""
    checks = _checks(report, config)
    tests = []
    for test, earned, most in checks:
        clause = test.get("clause") or ""
        tests.append(
            {
                "name": _name(test),
                "number": clause,
                "score": round(earned, 4),
                "max_score": round(most, 4),
                "status": "passed" if test["outcome"] == "passed" else "failed",
                "output": test.get("message") or "",
                "visibility": config.visibility_of(clause),
                "tags": [clause] if clause else [],
            }
        )
    total = _total(checks)
    return {"score": total["points"], "max_score": total["max_points"], "output": _summary_line(report), "tests": tests}


def gradescope_failure(name: str, reason: str, config: LabConfig) -> Dict:
    """A Gradescope results.json for a submission that was not graded: one failed, visible test
    saying why, score 0 out of the lab's points (each step of the configuration's profile)."""
    most = round(sum(config.step_points.get(step, 0.0) for step in steps_for(config.profile)), 4)
    test = {
        "name": name,
        "number": "",
        "score": 0,
        "max_score": most,
        "status": "failed",
        "output": reason,
        "visibility": "visible",
        "tags": [],
    }
    return {"score": 0, "max_score": most, "output": reason, "tests": [test]}


def prairielearn(report: Mapping, config: LabConfig) -> Dict:
    """PrairieLearn's external-grader format: score in [0, 1] by the configuration's points, under 1 MB."""
    checks = _checks(report, config)
    total = _total(checks)
    for cut in _CUTS:
        tests: List[Dict] = []
        for test, earned, most in checks:
            message = test.get("message") or ""
            clause = CLAUSES.get(test.get("clause") or "")
            tests.append(
                {
                    "name": _name(test),
                    "description": "[%s] %s" % (clause.id, clause.text_en) if clause else "",
                    "points": round(earned, 4),
                    "max_points": round(most, 4),
                    "message": message.splitlines()[0] if message else "",
                    "output": message if cut is None or len(message) <= cut else message[:cut] + "\n[cut]",
                }
            )
        result = {
            "gradable": True,
            "score": total["points"] / total["max_points"] if total["max_points"] else 0.0,
            "message": _summary_line(report),
            "output": "",
            "tests": tests,
        }
        if len(json.dumps(result, ensure_ascii=False).encode("utf-8")) <= PRAIRIELEARN_LIMIT:
            break
    return result


def prairielearn_not_gradable(reason: str) -> Dict:
    """A submission PrairieLearn should not count (no attempt used): what was wrong with it."""
    return {"gradable": False, "format_errors": [reason]}


def github_summary(report: Mapping) -> str:
    """A Markdown step table and the failed checks, for a GitHub Actions job summary."""
    lines = [
        "## pyops lab: %s" % _summary_line(report),
        "",
        "| step | what | passed | verdict |",
        "| --- | --- | ---: | --- |",
    ]
    for step, row in report["steps"].items():
        lines.append(
            "| %s | %s | %d/%d | %s |" % (step, STEP_TITLES.get(step, ""), row["passed"], row["total"], verdict(row))
        )
    failed = [test for test in report["tests"] if test["outcome"] != "passed"]
    if failed:
        lines += ["", "### Failed checks", ""]
        for test in failed:
            lines += ["<details><summary>%s</summary>" % _escape_html(_first_line(test)), "", "```"]
            lines += [test.get("message") or "", "```", "</details>"]
    return "\n".join(lines) + "\n\n"


def github_annotations(report: Mapping) -> List[str]:
    """One `::error` workflow command per failed check (GitHub shows them on the run's page)."""
    return [
        "::error title=%s::%s" % (_escape_property(_first_line(test)), _escape_data(test.get("message") or ""))
        for test in report["tests"]
        if test["outcome"] != "passed"
    ]


def _checks(report: Mapping, config: LabConfig) -> List[Tuple[Mapping, float, float]]:
    """Each test with the points it earned and the most it could."""
    worth = config.points(report["tests"])
    return [
        (test, worth[test["id"]] if test["outcome"] == "passed" else 0, worth[test["id"]]) for test in report["tests"]
    ]


def _total(checks: List[Tuple[Mapping, float, float]]) -> Dict[str, float]:
    return {
        "points": round(sum(earned for _, earned, _ in checks), 4),
        "max_points": round(sum(most for _, _, most in checks), 4),
    }


def _name(test: Mapping) -> str:
    return test["id"].split("::")[-1]


def _summary_line(report: Mapping) -> str:
    total = report["summary"]
    return "profile %s, isolation %s: %d of %d checks passed" % (
        report["profile"],
        report["isolation"],
        total["passed"],
        total["total"],
    )


def _first_line(test: Mapping) -> str:
    message = test.get("message") or ""
    return message.splitlines()[0] if message else _name(test)


# GitHub's workflow commands: data escapes %, CR and LF; properties also : and ,.
def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

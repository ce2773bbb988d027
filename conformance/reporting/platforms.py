"""The JSON report in the result formats of the platforms labs are graded on.

Each format is a pure function of the suite's JSON report, so every platform shows the same
verdicts: Gradescope's autograder results.json, PrairieLearn's external-grader results.json, and
GitHub Actions' job summary and error annotations.
"""

import json
from typing import Collection, Dict, Iterable, List, Mapping, Optional, Tuple

from conformance.judging import verdicts
from conformance.lab.clauses import CLAUSES, steps_for
from conformance.lab.config import POINT_UNIT, LabConfig
from conformance.reporting.report import STEP_TITLES, checks_of, step_table, verdict
from conformance.reporting.report import summary as count_checks

# PrairieLearn discards results.json files over 1 MB; stay well below, whatever runners print.
PRAIRIELEARN_LIMIT = 900_000
# Where a check's message is cut when the whole file would be too large.
_CUTS = (None, 4000, 1000, 200)

# Gradescope's visibilities, from the soonest a student sees a test to never. `after_published`
# comes after `after_due_date`: publishing shows a student the grade, total and all, anyway.
_VISIBLE = "visible"
_SHOWN_ORDER = (_VISIBLE, "after_due_date", "after_published", "hidden")


def score(report: Mapping, config: LabConfig) -> Dict[str, float]:
    """The points earned and the most there were: the clauses passed, by the configuration's points."""
    return _total(_clauses(report, config))


def step_scores(report: Mapping, config: LabConfig) -> Dict[str, Dict[str, float]]:
    """Each step's points earned and the most there were (a class's grades.csv has a column each)."""
    clauses = _clauses(report, config)
    return {
        step: _total([row for row in clauses if CLAUSES[row[0]].step == step]) for step in steps_for(report["profile"])
    }


def gradescope(report: Mapping, config: LabConfig) -> Dict:
    """Gradescope's autograder format: one test per clause, in the lab's order, with its points
    and visibility from the configuration and its verdict explained as output.

    Gradescope's autograder specification ("Controlling Test Case Visibility") hides a test until
    its visibility says, and the total score while a test is not shown; it promises nothing of the
    top-level output. So when a step is not visible, the top-level output lists and counts the
    visible steps alone, the top-level `visibility` is the latest of the steps that carry points
    (the total holds theirs), and the grading's stdout, which names every step, is hidden. With
    every step visible, neither key is set (Gradescope's defaults: visible, stdout hidden)."""
    clauses = _clauses(report, config)
    lang = config.lang or "en"
    tests = []
    for clause, entry, earned, most in clauses:
        tests.append(
            {
                "name": _clause_name(clause, lang),
                "number": clause,
                "score": earned / POINT_UNIT,
                "max_score": most / POINT_UNIT,
                "status": "passed" if entry["verdict"] == verdicts.PASSED else "failed",
                "output": _gradescope_explained(clause, entry, report["tests"], config, lang),
                "visibility": config.visibility_of(clause),
                "tags": [clause],
            }
        )
    total = _total(clauses)
    visible_steps = [step for step in steps_for(report["profile"]) if _step_visibility(step, config) == _VISIBLE]
    every_step_visible = len(visible_steps) == len(steps_for(report["profile"]))
    made = {
        "score": total["points"],
        "max_score": total["max_points"],
        "output": _overview(report, lang, None if every_step_visible else visible_steps),
        "tests": tests,
    }
    if not every_step_visible:
        made["visibility"] = _latest(config.visibility_of(clause) for clause, _, _, most in clauses if most)
        made["stdout_visibility"] = "hidden"
    if report.get("provenance"):  # Gradescope stores extra_data with the submission, unshown
        made["extra_data"] = {"provenance": report["provenance"]}
    return made


def gradescope_failure(name: str, reason: str, config: LabConfig) -> Dict:
    """A Gradescope results.json for a submission that was not graded: one failed, visible test
    saying why, score 0 out of the lab's points (each step of the configuration's profile)."""
    most = config.most_points()
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
    """PrairieLearn's external-grader format: one test per clause, score in [0, 1] by the
    configuration's points, under 1 MB."""
    clauses = _clauses(report, config)
    total = _total(clauses)
    lang = config.lang or "en"
    for cut in _CUTS:
        tests: List[Dict] = []
        for clause, entry, earned, most in clauses:
            output = verdicts.explain(entry, report["tests"], lang)
            tests.append(
                {
                    "name": _clause_name(clause, lang),
                    "description": CLAUSES[clause].text(lang),
                    "points": earned / POINT_UNIT,
                    "max_points": most / POINT_UNIT,
                    "message": output.splitlines()[0] if output else "",
                    "output": output if cut is None or len(output) <= cut else output[:cut] + "\n[cut]",
                }
            )
        result = {
            "gradable": True,
            "score": total["points"] / total["max_points"] if total["max_points"] else 0.0,
            "message": _summary_line(report, lang),
            "output": _overview(report, lang),
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


def _clauses(report: Mapping, config: LabConfig) -> List[Tuple[str, Dict, int, int]]:
    """Each graded clause with its verdict, the points it earned and the most it could, in units
    of 1/POINT_UNIT (whole numbers: they add up exactly)."""
    judged = verdicts.of_tests(report["tests"])
    worth = config.worth(judged)
    rows = []
    for clause, entry in judged.items():
        most = round(worth[clause] * POINT_UNIT)
        rows.append((clause, entry, most if entry["verdict"] == verdicts.PASSED else 0, most))
    return rows


def _total(clauses: List[Tuple[str, Dict, int, int]]) -> Dict[str, float]:
    return {
        "points": sum(earned for _, _, earned, _ in clauses) / POINT_UNIT,
        "max_points": sum(most for _, _, _, most in clauses) / POINT_UNIT,
    }


def _clause_name(clause: str, lang: str) -> str:
    return "%s %s" % (clause, CLAUSES[clause].text(lang))


def _latest(visibilities: Iterable[str]) -> str:
    """The visibility that shows last of `visibilities` (visible when there are none)."""
    return max(visibilities, key=_SHOWN_ORDER.index, default=_VISIBLE)


def _step_visibility(step: str, config: LabConfig) -> str:
    """When Gradescope shows `step`: when it shows the last of its clauses."""
    return _latest(config.visibility_of(clause) for clause in CLAUSES if CLAUSES[clause].step == step)


_WITHHELD = {
    "en": "blocked by a clause whose result is not shown yet: this clause could not be judged until "
    "that is fixed (not charged here)",
    "ja": "まだ公開されていない項目のためにブロックされました: "
    "それを直すまでこの項目は判定できません(ここでは減点しません)",
}


def _gradescope_explained(clause: str, entry: Mapping, tests: List[Dict], config: LabConfig, lang: str) -> str:
    """A clause's verdict explained, as Gradescope may show it with the clause: a clause blocked by
    one shown later (an S7 check that ran into S3's retries, S3 hidden) neither names that one nor
    quotes its failure: the blocking clause's test says it, when it is shown."""
    blockers = entry.get("blocked_by") or []
    own = config.visibility_of(clause)
    if any(_SHOWN_ORDER.index(config.visibility_of(by)) > _SHOWN_ORDER.index(own) for by in blockers):
        return _WITHHELD.get(lang, _WITHHELD["en"])
    return verdicts.explain(entry, tests, lang)


def _overview(report: Mapping, lang: str, listed: Optional[Collection[str]] = None) -> str:
    """The step table and the summary: what a learner reads first. `listed`: the only steps it
    shows and counts (default: every step)."""
    table = step_table(report["tests"], report["profile"], lang, listed)
    return "\n".join([_summary_line(report, lang, listed)] + table).strip() + "\n"


def _name(test: Mapping) -> str:
    return test["id"].split("::")[-1]


_SUMMARY_WORDS = {
    "en": "profile %(profile)s, isolation %(isolation)s: %(passed)d of %(clauses)d clauses passed "
    "(%(checks_passed)d of %(checks)d checks)",
    "ja": "プロファイル %(profile)s・分離 %(isolation)s: %(clauses)d 項目中 %(passed)d 項目に合格"
    "(チェック %(checks)d 件中 %(checks_passed)d 件)",
}


def _summary_line(report: Mapping, lang: str = "en", listed: Optional[Collection[str]] = None) -> str:
    """The clauses passed and the checks passed, in a line; of the `listed` steps alone if given
    (each clause's verdict is still judged from every check)."""
    judged = [
        entry
        for clause, entry in verdicts.of_tests(report["tests"]).items()
        if listed is None or CLAUSES[clause].step in listed
    ]
    checks = report["summary"] if listed is None else count_checks(checks_of(report["tests"], listed))
    return _SUMMARY_WORDS.get(lang, _SUMMARY_WORDS["en"]) % {
        "profile": report["profile"],
        "isolation": report["isolation"],
        "passed": sum(entry["verdict"] == verdicts.PASSED for entry in judged),
        "clauses": len(judged),
        "checks_passed": checks["passed"],
        "checks": checks["total"],
    }


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

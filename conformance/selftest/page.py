"""The self-test's one-file HTML report: what held, the runners x clauses heat map, the survivors.

Drawn with the class report's parts (classroom/report_html.py: the same page frame, the same heat
map and its legend, the same escaping of every string from the data, the same policy that forbids
scripts), so a lab author reads it as they read a class: a row per runner, a cell per clause.
"""

from typing import Dict, List, Mapping, Sequence

from conformance.classroom import report_html
from conformance.classroom.report_html import escape

TITLE = "pyops lab: selftest"


def render(graded: Sequence, summary: Mapping) -> str:
    rows = [_row(entry) for entry in graded]
    sections = [
        _header(summary),
        report_html.heat_map(
            sorted(rows, key=lambda row: row["student"]), report_html.clauses_of(rows), "Runners × clauses", "runner"
        ),
        _not_as_expected(graded),
        _survivors(graded),
    ]
    return report_html.document(TITLE, sections)


def _row(entry) -> Dict:  # type: ignore[no-untyped-def]
    """A runner as the heat map takes a student: its checks, or for a generated mutant (whose
    grading kept each clause's verdict, not its checks) one line per clause."""
    name = "%s %s" % (entry.kind, entry.name)
    if entry.kind == "mutant":
        clauses = entry.detail.get("clauses") or {}
        blocked = entry.detail.get("blocked") or {}
        tests = [
            {"id": clause, "clause": clause, "outcome": _outcome(verdict), "blocked_by": blocked.get(clause)}
            for clause, verdict in clauses.items()
        ]
        status = "graded" if clauses else str(entry.detail.get("verdict"))
        return {"student": name, "status": status, "tests": tests, "message": entry.detail.get("message", "")}
    report = next((one for one in entry.reports if one), None)
    if report is None:
        return {"student": name, "status": "error", "tests": [], "message": "; ".join(entry.problems)}
    return {"student": name, "status": "graded", "tests": report["tests"]}


def _outcome(verdict: str) -> str:
    """A clause's verdict as the outcome of the one check that stands for it (a blocked clause's
    check failed, blocked by another: verdicts.of_tests reads it back as blocked)."""
    return "failed" if verdict == "blocked" else verdict


def _header(summary: Mapping) -> str:
    state = "passed" if summary["passed"] else "FAILED"
    items = "".join("<li>%s</li>" % escape(line) for line in summary["lines"])
    return '<header id="summary" data-passed="%s"><h1>%s</h1><p>selftest <b>%s</b></p><ul>%s</ul></header>' % (
        escape(str(summary["passed"]).lower()),
        escape(TITLE),
        escape(state),
        items,
    )


def _not_as_expected(graded: Sequence) -> str:
    failing = [entry for entry in graded if entry.problems]
    if not failing:
        return report_html.section("not-as-expected", "Expectations not met", ['<p class="empty">none</p>'])
    items = [
        '<li data-runner="%s"><b>%s %s</b>: %s</li>'
        % (escape(entry.name), escape(entry.kind), escape(entry.name), escape("; ".join(entry.problems)))
        for entry in failing
    ]
    return report_html.section("not-as-expected", "Expectations not met", ['<ol class="failures">'] + items + ["</ol>"])


def _survivors(graded: Sequence) -> str:
    """Each generated mutant the suite let through, with its diff: a gap, or a reviewed equivalent."""
    survivors = [entry for entry in graded if entry.kind == "mutant" and entry.detail.get("verdict") == "survived"]
    if not survivors:
        return report_html.section("survivors", "Surviving mutants", ['<p class="empty">none</p>'])
    body: List[str] = ['<ol class="failures">']
    for entry in survivors:
        detail = entry.detail
        why = detail.get("equivalent") or "not in equivalent.toml: a gap, or an equivalent to review"
        body.append(
            '<li data-mutant="%s"><b>%s</b>, line %s (%s): %s<span class="line">%s</span></li>'
            % (
                escape(entry.name),
                escape(entry.name),
                escape(detail.get("line")),
                escape(detail.get("profile", "core")),
                escape(why),
                escape(detail.get("diff", "")),
            )
        )
    body.append("</ol>")
    return report_html.section("survivors", "Surviving mutants", body)

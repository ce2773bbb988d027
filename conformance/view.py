"""The learner's view of a grading: what failed, by step in the lab's order, then the table.

Built from the JSON report alone, so it says nothing a report does not hold and carries none of
the test runner's noise (banners, worker lines, progress dots, test ids, paths into the suite).
The pytest view stays available (`--view pytest`) for maintainers of the suite.
"""

import os
from typing import Dict, List, Mapping, Optional

from conformance import identity
from conformance.clauses import CLAUSES, LANGUAGES, STEPS
from conformance.expect import hint_line
from conformance.report import step_table
from conformance.sandbox import SHARED

_WORDS = {
    "en": {
        "step": "%(step)s: %(failed)d of %(total)d checks failed",
        "errors": "The grader could not judge these checks (not your runner's fault; please report it):",
        "all_passed": "Every check passed.",
        "hint_again": "  (hint: as for the failure of %(clause)s above)",
        "same_way": "  (and %(more)d more checks failed the same way)",
    },
    "ja": {
        "step": "%(step)s: %(total)d 件中 %(failed)d 件のチェックが不合格",
        "errors": "採点側の問題で判定できなかったチェック(runner のせいではありません。報告してください):",
        "all_passed": "すべてのチェックに合格しました。",
        "hint_again": "  (ヒント: 上の %(clause)s の不合格と同じ)",
        "same_way": "  (ほかに %(more)d 件のチェックが同じ理由で不合格)",
    },
}


def language(choice: Optional[str], environ: Mapping[str, str] = os.environ) -> str:
    """`choice` if given, else the locale's (LC_ALL, LC_MESSAGES, LANG: ja_* is Japanese)."""
    if choice:
        return choice
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name, "")
        if value:
            code = value.split("_")[0].split(".")[0].lower()
            return code if code in LANGUAGES else "en"
    return "en"


def header(info: Mapping) -> List[str]:
    """What graded what, and how: shown first in both views."""
    lines = [
        "runner: %s" % info["runner"],
        "python: %s" % info["python"],
        "profile: %s" % info["profile"],
        "isolation: %s" % info["isolation"],
    ]
    if info["isolation"] == SHARED:
        lines.append(
            "  (no private namespace: %s; tests run one at a time on the real lab paths,"
            " which are put back afterwards)" % info["why_not_namespace"]
        )
    if info["runner_user"] == identity.OWN:
        lines.append("runner user: an unprivileged uid of its own per check, no capabilities")
    else:
        lines.append("runner user: the grader's own (uid %d): %s" % (os.geteuid(), info["why_not_own_user"]))
    return lines


def render(data: Mapping, lang: str) -> List[str]:
    """The failures grouped by step (each clause's hint said once), then the step table."""
    words = _WORDS[lang]
    tests: List[Dict] = data["tests"]
    failed = [t for t in tests if t["outcome"] == "failed" and t.get("clause") in CLAUSES]
    errors = [t for t in tests if t["outcome"] == "error"]
    lines: List[str] = []
    hinted = set()
    for step in STEPS:
        in_step = [t for t in failed if CLAUSES[t["clause"]].step == step]
        if not in_step:
            continue
        total = sum(1 for t in tests if t.get("clause") in CLAUSES and CLAUSES[t["clause"]].step == step)
        lines += ["", words["step"] % {"step": step, "failed": len(in_step), "total": total}]
        # Failures that expected and got the same thing of the same call (the checks a failed basic
        # call blocked, say) are one failure to the learner: shown once, with how many share it.
        shown: Dict[tuple, str] = {}
        count: Dict[tuple, int] = {}
        for test in sorted(in_step, key=lambda t: _clause_order(t["clause"])):
            clause = test["clause"]
            message = test["message"].rstrip("\n")
            same = (clause,) + tuple(message.splitlines()[1:4])  # expected, actual, command
            count[same] = count.get(same, 0) + 1
            if same in shown:
                continue
            hint = hint_line(clause, lang)
            if clause in hinted and message.endswith(hint):
                message = message[: -len(hint)] + words["hint_again"] % {"clause": clause}
            hinted.add(clause)
            shown[same] = message
        for same, message in shown.items():
            lines += [""] + message.splitlines()
            if count[same] > 1:
                lines.append(words["same_way"] % {"more": count[same] - 1})
    if errors:
        lines += ["", words["errors"]]
        lines += ["  [%s] %s" % (t.get("clause") or "-", t["message"]) for t in errors]
    if not failed and not errors:
        lines += ["", words["all_passed"]]
    return lines + step_table(tests, data["profile"], lang)


def _clause_order(clause: str) -> int:
    return list(CLAUSES).index(clause)

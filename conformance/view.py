"""The learner's view of a grading: what failed, by step in the lab's order, then the table.

Built from the JSON report alone, so it says nothing a report does not hold and carries none of
the test runner's noise (banners, worker lines, progress dots, test ids, paths into the suite).
The pytest view stays available (`--view pytest`) for maintainers of the suite.
"""

import os
import re
from typing import Dict, List, Mapping, Optional

from conformance import identity
from conformance.clauses import CLAUSES, LANGUAGES, STEPS
from conformance.expect import hint_line
from conformance.report import step_table
from conformance.sandbox import CHROOT, SHARED

_WORDS = {
    "en": {
        "step": "%(step)s: %(failed)d of %(total)d checks failed",
        "caused_elsewhere": " (%(elsewhere)d of them by a failure of %(clauses)s, shown under its step)",
        "found_by": "  (found by a check of %(clause)s: %(check)s)",
        "errors": (
            "The grader could not judge these checks (not your runner's fault: grade again, and report it if it stays):"
        ),
        "all_passed": "Every check passed.",
        "hint_again": "  (hint: as for the failure of %(clause)s above)",
        "same_way": "  (and %(more)d more checks failed the same way)",
        "runner": "runner: %s",
        "python": "python: %s",
        "profile": "profile: %s",
        "isolation": "isolation: %s",
        "shared": "  (no private namespace: %s; tests run one at a time on the real lab paths,"
        " which are put back afterwards)",
        "chroot": "  (no private namespace: %s; each check runs in a private system root instead, several at once)",
        "progress": "%(step)s done: %(passed)d of %(total)d checks passed",
        "own_user": "runner user: an unprivileged uid of its own per check, no capabilities",
        "grader_user": "runner user: the grader's own (uid %d): %s",
    },
    "ja": {
        "step": "%(step)s: %(total)d 件中 %(failed)d 件のチェックが不合格",
        "caused_elsewhere": "(うち %(elsewhere)d 件は %(clauses)s の不合格によるもので、そのステップに表示)",
        "found_by": "  (%(clause)s のチェックで見つかりました: %(check)s)",
        "errors": (
            "採点側の問題で判定できなかったチェック"
            "(runner のせいではありません。もう一度採点し、続くようなら報告してください):"
        ),
        "all_passed": "すべてのチェックに合格しました。",
        "hint_again": "  (ヒント: 上の %(clause)s の不合格と同じ)",
        "same_way": "  (ほかに %(more)d 件のチェックが同じ理由で不合格)",
        "runner": "runner: %s",
        "python": "Python: %s",
        "profile": "プロファイル: %s",
        "isolation": "分離: %s",
        "shared": "  (専用の名前空間がありません: %s。チェックは 1 つずつ実際のラボのパスで行い、"
        "終わったら元に戻します)",
        "chroot": "  (専用の名前空間がありません: %s。代わりにチェックごとに専用のシステムルートで、"
        "複数同時に行います)",
        "progress": "%(step)s 完了: %(total)d 件中 %(passed)d 件のチェックが合格",
        "own_user": "runner のユーザー: チェックごとに専用の特権のない uid(ケーパビリティなし)",
        "grader_user": "runner のユーザー: 採点側と同じ(uid %d): %s",
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


def header(info: Mapping, lang: str = "en") -> List[str]:
    """What graded what, and how: shown first in both views."""
    words = _WORDS[lang]
    lines = [
        words["runner"] % info["runner"],
        words["python"] % info["python"],
        words["profile"] % info["profile"],
        words["isolation"] % info["isolation"],
    ]
    if info["isolation"] in (SHARED, CHROOT):
        lines.append(words[info["isolation"]] % info["why_not_namespace"])
    if info["runner_user"] == identity.OWN:
        lines.append(words["own_user"])
    else:
        lines.append(words["grader_user"] % (os.geteuid(), info["why_not_own_user"]))
    return lines


def progress_line(step: str, passed: int, total: int, lang: str) -> str:
    """What the learner sees while grading goes on: a step whose checks are all done."""
    return _WORDS[lang]["progress"] % {"step": step, "passed": passed, "total": total}


def render(data: Mapping, lang: str) -> List[str]:
    """The failures grouped by step (each clause's hint said once), then the step table.

    A failure is shown under the step of the clause it broke, which is not always the step of
    the check that found it: a retried hang.sh that leaves its `sleep` behind breaks S2.4 in a
    check of S3.3. The learner fixes S2.4, so it is shown there, saying which check found it, and
    the step of the check says that its failure is shown elsewhere.
    """
    words = _WORDS[lang]
    tests: List[Dict] = data["tests"]
    failed = [t for t in tests if t["outcome"] == "failed" and t.get("clause") in CLAUSES]
    errors = [t for t in tests if t["outcome"] == "error"]
    lines: List[str] = []
    hinted: Dict[str, set] = {}
    for step in STEPS:
        found_here = [t for t in failed if CLAUSES[t["clause"]].step == step]
        broken_here = [t for t in failed if CLAUSES[broken_clause(t)].step == step]
        if not found_here and not broken_here:
            continue
        total = sum(1 for t in tests if t.get("clause") in CLAUSES and CLAUSES[t["clause"]].step == step)
        heading = words["step"] % {"step": step, "failed": len(found_here), "total": total}
        elsewhere = [t for t in found_here if CLAUSES[broken_clause(t)].step != step]
        if elsewhere:
            clauses = sorted({broken_clause(t) for t in elsewhere}, key=_clause_order)
            heading += words["caused_elsewhere"] % {"elsewhere": len(elsewhere), "clauses": ", ".join(clauses)}
        lines += ["", heading]
        # Failures that expected and got the same thing of the same call (the checks a failed basic
        # call blocked, say) are one failure to the learner: shown once, with how many share it.
        shown: Dict[tuple, str] = {}
        count: Dict[tuple, int] = {}
        for test in sorted(broken_here, key=lambda t: (_clause_order(broken_clause(t)), _clause_order(t["clause"]))):
            clause = broken_clause(test)
            message = test["message"].rstrip("\n")
            same = (clause,) + tuple(message.splitlines()[1:4])  # expected, actual, command
            count[same] = count.get(same, 0) + 1
            if same in shown:
                continue
            # A hint is the message's last line: said again in the same words, it is only pointed at.
            hint = message.splitlines()[-1]
            if hint in hinted.get(clause, ()) and hint.startswith(hint_line(clause, lang).split(":")[0] + ":"):
                message = message[: -len(hint)] + words["hint_again"] % {"clause": clause}
            hinted.setdefault(clause, set()).add(hint)
            if clause != test["clause"]:
                message += "\n" + words["found_by"] % {"clause": test["clause"], "check": _check_name(test)}
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


_BROKEN = re.compile(r"\[([A-Z][0-9.]+)\]")


def broken_clause(test: Mapping) -> str:
    """The clause a failed check's message says was broken (its first line's `[ID]`), else the check's."""
    found = _BROKEN.match(test.get("message") or "")
    return found.group(1) if found and found.group(1) in CLAUSES else test["clause"]


def _check_name(test: Mapping) -> str:
    """A check's name as a learner can read it: `a timeout is retried`, from test_s3_3_a_timeout_is_retried."""
    name = test["id"].split("::")[-1]
    base, _, case = name.partition("[")
    for file_name in ("hang.sh", "flaky.sh", "apply.sh", "runs.jsonl", "applied.log"):
        base = re.sub(r"%s(?=_|$)" % file_name.replace(".", "_"), file_name, base)
    words = re.sub(r"^test_[a-z]+\d*(_\d+)?_", "", base).replace("_", " ")
    return words + (" [" + case if case else "")


def _clause_order(clause: str) -> int:
    return list(CLAUSES).index(clause)

"""The learner's view of a grading: each failed clause once, with its cause, in the lab's order;
what that blocked; then the step table.

Built from the JSON report alone, so it says nothing a report does not hold and carries none of
the test runner's noise (banners, worker lines, progress dots, test ids, paths into the suite).
The pytest view stays available (`--view pytest`) for maintainers of the suite.
"""

import os
from typing import Dict, List, Mapping, Optional

from conformance.harness import identity
from conformance.harness.sandbox import CHROOT, SHARED
from conformance.judging import expect, verdicts
from conformance.lab.clauses import LANGUAGES
from conformance.reporting.report import step_table

_WORDS = {
    "en": {
        "failed": "%(failed)d of %(total)d clauses failed; each is shown once, with its cause:",
        "blocked": "Blocked until the clauses above are fixed (not charged):",
        "blocked_by": "  by %(by)s: %(clauses)s",
        "errors": (
            "The grader could not judge these checks (not your runner's fault: grade again, and report it if it stays):"
        ),
        "all_passed": "Every check passed.",
        "stopped": "The grading was stopped before every check ran: no verdict, no report.",
        "score": "score: %s of %s points",
        "none_passed": "0 of %d clauses passed.",
        "uncompiled": "Nothing else could be checked: all %d clauses wait on it (not charged). 0 passed.",
        "runner": "runner: %s",
        "python": "python: %s",
        "profile": "profile: %s",
        "isolation": "isolation: %s",
        "rootless": " (in a user namespace of its own per check, as uid %d)",
        "shared": "  (no private namespace: %s; tests run one at a time on the real lab paths,"
        " which are put back afterwards)",
        "chroot": "  (no private namespace: %s; each check runs in a private system root instead, several at once)",
        "progress": "steps done (checks passed/checks):",
        "own_user": "runner user: an unprivileged uid of its own per check",
        "grader_user": "runner user: the grader's own (uid %d): %s",
    },
    "ja": {
        "failed": "%(total)d 項目中 %(failed)d 項目が不合格。それぞれ原因とともに 1 回ずつ示します:",
        "blocked": "上の項目を直すまで判定できない項目(減点なし):",
        "blocked_by": "  %(by)s のため: %(clauses)s",
        "errors": (
            "採点側の問題で判定できなかったチェック"
            "(runner のせいではありません。もう一度採点し、続くようなら報告してください):"
        ),
        "all_passed": "すべてのチェックに合格しました。",
        "stopped": "すべてのチェックが終わる前に採点が止められました: 判定もレポートもありません。",
        "score": "得点: %s / %s 点",
        "none_passed": "%d 項目中 0 項目に合格。",
        "uncompiled": "ほかは何も確かめられません: %d 項目すべてがこれを待っています(減点なし)。合格は 0 項目。",
        "runner": "runner: %s",
        "python": "Python: %s",
        "profile": "プロファイル: %s",
        "isolation": "分離: %s",
        "rootless": "(チェックごとに専用のユーザー名前空間で、uid %d として)",
        "shared": "  (専用の名前空間がありません: %s。チェックは 1 つずつ実際のラボのパスで行い、"
        "終わったら元に戻します)",
        "chroot": "  (専用の名前空間がありません: %s。代わりにチェックごとに専用のシステムルートで、"
        "複数同時に行います)",
        "progress": "完了したステップ(合格したチェック/チェック):",
        "own_user": "runner のユーザー: チェックごとに専用の特権のない uid",
        "grader_user": "runner のユーザー: 採点側と同じ(uid %d): %s",
    },
}


def language(choice: Optional[str], environ: Mapping[str, str] = os.environ) -> str:
    """`choice` if given, else the locale's: LANGUAGE's first language the suite speaks (a list,
    as gettext reads it: `ja:en`), else LC_ALL, LC_MESSAGES or LANG (ja_* is Japanese)."""
    if choice:
        return choice
    for wanted in environ.get("LANGUAGE", "").split(":"):
        code = wanted.split("_")[0].split(".")[0].lower()
        if code in LANGUAGES:
            return code
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name, "")
        if value:
            code = value.split("_")[0].split(".")[0].lower()
            return code if code in LANGUAGES else "en"
    return "en"


def header(info: Mapping, lang: str = "en") -> List[str]:
    """What graded what, and how: shown first in both views."""
    words = _WORDS[lang]
    # Two lines (what was graded; how): the screen is for the verdicts.
    if info["runner_user"] == identity.OWN:
        user = words["own_user"]
    else:
        user = words["grader_user"] % (os.geteuid(), info["why_not_own_user"])
    isolation = words["isolation"] % info["isolation"]
    if info.get("user_namespace"):
        isolation += words["rootless"] % os.geteuid()
    how = [words["profile"] % info["profile"], isolation, user]
    lines = [words["runner"] % info["runner"] + ", " + words["python"] % info["python"], ", ".join(how)]
    if info["isolation"] in (SHARED, CHROOT):
        lines.append(words[info["isolation"]] % info["why_not_namespace"])
    return lines


def progress_start(lang: str) -> str:
    """What the learner sees while grading goes on, first: the progress line's label."""
    return _WORDS[lang]["progress"]


def progress_step(step: str, passed: int, total: int, lang: str) -> str:
    """Then, added to that line: a step whose checks are all done, with how many passed."""
    return " %s (%d/%d)" % (step, passed, total)


def score_line(score: Mapping[str, float], lang: str) -> str:
    """The grade in points, as the configuration gives them (to two decimals: a step's points
    shared by three clauses make thirds)."""
    shown = ["%g" % round(score[key], 2) for key in ("points", "max_points")]
    return _WORDS.get(lang, _WORDS["en"])["score"] % tuple(shown)


def stopped(lang: str) -> str:
    """What a grading cut short (Ctrl-C, a signal) says instead of its verdicts, which it has not."""
    return _WORDS.get(lang, _WORDS["en"])["stopped"]


def render(data: Mapping, lang: str) -> List[str]:
    """Each failed clause once, in the lab's order: its cause (the first check that showed it, with
    its evidence and hint) and a line for each other check that saw it; then the clauses blocked
    by those, a line each; then what the grader could not judge, and the step table.

    A learner fixes causes, not checks: one defect is one entry, however many checks saw it, and
    a clause whose checks could not judge it for another clause's failure is named, not charged.
    """
    words = _WORDS[lang]
    tests: List[Dict] = data["tests"]
    judged = verdicts.of_tests(tests)
    uncompiled = verdicts.compile_failure(tests)
    if uncompiled is not None:
        return _does_not_compile(uncompiled, len(judged), lang)
    failed = [entry for entry in judged.values() if entry["verdict"] == verdicts.FAILED]
    blocked = [(clause, entry) for clause, entry in judged.items() if entry["verdict"] == verdicts.BLOCKED]
    errors = [t for t in tests if t["outcome"] == "error"]
    lines: List[str] = []
    if failed:
        lines += ["", words["failed"] % {"failed": len(failed), "total": len(judged)}]
    for entry in failed:
        lines += [""] + verdicts.explain(entry, tests, lang).splitlines()
    if blocked:
        # One line per cause: what waits on it, by id (the step table and the lab name them).
        waiting: Dict[str, List[str]] = {}
        for clause, entry in blocked:
            waiting.setdefault(", ".join(entry["blocked_by"]), []).append(clause)
        lines += ["", words["blocked"]]
        lines += [words["blocked_by"] % {"by": by, "clauses": " ".join(clauses)} for by, clauses in waiting.items()]
    if errors:
        lines += ["", words["errors"]]
        lines += ["  [%s] %s" % (t.get("clause") or "-", t["message"]) for t in errors]
    if not failed and not blocked and not errors:
        lines += ["", words["all_passed"]]
    if not any(entry["verdict"] == verdicts.PASSED for entry in judged.values()):
        return lines + ["", words["none_passed"] % len(judged)]  # a table of FAILs would say no more
    return lines + step_table(tests, data["profile"], lang)


def _does_not_compile(blocked: Mapping, clauses: int, lang: str) -> List[str]:
    """Python's error, its hint, and that every clause waits on it: all a learner needs to read."""
    message = blocked.get("message") or ""
    quoted = [line for line in message.splitlines() if line.startswith("    | ")]
    hint = [line for line in message.splitlines() if line.startswith("  " + expect.label("hint", lang) + ":")]
    return ["", "runner.py " + blocked["blocked_because"]] + quoted + hint + ["", _WORDS[lang]["uncompiled"] % clauses]

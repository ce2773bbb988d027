"""Clause verdicts: what a lab is graded and reported in. Checks are their evidence.

A clause is
  passed   when every check of it passed;
  failed   when a check showed that the runner breaks it: the first such check (by id) is its
           cause, the others are "also seen". A check of another clause that ran into this
           clause's defect (its failure names this clause, not its own) counts here too;
  blocked  when its checks could not judge it because something it depends on is broken: the
           basic call (blocking.py) or a clause whose failure they ran into. It earns nothing
           and is not charged: the learner is sent to the cause;
  error    when the suite could not judge it (a busy machine, a fault of the suite's own).

So one defect is charged to one clause, once, however many checks see it.
"""

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from conformance.judging import expect
from conformance.lab.clauses import CLAUSES

PASSED, FAILED, BLOCKED, ERROR, SKIPPED = "passed", "failed", "blocked", "error", "skipped"
_ORDER = {clause: index for index, clause in enumerate(CLAUSES)}


def clause_order(clause: str) -> int:
    """Where `clause` stands in the lab's list (an unknown one last)."""
    return _ORDER.get(clause, len(_ORDER))


def lab_order(tests: Sequence[Mapping]) -> List[Mapping]:
    """`tests` in the lab's order: by clause as the lab lists them, then by id (stable run to run,
    whatever order the checks finished in)."""
    return sorted(tests, key=lambda test: (clause_order(test.get("clause") or ""), test["id"]))


def _failed_here(test: Mapping, clause: str) -> bool:
    """Does failed check `test` show a defect of `clause` by what it saw itself? (A check its
    own clause's basic call blocked saw nothing: see of_tests.)"""
    return not test.get("blocked_by") and (test.get("charged") or test.get("clause")) == clause


def of_tests(tests: Sequence[Mapping]) -> Dict[str, Dict]:
    """Each clause that has checks (or was charged by one), in the lab's order, with its verdict:
    {verdict, checks: {passed, total}, cause: test id, also_seen: [test ids], blocked_by: [clauses],
    message: the cause's message (or the blocking one's)}."""
    ordered = lab_order(tests)
    failed = [test for test in ordered if test["outcome"] == "failed"]
    clauses = {test["clause"] for test in ordered if test.get("clause") in CLAUSES}
    clauses |= {test["charged"] for test in failed if test.get("charged") in CLAUSES}
    verdicts: Dict[str, Dict] = {}
    for clause in sorted(clauses, key=_ORDER.__getitem__):
        own = [test for test in ordered if test.get("clause") == clause]
        evidence = [test for test in failed if _failed_here(test, clause)]
        # Failing its own basic call (blocking.py) fails a clause too; its checks that were not
        # run for it add nothing to see, so the first stands for them all.
        evidence = evidence or [test for test in own if test.get("blocked_by") == clause][:1]
        entry: Dict = {
            "checks": {"passed": sum(test["outcome"] == "passed" for test in own), "total": len(own)},
        }
        if evidence:
            entry.update(verdict=FAILED, cause=evidence[0]["id"], message=evidence[0].get("message") or "")
            entry["also_seen"] = [test["id"] for test in evidence[1:]]
        elif any(test["outcome"] == "error" for test in own):
            first = next(test for test in own if test["outcome"] == "error")
            entry.update(verdict=ERROR, cause=first["id"], message=first.get("message") or "")
        elif any(test["outcome"] == "failed" for test in own):
            stopped = [test for test in own if test["outcome"] == "failed"]
            entry.update(verdict=BLOCKED, message=stopped[0].get("message") or "")
            entry["blocked_by"] = sorted(
                {test.get("blocked_by") or test.get("charged") for test in stopped}, key=_ORDER.__getitem__
            )
        elif any(test["outcome"] == "passed" for test in own):
            entry["verdict"] = PASSED
        else:
            entry["verdict"] = SKIPPED
        verdicts[clause] = entry
    return verdicts


def compile_failure(tests: Sequence[Mapping]) -> Optional[Mapping]:
    """A check blocked because the runner does not compile (its `blocked_because` says what Python
    said: "does not compile: line 3: SyntaxError: ..."), or None. Nothing else about such a runner
    is worth a learner's reading."""
    return next((test for test in tests if test.get("does_not_compile")), None)


def summary(verdicts: Mapping[str, Mapping]) -> str:
    """The clauses that did not pass, in a line: "failed: S2.4 S5.2; blocked: S3.3" ("" when all did)."""
    parts = []
    for verdict in (FAILED, BLOCKED, ERROR):
        clauses = [clause for clause, entry in verdicts.items() if entry["verdict"] == verdict]
        if clauses:
            parts.append("%s: %s" % (verdict, " ".join(clauses)))
    return "; ".join(parts)


_WORDS: Dict[str, Dict[str, Any]] = {
    "en": {
        # One form for one check, one for more (Japanese says both alike).
        "passed": ("passed (its one check passed)", "passed (%d checks, all passed)"),
        "also": ("  also seen in 1 more check:", "  also seen in %d more checks:"),
        "blocked": "blocked by %s: this clause could not be judged until that is fixed (not charged here)",
        "skipped": "not run",
    },
    "ja": {
        "passed": ("合格(チェック 1 件に合格)", "合格(チェック %d 件すべてに合格)"),
        "also": ("  ほかに 1 件のチェックでも:", "  ほかに %d 件のチェックでも:"),
        "blocked": "%s のためにブロックされました: それを直すまでこの項目は判定できません(ここでは減点しません)",
        "skipped": "実行していません",
    },
}


def counted(forms: Sequence[str], count: int) -> str:
    """The form of (one, more) that `count` takes, with the count in it."""
    return forms[0] if count == 1 else forms[1] % count


def explain(entry: Mapping, tests: Sequence[Mapping], lang: str = "en") -> str:
    """A clause's verdict as a learner reads it: its cause, once, and where else it was seen."""
    words = _WORDS.get(lang, _WORDS["en"])
    verdict = entry["verdict"]
    if verdict == PASSED:
        return counted(words["passed"], entry["checks"]["total"])
    if verdict == SKIPPED:
        return words["skipped"]
    if verdict == BLOCKED:
        return words["blocked"] % ", ".join(entry["blocked_by"]) + "\n\n" + entry.get("message", "")
    lines = compact(entry.get("message", ""), lang)
    also = entry.get("also_seen") or []
    if also:
        by_id = {test["id"]: test for test in tests}
        lines.append(counted(words["also"], len(also)))
        lines += ["    - %s: %s" % (check_name(check), _actual(by_id.get(check, {}))) for check in also]
    return "\n".join(lines)


def compact(message: str, lang: str) -> List[str]:
    """A failure message's lines without its empty evidence (`stdout: (none)`, `markers: (none)`):
    what is not there says nothing the expected and actual lines do not."""
    empty = {expect.labelled(expect.evidence_word(key, lang), expect.evidence_word("none", lang)) for key in _QUIET}
    return [line for line in message.rstrip("\n").splitlines() if line not in empty]


_QUIET = ("stdout", "stderr", "markers")  # evidence lines that may be left out when empty


def check_name(test_id: str) -> str:
    """A check's name as a learner can read it: `a timeout is retried`, from test_s3_3_a_timeout_is_retried."""
    base, _, case = test_id.split("::")[-1].partition("[")
    for file_name in ("hang.sh", "flaky.sh", "apply.sh", "runs.jsonl", "applied.log"):
        base = re.sub(r"%s(?=_|$)" % file_name.replace(".", "_"), file_name, base)
    words = re.sub(r"^test_[a-z]+\d*(_\d+)?_", "", base).replace("_", " ")
    return words + (" [" + case if case else "")


def _actual(test: Mapping) -> str:
    """What a failed check saw, in one line: its `actual` line, else its first."""
    lines = (test.get("message") or "").splitlines()
    found = next((line for line in lines if line.lstrip().startswith(("actual:", "実際:"))), None)
    text = found.split(":", 1)[1] if found else (lines[0] if lines else "")
    return text.strip()

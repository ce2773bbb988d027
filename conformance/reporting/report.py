"""Outcomes of a suite run: the per-step table and the JSON report (platforms.py turns it into others)."""

import json
import os
import re
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any, Collection, Dict, List, Mapping, Optional, Sequence, Union

from conformance.harness.inert import inert
from conformance.harness.sandbox import ALIAS_IN_TEXT
from conformance.judging import verdicts
from conformance.lab.clauses import CLAUSES, display_width, steps_for

STEP_TITLES = {
    "S1": "run a command, pass its output and exit code",
    "S2": "--timeout kills the whole command, exit 124",
    "S3": "--retries with exponential backoff",
    "S4": "idempotent apply with a marker",
    "S5": "the flock on state/lock",
    "S6": "SIGTERM forwarded, exit 143",
    "S7": "one runs.jsonl line per attempt",
    "S8": "apply --dry-run",
    "X": "extended profile",
}
# The step table in the learner's language (a lab author's tools read the JSON, not this).
_TABLE_WORDS: Dict[str, Dict[str, Any]] = {
    "en": {
        "head": ("step", "what", "passed", "verdict"),
        "verdicts": {"PASS": "PASS", "FAIL": "FAIL", "NOT RUN": "NOT RUN"},
        "titles": STEP_TITLES,
        "summary": "%d passed, %d failed, %d errors, %d skipped",
    },
    "ja": {
        "head": ("ステップ", "内容", "合格", "判定"),
        "verdicts": {"PASS": "合格", "FAIL": "不合格", "NOT RUN": "未実行"},
        "titles": {
            "S1": "コマンドを実行し、出力と終了コードを伝える",
            "S2": "--timeout でコマンド全体を止め、124 で終了",
            "S3": "--retries と指数バックオフ",
            "S4": "マーカーによる冪等な apply",
            "S5": "state/lock の flock",
            "S6": "SIGTERM を伝えて 143 で終了",
            "S7": "試行ごとに runs.jsonl に 1 行",
            "S8": "apply --dry-run",
            "X": "拡張プロファイル",
        },
        "summary": "合格 %d、不合格 %d、エラー %d、スキップ %d",
    },
}
OUTCOMES = ("passed", "failed", "error", "skipped")
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


def short_error(excinfo) -> str:
    """A harness error in one line: its type and first line, never a traceback."""
    text = str(excinfo.value).strip().splitlines()
    return "%s: %s" % (excinfo.typename, text[0] if text else "(no message)")


# A check's own folder as the grader made it (/dev/shm/pyops-lab-SESSION-oOWNER-RANDOM), or as the
# runner was shown it (/tmp/tmp.XXXXXXXXXX, sandbox.py): no learner can use the path, which
# changes with every check, and the first tells of the grader's machine.
_LAB_FOLDER = re.compile(r"[^\s'\"=]*/pyops-lab-[0-9A-Za-z._-]+|%s" % ALIAS_IN_TEXT)
LAB_PLACEHOLDER = "<lab>"


def as_shown(message: str) -> str:
    """A check's message as a learner is shown it: what a runner printed quoted as text
    (inert.py), and each check folder's path as <lab>."""
    return inert(_LAB_FOLDER.sub(LAB_PLACEHOLDER, message))


class Outcomes:
    """Every test's outcome, merged over its setup, call and teardown phases."""

    def __init__(self) -> None:
        self._tests: OrderedDict[str, Dict] = OrderedDict()
        # (seconds the check expected it to take, seconds it took) for every runner started
        self.runner_calls: List[Sequence[float]] = []

    def add(self, test_report) -> None:
        props = dict(test_report.user_properties)
        if test_report.when == "teardown":
            self.runner_calls += props.get("runner_calls", [])
        outcome = test_report.outcome
        if outcome == "failed" and (test_report.when != "call" or props.get("harness_error")):
            outcome = "error"  # the suite's own problem (setup, teardown, or not a clause failure)
        if test_report.when != "call" and outcome == "passed":
            outcome = None  # only the call phase says a test passed
        entry = self._tests.setdefault(
            test_report.nodeid,
            {
                "id": test_report.nodeid,
                "clause": props.get("clause"),
                "outcome": None,
                "message": "",
                "duration_s": 0.0,
            },
        )
        entry["duration_s"] = round(entry["duration_s"] + test_report.duration, 3)
        if "plays" in props:  # played again: a busy machine left its timing unsettled (plugin.py)
            entry["plays"] = max(props["plays"], entry.get("plays", 1))
        if props.get("not_judged"):  # and no play settled it
            entry["not_judged"] = True
        for key in ("blocked_by", "blocked_because", "does_not_compile", "charged"):  # whose failure (verdicts.py)
            if key in props:
                entry[key] = as_shown(props[key]) if key == "blocked_because" else props[key]
        if "blocked_because_in" in props:
            entry["blocked_because_in"] = {lang: as_shown(text) for lang, text in props["blocked_because_in"].items()}
        if outcome and (entry["outcome"] is None or _RANK[outcome] > _RANK[entry["outcome"]]):
            entry["outcome"] = outcome
            if outcome == "skipped" and isinstance(test_report.longrepr, tuple):
                message = str(test_report.longrepr[2])
            else:
                message = props.get("message", "")
            # The one place a message enters the report, and so every view, file and platform.
            entry["message"] = as_shown(message)
            # The same in every language, where the check worded it so (a runner's failure).
            worded = props.get("messages") if message == props.get("message") else None
            if worded:
                entry["messages"] = {lang: as_shown(text) for lang, text in worded.items()}
            else:
                entry.pop("messages", None)

    def as_list(self) -> List[Dict]:
        return [dict(t, outcome=t["outcome"] or "error") for t in self._tests.values()]


def summary(tests: List[Dict]) -> Dict[str, int]:
    counts = {outcome: 0 for outcome in OUTCOMES}
    for test in tests:
        counts[test["outcome"]] += 1
    counts["total"] = len(tests)
    return counts


def steps(tests: List[Dict], profile: str) -> Dict[str, Dict[str, int]]:
    """Each step's clauses: how many passed, of how many judged (verdicts.py)."""
    table = {step: {"passed": 0, "total": 0} for step in steps_for(profile)}
    for clause, entry in verdicts.of_tests(tests).items():
        row = table.setdefault(CLAUSES[clause].step, {"passed": 0, "total": 0})
        row["total"] += 1
        row["passed"] += entry["verdict"] == verdicts.PASSED
    return table


def checks_of(tests: List[Dict], listed: Collection[str]) -> List[Dict]:
    """The checks of the clauses of the `listed` steps (by each check's own clause)."""
    return [test for test in tests if test.get("clause") in CLAUSES and CLAUSES[test["clause"]].step in listed]


def verdict(row: Mapping[str, int]) -> str:
    if row["total"] == 0:
        return "NOT RUN"
    return "PASS" if row["passed"] == row["total"] else "FAIL"


def step_table(
    tests: List[Dict], profile: str, lang: str = "en", listed: Optional[Collection[str]] = None
) -> List[str]:
    """A row per step (its clauses passed, of those judged) and a line counting the checks.
    `listed`: the only steps to show (a platform may not show every step yet; default: the steps
    of the profile that were judged, every one in a whole grading: a grading of some clauses,
    with --clause or -k, shows theirs and no row of NOT RUN for each other step). Their rows are
    judged from all of `tests` (a check of one step can be charged to another's clause); the count
    line counts the checks of the listed steps alone."""
    words = _TABLE_WORDS.get(lang, _TABLE_WORDS["en"])
    rows = steps(tests, profile)
    ran = [step for step in steps_for(profile) if rows[step]["total"]]
    shown = [step for step in steps_for(profile) if (step in listed if listed is not None else step in ran or not ran)]
    titles = [words["titles"].get(step, "") for step in shown]
    # Padded by display width: a Japanese character takes two columns.
    width = max([46] + [display_width(title) for title in titles])
    head = words["head"]
    first = max(4, display_width(head[0]))

    def row_line(step: str, title: str, passed: str, judged: str) -> str:
        return "%s %s %s  %s" % (_pad(step, first), _pad(title, width), _pad(passed, 9, right=True), judged)

    lines = ["", row_line(*head)]
    for step, title in zip(shown, titles):
        judged = "%d/%d" % (rows[step]["passed"], rows[step]["total"])
        lines.append(row_line(step, title, judged, words["verdicts"][verdict(rows[step])]))
    counts = summary(tests if listed is None else checks_of(tests, listed))
    lines.append(words["summary"] % (counts["passed"], counts["failed"], counts["error"], counts["skipped"]))
    return lines


def _pad(text: str, width: int, right: bool = False) -> str:
    """`text` padded to `width` display columns (a Japanese character takes two)."""
    room = " " * (width - display_width(text))
    return room + text if right else text + room


def build(info: Mapping, tests: List[Dict]) -> Dict:
    tests = [dict(test) for test in verdicts.lab_order(tests)]
    counts = summary(tests)
    return {
        "runner": info["runner"],
        "python": info["python"],
        "profile": info["profile"],
        "isolation": info["isolation"],
        "user_namespace": bool(info.get("user_namespace")),
        "grader_uid": os.geteuid(),
        "runner_user": info.get("runner_user", "grader"),
        "seed": info.get("seed"),
        "evidence": info.get("evidence"),
        "summary": {
            "passed": counts["passed"],
            "failed": counts["failed"],
            "errors": counts["error"],
            "skipped": counts["skipped"],
            "total": counts["total"],
        },
        "steps": steps(tests, info["profile"]),
        "clauses": verdicts.of_tests(tests),
        "tests": tests,
    }


def in_language(report: Mapping, lang: str) -> Optional[Dict]:
    """`report` with its verdicts worded in `lang`: each failure's message as its check worded it
    in that language when it found it (Outcomes keeps every wording), the clauses' entries made
    again from them. The verdicts are the same; None when a failure was not worded so (a report
    older than wordings): it must be graded again in `lang`."""
    tests = []
    for test in report["tests"]:
        worded = (test.get("messages") or {}).get(lang)
        if worded is None and test.get("message") and test["outcome"] == "failed":
            return None
        if worded is not None:  # a failure, or a check not judged for the machine's load
            test = dict(test, message=worded)
            because = (test.get("blocked_because_in") or {}).get(lang)
            if because is not None:
                test["blocked_because"] = because
        tests.append(test)
    return dict(report, tests=tests, clauses=verdicts.of_tests(tests))


def varied(rounds: Sequence[Mapping]) -> List[Dict]:
    """Checks whose outcome was not the same in every round: each with its outcome and message per round."""
    by_id: Dict[str, Dict] = {}
    for number, data in enumerate(rounds):
        for test in data["tests"]:
            entry = by_id.setdefault(
                test["id"],
                {"id": test["id"], "clause": test.get("clause"), "outcomes": [None] * len(rounds), "messages": {}},
            )
            entry["outcomes"][number] = test["outcome"]
            if test["outcome"] != "passed":
                entry["messages"][str(number + 1)] = test.get("message", "")
    # A check missing from a round (None) varied too: it was not even run the same way.
    return [entry for entry in by_id.values() if len(set(entry["outcomes"])) > 1]


def varied_lines(changed: Sequence[Mapping], rounds: int) -> List[str]:
    if not changed:
        return ["", "every check had the same outcome in all %d rounds" % rounds]
    lines = [
        "",
        "%d check(s) varied between %d rounds of the same runner: such a verdict is luck, not the runner"
        % (len(changed), rounds),
    ]
    for entry in changed:
        lines.append(
            "  %s [%s]: %s" % (entry["id"].split("::")[-1], entry["clause"], ", ".join(map(str, entry["outcomes"])))
        )
        for number, message in entry["messages"].items():
            first = (message or "(no message)").splitlines()
            lines.append("    round %s: %s" % (number, "\n      ".join(first[:3])))
    return lines


def write_json(path: Path, info: Mapping, tests: List[Dict], runner_calls: Sequence[Sequence[float]] = ()) -> None:
    data = build(info, tests)
    data["timing"] = timing_of(tests, runner_calls)
    write_report(path, data)


def timing_of(tests: List[Dict], runner_calls: Sequence[Sequence[float]]) -> Dict:
    """Where a grading's time went: what one check at a time must wait through, and its floor.

    `serial_s` is the sum of the checks' own times (what shared isolation waits through);
    `forced_wait_s` the sum of the waits the scenarios force (timeouts, backoffs, a slow
    apply.sh), each scenario counted once: no grading of these scenarios can take less.
    `played_again` counts the checks a busy machine made the suite play more than once.
    """
    return {
        "serial_s": round(sum(test["duration_s"] for test in tests), 2),
        "runner_calls": len(runner_calls),
        "runner_s": round(sum(took for _expected, took in runner_calls), 2),
        "forced_wait_s": round(sum(expected for expected, _took in runner_calls), 2),
        "played_again": sum(1 for test in tests if test.get("plays", 1) > 1),
    }


def as_json(report: Mapping) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"


def write_report(path: Path, report: Mapping) -> None:
    write_atomically(path, as_json(report))


def write_atomically(path: Path, text: Union[str, bytes]) -> None:
    """Write `text` (str as UTF-8, bytes as they are) to `path` so a reader (or a crash) never sees
    half of it.

    The folder may be one others can write (/tmp): the temporary file gets an unpredictable name
    and is made exclusively (mkstemp), so no link or file planted there beforehand is written
    through; os.replace then puts it in place of whatever has the name, never following a link.
    """
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    handle, temporary = tempfile.mkstemp(prefix=".%s." % path.name, suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o666 & ~umask())  # as an ordinary file would be made (mkstemp makes 0600)
        os.replace(temporary, str(path))
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def umask() -> int:
    """The process's umask, read without setting it (os.umask sets it, for every thread, meanwhile)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask

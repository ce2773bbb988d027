"""The class report (conformance/classroom/report_html.py): its numbers against the data, its
escaping of what submissions put in it, and the page as a real browser renders it."""

import os
import random
import shutil
import statistics
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from conformance.classroom.report_html import TOP_FAILURES, render, render_regrade
from conformance.judging import expect
from conformance.lab.clauses import CLAUSES

# Checks per clause in a real core report of the reference runner (162 in all, the suite's own
# count): the classes below are made of these, failing some.
# fmt: off
CHECKS_PER_CLAUSE = {
    "S1.1": 12, "S1.2": 8, "S1.3": 14, "S2.1": 5, "S2.2": 3, "S2.3": 7, "S2.4": 7, "S3.1": 6, "S3.2": 5,
    "S3.3": 3, "S3.4": 2, "S3.5": 4, "S4.1": 4, "S4.2": 5, "S4.3": 5, "S4.4": 5, "S5.1": 4, "S5.2": 9,
    "S6.1": 2, "S6.2": 2, "S6.3": 6, "S6.4": 4, "S7.1": 9, "S7.2": 17, "S7.3": 3, "S8.1": 5, "S8.2": 4,
    "S8.3": 2,
}
# fmt: on
MAX_SCORE = 28.0

# A failure: (clause, how many of its checks fail (None: all), the message's "expected" line).
Failure = Tuple[str, Optional[int], str]


def student(name: str, failures: Sequence[Failure] = (), status: str = "graded", message: str = "") -> Dict:
    """One grading as the class report gets it: a full core report with `failures`, or none at all."""
    if status != "graded":
        return {"student": name, "status": status, "message": message, "score": None, "max_score": None,
                "steps": {}, "tests": []}  # fmt: skip
    failing = {clause: (count, expected) for clause, count, expected in failures}
    tests = []
    for clause, total in CHECKS_PER_CLAUSE.items():
        count, expected = failing.get(clause, (0, ""))
        for number in range(total):
            test = {"id": "test_%s.py::test_%s[%d]" % (clause[:2].lower(), clause.replace(".", "_").lower(), number),
                    "clause": clause, "outcome": "passed", "message": ""}  # fmt: skip
            if count is None or number < count:
                # The real thing: "[S2.4] ...", "  expected: ...", "  actual: ...", "  hint: ...".
                actual = "exit %d after %.2f s" % (number, 0.1 * len(name))
                test.update(outcome="failed", message=expect.render(clause, expected, actual, None))
            tests.append(test)
        failing.pop(clause, None)
    assert not failing, "unknown clauses %s" % failing
    # Points as a lab may give them: one per clause, earned when every check of the clause passed.
    steps: Dict[str, Dict[str, float]] = {}
    for clause in CHECKS_PER_CLAUSE:
        row = steps.setdefault(clause.split(".")[0], {"points": 0.0, "max_points": 0.0})
        row["max_points"] += 1.0
        row["points"] += all(test["outcome"] == "passed" for test in tests if test["clause"] == clause)
    score = sum(row["points"] for row in steps.values())
    return {"student": name, "status": "graded", "message": "", "score": score, "max_score": MAX_SCORE,
            "steps": steps, "tests": tests}  # fmt: skip


LEFT_A_SLEEP = ("S2.4", 2, "no process of the command left running")
NO_BACKOFF = ("S3.2", 3, "a wait of 0.2 s before attempt 2")
NO_LOCK = ("S5.2", None, "exit 3 and `another run in progress` on stderr")


def small_class() -> List[Dict]:
    return [
        student("carol", [LEFT_A_SLEEP, NO_BACKOFF]),
        student("alice", [("S2.4", 1, "no process of the command left running")]),
        student("bob"),
        student("dave", [LEFT_A_SLEEP, NO_LOCK]),
        student("erin", status="error", message="runner.py is not valid Python: line 3"),
        student("frank", [NO_LOCK]),
        student("grace", status="timeout", message="the grading did not end within 600 s and was stopped"),
    ]


# fmt: off
FIRST_NAMES = [
    "aiko", "alice", "amir", "ana", "ben", "carlos", "chen", "dara", "elena", "emeka", "farah", "gus", "hana",
    "ivan", "jun", "kofi", "lena", "liam", "maya", "mei", "noah", "olu", "priya", "quinn", "ravi", "sara", "taro",
    "uma", "vik", "yuki",
]
# fmt: on
MISTAKES = [  # (how likely, what fails): the ways a class tends to go wrong
    (0.45, [("S2.4", 3, "no process of the command left running")]),
    (0.35, [("S3.2", 2, "a wait of 0.2 s before attempt 2")]),
    (0.25, [("S5.2", None, "exit 3 and `another run in progress` on stderr")]),
    (0.2, [("S6.1", None, "the command got SIGTERM"), ("S6.4", 2, "no process of the command left after SIGTERM")]),
    (0.2, [("S7.2", 4, "`duration_ms` is an int")]),
    (0.15, [("S4.3", 1, "no marker while apply.sh still runs")]),
    (0.1, [("S1.2", 2, "the command's stdout byte for byte")]),
    (0.1, [("S8.2", 4, "apply.sh not called with --dry-run"), ("S8.3", None, "`already applied` on stdout")]),
    (0.1, [("S3.5", 1, "exit 124, the last attempt's code"), ("S3.3", 3, "attempt 2 after a timeout")]),
    (0.08, [(clause, None, "one JSON line per attempt in runs.jsonl") for clause in ("S7.1", "S7.2", "S7.3")]),
    (0.05, [("S4.4", None, "exit 1 and no marker when apply.sh fails"), ("S2.2", 1, "`timeout` on stderr")]),
]


def class_of_30(seed: int = 7) -> List[Dict]:
    """30 students: two whose grading ended in an error or a timeout, one with a hostile name; some
    make few mistakes, some many."""
    rng = random.Random(seed)
    students = []
    for name in FIRST_NAMES[:28] + ["<script>alert('pwn')</script>"]:
        care = rng.choice([0.3, 0.6, 1.0, 1.0, 1.5, 2.5])
        failures = {}  # a later mistake on a clause wins: one failure per clause
        for share, mistake in MISTAKES:
            if rng.random() < share * care:
                failures.update((failure[0], failure) for failure in mistake)
        students.append(student(name, list(failures.values())))
    students.append(student("zoe", status="timeout", message="the grading did not end within 600 s and was stopped"))
    students[3] = student(students[3]["student"], status="error", message="runner.py: SyntaxError: invalid syntax")
    return students


# --- what the report should say, computed here from the data, not with the report's code ----------


def is_graded(one: Dict) -> bool:
    return one["status"] == "graded"


def clause_outcomes(one: Dict, clause: str) -> List[str]:
    return [test["outcome"] for test in one["tests"] if test["clause"] == clause]


def expected_pass_counts(students: List[Dict]) -> Dict[str, int]:
    return {
        clause: sum(
            bool(clause_outcomes(one, clause)) and all(o == "passed" for o in clause_outcomes(one, clause))
            for one in students
            if is_graded(one)
        )
        for clause in CHECKS_PER_CLAUSE
    }


def expected_states(students: List[Dict]) -> Dict[Tuple[str, str], str]:
    """Each heat-map cell's class by (student, clause)."""
    states = {}
    for one in students:
        for clause in CHECKS_PER_CLAUSE:
            outcomes = clause_outcomes(one, clause)
            failed = outcomes.count("failed")
            states[(one["student"], clause)] = (
                "none" if not outcomes else "passed" if not failed else "failed" if failed == len(outcomes) else "some"
            )
    return states


def shown(clause: str) -> str:
    """A clause's text as the page shows it: its `code` as code, without the backticks."""
    return CLAUSES[clause].text_en.replace("`", "")


def expected_bands(students: List[Dict]) -> Dict[str, int]:
    bands = {"%d–%d" % (low, low + 9): 0 for low in range(0, 100, 10)}
    bands["100"] = 0
    for one in filter(is_graded, students):
        percent = int(100 * one["score"] / one["max_score"] + 1e-9)
        bands["100" if percent >= 100 else "%d–%d" % (percent // 10 * 10, percent // 10 * 10 + 9)] += 1
    return bands


# --- reading the page back ------------------------------------------------------------------------------


class Page(HTMLParser):
    """Every element's tag and attributes, the page's text as a reader sees it, the header's cards and
    the heat map's cells by (student, clause)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: List[Tuple[str, Dict[str, str]]] = []
        self.cells: Dict[Tuple[str, str], Dict[str, str]] = {}
        self.text: List[str] = []
        self.cards: Dict[str, List[str]] = {}
        self._row: Optional[str] = None
        self._card: Optional[str] = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attributes = {key: value or "" for key, value in attrs}
        self.elements.append((tag, attributes))
        if tag not in ("b", "code"):
            self.text.append(" ")  # a new cell, line or box: words on both sides of it stay apart
        if "data-card" in attributes:
            self._card = attributes["data-card"]
            self.cards[self._card] = []
        if tag == "tr":
            self._row = attributes.get("data-student")
        if tag == "td" and self._row is not None and "data-clause" in attributes:
            self.cells[(self._row, attributes["data-clause"])] = attributes

    def handle_endtag(self, tag):
        if tag == "div":
            self._card = None

    def handle_data(self, data):
        if self.lasttag == "style" and self.elements[-1][0] == "style":
            return  # the style sheet is not text of the page
        self.text.append(data)
        if self._card is not None and data.strip():
            self.cards[self._card].append(data.strip())

    def having(self, attribute: str) -> List[Dict[str, str]]:
        return [attributes for _, attributes in self.elements if attribute in attributes]

    def all_text(self) -> str:
        return " ".join("".join(self.text).split())


def cell_state(cell: Dict[str, str]) -> str:
    (state,) = set(cell["class"].split()) & {"passed", "some", "failed", "blocked", "none"}
    return state


def cards(page: Page) -> Dict[str, str]:
    """The header's figures: each card's label and the value shown under it."""
    return {label: texts[-1] for label, texts in page.cards.items()}


# --- the numbers ----------------------------------------------------------------------------------------


def test_the_header_counts_the_class_by_status_with_mean_and_median():
    students = small_class()
    figures = cards(Page(render(students)))
    graded = [one["score"] / one["max_score"] for one in students if is_graded(one)]
    assert figures["students"] == "7"
    assert (figures["graded"], figures["error"], figures["timeout"]) == ("5", "1", "1")
    assert figures["mean score"] == "%.0f%%" % (100 * statistics.mean(graded))
    assert figures["median score"] == "%.0f%%" % (100 * statistics.median(graded))


def test_the_header_names_the_generation_and_what_graded_it():
    suite, configuration = "ab" * 32, "cd" * 32
    page = render(small_class(), generation={"number": 3, "suite": suite, "configuration": configuration})
    assert 'data-generation="3"' in page
    assert "<b>generation 3</b>" in page and suite[:12] in page and configuration[:12] in page
    assert suite not in page, "a whole sha256 is for machines: the page shows what an eye compares"
    adopted = render(small_class(), generation={"number": 1})  # graded before generations: unknown
    assert "suite <code>unknown</code>" in adopted
    assert 'id="generation"' not in render(small_class())


def test_the_histogram_counts_students_per_band_and_the_ungraded_apart():
    students = small_class()
    page = Page(render(students))
    bands = {bar["data-band"]: int(bar["data-count"]) for bar in page.having("data-band")}
    assert bands == expected_bands(students)
    assert {bar["data-status"]: int(bar["data-count"]) for bar in page.having("data-status")} == {
        "error": 1,
        "timeout": 1,
    }
    assert "Not in the score bands (no score to count): 1 error, 1 timeout." in page.all_text()
    assert "the grading did not end within 600 s and was stopped" in page.all_text()


def test_every_clause_has_its_pass_rate_in_the_lab_order():
    students = small_class()
    page = Page(render(students))
    rows = page.having("data-passed")
    assert [row["data-clause"] for row in rows] == list(CHECKS_PER_CLAUSE)  # the lab's order
    assert {row["data-clause"]: int(row["data-passed"]) for row in rows} == expected_pass_counts(students)
    assert {row["data-graded"] for row in rows} == {"5"}
    text = page.all_text()
    for clause, passed in expected_pass_counts(students).items():
        # `code` in a clause's text comes as code, without its backticks
        assert "%s %s %d/5 %.0f%%" % (clause, shown(clause), passed, 100 * passed / 5) in text
    assert "S2.4 %s 2/5 40%%" % shown("S2.4") in text  # alice, carol and dave missed it
    assert "<code>sleep</code>" in render(students)


def test_the_heat_map_has_a_row_per_student_by_name_and_a_cell_per_clause():
    students = small_class()
    page = Page(render(students))
    rows = [row["data-student"] for row in page.having("data-student")]
    assert rows == sorted(one["student"] for one in students)
    assert {key: cell_state(cell) for key, cell in page.cells.items()} == expected_states(students)
    assert page.cells[("alice", "S2.4")]["title"] == "alice S2.4: 1 of 7 checks failed"
    assert page.cells[("dave", "S5.2")]["title"] == "dave S5.2: 9 of 9 checks failed"
    assert page.cells[("bob", "S1.1")]["title"] == "bob S1.1: all 12 checks passed"
    assert page.cells[("erin", "S1.1")]["title"] == "erin S1.1: not graded (error)"


def test_a_tooltip_names_outcomes_that_are_not_failures():
    one = student("ivy", [("S3.1", 2, "3 attempts")])
    one["tests"][next(i for i, t in enumerate(one["tests"]) if t["clause"] == "S3.1")]["outcome"] = "skipped"
    page = Page(render([one]))
    assert page.cells[("ivy", "S3.1")]["title"] == "ivy S3.1: 2 of 6 checks did not pass (1 failed, 1 skipped)"


def test_the_most_frequent_failures_are_grouped_by_clause_and_line_and_ranked_by_students():
    students = small_class()
    page = Page(render(students))
    groups = page.having("data-students")
    # S2.4's "no process ..." line: alice, carol and dave (dave's two failed checks count once).
    assert [(g["data-clause"], int(g["data-students"]), int(g["data-checks"])) for g in groups] == [
        ("S2.4", 3, 5),
        ("S5.2", 2, 18),
        ("S3.2", 1, 3),
    ]
    text = page.all_text()
    assert "expected: no process of the command left running alice, carol, dave" in text
    assert "[S2.4]" not in text  # the heading line of the messages is not what they are grouped by


def test_the_failures_count_causes_never_cascades_and_blocked_cells_stand_apart():
    # Ines's runs.jsonl line is built by hand: S3.2's checks ran into it (their failures name
    # S7.1, so they are charged there) and S3.2 is blocked, not failed. Jo's runner exits 0 for
    # everything: its basic call fails S1.3, which blocks every other `run` clause.
    ines = student("ines", [("S7.1", 2, "one JSON object per line"), ("S3.2", None, "one JSON object per line")])
    for test in ines["tests"]:
        if test["clause"] == "S3.2":
            test.update(message=expect.render("S7.1", "one JSON object per line", "not JSON", None), charged="S7.1")
    jo = student("jo", [(clause, None, "exit code 3") for clause in ("S1.3", "S2.1", "S3.1")])
    for test in jo["tests"]:
        if test["outcome"] == "failed":
            test["blocked_by"] = "S1.3"
    page = Page(render([ines, jo, student("kim", [("S7.1", 1, "one JSON object per line")])]))
    groups = [(g["data-clause"], int(g["data-students"])) for g in page.having("data-students")]
    assert groups == [("S7.1", 2), ("S1.3", 1)], groups
    assert cell_state(page.cells[("ines", "S3.2")]) == "blocked"
    assert page.cells[("ines", "S3.2")]["title"] == "ines S3.2: blocked by S7.1"
    assert cell_state(page.cells[("jo", "S2.1")]) == "blocked" and cell_state(page.cells[("jo", "S1.3")]) == "failed"


def test_only_the_top_failures_are_listed():
    clauses = list(CHECKS_PER_CLAUSE)
    students = [student("s%02d" % n, [(clauses[n], 1, "case %d" % n)]) for n in range(TOP_FAILURES + 5)]
    students.append(student("many", [(clauses[TOP_FAILURES + 2], 1, "case %d" % (TOP_FAILURES + 2))]))
    groups = Page(render(students)).having("data-students")
    assert len(groups) == TOP_FAILURES
    assert groups[0]["data-clause"] == clauses[TOP_FAILURES + 2] and groups[0]["data-students"] == "2"


# --- what submissions put in the page -------------------------------------------------------------------


def test_a_hostile_name_and_message_come_out_as_text():
    name = '<script>alert(1)</script>" onmouseover="alert(2)'
    message = "<img src=x onerror=alert(3)> & </section>"
    hostile = student(name, [("S1.1", 1, message)])
    crashed = student("<b>bold</b>", status="error", message=message)
    output = render([hostile, crashed], title="<i>class</i>")
    page = Page(output)
    assert {tag for tag, _ in page.elements}.isdisjoint({"script", "img", "i"})
    assert not [attributes for _, attributes in page.elements if "onmouseover" in attributes or "onerror" in attributes]
    assert "<script" not in output and "<img" not in output and "<i>" not in output
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot; onmouseover=&quot;alert(2)" in output
    assert ("<b>bold</b>" not in output) and "&lt;b&gt;bold&lt;/b&gt;" in output
    text = page.all_text()
    assert name in text and "expected: " + message in text and message in text
    assert [row["data-student"] for row in page.having("data-student")] == sorted([name, "<b>bold</b>"])


def test_a_name_that_reorders_or_drives_a_terminal_is_shown_as_its_escapes():
    # A right-to-left override makes "eve<U+202E>txt.exe" read "eveexe.txt"; an escape sequence
    # could hide or redraw what follows where the page's text is copied to a terminal.
    name = "<eve>\u202etxt.exe\x1b[8m"
    shown = "<eve>\\u202etxt.exe\\x1b[8m"
    pages = {
        "report.html": render(
            [student(name, [LEFT_A_SLEEP]), student(name + "2", status="error", message="no runner.py in %s/" % name)]
        ),
        "regrade.html": render_regrade(
            [
                {
                    "student": name,
                    "old_score": "28/28",
                    "new_score": "27/28",
                    "clauses": [
                        {"clause": "S2.4", "old": "passed", "new": "failed", "old_message": "", "new_message": "x"}
                    ],
                }
            ],
            1,
            1,
            2,
        ),
    }
    for what, output in pages.items():
        assert "\u202e" not in output and "\x1b" not in output, what
        assert "&lt;eve&gt;" in output and "<eve>" not in output, what  # and HTML-escaped still
        page = Page(output)
        assert shown in page.all_text(), what
        assert shown in [row["data-student"] for row in page.having("data-student")], what


# --- classes at the edges -------------------------------------------------------------------------------


def test_a_class_with_no_graded_submission_still_renders():
    students = [student("amy", status="error", message="no runner.py"), student("raj", status="timeout")]
    page = Page(render(students))
    # The header, the histogram (which still shows the ungraded apart), pass rates, heat map, failures.
    assert page.all_text().count("no graded submissions") == 5
    figures = cards(page)
    assert (figures["students"], figures["graded"], figures["error"], figures["timeout"]) == ("2", "0", "1", "1")
    assert "mean score" not in figures
    assert {bar["data-status"]: bar["data-count"] for bar in page.having("data-status")} == {
        "error": "1",
        "timeout": "1",
    }


def test_a_status_the_report_does_not_know_is_counted_apart_too():
    students = [student("kim"), student("lee", status="cancelled", message="the batch was stopped")]
    page = Page(render(students))
    assert cards(page)["cancelled"] == "1"
    assert {bar["data-status"]: bar["data-count"] for bar in page.having("data-status")} == {"cancelled": "1"}
    assert page.cells[("lee", "S1.1")]["title"] == "lee S1.1: not graded (cancelled)"


def test_an_empty_class_still_renders():
    page = Page(render([]))
    assert cards(page)["students"] == "0" and "no graded submissions" in page.all_text()


def test_a_class_of_one():
    one = student("solo", [NO_LOCK])
    page = Page(render([one]))
    figures = cards(page)
    assert figures["students"] == "1" and figures["mean score"] == figures["median score"]
    assert (figures["error"], figures["timeout"]) == ("0", "0") and not page.having("data-status")
    assert {row["data-clause"]: int(row["data-passed"]) for row in page.having("data-passed")} == (
        expected_pass_counts([one])
    )
    assert [(g["data-clause"], g["data-students"]) for g in page.having("data-students")] == [("S5.2", "1")]


# --- in a browser ---------------------------------------------------------------------------------------


def chromium() -> str:
    """The browser, or a skip: a failure instead where CI says a browser must be there."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("PYOPS_REQUIRE_BROWSER") == "1":
        pytest.fail("PYOPS_REQUIRE_BROWSER=1 but no chromium on PATH: the class report's rendering went untested")
    pytest.skip("no chromium on PATH (install Debian's chromium, or set PYOPS_REQUIRE_BROWSER=1 to make this fail)")


def headless(browser: str, profile: Path, *arguments: str) -> subprocess.CompletedProcess:
    # A throw-away profile, so runs share nothing with each other or with a user's browser.
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=%s" % profile]
    return subprocess.run(command + list(arguments), capture_output=True, timeout=60, check=True)


def screenshot(browser: str, profile: Path, page: Path, shot: Path, width: int, height: int) -> None:
    """`page` drawn by the browser into `shot` (the tests' artifacts), at that size and not blank."""
    if shot.exists():
        shot.unlink()
    headless(browser, profile, "--screenshot=%s" % shot, "--window-size=%d,%d" % (width, height),
             "--hide-scrollbars", page.as_uri())  # fmt: skip
    drawn_width, drawn_height, values = png_facts(shot.read_bytes())
    assert (drawn_width, drawn_height) == (width, height)
    assert values > 100, "the screenshot looks blank (%d distinct byte values)" % values


def png_facts(data: bytes) -> Tuple[int, int, int]:
    """A PNG's width, height and how many distinct byte values its (filtered) pixel data holds: a blank
    page compresses to a handful, a page of text and colours shows nearly all 256."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat, width, height = 8, b"", 0, 0
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        chunk = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        position += 12 + length
    pixels = zlib.decompress(idat)
    return width, height, sum(bytes([value]) in pixels for value in range(256))


@pytest.mark.slow(3)
def test_chromium_renders_the_report_of_a_class_of_30(tmp_path):
    browser = chromium()
    students = class_of_30()
    artifacts = Path(os.environ.get("PYOPS_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    report = artifacts / "class-report.html"
    report.write_text(render(students), encoding="utf-8")

    dom = headless(browser, tmp_path / "profile-dom", "--dump-dom", report.as_uri()).stdout.decode("utf-8")
    page = Page(dom)
    assert [attributes["id"] for tag, attributes in page.elements if tag == "section"] == [
        "histogram",
        "pass-rates",
        "heat-map",
        "failures",
    ]
    figures = cards(page)
    assert (figures["students"], figures["graded"], figures["error"], figures["timeout"]) == ("30", "28", "1", "1")
    assert {row["data-clause"]: int(row["data-passed"]) for row in page.having("data-passed")} == (
        expected_pass_counts(students)
    )
    assert {bar["data-band"]: int(bar["data-count"]) for bar in page.having("data-band")} == expected_bands(students)
    assert [row["data-student"] for row in page.having("data-student")] == sorted(one["student"] for one in students)
    assert {key: cell_state(cell) for key, cell in page.cells.items()} == expected_states(students)
    text = page.all_text()
    for clause, passed in expected_pass_counts(students).items():
        assert "%s %s %d/28 %.0f%%" % (clause, shown(clause), passed, 100 * passed / 28) in text
    # The hostile name is text in the browser's document too, not an element.
    assert "script" not in {tag for tag, _ in page.elements}
    assert "<script>alert('pwn')</script>" in text

    # A blank 1280x2000 page shows 4 distinct byte values, this report 256.
    screenshot(browser, tmp_path / "profile-shot", report, artifacts / "class-report.png", 1280, 2000)

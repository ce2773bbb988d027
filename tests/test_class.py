"""`pyops-conformance class`: a folder of submissions graded, written as it goes, resumed.

Unit tests for discovery, the store and the plan; end to end, a small class graded for real
(interrupted by Ctrl-C, then resumed), and a grading stopped by its timeout.
"""

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import psutil
import pytest

from conformance.classroom import command, grading
from conformance.classroom.batch import Batch, Progress
from conformance.classroom.command import main_class
from conformance.classroom.discover import NotASubmissionsFolder, discover
from conformance.classroom.queue import Settings
from conformance.classroom.store import NotAClassFolder, Store, resume_key, safe_cell
from conformance.harness import sandbox
from conformance.lab.clauses import CLAUSES, in_profile
from conformance.lab.config import DEFAULT_FILE, load
from conformance.reporting import provenance, report
from conformance.selftest.zoo import build, by_name
from tests.grading import REFERENCE, class_command, class_rows, cpu_spent_s, not_passed

CONFIG_TEXT = DEFAULT_FILE.read_text(encoding="utf-8")
# The zoo's mutant whose S2 timeout ends the group with SIGTERM (a TERM-ignoring command survives).
WRONG = "timeout-sends-sigterm"


def write(path: Path, text: str = "print('hi')\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---- who submitted what ------------------------------------------------------------------------


def test_submissions_are_folders_with_a_runner_or_student_files(tmp_path):
    write(tmp_path / "alice" / "runner.py")
    write(tmp_path / "bob.py")
    write(tmp_path / "carol" / "main.py")
    write(tmp_path / "notes.txt")
    write(tmp_path / ".hidden" / "runner.py")
    write(tmp_path / "dave" / "runner.py")
    write(tmp_path / "dave.py")
    (tmp_path / "eve.py").symlink_to("/etc/passwd")
    found = {s.student: s for s in discover(tmp_path)}
    assert sorted(found) == ["alice", "bob", "carol", "dave", "eve"]
    assert found["alice"].path == tmp_path / "alice" / "runner.py" and not found["alice"].problem
    assert found["bob"].path == tmp_path / "bob.py"
    assert found["carol"].path is None and "no runner.py in carol/ (found: main.py)" in found["carol"].problem
    assert found["dave"].path is None and "two submissions" in found["dave"].problem
    # The grader runs as root: a link would have it read any file of the machine as a runner.
    assert found["eve"].path is None and "symbolic link" in found["eve"].problem


def test_a_file_is_not_a_submissions_folder(tmp_path):
    with pytest.raises(NotASubmissionsFolder, match="not a folder"):
        discover(write(tmp_path / "x.py"))


# ---- the store ---------------------------------------------------------------------------------


def test_the_store_never_writes_into_a_folder_it_did_not_make(tmp_path):
    write(tmp_path / "mine" / "thesis.tex")
    with pytest.raises(NotAClassFolder, match="holds other files"):
        Store(tmp_path / "mine", load()).open()
    assert sorted(os.listdir(str(tmp_path / "mine"))) == ["thesis.tex"]
    Store(tmp_path / "new", load()).open()
    Store(tmp_path / "new", load()).open()  # its own folder: reopened to resume


def test_every_input_of_a_grading_is_in_its_resume_key_and_nothing_that_only_scores_it():
    base = resume_key(b"runner", CONFIG_TEXT, "suite1", None)
    changed = [
        resume_key(b"runner2", CONFIG_TEXT, "suite1", None),
        resume_key(b"runner", CONFIG_TEXT.replace('profile = "core"', 'profile = "extended"'), "suite1", None),
        resume_key(b"runner", CONFIG_TEXT, "suite2", None),
        resume_key(b"runner", CONFIG_TEXT, "suite1", "/usr/bin/python3"),
    ]
    assert base == resume_key(b"runner", CONFIG_TEXT, "suite1", None)
    assert len({base, *changed}) == 5
    # Points, visibility, the language and comments score, word and show a grading: they do not
    # change what it runs (a report words each failure in every language).
    scored_otherwise = CONFIG_TEXT.replace("S1 = 3", "S1 = 6").replace('default = "visible"', 'default = "hidden"')
    scored_otherwise = scored_otherwise.replace('profile = "core"', 'profile = "core"\nlang = "ja"')
    assert scored_otherwise != CONFIG_TEXT and resume_key(b"runner", scored_otherwise + "#", "suite1", None) == base


def test_grades_csv_has_a_row_per_student_and_cannot_carry_a_formula(tmp_path):
    store = Store(tmp_path / "out", load())
    store.open()
    graded = {"student": "alice", "status": "graded", "score": 26.49999, "max_score": 28.0, "message": ""}
    graded["steps"] = {"S1": {"points": 3.0, "max_points": 3.0}, "S2": {"points": 2.5, "max_points": 4.0}}
    hostile = {"student": "=cmd()", "status": "error", "score": None, "max_score": None, "steps": {}}
    hostile["message"] = "-1+1 no runner.py"
    store.write_grades([hostile, graded], ["S1", "S2"])
    lines = (tmp_path / "out" / "grades.csv").read_text().splitlines()
    assert lines[0] == "student,score,max_score,status,generation,S1 (3 pts),S2 (4 pts),message"
    # The lab's max score on every row, the points to two decimals at most.
    assert lines[1] == "'=cmd(),0,28,error,1,,,'-1+1 no runner.py"
    assert lines[2] == "alice,26.5,28,graded,1,3,2.5,"


@pytest.mark.parametrize(
    "cell, shown",
    [
        ("alice", "alice"),
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-1+1", "'-1+1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1+1", "'\t=1+1"),  # OWASP's TAB and CR: a spreadsheet drops them and reads the formula
        ("\r=1+1", "'\\x0d=1+1"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),  # a control character is shown, not obeyed (conformance/harness/inert.py)
        ("right\u202eleft", "right\\u202eleft"),
        ("'=1+1", "'=1+1"),  # neutralised already (a cell read back from grades.csv): as it is
    ],
)
def test_a_cell_is_never_a_formula_nor_a_control_character(cell, shown):
    assert safe_cell(cell) == shown


def test_a_carriage_return_in_a_name_does_not_split_a_row_of_grades_csv(tmp_path):
    store = Store(tmp_path / "out", load())
    store.open()
    names = ["a\rb", "\t=1+1", "c\r\nd"]
    records = [{"student": name, "status": "error", "score": None, "max_score": None, "steps": {}} for name in names]
    store.write_grades([dict(record, message="no runner.py in %s/" % record["student"]) for record in records], ["S1"])
    text = (tmp_path / "out" / "grades.csv").read_text(encoding="utf-8")
    assert "\r" not in text
    # Every line a row, as a spreadsheet or a line-by-line tool reads it: a header and one per student.
    assert len(text.splitlines()) == 1 + len(names), text
    rows = list(csv.reader(io.StringIO(text)))
    assert sorted(row[0] for row in rows[1:]) == sorted(["a\\x0db", "'\t=1+1", "c\\x0d\\x0ad"])
    assert "no runner.py in a\\x0db/" in [row[-1] for row in rows]


# ---- a class graded in this process, each grading made up at once ------------------------------


def quick_report(runner_text: bytes, config_text: str = "") -> Dict:
    """A core report made at once: every clause passes but those the runner or the configuration
    names (`# fails S1.3`)."""
    failing = set(re.findall(r"fails (S\d\.\d)", runner_text.decode("utf-8", "replace") + config_text))
    tests = [
        {
            "id": "tests/test_%s.py::check" % clause.replace(".", "_"),
            "clause": clause,
            "outcome": "failed" if clause in failing else "passed",
            "message": "[%s] not as the lab says" % clause if clause in failing else "",
            "messages": {"en": "[%s] not as the lab says" % clause, "ja": "[%s] ラボのとおりではありません" % clause}
            if clause in failing
            else None,
            "duration_s": 0.0,
        }
        for clause in CLAUSES
        if in_profile(clause, "core")
    ]
    return report.build(
        {"runner": "runner.py", "python": sys.executable, "profile": "core", "isolation": "none"}, tests
    )


class QuickClass:
    """`pyops-conformance class` run in this process, its gradings made up from the runners'
    text in no time: what is tested is the class folder and the command, not the suite."""

    def __init__(self, capsys) -> None:
        self.capsys = capsys
        self.graded: List[bytes] = []  # every runner text graded, in order

    def grade(self, settings: Settings, runner_text: bytes, cancel=None) -> Dict:
        self.graded.append(runner_text)
        return {
            "status": grading.GRADED,
            "message": "",
            "report": quick_report(runner_text, settings.config_text),
            "output": "graded at once\n",
            "seconds": 0.0,
            "suite": provenance.suite_fingerprint(),
        }

    def run(self, *args: object) -> Tuple[int, str, str]:
        """`class ARGS -j 1`: its exit status, stdout and stderr."""
        self.capsys.readouterr()
        status = main_class([str(arg) for arg in args] + ["-j", "1"])
        out, err = self.capsys.readouterr()
        return status, out, err


def install_quick_class(monkeypatch, capsys) -> QuickClass:
    """A QuickClass for this test: its gradings replace the suite's until the test ends."""
    quick = QuickClass(capsys)

    def grade(settings: Settings, runner_text: bytes, cancel=None) -> Dict:
        return quick.grade(settings, runner_text, cancel)

    monkeypatch.setattr(Settings, "grade", grade)
    monkeypatch.setattr(command, "stop_on_signals", lambda: None)  # this process's signals stay pytest's
    return quick


@pytest.fixture
def quick_class(monkeypatch, capsys) -> QuickClass:
    return install_quick_class(monkeypatch, capsys)


def class_of_20(subs: Path) -> None:
    """alice, whose runner fails S1.3, and 19 classmates whose runners pass."""
    write(subs / "alice.py", "# fails S1.3\n")
    for number in range(19):
        write(subs / ("student%02d.py" % number), "# student %d's\n" % number)


def regraded_without_grading(quick_class: QuickClass, subs: Path, out: Path, what: str, *options: object) -> str:
    """`class SUBS --out OUT OPTIONS` for a class graded before: what it prints, once it is shown
    to have run no runner, in under 5 seconds of CPU time (which the machine's load does not
    stretch), for a change of `what` alone."""
    graded = len(quick_class.graded)
    spent = cpu_spent_s()
    status, stdout, _ = quick_class.run(subs, "--out", out, *options)
    spent = cpu_spent_s() - spent
    assert status == 0 and "0 to grade" in stdout, stdout
    assert len(quick_class.graded) == graded, "a change of %s ran a runner again" % what
    assert spent < 5, "a class of 20 regraded for its %s in %.1f s of CPU" % (what, spent)
    return stdout


def test_a_change_of_points_alone_scores_the_class_again_without_grading_it(tmp_path, quick_class):
    subs, out = tmp_path / "subs", tmp_path / "out"
    class_of_20(subs)
    assert quick_class.run(subs, "--out", out)[0] == 0
    graded = len(quick_class.graded)
    before = {name: json.loads((out / name / "grading.json").read_text()) for name in ("alice", "student00")}
    changed = tmp_path / "lab.toml"
    changed.write_text(CONFIG_TEXT.replace("S1 = 3", "S1 = 6"), encoding="utf-8")
    stdout = regraded_without_grading(quick_class, subs, out, "points", "--config", changed)
    # Pending review, each student scored by the new points: alice's S1.3 failure costs more.
    pending = out / "generations" / "2"
    alice = json.loads((pending / "alice" / "grading.json").read_text())
    assert alice["max_score"] == before["alice"]["max_score"] + 3 and alice["score"] < before["alice"]["score"] + 3
    assert (pending / "alice" / "runner.py").read_bytes() == b"# fails S1.3\n"
    # The record says under which configuration it is scored, and with which it was graded.
    kept = json.loads((pending / "alice" / "results.json").read_text())["provenance"]
    assert kept["configuration"]["text"] == changed.read_text(encoding="utf-8")
    assert "rescored" in kept  # a made-up grading has no provenance to say which it was graded with
    assert "20 of 20 submissions change" in stdout, stdout
    # The review says what changed in the configuration, on the console and on the page, and that
    # a score moved by points alone has the same verdicts.
    assert "the configuration changed: points of step S1: 3 -> 6" in stdout, stdout
    page = (out / "regrade.html").read_text()
    assert 'data-changes="1"' in page and "points of step S1: 3 -&gt; 6" in page
    assert "the same verdicts: the score moves with the configuration's points" in page
    # Approved as printed: still nothing graded.
    status, _, _ = quick_class.run(subs, "--out", out, "--config", changed, "--approve")
    assert status == 0 and len(quick_class.graded) == graded


def test_a_change_of_language_alone_rewords_the_class_without_grading_it(tmp_path, quick_class):
    subs, out = tmp_path / "subs", tmp_path / "out"
    class_of_20(subs)
    assert quick_class.run(subs, "--out", out, "--lang", "en")[0] == 0
    before = json.loads((out / "alice" / "grading.json").read_text())
    stdout = regraded_without_grading(quick_class, subs, out, "language", "--lang", "ja")
    # Pending review with the same verdicts and scores, worded in Japanese wherever a learner reads.
    pending = out / "generations" / "2"
    alice = json.loads((pending / "alice" / "grading.json").read_text())
    assert (alice["score"], alice["max_score"], alice["lang"]) == (before["score"], before["max_score"], "ja")
    results = json.loads((pending / "alice" / "results.json").read_text())
    failed = [test for test in results["tests"] if test["outcome"] == "failed"]
    assert [test["message"] for test in failed] == ["[S1.3] ラボのとおりではありません"]
    assert results["clauses"]["S1.3"]["message"] == "[S1.3] ラボのとおりではありません"
    assert "ラボのとおりではありません" in (pending / "alice" / "output.txt").read_text(encoding="utf-8")
    gradescope = json.loads((pending / "alice" / "gradescope.json").read_text())
    assert any("ラボのとおりではありません" in test["output"] for test in gradescope["tests"])
    assert "graded otherwise: language: en -> ja: every report worded again from its verdicts" in stdout, stdout
    assert "language: en -&gt; ja: every report worded again" in (out / "regrade.html").read_text(encoding="utf-8")


def test_a_report_whose_failures_are_worded_in_one_language_only_is_graded_again_in_another(tmp_path, quick_class):
    # As a report from before failures were worded in every language.
    subs, out = tmp_path / "subs", tmp_path / "out"
    write(subs / "alice.py", "# fails S1.3\n")
    write(subs / "bob.py", "# fails S2.1\n")
    assert quick_class.run(subs, "--out", out, "--lang", "en")[0] == 0
    kept = out / "generations" / "1" / "alice" / "results.json"
    alice = json.loads(kept.read_text())
    for test in alice["tests"]:
        test.pop("messages", None)
    kept.write_text(json.dumps(alice))
    status, stdout, _ = quick_class.run(subs, "--out", out, "--lang", "ja")
    assert status == 0 and "1 to grade" in stdout, stdout
    assert quick_class.graded[-1] == b"# fails S1.3\n"


def test_the_class_keeps_each_graded_runner_beside_its_record(tmp_path, quick_class):
    subs, out = tmp_path / "subs", tmp_path / "out"
    alice = b"# fails S1.3\nprint('\xff not UTF-8')\r\n"
    (subs / "alice").mkdir(parents=True)
    (subs / "alice" / "runner.py").write_bytes(alice)
    write(subs / "bob.py", "# bob's\n")
    assert quick_class.run(subs, "--out", out)[0] == 0
    # What was graded, byte for byte, where `pyops-conformance replay DIR/STUDENT` looks for it.
    assert (out / "alice" / "runner.py").read_bytes() == alice == quick_class.graded[0]
    assert (out / "bob" / "runner.py").read_bytes() == b"# bob's\n"
    assert (out / "generations" / "1" / "alice" / "runner.py").read_bytes() == alice
    record = json.loads((out / "alice" / "grading.json").read_text())
    assert record["status"] == "graded" and record["score"] < record["max_score"]

    # bob's runner.py replaced: the one graded now; alice's gone: no runner of an earlier grading stays.
    write(subs / "bob.py", "# bob's, fixed\n")
    (subs / "alice" / "runner.py").unlink()
    write(subs / "alice" / "notes.txt")
    assert quick_class.run(subs, "--out", out)[0] == 1
    assert (out / "bob" / "runner.py").read_bytes() == b"# bob's, fixed\n"
    assert not (out / "alice" / "runner.py").exists()


def test_a_progress_line_shows_a_name_as_text(capsys):
    progress = Progress(1, 0)
    progress.finished({"student": "eve\u202ekcab\x1b[2J", "status": "error", "message": "no runner.py\x1b[8m"})
    progress.close()
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out, repr(out)
    assert "eve\\u202ekcab\\x1b[2J: error (no runner.py\\x1b[8m)" in out


def _batch(tmp_path, force=False):
    store = Store(tmp_path / "out", load())
    store.open()
    settings = Settings(CONFIG_TEXT, None, "en", 4, 60)
    batch = Batch(discover(tmp_path / "subs"), store, settings, tmp_path / "subs")
    return batch, batch.plan(force)


def test_only_what_changed_is_graded_again(tmp_path):
    write(tmp_path / "subs" / "alice.py", "one")
    write(tmp_path / "subs" / "bob.py", "two")
    write(tmp_path / "subs" / "carol" / "notes.md")
    batch, jobs = _batch(tmp_path)
    assert [job.student for job in jobs] == ["alice", "bob"]
    assert batch.records["carol"]["status"] == "error"  # settled without a grading
    graded = {"status": "graded", "report": None, "suite": provenance.suite_fingerprint(), "seconds": 1}
    for job in jobs:
        batch.store.save(job.student, job.submission, job.key, graded)
    batch, jobs = _batch(tmp_path)
    assert jobs == [] and batch.kept == 2
    write(tmp_path / "subs" / "bob.py", "two, fixed")
    assert [job.student for job in _batch(tmp_path)[1]] == ["bob"]
    assert [job.student for job in _batch(tmp_path, force=True)[1]] == ["alice", "bob"]


def _report(*outcomes: str, not_judged: bool = False):
    """A suite report whose checks ended as `outcomes`; its errors not judged, if so."""
    tests = [
        {"id": "check-%d" % number, "clause": "S3.4", "outcome": outcome, "message": ""}
        for number, outcome in enumerate(outcomes)
    ]
    for test in tests:
        if test["outcome"] == "error" and not_judged:
            test["not_judged"] = True
    return {"tests": tests, "summary": {}}


def test_a_grading_left_not_judged_by_a_busy_machine_is_graded_again_alone(tmp_path):
    write(tmp_path / "subs" / "alice.py", "late when the machine is busy")
    write(tmp_path / "subs" / "bob.py", "broke the suite")
    write(tmp_path / "subs" / "carol.py", "fine")
    batch, jobs = _batch(tmp_path)
    suite = provenance.suite_fingerprint()
    first = {
        "alice": {"status": "error", "report": _report("passed", "error", not_judged=True), "suite": suite},
        "bob": {"status": "error", "report": _report("passed", "error"), "suite": suite},
        "carol": {"status": "graded", "report": None, "suite": suite},
    }
    calls = []

    def queue(given, settings, done):
        calls.append([job.student for job in given])
        for job in given:
            again = len(calls) > 1
            done(
                job, {"status": "graded", "report": None, "suite": suite, "seconds": 1} if again else first[job.student]
            )

    class Quiet:
        def finished(self, record):
            pass

        def again(self, count):
            calls.append(["again: %d" % count])

    batch.run(jobs, queue, Quiet())  # type: ignore[arg-type]
    # Only alice's grading was an error of a busy machine alone: she is graded again, alone; bob's
    # error is the suite's, which grading again would not change.
    assert calls == [["alice", "bob", "carol"], ["again: 1"], ["alice"]], calls
    assert batch.records["alice"]["status"] == "graded" and batch.records["bob"]["status"] == "error"


# ---- usage errors: one line, exit 2 ------------------------------------------------------------


@pytest.mark.parametrize(
    "args, said",
    [
        (["{missing}", "--out", "{out}"], "not a folder"),
        (["{empty}", "--out", "{out}"], "holds no submission"),
        (["{subs}", "--out", "{foreign}"], "holds other files"),
        (["{subs}", "--out", "{out}", "-j", "0"], "-j needs 1 or more"),
        (["{subs}", "--out", "{out}", "--timeout", "0"], "--timeout needs"),
        (["{subs}", "--out", "{out}", "--config", "{badconfig}"], "unknown setting"),
        (["{subs}"], "the following arguments are required: --out"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, said):
    places = {name: tmp_path / name for name in ("missing", "empty", "subs", "out", "foreign", "badconfig")}
    places["empty"].mkdir()
    write(places["subs"] / "alice.py")
    write(places["foreign"] / "keep.txt")
    write(places["badconfig"], "colour = 'red'\n")
    assert main_class([arg.format(**places) for arg in args]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and said in err, err
    assert (places["foreign"] / "keep.txt").exists()


# ---- for real ----------------------------------------------------------------------------------


def _class_of_three(tmp_path: Path) -> Path:
    subs = tmp_path / "subs"
    write(subs / "alice" / "runner.py", REFERENCE.read_text())
    build(by_name(WRONG), subs / "bob")
    write(subs / "carol" / "main.py")
    return subs


@pytest.mark.classroom
@pytest.mark.slow(60)
def test_a_class_stopped_by_ctrl_c_keeps_what_finished_and_goes_on(tmp_path, open_tmpdir):
    subs, out = _class_of_three(tmp_path), tmp_path / "out"
    command = class_command(str(subs), "--out", str(out), "-j", "1")
    # Output into a pipe, buffered as in a log or CI: each line must still come as it is written.
    buffered = {name: value for name, value in open_tmpdir.items() if name != "PYTHONUNBUFFERED"}
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=buffered)
    lines = []
    for line in first.stdout:  # -j 1 grades by name: alice first
        lines.append(line)
        if line.startswith("alice:"):
            first.send_signal(signal.SIGINT)
            break
    rest, err = first.communicate(timeout=60)
    assert first.returncode == 130, "".join(lines) + rest + err
    assert "stopped: 1 of 2 graded this time are kept" in err, err
    kept = class_rows(out)
    alice = kept["alice"]
    assert alice["status"] == "graded" and alice["score"] == alice["max_score"] == "28", not_passed(out, "alice")
    assert "bob" not in kept  # stopped mid-grading: nothing recorded, graded next time
    assert kept["carol"]["status"] == "error" and "no runner.py" in kept["carol"]["message"]
    assert _gradings_left(open_tmpdir) == []

    command = class_command(str(subs), "--out", str(out), "-j", "2")
    second = subprocess.run(command, capture_output=True, text=True, timeout=300, env=open_tmpdir)
    assert second.returncode == 1, second.stdout + second.stderr  # carol could not be graded
    assert "1 to grade" in second.stdout and "1 submission(s) unchanged" in second.stderr + second.stdout
    graded = class_rows(out)
    assert graded["alice"] == kept["alice"]
    bob = json.loads((out / "bob" / "results.json").read_text())
    failed = {test["clause"] for test in bob["tests"] if test["outcome"] != "passed"}
    assert "S2.4" in failed and failed <= {"S2.1", "S2.3", "S2.4", "S6.4"}, failed
    assert graded["bob"]["status"] == "graded" and float(graded["bob"]["score"]) < 28
    assert float(graded["bob"]["S2 (4 pts)"]) < 4 and graded["bob"]["S1 (3 pts)"] == "3"
    # Why bob lost points, in his row: the clauses that did not pass.
    assert graded["bob"]["message"].startswith("failed: ") and "S2.4" in graded["bob"]["message"]
    gradescope = json.loads((out / "bob" / "gradescope.json").read_text())
    assert gradescope["score"] == pytest.approx(float(graded["bob"]["score"]), abs=1e-3)
    assert "Ctrl-C" not in (out / "report.html").read_text()  # written, and from the store alone

    # Its cost in CPU time, not in wall time: beside the zoo's self-test, 0.9 s of CPU took 9.9 s.
    spent = cpu_spent_s()
    third = subprocess.run(class_command(str(subs), "--out", str(out)), capture_output=True, text=True, timeout=60)
    spent = cpu_spent_s() - spent
    assert "0 to grade" in third.stdout and class_rows(out) == graded
    assert spent < 5, "a class with nothing changed took %.1f s of CPU" % spent


@pytest.mark.classroom
@pytest.mark.slow(20)
def test_a_grading_over_its_time_is_stopped_recorded_and_the_batch_goes_on(tmp_path, open_tmpdir):
    subs, out = tmp_path / "subs", tmp_path / "out"
    write(subs / "alice.py", REFERENCE.read_text())
    write(subs / "bob" / "runner.txt")
    done = subprocess.run(
        class_command(str(subs), "--out", str(out), "--timeout", "3"),
        capture_output=True,
        text=True,
        timeout=120,
        env=open_tmpdir,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    graded = class_rows(out)
    assert graded["alice"]["status"] == "timeout" and "did not end within 3 s" in graded["alice"]["message"]
    assert graded["bob"]["status"] == "error"
    assert _gradings_left(open_tmpdir) == []


def _gradings_left(environment):
    """Suite processes of this test's gradings still running (they must all have been stopped)."""
    left = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if any(part.startswith(environment["TMPDIR"]) for part in cmdline):
            left.append(" ".join(cmdline))
    return left


class _InterruptedWhileWaiting:
    """A cancel flag whose first look raises KeyboardInterrupt, as Ctrl-C does in a caller that
    grades on its main thread (the benchmark, a script of a course's own)."""

    def is_set(self) -> bool:
        raise KeyboardInterrupt


def test_a_grading_interrupted_in_its_caller_stops_its_suite(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        grading.grade(REFERENCE.read_bytes(), CONFIG_TEXT, cancel=_InterruptedWhileWaiting())  # type: ignore[arg-type]
    left = [child for child in psutil.Process().children(recursive=True) if child.status() != psutil.STATUS_ZOMBIE]
    assert not left, "the grading's suite outlived the interruption: %s" % [child.cmdline() for child in left]


# Prepended to the reference: each call also leaves a daemon with an emptied environment, out of
# reach of the token tracking; only its uid tells whose it is.
_LEAVES_A_DAEMON = (
    "import os as _os\n"
    "if _os.fork() == 0:\n"
    "    _os.setsid()\n"
    "    if _os.fork() == 0:\n"
    "        _os.execve('/bin/sleep', ['sleep', '987.65'], {})\n"
    "    _os._exit(0)\n"
    "_os.wait()\n"
)


def test_a_grading_killed_before_it_could_clean_up_leaves_nothing_running(monkeypatch):
    # The suite is SIGKILLed right after its SIGTERM, as a grading that overruns its grace is:
    # its runners, their stand-ins (forks of the suite in sessions of their own) and the daemons
    # they left are not in the killed process group, and the suite had no time to reap them.
    session = "killed-grading-%d" % os.getpid()
    monkeypatch.setenv("PYOPS_CONFORMANCE_SESSION", session)
    monkeypatch.setattr(grading, "STOP_GRACE_S", 0)
    runner = _LEAVES_A_DAEMON + REFERENCE.read_text()
    result = grading.grade(runner.encode(), CONFIG_TEXT, timeout_s=4)
    assert result["status"] == grading.TIMEOUT, result
    left = []
    for process in psutil.process_iter(["cmdline", "environ", "status"]):
        if process.info["status"] == psutil.STATUS_ZOMBIE or process.pid == os.getpid():
            continue
        environ = " ".join("%s=%s" % item for item in (process.info["environ"] or {}).items())
        if session in environ or process.info["cmdline"] == ["sleep", "987.65"]:
            left.append(process.info["cmdline"])
    assert not left, "the stopped grading left these running: %s" % left
    assert not sandbox.labs_of(session), "the stopped grading left its labs"


def test_the_suite_fingerprint_follows_the_checks_and_not_the_class_tools_nor_the_selftest(tmp_path, monkeypatch):
    """A changed check is a changed suite (graded again); a better class report or a reviewed
    mutant in selftest/equivalent.toml is not (a class, or a mutation journal, is kept)."""
    import shutil

    copy = tmp_path / "conformance"
    shutil.copytree(str(provenance._PACKAGE), str(copy), ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(provenance, "_PACKAGE", copy)

    def fingerprint_after(path, text):
        with open(str(copy / path), "a", encoding="utf-8") as handle:
            handle.write(text)
        provenance.suite_fingerprint.cache_clear()
        return provenance.suite_fingerprint()

    try:
        first = fingerprint_after("lab.toml", "")
        assert fingerprint_after("selftest/equivalent.toml", "\n# reviewed\n") == first
        assert fingerprint_after("classroom/report_html.py", "\n# a better page\n") == first
        assert fingerprint_after("checks/test_s2_timeout.py", "\n# a changed check\n") != first
    finally:
        provenance.suite_fingerprint.cache_clear()

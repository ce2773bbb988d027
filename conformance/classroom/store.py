"""The class folder: each student's reports and record, the resume keys, grades.csv.

DIR/.pyops-class            marks a folder this tool made (it never writes into another)
DIR/STUDENT/grading.json    the record: status, score, points per step, the resume key
DIR/STUDENT/results.json    the suite's JSON report (graded submissions)
DIR/STUDENT/gradescope.json the same in Gradescope's format
DIR/STUDENT/output.txt      what the grading printed (the learner view), cut at 256 kB
DIR/STUDENT/runner.py       the runner graded, byte for byte: `pyops-conformance replay DIR/STUDENT`
                            grades it again beside its record
DIR/grades.csv              one row per student of the class, by name
DIR/similarity.csv          every pair of runners compared, the most similar first (similarity.py)

The names at DIR's top are layout.py's: a student named like one of them gets no folder.
Every file is written whole or not at all, and through no link (report.write_atomically).
"""

import csv
import dataclasses
import hashlib
import io
import json
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from conformance.classroom import layout
from conformance.classroom.grading import ERROR, GRADED, TIMEOUT
from conformance.harness.inert import inert
from conformance.judging import verdicts
from conformance.lab.config import LabConfig, loads
from conformance.reporting import platforms, provenance, report, view

# A record of these stays valid while its key does; an error is tried again (it is often the
# machine's: a full disk, a killed grader), and costs nothing when the file itself is missing.
FINAL = (GRADED, TIMEOUT)
CSV_COLUMNS = ["student", "score", "max_score", "status", "generation"]
# A student's files, in DIR/STUDENT/ (the docstring says what each holds).
RECORD = "grading.json"
RESULTS = "results.json"
GRADESCOPE = "gradescope.json"
OUTPUT = "output.txt"
RUNNER = "runner.py"
# What a spreadsheet runs as a formula when a cell starts with it (OWASP's CSV injection list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class NotAClassFolder(Exception):
    """--out names a folder this tool must not write into (the message is one line)."""


def resume_key(runner_text: Optional[bytes], config_text: str, suite: str, python: Optional[str]) -> str:
    """What a grading depends on: the submission, the profile the configuration grades, the suite,
    how it is run, the seed the configuration fixes (none: each grading drew its own). Not the
    configuration's points nor its visibility: they score verdicts and show them; nor the
    language: a report words each failure in every language (report.in_language). A grading
    whose key holds is scored again under a changed configuration, not run."""
    digest = hashlib.sha256()
    configured = loads(config_text)
    graded = configured.profile + ("" if configured.seed is None else " seed %d" % configured.seed)
    for part in (runner_text or b"", graded.encode(), suite.encode(), (python or "").encode()):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


class Store:
    def __init__(
        self,
        folder: Path,
        config: LabConfig,
        generation: int = 1,
        made_with: Optional[Mapping] = None,
        config_text: Optional[str] = None,
        earlier: Sequence[Path] = (),
    ) -> None:
        self.folder = folder
        self.config = config
        self.config_text = config_text  # the configuration's text, for a grading scored again
        self.generation = generation  # which of the class folder's generations (generations.py)
        self.made_with = dict(made_with or {})  # what makes that generation: suite, configuration, ...
        # Other generations' folders, the published one first: a grading there whose key holds
        # here (only the points or visibility changed) is taken over and scored again, not run.
        self.earlier = list(earlier)
        self.lang: Optional[str] = self.made_with.get("lang")  # what its reports are worded in

    def open(self) -> None:
        """Make the class folder, or reopen one made before; refuse any other non-empty folder."""
        if self.folder.exists() and not self.folder.is_dir():
            raise NotAClassFolder("--out %s: not a folder" % self.folder)
        if self.folder.is_dir() and any(self.folder.iterdir()) and not (self.folder / layout.MARK).exists():
            raise NotAClassFolder(
                "--out %s: a folder that holds other files; give a new or empty folder (or one this command made)"
                % self.folder
            )
        self.folder.mkdir(parents=True, exist_ok=True)
        report.write_atomically(self.folder / layout.MARK, "a class folder of pyops-conformance class\n")

    def current(self, student: str, key: str) -> Optional[Dict]:
        """The student's record if it still holds for this key (no need to grade again): this
        generation's, or another's taken over and scored under this configuration."""
        record = self.record(student)
        if record and record.get("key") == key and record.get("status") in FINAL:
            if record.get("lang") == self.lang:
                return record
            return self._scored_again(student, self.folder / student, record)
        for folder in self.earlier:
            found = _record_in(folder, student)
            if found and found.get("key") == key and found.get("status") in FINAL:
                return self._scored_again(student, folder / student, found)
        return None

    def record(self, student: str) -> Optional[Dict]:
        return _record_in(self.folder, student)

    def _scored_again(self, student: str, graded_in: Path, record: Mapping) -> Optional[Dict]:
        """Another generation's grading of the same runner, profile, suite and interpreter, kept
        here under this generation's configuration: the same verdicts, scored by its points. Its
        provenance names this configuration, and the one it was graded with."""
        outcome: Dict = {"status": record["status"], "seconds": record.get("seconds"), "suite": record.get("suite")}
        if record["status"] != GRADED:
            outcome["message"] = record.get("message", "")
        try:
            outcome["output"] = (graded_in / OUTPUT).read_text(encoding="utf-8")
            graded = record["status"] == GRADED
            suite_report = json.loads((graded_in / RESULTS).read_text(encoding="utf-8")) if graded else None
            runner_text = (graded_in / RUNNER).read_bytes() if (graded_in / RUNNER).exists() else None
        except (OSError, ValueError):
            return None  # cut short or removed meanwhile: graded anew
        if suite_report is not None and self.lang is not None and record.get("lang") != self.lang:
            # Worded in this generation's language, as its checks worded each failure then; a
            # report from before they did so is graded again.
            suite_report = report.in_language(suite_report, self.lang)
            if suite_report is None:
                return None
            outcome["output"] = None  # the learner view, in this language: made again by save()
        if suite_report is not None and self.config_text is not None:
            kept = dict(suite_report.get("provenance") or {})
            kept["rescored"] = {"graded_with_configuration": kept.get("configuration", {}).get("sha256")}
            kept["configuration"] = {"sha256": provenance.sha256(self.config_text.encode()), "text": self.config_text}
            suite_report["provenance"] = kept
        outcome["report"] = suite_report
        return self.save(student, record.get("submission", student), record["key"], outcome, runner_text)

    def save(
        self, student: str, submission: str, key: str, outcome: Mapping, runner_text: Optional[bytes] = None
    ) -> Dict:
        """Write one grading's files (the record last, so a crash in between means: grade again) and
        return its record; `runner_text` is the runner graded, kept beside the record.

        A student named like a file of the class's own (layout.py) gets no folder, whatever called:
        the record is returned for grades.csv alone (discovery made it an error, which says why).
        """
        suite_report = outcome.get("report")
        record: Dict = {
            "student": student,
            "submission": submission,
            "status": outcome["status"],
            "message": outcome.get("message", ""),
            "score": None,
            "max_score": None,
            "steps": {},
            "seconds": outcome.get("seconds"),
            "suite": outcome.get("suite"),
            "key": key,
            "lang": self.lang,  # what its report's words are in (a regrade in another rewords it)
        }
        if not layout.is_student_folder_name(student):
            return record
        folder = self.folder / student
        folder.mkdir(exist_ok=True)
        for stale in (RUNNER, RESULTS, GRADESCOPE):  # an earlier grading's, not this one's
            if (folder / stale).exists():
                (folder / stale).unlink()
        if runner_text is not None:
            report.write_atomically(folder / RUNNER, runner_text)
        if outcome["status"] == GRADED and suite_report is not None:
            suite_report = dict(suite_report, runner=submission)
            suite_report["score"] = platforms.score(suite_report, self.config)
            report.write_report(folder / RESULTS, suite_report)
            shown_in = self.config if self.lang is None else dataclasses.replace(self.config, lang=self.lang)
            report.write_report(folder / GRADESCOPE, platforms.gradescope(suite_report, shown_in))
            record["score"] = suite_report["score"]["points"]
            record["max_score"] = suite_report["score"]["max_points"]
            record["steps"] = platforms.step_scores(suite_report, self.config)
            record["provenance"] = suite_report.get("provenance")  # what produced this grade
            tests = suite_report["tests"]
            uncompiled = verdicts.compile_failure(tests)
            why = uncompiled["blocked_because"] if uncompiled else verdicts.summary(verdicts.of_tests(tests))
            record["message"] = record["message"] or why
        output = outcome.get("output", "")
        if output is None:  # scored again in another language: the learner view of its report
            output = _learner_view(suite_report, self.lang or "en") if suite_report is not None else ""
        report.write_atomically(folder / OUTPUT, output)
        report.write_report(folder / RECORD, record)
        return record

    def tests(self, student: str) -> List[Dict]:
        """The checks of a graded student's report (for the class report)."""
        if not layout.is_student_folder_name(student):
            return []
        try:
            data = json.loads((self.folder / student / RESULTS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return list(data.get("tests", []))

    def write_similarity(self, text: Optional[str]) -> None:
        """similarity.csv (similarity.py made its cells inert); None: the check did not run, and an
        earlier run's file would be taken for this one's."""
        path = self.folder / layout.SIMILARITY
        if text is not None:
            report.write_atomically(path, text)
        elif path.exists():
            path.unlink()

    def write_class_report(self, text: str) -> None:
        report.write_atomically(self.folder / layout.REPORT, text)

    def write_grades(self, records: Iterable[Mapping], steps: List[str]) -> None:
        """grades.csv: student, score, max_score (on every row), status, each step's points, and
        why: the clauses that did not pass, or why it was not graded."""
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        # Each step's column names its maximum, as Gradescope's exports do ("S1 (4 pts)"): a
        # gradebook reads the points possible from the header, no row of the file is not a student.
        most = self.config.worth_of_steps(steps)
        writer.writerow(CSV_COLUMNS + ["%s (%s pts)" % (step, points(most[step])) for step in steps] + ["message"])
        for record in sorted(records, key=lambda r: r["student"]):
            graded = record["status"] == GRADED
            row = [safe_cell(record["student"]), points(record["score"]) if graded else 0]
            row += [points(record["max_score"] if graded else self.config.most_points()), record["status"]]
            row.append(self.generation)
            row += [points(record["steps"].get(step, {}).get("points", 0)) if graded else "" for step in steps]
            writer.writerow(row + [safe_cell(record.get("message", ""))])
        report.write_atomically(self.folder / layout.GRADES, text.getvalue())


def points(value: Optional[float]) -> str:
    """Points to two decimals at most, as a gradebook takes them (26.5, not 26.5000)."""
    return ("%.2f" % value).rstrip("0").rstrip(".") if value is not None else ""


def _record_in(folder: Path, student: str) -> Optional[Dict]:
    """The record of `student` in class or generation folder `folder`, if one was written whole."""
    if not layout.is_student_folder_name(student):
        return None  # a name of the class's own: no record of a student is there
    try:
        return json.loads((folder / student / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # never graded, or a record cut short by a crash: grade again


def safe_cell(text: str) -> str:
    """A cell of the class's CSV files (grades.csv, regrade.csv, history.csv) that may hold text
    from a submission (a student's name, a message quoting a file name), made inert.

    A spreadsheet runs a cell that starts with = + - @ as a formula, and drops a leading TAB or CR
    before reading one: such a cell gets a leading single quote, which the spreadsheet shows as
    text. Control characters are shown as their escapes (inert.py), and so is a newline: a cell is
    one line, so each line of the file is one row, whatever reads it. Text that is inert already
    (a cell read back from grades.csv) comes out as it went in.
    """
    shown = inert(text).replace("\n", "\\x0a")
    return "'" + shown if text[:1] in FORMULA_STARTS else shown


def _learner_view(suite_report: Mapping, lang: str) -> str:
    """What a grading prints of its verdicts (cli.py), made from its report: for a report scored
    again in another language, whose grading printed them in the first."""
    lines = view.render(suite_report, lang) + ["", view.score_line(suite_report["score"], lang)]
    return "\n".join(lines).lstrip("\n") + "\n"


__all__ = ["ERROR", "FINAL", "Store", "resume_key", "safe_cell", "points"]

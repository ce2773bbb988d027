"""A class folder's generations: every grading of a class goes into one, and one is published.

    DIR/generations/N/          generation N, a whole class folder (STUDENT/..., grades.csv, report.html)
    DIR/generations/state.json  what each generation was graded with, and the published ones in order
    DIR/STUDENT/, grades.csv, report.html    a copy of the published generation: what students see
    DIR/history.csv             one row per student each time a generation is published
    DIR/regrade.csv, regrade.html            a pending generation against the published one

A generation is what one suite graded with one configuration (and interpreter and language): the
suite's fingerprint and the configuration's sha256 say which (provenance.py). A first grading is
published at once, and so is a regrading under the published generation's suite and configuration
(a changed submission, say). When either has changed, the class is graded into a new generation
that stays pending: nothing published changes until the teacher has reviewed regrade.html and
approves (`--approve`); `--rollback` publishes the generation published before the last.
"""

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from conformance import provenance, report, verdicts

FOLDER = "generations"
STATE = "state.json"
# The published generation's files at the class folder's top, besides one folder per student.
PUBLISHED_FILES = ("grades.csv", "report.html")
HISTORY = "history.csv"
REGRADE_FILES = ("regrade.csv", "regrade.html")


class NothingToRollBack(Exception):
    """--rollback with no earlier published generation (the message is one line)."""


def identity(config_text: str, python: Optional[str], lang: str) -> Dict[str, Optional[str]]:
    """What makes a generation: the suite and how it grades."""
    return {
        "suite": provenance.suite_fingerprint(),
        "configuration": provenance.sha256(config_text.encode("utf-8")),
        "python": python,
        "lang": lang,
    }


class Generations:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.root = folder / FOLDER
        self.state = self._load()

    def _load(self) -> Dict:
        try:
            state = json.loads((self.root / STATE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"made": {}, "published": []}
        return {"made": dict(state.get("made", {})), "published": list(state.get("published", []))}

    def _save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        report.write_report(self.root / STATE, self.state)

    def folder_of(self, number: int) -> Path:
        return self.root / str(number)

    @property
    def published(self) -> Optional[int]:
        return self.state["published"][-1] if self.state["published"] else None

    def choose(self, wanted: Mapping[str, Optional[str]]) -> Tuple[int, bool]:
        """The generation to grade into, and whether it is published when graded (or pending)."""
        self._adopt_earlier_layout()
        made = self.state["made"]
        top = self.published
        if top is None:
            number = self._new(wanted)
            return number, True
        if made.get(str(top), {}).get("identity") == dict(wanted):
            return top, True
        pending = [int(n) for n, entry in made.items() if entry.get("identity") == dict(wanted) and int(n) != top]
        return (max(pending) if pending else self._new(wanted)), False

    def _new(self, wanted: Mapping[str, Optional[str]]) -> int:
        number = max([int(n) for n in self.state["made"]] + [0]) + 1
        self.state["made"][str(number)] = {"identity": dict(wanted), "made": provenance.now()}
        self._save()
        return number

    def _adopt_earlier_layout(self) -> None:
        """A class folder graded before generations: its files become generation 1, published,
        graded with what is no longer known (so the next grading is reviewed before it is shown)."""
        if self.state["made"] or not any(self._students(self.folder)):
            return
        first = self.folder_of(1)
        first.mkdir(parents=True)
        for student in self._students(self.folder):
            shutil.copytree(str(student), str(first / student.name))
        for name in PUBLISHED_FILES:
            if (self.folder / name).is_file():
                shutil.copy2(str(self.folder / name), str(first / name))
        self.state = {"made": {"1": {"identity": {}, "made": provenance.now()}}, "published": [1]}
        self._save()

    def publish(self, number: int) -> None:
        """Make generation `number` what the class folder shows, and remember it."""
        self._show(number)
        if self.published != number:
            self.state["published"].append(number)
            self._save()
        self._record_history(number)
        for name in REGRADE_FILES:  # reviewed: nothing is pending against what is shown now
            if (self.folder / name).exists():
                (self.folder / name).unlink()

    def rollback(self) -> int:
        """Publish the generation published before the last one; return its number."""
        if len(self.state["published"]) < 2:
            raise NothingToRollBack("%s has no earlier published generation to roll back to" % self.folder)
        self.state["published"].pop()
        number = self.state["published"][-1]
        self._save()
        self._show(number)
        self._record_history(number)
        return number

    def _show(self, number: int) -> None:
        source = self.folder_of(number)
        shown = {student.name for student in self._students(source)}
        for student in self._students(self.folder):
            if student.name not in shown:
                shutil.rmtree(str(student))
        for student in self._students(source):
            target = self.folder / student.name
            if target.exists():
                shutil.rmtree(str(target))
            shutil.copytree(str(student), str(target))
        for name in PUBLISHED_FILES:
            if (source / name).is_file():
                shutil.copy2(str(source / name), str(self.folder / name))

    def _record_history(self, number: int) -> None:
        """history.csv: each student's score in each generation as it was published."""
        path = self.folder / HISTORY
        new = not path.exists()
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        if new:
            writer.writerow(["published", "generation", "student", "score", "max_score", "status"])
        when = provenance.now()
        for row in read_grades(self.folder_of(number)):
            writer.writerow([when, number, row["student"], row["score"], row["max_score"], row["status"]])
        with open(str(path), "a", encoding="utf-8") as handle:
            handle.write(text.getvalue())

    @staticmethod
    def _students(folder: Path) -> List[Path]:
        if not folder.is_dir():
            return []
        return sorted(
            entry
            for entry in folder.iterdir()
            if entry.is_dir() and not entry.is_symlink() and entry.name != FOLDER and not entry.name.startswith(".")
        )


def read_grades(folder: Path) -> List[Dict[str, str]]:
    try:
        with open(str(folder / "grades.csv"), encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle))
    except OSError:
        return []


def clause_verdicts(student_folder: Path) -> Dict[str, Dict]:
    """A student's clause verdicts in one generation ({} when not graded)."""
    try:
        data = json.loads((student_folder / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {clause: dict(entry) for clause, entry in (data.get("clauses") or {}).items()}


def changes(old: Path, new: Path) -> List[Dict]:
    """Per student whose grade or clause verdicts differ between two generation folders: the
    scores and each changed clause with both verdicts and messages."""
    before = {row["student"]: row for row in read_grades(old)}
    after = {row["student"]: row for row in read_grades(new)}
    changed = []
    for student in sorted(set(before) | set(after)):
        was, now = before.get(student, {}), after.get(student, {})
        clauses_was, clauses_now = clause_verdicts(old / student), clause_verdicts(new / student)
        clauses = []
        for clause in sorted(set(clauses_was) | set(clauses_now), key=verdicts.clause_order):
            a, b = clauses_was.get(clause, {}), clauses_now.get(clause, {})
            if a.get("verdict") != b.get("verdict"):
                clauses.append(
                    {
                        "clause": clause,
                        "old": a.get("verdict", "absent"),
                        "new": b.get("verdict", "absent"),
                        "old_message": a.get("message", ""),
                        "new_message": b.get("message", ""),
                    }
                )
        scores_differ = (was.get("score"), was.get("max_score"), was.get("status")) != (
            now.get("score"),
            now.get("max_score"),
            now.get("status"),
        )
        if clauses or scores_differ:
            changed.append(
                {
                    "student": student,
                    "old_score": _score(was),
                    "new_score": _score(now),
                    "clauses": clauses,
                }
            )
    return changed


def _score(row: Mapping[str, str]) -> str:
    if not row:
        return "absent"
    if row.get("status") != "graded":
        return row.get("status", "")
    return "%s/%s" % (row.get("score", ""), row.get("max_score", ""))


def regrade_csv(changed: List[Dict]) -> str:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["student", "old score", "new score", "clauses that changed", "old -> new verdict"])
    for entry in changed:
        writer.writerow(
            [
                entry["student"],
                entry["old_score"],
                entry["new_score"],
                " ".join(change["clause"] for change in entry["clauses"]),
                "; ".join("%s %s -> %s" % (c["clause"], c["old"], c["new"]) for c in entry["clauses"]),
            ]
        )
    return text.getvalue()

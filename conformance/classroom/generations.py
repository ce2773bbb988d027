"""A class folder's generations: every grading of a class goes into one, and one is published.

    DIR/generations/N/          generation N, a whole class folder (STUDENT/..., grades.csv, report.html)
    DIR/generations/state.json  what each generation was graded with, the published ones in order,
                                and the one pending review
    DIR/STUDENT/, grades.csv, report.html    a copy of the published generation: what students see
    DIR/history.csv             one row per student each time a generation is published
    DIR/regrade.csv, regrade.html            the pending generation against the published one

(The names are layout.py's.) A generation is what one suite graded with one configuration (and
interpreter and language): the suite's fingerprint and the configuration's sha256 say which
(provenance.py). A first grading is published at once, and so is a regrading under the published
generation's suite and configuration (a changed submission, say). When either has changed, the
class is graded into a new generation that stays pending: nothing published changes until the
teacher has reviewed regrade.html and approves it (`--approve` with the configuration, interpreter
and language it was graded with: the command `class` prints); an approval of anything else is
refused. `--rollback` publishes the generation published before the last. Once another
generation is published, nothing is pending any more: what was reviewed compared another one.
"""

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from conformance.classroom import layout, report_html
from conformance.classroom.store import RECORD, RESULTS, points, safe_cell
from conformance.judging import verdicts
from conformance.lab import config
from conformance.reporting import provenance, report

# What the command that approves a generation says of it (--config, --python, --lang); the suite
# is the one installed, not the teacher's to give.
GIVEN = ("configuration", "python", "lang")


class NothingToRollBack(Exception):
    """--rollback with no earlier published generation (the message is one line)."""


class NotApproved(Exception):
    """--approve of something other than the generation pending review (the message is one line)."""


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
        self.root = folder / layout.GENERATIONS
        self.state = self._load()

    def _load(self) -> Dict:
        try:
            state = json.loads((self.root / layout.STATE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"made": {}, "published": [], "pending": None}
        return {
            "made": dict(state.get("made", {})),
            "published": list(state.get("published", [])),
            "pending": state.get("pending"),  # a state file of before approvals were checked: none
        }

    def _save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        report.write_report(self.root / layout.STATE, self.state)

    def folder_of(self, number: int) -> Path:
        return self.root / str(number)

    @property
    def published(self) -> Optional[int]:
        return self.state["published"][-1] if self.state["published"] else None

    def newest_first(self) -> List[int]:
        """Every generation made, the published one first, then the others from the newest."""
        made = sorted((int(number) for number in self.state["made"]), reverse=True)
        top = self.published
        return ([top] if top in made else []) + [number for number in made if number != top]

    @property
    def pending(self) -> Optional[int]:
        """The generation regrade.csv and regrade.html compare with the published one, if any."""
        return self.state["pending"]

    def choose(self, wanted: Mapping[str, Optional[str]], config_text: Optional[str] = None) -> Tuple[int, bool]:
        """The generation to grade into, and whether it is published when graded (or pending);
        a new one keeps `config_text`, which a regrade's review compares."""
        self._adopt_earlier_layout()
        made = self.state["made"]
        top = self.published
        if top is None:
            number = self._new(wanted, config_text)
            return number, True
        if made.get(str(top), {}).get("identity") == dict(wanted):
            return top, True
        pending = [int(n) for n, entry in made.items() if entry.get("identity") == dict(wanted) and int(n) != top]
        return (max(pending) if pending else self._new(wanted, config_text)), False

    def _new(self, wanted: Mapping[str, Optional[str]], config_text: Optional[str] = None) -> int:
        number = max([int(n) for n in self.state["made"]] + [0]) + 1
        made = {"identity": dict(wanted), "made": provenance.now(), "suite_version": provenance.suite_version()}
        if config_text is not None:
            made["configuration"] = config_text
        self.state["made"][str(number)] = made
        self._save()
        return number

    def _adopt_earlier_layout(self) -> None:
        """A class folder graded before generations: its files become generation 1, published,
        graded with what is no longer known (so the next grading is reviewed before it is shown)."""
        if self.state["made"] or not any(student_folders(self.folder)):
            return
        first = self.folder_of(1)
        first.mkdir(parents=True)
        for student in student_folders(self.folder):
            shutil.copytree(str(student), str(first / student.name))
        for name in layout.PUBLISHED_FILES:
            if (self.folder / name).is_file():
                shutil.copy2(str(self.folder / name), str(first / name))
        self.state = {"made": {"1": {"identity": {}, "made": provenance.now()}}, "published": [1], "pending": None}
        self._save()

    def await_review(self, number: int, students: int) -> List[Dict]:
        """Make generation `number` the one pending review: write regrade.csv and regrade.html (what
        publishing it would change, for `students` submissions) and remember it; return the changes."""
        published = self.published or number
        changed = changes(self.folder_of(published), self.folder_of(number), *self._configurations(published, number))
        suites = (self.suite(published), self.suite(number))
        report.write_atomically(self.folder / layout.REGRADE_CSV, regrade_csv(changed, suites))
        page = report_html.render_regrade(
            changed,
            students,
            published,
            number,
            self.configuration_changes(number),
            suites,
            self.grading_changes(number),
        )
        report.write_atomically(self.folder / layout.REGRADE_HTML, page)
        self.state["pending"] = number
        self._save()
        return changed

    def configuration_changes(self, number: int) -> List[str]:
        """What generation `number`'s configuration changed from the published one's, a line each
        (config.differences); none where either was made before generations kept their text."""
        made = self.state["made"]
        texts = [made.get(str(n), {}).get("configuration") for n in (self.published, number)]
        if None in texts:
            return []
        return config.differences(*(config.loads(str(text)) for text in texts))

    def _configurations(self, *numbers: Optional[int]) -> List[Optional[config.LabConfig]]:
        """Each generation's configuration (None where it was made before generations kept it)."""
        texts = [self.state["made"].get(str(n), {}).get("configuration") for n in numbers]
        return [config.loads(str(text)) if text is not None else None for text in texts]

    def suite(self, number: Optional[int]) -> str:
        """The suite that graded generation `number`: its version and fingerprint ("unknown" where
        a generation was made before they were kept)."""
        made = self.state["made"].get(str(number), {})
        return "%s %s" % (made.get("suite_version") or "unknown", made.get("identity", {}).get("suite") or "unknown")

    def grading_changes(self, number: int) -> List[str]:
        """How generation `number` is graded differently from the published one (the suite, the
        interpreter, the language), a line each with what that made run again: every runner for
        the first two, none for the language."""
        made = self.state["made"]
        was, now = (made.get(str(n), {}).get("identity", {}) for n in (self.published, number))
        said = []
        if was.get("suite") != now.get("suite"):
            said.append(
                "suite: %s -> %s: a changed check may judge differently, so every runner was graded again"
                % (self.suite(self.published), self.suite(number))
            )
        if was.get("python") != now.get("python"):
            said.append(
                "python: %s -> %s: every runner was graded again with it"
                % (was.get("python") or "(the suite's)", now.get("python") or "(the suite's)")
            )
        if was.get("lang") != now.get("lang"):
            said.append(
                "language: %s -> %s: every report worded again from its verdicts, as its checks worded each failure "
                "in every language; no runner graded again for it"
                % (was.get("lang") or "unknown", now.get("lang") or "unknown")
            )
        return said

    def approvable(self, wanted: Mapping[str, Optional[str]]) -> int:
        """The generation pending review, if `wanted` (what the approving command grades with) is
        what it was graded with; else NotApproved, saying why in one line."""
        number = self.pending
        if number is None:
            raise NotApproved(
                "nothing is pending review in %s: a regrade is approved once graded and reviewed (class "
                "SUBMISSIONS --out DIR with the new configuration prints how); nothing changed" % self.folder
            )
        made = self.state["made"].get(str(number), {}).get("identity", {})
        differ = [part for part in GIVEN if made.get(part) != wanted.get(part)]
        if differ:
            raise NotApproved(
                "generation %d, pending review, was graded with %s; this command gives %s: approve it with the "
                "command printed when it was graded (its --config, --python and --lang); nothing changed"
                % (number, _described(made, differ), _described(wanted, differ))
            )
        if made.get("suite") != wanted.get("suite"):
            raise NotApproved(
                "generation %d, pending review, was graded by another version of the suite than this one: grade "
                "the class again without --approve and review what changes; nothing changed" % number
            )
        return number

    def publish(self, number: int) -> None:
        """Make generation `number` what the class folder shows, and remember it."""
        self._show(number)
        if self.published != number:
            self.state["published"].append(number)
            self._save()
        self._record_history(number)
        self._nothing_pending()

    def rollback(self) -> int:
        """Publish the generation published before the last one; return its number."""
        if len(self.state["published"]) < 2:
            raise NothingToRollBack("%s has no earlier published generation to roll back to" % self.folder)
        self.state["published"].pop()
        number = self.state["published"][-1]
        self._save()
        self._show(number)
        self._record_history(number)
        self._nothing_pending()
        return number

    def _nothing_pending(self) -> None:
        """A generation was shown anew: a review compared what was shown before, so nothing is
        pending (grading the regrade again, which keeps what is unchanged, makes a new review)."""
        for name in layout.REGRADE_FILES:
            if (self.folder / name).exists():
                (self.folder / name).unlink()
        if self.state["pending"] is not None:
            self.state["pending"] = None
            self._save()

    def _show(self, number: int) -> None:
        source = self.folder_of(number)
        shown = {student.name for student in student_folders(source)}
        for student in student_folders(self.folder):
            if student.name not in shown:
                shutil.rmtree(str(student))
        for student in student_folders(source):
            target = self.folder / student.name
            if target.exists():
                shutil.rmtree(str(target))
            shutil.copytree(str(student), str(target))
        for name in layout.PUBLISHED_FILES:
            if (source / name).is_file():
                shutil.copy2(str(source / name), str(self.folder / name))

    def _record_history(self, number: int) -> None:
        """history.csv: each student's score in each generation as it was published."""
        path = self.folder / layout.HISTORY
        new = not path.exists()
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        if new:
            writer.writerow(["published", "generation", "student", "score", "max_score", "status"])
        when = provenance.now()
        for row in read_grades(self.folder_of(number)):
            # The cells as grades.csv has them, neutralised already: safe_cell leaves them so, and
            # is the one place that says what a cell of the class's files may hold.
            writer.writerow([when, number, safe_cell(row["student"]), row["score"], row["max_score"], row["status"]])
        with open(str(path), "a", encoding="utf-8") as handle:
            handle.write(text.getvalue())


def student_folders(folder: Path) -> List[Path]:
    """The students' folders of a class or generation folder: every folder but the class's own."""
    if not folder.is_dir():
        return []
    return sorted(
        entry
        for entry in folder.iterdir()
        if entry.is_dir() and not entry.is_symlink() and layout.is_student_folder_name(entry.name)
    )


def read_grades(folder: Path) -> List[Dict[str, str]]:
    try:
        with open(str(folder / layout.GRADES), encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle))
    except OSError:
        return []


def records(folder: Path) -> Dict[str, Dict]:
    """Each student's record in one generation folder, by the student's own name.

    Not grades.csv's rows: a name there is shown as a spreadsheet may take it (safe_cell), which
    is no longer the name of the student's folder, where the verdicts are."""
    found = {}
    for student in student_folders(folder):
        try:
            found[student.name] = json.loads((student / RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found[student.name] = {}  # a grading cut short: graded again on the next run
    return found


def clause_verdicts(student_folder: Path) -> Dict[str, Dict]:
    """A student's clause verdicts in one generation ({} when not graded)."""
    try:
        data = json.loads((student_folder / RESULTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {clause: dict(entry) for clause, entry in (data.get("clauses") or {}).items()}


def changes(
    old: Path, new: Path, old_config: Optional[config.LabConfig] = None, new_config: Optional[config.LabConfig] = None
) -> List[Dict]:
    """Per student whose grade or clause verdicts differ between two generation folders: the
    scores, each changed clause with both verdicts and messages, and why the score moves (`why`:
    each verdict changed, and, when both configurations are known, the points of each clause
    judged whose worth changed)."""
    before, after = records(old), records(new)
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
            why = (
                ["status: %s -> %s" % (was.get("status"), now.get("status"))]
                if was.get("status") != now.get("status")
                else []
            )
            why += ["verdict of %s: %s -> %s" % (c["clause"], c["old"], c["new"]) for c in clauses]
            if old_config is not None and new_config is not None:
                why += _points_moved(old_config.worth(clauses_was), new_config.worth(clauses_now))
            changed.append(
                {
                    "student": student,
                    "old_score": _score(was),
                    "new_score": _score(now),
                    "clauses": clauses,
                    "why": why,
                }
            )
    return changed


def _points_moved(was: Mapping[str, float], now: Mapping[str, float]) -> List[str]:
    """`points of S1.1: 0.75 -> 1.5` for each clause whose worth differs, in the lab's order."""
    return [
        "points of %s: %s -> %s" % (clause, points(was.get(clause, 0.0)), points(now.get(clause, 0.0)))
        for clause in sorted(set(was) | set(now), key=verdicts.clause_order)
        if points(was.get(clause, 0.0)) != points(now.get(clause, 0.0))
    ]


def _score(record: Mapping) -> str:
    if not record:
        return "absent"
    if record.get("status") != "graded":
        return str(record.get("status", ""))
    return "%s/%s" % (points(record.get("score")), points(record.get("max_score")))


def _described(made: Mapping[str, Optional[str]], parts: List[str]) -> str:
    """e.g. "configuration 3f2a9c1d0b7e, python (the suite's), lang en": what a generation is graded with."""
    shown = {
        "configuration": lambda value: str(value)[:12] if value else "unknown",
        "python": lambda value: value or "(the suite's)",
        "lang": lambda value: value or "unknown",
    }
    return ", ".join("%s %s" % (part, shown[part](made.get(part))) for part in parts)


def regrade_csv(changed: List[Dict], suites: Tuple[str, str] = ("unknown", "unknown")) -> str:
    """regrade.csv: a row per student that changes, with why, and the suites (version and
    fingerprint) of the published generation and the one pending, on every row: a row read alone
    (filtered, sorted) still says which grading it compares."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    head = ["student", "old score", "new score", "clauses that changed", "old -> new verdict", "why"]
    writer.writerow(head + ["old suite", "new suite"])
    for entry in changed:
        writer.writerow(
            [
                safe_cell(entry["student"]),
                safe_cell(entry["old_score"]),
                safe_cell(entry["new_score"]),
                safe_cell(" ".join(change["clause"] for change in entry["clauses"])),
                safe_cell("; ".join("%s %s -> %s" % (c["clause"], c["old"], c["new"]) for c in entry["clauses"])),
                safe_cell("; ".join(entry.get("why", ()))),
                safe_cell(suites[0]),
                safe_cell(suites[1]),
            ]
        )
    return text.getvalue()

"""Who submitted what: a folder of submissions, one folder per student with a runner.py, or one
STUDENT.py per student."""

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from conformance.classroom import layout


@dataclass(frozen=True)
class Submission:
    student: str
    path: Optional[Path]  # the runner.py to grade; None when there is nothing usable
    problem: str = ""  # why it cannot be graded, in one line (the student's record says so)


class NotASubmissionsFolder(Exception):
    """SUBMISSIONS cannot be read as a class (the message is one line)."""


def discover(folder: Path) -> List[Submission]:
    """Every student's submission, by name; hidden entries are not students."""
    if not folder.is_dir():
        raise NotASubmissionsFolder("%s: not a folder (one folder or STUDENT.py per student)" % folder)
    found: Dict[str, List[Submission]] = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        if entry.is_dir() and not entry.is_symlink():
            submission = _from_folder(entry)
        elif entry.suffix == ".py":
            submission = _checked(entry.stem, entry, entry.name)
        else:
            continue  # notes, archives: not a runner
        found.setdefault(submission.student, []).append(submission)
    return [_one(student, candidates) for student, candidates in sorted(found.items())]


def _from_folder(folder: Path) -> Submission:
    runner = folder / "runner.py"
    if runner.exists() or runner.is_symlink():
        return _checked(folder.name, runner, "%s/runner.py" % folder.name)
    others = sorted(entry.name for entry in folder.iterdir() if not entry.name.startswith("."))
    return Submission(
        folder.name,
        None,
        "no runner.py in %s/ (found: %s); the lab's file is runner.py" % (folder.name, ", ".join(others) or "nothing"),
    )


def _checked(student: str, path: Path, shown: str) -> Submission:
    # A link could make the grader (root) read any file of this machine as a "runner".
    if path.is_symlink():
        return Submission(student, None, "%s is a symbolic link; submit the file itself" % shown)
    if not path.is_file():
        return Submission(student, None, "%s is not a regular file" % shown)
    return Submission(student, path)


def _one(student: str, candidates: List[Submission]) -> Submission:
    if layout.is_class_name(student):
        # Whatever else is wrong with it: its files would land on the class's own (layout.py).
        return Submission(
            student,
            None,
            "a student cannot be named %s, a name of the class folder's own; rename the submission" % student,
        )
    if len(candidates) == 1:
        return candidates[0]
    return Submission(
        student, None, "two submissions for %s: a folder %s/ and a file %s.py; keep one" % ((student,) * 3)
    )

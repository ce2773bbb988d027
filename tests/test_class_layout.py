"""The class folder's own names (conformance/classroom/layout.py): no student can take one, and
the class writes no other."""

import csv
from pathlib import Path
from typing import Dict, Set

import pytest

from conformance.classroom import layout
from conformance.lab.config import DEFAULT_FILE
from tests.test_class import QuickClass, install_quick_class, write


@pytest.fixture
def quick_class(monkeypatch, capsys) -> QuickClass:
    return install_quick_class(monkeypatch, capsys)


# What the class writes at its top today, named here as well: a layout.py that forgot one of
# them would let a student take it again.
CLASS_FILES = ("grades.csv", "report.html", "history.csv", "regrade.csv", "regrade.html", "generations")


def rows(path: Path) -> Dict[str, Dict[str, str]]:
    with open(str(path), encoding="utf-8", newline="") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


def changed_configuration(tmp_path: Path) -> Path:
    """The shipped configuration with S1 worth more: every score changes, so a regrade is pending."""
    changed = tmp_path / "lab.toml"
    changed.write_text(DEFAULT_FILE.read_text(encoding="utf-8").replace("S1 = 3", "S1 = 6"), encoding="utf-8")
    return changed


def test_every_file_the_class_writes_at_its_top_is_a_name_of_layout():
    assert set(CLASS_FILES) <= layout.NAMES
    assert all(layout.is_class_name(name.upper()) for name in CLASS_FILES)  # Grades.CSV too
    assert not layout.is_class_name("alice")


def test_submissions_named_after_the_class_files_are_errors_and_the_class_goes_on(tmp_path, quick_class):
    subs, out = tmp_path / "subs", tmp_path / "out"
    write(subs / "alice.py", "# fails S1.3\n")
    write(subs / "bob" / "runner.py", "# bob's\n")
    taken = set()
    for name in sorted(layout.NAMES - {layout.MARK}):  # the mark is hidden: never a student
        write(subs / ("%s.py" % name))  # history.csv.py: the student "history.csv"
        write(subs / name.upper() / "runner.py")  # HISTORY.CSV/runner.py: a name differing in case
        write(subs / ("%s-notes" % name) / "notes.txt")  # not a class name: an ordinary error
        taken |= {name, name.upper()}
    write(subs / "Report.HTML" / "notes.txt")  # no runner.py, and a class name: its name says why

    changed = changed_configuration(tmp_path)
    # Graded, graded again (where history.csv, once a folder, ended every run), regraded (pending
    # review: exit 0), approved.
    runs = [([], 1), ([], 1), (["--config", changed], 0), (["--config", changed, "--approve"], 1)]
    for args, expected in runs:
        status, stdout, stderr = quick_class.run(subs, "--out", out, *args)
        # As a class with an error row ends, every other submission graded, history written.
        assert status == expected and "Traceback" not in stderr, stdout + stderr
        grades = rows(out / "grades.csv")
        assert grades["alice"]["status"] == grades["bob"]["status"] == "graded", grades
        for name in taken | {"Report.HTML"}:
            assert grades[name]["status"] == "error"
            assert "the class folder's own" in grades[name]["message"] and "\n" not in grades[name]["message"]
        for name in CLASS_FILES[:3]:
            assert (out / name).is_file(), name
        assert (out / "generations" / layout.STATE).is_file()
        _no_folder_for(taken | {"Report.HTML"}, out)
    with open(str(out / "history.csv"), encoding="utf-8", newline="") as handle:
        history = list(csv.DictReader(handle))
    assert [row["generation"] for row in history if row["student"] == "alice"] == ["1", "1", "2"]
    # Only alice and bob were graded, in each generation: the class files' names never were.
    assert sorted(set(quick_class.graded)) == [b"# bob's\n", b"# fails S1.3\n"]


def _no_folder_for(names: Set[str], out: Path) -> None:
    """No student folder of these names, at the top or in any generation: the store made none."""
    folders = [out] + [entry for entry in (out / "generations").iterdir() if entry.is_dir()]
    for folder in folders:
        for name in names:
            entry = folder / name
            assert not (entry / "grading.json").exists() and not (entry / "runner.py").exists(), entry
            if entry.exists():
                assert name in layout.NAMES, entry  # the class's own file (grades.csv, ...), nothing else


def test_the_class_folder_holds_no_name_layout_does_not_list(tmp_path, quick_class: QuickClass):
    subs, out = tmp_path / "subs", tmp_path / "out"
    write(subs / "alice.py", "# fails S1.3\n")
    write(subs / "bob" / "runner.py", "# bob's\n")
    write(subs / "carol" / "notes.txt")  # nothing to grade: an error, with a folder of its own
    students = {"alice", "bob", "carol"}
    changed = changed_configuration(tmp_path)
    steps = [
        [subs],  # the first grading, published
        [subs, "--config", changed],  # a regrade, pending: regrade.csv and regrade.html
        [subs, "--config", changed, "--approve"],  # published: history.csv
        ["--rollback"],
    ]
    for args in steps:
        status, stdout, stderr = quick_class.run(*args[:1], "--out", out, *args[1:])
        assert status in (0, 1), stdout + stderr
        assert set(_names(out)) - students <= layout.NAMES, _names(out)
        generations = out / layout.GENERATIONS
        for entry in _names(generations):
            assert entry == layout.STATE or entry.isdigit(), entry
            if entry.isdigit():
                assert set(_names(generations / entry)) - students <= layout.NAMES, _names(generations / entry)
    assert {"regrade.csv", "regrade.html"} & set(_names(out)) == set()  # approved: nothing pending


def _names(folder: Path) -> Set[str]:
    return {entry.name for entry in folder.iterdir()}

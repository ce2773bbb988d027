"""A class regraded under a changed configuration: a reviewed change, approved or rolled back."""

import csv
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, Union

import pytest

from conformance.lab.config import DEFAULT_FILE
from conformance.reporting import provenance
from conformance.selftest.zoo import MUTANTS, build
from tests.grading import REFERENCE, class_command, submissions
from tests.test_class import QuickClass, install_quick_class, write
from tests.test_class_report import chromium, headless

WRONG = next(mutant for mutant in MUTANTS if mutant.name == "exit-code-squashed-to-1")  # breaks S1.3


@pytest.fixture
def quick_class(monkeypatch, capsys) -> QuickClass:
    return install_quick_class(monkeypatch, capsys)


def rows(path):
    with open(str(path), encoding="utf-8", newline="") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


def run_class(*args):
    done = subprocess.run(class_command(*map(str, args)), capture_output=True, text=True, timeout=900)
    return done


@pytest.mark.classroom
@pytest.mark.slow(120)
def test_a_changed_configuration_is_regraded_reviewed_approved_and_rolled_back(tmp_path, open_tmpdir):
    subs = submissions(tmp_path / "subs", {"alice": REFERENCE, "bob": build(WRONG, tmp_path / "wrong")})
    out = tmp_path / "out"
    (subs / "carol").mkdir()  # nothing submitted: an error in every generation, so never a change
    first = run_class(subs, "--out", out)
    assert first.returncode == 1, first.stdout + first.stderr  # carol could not be graded
    published = (out / "grades.csv").read_text()
    assert {name: row["generation"] for name, row in rows(out / "grades.csv").items()} == {
        "alice": "1",
        "bob": "1",
        "carol": "1",
    }
    assert 'data-generation="1"' in (out / "report.html").read_text()

    # The lab author changes the configuration: the extended profile judges 14 more clauses.
    changed = tmp_path / "lab.toml"
    changed.write_text(DEFAULT_FILE.read_text(encoding="utf-8").replace('profile = "core"', 'profile = "extended"'))
    second = run_class(subs, "--out", out, "--config", changed)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "2 of 3 submissions change: review %s" % (out / "regrade.html") in second.stdout, second.stdout
    assert (out / "grades.csv").read_text() == published, "a pending regrade changed what is published"
    regrade = rows(out / "regrade.csv")
    assert set(regrade) == {"alice", "bob"}
    # The extended clauses carry no points in the shipped configuration: the grade stays, the verdicts change.
    assert regrade["alice"]["old score"] == regrade["alice"]["new score"] == "28/28"
    assert regrade["alice"]["clauses that changed"].split() == ["X%d" % n for n in range(1, 15)]
    assert "X1 absent -> passed" in regrade["alice"]["old -> new verdict"]

    # In a browser: the page says how many change, per clause and per student.
    browser = chromium()
    dom = headless(browser, tmp_path / "profile", "--dump-dom", (out / "regrade.html").as_uri()).stdout.decode()
    assert 'data-changed="2"' in dom and 'data-student="alice"' in dom and 'data-clause="X1"' in dom

    third = run_class(subs, "--out", out, "--config", changed, "--approve")
    assert third.returncode == 1, third.stdout + third.stderr
    approved = rows(out / "grades.csv")
    assert approved["alice"]["generation"] == "2" and "X1" in (out / "alice" / "results.json").read_text()
    assert not (out / "regrade.csv").exists()
    assert 'data-generation="2"' in (out / "report.html").read_text()

    back = run_class("--out", out, "--rollback")
    assert back.returncode == 0, back.stdout + back.stderr
    assert (out / "grades.csv").read_text() == published
    assert 'data-generation="1"' in (out / "report.html").read_text()
    with open(str(out / "history.csv"), encoding="utf-8", newline="") as handle:
        history = list(csv.DictReader(handle))
    assert [(row["generation"], row["student"]) for row in history if row["student"] == "alice"] == [
        ("1", "alice"),
        ("2", "alice"),
        ("1", "alice"),
    ]
    # Every generation stays, with what produced it.
    assert (out / "generations" / "1" / "alice" / "results.json").exists()
    assert (out / "generations" / "2" / "alice" / "results.json").exists()


def test_a_rollback_with_nothing_before_says_so_in_one_line(tmp_path):
    done = run_class("--out", tmp_path / "nowhere", "--rollback")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


# ---- approving a regrade: in this process, the gradings made up at once -----------------------


def changed_configuration(folder: Path) -> Path:
    """The shipped configuration, changed so that every submission is graded again (another
    profile) and S2.1 fails for everyone (tests.test_class.quick_report reads the comment)."""
    folder.mkdir(parents=True, exist_ok=True)
    changed = folder / "lab.toml"
    text = DEFAULT_FILE.read_text(encoding="utf-8").replace('profile = "core"', 'profile = "extended"')
    changed.write_text(text + "\n# fails S2.1\n", encoding="utf-8")
    return changed


def snapshot(folder: Path) -> Dict[str, Union[bytes, str]]:
    """Every file of `folder` and below with its bytes, every folder by name: what "nothing changed" compares."""
    if not folder.exists():
        return {}
    return {
        str(path.relative_to(folder)): "folder" if path.is_dir() else path.read_bytes()
        for path in sorted(folder.rglob("*"))
    }


def pending_regrade(tmp_path: Path, quick: QuickClass):
    """A class graded once, then regraded under a changed configuration, pending review: its
    submissions, its folder, the changed configuration and what `class` printed."""
    subs, out = tmp_path / "my subs", tmp_path / "class out"
    write(subs / "alice.py", "# fails S1.3\n")
    write(subs / "bob.py", "# bob's\n")
    assert quick.run(subs, "--out", out, "--lang", "en")[0] == 0
    # A path with a space and a quote: the printed command must quote it for a shell.
    changed = changed_configuration(tmp_path / "the course's lab")
    status, stdout, stderr = quick.run(
        subs, "--out", out, "--config", changed, "--python", sys.executable, "--lang", "en"
    )
    assert status == 0 and "2 of 2 submissions change" in stdout, stdout + stderr
    return subs, out, changed, stdout


def test_the_approve_command_printed_for_a_regrade_approves_it(tmp_path, quick_class):
    subs, out, changed, stdout = pending_regrade(tmp_path, quick_class)
    assert {row["generation"] for row in rows(out / "grades.csv").values()} == {"1"}
    printed = stdout.strip().splitlines()[-1].strip()
    argv = shlex.split(printed)
    assert argv[:2] == ["pyops-conformance", "class"] and argv[-1] == "--approve", printed
    assert argv[argv.index("--config") + 1] == str(changed) and argv[argv.index("--python") + 1] == sys.executable
    assert argv[argv.index("--lang") + 1] == "en" and argv[argv.index("--out") + 1] == str(out)
    graded = len(quick_class.graded)

    status, stdout, stderr = quick_class.run(*argv[2:])
    assert status == 0, stdout + stderr
    assert len(quick_class.graded) == graded, "nothing changed since the review: nothing is graded again"
    grades = rows(out / "grades.csv")
    assert {row["generation"] for row in grades.values()} == {"2"}
    assert "S2.1" in grades["bob"]["message"]
    assert not (out / "regrade.csv").exists() and not (out / "regrade.html").exists()
    with open(str(out / "history.csv"), encoding="utf-8", newline="") as handle:
        history = list(csv.DictReader(handle))
    assert [(row["generation"], row["student"]) for row in history] == [
        ("1", "alice"),
        ("1", "bob"),
        ("2", "alice"),
        ("2", "bob"),
    ]


def test_an_approve_with_another_configuration_refuses_and_changes_nothing(tmp_path, quick_class):
    subs, out, changed, _ = pending_regrade(tmp_path, quick_class)
    other = changed_configuration(tmp_path / "another")
    other.write_text(other.read_text(encoding="utf-8") + "# and more\n", encoding="utf-8")
    before, graded = snapshot(out), len(quick_class.graded)
    wrong = [
        [],  # the shipped configuration: the published generation's, as the old printed command had it
        ["--config", other],
        ["--config", changed, "--python", sys.executable, "--lang", "ja"],
        ["--config", changed, "--lang", "en"],  # the interpreter it was graded with left out
    ]
    for args in wrong:
        status, stdout, stderr = quick_class.run(subs, "--out", out, *args, "--approve")
        assert status == 2 and len(stderr.splitlines()) == 1 and "Traceback" not in stderr, (args, stdout + stderr)
        assert "generation 2" in stderr and "pending review" in stderr, stderr
        # No grading, no new generation, no history row, nothing published, the review still there.
        assert snapshot(out) == before and len(quick_class.graded) == graded, args


def test_an_approve_with_nothing_pending_refuses_and_changes_nothing(tmp_path, quick_class):
    subs, out = tmp_path / "subs", tmp_path / "out"
    write(subs / "alice.py", "# alice's\n")
    status, stdout, stderr = quick_class.run(subs, "--out", out, "--approve")
    assert status == 2 and len(stderr.splitlines()) == 1 and "nothing" in stderr, stdout + stderr
    assert not out.exists() and quick_class.graded == []

    assert quick_class.run(subs, "--out", out)[0] == 0  # generation 1, published at once
    for args in ([], ["--config", changed_configuration(tmp_path / "course")]):
        before = snapshot(out)
        status, stdout, stderr = quick_class.run(subs, "--out", out, *args, "--approve")
        assert status == 2 and len(stderr.splitlines()) == 1 and "nothing is pending review" in stderr, stderr
        assert snapshot(out) == before and len(quick_class.graded) == 1


def test_names_in_the_regrade_and_history_files_are_neutralised_and_their_changes_found(tmp_path, quick_class):
    subs, out = tmp_path / "subs", tmp_path / "out"
    names = ["-dash", "=HYPERLINK(1)", "\t@tab", "cr\rname", "plain"]
    for name in names:
        write(subs / ("%s.py" % name), "# %s\n" % name.encode("unicode_escape").decode())
    assert quick_class.run(subs, "--out", out, "--lang", "en")[0] == 0
    changed = changed_configuration(tmp_path / "course")
    status, stdout, stderr = quick_class.run(subs, "--out", out, "--config", changed, "--lang", "en")
    assert status == 0 and "5 of 5 submissions change" in stdout, stdout + stderr
    regrade = (out / "regrade.csv").read_text(encoding="utf-8")
    assert quick_class.run(*shlex.split(stdout.strip().splitlines()[-1])[2:])[0] == 0
    history = (out / "history.csv").read_text(encoding="utf-8")
    shown = ["'-dash", "'=HYPERLINK(1)", "'\t@tab", "cr\\x0dname", "plain"]
    for text, rows_written in ((regrade, 5), (history, 10)):
        assert "\r" not in text and len(text.splitlines()) == 1 + rows_written, text
        read = list(csv.DictReader(text.splitlines()))
        assert sorted({row["student"] for row in read}) == sorted(shown), read
    # Each student's changed clause is found, whatever the spreadsheet shows of the name.
    changes = {row["student"]: row["clauses that changed"] for row in csv.DictReader(regrade.splitlines())}
    assert changes == dict.fromkeys(shown, "S2.1"), changes


def test_a_regrade_names_both_suites_and_why_each_score_moves(tmp_path, quick_class):
    subs, out = tmp_path / "subs", tmp_path / "out"
    write(subs / "alice.py", "# fails S1.3\n")
    write(subs / "bob.py", "# bob's\n")
    assert quick_class.run(subs, "--out", out, "--lang", "en")[0] == 0
    changed = changed_configuration(tmp_path / "course")  # graded again: S2.1 now fails for everyone
    # ... and S1 is worth more.
    changed.write_text(changed.read_text(encoding="utf-8").replace("S1 = 3", "S1 = 6"), encoding="utf-8")
    status, stdout, stderr = quick_class.run(subs, "--out", out, "--config", changed, "--lang", "en")
    assert status == 0 and "2 of 2 submissions change" in stdout, stdout + stderr
    suite = "%s %s" % (provenance.suite_version(), provenance.suite_fingerprint())
    regrade = rows(out / "regrade.csv")
    for row in regrade.values():
        assert row["old suite"] == row["new suite"] == suite, row
        assert "verdict of S2.1: passed -> failed" in row["why"] and "points of S1.1: 1 -> 2" in row["why"], row
    assert "verdict of S1.3" not in regrade["alice"]["why"], "alice's S1.3 failed in both"
    page = (out / "regrade.html").read_text(encoding="utf-8")
    assert page.count(provenance.suite_fingerprint()) == 2 and 'id="suite"' in page
    assert "points of S1.1: 1 -&gt; 2" in page and "verdict of S2.1: passed -&gt; failed" in page

"""A class regraded under a changed configuration: a reviewed change, approved or rolled back."""

import csv
import subprocess

import pytest

from conformance.config import DEFAULT_FILE
from conformance.selftest.zoo import MUTANTS, build
from tests.grading import REFERENCE, class_command, submissions
from tests.test_class_report import chromium, headless

WRONG = next(mutant for mutant in MUTANTS if mutant.name == "exit-code-squashed-to-1")  # breaks S1.3


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

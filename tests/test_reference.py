"""The bundled reference passes every check of both profiles, and correct runners in other styles
pass the core profile: the suite never fails a correct runner for its style."""

from pathlib import Path

import pytest

from tests.grading import GOOD, REFERENCE, grade


@pytest.mark.parametrize("profile", ["core", "extended"])
def test_reference_passes_every_check(tmp_path, profile):
    graded = grade(tmp_path, REFERENCE, "--profile", profile)
    assert graded.rc == 0, graded.explain()
    summary = graded.report["summary"]
    assert summary["failed"] == summary["errors"] == summary["skipped"] == 0
    assert summary["passed"] == summary["total"] >= (150 if profile == "core" else 180)
    assert {entry["verdict"] for entry in graded.report["clauses"].values()} == {"passed"}
    if profile == "core":
        assert graded.report["score"] == {"points": 28, "max_points": 28}


def test_default_runner_is_the_reference(tmp_path):
    graded = grade(tmp_path, None, "--clause", "S1.3")
    assert graded.rc == 0, graded.explain()
    # The bundled copy: this checkout's, or the installed package's under tox.
    graded_file = Path(graded.report["runner"])
    assert graded_file.parts[-2:] == ("runner", "runner.py")
    assert graded_file.read_bytes() == REFERENCE.read_bytes()


def test_there_are_three_good_runners():
    assert len(GOOD) >= 3, GOOD


@pytest.mark.parametrize("runner", GOOD, ids=[p.stem for p in GOOD])
def test_correct_runner_in_another_style_passes_core(tmp_path, runner):
    graded = grade(tmp_path, runner, "--profile", "core")
    assert graded.rc == 0, graded.explain()
    assert graded.report["score"] == {"points": 28, "max_points": 28}

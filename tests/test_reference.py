"""The bundled reference passes every check of both profiles, and correct runners in other styles
pass the core profile: the suite never fails a correct runner for its style, nor for the values
a grading draws (lab/draws.py): the selftest grades each under five seeds."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.selftest.zoo import CORRECT
from tests.grading import GOOD, REFERENCE, grade

SEEDS = 5


@pytest.mark.parametrize("profile", [pytest.param("core", marks=pytest.mark.correct_core), "extended"])
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


@pytest.mark.correct_core
@pytest.mark.parametrize("runner", GOOD, ids=[p.stem for p in GOOD])
def test_correct_runner_in_another_style_passes_core(tmp_path, runner):
    graded = grade(tmp_path, runner, "--profile", "core")
    assert graded.rc == 0, graded.explain()
    assert graded.report["score"] == {"points": 28, "max_points": 28}


@pytest.mark.once
@pytest.mark.slow(400)
def test_the_selftest_passes_every_correct_runner_under_five_seeds(tmp_path):
    # Each round draws its own seed: timeouts, backoffs, durations and names a runner cannot know.
    kept = tmp_path / "kept"
    kept.mkdir()
    command = [sys.executable, "-m", "conformance", "selftest", "--only", "correct", "--rounds", str(SEEDS)]
    done = subprocess.run(
        command + ["-j", "3", "--keep", str(kept)], capture_output=True, text=True, timeout=3600, cwd=str(tmp_path)
    )
    said = "correct runners: %d of %d pass, with the same verdicts in %d rounds, under at least %d seeds each" % (
        len(CORRECT),
        len(CORRECT),
        SEEDS,
        SEEDS,
    )
    assert done.returncode == 0 and said in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    for runner in CORRECT:
        reports = [json.loads(path.read_text()) for path in sorted(kept.glob("correct-%s-*.json" % runner.stem))]
        assert len(reports) == SEEDS and len({report["seed"] for report in reports}) == SEEDS, runner.stem
        assert all(report["score"] == {"points": 28, "max_points": 28} for report in reports), runner.stem

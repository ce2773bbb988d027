"""A record behind every grade (provenance), and `pyops-conformance replay` that grades it again."""

import json
import os
import subprocess
import sys

import pytest

from conformance.lab.config import DEFAULT_FILE, load
from conformance.reporting import platforms, provenance
from conformance.selftest.zoo import MUTANTS, build
from tests.grading import REFERENCE, class_command, grade, submissions

# Replays, judged by grading: the same on every interpreter (tox.ini runs it once).
pytestmark = pytest.mark.once

WRONG = next(mutant for mutant in MUTANTS if mutant.name == "exit-code-squashed-to-1")  # breaks S1.3


def replay(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "conformance", "replay", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def graded_beside(folder, source, *options):
    """`source` graded as folder/runner.py, its report written beside it as results.json."""
    folder.mkdir(parents=True, exist_ok=True)
    runner = folder / "runner.py"
    runner.write_bytes(source.read_bytes())
    graded = grade(folder, runner, *options, workers=4)
    (folder / "results.json").write_text(json.dumps(graded.report))
    return graded


def test_a_grading_records_what_produced_it(tmp_path):
    graded = graded_beside(tmp_path / "r", REFERENCE, "--clause", "S1.3")
    kept = graded.report["provenance"]
    assert kept["runner"] == {"sha256": provenance.sha256(REFERENCE.read_bytes()), "size": REFERENCE.stat().st_size}
    assert kept["suite"]["sha256"] == provenance.suite_fingerprint()
    assert kept["configuration"] == {
        "sha256": provenance.sha256(DEFAULT_FILE.read_bytes()),
        "text": DEFAULT_FILE.read_text(encoding="utf-8"),
    }
    assert kept["selection"] == {"lang": "en", "clauses": ["S1.3"], "keyword": None}
    assert kept["interpreter"]["version"].startswith("3.") and kept["isolation"] == graded.report["isolation"]
    assert kept["started"] <= kept["ended"] and kept["machine"]["cpus"] > 0
    # Nothing of the grader's own folders: the runner is named by its contents.
    assert str(tmp_path) not in json.dumps(kept)
    # Gradescope keeps it with the submission (extra_data is stored, never shown).
    assert platforms.gradescope(graded.report, load())["extra_data"] == {"provenance": kept}


@pytest.mark.parametrize("source", ["reference", "wrong"])
def test_a_replay_of_a_report_beside_its_runner_finds_the_same_verdicts(tmp_path, source):
    runner = REFERENCE if source == "reference" else build(WRONG, tmp_path / "wrong")
    graded = graded_beside(tmp_path / "r", runner, "--clause", "S1")
    checks = len(graded.report["tests"])  # S1's checks, however many the suite has
    assert checks > 30
    replayed = replay(tmp_path / "r" / "results.json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    graded_file = tmp_path / "r" / "runner.py"
    assert replayed.stdout.startswith(
        "grading %s (sha256 %s)\n" % (graded_file, provenance.sha256(runner.read_bytes()))
    )
    assert "replayed as recorded: only S1\n" in replayed.stdout, replayed.stdout
    assert replayed.stdout.strip().endswith("same verdicts (3 clauses, %d checks)" % checks), replayed.stdout


def test_a_replay_refuses_a_runner_that_is_not_the_recorded_one(tmp_path):
    graded_beside(tmp_path / "r", REFERENCE, "--clause", "S1.3")
    (tmp_path / "r" / "runner.py").write_text(REFERENCE.read_text() + "\n# changed after grading\n")
    replayed = replay(tmp_path / "r")
    assert replayed.returncode == 2 and replayed.stderr.count("\n") == 1, replayed.stderr
    assert "is not the recorded runner" in replayed.stderr
    (tmp_path / "r" / "runner.py").unlink()
    replayed = replay(tmp_path / "r")
    assert replayed.returncode == 2 and "the recorded runner is missing" in replayed.stderr, replayed.stderr


def test_a_replay_of_something_that_is_no_record_says_so_in_one_line(tmp_path):
    (tmp_path / "results.json").write_text('{"tests": []}')
    (tmp_path / "list" / "results.json").parent.mkdir()
    (tmp_path / "list" / "results.json").write_text("[1, 2]")
    half = hand_made_record(tmp_path / "half", REFERENCE.read_bytes())
    half.write_text(half.read_text().replace('"configuration"', '"no-configuration"'))
    for record in (tmp_path / "results.json", tmp_path / "nowhere", tmp_path / "list", half):
        replayed = replay(record)
        assert replayed.returncode == 2 and replayed.stderr.count("\n") == 1, replayed.stderr
        assert "Traceback" not in replayed.stderr


@pytest.mark.classroom
@pytest.mark.slow(60)
def test_a_class_folder_replays_the_same_and_a_changed_configuration_differs(tmp_path, open_tmpdir):
    subs = submissions(tmp_path / "subs", {"alice": REFERENCE, "bob": build(WRONG, tmp_path / "wrong")})
    out = tmp_path / "out"
    done = subprocess.run(class_command(str(subs), "--out", str(out)), capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    for student in ("alice", "bob"):
        record = json.loads((out / student / "grading.json").read_text())
        assert record["provenance"]["runner"]["sha256"] == provenance.sha256(
            (subs / student / "runner.py").read_bytes()
        )
        replayed = replay(out / student)
        assert replayed.returncode == 0 and "same verdicts (28 clauses" in replayed.stdout, replayed.stdout
    # The lab author changes the configuration: the extended profile judges clauses the record has not.
    changed = tmp_path / "lab.toml"
    changed.write_text(DEFAULT_FILE.read_text(encoding="utf-8").replace('profile = "core"', 'profile = "extended"'))
    assert changed.read_text() != DEFAULT_FILE.read_text(encoding="utf-8")
    replayed = replay(out / "bob", "--config", changed)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "\nthe configuration differs from the record's" in replayed.stdout, replayed.stdout
    assert "clause X1: absent -> " in replayed.stdout, replayed.stdout


def test_a_replay_never_runs_an_interpreter_the_record_names(tmp_path):
    # A results.json may come from a learner: a record naming a "python" of its own would otherwise
    # be run by the grader (as root) to ask its version, and then run the runner.
    graded_beside(tmp_path / "r", REFERENCE, "--clause", "S1.3")
    ran = tmp_path / "it-ran"
    fake = tmp_path / "python3"
    fake.write_text('#!/bin/sh\ntouch %s\nexec %s "$@"\n' % (ran, sys.executable))
    fake.chmod(0o755)
    report = json.loads((tmp_path / "r" / "results.json").read_text())
    report["provenance"]["interpreter"]["path"] = str(fake)
    (tmp_path / "r" / "results.json").write_text(json.dumps(report))
    replayed = replay(tmp_path / "r")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert not ran.exists(), "the replay ran the interpreter the record named"
    assert "recorded with %s" % fake in replayed.stdout, replayed.stdout


def test_a_record_of_another_runner_is_refused_and_never_graded(tmp_path):
    # A learner hands in a runner that does nothing beside the record of a reference grading whose
    # runner they renamed to the bundled reference's path: the replay must not grade that file.
    graded_beside(tmp_path / "theirs", REFERENCE, "--clause", "S1.3")
    record = json.loads((tmp_path / "theirs" / "results.json").read_text())
    record["runner"] = str(REFERENCE)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "results.json").write_text(json.dumps(record))
    (tmp_path / "mine" / "runner.py").write_text("pass\n")
    replayed = replay(tmp_path / "mine")
    assert replayed.returncode == 2 and replayed.stderr.count("\n") == 1, replayed.stdout + replayed.stderr
    assert "mine/runner.py is not the recorded runner" in replayed.stderr, replayed.stderr
    assert "grading" not in replayed.stdout, replayed.stdout


def test_a_record_graded_under_a_configuration_of_its_own_does_not_replay_as_the_same(tmp_path):
    # A runner that fails S1.3, graded under a learner's lab.toml that puts every point on S2: its
    # record says full marks. The course's configuration is the one a replay judges it by.
    theirs = tmp_path / "theirs.toml"
    theirs.write_text(DEFAULT_FILE.read_text(encoding="utf-8").replace("S1 = 3", "S1 = 0").replace("S2 = 4", "S2 = 28"))
    graded = graded_beside(
        tmp_path / "r", build(WRONG, tmp_path / "wrong"), "--clause", "S1.3", "--config", str(theirs)
    )
    assert graded.report["score"] == {"points": 0.0, "max_points": 0.0}, graded.report["score"]
    replayed = replay(tmp_path / "r")
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "the configuration differs from the record's" in replayed.stdout, replayed.stdout
    assert "score: 0/0 -> 0/3" in replayed.stdout, replayed.stdout
    # Under the configuration it was graded with, a replay of the same file says so, and passes.
    replayed = replay(tmp_path / "r", "--config", theirs)
    assert replayed.returncode == 0 and "same grade: score 0/0" in replayed.stdout, replayed.stdout


def hand_made_record(folder, runner_bytes, names=None):
    """A results.json as a learner could hand one in: its provenance names `runner_bytes`."""
    folder.mkdir(parents=True, exist_ok=True)
    kept = {
        "runner": {"sha256": provenance.sha256(runner_bytes), "size": len(runner_bytes)},
        "configuration": {"text": DEFAULT_FILE.read_text(encoding="utf-8")},
        "selection": {"lang": "en", "clauses": ["S1.3"], "keyword": None},
    }
    record = {"profile": "core", "runner": str(names or "runner.py"), "provenance": kept, "clauses": [], "tests": []}
    (folder / "results.json").write_text(json.dumps(record))
    return folder / "results.json"


@pytest.mark.parametrize("planted", ["report-fifo", "runner-fifo", "runner-link", "runner-zero", "named-fifo"])
def test_a_replay_never_follows_a_link_nor_blocks_nor_reads_without_a_cap(tmp_path, planted):
    # A record folder may be a learner's: what it holds is read as a lab file is (labfiles.py).
    source = REFERENCE.read_bytes()
    record = hand_made_record(tmp_path / "r", source)
    runner = tmp_path / "r" / "runner.py"
    if planted == "report-fifo":
        record.unlink()
        os.mkfifo(str(record))
    elif planted == "runner-fifo":
        os.mkfifo(str(runner))
    elif planted == "runner-link":  # the recorded runner's bytes, but behind a link the grader must not follow
        (tmp_path / "elsewhere.py").write_bytes(source)
        runner.symlink_to(tmp_path / "elsewhere.py")
    elif planted == "runner-zero":  # endless bytes: read without a cap, the grader's memory goes
        runner.symlink_to("/dev/zero")
    else:
        os.mkfifo(str(tmp_path / "fifo.py"))
        hand_made_record(tmp_path / "r", source, names=tmp_path / "fifo.py")
    replayed = replay(tmp_path / "r", timeout=60)
    assert replayed.returncode == 2 and replayed.stderr.count("\n") == 1, replayed.stdout + replayed.stderr
    assert "Traceback" not in replayed.stderr

"""Checks run in forks of the grading's process (conformance/harness/forks.py): reported as if run in it."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from tests.grading import REFERENCE

# A pytest plugin that runs the session's tests in two forks, as the suite's plugin does.
CONFTEST = """
from conformance.harness import forks

def pytest_runtestloop(session):
    if session.config.option.collectonly:
        return None
    forks.run(session, 2, then=lambda: None)
    return True

def pytest_runtest_logreport(report):
    if report.when == "teardown":
        with open("logged.jsonl", "a") as log:
            log.write(__import__("json").dumps([report.nodeid, dict(report.user_properties)]) + "\\n")
"""

CHECKS = """
import os, signal, time
import pytest

@pytest.fixture
def lab(record_property):
    record_property("lab", "made")
    yield
    with open("torn-down", "a") as log:
        log.write("x\\n")

def test_passes(lab):
    time.sleep(0.2)

def test_fails(lab):
    assert 1 == 2, "a clause failure"

def test_skips():
    pytest.skip("not in this profile")

@pytest.fixture
def broken():
    raise RuntimeError("a broken fixture")

def test_errors(broken):
    pass

def test_its_process_is_killed(lab):
    os.kill(os.getpid(), signal.SIGKILL)

@pytest.mark.parametrize("n", range(6))
def test_many(lab, n):
    time.sleep(0.05)
"""


def run_pytest(folder, *args):
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", *args],
        cwd=str(folder),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def project(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_checks.py").write_text(textwrap.dedent(CHECKS))
    return tmp_path


def test_every_outcome_reaches_the_controller_with_its_properties(project):
    done = run_pytest(project, "--junitxml", "junit.xml", "-rA")
    # test_many: 6 passed; a killed fork's check is a failure the controller writes itself.
    assert "2 failed, 7 passed, 1 skipped, 1 error" in done.stdout, done.stdout + done.stderr
    assert done.returncode == 1
    assert "AssertionError: a clause failure" in done.stdout
    assert "RuntimeError: a broken fixture" in done.stdout
    assert "the process running this check ended unexpectedly" in done.stdout
    logged = dict(json.loads(line) for line in (project / "logged.jsonl").read_text().splitlines())
    assert len(logged) == 11, logged
    assert logged["test_checks.py::test_passes"] == {"lab": "made"}
    assert logged["test_checks.py::test_its_process_is_killed"]["harness_error"] is True
    # The fixtures of every check that ended were torn down (in its fork): all but the killed one.
    assert (project / "torn-down").read_text().count("x") == 8
    assert 'tests="11"' in (project / "junit.xml").read_text()


def test_checks_left_when_every_fork_was_killed_are_reported_not_dropped(project):
    (project / "test_checks.py").write_text(
        textwrap.dedent(
            """
            import os, signal

            def test_kills_its_process():
                os.kill(os.getpid(), signal.SIGKILL)

            def test_kills_its_process_too():
                os.kill(os.getpid(), signal.SIGKILL)

            def test_never_run():
                pass
            """
        )
    )
    done = run_pytest(project, "-rf")
    assert done.returncode == 1
    assert "3 failed" in done.stdout, done.stdout + done.stderr
    assert "no process was left to run this check" in done.stdout


def test_a_controller_stopped_by_a_signal_stops_its_forks_and_their_checks_clean_up(project):
    (project / "test_checks.py").write_text(
        textwrap.dedent(
            """
            import os, time
            import pytest

            @pytest.fixture
            def lab():
                yield
                with open("torn-down", "a") as log:
                    log.write("x\\n")

            @pytest.mark.parametrize("n", range(2))
            def test_waits(lab, n):
                with open("started", "a") as log:
                    log.write("%d\\n" % os.getpid())
                time.sleep(60)
            """
        )
    )
    (project / "conftest.py").write_text(
        textwrap.dedent(CONFTEST)
        + textwrap.dedent(
            """
            import signal
            def pytest_sessionstart(session):
                def stop(signum, frame):
                    raise KeyboardInterrupt
                signal.signal(signal.SIGTERM, stop)
            """
        )
    )
    grading = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q"],
        cwd=str(project),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    started = project / "started"
    # Stopped once both checks run (a loaded machine may take long to get there): what is judged
    # is the stop of forks that run checks.
    deadline = time.monotonic() + 120
    while not (started.exists() and len(started.read_text().split()) == 2):
        assert time.monotonic() < deadline and grading.poll() is None, "the checks never both started"
        time.sleep(0.05)
    grading.terminate()
    # The forks have forks._STOP_PATIENCE_S to clean up, all together; the rest is a margin for load.
    out, _ = grading.communicate(timeout=60)
    assert grading.returncode != 0, out
    # Nothing else's thread was forked with the checks (one holding a lock deadlocks a fork, which
    # then ignores the stop): the suite's plugin stays out of pytest sessions that did not ask for it.
    assert b"multi-threaded" not in out, out
    assert (project / "torn-down").read_text().count("x") == 2, out
    for pid in started.read_text().split():
        with pytest.raises(ProcessLookupError):  # reaped, not left running
            os.kill(int(pid), 0)


def test_repeated_rounds_in_one_process_give_every_check_the_same_name(tmp_path):
    # With forks the grading's own process collects the checks, once per round of --repeat; a
    # check whose name changed between rounds would read as an outcome that varied (exit 2).
    runner = tmp_path / "runner.py"
    runner.write_bytes(REFERENCE.read_bytes())
    report = tmp_path / "report.json"
    argv = [sys.executable, "-m", "conformance", "--runner", str(runner), "--clause", "S1.1", "--repeat", "2"]
    done = subprocess.run(argv + ["--json", str(report)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(report.read_text())
    assert data["repeat"]["varied"] == [] and data["summary"]["passed"] == len(data["tests"]) > 5, data["repeat"]

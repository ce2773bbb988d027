"""The shared isolation mode (no namespace, e.g. an unprivileged container) loses nothing.

These tests play the learner's machine inside a private mount namespace of their own: the lab's
real paths are bind mounts of folders made here, filled as a learner leaves them. The suite runs
there with --isolation shared, on those "real" paths, and must put every byte back, also when it
is interrupted.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from conformance.harness.processes import SESSION_VAR, reap, tagged
from conformance.harness.sandbox import BIN_DIR, FIXTURES, SUB_DIR, MountPlan, probe_namespace
from conformance.reporting import view
from tests.test_cpuwait import CONTENDED_CPU, SUCCESS_CHECK, contended_runner
from tests.tree import learner_folder, tree_state

# Shared mode's turns and restores, judged by grading: the same on every interpreter (tox.ini runs it once).
pytestmark = pytest.mark.once


@pytest.fixture
def machine(tmp_path):
    """A learner's machine: their lab folders, and a way to run the suite on it."""
    plan, why = probe_namespace()
    if plan is None:
        pytest.skip("needs a mount namespace to stand in for the learner's machine: %s" % why)
    plan = MountPlan.whole_machine()  # the learner's machine, not a runner's root
    sub = learner_folder(tmp_path / "sub")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for fixture in FIXTURES.glob("*.sh"):
        shutil.copy2(str(fixture), str(bin_dir / fixture.name))
    (tmp_path / "overlay").mkdir()
    (tmp_path / "tmp").mkdir()
    session = "shared-%s" % uuid.uuid4().hex[:8]
    env = dict(
        os.environ,
        TMPDIR=str(tmp_path / "tmp"),  # the suite's lock file lives there: no clash with other tests
        PYOPS_CONFORMANCE_BACKUP=str(tmp_path / "backup"),
        **{SESSION_VAR: session},
    )

    started = []

    def start(*options, cpus=None):
        argv = [sys.executable, "-m", "conformance", "--isolation", "shared", "--json", str(tmp_path / "r.json")]

        def preexec():
            plan.enter(tmp_path, [(sub, SUB_DIR), (bin_dir, BIN_DIR)])
            if cpus is not None:
                os.sched_setaffinity(0, cpus)

        suite = subprocess.Popen(
            argv + list(options),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec,
        )
        started.append(suite)
        return suite

    before = (tree_state(sub), tree_state(bin_dir))
    yield start, lambda: (tree_state(sub), tree_state(bin_dir)) == before, tmp_path, session
    unfinished = [suite for suite in started if suite.poll() is None]
    for suite in unfinished:  # the test failed before its suite ended: stop it, say nothing more
        suite.kill()
        suite.communicate()
    left = [] if unfinished else tagged(session)
    reap(session)
    assert not left, "processes of the suite left running: %s" % left


def test_grading_in_place_puts_everything_back(machine):
    start, unchanged, tmp_path, _ = machine
    reference = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "runner", "runner.py"))
    suite = start("--runner", reference, "--clause", "S4", "--clause", "S5.2", "--clause", "S7.1")
    output = suite.communicate(timeout=300)[0].decode()
    assert suite.returncode == 0, output
    assert "isolation: shared" in output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["isolation"] == "shared" and report["summary"]["failed"] == 0
    assert unchanged(), "the learner's folders differ after the session"


def test_the_learners_own_runner_in_place_is_graded_and_kept(machine):
    start, unchanged, _, _ = machine
    # Their runner.py prints and exits 0: wrong, so failures; it must still be there afterwards.
    suite = start("--runner", str(SUB_DIR / "runner.py"), "--clause", "S1.3")
    output = suite.communicate(timeout=300)[0].decode()
    assert suite.returncode == 1, output
    assert unchanged()


def test_a_check_played_again_in_place_gets_the_real_paths_again(machine, tmp_path, busy_cpu):
    # A replay needs the real paths its first play still held when its timing was unsettled:
    # the first play lets them go first, or the replay would wait for itself forever.
    start, unchanged, report_folder, _ = machine
    runner = contended_runner(tmp_path, 0)
    # The whole grading on the busy CPU, as the runner: a machine busy for everyone, so the check
    # stays not judged (a runner that made only itself wait would fail its last play).
    suite = start("--runner", str(runner), "-n", "0", *SUCCESS_CHECK, cpus={CONTENDED_CPU})
    output = suite.communicate(timeout=120)[0].decode()
    (check,) = json.loads((report_folder / "r.json").read_text())["tests"]
    assert suite.returncode == 2 and check["plays"] == 3 and "not judged" in check["message"], output
    assert unchanged(), "the learner's folders differ after a check played again"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_session_puts_everything_back_and_says_so(machine, signum):
    start, unchanged, tmp_path, session = machine
    reference = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "runner", "runner.py"))
    suite = start("--runner", reference, "--clause", "S3", "--clause", "S6")
    # Interrupt mid-check: once a runner of this session is running.
    deadline = time.monotonic() + 60
    while not [p for p in tagged(session) if "runner.py" in " ".join(_cmdline(p))]:
        assert time.monotonic() < deadline and suite.poll() is None, "no check started"
        time.sleep(0.05)
    time.sleep(0.5)
    suite.send_signal(signum)
    output = suite.communicate(timeout=60)[0].decode()
    assert suite.returncode == 130, output
    assert unchanged(), "the learner's folders differ after an interrupted session"
    # No report: the checks that never ran would read as a verdict.
    assert output.rstrip().endswith(view.stopped("en")), output
    assert not (tmp_path / "r.json").exists()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupt_lost_where_python_ignores_exceptions_still_stops_the_session():
    # A signal that lands in a fork handler or a finalizer raises a KeyboardInterrupt that Python
    # prints as "ignored"; the session must stop at the end of the check all the same.
    from conformance import plugin, usage

    received = list(usage.stopped_by)  # put back as it was, below
    usage.stopped_by.clear()

    class Finalized:
        def __del__(self):
            usage._stop(signal.SIGTERM, None)

    try:
        Finalized()
        with pytest.raises(KeyboardInterrupt):
            plugin.pytest_runtest_logfinish()
    finally:
        usage.stopped_by[:] = received


def _cmdline(process):
    try:
        return process.cmdline()
    except psutil.Error:
        return []  # it ended between being listed and being read

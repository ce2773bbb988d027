"""Fixtures shared by the project's own tests."""

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

import pytest

from conformance.harness.sandbox import SHARE_VAR
from conformance.plugin import base_interpreter, dealt
from conformance.usage import PYTHON_VAR

# Each test's CPU-seconds, when $PYOPS_TEST_CPU asks (tests/cpu_account.py).
pytest_plugins = ("tests.cpu_account",)

# The venv pytest_configure made for this session's runners, removed when the session ends.
_RUNNER_VENV: List[Path] = []


def pytest_configure(config):
    """The runners under test are run by a plain venv of the interpreter under test, made for the
    session (unless $PYOPS_PYTHON names one), not by its base install: what a machine installed
    there must change neither a runner's verdict nor the cost of each of its thousands of starts
    (a base install's start-up hook that imports a package tripled each runner's start, a third
    of a grading's CPU). xdist's workers inherit the variable; the controller makes the venv."""
    if os.environ.get(PYTHON_VAR) or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    folder = Path(tempfile.mkdtemp(prefix="pyops-tests-python-"))
    folder.chmod(0o755)  # the runners' own uids start it
    subprocess.run([base_interpreter(), "-m", "venv", "--without-pip", str(folder)], check=True)
    _RUNNER_VENV.append(folder)
    os.environ[PYTHON_VAR] = str(folder / "bin" / "python")


def pytest_collection_modifyitems(config, items):
    """Tests marked slow(seconds) first, the slowest first (the rest keep their order), dealt as
    the suite deals its checks (plugin.dealt): under tox's `--dist worksteal` every worker starts
    with the next slowest, so a long test starts at once rather than after every quick one
    collected before it (the self-test, collected last, once made its env's run as long as itself
    plus everything else), and the workers steal the rest from each other as they finish."""
    items.sort(key=lambda item: -_slow_seconds(item))  # a stable sort
    items[:] = dealt(items, int(getattr(config, "workerinput", {}).get("workercount", 0)))


def _slow_seconds(item) -> float:
    marker = item.get_closest_marker("slow")
    return float(marker.args[0]) if marker and marker.args else 0.0


def pytest_unconfigure(config):
    for folder in _RUNNER_VENV:
        shutil.rmtree(str(folder), ignore_errors=True)
        os.environ.pop(PYTHON_VAR, None)


@pytest.fixture
def drop_box(monkeypatch):
    """A folder every user may write to, shared with every runner the test's gradings start: a
    runner under test has a uid of its own, which cannot reach the test's tmp_path (pytest makes
    it private to root), and a root of its own in namespace mode, which holds no folder of the
    machine's but the one the grader is told to share."""
    folder = Path(tempfile.mkdtemp(prefix="pyops-drop-", dir="/run"))
    folder.chmod(0o777)
    monkeypatch.setenv(SHARE_VAR, str(folder))
    yield folder
    shutil.rmtree(str(folder), ignore_errors=True)


@pytest.fixture
def open_tmpdir():
    """An environment whose TMPDIR is a fresh folder of this test's, open to all like /tmp: the
    runners' own uids pass through it, and its path tells this test's gradings from others'."""
    folder = Path(tempfile.mkdtemp(prefix="pyops-tmpdir-", dir="/tmp"))
    folder.chmod(0o755)
    yield dict(os.environ, TMPDIR=str(folder))
    shutil.rmtree(str(folder), ignore_errors=True)


# The CPU busy_cpu keeps busy: the first this process may run on.
BUSY_CPU = min(os.sched_getaffinity(0))


@pytest.fixture
def own_busy_cpu():
    """BUSY_CPU's load for this test alone: tests that load it take turns (under xdist too), so
    one test's hogs never make another's runner later than that test means it to be."""
    path = Path(tempfile.gettempdir()) / ("pyops-tests-busy-cpu-%d.lock" % os.getuid())
    fd = os.open(str(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@pytest.fixture
def busy_cpu(own_busy_cpu):
    """Three processes that keep BUSY_CPU busy: a machine loaded by others than the runner.
    Each in a session of its own: where the kernel shares the CPU between sessions (autogroup), as
    between the runner's and three other users', the runner gets a quarter of it."""
    hogs = [
        subprocess.Popen(
            [sys.executable, "-c", "import os; os.sched_setaffinity(0, {%d})\nwhile True: pass" % BUSY_CPU],
            start_new_session=True,
        )
        for _ in range(3)
    ]
    yield
    for hog in hogs:
        hog.kill()
        hog.wait()

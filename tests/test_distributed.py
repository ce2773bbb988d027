"""`class --broker`: the submissions as Celery tasks on a real Redis, two workers, one killed.

A worker killed mid-grading leaves its submission unacknowledged; Redis hands it to the other
worker once the visibility timeout has run out, and the class comes out the same as graded here.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.grading import REFERENCE, class_command, class_rows
from tests.test_class import write
from tests.zoo.mutants import build, by_name

pytestmark = pytest.mark.classroom
VISIBILITY_S = 90  # how long a killed worker's submission waits before another worker gets it
GRADING_TIMEOUT_S = 80  # must be shorter: a grading that outlasts it would be handed out twice


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def redis_url(tmp_path):
    server = shutil.which("redis-server")
    if server is None:
        message = "redis-server is not installed (Debian: apt-get install redis-server)"
        if os.environ.get("PYOPS_REQUIRE_REDIS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    port = free_port()
    process = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    yield "redis://127.0.0.1:%d/0" % port
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def environment(open_tmpdir):
    # The client and both workers use the short visibility timeout alike.
    return dict(open_tmpdir, PYOPS_CELERY_VISIBILITY_S=str(VISIBILITY_S))


def start_worker(redis_url, environment, log: Path):
    command = [sys.executable, "-m", "conformance", "worker", "--broker", redis_url, "-j", "1"]
    with open(str(log), "w") as output:  # the worker has its own copy of the descriptor
        return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=environment)


def grading_of(worker: subprocess.Popen):
    """The grading a worker is running (its `python -m conformance --runner ...`), if any."""
    for child in psutil.Process(worker.pid).children(recursive=True):
        try:
            if "--runner" in child.cmdline():
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def kill_tree(process: subprocess.Popen) -> None:
    """A machine lost mid-grading: the worker and everything it started, without a word."""
    tree = [psutil.Process(process.pid)] + psutil.Process(process.pid).children(recursive=True)
    for member in tree:
        try:
            member.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    process.wait()


@pytest.mark.slow(150)
def test_two_workers_one_killed_grade_the_class_as_this_machine_does(tmp_path, redis_url, environment):
    subs = tmp_path / "subs"
    write(subs / "alice" / "runner.py", REFERENCE.read_text())
    build(by_name("timeout-sends-sigterm"), subs / "bob")
    write(subs / "carol" / "main.py")
    workers = [start_worker(redis_url, environment, tmp_path / ("worker-%d.log" % n)) for n in (1, 2)]
    try:
        client = subprocess.Popen(
            class_command(
                str(subs), "--out", str(tmp_path / "far"), "--broker", redis_url, "--timeout", str(GRADING_TIMEOUT_S)
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environment,
        )
        victim = None
        deadline = time.monotonic() + 60
        while victim is None and time.monotonic() < deadline:
            victim = next((worker for worker in workers if grading_of(worker)), None)
            time.sleep(0.2)
        assert victim is not None, "no worker started a grading within 60 s:\n" + "".join(
            (tmp_path / ("worker-%d.log" % n)).read_text() for n in (1, 2)
        )
        kill_tree(victim)
        output, _ = client.communicate(timeout=VISIBILITY_S + 3 * GRADING_TIMEOUT_S)
        assert client.returncode == 1, output  # carol has no runner.py: not graded, the rest are
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                worker.wait(timeout=60)
    far = class_rows(tmp_path / "far")
    assert far["alice"]["status"] == far["bob"]["status"] == "graded", output

    here = subprocess.run(
        class_command(str(subs), "--out", str(tmp_path / "here"), "-j", "2"),
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )
    assert here.returncode == 1, here.stdout + here.stderr
    assert far == class_rows(tmp_path / "here")

"""`class --broker`: the submissions as Celery tasks on a real Redis, with a password, and workers.

A worker killed mid-grading leaves its submission unacknowledged; Redis hands it to the other
worker once the visibility timeout has run out, and the class comes out the same as graded here.

The rest attack it as a runner that read the broker's URL could (distributed.py): it knows the
URL, not the class key, and talks to Redis with a plain Celery or Redis client.
"""

import base64
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

from conformance.classroom import distributed, signing
from conformance.lab import config
from conformance.reporting import provenance
from conformance.selftest.zoo import build, by_name
from tests.grading import REFERENCE, class_command, class_rows
from tests.test_class import write

pytestmark = pytest.mark.classroom
VISIBILITY_S = 90  # how long a killed worker's submission waits before another worker gets it
GRADING_TIMEOUT_S = 80  # must be shorter: a grading that outlasts it would be handed out twice
# Where no worker is lost, the broker never has to hand a grading out again: its visibility timeout
# and the grading's own are then long enough never to be what a test measures. A QUICK grading
# (5 s on an idle machine) outlasted 80 s beside the zoo's self-test.
UNHURRIED_VISIBILITY_S = 900
UNHURRIED_TIMEOUT_S = 600
QUICK = "import sys\nsys.exit(3)\n"  # fails every check at once: graded in seconds
FORGED = "forged by a classmate"


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
    password = secrets.token_hex(16)
    # In a file, not in redis-server's command line: no command line on this machine holds it.
    settings = tmp_path / "redis.conf"
    settings.write_text(
        'port %d\nbind 127.0.0.1\nrequirepass %s\nsave ""\nappendonly no\ndir %s\n' % (port, password, tmp_path)
    )
    process = subprocess.Popen([server, str(settings)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    yield "redis://:%s@127.0.0.1:%d/0" % (password, port)
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def environment(open_tmpdir, redis_url):
    # The sender and the workers: the broker's URL and the class key, and the short visibility
    # timeout alike.
    return dict(
        open_tmpdir,
        PYOPS_BROKER_URL=redis_url,
        PYOPS_BROKER_KEY=secrets.token_hex(32),
        PYOPS_CELERY_VISIBILITY_S=str(VISIBILITY_S),
    )


@pytest.fixture
def unhurried(environment):
    """The environment of a class whose workers all live: see UNHURRIED_VISIBILITY_S."""
    return dict(environment, PYOPS_CELERY_VISIBILITY_S=str(UNHURRIED_VISIBILITY_S))


def start_worker(environment, log: Path, *options: str):
    command = [sys.executable, "-m", "conformance", "worker", "-j", "1", *options]
    with open(str(log), "w") as output:  # the worker has its own copy of the descriptor
        return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=environment)


def start_class(subs: Path, out: Path, environment, *options: str):
    command = class_command(str(subs), "--out", str(out), "--broker", *options)
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment)


def wait_ready(worker: subprocess.Popen, log: Path) -> None:
    """Until the worker listens (Celery logs `ready.`): what is broadcast before, no one hears."""
    deadline = time.monotonic() + 60
    while "ready." not in log.read_text():
        assert worker.poll() is None and time.monotonic() < deadline, "the worker did not start:\n" + log.read_text()
        time.sleep(0.2)


def stop(worker: subprocess.Popen) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)


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
    workers = [start_worker(environment, tmp_path / ("worker-%d.log" % n)) for n in (1, 2)]
    try:
        client = start_class(subs, tmp_path / "far", environment, "--timeout", str(GRADING_TIMEOUT_S))
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
            stop(worker)
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


# ---- a runner that read the broker's URL -------------------------------------------------------


def attacker(redis_url):
    """A plain Celery client with the broker's URL (and the result backend there), not the key."""
    from celery import Celery

    return Celery("attacker", broker=redis_url, backend=redis_url)


def queued(redis_url):
    """The tasks waiting in Redis, as the attacker reads them: (task id, its arguments)."""
    import redis

    tasks = []
    for raw in redis.Redis.from_url(redis_url).lrange("celery", 0, -1):
        message = json.loads(raw)
        args = json.loads(base64.b64decode(message["body"]))[0]
        tasks.append((message["headers"]["id"], args))
    return tasks


def forge(redis_url, task_id, args) -> None:
    """Results made up for a task: where Celery's result backend keeps them, and where this
    version's workers send theirs, unsigned and signed with another key."""
    import redis

    outcome = {"status": "error", "message": FORGED, "report": None, "output": "", "seconds": 0}
    outcome["suite"] = provenance.suite_fingerprint()  # the public source is all it takes
    attacker(redis_url).backend.store_result(task_id, outcome, "SUCCESS")
    try:
        batch = json.loads(json.loads(args[0])["text"])["batch"]
    except (ValueError, KeyError, TypeError):
        return  # not this version's task: no list of results to write into
    result = {"id": task_id, "batch": batch, "outcome": outcome}
    results = distributed.KEYS % (batch, "results")
    client = redis.Redis.from_url(redis_url)
    client.rpush(results, json.dumps({"text": json.dumps(result), "hmac": "0" * 64}))
    client.rpush(results, signing.seal(secrets.token_hex(32).encode(), signing.RESULT, result))


@pytest.mark.slow(40)
def test_a_forged_result_is_refused_and_the_real_one_stored(tmp_path, redis_url, unhurried):
    subs = tmp_path / "subs"
    write(subs / "alice" / "runner.py", QUICK)
    client = start_class(subs, tmp_path / "out", unhurried, "--timeout", str(UNHURRIED_TIMEOUT_S))
    worker = None
    try:
        deadline = time.monotonic() + 30
        while not queued(redis_url):
            assert client.poll() is None and time.monotonic() < deadline, "no task was queued"
            time.sleep(0.1)
        ((task_id, args),) = queued(redis_url)
        forge(redis_url, task_id, args)  # before any worker has started: the forgeries come first
        worker = start_worker(unhurried, tmp_path / "worker.log")
        output, _ = client.communicate(timeout=2 * UNHURRIED_TIMEOUT_S)
    finally:
        client.kill()
        if worker is not None:
            stop(worker)
    assert client.returncode == 0, output
    alice = class_rows(tmp_path / "out")["alice"]
    assert alice["status"] == "graded" and alice["score"] == "0", (alice, output)
    assert FORGED not in (tmp_path / "out" / "grades.csv").read_text()
    assert "2 result(s) refused" in output


@pytest.mark.slow(40)
def test_a_worker_runs_nothing_a_task_names_without_the_key_or_beyond_its_own_allowlist(tmp_path, redis_url, unhurried):
    # The "interpreter" leaves a file wherever it runs, whoever runs it: the proof it ran.
    shared = Path(unhurried["TMPDIR"])
    evidence = shared / "evidence"
    evidence.mkdir()
    evidence.chmod(0o777)
    interpreter = shared / "interpreter"
    interpreter.write_text('#!/bin/sh\ntouch %s/ran-$(id -u)\nexec python3 "$@"\n' % evidence)
    interpreter.chmod(0o755)
    settings = {
        "config_text": config.DEFAULT_FILE.read_text(),
        "python": str(interpreter),
        "lang": "en",
        "workers": 1,
        "timeout_s": UNHURRIED_TIMEOUT_S,
    }
    runner = base64.b64encode(QUICK.encode()).decode()
    log = tmp_path / "worker.log"
    worker = start_worker(unhurried, log)
    try:
        wait_ready(worker, log)
        app = attacker(redis_url)
        unsigned = app.send_task(distributed.TASK, args=[runner, settings]).id  # the tasks of the version before
        task_id = str(uuid.uuid4())
        task = {"id": task_id, "batch": "a class", "runner": runner, "settings": settings}
        wrong_key = signing.seal(secrets.token_hex(32).encode(), signing.TASK, task)
        signed_wrongly = app.send_task(distributed.TASK, args=[wrong_key], task_id=task_id).id
        # The class key, and an interpreter this worker was not started with: a class sent with
        # it. One grading at a time, in the order sent: by its end, the two above are done with.
        subs = tmp_path / "subs"
        write(subs / "alice" / "runner.py", QUICK)
        client = start_class(
            subs, tmp_path / "out", unhurried, "--timeout", str(UNHURRIED_TIMEOUT_S), "--python", str(interpreter)
        )
        output, _ = client.communicate(timeout=2 * UNHURRIED_TIMEOUT_S)
    finally:
        stop(worker)
    alice = class_rows(tmp_path / "out")["alice"]
    assert alice["status"] == "error" and "--python %s is not allowed here" % interpreter in alice["message"], output
    worked = log.read_text()
    assert "refused task %s" % unsigned in worked and "refused task %s" % signed_wrongly in worked, worked
    assert sorted(evidence.iterdir()) == []


@pytest.mark.slow(20)
def test_a_remote_control_shutdown_does_not_stop_a_worker(tmp_path, redis_url, environment):
    log = tmp_path / "worker.log"
    worker = start_worker(environment, log)
    try:
        wait_ready(worker, log)
        app = attacker(redis_url)
        app.control.broadcast("shutdown")
        app.control.shutdown()
        assert app.control.ping(timeout=2) == []  # nothing answers remote control
        with pytest.raises(subprocess.TimeoutExpired):
            worker.wait(timeout=5)
    finally:
        stop(worker)


@pytest.mark.slow(40)
def test_no_command_line_holds_the_broker_password_or_the_class_key(tmp_path, redis_url, unhurried):
    secret = [urlsplit(redis_url).password.encode(), unhurried["PYOPS_BROKER_KEY"].encode()]
    subs = tmp_path / "subs"
    for student in ("alice", "bob"):
        write(subs / student / "runner.py", QUICK)
    log = tmp_path / "worker.log"
    worker = start_worker(unhurried, log)
    try:
        wait_ready(worker, log)
        client = start_class(subs, tmp_path / "out", unhurried, "--timeout", str(UNHURRIED_TIMEOUT_S))
        seen, scans, deadline = [], 0, time.monotonic() + 3 * UNHURRIED_TIMEOUT_S
        while client.poll() is None and time.monotonic() < deadline:  # every process, while the class runs
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    line = cmdline.read_bytes()
                except OSError:
                    continue  # ended meanwhile
                seen += ["%s: %r" % (cmdline, line) for value in secret if value in line]
            scans += 1
            time.sleep(0.2)
        client.kill()  # if it has not ended by the deadline: a failure below
        output, _ = client.communicate(timeout=60)
    finally:
        stop(worker)
    assert client.returncode == 0, output
    assert scans > 10 and seen == []
    assert not any(value.decode() in output + log.read_text() for value in secret)


@pytest.mark.slow(60)
def test_a_class_no_worker_answers_ends_within_its_bound(tmp_path, redis_url, environment, monkeypatch):
    visibility_s, timeout_s = 3, 1
    monkeypatch.setenv("PYOPS_CELERY_VISIBILITY_S", str(visibility_s))
    bound = distributed.patience_s(timeout_s)
    subs = tmp_path / "subs"
    for student in ("alice", "bob"):
        write(subs / student / "runner.py", QUICK)
    started = time.monotonic()
    done = subprocess.run(
        class_command(str(subs), "--out", str(tmp_path / "out"), "--broker", "--timeout", str(timeout_s)),
        capture_output=True,
        text=True,
        timeout=bound + 60,
        env=dict(environment, PYOPS_CELERY_VISIBILITY_S=str(visibility_s)),
    )
    took = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr
    # It waited one patience and gave up, not two: the rest is its start, the similarity pass and
    # the reports, which a machine busy with other tests stretched from a few seconds to 23 (CI,
    # with the zoo's self-test beside it), so the margin is a whole patience, not 20 s.
    assert bound <= took < 2 * bound, "took %.1f s for a patience of %.1f s" % (took, bound)
    for row in class_rows(tmp_path / "out").values():
        assert row["status"] == "error" and row["message"].startswith("no worker answered"), row

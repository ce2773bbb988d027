"""The grader survives hostile runners: a verdict for each, in bounded time, nothing left behind.

Each runner here is wrong on purpose, in a way that attacks the grader rather than the lab:
it hangs, floods, forks, escapes its session, corrupts files or kills its parent. For every
one the suite must exit 1 with failures named by clause, with no harness error, and leave no
process of the session running.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import site
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import List

import pytest

import conformance
from conformance.harness import identity, memory, sandbox
from conformance.harness.processes import SESSION_VAR, TOKEN_VAR, of_session, tagged
from conformance.selftest.zoo import MUTANTS, build
from tests.grading import REFERENCE, grade

pytestmark = pytest.mark.hostile

# Code run first, then the reference runner, so only the hostile act makes the runner wrong.
THEN_REFERENCE = "THEN_REFERENCE"
HOSTILE = {
    "empty": "",
    "syntax-error": "def broken(:\n",
    "shell-script": "#!/bin/sh\necho 'I am not Python'\nexit 0\n",
    "exits-at-once": "raise SystemExit(0)\n",
    "hangs-ignoring-sigterm": "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n"
    "    time.sleep(1)\n",
    "setsid-child-lives-on": "import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\n"
    "    os._exit(0)\nsys.exit(1)\n",
    "starts-300-processes": "import subprocess, sys\nfor _ in range(300):\n"
    "    subprocess.Popen(['sleep', '600'])\nsys.exit(1)\n",
    "floods-stdout": "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(50):\n    sys.stdout.buffer.write(chunk)\n"
    "sys.exit(1)\n",
    "floods-stderr": "import sys\nchunk = b'e' * (1 << 20)\nfor _ in range(50):\n    sys.stderr.buffer.write(chunk)\n"
    "sys.exit(1)\n",
    "corrupts-runs-jsonl": "with open('/root/pyops/sub/runs.jsonl', 'ab') as f:\n"
    "    f.write(b'not json\\n\\xff\\xfe\\x00 not utf-8\\n' + b'{\"x\": \"' + b'y' * (3 << 20) + b'\"}\\n')\n"
    + THEN_REFERENCE,
    "deletes-state": "import shutil\nshutil.rmtree('/root/pyops/sub/state', ignore_errors=True)\nraise SystemExit(1)\n",
    "makes-sub-read-only": "import os\nfor path in ('/root/pyops/sub/state', '/root/pyops/sub'):\n"
    "    os.chmod(path, 0o555)\nraise SystemExit(1)\n",
    "kills-its-parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + THEN_REFERENCE,
    "closes-stdout": "import os\nos.close(1)\n" + THEN_REFERENCE,
}
# Which step's checks must fail when the hostile act is the runner's only fault.
MUST_FAIL_STEP = {"corrupts-runs-jsonl": "S7", "kills-its-parent": "S1", "closes-stdout": "S1"}
# Core profile with the default workers; more than this is a grader that hangs. A runner that
# hangs is killed after its check's deadline plus its CPU wait (at most twice the deadline), and
# each worker's first basic call hangs once before the rest are blocked: 69 s was measured under
# tox's load, where a grader that let every check hang would take many minutes.
BOUND_S = {"hangs-ignoring-sigterm": 90}
DEFAULT_BOUND_S = 120


def write_runner(tmp_path, name):
    source = HOSTILE[name]
    if source.endswith(THEN_REFERENCE):
        source = source[: -len(THEN_REFERENCE)] + REFERENCE.read_text()
    path = tmp_path / ("%s.py" % name)
    path.write_text(source)
    return path


def writable_by_all(path: Path) -> Path:
    """A new empty file every runner (each a uid of its own) may append to."""
    path.touch()
    path.chmod(0o666)
    return path


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_runner_gets_a_verdict(tmp_path, name, monkeypatch):
    session = "hostile-%s" % uuid.uuid4().hex[:8]
    monkeypatch.setenv(SESSION_VAR, session)
    started = time.monotonic()
    graded = grade(tmp_path, write_runner(tmp_path, name), workers=8)
    took = time.monotonic() - started
    assert graded.rc == 1, graded.explain()
    assert "INTERNALERROR" not in graded.stdout + graded.stderr, graded.explain()
    assert "Traceback" not in graded.stderr, graded.explain()
    summary = graded.report["summary"]
    assert summary["errors"] == 0 and summary["failed"] > 0, graded.explain()
    assert all(t["clause"] and t["message"].startswith("[") for t in graded.failed()), graded.explain()
    step = MUST_FAIL_STEP.get(name)
    if step:
        assert any(t["clause"].startswith(step + ".") for t in graded.failed()), graded.explain()
    assert took <= BOUND_S.get(name, DEFAULT_BOUND_S), "took %.0fs" % took
    left = tagged(session)
    assert not left, "left running: %s" % [p.cmdline() for p in left]


def test_a_hanging_runner_is_reported_as_blocked(tmp_path):
    graded = grade(tmp_path, write_runner(tmp_path, "hangs-ignoring-sigterm"), workers=8)
    failed = graded.failed()
    blocked = [test for test in failed if test.get("blocked_by") in ("S1.3", "S4.2")]
    assert len(blocked) >= len(failed) - 16, graded.explain()  # all but the first calls of each worker


def test_the_runner_sees_only_the_allowlisted_environment(tmp_path, monkeypatch, drop_box):
    monkeypatch.setenv("PYOPS_SECRET_OF_THE_GRADER", "must-not-leak")
    dump = writable_by_all(drop_box / "environ.txt")  # every check's runner appends to it
    runner = tmp_path / "env_runner.py"
    runner.write_text(
        "import os\nwith open(%r, 'a') as f:\n    f.write(' '.join(sorted(os.environ)) + '\\n')\n" % str(dump)
        + REFERENCE.read_text()
    )
    graded = grade(tmp_path, runner, "--clause", "S4.4", "--clause", "S1.3")
    assert graded.rc == 0, graded.explain()
    seen = set(" ".join(dump.read_text().split("\n")).split())
    allowed = {"PATH", "HOME", "LANG", "TZ", "TMPDIR", "FLAKY_STATE", TOKEN_VAR}
    allowed |= {"APPLY_FAIL", "APPLY_FAIL_CODE", "APPLY_DELAY"}  # set by the S4.4 checks themselves
    # What the interpreter itself adds at start-up is not from the grader.
    assert seen - allowed <= {"LC_CTYPE"}, sorted(seen - allowed)
    assert "PYOPS_SECRET_OF_THE_GRADER" not in os.environ or "PYOPS_SECRET_OF_THE_GRADER" not in seen


# ------------------------------------------------------------------ runners that attack the grader
# Each was measured to win before runners got a user of their own: full marks without writing the
# lab, a killed grader, rewritten reports. Now each must end in exit 1 with a report.


def graded_reference() -> Path:
    """The reference as a grading sees it (the installed package), found the way the suite finds it:
    this test's own process may import the checkout's copy instead (tox runs it from the checkout).
    A copy elsewhere that other users may read is the machine's to protect (README, Isolation)."""
    found = subprocess.run(
        [sys.executable, "-c", "import runner.runner as r; print(r.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    return Path(found.stdout.strip()).resolve()


def graded_correct_runners() -> List[str]:
    """The reference and the correct runners of other styles that ship beside it (runner/styles)."""
    reference = graded_reference()
    return [str(reference)] + [str(path) for path in sorted((reference.parent / "styles").glob("*_runner.py"))]


ATTACKS = {
    # Runs whichever correct runner of the installed package it can read.
    "runs-the-reference-by-path": "import runpy, sys\nfor path in %r:\n    try:\n"
    "        sys.argv[0] = path\n        runpy.run_path(path, run_name='__main__')\n"
    "    except (OSError, ImportError):\n        continue\nsys.exit(1)\n" % (graded_correct_runners(),),
    # Puts the suite's own packages on its path and imports the reference from there.
    "imports-the-reference": "import sys\nsys.path[:0] = %r\ntry:\n    from runner.runner import main\n"
    "except ImportError:\n    sys.exit(1)\nsys.exit(main(sys.argv[1:]))\n"
    % (site.getsitepackages() + [str(graded_reference().parents[1])],),
    # As root this would kill every process of the machine, so it refuses to run as root.
    "kills-every-process-it-may": "import os, signal, sys\nif os.getuid() == 0:\n    sys.exit(3)\n"
    "os.kill(-1, signal.SIGKILL)\nsys.exit(1)\n",
    # Tries to change the suite itself.
    "rewrites-the-suite": "import sys\ntry:\n    open(%r, 'a').write('\\nraise SystemExit(0)\\n')\n"
    "except OSError:\n    pass\nsys.exit(1)\n" % (conformance.__file__,),
}


def suite_files_digest():
    digest = hashlib.sha256()
    for path in sorted(Path(conformance.__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_runner_cannot_win_by_attacking_the_grader(tmp_path, name):
    runner = tmp_path / "runner.py"
    runner.write_text(ATTACKS[name])
    before = suite_files_digest()
    graded = grade(tmp_path, runner, "--clause", "S1", "--clause", "S4.2", workers=4)
    assert graded.rc == 1, graded.explain()
    assert graded.report["runner_user"] == identity.OWN, graded.explain()
    assert graded.report["summary"]["errors"] == 0, graded.explain()
    assert graded.report["summary"]["passed"] < 3, graded.explain()  # the odd check that wants a failure
    assert suite_files_digest() == before


def test_a_daemon_that_empties_its_environment_does_not_outlive_the_grading(tmp_path, drop_box):
    # Out of the token tracking (no environment at all), it waits for the grading to end, then
    # writes. Every process of the check's uid is killed when the check ends, so it never does.
    late, pid_file = drop_box / "written-after-the-grading", drop_box / "daemon.pid"
    daemon = (
        "import os, time\nopen(%r, 'a').write('%%d\\n' %% os.getpid())\ntime.sleep(6)\nopen(%r, 'w').write('here')\n"
        % (
            str(pid_file),
            str(late),
        )
    )
    pid_file.touch()
    pid_file.chmod(0o666)
    runner = tmp_path / "runner.py"
    # The runner ends only once its daemon has written its pid: the check must end while the
    # daemon is alive, or there is nothing to prove.
    runner.write_text(
        "import os, sys, time\npid = os.fork()\nif pid == 0:\n    os.setsid()\n"
        "    os.execve(sys.executable, [sys.executable, '-c', %r], {})\n"
        "deadline = time.time() + 20\n"
        "while str(pid) not in open(%r).read().split() and time.time() < deadline:\n"
        "    time.sleep(0.02)\nsys.exit(1)\n" % (daemon, str(pid_file))
    )
    graded = grade(tmp_path, runner, "--clause", "S1.3", workers=2)
    assert graded.rc == 1, graded.explain()
    daemons = [int(line) for line in pid_file.read_text().split()]
    assert daemons, "the runner never started its daemon"
    alive = [pid for pid in daemons if _owned_by_a_runner_uid(str(pid))]
    assert not alive, "daemons of the runner still running after the grading: %s" % alive
    time.sleep(7)
    assert not late.exists(), "a process of the runner lived on after the grading and wrote %s" % late


def _owned_by_a_runner_uid(pid):
    """Alive and of a runner uid. A killed orphan stays a zombie until init reaps it, which some
    inits do only every second or two: dead already, it can do nothing, so it does not count."""
    try:
        with open("/proc/%s/status" % pid) as handle:
            fields = dict(line.split(":", 1) for line in handle if ":" in line)
        uid = int(fields["Uid"].split()[1])
    except (OSError, KeyError, ValueError, IndexError):
        return False
    if fields.get("State", "").strip().startswith("Z"):
        return False
    return identity.UID_BASE <= uid < identity.UID_BASE + identity.UID_COUNT


def test_runners_run_by_an_interpreter_that_cannot_import_the_suite(tmp_path):
    graded = grade(tmp_path, REFERENCE, "--clause", "S1.3", workers=2)
    assert graded.rc == 0, graded.explain()
    python = graded.report["python"]
    assert python != sys.executable
    # As the runner sees it: its own small environment, in a folder of the lab's.
    done = subprocess.run([python, "-c", "import conformance"], capture_output=True, env={}, cwd=str(tmp_path))
    assert done.returncode != 0, "%s imports the suite" % python


def test_the_grader_never_runs_the_runner_file_itself(tmp_path):
    # Graded from the folder that holds runner.py, as a learner does: `python -m` and xdist's
    # workers put that folder first on the grader's own sys.path, where `import runner` finds it.
    ran_inside = tmp_path / "ran-inside-the-grader"
    runner = tmp_path / "runner.py"
    runner.write_text(
        "if __name__ != '__main__':\n    open(%r, 'a').write('imported')\n" % str(ran_inside) + REFERENCE.read_text()
    )
    graded = grade(tmp_path, runner, "--clause", "S1.3", "--clause", "S3.2", workers=2)
    assert not ran_inside.exists(), "the grader imported the runner under test, as root"
    assert graded.rc == 0, graded.explain()


# ------------------------------------------------------------------ what a runner leaves in its lab
# The grader reads, hands over and removes a lab as root: a runner that has read the suite leaves
# links to what only root may read, FIFOs that block a reader, links to folders elsewhere and
# trees too deep to recurse into. Measured before labfiles.py: the secret quoted in every failure
# message, the folders' modes changed to 0755 by the removal, a hung grading for the FIFO.
LEAVES_TRAPS = """import os
sub = '/root/pyops/sub'
def swap(name, make):
    path = os.path.join(sub, name)
    try:
        os.unlink(path)
    except OSError:
        pass
    try:
        make(path)
    except OSError:
        pass
swap('runs.jsonl', lambda path: os.symlink(%(secret)r, path))
swap('applied.log', lambda path: os.mkfifo(path))
swap('state/lock', lambda path: os.symlink(%(secret)r, path))
swap('to-private', lambda path: os.symlink(%(private)r, path))
swap('to-shared', lambda path: os.symlink(%(shared)r, path))
swap('to-proc', lambda path: os.symlink('/proc/1', path))
if not os.path.lexists(os.path.join(sub, 'deep')):
    fd = os.open(sub, os.O_RDONLY)
    os.mkdir('deep', dir_fd=fd)
    for _ in range(3000):
        child = os.open('deep' if _ == 0 else 'd', os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
        os.mkdir('d', dir_fd=fd)
    os.close(fd)
"""


def test_links_fifos_and_deep_trees_in_a_lab_are_never_followed(tmp_path, monkeypatch):
    session = "hostile-%s" % uuid.uuid4().hex[:8]
    monkeypatch.setenv(SESSION_VAR, session)
    private = tmp_path / "private"  # pytest's tmp_path: root's alone, as a secret on a grading host is
    private.mkdir(mode=0o700)
    secret = private / "secret"
    secret.write_text("TOP-SECRET-OF-THE-HOST\n")
    secret.chmod(0o600)
    shared = Path(tempfile.mkdtemp(prefix="pyops-sticky-", dir="/tmp"))
    shared.chmod(0o1777)
    try:
        before = {path: os.lstat(str(path)).st_mode for path in (private, secret, shared)}
        runner = tmp_path / "runner.py"
        traps = LEAVES_TRAPS % {"secret": str(secret), "private": str(private), "shared": str(shared)}
        runner.write_text(traps + REFERENCE.read_text())
        started = time.monotonic()
        graded = grade(tmp_path, runner, workers=4)
        took = time.monotonic() - started
        assert {path: os.lstat(str(path)).st_mode for path in before} == before, "the grading changed modes outside"
    finally:
        shutil.rmtree(str(shared), ignore_errors=True)
    assert graded.rc == 1, graded.explain()
    assert graded.report["summary"]["errors"] == 0, graded.explain()
    assert "TOP-SECRET" not in graded.stdout + graded.stderr + (tmp_path / "report.json").read_text()
    failed = {t["clause"] for t in graded.failed()}
    assert {"S7.1", "S5.1"} <= failed, graded.explain()
    messages = "\n".join(t["message"] for t in graded.failed())
    assert "runs.jsonl is a symbolic link, not read" in messages and "FIFO" in messages, graded.explain()
    assert took <= DEFAULT_BOUND_S, "took %.0fs" % took
    assert not sandbox.labs_of(session), "labs left: %s" % sandbox.labs_of(session)


# The checks' commands append to a counter of calls, which the grader reads where the kernel gives
# it no witness. A runner reads the counter's path in its command and, on its way out, tries to
# leave a FIFO there: measured when the counter sat in the runner's own work folder, the grader's
# read blocked for ever. The counter's folder is the grader's now: the swap fails, the calls are
# counted, and the runner (the reference otherwise) passes.
SWAPS_THE_COUNTER = """import atexit, os, re, sys
def swap_counters():
    for arg in sys.argv:
        for path in re.findall(r'>> "([^"]+)"', arg):
            try:
                os.unlink(path)
            except OSError:
                pass
            try:
                os.mkfifo(path)
            except OSError:
                pass
atexit.register(swap_counters)
"""


def test_a_runner_cannot_swap_the_counter_of_calls_for_a_fifo(tmp_path):
    runner = tmp_path / "runner.py"
    runner.write_text(SWAPS_THE_COUNTER + REFERENCE.read_text())
    started = time.monotonic()
    graded = grade(tmp_path, runner, "--clause", "S3.1", workers=2)
    took = time.monotonic() - started
    assert graded.rc == 0 and graded.report["summary"]["failed"] == 0, graded.explain()
    assert took <= DEFAULT_BOUND_S, "took %.0fs" % took


# A runner that passes SIGKILL on instead of SIGTERM plants, where the trapped command would write that it got
# TERM, a link to a file that exists everywhere: followed, it reads as "the command got SIGTERM".
FAKES_GOT_TERM = """import os, re, sys
for word in sys.argv:
    for planted in re.findall(r"'([^']*/got-term)'", word):
        try:
            os.symlink("/etc/passwd", planted)
        except OSError:
            pass
"""


def test_a_link_where_the_trapped_command_writes_is_not_its_handler_having_run(tmp_path):
    mutant = next(mutant for mutant in MUTANTS if mutant.name == "forwards-sigkill")
    runner = tmp_path / "runner.py"
    runner.write_text(FAKES_GOT_TERM + build(mutant, tmp_path / "mutant").read_text())
    graded = grade(tmp_path, runner, "--clause", "S6.1", workers=2)
    assert graded.report["clauses"]["S6.1"]["verdict"] == "failed", graded.explain()
    assert all(test["outcome"] == "failed" for test in graded.report["tests"] if test["clause"] == "S6.1"), (
        graded.explain()
    )


# A runner finds the report's path in the grader's argv, writes a forged report there, and makes a
# folder at the grader's predictable temporary name so that the real one cannot be written.
FORGES_THE_REPORT = """import json, os
for pid in os.listdir('/proc'):
    try:
        argv = open('/proc/%s/cmdline' % pid, 'rb').read().split(b'\\0')
    except OSError:
        continue
    if b'--json' not in argv:
        continue
    path = argv[len(argv) - 1 - argv[::-1].index(b'--json') + 1].decode()  # the last one counts
    if not os.path.isabs(path):
        continue
    folder, name = os.path.split(path)
    for grader in os.listdir('/proc'):
        if grader.isdigit():
            try:
                os.mkdir(os.path.join(folder, '.%s.tmp-%s' % (name, grader)))
            except OSError:
                pass
    try:
        with open(path, 'w') as forged:
            json.dump({'summary': {'passed': 162, 'failed': 0, 'errors': 0}, 'forged': True}, forged)
    except OSError:
        pass
"""


def test_a_runner_cannot_forge_or_block_the_report(tmp_path, drop_box):
    runner = tmp_path / "runner.py"
    runner.write_text(FORGES_THE_REPORT + "raise SystemExit(1)\n")
    target = drop_box / "report.json"
    grade(tmp_path, runner, "--clause", "S1.3", "--json", str(target), workers=2)
    written = json.loads(target.read_text())
    assert "forged" not in written and written["summary"]["failed"] > 0, written.get("summary")
    assert os.stat(str(target)).st_uid == 0 and not os.path.islink(str(target))


# Class grading's broker listens on loopback; in namespace mode a runner has no network at all.
REACHES_LOOPBACK = """import socket
try:
    socket.create_connection(('127.0.0.1', %d), timeout=2).sendall(b'reached')
except OSError:
    pass
"""


def test_a_runner_reaches_no_service_of_the_machine(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    reached = []

    def accept_all():
        while listener.fileno() >= 0:
            try:
                reached.append(listener.accept()[0].recv(16))
            except OSError:
                if listener.fileno() < 0:
                    return

    thread = threading.Thread(target=accept_all, daemon=True)
    thread.start()
    runner = tmp_path / "runner.py"
    runner.write_text(REACHES_LOOPBACK % listener.getsockname()[1] + REFERENCE.read_text())
    try:
        graded = grade(tmp_path, runner, "--clause", "S1.3", workers=2)
    finally:
        listener.close()
        thread.join(5)
    assert graded.rc == 0 and graded.report["isolation"] == "namespace", graded.explain()
    assert reached == [], "a runner connected to 127.0.0.1: %s" % reached


# Looks for other labs (a classmate's runner.py, during a class on one host) and leaves files in
# the machine's temporary folders, which would outlive the grading and hold memory in /dev/shm.
LOOKS_AROUND = """import os
seen = []
for folder in ('/tmp', '/var/tmp', '/dev/shm'):
    try:
        seen += [os.path.join(folder, name) for name in os.listdir(folder)]
    except OSError:
        pass
    try:
        with open(os.path.join(folder, 'left-by-a-runner-%%d' %% os.getpid()), 'wb') as left:
            left.write(b'x' * 4096)
    except OSError:
        pass
with open(%r, 'a') as report:
    report.write(repr((os.environ.get('TMPDIR', ''), seen)) + '\\n')
"""


def test_a_runner_sees_no_other_lab_and_leaves_nothing_in_temporary_folders(tmp_path, drop_box):
    seen_file = writable_by_all(drop_box / "seen")
    other_lab = Path(tempfile.mkdtemp(prefix="pyops-lab-someone-else-", dir="/dev/shm"))
    other_lab.chmod(0o755)
    try:
        runner = tmp_path / "runner.py"
        runner.write_text(LOOKS_AROUND % str(seen_file) + REFERENCE.read_text())
        graded = grade(tmp_path, runner, "--clause", "S1", workers=4)
    finally:
        shutil.rmtree(str(other_lab))
    assert graded.rc == 0, graded.explain()
    calls = [eval(line) for line in seen_file.read_text().splitlines()]  # written by the runner: repr of str lists
    assert len(calls) > 10, calls
    for tmpdir, seen in calls:
        own_lab = tmpdir.split("/work/")[0]
        others = [path for path in seen if "pyops-lab-" in path and not own_lab.startswith(path)]
        assert not others, "a runner saw other labs: %s" % others
    left = [
        os.path.join(folder, name)
        for folder in ("/tmp", "/var/tmp", "/dev/shm")
        for name in os.listdir(folder)
        if name.startswith("left-by-a-runner-")
    ]
    assert not left, "left behind: %s" % left


# Looks through the machine for a correct runner someone left readable (an instructor's
# solution, a clone of this project) and runs it in its place; says what it found in the drop box.
RUNS_A_COPY = """import os, sys, time
found, until = [], time.monotonic() + 3
skip = {'/proc', '/sys', '/dev', '/usr', '/etc', %r}
for folder, subfolders, files in os.walk('/'):
    subfolders[:] = [name for name in subfolders if os.path.join(folder, name) not in skip]
    if os.path.basename(folder).startswith('pyops-copy-') and 'runner.py' in files:
        found.append(os.path.join(folder, 'runner.py'))
    if found or time.monotonic() > until:
        break
with open(%r, 'a') as told:
    told.write(repr(found) + '\\n')
if found:
    os.execv(sys.executable, [sys.executable, found[0]] + sys.argv[1:])
raise SystemExit(1)
"""


def test_a_runner_finds_no_copy_of_a_correct_runner_on_the_machine(tmp_path, drop_box):
    # A correct runner readable by all, where a teacher may keep one: /srv here.
    copy = Path(tempfile.mkdtemp(prefix="pyops-copy-", dir="/srv"))
    copy.chmod(0o755)
    told = writable_by_all(drop_box / "found")
    try:
        shutil.copyfile(str(REFERENCE), str(copy / "runner.py"))
        (copy / "runner.py").chmod(0o644)
        runner = tmp_path / "runner.py"
        runner.write_text(RUNS_A_COPY % (str(drop_box), str(told)))
        graded = grade(tmp_path, runner, "--clause", "S1", workers=4)
    finally:
        shutil.rmtree(str(copy))
    searches = [eval(line) for line in told.read_text().splitlines()]  # written by the runner: repr of str lists
    assert searches, graded.explain()  # it searched (its failed basic call blocks the other checks)
    assert all(found == [] for found in searches), "a runner found a correct runner: %s" % searches
    assert graded.rc == 1 and graded.report["summary"]["passed"] == 0, graded.explain()


# Reads the command line of every process it can see: the grader's says where its report and its
# students' folders are; a classmate's runner's, what it runs.
READS_COMMAND_LINES = """import os
seen = []
for name in os.listdir('/proc'):
    try:
        with open('/proc/%%s/cmdline' %% name, 'rb') as line:
            seen.append(line.read().replace(b'\\0', b' ').decode('utf-8', 'replace'))
    except (OSError, ValueError):
        pass
with open(%r, 'a') as told:
    told.write(repr((os.getppid(), seen)) + '\\n')
"""


def test_a_runner_reads_no_command_line_of_the_grader_or_of_other_runners(tmp_path, drop_box):
    told = writable_by_all(drop_box / "seen")
    runner = tmp_path / "runner.py"
    runner.write_text(READS_COMMAND_LINES % str(told) + REFERENCE.read_text())
    graded = grade(tmp_path, runner, "--clause", "S1", workers=4)
    assert graded.rc == 0, graded.explain()
    calls = [eval(line) for line in told.read_text().splitlines()]  # written by the runner
    assert len(calls) > 10, calls
    for parent, seen in calls:
        assert any("runner.py" in line for line in seen), seen  # it did read /proc: its own is there
        others = [line for line in seen if "conformance" in line or "pytest" in line]
        assert not others, "a runner read the grader's command line: %s" % others
        # A PID namespace of its own, whose first process is the grader's stand-in.
        assert parent == 1, "the runner's parent is pid %d, not its namespace's first process" % parent


# Writes files of 8 MB each (each under the per-file limit) into its lab until it can write no
# more, or 320 MB: without a bound on the lab as a whole, it would fill the machine's memory.
FILLS_ITS_LAB = """import os
written = 0
chunk = b'x' * (1 << 20)
try:
    for number in range(40):
        with open('/root/pyops/sub/fill-%%d' %% number, 'wb') as fill:
            for _ in range(8):
                fill.write(chunk)
                written += len(chunk)
except OSError:
    pass
with open(%r, 'a') as told:
    told.write('%%d\\n' %% written)
raise SystemExit(1)
"""


def test_a_runner_cannot_fill_the_machine_through_its_lab(tmp_path, drop_box, monkeypatch):
    session = "fills-%s" % uuid.uuid4().hex[:8]
    monkeypatch.setenv(SESSION_VAR, session)
    told = writable_by_all(drop_box / "written")
    runner = tmp_path / "runner.py"
    runner.write_text(FILLS_ITS_LAB % str(told))
    graded = grade(tmp_path, runner, "--clause", "S1.3", workers=2)
    written = [int(line) for line in told.read_text().split()]
    assert written, graded.explain()  # it wrote, in every call it got
    assert max(written) <= sandbox.LAB_SIZE, "a runner wrote %d MB into its lab" % (max(written) >> 20)
    assert graded.rc == 1 and graded.report["summary"]["errors"] == 0, graded.explain()
    mounts = Path("/proc/self/mounts").read_text()
    assert session not in mounts and not sandbox.labs_of(session), "a lab of the grading is left"


# Leaves a POSIX message queue where the machine keeps them (/dev/mqueue, the machine's IPC
# namespace): it would outlive the grading, and hold memory.
LEAVES_A_QUEUE = """import os
try:
    with open('/dev/mqueue/left-by-a-runner-%%d' %% os.getpid(), 'w'):
        said = 'made'
except OSError as error:
    said = error.strerror
with open(%r, 'a') as told:
    told.write(said + '\\n')
"""


@pytest.fixture
def machine_queues():
    """/dev/mqueue, mounted for the test where the machine has none (systemd and Docker mount it)."""
    folder = Path("/dev/mqueue")
    made = not os.path.ismount(str(folder))
    if made:
        folder.mkdir(exist_ok=True)
        subprocess.run(["mount", "-t", "mqueue", "mqueue", str(folder)], check=True)
    try:
        yield folder
    finally:
        for name in os.listdir(str(folder)):
            if name.startswith("left-by-a-runner-"):
                os.unlink(str(folder / name))
        if made:
            subprocess.run(["umount", str(folder)], check=True)
            folder.rmdir()


def test_a_runner_leaves_no_message_queue_on_the_machine(tmp_path, drop_box, machine_queues):
    told = writable_by_all(drop_box / "said")
    runner = tmp_path / "runner.py"
    runner.write_text(LEAVES_A_QUEUE % str(told) + REFERENCE.read_text())
    graded = grade(tmp_path, runner, "--clause", "S1.3", workers=2)
    tries = told.read_text().split("\n")[:-1]
    assert tries, graded.explain()  # it tried
    left = [name for name in os.listdir(str(machine_queues)) if name.startswith("left-by-a-runner-")]
    assert not left and "made" not in tries, "a runner left message queues: %s" % left
    assert graded.rc == 0, graded.explain()


FORK_FLOOD = """import os, time
children = 0
try:
    while children < 5000:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError:
    pass
with open(%r, 'a') as told:
    told.write('%%d\\n' %% children)
"""


def test_a_fork_flood_stops_at_the_runner_uid_s_limit_and_the_grading_goes_on(tmp_path, drop_box):
    told = writable_by_all(drop_box / "forked")
    runner = tmp_path / "runner.py"
    runner.write_text(FORK_FLOOD % str(told) + REFERENCE.read_text())
    graded = grade(tmp_path, runner, "--clause", "S1.3", "--clause", "S2.3", workers=2)
    counts = [int(line) for line in told.read_text().split()]
    assert counts and max(counts) < identity.RUNNER_PROCESSES, counts  # each check's runner was stopped there
    assert graded.report["summary"]["errors"] == 0, graded.explain()


# Waits twice each backoff, and keeps the CPUs turning meanwhile (threads that leave the GIL, in
# hashlib), so that its lateness looks like a busy machine's: measured before the rule on a
# runner's own load, every S3.2 check it broke came out "not judged", an error, never failed.
HOGS = """import hashlib, threading
def _hog(data=b'x' * (1 << 20)):
    while True:
        hashlib.sha256(data).digest()
for _ in range(6):
    threading.Thread(target=_hog, daemon=True).start()
"""


def test_a_runner_cannot_excuse_its_lateness_with_load_of_its_own(tmp_path):
    late = REFERENCE.read_text().replace(
        'delay = backoff_delay(args["backoff"], number)', 'delay = 2 * backoff_delay(args["backoff"], number)'
    )
    assert late != REFERENCE.read_text()
    runner = tmp_path / "runner.py"
    runner.write_text(late.replace("\nimport ", "\n" + HOGS + "import ", 1))
    graded = grade(tmp_path, runner, "--clause", "S3.2", workers=2)
    assert graded.report["summary"]["errors"] == 0, graded.explain()
    assert graded.rc == 1 and any(t["clause"] == "S3.2" for t in graded.failed()), graded.explain()


# A grading killed with SIGKILL (an out-of-memory kill, a lost container) can remove nothing: its
# labs' memory file systems stayed mounted in /dev/shm, with what its runners wrote in them, until
# the machine restarted. The next grading on the machine removes them.
def test_the_labs_of_a_killed_grading_are_removed_by_the_next_one(tmp_path):
    session = "killed-%s" % uuid.uuid4().hex[:8]
    runner = tmp_path / "runner.py"
    runner.write_text("import time\ntime.sleep(120)\n")  # a lab in use for as long as the grading lives
    grading = subprocess.Popen(
        [sys.executable, "-m", "conformance", "--runner", str(runner), "-n", "2"],
        cwd=str(tmp_path),
        env=dict(os.environ, **{SESSION_VAR: session}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not sandbox.labs_of(session) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = sandbox.labs_of(session)
        assert left, "the grading made no lab within 60 s"
        # Waiting for the killed grading's owner files from before the kill, so that the test has
        # them the moment the grading is gone: another grading on the machine (the project's tests
        # run several) would otherwise find them free and remove the labs before this test looks.
        owner_files = {lab.parent / (sandbox.OWNER_PREFIX + lab.name.split("-o")[1][:16]) for lab in left}
        held = [os.open(str(path), os.O_RDONLY | os.O_CLOEXEC) for path in sorted(owner_files)]
        takers = [threading.Thread(target=fcntl.flock, args=(fd, fcntl.LOCK_EX)) for fd in held]
        for taker in takers:
            taker.start()
    finally:
        os.killpg(grading.pid, 9)
        grading.wait()
        # What it started in sessions of their own (stand-ins, runners) is killed too, as a lost
        # container would have it: nothing of the grading lives on to hold its labs.
        until = time.monotonic() + 10
        while of_session(session) and time.monotonic() < until:
            for process in of_session(session):
                with contextlib.suppress(Exception):
                    process.kill()
            time.sleep(0.2)
        assert not of_session(session), "the killed grading's processes live on"
    for taker in takers:
        taker.join(10)
    assert all(lab.exists() for lab in left), "the killed grading removed its labs itself"
    for fd in held:
        os.close(fd)  # now free: the next grading finds them abandoned
    graded = grade(tmp_path, REFERENCE, "--clause", "S1.3", workers=0)
    assert graded.rc == 0, graded.explain()
    mounts = Path("/proc/self/mounts").read_text()
    assert not any(lab.exists() for lab in left) and session not in mounts, "labs of the killed grading left"
    owners = {lab.parent / (sandbox.OWNER_PREFIX + lab.name.split("-o")[1][:16]) for lab in left}
    assert not [owner for owner in owners if owner.exists()], "owner files of the killed grading left"


# Makes a user namespace of its own, where it is root, and mounts a tmpfs of 1 GB there: memory in
# no process's RSS, past the bounds of the lab and of the private temporary folders. It says how
# far it got, then writes 64 MB into it when it can.
OWN_TMPFS = """import ctypes, os, tempfile
libc = ctypes.CDLL(None, use_errno=True)
def said():
    return os.strerror(ctypes.get_errno())
folder = tempfile.mkdtemp()
if libc.unshare(0x10000000 | 0x00020000) != 0:
    got = 'unshare: ' + said()
elif libc.mount(b'tmpfs', folder.encode(), b'tmpfs', 0, b'size=1g') != 0:
    got = 'mount: ' + said()
else:
    got = 'mounted'
with open(%r, 'a') as told:
    told.write(got + '\\n')
for number in range(64 if got == 'mounted' else 0):
    with open(os.path.join(folder, 'fill%%d' %% number), 'wb') as fill:
        fill.write(b'x' * (1 << 20))
"""


def test_a_runner_cannot_mount_a_memory_file_system_of_its_own(tmp_path, drop_box):
    told = writable_by_all(drop_box / "got")
    runner = tmp_path / "runner.py"
    runner.write_text(OWN_TMPFS % str(told) + REFERENCE.read_text())
    graded = grade(tmp_path, runner, "--clause", "S1.3", workers=2)
    got = set(told.read_text().split("\n")[:-1])
    assert got == {"unshare: Operation not permitted"}, got
    # Refused, not broken: the reference's own calls (a child, a thread of the C library) still work.
    assert graded.rc == 0, graded.explain()


# Holds more and more memory, 128 MB at a time (pages it writes, so the kernel charges them),
# saying after each step how much it holds: past the check's bound the kernel kills it.
HOLDS_MORE_AND_MORE = """import os
held, pages = 0, []
with open(%r, 'a') as told:
    told.write(open('/proc/self/cgroup').read())
    told.flush()
    while held < (3 << 30):
        pages.append(b'\\x01' * (128 << 20))
        held += 128 << 20
        told.write('%%d\\n' %% held)
        told.flush()
"""


@pytest.mark.skipif(not memory.available()[0], reason="no memory cgroup for a check here: %s" % memory.available()[1])
def test_a_runner_that_holds_more_and_more_memory_is_stopped_at_the_check_s_bound(tmp_path, drop_box):
    told = writable_by_all(drop_box / "held")
    runner = tmp_path / "runner.py"
    runner.write_text(HOLDS_MORE_AND_MORE % str(told) + REFERENCE.read_text())
    graded = grade(tmp_path, runner, "--clause", "S1.3", workers=2)
    lines = told.read_text().splitlines()
    cgroups = [line for line in lines if ":memory:" in line]  # cgroup v1's line (v2: its 0:: line)
    cgroups = cgroups or [line for line in lines if line.startswith("0::")]
    # Each call in its check's cgroup, which its cgroup namespace shows it as its root, unnamed.
    assert cgroups and all(line.endswith(":/") for line in cgroups), cgroups
    held = [int(line) for line in lines if line.isdigit()]
    assert held and max(held) <= memory.CHECK_MEMORY, "a check's runner held %d MB" % (max(held) >> 20)
    # Stopped, not the grading: every check has a verdict (the runner's calls were killed: failed).
    assert graded.rc == 1 and graded.report["summary"]["errors"] == 0, graded.explain()


# Behaves correctly only where it can tell a grading from a learner's machine by what it cheaply
# reads (its uid's account, TMPDIR, environment, folders, mounts, cgroup), and otherwise runs
# every command twice. A grading that looks like a learner's machine makes it lose what its
# double calls break; one it can tell apart would give it full marks.
BEHAVES_ONLY_WHEN_GRADED = Path(__file__).parent / "hostile" / "behaves_only_when_graded.py"


def test_a_runner_cannot_tell_a_grading_by_its_uid_tmpdir_environment_or_mounts(tmp_path, drop_box):
    told = writable_by_all(drop_box / "noticed")
    prefix = BEHAVES_ONLY_WHEN_GRADED.read_text().replace('"SAID_TO"', repr(str(told)), 1)
    runner = tmp_path / "runner.py"
    runner.write_text(prefix + REFERENCE.read_text())
    graded = grade(tmp_path, runner, "--clause", "S1", "--clause", "S3", "--clause", "S4")
    noticed = [eval(line) for line in told.read_text().splitlines()]  # written by the runner: repr of str lists
    assert noticed, graded.explain()
    assert graded.report["isolation"] == "namespace", graded.report["isolation"]
    signs = sorted({sign for seen in noticed for sign in seen})
    assert not signs, "a runner told it was graded (%s): %s" % (graded.report["summary"], signs)
    failed = {test["clause"] for test in graded.failed()}
    assert graded.rc == 1 and graded.report["summary"]["errors"] == 0, graded.explain()
    # An extra apply.sh call and an extra run of each command: what the lab counts.
    assert {"S3.1", "S4.2"} <= failed, sorted(failed)


# Fakes the lab where it believes nobody checks (see the file): the reference with its backoff
# waits skipped and the times forged, apply.sh imitated, or the lock only probed. Each attack must
# fail exactly the clause whose behaviour it lacks, judged on what the grader saw the kernel do.
FAKES_THE_LAB = Path(__file__).parent / "hostile" / "fakes_the_lab.py"
REFERENCE_MAIN = 'if __name__ == "__main__":\n    sys.exit(main())\n'
FAKES = {
    "backoff": ({"backoff"}, {"S3.2"}),
    "apply": ({"apply"}, {"S4.2"}),
    "lock": ({"lock"}, {"S5.1"}),
    "timeout": ({"timeout"}, {"S2.1"}),
    "marker": ({"marker"}, {"S4.3"}),
    # No apply.sh run at all: no lock or marker to judge while it runs.
    "all": ({"backoff", "apply", "lock", "timeout", "marker"}, {"S2.1", "S3.2", "S4.2"}),
}
# Clauses a fake must not pass although no check charges them: where apply.sh never ran, what
# S4.1, S4.3, S4.4 and S5.1 judge of it (and S7.2 of the record of an apply) did not happen, and
# waits on S4.2 (blocked, no points).
UNEARNED = {"apply": {"S4.1", "S4.3", "S4.4", "S5.1"}, "all": {"S4.1", "S4.3", "S4.4", "S5.1", "S7.2"}}
# runs.jsonl graded too where a fake changes what its attempts were: the record of an attempt
# killed early (or of waits skipped) is judged by what the attempt really was, so a truthful record
# of what the fake did is no second charge.
RECORDS_GRADED = {"backoff", "timeout", "all"}
ALL_ATTACKS = 'ATTACKS = {"backoff", "apply", "lock", "timeout", "marker"}'


@pytest.mark.slow(3)
@pytest.mark.parametrize("fake", sorted(FAKES))
def test_a_runner_that_fakes_the_lab_fails_the_clause_it_fakes(tmp_path, fake):
    attacks, clauses = FAKES[fake]
    reference = REFERENCE.read_text()
    assert reference.count(REFERENCE_MAIN) == 1
    suffix = FAKES_THE_LAB.read_text()
    assert ALL_ATTACKS in suffix
    suffix = suffix.replace(ALL_ATTACKS, "ATTACKS = set(%r)" % sorted(attacks), 1)
    runner = tmp_path / "runner.py"
    runner.write_text(reference.replace(REFERENCE_MAIN, suffix))
    clauses_graded = ["S2", "S3", "S4", "S5"] + (["S7"] if fake in RECORDS_GRADED else [])
    graded = grade(tmp_path, runner, *[option for clause in clauses_graded for option in ("--clause", clause)])
    assert graded.report["isolation"] == "namespace", graded.report["isolation"]
    assert graded.rc == 1 and graded.report["summary"]["errors"] == 0, graded.explain()
    charged = {clause for clause, entry in graded.report["clauses"].items() if entry["verdict"] == "failed"}
    assert charged == clauses, graded.explain()
    for clause in sorted(UNEARNED.get(fake, ())):
        entry = graded.report["clauses"][clause]
        assert entry["verdict"] == "blocked" and entry["blocked_by"] == ["S4.2"], (clause, entry)
    # Every other clause graded keeps its points: the fake loses them only where it fakes.
    lost = {clause for clause, entry in graded.report["clauses"].items() if entry["verdict"] != "passed"}
    assert lost == clauses | UNEARNED.get(fake, set()), graded.explain()

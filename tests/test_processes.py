"""The harness's observations of processes: what a process runs, when it started, whether it waits."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

from conformance.harness import identity, sandbox
from conformance.harness.processes import TOKEN_VAR, all_asleep, runs_as, started_at, tagged
from conformance.lab import timing
from conformance.usage import EXIT_INTERRUPTED

FIXTURES = "/opt/fixtures/pyops/bin"


@pytest.fixture
def spawn():
    started = []

    def start(argv):
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


@pytest.mark.parametrize(
    "argv,wanted,matches",
    [
        (["sleep", "60"], ["sleep", "60"], True),
        ([shutil.which("sleep"), "60"], ["sleep", "60"], True),  # resolved by the runner: the same program
        (["sleep", "60"], ["/usr/bin/sleep", "60"], True),
        (["sleep", "61"], ["sleep", "60"], False),
        (["sleep", "60"], ["sleep"], True),  # a prefix of the arguments
        (["sh", "-c", "exec sleep 62"], ["sleep", "62"], True),
        (["sh", "-c", "sleep 63; true"], ["sleep", "63"], False),  # the shell itself is not sleep
    ],
)
def test_runs_as_compares_the_program_by_name_and_the_arguments_exactly(spawn, argv, wanted, matches):
    process = psutil.Process(spawn(argv).pid)
    time.sleep(0.1)  # let `sh -c 'exec ...'` become what it execs
    assert runs_as(process, wanted) is matches


def test_runs_as_sees_a_script_behind_its_interpreter(spawn, tmp_path):
    script = tmp_path / "hang.sh"
    script.write_text("#!/bin/sh\nsleep 60\n")
    script.chmod(0o755)
    process = psutil.Process(spawn([str(script)]).pid)
    time.sleep(0.1)
    assert process.cmdline()[0] != str(script)  # the kernel shows the interpreter first
    assert runs_as(process, [str(script)])
    assert not runs_as(process, [str(tmp_path / "other.sh")])


def test_runs_as_a_process_that_is_gone(spawn):
    child = spawn(["sleep", "60"])
    process = psutil.Process(child.pid)
    child.kill()
    child.wait()
    assert not runs_as(process, ["sleep", "60"])


def test_started_at_is_on_the_harness_clock(spawn):
    before = timing.now()
    process = spawn(["sleep", "5"])
    started = started_at(process.pid)
    after = timing.now()
    # /proc counts in clock ticks, rounding down: at most one tick before the call.
    assert before - 1.0 / timing.CLOCK_TICKS <= started <= after


def test_all_asleep_tells_a_waiting_process_from_a_busy_one(spawn):
    waiting = spawn(["sleep", "5"])
    busy = spawn([sys.executable, "-c", "while True: pass"])
    time.sleep(0.2)
    assert all_asleep(waiting.pid)
    assert not all(all_asleep(busy.pid) for _ in range(20))


def test_all_asleep_looks_at_every_thread(spawn):
    code = "import threading, time\nthreading.Thread(target=lambda: [0 for _ in iter(int, 1)]).start()\ntime.sleep(60)"
    process = spawn([sys.executable, "-c", code])
    time.sleep(0.3)
    # The main thread sleeps, the other one spins: not waiting.
    assert not all(all_asleep(process.pid) for _ in range(20))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as a runner uid")
def test_a_runner_is_tracked_by_its_token_without_cap_sys_ptrace():
    # A container's default capabilities lack CAP_SYS_PTRACE, without which root may not read
    # the environment of another uid's process: the harness reads it with the runner's ids.
    user = identity.RunnerUser(identity.UID_BASE + identity.UID_COUNT - 1, identity.UID_BASE + identity.UID_COUNT - 1)
    token = "test-%d" % os.getpid()
    runner = subprocess.Popen(["sleep", "60"], env={"PATH": "/usr/bin:/bin", TOKEN_VAR: token}, preexec_fn=user.drop)
    probe = "from conformance.harness.processes import tagged; print(len(tagged(%r)))" % token
    caps = "-all," + ",".join("+" + name.lower() for name in identity.CAPABILITIES)  # what the image has
    try:
        counted = subprocess.run(
            ["setpriv", "--inh-caps=" + caps, "--ambient-caps=" + caps, "--bounding-set=" + caps]
            + [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
        )
        with_ptrace = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    finally:
        runner.kill()
        runner.wait()
    assert (counted.stdout.strip(), with_ptrace.stdout.strip()) == ("1", "1"), counted.stderr


def test_a_token_behind_a_large_environment_is_still_found():
    # /proc is read with bare os.read calls (procfs.py): a runner that puts 200 KB of variables
    # before the token must not hide its processes past the end of the first read.
    token = "test-large-%d" % os.getpid()
    filler = {"FILLER_%d" % index: "x" * 1000 for index in range(200)}
    process = subprocess.Popen(["sleep", "60"], env=dict(filler, PATH="/usr/bin:/bin", **{TOKEN_VAR: token}))
    try:
        # Asked until seen, as the grader asks: Popen can return (posix_spawn's vfork, Python
        # 3.13) while the kernel is still making the new program's memory, whose environment
        # reads empty for that instant. A read that stops at its first chunk never finds it.
        deadline = time.monotonic() + 5
        found = [seen.pid for seen in tagged(token)]
        while not found and time.monotonic() < deadline:
            time.sleep(0.01)
            found = [seen.pid for seen in tagged(token)]
    finally:
        process.kill()
        process.wait()
    assert found == [process.pid]


def test_every_grading_on_the_machine_leases_runner_uids_from_one_place(tmp_path):
    # Leases kept per TMPDIR (tox gives each env its own) would let two gradings lease the same
    # uid, and each would sweep (SIGKILL) the other's runners at the end of its checks.
    probe = "from conformance.harness import identity; print(identity.LEASES)"
    places = {
        subprocess.run(
            [sys.executable, "-c", probe], env=dict(os.environ, TMPDIR=str(folder)), capture_output=True, text=True
        ).stdout
        for folder in (tmp_path, tmp_path / "elsewhere")
    }
    assert len(places) == 1, places


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as a runner uid")
def test_a_lease_sweeps_what_a_holder_that_died_left_and_trusts_one_that_ended_clean(tmp_path, monkeypatch):
    monkeypatch.setattr(identity, "LEASES", tmp_path)
    monkeypatch.setattr(identity.os, "urandom", lambda size: (4321).to_bytes(size, "big"))  # the same uid first
    with identity.leased_user() as user:
        lease = tmp_path / str(user.uid)
        assert lease.read_bytes() == identity.HELD, "a holder's lease must say held while it runs"
    assert lease.read_bytes() == identity.CLEAN
    # A leftover, and a lease file as a holder killed mid-check leaves it: the next lease sweeps.
    leftover = subprocess.Popen(["sleep", "60"], preexec_fn=user.drop)
    try:
        lease.write_bytes(identity.HELD)
        with identity.leased_user() as again:
            assert again == user
            assert leftover.wait(timeout=5) == -9, "the leftover of a dead holder was not swept"
    finally:
        if leftover.poll() is None:
            leftover.kill()
            leftover.wait()
    assert lease.read_bytes() == identity.CLEAN


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as a runner uid")
def test_a_uid_another_lease_table_runs_a_runner_as_is_neither_leased_nor_swept(tmp_path, monkeypatch):
    # The host sees a container's processes: a container with the suite installed leases from the
    # same range in a table of its own, which this one cannot see.
    monkeypatch.setattr(identity, "LEASES", tmp_path)
    monkeypatch.setattr(identity.os, "urandom", lambda size: (1234).to_bytes(size, "big"))
    theirs = identity.RunnerUser(identity.UID_BASE + 1234, identity.UID_BASE + 1234)
    their_runner = subprocess.Popen(["sleep", "60"], preexec_fn=theirs.drop)
    try:
        with identity.leased_user() as user:
            assert user != theirs
        assert their_runner.poll() is None, "another table's runner was swept"
    finally:
        their_runner.kill()
        their_runner.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="hands files over to another uid: needs root")
def test_handing_a_lab_over_never_gives_away_a_file_linked_from_elsewhere(tmp_path):
    # A runner may hard-link a system file into its lab (where fs.protected_hardlinks is off; in a
    # system root every program is such a link): the next hand-over must not make it the runner's.
    system_file = tmp_path / "system-file"
    system_file.write_text("root's\n")
    lab = tmp_path / "lab"
    lab.mkdir()
    os.link(str(system_file), str(lab / "linked"))
    (lab / "marker").write_text("the grader's, for the runner\n")
    user = identity.RunnerUser(identity.UID_BASE + identity.UID_COUNT - 1, identity.UID_BASE + identity.UID_COUNT - 1)
    identity.hand_over([lab], user)
    assert system_file.stat().st_uid == 0
    assert (lab / "marker").stat().st_uid == user.uid and lab.stat().st_uid == user.uid


@pytest.fixture
def memory_tmp(tmp_path, monkeypatch):
    """A stand-in for /dev/shm, with no temporary folder named by the environment."""
    for name in sandbox.TMP_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "shm"
    folder.mkdir()
    monkeypatch.setattr(sandbox, "MEMORY_TMP", str(folder))
    return folder


def test_labs_are_made_in_memory_when_it_has_room(memory_tmp):
    assert sandbox.labs_folder(None) == str(memory_tmp)


def test_labs_stay_in_the_temporary_folder_when_memory_is_short(memory_tmp, monkeypatch):
    # A container's default /dev/shm (64 MB) could not hold a check's large outputs.
    monkeypatch.setattr(sandbox, "MEMORY_TMP_ROOM", 1 << 62)  # more than any machine has
    assert sandbox.labs_folder(None) == tempfile.gettempdir()


def test_labs_go_where_the_user_put_temporary_files(memory_tmp, monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert sandbox.labs_folder(None) == tempfile.gettempdir()


def test_no_room_in_a_folder_that_cannot_be_written(tmp_path):
    assert sandbox._room_in(str(tmp_path / "missing")) == 0
    assert sandbox._room_in(str(tmp_path)) > 0


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a file system: needs root")
def test_no_room_where_programs_may_not_run(tmp_path):
    # Docker mounts /dev/shm noexec: the fixtures of a lab made there could not run.
    folder = tmp_path / "noexec"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "noexec,size=4m", "tmpfs", str(folder)], check=True)
    try:
        assert sandbox._room_in(str(folder)) == 0
    finally:
        subprocess.run(["umount", str(folder)], check=True)
    assert sandbox._room_in(str(folder)) > 0


def test_apply_sh_is_recognised_by_its_name_where_its_executable_cannot_be_read(monkeypatch):
    # A container without CAP_SYS_PTRACE may not read another uid's /proc/PID/exe; the process
    # started through apply.sh's #! line is then known by its name, which the kernel takes from
    # the script.
    from conformance.judging.scenarios import runs_apply_sh
    from conformance.lab.commands import APPLY

    def unreadable(self):
        raise psutil.AccessDenied(self.pid)

    shell = subprocess.Popen(["sleep", "30"])  # any live process: what it shows is set below
    try:
        process = psutil.Process(shell.pid)
        monkeypatch.setattr(psutil.Process, "exe", unreadable)
        monkeypatch.setattr(psutil.Process, "cmdline", lambda self: ["/bin/bash", APPLY, "first"])
        for name, recognised in (("bash", True), ("apply.sh", True), ("python3", False)):
            monkeypatch.setattr(psutil.Process, "name", lambda self, name=name: name)
            assert runs_apply_sh(process, "first") is recognised, name  # python3: an imitation
    finally:
        shell.kill()
        shell.wait()


@pytest.mark.parametrize("workers", [1, 4])
def test_a_grading_leaves_nothing_behind_in_the_folder_of_its_labs(tmp_path, open_tmpdir, workers):
    # Its checks run in forks that end with os._exit: an owner file each of them made for itself
    # was never removed (seven after one grading of S8, and the next grading removed none).
    from tests.grading import grade

    graded = grade(tmp_path, None, "--clause", "S8", workers=workers, env=open_tmpdir)
    assert graded.rc == 0, graded.stdout + graded.stderr
    left = sorted(os.listdir(open_tmpdir["TMPDIR"]))
    assert left == [], left


@pytest.mark.skipif(os.geteuid() != 0, reason="the words for root")
def test_why_no_namespace_is_said_in_one_line_a_grader_can_act_on(monkeypatch):
    said = "[Errno 1] unshare: Operation not permitted"
    monkeypatch.setattr(sandbox.os.path, "exists", lambda path: False)
    assert sandbox.plain_reason(said) == "this process may not make mount namespaces (unshare: Operation not permitted)"
    monkeypatch.setattr(sandbox.os.path, "exists", lambda path: path == "/.dockerenv")
    in_docker = sandbox.plain_reason(said)
    assert "Errno" not in in_docker and "--cap-add SYS_ADMIN --security-opt seccomp=unconfined" in in_docker


def test_a_runner_uid_s_account_keeps_the_machine_s_and_adds_one_named_like_a_learner(tmp_path):
    user = identity.RunnerUser(identity.UID_BASE + 7, identity.UID_BASE + 7)
    account = identity.write_account(user, tmp_path / "etc")
    passwd = (account.folder / "passwd").read_text().splitlines()
    group = (account.folder / "group").read_text().splitlines()
    with open("/etc/passwd") as machine:
        assert passwd[:-1] == machine.read().splitlines()
    name, _, uid, gid, _, home, shell = passwd[-1].split(":")
    assert (name, int(uid), int(gid), home) == (identity.ACCOUNT_NAME, user.uid, user.gid, identity.HOME)
    assert os.path.exists(shell) and group[-1] == "%s:x:%d:" % (identity.ACCOUNT_NAME, user.gid)
    assert "pyops" not in passwd[-1] + group[-1] and "conformance" not in passwd[-1] + group[-1]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("moment", ["probe", "observations"])
def test_a_grading_stopped_as_it_starts_leaves_no_folder_of_its_own(tmp_path, open_tmpdir, signum, moment):
    # A grading killed by a class's timeout, a closed terminal or `docker stop` while it was still
    # setting up (probing for namespaces, before pytest's session began) left its scratch folder,
    # its observations folder and the probe's lab behind in the temporary folder.
    folder = open_tmpdir["TMPDIR"]
    command = [sys.executable, "-m", "conformance", "--reference", "--clause", "S1.1"]
    command += ["--json", str(tmp_path / "r.json")]
    grading = subprocess.Popen(command, env=open_tmpdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wanted = "pyops-%s-" % moment
    deadline = time.monotonic() + 60
    while not any(name.startswith(wanted) for name in os.listdir(folder)):
        assert grading.poll() is None and time.monotonic() < deadline, "never saw %s*" % wanted
        time.sleep(0.001)
    grading.send_signal(signum)
    out, err = grading.communicate(timeout=60)
    assert grading.returncode == EXIT_INTERRUPTED, (grading.returncode, err[-2000:])
    assert b"Traceback" not in err, err[-2000:]
    left = sorted(os.listdir(folder))
    assert left == [], left

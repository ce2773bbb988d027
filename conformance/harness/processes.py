"""Start the runner under test in its lab, track every process it starts, and reap what it leaves
behind. (A check's driver, which runs the runner and judges what it saw, is judging/driver.py.)

The runner is started in a session of its own with its output going to files, never pipes: a
grandchild that keeps a pipe open can then never hang the harness. What the runner starts is
found below its stand-in while that lives, by a unique token in its environment afterwards, and,
where the runner has a uid of its own, as a process of that uid that no other process of the check
accounts for (a command given an environment without the token): a survivor is found wherever it
went, and it is always killed before the test ends.
"""

import os
import resource
import signal
import socket
import struct
import time
import uuid
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import psutil

from conformance.harness import identity, procfs
from conformance.harness.identity import HOME, RunnerUser, kill_until_gone
from conformance.harness.libc import LIBC
from conformance.harness.result import ProcessInfo
from conformance.harness.sandbox import NAMESPACE, SUB_DIR, Lab, mount_own_processes, remove_labs_of
from conformance.harness.syscall_filter import refuse_namespaces_and_mounts
from conformance.lab import timing
from conformance.lab.commands import FLAKY_STATE

# In the runner's environment, and so in every process it starts: under a name a Linux machine
# has anyway (systemd gives each service's processes one), never one that says "graded".
TOKEN_VAR = "INVOCATION_ID"
# Every token starts with the session's id, so one sweep at the end of a session (or after it was
# interrupted) finds whatever any worker's runners left, whichever worker started them.
SESSION_VAR = "PYOPS_CONFORMANCE_SESSION"
RUNNER_PATH = str(SUB_DIR / "runner.py")
# Read at most this much of each output stream: a runner printing 50 MB must not cost the harness
# 50 MB of memory per test; a Result notes that the rest was cut.
OUTPUT_CAP = 4 * 1024 * 1024
# No file a runner (or its command) writes may grow past this (RLIMIT_FSIZE): a flood of output
# fills neither the disk nor the harness's memory.
FILE_CAP = 64 * 1024 * 1024
# A suite started in the background (`&`, nohup) inherits these ignored; the runner must not.
RESET_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM)
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def tagged(token: str) -> List[psutil.Process]:
    """Live processes whose token is `token` or starts with `token.` (zombies are already dead)."""
    return _carrying([TOKEN_VAR], token)


def of_session(session: str) -> List[psutil.Process]:
    """Live processes of session `session` or of one below it: the suite's own processes (its
    workers and the runners' stand-ins, forks of them) as well as the runners they tokened."""
    return _carrying([SESSION_VAR, TOKEN_VAR], session)


def _carrying(names: Sequence[str], value: str) -> List[psutil.Process]:
    """Live processes with a variable of `names` set to `value` or to `value.`-something."""
    found = []
    wanted = [("\0%s=%s%s" % (name, value, end)).encode() for name in names for end in ("\0", ".")]
    # Called every few milliseconds while a check waits: /proc is read directly, and a
    # psutil.Process is made only for a match (psutil.process_iter reads more of every process).
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = b"\0" + _environ(int(name)) + b"\0"
            if not any(pattern in environ for pattern in wanted):
                continue
            process = psutil.Process(int(name))
            if process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (OSError, psutil.Error):
            continue  # gone meanwhile, or not ours to read
    return found


def _environ(pid: int) -> bytes:
    """Process `pid`'s environment block (raises OSError when it cannot be read)."""
    path = "/proc/%d/environ" % pid
    try:
        return procfs.read(path)
    except PermissionError:
        # Root without CAP_SYS_PTRACE (a container's default set) may read the environment only
        # of processes whose ids its file-system ids match: a runner's, taken while it is read.
        owner = identity.owner_of(pid)
        if owner is None:
            raise
        with identity.file_access_as(owner):
            return procfs.read(path)


def family(ancestor: int) -> List[int]:
    """Live processes below `ancestor`: its children, theirs, and so on, by the parents /proc shows.

    Exact for a runner's stand-in while it lives: a subreaper, it adopts every orphan below it, so
    nothing the runner starts can leave its family, whatever it does to its environment.
    """
    # Each process's threads list the children they started: a few files of the family's own,
    # where a scan reads one of every process on the machine (this runs every poll of a check).
    children_of = _listed_children if procfs.GIVES_CHILDREN else _children_by_scan()
    found: List[int] = []
    parents = [ancestor]
    while parents:
        below = [pid for parent in parents for pid in children_of(parent)]
        found += below
        parents = below
    return found


def _listed_children(parent: int) -> List[int]:
    """The live children of `parent`, as its threads' children files list them."""
    try:
        threads = os.listdir("/proc/%d/task" % parent)
    except OSError:
        return []  # ended meanwhile: its children are its reaper's now, seen at the next poll
    return [child for tid in threads for child in procfs.children(parent, tid) if not _is_zombie(child)]


def _is_zombie(pid: int) -> bool:
    try:
        return procfs.stat_fields("/proc/%d/stat" % pid)[0] == b"Z"
    except (OSError, IndexError):
        return True  # gone meanwhile


def _children_by_scan() -> Callable[[int], List[int]]:
    """Where the kernel lists no children: every live process's parent, from its stat file."""
    children: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = procfs.stat_fields("/proc/%s/stat" % name)
            if fields[0] != b"Z":
                children.setdefault(int(fields[1]), []).append(int(name))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return lambda parent: children.get(parent, [])


def process_or_none(pid: int) -> Optional[psutil.Process]:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def as_processes(pids: Sequence[int]) -> List[psutil.Process]:
    """A psutil.Process for each of `pids` that still runs."""
    processes = []
    for pid in pids:
        try:
            processes.append(psutil.Process(pid))
        except psutil.Error:
            continue  # gone meanwhile
    return processes


def describe(processes: Sequence[psutil.Process]) -> List[ProcessInfo]:
    infos = []
    for process in processes:
        try:
            argv = tuple(process.cmdline())
            started = started_at(process.pid)
        except (psutil.Error, OSError, IndexError, ValueError):
            continue  # gone meanwhile
        infos.append(
            ProcessInfo(process.pid, argv, _ignores(process.pid, signal.SIGTERM), started, _group_started(process.pid))
        )
    return infos


def _group_started(pid: int) -> Optional[float]:
    """When the leader of process `pid`'s group started (None: unknown, or the leader is gone)."""
    try:
        return started_at(os.getpgid(pid))
    except (OSError, IndexError, ValueError):
        return None


def _ignores(pid: int, signum: int) -> bool:
    """Is `signum` set to be ignored in process `pid` (its SigIgn mask in /proc)?"""
    try:
        with open("/proc/%d/status" % pid) as handle:
            for line in handle:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError):
        pass
    return False


def runs_as(process: psutil.Process, argv: Sequence[str]) -> bool:
    """Is `process` running `argv`, however the runner spelled the program?

    A runner may resolve `sleep` to `/usr/bin/sleep` (shutil.which) and start exactly the same
    program, so the program is compared by name (argv[0]'s, or the executable's) and the
    arguments exactly. A script started through its #! line shows its interpreter first
    (`bash /opt/fixtures/pyops/bin/hang.sh`), so the script itself may stand second.
    """
    if not argv:
        return False
    try:
        actual = list(process.cmdline())
    except psutil.Error:
        return False
    wanted, arguments = os.path.basename(argv[0]), list(argv[1:])

    def same_arguments(shown: List[str]) -> bool:
        return len(shown) >= len(argv) and shown[1 : len(argv)] == arguments

    if any(same_arguments(shown) and os.path.basename(shown[0]) == wanted for shown in (actual, actual[1:])):
        return True
    if not same_arguments(actual):
        return False
    try:  # argv[0] set to something else: what the process executes
        return os.path.basename(process.exe()) == wanted
    except psutil.Error:
        return False


def started_at(pid: int) -> float:
    """When process `pid` started, on timing.now()'s clock (to a clock tick, rounded down)."""
    return int(procfs.stat_fields("/proc/%d/stat" % pid)[19]) / timing.CLOCK_TICKS


def all_asleep(pid: int) -> bool:
    """Is every thread of process `pid` blocked (sleeping in the kernel), none running or runnable?"""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return True  # gone: nothing of it can still be starting anything
    for tid in tids:
        try:
            state = procfs.stat_fields("/proc/%d/task/%s/stat" % (pid, tid))[0]
        except (OSError, IndexError):
            continue  # a thread that ended meanwhile
        if state not in (b"S", b"D"):
            return False
    return True


def reap(token: str) -> None:
    """Kill every process tagged with `token`, stopped ones included, and wait until gone."""
    kill_until_gone(lambda: [process.pid for process in tagged(token)], 5 * timing.SURVIVOR_GRACE_S)


def end_session(session: str) -> None:
    """Kill whatever a session that was itself killed left: its workers, the runners and their
    stand-ins (in sessions of their own, out of reach of a signal to its group), and whatever
    runs as a runner uid whose lease its holder did not live to end; then remove its labs."""
    kill_until_gone(lambda: [process.pid for process in of_session(session)], 5 * timing.SURVIVOR_GRACE_S)
    identity.sweep_abandoned()
    remove_labs_of(session)


def is_alive(process: psutil.Process) -> bool:
    """Is `process` (the same one: psutil compares its start time) still running, not a zombie?
    One the harness may not look at counts as running: its end is then not seen."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def wait_for(predicate: Callable[[], object], what: str, timeout: float = timing.APPEAR_S):
    """Poll `predicate` until it returns something true; raise HarnessTimeout after `timeout`."""
    deadline = timing.now() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if timing.now() >= deadline:
            raise HarnessTimeout("waited %.1fs for %s" % (timeout, what))
        time.sleep(timing.POLL_S)


class HarnessTimeout(Exception):
    """Something the test waits for did not happen in time."""


def lab_environment(lab: Lab, token: str, extra: Optional[Mapping[str, str]] = None) -> Dict:
    """The runner's whole environment: a small allowlist, never the harness's own, and nothing in
    it that names the suite. No TMPDIR where the runner has temporary folders of its own (namespace
    mode), as on a learner's machine; elsewhere its check's."""
    env = {
        "PATH": BASE_PATH,
        "HOME": HOME,
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "FLAKY_STATE": str(lab.work / FLAKY_STATE),
        TOKEN_VAR: token,
    }
    if lab.mode != NAMESPACE:
        tmp = lab.work / "tmp"
        tmp.mkdir(exist_ok=True)
        env["TMPDIR"] = str(tmp)
    env.update(extra or {})
    return env


_PR_SET_CHILD_SUBREAPER = 36


_CLONE_NEWPID = 0x20000000


def stand_between(
    lab_preexec: Optional[Callable[[], None]], user: Optional[RunnerUser], tell_pid: int, own_processes: bool
) -> Callable[[], None]:
    """What the runner's child process runs before exec: enter the lab, then fork once more.

    The harness's own child stays behind as the runner's parent: it only waits and then ends
    the way the runner ended (the same exit code, or the same signal). A runner that kills its
    parent therefore kills this stand-in, never the harness; and the runner itself becomes
    `user`, which may not signal the stand-in at all. The stand-in writes the runner's pid to
    the pipe `tell_pid`, so the harness need not look for it in /proc.

    With `own_processes` (namespace mode), the runner also gets a PID namespace whose first
    process is the stand-in's (see _first_of_namespace): it sees no process but its own.
    """

    def preexec() -> None:
        if lab_preexec is not None:
            lab_preexec()
        for signum in RESET_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        cap = FILE_CAP if limit == resource.RLIM_INFINITY else min(FILE_CAP, limit)
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))
        # The runner's orphans become the stand-in's, which reaps them at once, as an init does in
        # a container (tini): a killed grandchild must not linger as a zombie that kill(-pgid, 0)
        # still counts, least of all where a runner has no /proc to tell zombies apart (chroot).
        LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if own_processes and LIBC.unshare(_CLONE_NEWPID) == 0:
            _first_of_namespace(tell_pid)
        else:
            pid = LIBC.fork()  # libc's, not os.fork: no Python fork hooks run in this half-made child
            if pid != 0:
                if pid > 0:
                    os.write(tell_pid, b"%d" % pid)
                os.closerange(3, 65536)  # let the parent see the exec succeed (its pipe is ours too)
                _end_as(_wait_for(pid) if pid > 0 else None)
        os.close(tell_pid)  # the runner must not hold it: the harness reads it to its end
        if user is not None:
            user.drop()
        refuse_namespaces_and_mounts()  # last: the grader's own setup needed both (syscall_filter.py)

    return preexec


def _first_of_namespace(tell_pid: int) -> None:
    """Fork the first process of the PID namespace just made, which forks the runner; return in
    the runner only.

    Three processes then: the harness's child outside the namespace (it ends as the runner ends,
    as a stand-in does), the namespace's first process (its init: it reaps every orphan, and it
    lives on while anything the runner left runs, for S2.4 and S6.4 to find; when it ends, the
    kernel ends everything in the namespace) and the runner. The runner says who it is on a
    socket, which gives its pid as the harness's child sees it; the init tells that child how the
    runner ended through a pipe. The harness is told both pids ("RUNNER INIT").
    """
    ended_r, ended_w = os.pipe()
    told, telling = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    told.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    init = LIBC.fork()
    if init != 0:  # the harness's child, outside the namespace
        telling.close()
        os.close(ended_w)
        runner = _sender(told) if init > 0 else None
        if runner is not None:
            os.write(tell_pid, b"%d %d" % (runner, init))
        os.closerange(3, ended_r)  # let the harness see the exec succeed (its pipe is ours too)
        os.closerange(ended_r + 1, 65536)
        said = os.read(ended_r, 4) if runner is not None else b""
        _end_as(struct.unpack("i", said)[0] if len(said) == 4 else None)
    told.close()
    os.close(ended_r)
    # A /proc of the namespace: only its processes, and of those only the uid's own. Where it
    # cannot be mounted (a user namespace may not), the lab's own /proc stays (sandbox._processes).
    try:
        mount_own_processes("/proc")
    except OSError:
        pass
    runner = LIBC.fork()
    if runner == 0:
        telling.send(b"r")  # with SO_PASSCRED the kernel adds this process's pid, as the receiver sees it
        telling.close()
        os.close(ended_w)
        return
    telling.close()
    os.close(tell_pid)
    os.closerange(3, ended_w)
    os.closerange(ended_w + 1, 65536)
    if runner < 0:
        os._exit(125)
    os.setsid()  # out of the runner's process group: a kill of that group leaves the init be
    # The harness's child may be gone when the runner ends (killed with the runner's group, when
    # it hung): telling it must not end the init, and with it what S2.4 and S6.4 are to find.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    while True:
        try:
            ended, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)  # nothing left in the namespace
        if ended == runner:
            try:
                os.write(ended_w, struct.pack("i", status))
            except OSError:
                pass
            os.close(ended_w)
            runner = -1  # told once: a later process given the same pid is an orphan like any other


def _sender(sock: socket.socket) -> Optional[int]:
    """The pid of the process that sent the one message on `sock` (None if none did)."""
    message, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(struct.calcsize("iII")))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and message:
            return struct.unpack("iII", data[: struct.calcsize("iII")])[0]
    return None


def _wait_for(pid: int) -> int:
    """Reap children until `pid` ends; its wait status."""
    while True:
        ended, status = os.waitpid(-1, 0)
        if ended == pid:
            return status


def _end_as(status: Optional[int]) -> None:
    """End this process the way wait status `status` says its runner ended (None: 125)."""
    if status is not None and os.WIFSIGNALED(status):
        if os.WTERMSIG(status) != signal.SIGKILL:  # SIGKILL's handler cannot be set
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else 125)


def session_id() -> str:
    """This session's id, which prefixes every token it hands out (see begin_session)."""
    if SESSION_VAR not in os.environ:
        begin_session()
    return os.environ[SESSION_VAR]


def begin_session() -> str:
    """Give this session an id of its own, below the one it was started in, if any.

    A suite run from inside another (the project's own tests grade runners this way) must reap
    only its own processes at its end, never a sibling's; the outer session still finds all of
    them by its own prefix.
    """
    os.environ[SESSION_VAR] = new_session()
    return os.environ[SESSION_VAR]


def new_session() -> str:
    """A session id below this process's own, if it has one (begin_session says why)."""
    outer = os.environ.get(SESSION_VAR)
    mine = uuid.uuid4().hex[:12]
    return "%s.%s" % (outer, mine) if outer else mine


def new_token() -> str:
    return "%s.%s" % (session_id(), uuid.uuid4().hex[:12])

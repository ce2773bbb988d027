"""Who the runner under test runs as: a user of its own, never the grader.

A runner is untrusted code. Run as root beside the grader it could read the bundled reference and
run that instead, kill the grader with kill(-1), or rewrite the reports once they are written.
So each check runs its runner, and every process the runner starts, as an unprivileged uid of its
own:

* kill(-1) by that uid reaches only that check's processes, never the grader or another check;
* when the check ends every process of the uid is killed, also a daemon that emptied its
  environment to slip past the token tracking (see processes.py), so nothing outlives the check;
* the lab's folders are handed to the uid; the grader's files are not writable by it, and the
  reference is hidden from it (sandbox.py).

Every check leases a uid of its own from a range that no account uses, in shared mode too (two
gradings on one machine must never sweep each other's runners). The grader needs root with the
capabilities to switch and to manage what the runner leaves (CAPABILITIES); without them the
runner can only run as the grader's own user.
"""

import contextlib
import errno
import fcntl
import os
import pwd
import resource
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Set

from conformance.harness import labfiles, procfs
from conformance.harness.libc import LIBC
from conformance.harness.machine import MACHINE_DIR

# No account has these uids (checked before each lease): a sweep can never hit a real user.
# A machine that grades both on the host and in containers needs two ranges: the host sees the
# containers' processes, so a host sweep would kill a container's runner of the same uid (and a
# host runner's kill(-1) would reach it). The grading image sets its own (PYOPS_RUNNER_UIDS).
DEFAULT_UID_BASE = 1_900_000_000
# Wide, and tried from a random place: two lease tables that see each other's processes (the host
# and a container with the suite installed, both with the default range) rarely try the same uid,
# and a uid with a process of another table's runner is never leased (leased_user). Below the
# 100000 between the image's and Gradescope's own ranges, so those stay apart.
UID_COUNT = 1 << 16


def _uid_base() -> int:
    value = os.environ.get("PYOPS_RUNNER_UIDS", "")
    try:
        base = int(value) if value else DEFAULT_UID_BASE
    except ValueError:
        base = -1
    if not 100_000 <= base <= 2**31 - 1 - UID_COUNT:
        sys.stderr.write(
            "pyops-conformance: PYOPS_RUNNER_UIDS=%r: give the first uid of a free range of %d, like %d\n"
            % (value, UID_COUNT, DEFAULT_UID_BASE)
        )
        raise SystemExit(2)
    return base


UID_BASE = _uid_base()
# One place per machine: two gradings that kept their leases in different folders could lease
# the same uid and sweep each other's runners.
LEASES = MACHINE_DIR / "pyops-conformance-uids"

# In a uid's lease file: HELD while a check of this machine's lease table has the uid, CLEAN once
# it ended with no process of the uid left. HELD with no holder: its holder died, and what runs as
# the uid is that check's, to be swept. Anything else (a file never leased): what runs as the uid
# is not this table's (a container's runner): never swept, and the uid not leased.
HELD, CLEAN = b"held!", b"clean"

OWN, GRADER, AUTO = "own", "grader", "auto"
CHOICES = (AUTO, OWN, GRADER)

# What the grader must hold to run a runner as another uid and clean up after it (Linux
# capability numbers): switch uid and gid, signal it, and own, read and remove what it wrote.
CAPABILITIES = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "KILL": 5, "SETGID": 6, "SETUID": 7}


# Processes (and threads) a runner uid may have at once: a correct runner and its commands need
# fewer than ten; a fork flood stops here, and the machine keeps room for the grader to finish.
# The uid is the check's alone, so the count is the check's.
RUNNER_PROCESSES = 256


@dataclass(frozen=True)
class RunnerUser:
    """The uid and gid a check's runner runs as; None everywhere means the grader's own user."""

    uid: int
    gid: int

    def drop(self) -> None:
        """In a child between fork and exec: become this user, with no supplementary groups, who
        may run no more than RUNNER_PROCESSES processes at once."""
        resource.setrlimit(resource.RLIMIT_NPROC, (RUNNER_PROCESSES, RUNNER_PROCESSES))
        os.setgroups([])
        os.setgid(self.gid)
        os.setuid(self.uid)


# What the runner's uid is called where it has an account: a grading should look like a learner's
# machine, where the user running the runner has a name, a group and a home (identity of a learner,
# not of a grader: a runner that behaves only when it sees no account cannot tell).
ACCOUNT_NAME = "learner"
# Its home: the lab's own, where it puts the learner's folder (/root/pyops/sub) and where HOME
# points, so that ~ and the lab's paths agree as on the learner's machine.
HOME = "/root"
ACCOUNT_FILES = ("passwd", "group")  # in /etc


@dataclass(frozen=True)
class Account:
    """The runner's uid's account in its mount namespace: `folder` holds ACCOUNT_FILES, the
    machine's own with its entry added; its home is HOME, owned by the uid."""

    folder: Path
    uid: int
    gid: int


def write_account(user: RunnerUser, folder: Path) -> Account:
    """Write into `folder` (made here, the grader's) the machine's passwd and group files with an
    entry for `user` added, named ACCOUNT_NAME (or a free variant of it) with home HOME."""
    folder.mkdir(mode=0o755)
    machine = {}
    for name in ACCOUNT_FILES:
        try:
            machine[name] = Path("/etc", name).read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            machine[name] = ""
        if machine[name] and not machine[name].endswith("\n"):
            machine[name] += "\n"
    taken = {line.split(":", 1)[0] for text in machine.values() for line in text.splitlines()}
    account = next(
        candidate
        for candidate in [ACCOUNT_NAME] + ["%s%d" % (ACCOUNT_NAME, n) for n in range(2, 100)]
        if candidate not in taken
    )
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    added = {
        "passwd": "%s:x:%d:%d::%s:%s\n" % (account, user.uid, user.gid, HOME, shell),
        "group": "%s:x:%d:\n" % (account, user.gid),
    }
    for name in ACCOUNT_FILES:
        path = folder / name
        path.write_text(machine[name] + added[name], encoding="utf-8", errors="surrogateescape")
        path.chmod(0o644)
    return Account(folder, user.uid, user.gid)


def missing_capabilities() -> List[str]:
    """The capabilities of CAPABILITIES this process lacks (all of them when it is not root)."""
    if os.geteuid() != 0:
        return sorted(CAPABILITIES)
    try:
        with open("/proc/self/status") as handle:
            effective = next(int(line.split()[1], 16) for line in handle if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        return sorted(CAPABILITIES)
    return sorted(name for name, bit in CAPABILITIES.items() if not effective >> bit & 1)


def decide(choice: str, user_namespace: bool, closed: Optional[Path] = None) -> "tuple[str, str]":
    """(OWN or GRADER, why) for `--runner-user CHOICE`; raises ValueError when OWN is impossible.

    `closed`: a folder on the way to the lab that other users cannot pass and that may not be
    changed (the real /root in shared mode on a machine that is not a grading image).
    """
    missing = missing_capabilities()
    if closed is not None:
        why_not = "%s is closed to other users, and shared mode does not change the machine" % closed
    elif user_namespace:
        why_not = "the grader is not root, so it has no other uid to give the runner"
    elif missing:
        why_not = "the grader lacks the capabilities %s (in a container: docker run ... %s)" % (
            ", ".join("CAP_" + name for name in missing),
            " ".join("--cap-add " + name for name in missing),
        )
    else:
        why_not = ""
    if choice == GRADER:
        return GRADER, "--runner-user grader was asked for"
    if not why_not:
        return OWN, ""
    if choice == OWN:
        raise ValueError("cannot run the runner as a user of its own: %s" % why_not)
    return GRADER, why_not


@contextlib.contextmanager
def leased_user() -> Iterator[RunnerUser]:
    """A uid of the range that no other check holds now, for the duration of one check.

    The lease is an flock on a file per uid, so it is shared by every worker and every grading
    on the machine and ends with its holder, even one that was killed. Whatever a dead holder's
    runner left is swept before the uid is handed out again.
    """
    LEASES.mkdir(mode=0o700, exist_ok=True)
    start = int.from_bytes(os.urandom(4), "big") % UID_COUNT  # workers and tables start apart
    for offset in range(UID_COUNT):
        uid = UID_BASE + (start + offset) % UID_COUNT
        fd = os.open(str(LEASES / str(uid)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EAGAIN, errno.EACCES):
                continue
            raise
        try:
            if _has_account(uid):
                continue
            user = RunnerUser(uid, uid)
            _sweep_if_abandoned(fd, user)  # what a dead holder of this table left: ours to end
            if processes_of(user):
                continue  # a runner of another lease table (a container's): not ours to touch
            os.pwrite(fd, HELD, 0)
            _swept_at_the_end.discard(uid)
            try:
                yield user
            finally:
                # Before the lease ends: the next holder starts with nothing of ours (the check's
                # own last sweep may have shown that already: nothing runs as the uid after it).
                if uid in _swept_at_the_end or sweep(user):
                    os.pwrite(fd, CLEAN, 0)
                _swept_at_the_end.discard(uid)
            return
        finally:
            os.close(fd)
    raise RuntimeError("no free runner uid in %d..%d" % (UID_BASE, UID_BASE + UID_COUNT - 1))


def sweep_abandoned() -> None:
    """Sweep every uid whose lease no one holds and whose last holder died before it could."""
    try:
        names = os.listdir(str(LEASES))
    except OSError:
        return  # no lease was ever taken here
    for name in names:
        if not name.isdigit() or not UID_BASE <= int(name) < UID_BASE + UID_COUNT or _has_account(int(name)):
            continue  # a file leased_user made, then passed over for an account: never swept
        try:
            fd = os.open(str(LEASES / name), os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _sweep_if_abandoned(fd, RunnerUser(int(name), int(name)))
        except OSError:
            continue  # held: its check is running and sweeps at its own end
        finally:
            os.close(fd)


def _sweep_if_abandoned(fd: int, user: RunnerUser) -> None:
    """With `user`'s lease file `fd` locked: sweep the uid if the file still says HELD, which its
    last holder replaces with CLEAN when it swept and saw nothing left (a holder that died never did)."""
    if os.pread(fd, len(HELD), 0) == HELD and sweep(user):
        os.pwrite(fd, CLEAN, 0)


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def processes_of(user: RunnerUser) -> List[int]:
    """Live processes whose real or effective uid is the runner's (zombies are already dead)."""
    # The status file, not the owner of /proc/PID: a process that makes itself non-dumpable
    # shows root as that owner. Only two fields are looked up (this runs several times a check).
    wanted = str(user.uid).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            status = procfs.read("/proc/%s/status" % name)
        except OSError:
            continue  # gone meanwhile
        if wanted in _field(status, b"Uid")[:2] and _field(status, b"State")[:1] != [b"Z"]:
            found.append(int(name))
    return found


def _field(status: bytes, name: bytes) -> List[bytes]:
    """The words of field `name` in a /proc/PID/status text ([] when it has none)."""
    at = status.find(b"\n" + name + b":")
    if at < 0:
        return []
    end = status.find(b"\n", at + 1)
    return status[at + len(name) + 2 : end if end >= 0 else len(status)].split()


def owner_of(pid: int) -> Optional[RunnerUser]:
    """The runner user process `pid` runs as (real, effective and saved ids alike), if it is one."""
    try:
        status = procfs.read("/proc/%d/status" % pid)
        uids = {int(uid) for uid in _field(status, b"Uid")[:3]}
        gids = {int(gid) for gid in _field(status, b"Gid")[:3]}
    except (OSError, ValueError):
        return None
    if len(uids) != 1 or len(gids) != 1:
        return None
    uid, gid = uids.pop(), gids.pop()
    return RunnerUser(uid, gid) if UID_BASE <= uid < UID_BASE + UID_COUNT else None


@contextlib.contextmanager
def file_access_as(user: RunnerUser) -> Iterator[None]:
    """Open files with `user`'s file-system ids, in this thread only (needs CAP_SETUID, CAP_SETGID)."""
    gid_before = LIBC.setfsgid(user.gid)
    uid_before = LIBC.setfsuid(user.uid)
    try:
        if LIBC.setfsuid(-1) != user.uid:  # setfsuid reports no errors: read the id back
            raise PermissionError(errno.EPERM, "cannot take the file-system ids of uid %d" % user.uid)
        yield
    finally:
        LIBC.setfsuid(uid_before)
        LIBC.setfsgid(gid_before)


def sweep(user: RunnerUser, patience_s: float = 5.0) -> bool:
    """Kill every process of `user` (stopped ones too) and wait until none is left (True if so)."""
    return kill_until_gone(lambda: processes_of(user), patience_s)


# uids whose check is over and whose last sweep left nothing: their lease need not sweep again.
_swept_at_the_end: Set[int] = set()


def sweep_at_the_end(user: RunnerUser) -> None:
    """The last sweep of a check, after which nothing runs as `user` until its lease ends."""
    if sweep(user):
        _swept_at_the_end.add(user.uid)


def nothing_left(user: RunnerUser) -> None:
    """Instead of the last sweep of a check that saw for itself that nothing runs as `user`."""
    _swept_at_the_end.add(user.uid)


def kill_until_gone(find: Callable[[], List[int]], patience_s: float) -> bool:
    """SIGKILL (and SIGCONT, for stopped ones) every pid `find` returns, until it returns none.

    True when none is left; False when some still were after `patience_s`."""
    deadline = time.monotonic() + patience_s
    while True:
        victims = find()  # again each round: a process may fork while we kill
        if not victims or time.monotonic() >= deadline:
            return not victims
        for pid in victims:
            for signum in (signal.SIGKILL, signal.SIGCONT):
                try:
                    os.kill(pid, signum)
                except OSError:
                    pass
        time.sleep(0.01)


def hand_over(paths: List[Path], user: Optional[RunnerUser]) -> None:
    """Make `paths`, and everything below them, the runner's (a test may have written some as root)."""
    if user is None:
        return
    for top in paths:
        labfiles.chown_tree(top, user.uid, user.gid)


def closed_ancestor(path: Path) -> Optional[Path]:
    """The first existing folder above `path` that other users may not pass through, if any."""
    for folder in reversed(path.parents):
        try:
            if not os.stat(str(folder)).st_mode & 0o001:
                return folder
        except OSError:
            return None
    return None

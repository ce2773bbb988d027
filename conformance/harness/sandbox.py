"""A private copy of the lab for every test.

The runner under test hard-codes /root/pyops/sub and /opt/fixtures/pyops/bin, so every test needs
its own version of those two folders. Two ways to give it one:

* ``namespace``: each process the harness starts enters private mount, network and IPC
  namespaces and a root of its own (see MountPlan): the machine's programs and libraries and the
  runner's interpreter, read-only; the test's own folders at the lab's paths; /tmp, /var/tmp and
  /dev/shm empty and private to it (its own lab shown again in /tmp, under a neutral name); no network at all;
  and, for the runner itself, a PID namespace of its own (processes._first_of_namespace).
  Nothing else of the machine is there: no other lab, no home folder, no checkout. Tests run in
  parallel and the real folders are never touched.
* ``chroot``: where no namespace can be made but chroot can (an unprivileged container with
  Docker's default capabilities), each test leases a system root (see roots.py) and its processes
  are chrooted into it, where the test's own folders are the lab's paths. Tests run in parallel.
* ``shared``: where neither can be made, the lab's real paths are used, one test at a time (an
  flock serialises even parallel workers), and whatever was in them before the session is put
  back byte for byte afterwards (see restore.py).
"""

import atexit
import contextlib
import ctypes
import errno
import fcntl
import os
import re
import shutil
import stat
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence

from conformance.harness import labfiles, memory, roots, scratch
from conformance.harness.identity import (
    ACCOUNT_FILES,
    HOME,
    Account,
    RunnerUser,
    closed_ancestor,
    hand_over,
    write_account,
)
from conformance.harness.libc import LIBC
from conformance.harness.witness import Witness, flock_held
from conformance.lab.commands import FIXTURE_SETTINGS, SETTINGS

SUB_DIR = Path("/root/pyops/sub")
STATE_DIR = SUB_DIR / "state"
BIN_DIR = Path("/opt/fixtures/pyops/bin")
# The counter of a lab (Lab.counter), below its root, and the name its witness knows it by.
COUNTER_NAME = "calls"
COUNTER = "counted/" + COUNTER_NAME
LAB_PATHS = (SUB_DIR, BIN_DIR)


def _fixtures_dir() -> Path:
    """The lab's fixtures: shipped in the package, or fixtures/pyops/bin in a source checkout."""
    checkout = Path(__file__).resolve().parents[2] / "fixtures" / "pyops" / "bin"
    if checkout.is_dir():
        return checkout
    import conformance.fixtures  # installed: mapped to this name by pyproject.toml

    return Path(list(conformance.fixtures.__path__)[0])


FIXTURES = _fixtures_dir()
SHARED_LOCK = Path(tempfile.gettempdir()) / "pyops-conformance.shared.lock"

NAMESPACE = "namespace"
CHROOT = "chroot"
SHARED = "shared"
MODES = (NAMESPACE, CHROOT, SHARED)

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWCGROUP = 0x02000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_NOATIME = 1024
_MS_NODIRATIME = 2048
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MS_RELATIME = 1 << 21
_MNT_DETACH = 2
_O_PATH = getattr(os, "O_PATH", 0o10000000)
# pivot_root has no wrapper in the C library: its system call number, by machine.
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "i686": 217, "armv7l": 218, "s390x": 217}
# A read-only bind keeps the flags its source was mounted with (a user namespace may not drop them).
_KEPT_FLAGS = (
    (os.ST_NOSUID, _MS_NOSUID),
    (os.ST_NODEV, _MS_NODEV),
    (os.ST_NOEXEC, _MS_NOEXEC),
    (os.ST_NOATIME, _MS_NOATIME),
    (os.ST_NODIRATIME, _MS_NODIRATIME),
    (os.ST_RELATIME, _MS_RELATIME),
)

# The machine's folders a runner's root is made of (read-only): its programs, libraries and
# settings. Everything else of the machine (home folders, /opt, /srv, /var, checkouts, other
# labs) is not there at all.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# The devices a runner's /dev holds, each the machine's own node bound in place, and nothing else:
# no disk, no terminal of the machine's (/dev/pts), no message queue of its IPC namespace
# (/dev/mqueue). One node at a time can be bound in a user namespace too, where /dev as a whole
# cannot (its own mounts below it are locked to it there).
DEVICES = ("null", "zero", "full", "random", "urandom")
DEVICE_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)
# Folders the grader's operator lets every runner see and write (os.pathsep between them): for a
# lab's own tests, which collect what runners write across checks. Never set for a class.
SHARE_VAR = "PYOPS_CONFORMANCE_SHARE"


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, "%s: %s" % (what, os.strerror(code)))


def _mount(source: Optional[str], target: str, fstype: Optional[str], flags: int, data=None):
    encode = lambda text: None if text is None else os.fsencode(text)  # noqa: E731
    _check(
        LIBC.mount(encode(source), encode(target), encode(fstype), flags, encode(data)),
        "mount %s" % target,
    )


def _nearest_existing(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


def _bind(source: str, target: str, read_only: bool, recursive: bool = True) -> None:
    _mount(source, target, None, _MS_BIND | (_MS_REC if recursive else 0))
    if read_only:
        flags = os.statvfs(source).f_flag
        kept = sum(mount_flag for statvfs_flag, mount_flag in _KEPT_FLAGS if flags & statvfs_flag)
        _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | kept)


def _devices(target: str) -> None:
    """A /dev at `target` holding DEVICES and DEVICE_LINKS only (a read-only memory file system)."""
    os.makedirs(target)
    _mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NOEXEC, "mode=0755,size=16k")
    for name in DEVICES:
        node = os.path.join(target, name)
        open(node, "x").close()
        _bind("/dev/" + name, node, read_only=False, recursive=False)
    for name, points_to in DEVICE_LINKS:
        os.symlink(points_to, os.path.join(target, name))
    os.makedirs(os.path.join(target, "shm"))  # for PRIVATE_TMP's
    _mount(None, target, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NOEXEC)


def _pivot_root(new_root: str) -> None:
    """Make `new_root` this namespace's / and let go of the old one, which is then out of reach
    (a chroot can be left by a process with CAP_SYS_CHROOT, as a user namespace's root has)."""
    number = _SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(errno.ENOSYS, "pivot_root: no system call number for %s" % os.uname().machine)
    os.chdir(new_root)
    _check(LIBC.syscall(number, b".", b"."), "pivot_root")
    _check(LIBC.umount2(b".", _MNT_DETACH), "umount the old root")
    os.chdir("/")


def _processes(target: str) -> None:
    """A /proc in which a process sees only processes of its own uid: a runner reads neither the
    grader's command line nor a classmate's runner's. The runner's stand-in mounts another one
    over it in the runner's PID namespace (processes._first_of_namespace); this one is what is
    left where that cannot be done. Where /proc cannot be mounted so (a user namespace; a kernel
    before 5.8, where it would change the machine's own /proc), the machine's is shown as it is."""
    try:
        mount_own_processes(target)
    except OSError:
        _bind("/proc", target, read_only=False)


def mount_own_processes(target: str) -> None:
    """Mount at `target` a /proc of the caller's PID namespace that shows a process only the
    processes of its own uid; raises OSError where that cannot be done."""
    _mount("proc", target, "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "hidepid=invisible")


def interpreter_folders(python: str) -> List[Path]:
    """The folders interpreter `python` needs to run: its prefixes (a venv's and its base's) and
    the folders of its executable, as it names them and as they resolve."""
    folders = {Path(python).parent, Path(os.path.realpath(python)).parent}
    code = "import sys; print('\\0'.join([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]))"
    try:
        said = subprocess.run(
            [python, "-I", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30, check=True
        )
        folders.update(Path(folder) for folder in said.stdout.decode().strip().split("\0") if folder)
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        pass  # an interpreter that cannot say: what its path shows; the runner's checks say the rest
    return sorted(folder for folder in folders if folder.is_absolute() and folder != Path("/"))


def _outermost(folders: Sequence[Path]) -> List[Path]:
    """`folders` without those inside another of them or inside a SYSTEM folder (bound already)."""
    covering = [Path(os.path.realpath(folder)) for folder in SYSTEM] + [Path(folder) for folder in SYSTEM]
    kept: List[Path] = []
    for folder in sorted(set(folders)):
        if any(folder == outer or outer in folder.parents for outer in covering + kept):
            continue
        kept.append(folder)
    return kept


@dataclass
class MountPlan:
    """How to put the lab's paths in place inside a fresh mount namespace (computed once)."""

    overlays: List[Path] = field(default_factory=list)  # existing parents to cover (the whole machine's view)
    user_namespace: bool = False
    hidden: List[Path] = field(default_factory=list)  # folders a runner must not read (the reference)
    # What a runner's root holds besides SYSTEM: the folders of the interpreters it runs (read-only)
    # and the operator's shared folders (SHARE_VAR). None: no root of its own, the whole machine
    # is seen with the lab's paths in place (a learner's machine, as the project's tests make one).
    interpreters: Optional[List[Path]] = field(default_factory=list)
    shared: List[Path] = field(default_factory=list)

    @classmethod
    def for_this_machine(cls, hidden: Sequence[Path] = (), interpreters: Sequence[str] = ()) -> "MountPlan":
        """A runner's root, holding the folders of `interpreters` and none of `hidden`."""
        folders = [folder for python in interpreters for folder in interpreter_folders(python)]
        shared = [Path(folder) for folder in os.environ.get(SHARE_VAR, "").split(os.pathsep) if folder]
        return cls(
            [],
            os.geteuid() != 0,
            [p for p in hidden if p.is_dir()],
            _outermost(folders),
            [folder for folder in shared if folder.is_absolute() and folder.is_dir()],
        )

    @classmethod
    def whole_machine(cls) -> "MountPlan":
        """The whole machine with the lab's paths in place: a learner's, as the project's tests make one."""
        overlays: List[Path] = []
        for target in LAB_PATHS:
            # The topmost ancestor that another user cannot pass through (/root is 0700) is
            # covered too, so that it can be opened to the runner's own uid in the namespace only.
            parent = closed_ancestor(target) or (target if target.is_dir() else _nearest_existing(target))
            if parent == target:
                continue
            if parent == Path("/"):
                # An overlay on / would hide /proc and /dev; no namespace mode on such a machine.
                raise OSError(errno.ENOTSUP, "no parent of %s to overlay" % target)
            if not _covered(parent, overlays):
                overlays = [o for o in overlays if parent not in o.parents] + [parent]
        return cls(overlays, os.geteuid() != 0, interpreters=None)

    def enter(
        self, lab_root: Path, binds: List[tuple], seen_at: Optional[Path] = None, account: Optional[Account] = None
    ) -> None:
        """In a child between fork and exec: make the lab's paths show the test's folders.

        `seen_at`: where the runner sees the check's own folder (LabMaker's neutral name for it),
        else at `lab_root`. `account`: the runner's uid's account (identity.Account), its passwd
        and group files shown over the machine's, and its home.
        """
        uid, gid = os.geteuid(), os.getegid()
        # A network of its own (only a loopback, down): a runner reaches no service of the
        # machine's, such as a class's broker on 127.0.0.1, and no other machine. IPC of its own:
        # a shared memory segment or message queue a runner makes goes with it.
        flags = _CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC | (_CLONE_NEWUSER if self.user_namespace else 0)
        _check(LIBC.unshare(flags), "unshare")
        # A cgroup namespace rooted at the check's memory cgroup (joined before this): the runner
        # reads "/" in /proc/self/cgroup, as in any container, not the check's name. Where the
        # kernel has none (before 4.6), the path stays visible rather than the grading failing.
        LIBC.unshare(_CLONE_NEWCGROUP)
        if self.user_namespace:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", "0 %d 1" % uid)
            _write("/proc/self/gid_map", "0 %d 1" % gid)
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
        # Held before anything is mounted over them, so a mount cannot change what they name
        # (and opened after unshare: a bind mount takes its source from this namespace only).
        held = [(os.open(str(source), _O_PATH | os.O_DIRECTORY), target) for source, target in binds]
        keep_lab = os.open(str(lab_root), _O_PATH | os.O_DIRECTORY)
        if self.interpreters is None:
            self._show_lab_on_this_machine(lab_root, held, keep_lab)
        else:
            self._make_root(self.interpreters, lab_root, held, keep_lab, seen_at or lab_root, account)
        os.close(keep_lab)
        os.chdir(str(SUB_DIR))

    def _make_root(
        self,
        interpreters: List[Path],
        lab_root: Path,
        held: List[tuple],
        keep_lab: int,
        seen_at: Path,
        account: Optional[Account],
    ) -> None:
        """Build the runner's root in the lab's scratch folder, then make it this namespace's /."""
        root = str(lab_root / "overlay")
        inside = lambda path: root + str(path)  # noqa: E731
        # The folders made on the way to a bind must be passable for the runner's uid, whatever
        # the grader's umask; the runner itself gets the grader's umask back.
        umask = os.umask(0o022)
        _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
        for system in SYSTEM:
            if os.path.islink(system):  # /bin -> usr/bin, where /usr is merged
                os.symlink(os.readlink(system), inside(system))
            elif os.path.isdir(system):
                os.makedirs(inside(system))
                _bind(system, inside(system), read_only=True)
        _devices(inside("/dev"))
        # /sys read-only, for what reads the machine's CPUs; with its own mounts below it, which a
        # user namespace cannot leave behind.
        os.makedirs(inside("/sys"))
        _bind("/sys", inside("/sys"), read_only=True, recursive=self.user_namespace)
        os.makedirs(inside("/proc"))
        _processes(inside("/proc"))
        for temporary in PRIVATE_TMP:
            os.makedirs(inside(temporary), exist_ok=True)
            _mount("tmpfs", inside(temporary), "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777,size=%s" % PRIVATE_TMP_SIZE)
        if account is not None:
            # The account's files over the machine's, and its home: /root, where the lab puts the
            # learner's folder, a memory file system of the runner's own (bounded, gone with it).
            for name in ACCOUNT_FILES:
                _bind(str(account.folder / name), inside("/etc/" + name), read_only=True, recursive=False)
            os.makedirs(inside(HOME), exist_ok=True)
            _mount("tmpfs", inside(HOME), "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0700,size=%s" % HOME_SIZE)
            os.chown(inside(HOME), account.uid, account.gid)
        for folder in interpreters:
            if folder.is_dir():
                os.makedirs(inside(folder), exist_ok=True)
                _bind(str(folder), inside(folder), read_only=True)
        for folder in self.shared:
            os.makedirs(inside(folder), exist_ok=True)
            _bind(str(folder), inside(folder), read_only=False)
        for fd, target in held:
            os.makedirs(inside(target), exist_ok=True)
            _bind("/proc/self/fd/%d" % fd, inside(target), read_only=False, recursive=False)
            os.close(fd)
        # The check's own folder where the harness names it to the runner (a counter, a file a
        # command writes): at its neutral name, in the runner's private temporary folder.
        os.makedirs(inside(seen_at), mode=0o711, exist_ok=True)
        _bind("/proc/self/fd/%d" % keep_lab, inside(seen_at), read_only=False, recursive=False)
        for folder in self.hidden:
            if os.path.isdir(inside(folder)):
                _mount("tmpfs", inside(folder), "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "size=4k")
        _mount(None, root, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
        _pivot_root(root)
        os.umask(umask)

    def _show_lab_on_this_machine(self, lab_root: Path, held: List[tuple], keep_lab: int) -> None:
        """The whole machine, with the test's folders at the lab's paths."""
        if self.overlays:
            scratch = lab_root / "overlay"
            _mount("tmpfs", str(scratch), "tmpfs", 0, "mode=0755,size=4m")
            for index, parent in enumerate(self.overlays):
                upper, work = scratch / ("upper%d" % index), scratch / ("work%d" % index)
                upper.mkdir()
                work.mkdir()
                options = "lowerdir=%s,upperdir=%s,workdir=%s" % (parent, upper, work)
                _mount("overlay", str(parent), "overlay", 0, options)
            # The test's own folder may sit below an overlaid parent: show it as it really is.
            _mount("/proc/self/fd/%d" % keep_lab, str(lab_root), None, _MS_BIND)
        for fd, target in held:
            os.makedirs(str(target), exist_ok=True)
            _mount("/proc/self/fd/%d" % fd, str(target), None, _MS_BIND)
            os.close(fd)
        for target in LAB_PATHS:  # passable for the runner's uid: changes the overlays' copies only
            for ancestor in target.parents:
                mode = os.stat(str(ancestor)).st_mode
                if not mode & 0o001 and _covered(ancestor, self.overlays):
                    os.chmod(str(ancestor), (mode & 0o7777) | 0o001)
        for folder in self.hidden:
            _mount("tmpfs", str(folder), "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mode=0555,size=4k")


# The machine's temporary folders, each an empty memory file system of its own in a runner's
# root: it sees no other lab (a classmate's, during a class) and no file another runner left, and
# what it writes there is gone with the namespace. Bounded, so a runner cannot fill the memory.
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")
PRIVATE_TMP_SIZE = "256m"
# The runner's home, where it has an account (identity.Account): what a learner's tools keep there
# (caches, histories) is bounded as its temporary folders are.
HOME_SIZE = "64m"


def _covered(path: Path, overlays: Sequence[Path]) -> bool:
    """Is `path` one of `overlays` or below one of them?"""
    return any(path == overlay or overlay in path.parents for overlay in overlays)


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


class Lab:
    """One test's lab: its folders, the paths a runner sees, and how to enter them.

    ``sub`` and ``bin`` are the folders as the harness sees them (to inspect files); the runner
    always sees them at the lab's paths. ``work`` is scratch space outside the lab for the test's
    own helper files (ready files, FLAKY_STATE, captured output). ``counter`` is the file a counted
    command appends to (commands.counted), in a folder only the grader may change, and ``witness``
    (where the kernel gives one) sees every open of it and of the lab's fixtures: see witness.py.
    """

    def __init__(
        self,
        root: Path,
        mode: str,
        runner_source: Path,
        plan: Optional[MountPlan],
        user: Optional[RunnerUser] = None,
        system_root: Optional[Path] = None,
        seen_root: Optional[Path] = None,
    ):
        self.root = root
        # Where the runner sees `root`, and the harness names it to the runner (namespace mode: a
        # neutral name, see _alias_for); the same folder to both.
        self.seen_root = seen_root or root
        self.mode = mode
        self.plan = plan
        self.user = user
        self.system_root = system_root  # chroot mode: the root its processes live in
        self.memory: Optional[memory.MemoryBound] = None  # the check's memory cgroup, if any
        # The runner's uid passes through root/ (not list it) to work/, which it owns; output/
        # (what the runner printed, kept by the harness) stays the grader's alone.
        os.chmod(str(root), 0o711)
        self.work = self.seen_root / "work"
        (self.work / "tmp").mkdir(parents=True)  # the runner's TMPDIR where it has no /tmp of its own
        self.output = root / "output"
        self.output.mkdir(mode=0o700)
        self.account: Optional[Account] = None
        if mode == NAMESPACE:
            self.sub, self.bin = root / "sub", root / "bin"
            (root / "overlay").mkdir()
            if user is not None:  # the runner's uid gets an account in its mount namespace
                self.account = write_account(user, root / "etc")
        elif mode == CHROOT:
            assert system_root is not None
            self.sub, self.bin = system_root / SUB_DIR.relative_to("/"), system_root / BIN_DIR.relative_to("/")
        else:
            self.sub, self.bin = SUB_DIR, BIN_DIR
        _fill(self.sub, self.bin, runner_source)
        self.set_fixture_settings({})  # a system root's bin may still hold an earlier check's
        self.counter = self.seen_root / COUNTER
        _make_counter(root / COUNTER, user)
        self.witness = Witness.start()
        if self.witness is not None:
            try:
                self.witness.watch(COUNTER_NAME, str(root / COUNTER))
                self.witness.watch("flaky.sh", str(self.bin / "flaky.sh"))
                self.witness.watch("apply.sh", str(self.bin / "apply.sh"), self._applying)
            except OSError:  # a file system that takes no marks: this lab's evidence is its files
                self.witness.close()
                self.witness = None

    def _applying(self, argv: Sequence[str]) -> Dict[str, Optional[bool]]:
        """What S5.1 and S4.3 ask of the lab as `apply.sh NAME` starts (argv: the opener's): is
        state/lock (a regular file, never followed) held with an flock, and is NAME's
        marker there already?"""
        try:
            found = os.lstat(str(self.sub / "state" / "lock"))
            lock = (found.st_dev, found.st_ino) if stat.S_ISREG(found.st_mode) else None
        except OSError:
            lock = None
        name = argv[2] if len(argv) > 2 else ""
        marked = bool(name) and "/" not in name and labfiles.look(self.sub, "state/%s.done" % name).exists
        return {"lock_held": flock_held(lock), "marked": marked}

    def witnessed(self) -> Optional[Dict[str, tuple]]:
        """Every open of a watched file so far, by name (None: this lab has no witness)."""
        if self.witness is None:
            return None
        return {name: tuple(self.witness.opened(name)) for name in (COUNTER_NAME, "flaky.sh", "apply.sh")}

    def close(self) -> None:
        if self.witness is not None:
            self.witness.close()
            self.witness = None

    def __getstate__(self) -> dict:
        """What a Result kept for another worker carries of its lab: its paths, not its witness."""
        state = dict(self.__dict__)
        state["witness"] = None
        return state

    @property
    def state(self) -> Path:
        return self.sub / "state"

    def set_fixture_settings(self, env: Mapping[str, str]) -> None:
        """Write the FIXTURE_SETTINGS that `env` sets for the fixtures to read; remove the others."""
        folder = self.bin / SETTINGS
        folder.mkdir(exist_ok=True)
        for variable in FIXTURE_SETTINGS:
            path = folder / variable
            if variable in env:
                path.write_text(env[variable] + "\n")
            elif path.exists():
                path.unlink()

    def hand_over(self) -> None:
        """Give the runner's uid what it may write: the lab's sub folder and the test's scratch space."""
        hand_over([self.sub, self.work], self.user)

    @property
    def runs_log(self) -> Path:
        return self.sub / "runs.jsonl"

    def preexec(self) -> Optional[Callable[[], None]]:
        """What a child must run before exec to be in this lab: join the check's memory bound,
        then see the lab's paths (None: nothing, shared mode without a bound)."""
        enter = self._enter()
        bound = self.memory
        if bound is None:
            return enter

        def bounded_then_enter() -> None:
            bound.join()  # first: in a user namespace of its own, the child could no longer move
            if enter is not None:
                enter()

        return bounded_then_enter

    def _enter(self) -> Optional[Callable[[], None]]:
        if self.mode == CHROOT:
            assert self.system_root is not None
            return roots.enter(self.system_root, str(SUB_DIR))
        if self.mode != NAMESPACE:
            return None
        plan, binds = self.plan, [(self.sub, SUB_DIR), (self.bin, BIN_DIR)]
        assert plan is not None
        return lambda: plan.enter(self.root, binds, self.seen_root, self.account)


def _make_counter(path: Path, user: Optional[RunnerUser]) -> None:
    """The counter, empty: the runner's uid may append to it and read it, not replace or remove it."""
    path.parent.mkdir(mode=0o755)
    path.touch(mode=0o644)
    if user is not None:
        os.chown(str(path), user.uid, user.gid)


def _fill(sub: Path, bin_dir: Path, runner_source: Path) -> None:
    """The lab as a learner finds it: fixtures in bin, runner.py and an empty state/ in sub."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for fixture in sorted(FIXTURES.glob("*.sh")):
        shutil.copyfile(str(fixture), str(bin_dir / fixture.name))
        os.chmod(str(bin_dir / fixture.name), 0o755)
    sub.mkdir(parents=True, exist_ok=True)
    target = sub / "runner.py"
    if runner_source.resolve() != target.resolve():
        shutil.copyfile(str(runner_source), str(target))
    (sub / "state").mkdir(exist_ok=True)


def clear_shared_lab(keep: Path) -> None:
    """Empty the real lab folders for the next test, leaving only `keep` (the runner under test)."""
    for folder in LAB_PATHS:
        if not folder.is_dir():
            continue
        os.chmod(str(folder), 0o755)  # a runner may have made it read-only
        for entry in folder.iterdir():
            if entry != keep:
                labfiles.remove_tree(entry)


def probe_namespace(hidden: Sequence[Path] = (), interpreters: Sequence[str] = ()) -> "tuple[Optional[MountPlan], str]":
    """Can this process give a child a private lab? Returns (plan or None, the reason if not)."""
    try:
        plan = MountPlan.for_this_machine(hidden, interpreters)
    except OSError as error:
        return None, str(error)
    with scratch.folder("pyops-probe-") as root:
        for name in ("sub", "bin", "work", "overlay"):
            (root / name).mkdir()
        binds = [(root / "sub", SUB_DIR), (root / "bin", BIN_DIR)]
        (root / "sub" / "seen").touch()
        # Held over the fork as well: a KeyboardInterrupt raised in a fork handler is only printed
        # ("Exception ignored"), and the probe takes milliseconds.
        with scratch.signals_held():
            why_not = run_entered(["test", "-e", str(SUB_DIR / "seen")], lambda: plan.enter(root, binds))
        return (None, plain_reason(why_not)) if why_not else (plan, "")


def probe_chroot(python: str) -> "tuple[Optional[roots.Roots], str]":
    """Can this process run `python` in a system root of its own? (roots or None, the reason if not)"""
    return roots.probe(python, run_entered)


def run_entered(argv: Sequence[str], enter: Callable[[], None]) -> str:
    """Run `argv` in a child that first runs `enter`; '' if it succeeded, else why not, in words."""
    # subprocess reports a failed preexec_fn only as "Exception occurred in preexec_fn"; the
    # child writes the real reason here first, so the banner can say it in plain words.
    reason_r, reason_w = os.pipe()

    def entered() -> None:
        try:
            enter()
        except OSError as error:
            os.write(reason_w, str(error).encode("utf-8", "replace")[:500])
            raise

    try:
        subprocess.run(
            list(argv),
            preexec_fn=entered,
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
        )
        return ""
    except (OSError, subprocess.SubprocessError) as error:
        os.close(reason_w)
        reason_w = -1
        with os.fdopen(reason_r, "rb") as pipe:
            reason_r = -1
            said = pipe.read().decode("utf-8", "replace").strip()
        return said or (str(error).splitlines()[0] if str(error) else type(error).__name__)
    finally:
        for fd in (reason_r, reason_w):
            if fd >= 0:
                os.close(fd)


def unreachable_lab() -> str:
    """Why this process cannot make the lab's real paths (shared mode), or "" when it can: each
    must exist as a folder it may write, or be made in the nearest folder above that exists."""
    for target in LAB_PATHS:
        folder = target
        while True:
            try:
                found = os.stat(str(folder))
            except FileNotFoundError:
                folder = folder.parent
                continue
            except OSError as error:  # a folder above is closed to this user (/root is 0700)
                return "%s: %s" % (folder, error.strerror)
            if not stat.S_ISDIR(found.st_mode) or not os.access(str(folder), os.W_OK | os.X_OK):
                return "%s is not writable by uid %d" % (folder, os.geteuid())
            break
    return ""


def plain_reason(error: str) -> str:
    """Why a mount namespace could not be made, in words a grader can act on (one line, no errno
    number: `unshare: Operation not permitted`)."""
    error = re.sub(r"^\[Errno \d+\] ", "", error)
    if "Operation not permitted" in error and "unshare" in error:
        if os.geteuid() != 0:
            return "no user namespaces for uid %d (%s)" % (os.geteuid(), error)
        if os.path.exists("/.dockerenv"):  # a container without the capability: say what gives it
            return (
                "this container may not make namespaces (docker run gives it that with --cap-add SYS_ADMIN "
                "--security-opt seccomp=unconfined)"
            )
        return "this process may not make mount namespaces (%s)" % error
    if "Permission denied" in error and "mount" in error:
        return "mounts are refused here (%s): an AppArmor or SELinux profile, or a read-only /proc" % error
    return error


class SharedLock:
    """Serialises shared-mode tests across processes (pytest-xdist workers included)."""

    def __init__(self) -> None:
        self._fd = os.open(str(SHARED_LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def __enter__(self) -> "SharedLock":
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc_info) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)


class LabMaker:
    """Makes the labs of one session: a private one per test, or the real paths one at a time."""

    def __init__(
        self,
        mode: str,
        runner_source: Path,
        session: str,
        hidden: Sequence[Path] = (),
        interpreters: Sequence[str] = (),
    ) -> None:
        self.mode = mode
        self.runner_source = runner_source
        self.session = session  # named in every lab's folder: see remove_labs_of
        self.plan: Optional[MountPlan] = None
        if mode == NAMESPACE:
            self.plan, why_not = probe_namespace(hidden, interpreters)
            if self.plan is None:
                raise OSError("namespace isolation failed in this worker: %s" % why_not)
        if mode == CHROOT:  # the roots hold nothing of the grader's: no need to hide the reference
            self.roots = roots.Roots.found_in(roots.folder())
            if not len(self.roots):
                raise OSError("chroot isolation failed in this worker: no system roots in %s" % roots.folder())

    @contextlib.contextmanager
    def lab(self, user: Optional[RunnerUser] = None) -> Iterator[Lab]:
        """One check's lab, and its memory bound (memory.py) where the machine gives one: made
        first, removed last, once the check has killed what its runners left."""
        bound = memory.bound_for_check(self.session)
        try:
            with self._lab(user) as lab:
                lab.memory = bound
                try:
                    yield lab
                finally:
                    lab.close()
        finally:
            if bound is not None:
                bound.remove()  # refused while a process is in it: the grading's end tries again

    @contextlib.contextmanager
    def _lab(self, user: Optional[RunnerUser] = None) -> Iterator[Lab]:
        if self.mode == CHROOT:
            with self.roots.leased() as system_root, _folder_in(system_root) as root:
                yield Lab(root, self.mode, self.runner_source, None, user, system_root)
            return
        folder = labs_folder(user)
        root = Path(tempfile.mkdtemp(prefix=_lab_prefix(self.session) + "o%s-" % _owner_in(folder), dir=folder))
        alias: Optional[Path] = None
        lock = SharedLock() if self.mode == SHARED else None
        try:
            if self.mode == NAMESPACE:
                _bound(root)
                alias = _alias_for(root)
            if lock is not None:
                lock.__enter__()
                runner_in_place = self.runner_source == SUB_DIR / "runner.py"
                clear_shared_lab(keep=SUB_DIR / "runner.py" if runner_in_place else root)
            yield Lab(root, self.mode, self.runner_source, self.plan, user, seen_root=alias)
        finally:
            if lock is not None:
                lock.__exit__()
                lock.close()
            if alias is not None:
                with contextlib.suppress(OSError):
                    os.unlink(str(alias))
            _remove_lab(root)


@contextlib.contextmanager
def _folder_in(system_root: Path) -> Iterator[Path]:
    """A test's folder in the /tmp of `system_root`, named by the same path inside and outside it.

    The harness gives the runner paths of the test's folder (TMPDIR, a counter file, a file a
    command must write), and reads them afterwards: with a link at /tmp/NAME to the folder at
    SYSTEM_ROOT/tmp/NAME, /tmp/NAME means that folder to both.
    """
    real = Path(tempfile.mkdtemp(prefix="pyops-lab-", dir=str(system_root / "tmp")))
    seen = Path("/tmp") / real.name
    try:
        os.symlink(str(real), str(seen))
    except BaseException:
        labfiles.remove_tree(real)
        raise
    try:
        yield seen
    finally:
        os.unlink(str(seen))
        labfiles.remove_tree(real)


# A grading makes and removes a hundred labs, and its runners write in them: on a tmpfs that costs
# a tenth of what it does on a disk's journaled file system (2 ms against 0.2 ms a lab, ext4 here),
# a tenth of a CPU-second a grading. Only when the user named no temporary folder of their own, and
# only where the fixtures may run (Docker mounts /dev/shm noexec, as do hardened systems) with room
# for any check's files (a container's default /dev/shm has 64 MB).
MEMORY_TMP = "/dev/shm"
MEMORY_TMP_ROOM = 1 << 30
TMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")  # the ones tempfile.gettempdir() reads
# Where labs go when the runner's uid cannot pass through the temporary folder.
PASSABLE_TMP = ("/tmp", "/var/tmp")


def labs_folder(user: Optional[RunnerUser]) -> str:
    """Where labs are made: a roomy /dev/shm, or the temporary folder; one the runner's uid can pass."""
    return _labs_folder(other_uid=user is not None)


def _labs_folder(other_uid: bool) -> str:
    candidates = [tempfile.gettempdir()] + (list(PASSABLE_TMP) if other_uid else [])
    if not any(os.environ.get(name) for name in TMP_VARIABLES) and _room_in(MEMORY_TMP) >= MEMORY_TMP_ROOM:
        candidates.insert(0, MEMORY_TMP)
    for folder in candidates:
        if not other_uid or closed_ancestor(Path(folder) / "lab") is None:
            return folder
    raise OSError("no temporary folder that the runner's uid can reach (tried %s)" % ", ".join(candidates))


def _lab_folders() -> List[str]:
    """Every folder labs_folder may choose: where a grading looks for labs it did not make."""
    return sorted({MEMORY_TMP, tempfile.gettempdir(), *PASSABLE_TMP})


def _lab_prefix(session: str) -> str:
    return "pyops-lab-%s-" % session


# A check's folder is named for the grading that made it (so a later grading can remove it), which
# a runner must not read: in namespace mode the runner sees it, and is given paths in it, under a
# name like mktemp's (tmp.XXXXXXXXXX) in its own /tmp, and the harness names it so too, through a
# link of its own at that path. The link's folder is private to the runner's namespace there, so a
# runner never sees another's; on the machine a dangling one is what a killed grading left.
ALIAS_FOLDER = "/tmp"
_ALIAS_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_ALIAS_LENGTH = 10
# A path through such a link, as a message may quote it (report.py shows it as the lab's).
ALIAS_IN_TEXT = r"[^\s'\"=]*/tmp\.[0-9A-Za-z]{%d}(?![0-9A-Za-z])" % _ALIAS_LENGTH


def _alias_for(root: Path) -> Path:
    """A link to check folder `root` under a neutral name, in ALIAS_FOLDER (else beside `root`)."""
    folder = ALIAS_FOLDER if os.access(ALIAS_FOLDER, os.W_OK | os.X_OK) else str(root.parent)
    while True:
        name = "tmp." + "".join(_ALIAS_LETTERS[byte % len(_ALIAS_LETTERS)] for byte in os.urandom(_ALIAS_LENGTH))
        alias = Path(folder) / name
        try:
            os.symlink(str(root), str(alias))  # fails, never replaces, where the name is taken
            return alias
        except FileExistsError:
            continue


def _remove_dangling_aliases() -> None:
    """Remove this uid's links to check folders that are gone (a killed grading's); never one of
    another uid, never a folder or file."""
    me = os.geteuid()
    for folder in sorted({ALIAS_FOLDER, *_lab_folders()}):
        try:
            names = [name for name in os.listdir(folder) if name.startswith("tmp.")]
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
                if not stat.S_ISLNK(info.st_mode) or info.st_uid != me:
                    continue
                target = os.readlink(path)
                if os.path.basename(target).startswith("pyops-lab-") and not os.path.lexists(target):
                    os.unlink(path)
            except OSError:
                continue


# Each grading holds an flock on an owner file in the folder of its labs for as long as any of its
# processes lives (workers forked from it share the lock), and names its labs after it. A lab whose
# owner file is free belongs to a grading that was killed (SIGKILL, a lost container): the next
# grading removes it (remove_abandoned_labs), where nothing of the killed one could.
OWNER_PREFIX = "pyops-owner-"
_OWNER_IN_NAME = re.compile(r"-o([0-9a-f]{16})-")
_owners: Dict[str, str] = {}  # folder: this grading's owner id there


def _owner_in(folder: str) -> str:
    """This grading's owner id in `folder`; its owner file made, locked and put in place on first use."""
    if folder not in _owners:
        owner = uuid.uuid4().hex[:16]
        # Locked before it has its name: a file under that name is held by a live grading, or free.
        fd, temporary = tempfile.mkstemp(prefix=".%s" % OWNER_PREFIX, dir=folder)  # O_EXCL, O_CLOEXEC, 0600
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(temporary, os.path.join(folder, OWNER_PREFIX + owner))
        _owners[folder] = owner  # the descriptor stays open (and locked) until the process ends
        atexit.register(_let_go, os.path.join(folder, OWNER_PREFIX + owner), os.getpid())
    return _owners[folder]


def claim_owner_files(other_uid: bool) -> None:
    """Make this grading's owner files now, in each folder its labs may be made in, before any
    check process is forked: a fork that made one of its own would end with os._exit, its atexit
    never run, and leave the file behind. Forks inherit these, lock and all."""
    for runs_as_other_uid in sorted({False, other_uid}):
        try:
            _owner_in(_labs_folder(runs_as_other_uid))
        except OSError:
            pass  # no such folder here: the first lab says why, as it did without this


def _let_go(path: str, maker: int) -> None:
    if os.getpid() == maker:  # the process that made it, not a worker forked from it
        with contextlib.suppress(OSError):
            os.unlink(path)


def remove_abandoned_labs() -> None:
    """Remove the labs (and owner files) of gradings of this uid that were killed: those whose
    owner file no process holds. Never follows a link; a folder of another uid is left alone."""
    me = os.geteuid()
    for folder in _lab_folders():
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        free: Dict[str, bool] = {}
        for name in names:
            found = _OWNER_IN_NAME.search(name) if name.startswith("pyops-lab-") else None
            try:
                info = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if found is None or not stat.S_ISDIR(info.st_mode) or info.st_uid != me:
                continue
            owner = found.group(1)
            if owner not in free:
                free[owner] = _free(os.path.join(folder, OWNER_PREFIX + owner))
            if free[owner]:
                _remove_lab(Path(folder) / name)
        # Then the owner files no process holds, whether a lab still named them or not (a worker
        # that ended with os._exit never let go of its own).
        for name in names:
            path = os.path.join(folder, name)
            if name.startswith(OWNER_PREFIX) and (free.get(name[len(OWNER_PREFIX) :]) or _free(path)):
                with contextlib.suppress(OSError):
                    os.unlink(path)
    _remove_dangling_aliases()


def _free(path: str) -> bool:
    """Is owner file `path` ours and held by no process? (Not when it is missing or odd: then unknown.)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # and with it the lock just taken


def labs_of(session: str) -> List[Path]:
    """The labs of grading session `session`, and of the sessions below it, still on this machine."""
    found: List[Path] = []
    for folder in _lab_folders():
        for pattern in (_lab_prefix(session) + "*", _lab_prefix(session + ".*") + "*"):
            found += Path(folder).glob(pattern)
    return found


def remove_labs_of(session: str) -> None:
    """Remove what a grading that was killed left of its labs: in /dev/shm they would take memory
    until the machine restarts."""
    for lab in labs_of(session):
        _remove_lab(lab)
    _remove_dangling_aliases()


# What a check's folder may hold in all (namespace mode): its lab, its scratch space and the
# runner's captured output. A correct runner writes a few MB; a runner that writes files until the
# disk is full stops here (RLIMIT_FSIZE bounds each file, not how many there are).
LAB_SIZE = 128 << 20  # bytes


def _bound(root: Path) -> None:
    """Make the check's folder `root` a memory file system of LAB_SIZE of its own, where this
    process may mount one (root); elsewhere it stays a folder, bounded per file only."""
    try:
        _mount("tmpfs", str(root), "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0700,size=%d" % LAB_SIZE)
    except OSError:
        pass


def _remove_lab(root: Path) -> None:
    """Remove a check's folder and whatever its runner left in it, never following a link."""
    if os.path.ismount(str(root)):
        # Its file system goes at once, with everything in it; a runner namespace that still
        # holds it lets go when its last process ends.
        LIBC.umount2(os.fsencode(str(root)), _MNT_DETACH)
    labfiles.remove_tree(root)


def _room_in(folder: str) -> int:
    """Bytes free in `folder` for labs: 0 where it cannot be written, or its programs cannot run."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return 0
    try:
        stats = os.statvfs(folder)
    except OSError:
        return 0
    if stats.f_flag & os.ST_NOEXEC:
        return 0
    return stats.f_bavail * stats.f_frsize

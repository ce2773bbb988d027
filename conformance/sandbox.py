"""A private copy of the lab for every test.

The runner under test hard-codes /root/pyops/sub and /opt/fixtures/pyops/bin, so every test needs
its own version of those two folders. Two ways to give it one:

* ``namespace``: each process the harness starts enters a private mount namespace in which the
  test's own folders are bind-mounted onto the lab's paths, with /tmp, /var/tmp and /dev/shm
  empty and private to it (its own lab shown again at its path), and a network namespace with no
  network at all. Tests run in parallel and the real
  folders are never touched. A lab path that does not exist on this machine is made inside the
  namespace only, on an overlay of its nearest existing parent, so the machine stays as it was.
* ``chroot``: where no namespace can be made but chroot can (an unprivileged container with
  Docker's default capabilities), each test leases a system root (see roots.py) and its processes
  are chrooted into it, where the test's own folders are the lab's paths. Tests run in parallel.
* ``shared``: where neither can be made, the lab's real paths are used, one test at a time (an
  flock serialises even parallel workers), and whatever was in them before the session is put
  back byte for byte afterwards (see restore.py).
"""

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, List, Mapping, Optional, Sequence

from conformance import labfiles, roots
from conformance.commands import FIXTURE_SETTINGS, SETTINGS
from conformance.identity import RunnerUser, closed_ancestor, hand_over
from conformance.libc import LIBC

SUB_DIR = Path("/root/pyops/sub")
STATE_DIR = SUB_DIR / "state"
BIN_DIR = Path("/opt/fixtures/pyops/bin")
LAB_PATHS = (SUB_DIR, BIN_DIR)


def _fixtures_dir() -> Path:
    """The lab's fixtures: shipped in the package, or fixtures/pyops/bin in a source checkout."""
    checkout = Path(__file__).resolve().parents[1] / "fixtures" / "pyops" / "bin"
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
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_O_PATH = getattr(os, "O_PATH", 0o10000000)


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


@dataclass
class MountPlan:
    """How to put the lab's paths in place inside a fresh mount namespace (computed once)."""

    overlays: List[Path] = field(default_factory=list)  # existing parents to cover
    user_namespace: bool = False
    hidden: List[Path] = field(default_factory=list)  # folders a runner must not read (the reference)
    # The machine's temporary folders each process gets empty and private (PRIVATE_TMP, less any
    # that holds what a runner must run: an interpreter installed below /tmp, say).
    private_tmp: List[str] = field(default_factory=list)

    @classmethod
    def for_this_machine(cls, hidden: Sequence[Path] = (), visible: Sequence[Path] = ()) -> "MountPlan":
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
        private_tmp = [folder for folder in PRIVATE_TMP if not any(Path(folder) in path.parents for path in visible)]
        return cls(overlays, os.geteuid() != 0, [p for p in hidden if p.is_dir()], private_tmp)

    def enter(self, lab_root: Path, binds: List[tuple]) -> None:
        """In a child between fork and exec: make the lab's paths show the test's folders."""
        uid, gid = os.geteuid(), os.getegid()
        # A network of its own (only a loopback, down): a runner reaches no service of the
        # machine's, such as a class's broker on 127.0.0.1, and no other machine.
        flags = _CLONE_NEWNS | _CLONE_NEWNET | (_CLONE_NEWUSER if self.user_namespace else 0)
        _check(LIBC.unshare(flags), "unshare")
        if self.user_namespace:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", "0 %d 1" % uid)
            _write("/proc/self/gid_map", "0 %d 1" % gid)
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
        # Held before anything is mounted over them, so an overlay cannot change what they name
        # (and opened after unshare: a bind mount takes its source from this namespace only).
        held = [(os.open(str(source), _O_PATH | os.O_DIRECTORY), target) for source, target in binds]
        keep_lab = os.open(str(lab_root), _O_PATH | os.O_DIRECTORY)
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
        _private_temporary_folders(self.private_tmp, lab_root, keep_lab)
        os.close(keep_lab)
        os.chdir(str(SUB_DIR))


# The machine's temporary folders, each an empty memory file system of its own in a runner's
# namespace: it sees no other lab (a classmate's, during a class) and no file another runner left,
# and what it writes there is gone with the namespace. Bounded, so a runner cannot fill the memory.
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")
PRIVATE_TMP_SIZE = "256m"


def _private_temporary_folders(folders: Sequence[str], lab_root: Path, keep_lab: int) -> None:
    """Cover `folders` with empty ones, then show the check's own folder (held by `keep_lab`,
    made in one of them) at its path again: the runner is given paths in it."""
    covered = False
    for folder in folders:
        if os.path.isdir(folder) and not os.path.islink(folder):
            _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777,size=%s" % PRIVATE_TMP_SIZE)
            covered = covered or Path(folder) in lab_root.parents
    if covered:
        for ancestor in reversed(lab_root.parents):
            if not ancestor.exists():
                ancestor.mkdir(mode=0o711)
        lab_root.mkdir(mode=0o711)
        _mount("/proc/self/fd/%d" % keep_lab, str(lab_root), None, _MS_BIND)


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
    own helper files (ready files, FLAKY_STATE, captured output).
    """

    def __init__(
        self,
        root: Path,
        mode: str,
        runner_source: Path,
        plan: Optional[MountPlan],
        user: Optional[RunnerUser] = None,
        system_root: Optional[Path] = None,
    ):
        self.root = root
        self.mode = mode
        self.plan = plan
        self.user = user
        self.system_root = system_root  # chroot mode: the root its processes live in
        # The runner's uid passes through root/ (not list it) to work/, which it owns; output/
        # (what the runner printed, kept by the harness) stays the grader's alone.
        os.chmod(str(root), 0o711)
        self.work = root / "work"
        (self.work / "tmp").mkdir(parents=True)  # the runner's TMPDIR
        self.output = root / "output"
        self.output.mkdir(mode=0o700)
        if mode == NAMESPACE:
            self.sub, self.bin = root / "sub", root / "bin"
            (root / "overlay").mkdir()
        elif mode == CHROOT:
            assert system_root is not None
            self.sub, self.bin = system_root / SUB_DIR.relative_to("/"), system_root / BIN_DIR.relative_to("/")
        else:
            self.sub, self.bin = SUB_DIR, BIN_DIR
        _fill(self.sub, self.bin, runner_source)
        self.set_fixture_settings({})  # a system root's bin may still hold an earlier check's

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

    @property
    def applied_log(self) -> Path:
        return self.sub / "applied.log"

    def marker(self, name: str) -> Path:
        return self.state / ("%s.done" % name)

    def preexec(self) -> Optional[Callable[[], None]]:
        """What a child must run before exec to see this lab (None: nothing, shared mode)."""
        if self.mode == CHROOT:
            assert self.system_root is not None
            return roots.enter(self.system_root, str(SUB_DIR))
        if self.mode != NAMESPACE:
            return None
        plan, binds = self.plan, [(self.sub, SUB_DIR), (self.bin, BIN_DIR)]
        assert plan is not None
        return lambda: plan.enter(self.root, binds)


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


def probe_namespace(hidden: Sequence[Path] = (), visible: Sequence[Path] = ()) -> "tuple[Optional[MountPlan], str]":
    """Can this process give a child a private lab? Returns (plan or None, the reason if not)."""
    try:
        plan = MountPlan.for_this_machine(hidden, visible)
    except OSError as error:
        return None, str(error)
    root = Path(tempfile.mkdtemp(prefix="pyops-probe-"))
    try:
        for name in ("sub", "bin", "work", "overlay"):
            (root / name).mkdir()
        binds = [(root / "sub", SUB_DIR), (root / "bin", BIN_DIR)]
        (root / "sub" / "seen").touch()
        why_not = run_entered(["test", "-e", str(SUB_DIR / "seen")], lambda: plan.enter(root, binds))
        return (None, plain_reason(why_not)) if why_not else (plan, "")
    finally:
        shutil.rmtree(str(root), ignore_errors=True)


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


def plain_reason(error: str) -> str:
    """Why a mount namespace could not be made, in words a grader can act on."""
    if "Operation not permitted" in error and "unshare" in error:
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
        self, mode: str, runner_source: Path, session: str, hidden: Sequence[Path] = (), visible: Sequence[Path] = ()
    ) -> None:
        self.mode = mode
        self.runner_source = runner_source
        self.session = session  # named in every lab's folder: see remove_labs_of
        self.plan: Optional[MountPlan] = None
        if mode == NAMESPACE:
            self.plan, why_not = probe_namespace(hidden, visible)
            if self.plan is None:
                raise OSError("namespace isolation failed in this worker: %s" % why_not)
        if mode == CHROOT:  # the roots hold nothing of the grader's: no need to hide the reference
            self.roots = roots.Roots.found_in(roots.folder())
            if not len(self.roots):
                raise OSError("chroot isolation failed in this worker: no system roots in %s" % roots.folder())

    @contextlib.contextmanager
    def lab(self, user: Optional[RunnerUser] = None) -> Iterator[Lab]:
        if self.mode == CHROOT:
            with self.roots.leased() as system_root, _folder_in(system_root) as root:
                yield Lab(root, self.mode, self.runner_source, None, user, system_root)
            return
        root = Path(tempfile.mkdtemp(prefix=_lab_prefix(self.session), dir=labs_folder(user)))
        lock = SharedLock() if self.mode == SHARED else None
        try:
            if lock is not None:
                lock.__enter__()
                runner_in_place = self.runner_source == SUB_DIR / "runner.py"
                clear_shared_lab(keep=SUB_DIR / "runner.py" if runner_in_place else root)
            yield Lab(root, self.mode, self.runner_source, self.plan, user)
        finally:
            if lock is not None:
                lock.__exit__()
                lock.close()
            labfiles.remove_tree(root)  # whatever its runner left in it


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
    candidates = [tempfile.gettempdir()] + (list(PASSABLE_TMP) if user is not None else [])
    if not any(os.environ.get(name) for name in TMP_VARIABLES) and _room_in(MEMORY_TMP) >= MEMORY_TMP_ROOM:
        candidates.insert(0, MEMORY_TMP)
    for folder in candidates:
        if user is None or closed_ancestor(Path(folder) / "lab") is None:
            return folder
    raise OSError("no temporary folder that the runner's uid can reach (tried %s)" % ", ".join(candidates))


def _lab_prefix(session: str) -> str:
    return "pyops-lab-%s-" % session


def labs_of(session: str) -> List[Path]:
    """The labs of grading session `session`, and of the sessions below it, still on this machine."""
    found: List[Path] = []
    for folder in sorted({MEMORY_TMP, tempfile.gettempdir(), *PASSABLE_TMP}):  # wherever labs_folder chose
        for pattern in (_lab_prefix(session) + "*", _lab_prefix(session + ".*") + "*"):
            found += Path(folder).glob(pattern)
    return found


def remove_labs_of(session: str) -> None:
    """Remove what a grading that was killed left of its labs: in /dev/shm they would take memory
    until the machine restarts."""
    for lab in labs_of(session):
        labfiles.remove_tree(lab)


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

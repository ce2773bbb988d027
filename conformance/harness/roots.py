"""System roots: private labs where no mount namespace can be made (the chroot isolation mode).

An unprivileged container (a grading platform's, or `docker run --cap-drop ALL`) cannot make
mount namespaces, so every check would have to use the one real lab, one at a time: half a
minute of waiting. It can usually chroot (CAP_SYS_CHROOT is in Docker's default set). A system
root is a folder that holds this machine's programs and libraries as hard links (`/usr`, `/etc`
and the merged-usr links), a few device nodes, and nothing of the grader's: a runner chrooted
into it finds `/root/pyops/sub` and `/opt/fixtures/pyops/bin` of its own check, and neither the
reference runner nor the suite. Each check leases a root for as long as it runs, so checks run in
parallel as in namespace mode.

Roots are made once, where device nodes can be made (an image's build, as root):
`pyops-conformance roots make [--count N] [--folder DIR]`. Hard links cost no space; a root made
where links are impossible (another file system) is a copy. Make them again after the system's
packages change, or the roots keep the old programs.
"""

import contextlib
import fcntl
import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Sequence

from conformance.harness import labfiles

# Where the roots are, unless PYOPS_ROOTS says otherwise.
DEFAULT_FOLDER = Path("/var/lib/pyops-conformance/roots")
DEFAULT_COUNT = 8
# What a root shows of the machine: programs, libraries and their settings (a merged-usr
# system has links for bin, sbin and lib*; an older one has folders).
SYSTEM = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# The device nodes programs open by name (subprocess.DEVNULL is /dev/null).
DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9)}
# Where a runner (any uid) may write inside a root: emptied before each lease.
SCRATCH = ("tmp", "var/tmp")
# The lab's own folders, made afresh for each check by the sandbox.
LAB_TOPS = ("root", "opt")


def folder() -> Path:
    return Path(os.environ.get("PYOPS_ROOTS") or DEFAULT_FOLDER)


def make(where: Path, count: int, system: Path = Path("/")) -> List[Path]:
    """Make `count` roots in `where` (replacing any there); returns them."""
    where.mkdir(parents=True, exist_ok=True)
    os.chmod(str(where), 0o755)  # the runner's uid passes through to its root's /tmp, never lists
    made = []
    for number in range(count):
        root = where / str(number)
        if root.exists():
            labfiles.remove_tree(root)
        try:
            _fill(root, system)
        except BaseException:
            labfiles.remove_tree(root)  # half a root would pass for one: none, and the probe says so
            raise
        made.append(root)
    return made


def _fill(root: Path, system: Path) -> None:
    """One root: the system's programs and settings as links, the devices, the scratch folders."""
    root.mkdir(mode=0o755)
    for name in SYSTEM:
        source = system / name
        if source.is_symlink():
            os.symlink(os.readlink(str(source)), str(root / name))
        elif source.is_dir():
            _link_tree(source, root / name)
    (root / "dev").mkdir(mode=0o755)
    for name, (major, minor) in DEVICES.items():
        os.mknod(str(root / "dev" / name), 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(str(root / "dev" / name), 0o666)  # mknod's mode is cut by the umask
    for name in SCRATCH:
        (root / name).mkdir(parents=True, exist_ok=True)
        os.chmod(str(root / name), 0o1777)


def _link_tree(source: Path, target: Path) -> None:
    """`source` as hard links at `target` (GNU cp keeps owners, modes and links); a copy if links fail."""
    linked = subprocess.run(["cp", "-a", "--link", str(source), str(target)], stderr=subprocess.PIPE)
    if linked.returncode != 0:
        labfiles.remove_tree(target)
        subprocess.run(["cp", "-a", str(source), str(target)], check=True)


class Roots:
    """The roots of one folder, leased one check at a time across every grading on this machine."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = list(roots)

    @classmethod
    def found_in(cls, where: Path) -> "Roots":
        numbered = [path for path in where.iterdir() if path.name.isdigit() and path.is_dir()] if where.is_dir() else []
        return cls(sorted(numbered, key=lambda path: int(path.name)))

    def __len__(self) -> int:
        return len(self.roots)

    @contextlib.contextmanager
    def leased(self) -> Iterator[Path]:
        """A root of this check's own, emptied of what an earlier check left (waits while all are taken)."""
        while True:
            for root in self.roots:
                fd = os.open(str(root), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    continue
                try:
                    empty(root)
                    yield root
                finally:
                    os.close(fd)  # releases the lease
                return
            time.sleep(0.05)  # every root is some check's right now (of this or another grading)


def empty(root: Path) -> None:
    """Leave `root` as made: no lab folders, nothing in its scratch folders."""
    for name in LAB_TOPS:
        labfiles.remove_tree(root / name)
    for name in SCRATCH:
        labfiles.empty_folder(root / name)
    (root / "root").mkdir(mode=0o711)  # /root of a learner's machine: passable, not listable
    os.chmod(str(root / "root"), 0o711)
    (root / "opt").mkdir(mode=0o755)


def enter(root: Path, cwd: str) -> Callable[[], None]:
    """What a child runs between fork and exec to live in `root`, starting in `cwd` there."""

    def preexec() -> None:
        try:
            os.chroot(str(root))
        except OSError as error:  # said as "chroot ROOT: REASON", so a probe can tell what failed
            raise OSError(error.errno, "chroot %s: %s" % (root, error.strerror)) from None
        os.chdir(cwd)

    return preexec


Entered = Callable[[Sequence[str], Callable[[], None]], str]


def probe(python: str, run_entered: Entered) -> "tuple[Optional[Roots], str]":
    """Can this process run `python` in a root of its own? Returns (the roots or None, why not).

    `run_entered(argv, preexec)` runs argv in a child after preexec and returns why it failed ('' if
    it did not).
    """
    where = folder()
    roots = Roots.found_in(where)
    if not roots.roots:
        return None, "no system roots in %s (make them with: pyops-conformance roots make)" % where
    if os.geteuid() != 0:
        return None, "chroot needs root"
    if not os.access(str(roots.roots[0]) + python, os.X_OK):
        return None, "the runner's interpreter %s is not in the system roots (%s)" % (python, where)
    with roots.leased() as root:
        why_not = run_entered([python, "-c", "open('/dev/null').close()"], enter(root, "/"))
    if why_not:
        if why_not.startswith("[Errno 1] chroot"):
            why_not = "this process may not chroot (%s): in a container, add --cap-add SYS_CHROOT" % why_not
        return None, why_not
    return roots, ""

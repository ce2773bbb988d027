"""A check's memory, bounded: its runner and everything the check starts in its lab share one
memory cgroup, made for the check below the grader's own and removed after it.

The kernel charges a cgroup for its processes' pages and for the pages they write into memory file
systems (the lab's, the private temporary folders), so CHECK_MEMORY bounds both: a runner that
goes past it has a process killed by the kernel's OOM killer inside its own cgroup, never one of
the grader's or of another check, and its check fails as any killed runner's does.

Where: cgroup v1's memory hierarchy as root (the grader's own cgroup may have children), or a
cgroup v2 whose grader's cgroup already delegates the memory controller to its children (a v2
cgroup with processes of its own cannot turn it on). Elsewhere (a container whose cgroup file
system is read-only, a grader without root) a check has no bound of its own: `available()` says
why, and the container's or the machine's bound is the one that holds. A runner can leave its
cgroup no more than it can make namespaces (syscall_filter.py): moving a process takes write
access to the cgroup files, which are root's.
"""

import os
import uuid
from pathlib import Path
from typing import Optional, Tuple

# What one check's processes may hold in all: pages and memory file systems. A runner and its
# commands need some tens of MB; a fork flood of RUNNER_PROCESSES python processes some hundreds.
CHECK_MEMORY = 1 << 30
# Neutral, as every name a runner can read (its cgroup namespace shows it none; /sys would).
_PREFIX = "task-"
_ROOT = Path("/sys/fs/cgroup")


def _own_cgroup() -> Tuple[Optional[Path], str]:
    """Where this process's memory cgroup's children are made, and which version; or None and why."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError as error:
        return None, "no /proc/self/cgroup (%s)" % error.strerror
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return _ROOT / "memory" / path.lstrip("/"), "v1"
    for line in lines:
        if line.startswith("0::"):
            folder = _ROOT / line[3:].lstrip("/")
            try:
                delegated = "memory" in (folder / "cgroup.subtree_control").read_text().split()
            except OSError:
                delegated = False
            if delegated:
                return folder, "v2"
            return None, "cgroup v2 without the memory controller delegated to this process's cgroup"
    return None, "no memory cgroup"


def available() -> Tuple[bool, str]:
    """Can checks here get a memory cgroup of their own (and if not, why)?"""
    if os.geteuid() != 0:
        return False, "not root"
    folder, version = _own_cgroup()
    if folder is None:
        return False, version
    if not os.access(str(folder), os.W_OK):
        return False, "%s is not writable (a read-only cgroup file system)" % folder
    return True, version


class MemoryBound:
    """One check's memory cgroup: made with its limit, joined by the check's processes before
    they exec (`join`, in a child), removed once they are gone (`remove`)."""

    def __init__(self, folder: Path, version: str) -> None:
        self.folder = folder
        limits = ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") if version == "v1" else ("memory.max",)
        folder.mkdir(mode=0o700)
        try:
            for name in limits:
                if (folder / name).exists():  # memsw: only where swap is accounted
                    (folder / name).write_text(str(CHECK_MEMORY))
            if version == "v2" and (folder / "memory.swap.max").exists():
                (folder / "memory.swap.max").write_text("0")  # swap would hold what the bound refuses
            # Opened now: a child between fork and exec only writes to it.
            self._procs = os.open(str(folder / "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            folder.rmdir()
            raise

    def join(self) -> None:
        """In a child between fork and exec: move this process (and so all it starts) in."""
        os.write(self._procs, b"0")

    def remove(self) -> bool:
        """Remove the cgroup once no process is left in it (the check has killed them); False if
        one still is."""
        os.close(self._procs)
        try:
            self.folder.rmdir()
        except OSError:
            return False
        return True


def bound_for_check(session: str) -> Optional[MemoryBound]:
    """A memory cgroup for one check of grading `session`, or None where there can be none."""
    usable, version = available()
    if not usable:
        return None
    folder, _ = _own_cgroup()
    assert folder is not None
    try:
        return MemoryBound(folder / ("%s%s-%s" % (_PREFIX, session, uuid.uuid4().hex[:8])), version)
    except OSError:
        return None  # made impossible meanwhile (a cgroup file system remounted): no bound, as above


def remove_left(session: str) -> None:
    """Remove the check cgroups of `session` (and the sessions below it) that are left: those whose
    processes outlived their check's own removal. Empty ones only; the kernel refuses the others."""
    folder, _ = _own_cgroup()
    if folder is None:
        return
    try:
        names = os.listdir(str(folder))
    except OSError:
        return
    for name in names:
        if name.startswith(_PREFIX + session + "-") or name.startswith(_PREFIX + session + "."):
            try:
                os.rmdir(str(folder / name))
            except OSError:
                pass

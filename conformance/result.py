"""What one runner invocation produced, and what it left in the lab."""

import dataclasses
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from conformance import records as runs_jsonl

if TYPE_CHECKING:  # only for annotations
    from conformance.sandbox import Lab

# The work folder's files an observation keeps (counters are a few lines): each, and all together.
WORK_FILE_LIMIT, WORK_FILES_LIMIT = 64 * 1024, 1 << 20
# How much of each stream and file a failure message shows.
TAIL_LINES = 12
TAIL_CHARS = 2000


@dataclass(frozen=True)
class ProcessInfo:
    """A process the runner started, as the harness saw it (a survivor, say)."""

    pid: int
    argv: Sequence[str]
    ignores_term: bool = False  # SIGTERM set to be ignored: it got the signal and lived on

    def __str__(self) -> str:
        shown = "pid %d: %s" % (self.pid, " ".join(self.argv) or "(no argv)")
        return shown + (" (ignores SIGTERM)" if self.ignores_term else "")


def small_files(folder: Path) -> Dict[str, bytes]:
    """The test's own files next to the lab (counters a command wrote, flaky.sh's state).

    The folder is the runner's to write, and a runner is untrusted: links are not followed
    (O_NOFOLLOW: one swapped in meanwhile is not read either), and what is kept is bounded.
    """
    kept: Dict[str, bytes] = {}
    room = WORK_FILES_LIMIT
    for name in sorted(os.listdir(str(folder))):
        try:
            fd = os.open(str(folder / name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue  # a link, gone meanwhile, or not to be opened
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            data = os.read(fd, min(WORK_FILE_LIMIT, room) + 1)
        finally:
            os.close(fd)
        if len(data) <= WORK_FILE_LIMIT and len(data) <= room:
            kept[name] = data
            room -= len(data)
    return kept


def tail(data: bytes, lines: int = TAIL_LINES, width: Optional[int] = None, more: str = "... (%d characters)") -> str:
    """The last `lines` lines of `data` as text, each cut to `width` characters if given (then
    `more` says its length)."""
    text = data.decode("utf-8", "replace")
    kept = text.splitlines()[-lines:]
    if width is not None:
        kept = [line if len(line) <= width else line[:width] + more % len(line) for line in kept]
    shown = "\n".join(kept)
    if len(shown) > TAIL_CHARS:
        shown = "..." + shown[-TAIL_CHARS:]
    elif len(kept) < len(text.splitlines()):
        shown = "...\n" + shown
    return shown


@dataclass
class Result:
    """A finished runner: exit code, output, timing, survivors, and the lab it ran in."""

    args: List[str]
    rc: Optional[int]  # None: it did not finish and the harness killed it
    hung_after_s: Optional[float]
    duration_s: float
    ended_at: float  # time.time() when the runner exited (or was killed), to compare with files
    ended: float  # the same moment on timing.now()'s clock, to compare with process start times
    stdout: bytes
    stderr: bytes
    survivors: Sequence[ProcessInfo]
    lab: "Lab"
    notes: List[str] = field(default_factory=list)
    # The lab's files as they were when the runner ended (see kept_apart): a Result another
    # check reuses outlives its lab.
    lab_files: Optional[Dict[str, Any]] = None
    # Of duration_s, the time the runner (or the harness starting it) was ready to run but waited
    # for a CPU: a busy machine's share of its lateness (see cpuwait.py).
    cpu_wait_s: float = 0.0

    def kept_apart(self) -> "Result":
        """A copy that no longer reads its lab: what the runner left there is read now, once."""
        if self.lab_files is not None:
            return dataclasses.replace(self, notes=list(self.notes))
        files: Dict[str, Any] = {"runs": self.runs_bytes(), "applied": self.applied(), "markers": self.markers()}
        files["marker_files"] = [name for name in files["markers"] if (self.lab.state / name).is_file()]
        files["work"] = small_files(self.lab.work)
        return dataclasses.replace(self, lab_files=files, notes=list(self.notes))

    def work_file(self, name: str) -> bytes:
        """A file of the lab's work folder as it was when the runner ended (b"" when there is none)."""
        if self.lab_files is not None:
            return self.lab_files["work"].get(name, b"")
        try:
            return (self.lab.work / name).read_bytes()
        except OSError:
            return b""

    def __repr__(self) -> str:
        ending = "hung, killed after %.1fs" % self.hung_after_s if self.hung_after_s else "rc=%s" % self.rc
        return "<Result %s in %.2fs: runner.py %s>" % (ending, self.duration_s, " ".join(self.args))

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def runs_bytes(self) -> bytes:
        if self.lab_files is not None:
            return self.lab_files["runs"]
        try:
            return self.lab.runs_log.read_bytes()
        except OSError:
            return b""

    def records(self) -> List[runs_jsonl.Record]:
        return runs_jsonl.parse(self.runs_bytes())

    def applied(self) -> List[str]:
        """Lines of applied.log: one per call of apply.sh."""
        if self.lab_files is not None:
            return list(self.lab_files["applied"])
        try:
            return self.lab.applied_log.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def marked(self, name: str) -> bool:
        """Is there a marker file state/NAME.done (a regular file: a folder of that name is none)?"""
        if self.lab_files is not None:
            return "%s.done" % name in self.lab_files["marker_files"]
        return self.lab.marker(name).is_file()

    def markers(self) -> List[str]:
        if self.lab_files is not None:
            return list(self.lab_files["markers"])
        try:
            return sorted(p.name for p in self.lab.state.iterdir() if p.name.endswith(".done"))
        except OSError:
            return []

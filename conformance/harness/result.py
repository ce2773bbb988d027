"""What one runner invocation produced, and what it left in the lab."""

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from conformance.harness import labfiles
from conformance.harness.witness import Opened
from conformance.lab import records as runs_jsonl
from conformance.lab import timing
from conformance.lab.commands import APPLY, FLAKY, FLAKY_STATE, SHELLS, starts

if TYPE_CHECKING:  # only for annotations
    from conformance.harness.sandbox import Lab

# The work folder's files an observation keeps (counters are a few lines): each, and all together.
WORK_FILE_LIMIT, WORK_FILES_LIMIT = 64 * 1024, 1 << 20
# runs.jsonl of a whole check holds a few dozen lines of a few hundred bytes; applied.log a few names.
RUNS_LIMIT, APPLIED_LIMIT = 1 << 20, 64 * 1024
# The lab files a check judges (keys of Result.lab_files), as the lab names them, and the clause that
# judges each: one that is not a regular file (a link, a FIFO, a folder) fails that clause, unread.
LAB_FILES = {"runs": ("runs.jsonl", "S7.1"), "applied": ("applied.log", "S4.2"), "markers": ("state", "S4.3")}
MARKER_CLAUSE, LOCK_CLAUSE = "S4.3", "S5.1"
# The most a counter of calls may hold: some thousand calls' start times.
COUNTER_LIMIT = 64 * 1024
# How much of each stream and file a failure message shows.
TAIL_LINES = 12
TAIL_CHARS = 2000


@dataclass(frozen=True)
class ProcessInfo:
    """A process the runner started, as the harness saw it (a survivor, say)."""

    pid: int
    argv: Sequence[str]
    ignores_term: bool = False  # SIGTERM set to be ignored: it got the signal and lived on
    started: Optional[float] = None  # on timing.now()'s clock, to a clock tick (None: unknown)
    # When the leader of its process group started (None: unknown, or the leader is gone): a
    # command a runner starts in a session of its own leads its group.
    group_started: Optional[float] = None


def small_files(folder: Path) -> Dict[str, bytes]:
    """The test's own files next to the lab (counters a command wrote, flaky.sh's state).

    The folder is the runner's to write, and a runner is untrusted: only regular files are read,
    never through a link (labfiles), and what is kept is bounded.
    """
    kept: Dict[str, bytes] = {}
    room = WORK_FILES_LIMIT
    for name in labfiles.listing(folder.parent, folder.name).regular():
        found = labfiles.read(folder, name, min(WORK_FILE_LIMIT, room))
        if found.exists and found.refused is None:
            kept[name] = found.data
            room -= len(found.data)
    return kept


def _read_lab(lab: "Lab", key: str) -> Tuple[Any, Optional[labfiles.LabFile]]:
    """(what a check reads of the lab file `key` of LAB_FILES, the file if it was refused)."""
    if key == "markers":
        state = labfiles.listing(lab.sub, "state")
        if state.refused:
            return [], labfiles.LabFile(state.name, exists=True, refused=state.refused)
        return sorted(name for name in state.entries if name.endswith(".done")), None
    found = labfiles.read(lab.sub, LAB_FILES[key][0], RUNS_LIMIT if key == "runs" else APPLIED_LIMIT)
    if found.refused:
        return (b"" if key == "runs" else []), found
    return (found.data if key == "runs" else found.data.decode("utf-8", "replace").splitlines()), None


def counted_calls(lab: "Lab", witnessed: Optional[Dict[str, Tuple[Opened, ...]]], kept, clause: str) -> List[float]:
    """The starts of the counted command's calls in `lab`: each process the witness saw open the
    counter to append to it, as the counted command's own shell does (the kernel's start of the
    call, which no runner can move); where the lab had no witness, the times the calls wrote
    (`kept`: the counter as read when the runner ended, else read now)."""
    if witnessed is not None:
        appends = '>> "%s"' % lab.counter
        calls = {
            (seen.pid, seen.started)
            for seen in witnessed["calls"]
            if _a_shell(seen) and any(appends in arg for arg in seen.argv)
        }
        return sorted(started for _, started in calls)
    found = kept if kept is not None else labfiles.read(lab.root / "counted", "calls", COUNTER_LIMIT)
    if found.refused:
        raise labfiles.LabFileRefused("counted/calls", found.refused, clause, found.limit)
    # Written by `date` (the epoch's clock): moved onto timing.now()'s, as the witness's are.
    epoch_ahead = time.time() - timing.now()
    return [started - epoch_ahead for started in starts(found.data)]


def _a_shell(seen: Opened, script: str = "") -> bool:
    """Is the opener a shell (or, where its executable could not be read, named as one or as the
    `script` it runs)? The runner's own interpreter, whose arguments name the same files, is not."""
    if seen.program:
        return seen.program in SHELLS
    return seen.name in SHELLS + ((script,) if script else ())


def runs_of(witnessed: Optional[Dict[str, Tuple[Opened, ...]]], name: str, path: str) -> Optional[List[Opened]]:
    """The runs of fixture `name` (at `path`) the witness saw: a shell, by its executable, which a
    runner cannot rename as it can its argv, reading the script with its arguments. A runner that
    imitates the fixture (writes its traces, prints its words) shows none. None: no witness.

    Where the grader may not read another uid's executable (a container without CAP_SYS_PTRACE),
    the process's name stands in for it: the shell's, or the script's that the kernel gives a
    process started through its #! line. A runner could set that name on purpose; not by imitating.
    """
    if witnessed is None:
        return None
    runs: Dict[Tuple[int, float], Opened] = {}
    for seen in witnessed[name]:
        if is_run_of(seen, path):
            runs.setdefault((seen.pid, seen.started), seen)
    return sorted(runs.values(), key=lambda run: run.started)


def is_run_of(seen: Opened, path: str, *arguments: str) -> bool:
    """Is `seen` a shell running the fixture at `path` (with these first arguments, if given)?"""
    return _a_shell(seen, os.path.basename(path)) and seen.argv[1 : 2 + len(arguments)] == (path,) + arguments


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
    # How late the machine itself can have made it (cpuwait.machine_wait_s): measured in a check's
    # last play only, None otherwise.
    machine_wait_s: Optional[float] = None
    # When the check sent the runner SIGTERM, on timing.now()'s clock (None: it sent none).
    terminated_at: Optional[float] = None
    # What the lab's witness saw by the time the runner ended: every open of the counter and of
    # the fixtures, by name, since the lab was made (None: the lab had no witness; see witness.py).
    witnessed: Optional[Dict[str, Tuple[Opened, ...]]] = None

    def kept_apart(self) -> "Result":
        """A copy that no longer reads its lab: what the runner left there is read now, once."""
        if self.lab_files is not None:
            return dataclasses.replace(self, notes=list(self.notes))
        files: Dict[str, Any] = {"refused": {}}
        for key in LAB_FILES:
            files[key], refused = _read_lab(self.lab, key)
            if refused is not None:
                files["refused"][key] = refused
        state = labfiles.listing(self.lab.sub, "state")
        files["marker_kinds"] = {name: state.entries[name] for name in files["markers"] if name in state.entries}
        files["work"] = small_files(self.lab.work)
        files["counter"] = labfiles.read(self.lab.root / "counted", "calls", COUNTER_LIMIT)
        return dataclasses.replace(self, lab_files=files, notes=list(self.notes))

    def _lab_file(self, key: str) -> Tuple[Any, Optional[labfiles.LabFile]]:
        """The lab file `key` of LAB_FILES as a check reads it, and the file itself if it was refused."""
        if self.lab_files is not None:
            return self.lab_files[key], self.lab_files.get("refused", {}).get(key)
        return _read_lab(self.lab, key)

    def _judged(self, key: str) -> Any:
        """The lab file `key` for a check to judge; LabFileRefused (its clause's failure) if not a regular file."""
        value, refused = self._lab_file(key)
        if refused is not None:
            raise labfiles.LabFileRefused(
                refused.name, refused.refused or "link", LAB_FILES[key][1], refused.limit, self
            )
        return value

    def refused_files(self) -> List[labfiles.LabFile]:
        """What the runner left in place of the lab files a check judges, where it was refused (for the evidence)."""
        return [refused for refused in (self._lab_file(key)[1] for key in LAB_FILES) if refused is not None]

    def work_file(self, name: str) -> bytes:
        """A file of the lab's work folder as it was when the runner ended (b"" when there is none)."""
        if self.lab_files is not None:
            return self.lab_files["work"].get(name, b"")
        return labfiles.read(self.lab.work, name, WORK_FILE_LIMIT).data

    def calls(self, clause: str) -> List[float]:
        """When each call of the lab's counted command (commands.counted) started, in order, on
        timing.now()'s clock: see counted_calls. LabFileRefused, `clause`'s failure, where only the
        counter's lines could say it and they are no regular file."""
        if self.lab_files is not None:
            return counted_calls(self.lab, self.witnessed, self.lab_files["counter"], clause)
        return counted_calls(self.lab, self.witnessed, None, clause)

    def apply_runs(self) -> Optional[List[Opened]]:
        """The fixture's apply.sh run by a process of the lab (its own shell, seen by the witness),
        once per run, in the order they started; None where the lab had no witness."""
        return runs_of(self.witnessed, "apply.sh", APPLY)

    def own_apply_runs(self) -> List[Opened]:
        """apply_runs() that started while this runner ran (not an earlier call's in the same lab);
        [] where the lab had no witness."""
        began = self.ended - self.duration_s - 1.0 / timing.CLOCK_TICKS  # a start is rounded down to a tick
        return [run for run in self.apply_runs() or () if run.started >= began]

    def flaky_calls(self) -> int:
        """How often flaky.sh had been called in the lab when the runner ended: the runs the witness
        saw, or where there was none, flaky.sh's own count (FLAKY_STATE in the work folder)."""
        runs = runs_of(self.witnessed, "flaky.sh", FLAKY)
        if runs is not None:
            return len(runs)
        return int(self.work_file(FLAKY_STATE).strip() or 0)

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
        """runs.jsonl as the runner left it (LabFileRefused: S7.1's failure, if it is not a regular file)."""
        return self._judged("runs")

    def runs_seen(self) -> bytes:
        """runs.jsonl for the evidence: b"" where it was refused (refused_files says why)."""
        return self._lab_file("runs")[0]

    def records(self) -> List[runs_jsonl.Record]:
        return runs_jsonl.parse(self.runs_bytes())

    def applied(self) -> List[str]:
        """The NAME of each call of apply.sh: as the witness saw the fixture run, else the lines of
        applied.log (one per call, written by apply.sh, and rewritable by the runner's uid)."""
        runs = self.apply_runs()
        if runs is not None:
            return [run.argv[2] if len(run.argv) > 2 else "" for run in runs]
        return list(self._judged("applied"))

    def applied_seen(self) -> List[str]:
        """applied.log for the evidence: [] where it was refused."""
        return list(self._lab_file("applied")[0])

    def marked(self, name: str) -> bool:
        """Is there a marker state/NAME.done? (LabFileRefused, S4.3's failure, if something else is in its place.)"""
        markers = self._judged("markers")
        marker = "%s.done" % name
        if marker not in markers:
            return False
        if self.lab_files is not None:
            kind = self.lab_files.get("marker_kinds", {}).get(marker)
        else:
            kind = labfiles.listing(self.lab.sub, "state").entries.get(marker, "link")
        if kind is not None:
            raise labfiles.LabFileRefused("state/" + marker, kind, MARKER_CLAUSE, result=self)
        return True

    def markers(self) -> List[str]:
        return list(self._judged("markers"))

    def markers_seen(self) -> List[str]:
        """The markers for the evidence: [] where state/ was refused."""
        return list(self._lab_file("markers")[0])

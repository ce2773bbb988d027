"""What one runner invocation produced, and what it left in the lab."""

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

if TYPE_CHECKING:  # only for annotations: processes imports this module
    from conformance.processes import ProcessInfo
    from conformance.sandbox import Lab

# How much of each stream and file a failure message shows.
TAIL_LINES = 12
TAIL_CHARS = 2000


@dataclass
class Record:
    """One line of runs.jsonl: the parsed object, or why it could not be parsed."""

    line: bytes
    value: Any = None
    problem: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def read_records(data: bytes) -> List[Record]:
    records = []
    for line in data.splitlines():
        if not line.strip():
            records.append(Record(line, problem="blank line"))
            continue
        try:
            value = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            records.append(Record(line, problem="not UTF-8"))
        except ValueError as error:
            records.append(Record(line, problem="not JSON (%s)" % error))
        else:
            problem = None if isinstance(value, dict) else "a JSON %s, not an object" % type(value).__name__
            records.append(Record(line, value, problem))
    return records


def tail(data: bytes, lines: int = TAIL_LINES) -> str:
    text = data.decode("utf-8", "replace")
    kept = text.splitlines()[-lines:]
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
    stdout: bytes
    stderr: bytes
    survivors: Sequence["ProcessInfo"]
    lab: "Lab"
    notes: List[str] = field(default_factory=list)

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
        try:
            return self.lab.runs_log.read_bytes()
        except OSError:
            return b""

    def records(self) -> List[Record]:
        return read_records(self.runs_bytes())

    def applied(self) -> List[str]:
        """Lines of applied.log: one per call of apply.sh."""
        try:
            return self.lab.applied_log.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def markers(self) -> List[str]:
        try:
            return sorted(p.name for p in self.lab.state.iterdir() if p.name.endswith(".done"))
        except OSError:
            return []

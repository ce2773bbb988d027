"""Observe once, judge many: each scenario is played once per grading and judged by every check.

A scenario is one runner call, or a short sequence of calls with what the harness saw meanwhile
(a lock probed while apply.sh runs). The first check that asks for it plays it in its own fresh
lab; every other check of the grading judges what was seen then, by its own criteria and with
its own message. A timed-out hang.sh answers S2.1 to S2.4 and S7.3 at once.

The pytest-xdist workers of one grading share what they saw through a folder only the grader can
open: the first worker to ask plays the scenario while holding its lock, a worker that asks
meanwhile waits for it (waiting costs no CPU), and each keeps a copy in memory.
"""

import dataclasses
import fcntl
import hashlib
import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, Hashable, Optional

from conformance.harness.result import Result


def new_folder() -> str:
    """A folder for one grading's observations, readable by the grader only."""
    return tempfile.mkdtemp(prefix="pyops-observations-")


def remove_folder(folder: Optional[str]) -> None:
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


class Observations:
    """What one grading has seen, by scenario key; `folder` shares it between processes."""

    def __init__(self, folder: Optional[str] = None) -> None:
        self.folder = Path(folder) if folder else None
        self._seen: Dict[Hashable, Any] = {}

    def get(self, key: Hashable, play: Callable[[], Any]) -> Any:
        """What scenario `key` showed, playing it with `play()` if no check of this grading has yet."""
        if key not in self._seen:
            self._seen[key] = self._shared(key, play) if self.folder else kept_apart(play())
        return fresh(self._seen[key])

    def _shared(self, key: Hashable, play: Callable[[], Any]) -> Any:
        assert self.folder is not None
        name = hashlib.sha256(repr(key).encode("utf-8")).hexdigest()[:32]
        seen = self.folder / (name + ".pickle")
        lock = os.open(str(self.folder / (name + ".lock")), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be playing it right now
            if seen.exists():
                # Written by this grading's own processes, in a folder only the grader can open.
                return pickle.loads(seen.read_bytes())
            value = kept_apart(play())
            partial = seen.with_suffix(".partial")
            partial.write_bytes(pickle.dumps(value))
            partial.replace(seen)
            return value
        finally:
            os.close(lock)


def kept_apart(value: Any) -> Any:
    """`value` with every Result in it reading its lab now, once: it will outlive that lab."""
    return _each_result(value, Result.kept_apart)


def fresh(value: Any) -> Any:
    """A copy a check may add notes to without the next check seeing them."""
    return _each_result(value, lambda result: dataclasses.replace(result, notes=list(result.notes)))


def _each_result(value: Any, change: Callable[[Result], Result]) -> Any:
    """`value` with `change` applied to every Result in it (in tuples, dicts and dataclasses)."""
    if isinstance(value, Result):
        return change(value)
    if isinstance(value, tuple):
        return tuple(_each_result(item, change) for item in value)
    if isinstance(value, dict):
        return {name: _each_result(item, change) for name, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {field.name: _each_result(getattr(value, field.name), change) for field in dataclasses.fields(value)}
        return dataclasses.replace(value, **fields)
    return value

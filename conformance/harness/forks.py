"""Checks run in parallel by processes forked from the grading's own, once it has collected them.

pytest-xdist starts every worker as a new interpreter that imports pytest and the suite and
collects the checks again: 0.7 to 0.8 CPU-seconds each, most of what a grading costs beyond its
runner calls. A fork costs milliseconds and inherits all of that. The controller hands out one
check at a time, slowest first, to whichever fork asks; each fork runs the check's whole
protocol (setup, call with its replays, teardown) and sends back its reports, which the
controller logs as if it had run the check: the terminal, the learner view, the JSON report and
the exit status see no difference. pytest-xdist stays for plain `pytest -n N`.

Nothing may hold a lock or a thread when the forks are made: the grading's scenario played ahead
starts after them (plugin.PlayAhead).
"""

import gc
import os
import pickle
import select
import signal
import struct
import sys
import time
import traceback
from typing import Callable, Dict, List, Optional

import pytest
from _pytest.runner import runtestprotocol

_FRAME = struct.Struct("!I")
_STOP = 0xFFFFFFFF  # in place of a check's index: no more checks
# How long forks may take to end their check once told to stop (an interrupted grading).
_STOP_PATIENCE_S = 10.0


def run(session: pytest.Session, forks: int, then: Callable[[], None]) -> None:
    """Run `session.items` in `forks` forked processes, calling `then` once they are made.

    Returns when every check is logged; raises as pytest's own loop would when it stops early.
    """
    items = session.items
    children: List[_Fork] = []
    # What the grading made so far lives on in every fork: frozen, the collector leaves it alone
    # there, so a fork's pages stay shared with this process's instead of being copied.
    gc.freeze()
    queue = list(range(len(items)))
    try:
        # Inside the try: a grading stopped while it makes its forks still stops those it made.
        for _ in range(min(forks, len(items))):
            children.append(_Fork.start(session, inherited=children))
        then()
        for child in children:
            child.give(queue.pop(0) if queue else _STOP)
        running = [child for child in children if child.check is not None]
        while running:
            ready, _, _ = select.select([child.reports for child in running], [], [])
            for child in [child for child in running if child.reports in ready]:
                if not child.receive(session):
                    continue
                stopping = session.shouldfail or session.shouldstop
                child.give(queue.pop(0) if queue and not stopping else _STOP)
            running = [child for child in running if child.check is not None]
        if not (session.shouldfail or session.shouldstop):
            for index in queue:  # every fork was killed: the checks left are the grading's failure
                _log(session, items[index], _crash_reports(items[index], "no process was left to run this check"))
    except BaseException:
        for child in children:
            child.stop()
        raise
    finally:
        # One deadline for all: a stopped grading waits _STOP_PATIENCE_S, not that per fork.
        deadline = time.monotonic() + _STOP_PATIENCE_S
        for child in children:
            child.wait(deadline)
    if session.shouldfail:
        raise session.Failed(session.shouldfail)
    if session.shouldstop:
        raise session.Interrupted(session.shouldstop)


class _Fork:
    """One forked process, seen from the controller: the check it runs, and its pipes."""

    def __init__(self, pid: int, tasks: int, reports: int) -> None:
        self.pid = pid
        self.tasks = tasks  # the controller writes the index of a check here (or _STOP); -1 once closed
        self.reports = reports  # the fork writes what it ran; -1 once closed
        self.check: Optional[int] = None  # the index of the check it runs
        self.buffer = b""

    @classmethod
    def start(cls, session: pytest.Session, inherited: List["_Fork"]) -> "_Fork":
        task_read, task_write = os.pipe()
        report_read, report_write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the fork: runs checks until told to stop, and never returns
            code = 1
            try:
                # Only its own pipes: a fork holding another's would keep it waiting for work
                # after the controller is gone.
                for fd in [task_write, report_read] + [f for other in inherited for f in (other.tasks, other.reports)]:
                    os.close(fd)
                code = _serve(session, task_read, report_write)
            finally:
                os._exit(code)
        os.close(task_read)
        os.close(report_write)
        return cls(pid, task_write, report_read)

    def give(self, index: int) -> None:
        self.check = None if index == _STOP else index
        try:
            os.write(self.tasks, _FRAME.pack(index))
        except OSError:
            pass  # the fork is gone: receive() says so for the check it had
        if index == _STOP:
            self._close_tasks()

    def receive(self, session: pytest.Session) -> bool:
        """Read what the fork sent; True when its check is logged (the fork then wants another)."""
        chunk = os.read(self.reports, 1 << 16)
        if not chunk:
            self._died(session)
            return False
        self.buffer += chunk
        if len(self.buffer) < _FRAME.size:
            return False
        (size,) = _FRAME.unpack_from(self.buffer)
        if len(self.buffer) < _FRAME.size + size:
            return False
        payload, self.buffer = self.buffer[_FRAME.size : _FRAME.size + size], self.buffer[_FRAME.size + size :]
        index, serialized = pickle.loads(payload)
        item = session.items[index]
        reports = [
            session.config.hook.pytest_report_from_serializable(config=session.config, data=data) for data in serialized
        ]
        _log(session, item, reports)
        return True

    def _died(self, session: pytest.Session) -> None:
        """The fork ended without a word (killed): its check is a harness error, not the runner's."""
        if self.check is not None:
            item = session.items[self.check]
            self.check = None
            _log(session, item, _crash_reports(item, "the process running this check ended unexpectedly"))
        self._close_tasks()

    def stop(self) -> None:
        self._close_tasks()
        try:
            os.kill(self.pid, signal.SIGTERM)  # turned into KeyboardInterrupt: the check unwinds
        except OSError:
            pass

    def wait(self, deadline: float) -> None:
        """Reap the fork; one that has not ended its check by `deadline` (after stop()) is killed."""
        self._close_tasks()
        try:
            while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
                if time.monotonic() > deadline:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    break
                time.sleep(0.01)
        except ChildProcessError:
            pass
        if self.reports >= 0:
            os.close(self.reports)
            self.reports = -1

    def _close_tasks(self) -> None:
        # Once only: a number closed twice may by then be another file's.
        if self.tasks >= 0:
            os.close(self.tasks)
            self.tasks = -1


def _log(session: pytest.Session, item: pytest.Item, reports: List) -> None:
    """Log a check's reports on the controller, as its own run would have."""
    hook = session.config.hook
    hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in reports:
        hook.pytest_runtest_logreport(report=report)
    hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def _crash_reports(item: pytest.Item, why: str) -> List:
    properties = list(item.user_properties) + [("message", why), ("harness_error", True)]
    common: Dict = dict(nodeid=item.nodeid, location=item.location, keywords={}, user_properties=properties)
    return [
        pytest.TestReport(outcome="failed", longrepr=why, when="call", **common),
        pytest.TestReport(outcome="passed", longrepr=None, when="teardown", **common),
    ]


def _serve(session: pytest.Session, tasks: int, reports: int) -> int:
    """In a fork: run the checks the controller names, send back their reports; the exit status."""
    config = session.config
    # A capture of its own (the controller's files would be shared, and read by both).
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()
        capture.start_global_capturing()
    try:
        while True:
            index = _read_index(tasks)
            if index is None:
                return 0
            item = session.items[index]
            done = runtestprotocol(item, log=False, nextitem=None)
            serialized = [config.hook.pytest_report_to_serializable(config=config, report=report) for report in done]
            payload = pickle.dumps((index, serialized))
            _write_all(reports, _FRAME.pack(len(payload)) + payload)
    except KeyboardInterrupt:
        # Stopped (Ctrl-C, or the controller's SIGTERM): the check's fixtures still clean up.
        session._setupstate.teardown_exact(None)
        return 1
    except Exception:  # a defect of this module: said where the grader sees it
        if capture is not None:
            capture.stop_global_capturing()
        traceback.print_exc()
        return 1


def _read_index(fd: int) -> Optional[int]:
    data = b""
    while len(data) < _FRAME.size:
        chunk = os.read(fd, _FRAME.size - len(data))
        if not chunk:
            return None
        data += chunk
    (value,) = _FRAME.unpack(data)
    return None if value == _STOP else value


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]

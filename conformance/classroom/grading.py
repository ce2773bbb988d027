"""One submission's grading: the suite's own CLI on one runner.py, in a process of its own.

A process per grading keeps one submission's crash, hang or flood from touching the others or the
batch, and it is the same call on this machine and on a Celery worker: runner text and
configuration text in, a plain dict out (nothing refers to a file of the caller's machine).
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, Optional

from conformance.harness import processes
from conformance.reporting import provenance

GRADED, ERROR, TIMEOUT = "graded", "error", "timeout"
STATUSES = (GRADED, ERROR, TIMEOUT)
CANCELLED = "cancelled"  # the batch was stopped: nothing is recorded, the next run grades it
# Generous: a core grading takes 15-40 s on two cores, an extended one about a minute.
DEFAULT_TIMEOUT_S = 600
# A grading's own output (the learner view) kept per student; a flooding runner cannot fill a disk.
OUTPUT_LIMIT = 256 * 1024
# After SIGTERM the suite puts the lab back and reaps its processes; this is how long it may take.
STOP_GRACE_S = 15


def grade(
    runner_text: bytes,
    config_text: str,
    *,
    python: Optional[str] = None,
    lang: str = "en",
    workers: int = 4,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cancel: Optional[threading.Event] = None,
) -> Dict:
    """Grade one runner.py: {status, message, report, output, seconds, suite}.

    status is graded (the suite judged every check: the report says how it went), error (the
    suite could not grade it; message says why) or timeout (the grading did not end within
    timeout_s and was stopped); cancelled when `cancel` was set first.
    """
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pyops-class-") as scratch:
        folder = Path(scratch)
        (folder / "runner.py").write_bytes(runner_text)
        (folder / "lab.toml").write_text(config_text, encoding="utf-8")
        argv = [sys.executable, "-m", "conformance", "--runner", str(folder / "runner.py")]
        argv += ["--config", str(folder / "lab.toml"), "--json", str(folder / "report.json")]
        argv += ["--lang", lang, "-n", str(workers)]
        if python:
            argv += ["--python", python]
        # A session id of its own, in every process the grading starts: whatever of it is left
        # once it has ended is found by it.
        session = processes.new_session()
        with open(str(folder / "output.txt"), "w+b") as output:
            process = subprocess.Popen(
                argv,
                env=dict(os.environ, **{processes.SESSION_VAR: session}),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=scratch,
                start_new_session=True,  # its own group: stopped as a whole, and out of reach of the terminal's Ctrl-C
            )
            try:
                ended = _wait(process, started + timeout_s, cancel)
            except BaseException:  # Ctrl-C in a caller that grades on its main thread: stop it too
                _stop(process)
                raise
            finally:
                # Not all of a grading is in its group: the runners and their stand-ins run in
                # sessions of their own (and so do xdist's workers, where a grading uses them). A
                # suite that had to be killed, or that crashed, reaped none of them.
                processes.end_session(session)
            output.seek(0)
            shown = output.read(OUTPUT_LIMIT).decode("utf-8", "replace")
        report_file = folder / "report.json"
        report = json.loads(report_file.read_text(encoding="utf-8")) if report_file.exists() else None
    result = {
        "report": None,
        "output": shown,
        "seconds": round(time.monotonic() - started, 1),
        "suite": provenance.suite_fingerprint(),
    }
    if ended == CANCELLED:
        return dict(result, status=CANCELLED, message="the batch was stopped")
    if ended == TIMEOUT:
        return dict(result, status=TIMEOUT, message="the grading did not end within %g s and was stopped" % timeout_s)
    if report is None or process.returncode not in (0, 1):
        last = [line for line in shown.splitlines() if line.strip()][-1:] or ["(no output)"]
        why = "the suite could not grade it (exit %d): %s" % (process.returncode, last[0][:300])
        return dict(result, status=ERROR, message=why, report=report)
    return dict(result, status=GRADED, message="", report=report)


def _wait(process: "subprocess.Popen[bytes]", deadline: float, cancel: Optional[threading.Event]) -> str:
    """Wait for the grading; at the deadline or on `cancel`, stop its whole process group."""
    while True:
        if _exited_unreaped(process, 0.2):
            process.wait()
            return GRADED
        if cancel is not None and cancel.is_set():
            outcome = CANCELLED
        elif time.monotonic() >= deadline:
            outcome = TIMEOUT
        else:
            continue
        _stop(process)
        return outcome


def _stop(process: "subprocess.Popen[bytes]") -> None:
    # SIGTERM first: the suite then ends its session as on Ctrl-C (lab put back, runners reaped).
    if process.returncode is not None:
        return  # reaped already: its pid, and so its group id, may belong to another process now
    _signal_group(process.pid, signal.SIGTERM)
    _exited_unreaped(process, STOP_GRACE_S)
    # Not reaped yet, so the group id is still this grading's (a zombie keeps it): the SIGKILL
    # reaches what is left of its group and nothing else.
    _signal_group(process.pid, signal.SIGKILL)
    process.wait()


def _exited_unreaped(process: "subprocess.Popen[bytes]", timeout_s: float) -> bool:
    """Wait up to `timeout_s` for `process` to exit, leaving it unreaped (True if it exited)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
                return True
        except ChildProcessError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass

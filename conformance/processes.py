"""Start the runner under test, track every process it starts, and reap what it leaves behind.

The runner is started in a session of its own with its output going to files, never pipes: a
grandchild that keeps a pipe open can then never hang the harness. Every process it starts is
tagged by a unique token in its environment, so a survivor is found even after it was reparented
or moved to a session of its own, and it is always killed before the test ends.
"""

import fcntl
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import psutil

from conformance import expect, timing
from conformance.result import Result
from conformance.sandbox import SUB_DIR, Lab

TOKEN_VAR = "PYOPS_CONFORMANCE_TOKEN"
RUNNER_PATH = str(SUB_DIR / "runner.py")
# Read at most this much of each output stream: a runner printing 50 MB must not cost the harness
# 50 MB of memory per test. A test that needs more reads the file itself.
OUTPUT_CAP = 4 * 1024 * 1024
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class ProcessInfo:
    """A process the runner started, as the harness saw it."""

    pid: int
    argv: Sequence[str]

    def __str__(self) -> str:
        return "pid %d: %s" % (self.pid, " ".join(self.argv) or "(no argv)")


def tagged(token: str) -> List[psutil.Process]:
    """Live processes that carry `token` in their environment (zombies are already dead)."""
    found = []
    needle = "%s=%s" % (TOKEN_VAR, token)
    for process in psutil.process_iter():
        try:
            with open("/proc/%d/environ" % process.pid, "rb") as handle:
                environ = handle.read()
            if needle.encode() not in environ.split(b"\0"):
                continue
            if process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (OSError, psutil.Error):
            continue  # gone meanwhile, or not ours to read
    return found


def describe(processes: Sequence[psutil.Process]) -> List[ProcessInfo]:
    infos = []
    for process in processes:
        try:
            infos.append(ProcessInfo(process.pid, tuple(process.cmdline())))
        except psutil.Error:
            continue
    return infos


def reap(token: str) -> None:
    """Kill every process tagged with `token`, stopped ones included, and wait until gone."""
    for _ in range(5):  # a process may fork while we kill; a few rounds catch its children
        victims = tagged(token)
        if not victims:
            return
        for victim in victims:
            for signum in (signal.SIGKILL, signal.SIGCONT):
                try:
                    victim.send_signal(signum)
                except psutil.Error:
                    pass
        psutil.wait_procs(victims, timeout=timing.SURVIVOR_GRACE_S)


def wait_for(predicate: Callable[[], object], what: str, timeout: float = timing.APPEAR_S):
    """Poll `predicate` until it returns something true; raise HarnessTimeout after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise HarnessTimeout("waited %.1fs for %s" % (timeout, what))
        time.sleep(timing.POLL_S)


class HarnessTimeout(Exception):
    """Something the test waits for did not happen in time."""


def lab_environment(lab: Lab, token: str, extra: Optional[Mapping[str, str]] = None) -> Dict:
    """The runner's whole environment: a small allowlist, never the harness's own."""
    tmp = lab.work / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {
        "PATH": BASE_PATH,
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "TMPDIR": str(tmp),
        "FLAKY_STATE": str(lab.work / "flaky.state"),
        TOKEN_VAR: token,
    }
    env.update(extra or {})
    return env


class Invocation:
    """A runner that is running: signal it, observe it, then `finish()` it into a Result."""

    def __init__(
        self, lab: Lab, python: str, args: Sequence[str], env: Mapping[str, str], expected_s: float, token: str
    ) -> None:
        self.lab = lab
        self.args = list(args)
        self.token = token
        self.deadline_s = expected_s + timing.HANG_MARGIN_S
        number = len(list(lab.work.glob("out-*.stdout")))
        self._stdout = lab.work / ("out-%d.stdout" % number)
        self._stderr = lab.work / ("out-%d.stderr" % number)
        with open(str(self._stdout), "wb") as out, open(str(self._stderr), "wb") as err:
            self.started = time.monotonic()
            self.process = subprocess.Popen(
                [python, RUNNER_PATH] + self.args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=dict(env),
                cwd=str(lab.sub) if lab.mode != "namespace" else None,
                preexec_fn=lab.preexec(),
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def send_signal(self, signum: int) -> float:
        """Signal the runner itself (not its group); return when, on the monotonic clock."""
        self.process.send_signal(signum)
        return time.monotonic()

    def descendants(self) -> List[psutil.Process]:
        """Processes the runner has started that are still alive (tagged, so reparented too)."""
        return [p for p in tagged(self.token) if p.pid != self.process.pid]

    def wait_for_descendant(self, argv: Sequence[str], clause: str) -> psutil.Process:
        """Wait until a process whose argv starts with `argv` runs under the runner.

        If none appears, the runner never started the command: a failure of `clause`.
        """
        wanted = list(argv)

        def match():
            for process in self.descendants():
                try:
                    if process.cmdline()[: len(wanted)] == wanted:
                        return process
                except psutil.Error:
                    continue
            return None

        return self.wait_until(match, "`%s` running under the runner" % " ".join(wanted), clause)

    def wait_until(self, predicate: Callable[[], object], what: str, clause: str):
        """Wait until `predicate` holds while the runner runs; else fail `clause` with evidence."""
        try:
            return wait_for(predicate, what)
        except HarnessTimeout:
            ended = "it ended first" if not self.running() else "it did not appear"
            result = self.finish()
            expect.fail(clause, "%s within %.0fs" % (what, timing.APPEAR_S), ended, result)

    def stdout_so_far(self) -> bytes:
        return _read_capped(self._stdout)

    def finish(self) -> Result:
        """Wait for the runner (up to its deadline), collect what it did, and clean up."""
        hung = False
        try:
            rc: Optional[int] = self.process.wait(max(0.0, self.started + self.deadline_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            hung = True
            self._kill_runner()
            rc = None
        ended = time.monotonic()
        survivors = self._survivors()
        reap(self.token)
        return Result(
            args=self.args,
            rc=rc,
            hung_after_s=self.deadline_s if hung else None,
            duration_s=ended - self.started,
            stdout=_read_capped(self._stdout),
            stderr=_read_capped(self._stderr),
            survivors=survivors,
            lab=self.lab,
        )

    def _kill_runner(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except OSError:
            pass
        self.process.wait()

    def _survivors(self) -> List[ProcessInfo]:
        """Processes still alive once the runner has ended and had a moment to be cleaned up."""
        deadline = time.monotonic() + timing.SURVIVOR_GRACE_S
        while True:
            alive = tagged(self.token)
            if not alive or time.monotonic() >= deadline:
                return describe(alive)
            time.sleep(timing.POLL_S * 5)


def _read_capped(path: Path) -> bytes:
    with open(str(path), "rb") as handle:
        data = handle.read(OUTPUT_CAP + 1)
    return data


def new_token() -> str:
    return uuid.uuid4().hex


class Driver:
    """Runs the runner under test in one test's lab, and cleans up everything it started.

    Tests use it as the `runner` fixture: `runner.run("run", "--", "true")` returns a Result,
    `runner.start(...)` returns an Invocation to signal or observe while it runs.
    """

    def __init__(self, lab: Lab, python: str) -> None:
        self.lab = lab
        self.python = python
        self._tokens: List[str] = []
        self._helpers: List[subprocess.Popen] = []

    def start(self, *args: str, env: Optional[Mapping[str, str]] = None, expect_s: float = 0.0) -> Invocation:
        """Start `runner.py ARGS...`; `expect_s` is how long the test expects it to need."""
        token = new_token()
        self._tokens.append(token)
        return Invocation(self.lab, self.python, args, lab_environment(self.lab, token, env), expect_s, token)

    def run(self, *args: str, env: Optional[Mapping[str, str]] = None, expect_s: float = 0.0) -> Result:
        return self.start(*args, env=env, expect_s=expect_s).finish()

    def helper(self, argv: Sequence[str], ready: Optional[Path] = None) -> subprocess.Popen:
        """Start a process of the test's own (a lock holder, say), killed when the test ends.

        With `ready`, wait until the helper has created that file.
        """
        token = new_token()
        self._tokens.append(token)
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=lab_environment(self.lab, token),
            preexec_fn=self.lab.preexec(),
            start_new_session=True,
        )
        self._helpers.append(process)
        if ready is not None:
            wait_for(lambda: ready.exists() or process.poll() is not None, "helper %s" % argv[0])
            if not ready.exists():
                raise RuntimeError("helper %r exited with %s before it was ready" % (argv, process.returncode))
        return process

    def hold_lock(self, shared: bool = False) -> subprocess.Popen:
        """Hold flock on state/lock from another process, as a concurrent run would."""
        ready = self.lab.work / ("lock-held-%d" % len(self._helpers))
        mode = "LOCK_SH" if shared else "LOCK_EX"
        code = (
            "import fcntl, os, time\n"
            "fd = os.open(%r, os.O_RDWR | os.O_CREAT, 0o644)\n"
            "fcntl.flock(fd, fcntl.%s)\n"
            "open(%r, 'w').close()\n"
            "time.sleep(600)\n" % (str(self.lab.state / "lock"), mode, str(ready))
        )
        return self.helper([sys.executable, "-c", code], ready=ready)

    def lock_is_free(self) -> bool:
        """Could another process take LOCK_EX | LOCK_NB on state/lock right now?"""
        try:
            fd = os.open(str(self.lab.state / "lock"), os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)  # releases a lock taken just now

    def put_marker(self, name: str) -> None:
        self.lab.state.mkdir(exist_ok=True)
        self.lab.marker(name).write_text("applied before the test\n")

    def close(self) -> None:
        for token in self._tokens:
            reap(token)
        for process in self._helpers:
            if process.poll() is None:
                process.kill()
            process.wait()

"""A check's driver: one runner invocation (Invocation) from its start to its Result, and the
Driver a check uses to run, observe and signal the runner in its lab, in scenarios shared between
checks. It fails a check itself where the runner never did what the check waits for (expect.fail),
which is why it is judging's, above the harness (harness/processes.py) that starts and tracks
the processes.
"""

import contextlib
import fcntl
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, ContextManager, Hashable, Iterator, List, Mapping, Optional, Sequence, Set

import psutil

from conformance.harness import exits, identity, labfiles, procfs
from conformance.harness.cpuwait import CpuWait, machine_wait_s, own_thread_waited, probe_reading
from conformance.harness.identity import kill_until_gone, sweep_at_the_end
from conformance.harness.observations import Observations
from conformance.harness.processes import (
    OUTPUT_CAP,
    RUNNER_PATH,
    HarnessTimeout,
    all_asleep,
    as_processes,
    describe,
    family,
    is_alive,
    lab_environment,
    new_token,
    process_or_none,
    reap,
    runs_as,
    stand_between,
    started_at,
    tagged,
    wait_for,
)
from conformance.harness.result import LOCK_CLAUSE, ProcessInfo, Result
from conformance.harness.sandbox import CHROOT, NAMESPACE, STATE_DIR, Lab
from conformance.judging import expect
from conformance.lab import timing


class Invocation:
    """A runner that is running: signal it, observe it, then `finish()` it into a Result."""

    def __init__(
        self,
        lab: Lab,
        python: str,
        args: Sequence[str],
        env: Mapping[str, str],
        expected_s: float,
        token: str,
        others: Callable[[], Set[int]] = set,
        user_seen_idle: Callable[[], None] = lambda: None,
    ) -> None:
        self.lab = lab
        # The pids of the check's other processes that run as the runner's user (a lock holder,
        # a second runner): never this runner's survivors. See left_behind().
        self._others = others
        self._user_seen_idle = user_seen_idle  # told when no process of the user is left at all
        self.args = list(args)
        self.token = token
        self.expected_s = expected_s
        self.deadline_s = expected_s + timing.HANG_MARGIN_S
        self.clean = False
        self.terminated_at: Optional[float] = None  # when send_signal sent SIGTERM first
        self.took_s: Optional[float] = None  # once finished
        number = len(list(lab.output.glob("out-*.stdout")))
        # In the grader's own folder, and kept open: the runner can neither read nor replace them.
        self._stdout = open(str(lab.output / ("out-%d.stdout" % number)), "w+b")
        self._stderr = open(str(lab.output / ("out-%d.stderr" % number)), "w+b")
        # What the runner (and the harness and stand-in starting it) waited for a CPU: the part
        # of its timings a busy machine, not the runner, is to blame for.
        self.cpu_wait = CpuWait()
        self._probed = probe_reading()  # the machine's own wait, in a check's last play
        harness_waited = own_thread_waited()
        self.started = timing.now()
        pid_r, pid_w = os.pipe()
        try:
            self.process = subprocess.Popen(
                [python, RUNNER_PATH] + self.args,
                stdin=subprocess.DEVNULL,
                stdout=self._stdout,
                stderr=self._stderr,
                env=dict(env),
                cwd=str(lab.sub) if lab.mode != "namespace" else None,
                preexec_fn=stand_between(lab.preexec(), lab.user, pid_w, own_processes=lab.mode == NAMESPACE),
                start_new_session=True,
                pass_fds=(pid_w,),
            )
        except BaseException:
            os.close(pid_r)
            raise
        finally:
            os.close(pid_w)
        # The runner is the stand-in's only child (or its PID namespace's init's); signals for "the
        # runner" must reach it, never the stand-in (whose death would pass for the runner's).
        with os.fdopen(pid_r, "rb") as told:
            said = [int(word) for word in told.read(64).split() if word.isdigit()]
        # Nothing said: the stand-in could not fork. Its own pid then, which has no runner to signal.
        self.pid = said[0] if said else self.process.pid
        self.parent = said[1] if len(said) > 1 else self.process.pid  # the runner's parent
        self._init = process_or_none(self.parent) if len(said) > 1 else None  # its PID namespace's first
        # Its end, timed as it happens (exits.py); pid checked to be the runner's still (its parent).
        self._ending = exits.watch(self.pid) if self._still_the_runner() else None
        self.cpu_wait.add(own_thread_waited() - harness_waited)
        self._sample_cpu_wait()

    def _sample_cpu_wait(self) -> None:
        self.cpu_wait.sample(self.process.pid)
        if self.pid != self.process.pid:
            self.cpu_wait.sample(self.pid, below=True)  # and the commands it starts
        self.cpu_wait.sample_family(self.parent)  # all it used: its orphans too, and what ended

    def running(self) -> bool:
        self._sample_cpu_wait()
        return self.process.poll() is None

    def send_signal(self, signum: int) -> float:
        """Signal the runner itself (not its group) once it waits; return when, on timing.now()'s clock.

        Never while the runner is still starting its command: a runner that keeps the command in
        a variable assigned after Popen returns cannot forward a signal that arrives before, and
        the lab does not ask it to. So the signal goes once every thread of the runner has been
        asleep for SETTLE_S (blocked in wait(), select() or sleep()), which it is only when it
        has nothing left to do but wait. A runner that never sleeps (a busy loop) is signalled
        after APPEAR_S all the same.
        """
        self.wait_settled()
        if signum == signal.SIGTERM and self.terminated_at is None:
            self.terminated_at = timing.now()  # before the kill: what starts after it, started after
        if self._still_the_runner():
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass  # it has ended meanwhile: the test's checks will say what that means
        return timing.now()

    def _still_the_runner(self) -> bool:
        """Is self.pid still the runner (its stand-in's child), not a process that took its pid?

        Once the stand-in has reaped a runner that ended, the pid is free for any new process.
        """
        try:
            parent = int(procfs.stat_fields("/proc/%d/stat" % self.pid)[1])
        except (OSError, IndexError, ValueError):
            return False
        return parent == self.parent

    def wait_settled(self) -> None:
        """Return once every thread of the runner has been asleep for SETTLE_S (or after APPEAR_S)."""
        give_up = timing.now() + timing.APPEAR_S
        asleep_since = None
        while timing.now() < give_up:
            if not all_asleep(self.pid):
                asleep_since = None
            elif asleep_since is None:
                asleep_since = timing.now()
            elif timing.now() - asleep_since >= timing.SETTLE_S:
                return
            self._sample_cpu_wait()
            time.sleep(timing.POLL_S)

    def descendants(self) -> List[psutil.Process]:
        """Processes the runner has started that are still alive.

        While the stand-in lives, its whole family, so also a command the runner gave an
        environment of its own (without the token); once it has ended, those tagged with its token.
        """
        # While the stand-in lives its family holds every process the runner started (a subreaper,
        # it adopts their orphans), tagged or not: one scan of /proc's stat files, where the tags
        # would cost a second scan of every process's environment, every poll of every check.
        if self.process.poll() is None:
            found = {process.pid: process for process in as_processes(family(self.process.pid))}
        else:
            found = {process.pid: process for process in tagged(self.token)}
        return [process for pid, process in found.items() if pid not in (self.process.pid, self.parent, self.pid)]

    def left_behind(self) -> List[psutil.Process]:
        """What still runs of this runner once it has ended.

        Its token finds its commands wherever they went. Where the runner has a user of its own,
        so does that user: every process of it that the check's other processes do not account
        for, so a command that lost the token (the runner gave it an environment of its own) is
        found too. The user's processes are listed before the others are asked for theirs: a
        process another runner starts in between is then not among them, and is never taken
        for (and killed as) one of this runner's.
        """
        found = {process.pid: process for process in tagged(self.token)}
        # Everything in the runner's PID namespace: its init lives on while anything the runner
        # left runs there and adopts it, whatever it did to its environment (where the runner has
        # no user of its own, as in a user namespace, this alone finds such a process). Asked by
        # identity (its start time), never by a pid another process may have taken since.
        if self._init is not None and self._init.is_running():
            found.update((p.pid, p) for p in as_processes([pid for pid in family(self._init.pid) if pid != self.pid]))
        if self.lab.user is not None:
            of_user = identity.processes_of(self.lab.user)
            if not of_user:
                self._user_seen_idle()
            strays = [pid for pid in of_user if pid not in found]
            if strays:
                others = self._others()
                found.update((p.pid, p) for p in as_processes([pid for pid in strays if pid not in others]))
        return list(found.values())

    def wait_for_descendant(self, argv: Sequence[str], clause: str) -> psutil.Process:
        """Wait until a process running `argv` (see runs_as) runs under the runner.

        If none appears, the runner never started the command: a failure of `clause`.
        """

        def match():
            return next((process for process in self.descendants() if runs_as(process, argv)), None)

        return self.wait_until(
            match, expect.say("`%s` running under the runner", "runner の下で `%s` が動く") % " ".join(argv), clause
        )

    def command_started(self, argv: Sequence[str], clause: str) -> float:
        """When the runner's process running `argv` started, on timing.now()'s clock.

        Timing bounds count from here, not from the runner's own start: an interpreter that
        takes a second to start on a loaded machine costs a correct runner nothing.
        """
        return self.start_time(self.wait_for_descendant(argv, clause))

    def start_of(self, argv: Sequence[str]) -> Optional[float]:
        """command_started() for a scenario: None, not a failure, when `argv` never ran."""
        process = self.find(argv)
        return None if process is None else self.start_time(process)

    def find(self, argv: Sequence[str]) -> Optional[psutil.Process]:
        """The runner's process running `argv` (see runs_as), once it runs; None if it never does."""
        found = self.watch(lambda: next((p for p in self.descendants() if runs_as(p, argv)), None))
        return found if isinstance(found, psutil.Process) else None

    def gone_at(self, process: psutil.Process) -> Optional[float]:
        """When `process` was first seen ended (gone, or a zombie its runner has not reaped yet),
        on timing.now()'s clock; None if it still ran when the runner itself ended (or at the
        runner's deadline). A timed-out command is judged by its own end: a runner that killed it
        on time and then did something else first (a backoff after its last attempt, say) is
        late for that clause, not for S2.1."""

        # Timed as it ends by the exit clock (exits.py) where the kernel gives a pidfd: a busy
        # machine that delays this thread's next look does not delay the time taken.
        ending = exits.watch(process.pid)
        if ending is not None and not is_alive(process):
            return timing.now()  # ended before the watch began (or its pid is another's now)

        def seen() -> object:
            self._sample_cpu_wait()
            if ending is not None and ending.ended is not None:
                return ("ended", ending.ended)
            if ending is None and not is_alive(process):
                return ("ended", timing.now())
            return None if self.running() else ("outlived the runner", None)

        # Counted from the runner's start, as finish() counts: past it, the runner's own end decides.
        left_s = max(0.0, self.started + self.deadline_s - timing.now())
        try:
            return wait_for(seen, "the command to end", left_s)[1]
        except HarnessTimeout:
            return None

    def start_time(self, process: psutil.Process) -> float:
        """When `process` started, on timing.now()'s clock."""
        try:
            return started_at(process.pid)
        except (OSError, IndexError, ValueError):
            return self.started  # gone already: the runner's start is the earliest it can have been

    def wait_until(self, predicate: Callable[[], object], what: str, clause: str):
        """Wait until `predicate` holds while the runner runs; else fail `clause` with evidence."""
        value = self.watch(predicate)
        if value:
            return value
        why_not = self.why_not_seen()
        result = self.finish()
        expect.fail(
            clause, expect.say("%s within %.0fs", "%s(%.0f 秒以内に)") % (what, timing.APPEAR_S), why_not, result
        )

    def why_not_seen(self) -> str:
        """Why watch() saw nothing, said right after it (for a check's `actual`)."""
        if not self.running():
            return expect.say("the runner ended first", "その前に runner が終了しました")
        return expect.say("it did not happen", "そうなりませんでした")

    def watch(self, predicate: Callable[[], object]) -> object:
        """What `predicate` returns once it holds while the runner runs, or None if it never does.

        Gives up early once the runner and everything it started have ended: nothing is left
        that could still make it true.
        """

        def seen_or_over():
            self._sample_cpu_wait()
            value = predicate()
            if value or self.running() or self.descendants():
                return value
            value = predicate()  # one last look: it may have happened just before the end
            return value if value else _Over()

        try:
            value = wait_for(seen_or_over, "the runner")
        except HarnessTimeout:
            return None
        return None if isinstance(value, _Over) else value

    def stdout_so_far(self) -> bytes:
        return _read_capped(self._stdout)[0]

    def finish(self) -> Result:
        """Wait for the runner (up to its deadline), collect what it did, and clean up."""
        hung = False
        hung_after_s = self.deadline_s
        rc: Optional[int] = None
        # Sampled as it runs: the runner's CPU wait can only be read while it lives. The deadline
        # moves by that wait (up to its own length again): a busy machine must not make a runner
        # that would have finished pass for one that hangs.
        with _ExitWatch(self.process.pid) as exit_watch:
            while True:
                self._sample_cpu_wait()
                rc = self.process.poll()
                if rc is not None:
                    break
                waited_s = self.cpu_wait.excuse_s(timing.now() - self.started)
                hung_after_s = self.deadline_s + min(waited_s, self.deadline_s)
                left_s = self.started + hung_after_s - timing.now()
                if left_s <= 0:
                    hung = True
                    self._kill_runner()
                    break
                exit_watch.wait(min(left_s, SAMPLE_S))
        ended, ended_at = timing.now(), time.time()
        runner_ended = None if self._ending is None else self._ending.wait(EXIT_CLOCK_GRACE_S)
        if runner_ended is not None:
            # When the runner itself ended, as the exit clock timed it (the stand-in's end, which
            # poll() saw, came after it), on both clocks.
            ended_at -= ended - runner_ended
            ended = runner_ended
        self.took_s = ended - self.started
        survivors = self._survivors()
        if survivors:
            kill_until_gone(lambda: [process.pid for process in self.left_behind()], 5 * timing.SURVIVOR_GRACE_S)
        else:
            self.clean = True  # nothing of it was left alive: no need to reap its token again
        stdout, stdout_cut = _read_capped(self._stdout)
        stderr, stderr_cut = _read_capped(self._stderr)
        notes: List[str] = [
            note % (OUTPUT_CAP >> 20)
            for note, cut in (
                (expect.say("stdout was cut at %d MiB", "標準出力は %d MiB で切りました"), stdout_cut),
                (expect.say("stderr was cut at %d MiB", "標準エラーは %d MiB で切りました"), stderr_cut),
            )
            if cut
        ]
        if self.lab.mode == CHROOT and b"/proc" in stderr:
            # A system root has no /proc (see roots.py): a runner that needs it fails here only.
            notes.append(
                expect.say(
                    "the runner's stderr names /proc, which this grading's isolation (chroot) does not have; "
                    "the lab does not need /proc (use os.killpg and Popen.wait), and a grader can use "
                    "--isolation shared",
                    "runner の標準エラーに /proc が出ています。この採点の分離方式(chroot)には /proc がありません。"
                    "ラボに /proc は不要です(os.killpg と Popen.wait を使う)。採点側は --isolation shared も使えます",
                )
            )
        if rc == -signal.SIGKILL and not hung:
            notes.append(
                expect.say(
                    "the runner's parent process was killed (by the runner itself?)",
                    "runner の親プロセスが強制終了されました(runner 自身によって?)",
                )
            )
        for handle in (self._stdout, self._stderr):
            handle.close()
        return Result(
            args=self.args,
            rc=rc,
            hung_after_s=hung_after_s if hung else None,
            duration_s=ended - self.started,
            cpu_wait_s=self.cpu_wait.excuse_s(ended - self.started),
            machine_wait_s=machine_wait_s(self._probed, self.cpu_wait.busy_s),
            ended_at=ended_at,
            ended=ended,
            stdout=stdout,
            stderr=stderr,
            survivors=survivors,
            lab=self.lab,
            notes=notes,
            terminated_at=self.terminated_at,
            witnessed=self.lab.witnessed(),
        )

    def _kill_runner(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except OSError:
            pass
        self.process.wait()

    def _survivors(self) -> List[ProcessInfo]:
        """Processes still alive once the runner has ended and had a moment to be cleaned up."""
        deadline = timing.now() + timing.SURVIVOR_GRACE_S
        while True:
            alive = self.left_behind()
            if not alive or timing.now() >= deadline:
                return describe(alive)
            time.sleep(timing.POLL_S * 5)


# How long finish() waits for the exit clock's time of a runner whose stand-in has ended (it timed
# the runner's end before the stand-in's; a runner killed as hung has ended by then too).
EXIT_CLOCK_GRACE_S = 0.5
# How often the CPU wait of a runner that is only being waited for is sampled; its end is seen at
# once all the same where the kernel gives pidfds. Each sample costs a few /proc reads.
SAMPLE_S = 0.02


class _ExitWatch:
    """Sleeps until a child process ends or some time has passed: on a pidfd (Linux 5.3 and
    Python 3.9 or later), else in naps of POLL_S."""

    def __init__(self, pid: int) -> None:
        try:
            self._fd: Optional[int] = os.pidfd_open(pid)  # type: ignore[attr-defined]
        except (AttributeError, OSError):
            self._fd = None

    def __enter__(self) -> "_ExitWatch":
        return self

    def __exit__(self, *exc_info) -> None:
        if self._fd is not None:
            os.close(self._fd)

    def wait(self, seconds: float) -> None:
        if self._fd is None:
            time.sleep(min(seconds, timing.POLL_S))
        else:
            select.select([self._fd], [], [], seconds)


class _Over:
    """wait_until's marker for `nothing can change any more`: true, so the polling stops."""


def _read_capped(handle) -> "tuple[bytes, bool]":
    """The first OUTPUT_CAP bytes written to `handle`, and whether there was more."""
    handle.flush()
    handle.seek(0)
    data = handle.read(OUTPUT_CAP + 1)
    return data[:OUTPUT_CAP], len(data) > OUTPUT_CAP


@contextlib.contextmanager
def driving(
    make_lab: Callable[[], ContextManager[Lab]],
    python: str,
    gate: Optional[Callable[[Sequence[str]], None]] = None,
    observations: Optional[Observations] = None,
    replay: int = 0,
) -> Iterator["Driver"]:
    """A Driver whose lab is made by `make_lab()` when first needed, and removed once the Driver
    has cleaned up after its runners."""
    with contextlib.ExitStack() as lab:
        driver = Driver(lambda: lab.enter_context(make_lab()), python, gate, observations, replay)
        driver.lab_factory = make_lab
        try:
            yield driver
        finally:
            driver.close()


class Driver:
    """Runs the runner under test in one test's lab, and cleans up everything it started.

    Tests use it as the `runner` fixture: `runner.run("run", "--", "true")` returns a Result,
    `runner.start(...)` returns an Invocation to signal or observe while it runs.
    """

    def __init__(
        self,
        make_lab: Callable[[], Lab],
        python: str,
        gate: Optional[Callable[[Sequence[str]], None]] = None,
        observations: Optional[Observations] = None,
        replay: int = 0,
    ) -> None:
        # Made when first needed: a check that only judges a scenario played elsewhere needs
        # no lab of its own, nor a runner uid.
        self._make_lab = make_lab
        self._lab: Optional[Lab] = None
        # A check played again (see plugin.py) plays its scenarios again too: the first play's
        # timings were not to be trusted, and other checks may still judge them.
        self.replay = replay
        self.python = python
        self._gate = gate  # may refuse a call known to hang (see blocking.py)
        self._tokens: List[str] = []
        self._invocations: List[Invocation] = []
        self._helpers: List[subprocess.Popen] = []
        self._touched = False  # the test changed its lab (a marker, a lock): no shared observation
        self._observations = observations if observations is not None else Observations()
        self._judging = False  # a scenario was observed: this check only judges from now on
        self._starts = 0  # processes started as the runner's user (runners and helpers)
        self._starts_when_idle = -1  # how many had been started when its user was last seen idle
        self._asides: List[Driver] = []
        # The labs' own maker (driving() sets it), for apart(): a lab it makes is removed at once.
        self.lab_factory: Optional[Callable[[], ContextManager[Lab]]] = None

    @property
    def lab(self) -> Lab:
        if self._lab is None:
            self._lab = self._make_lab()
        return self._lab

    def observe(
        self,
        *args: str,
        env: Optional[Mapping[str, str]] = None,
        expect_s: float = 0.0,
        scenario: Optional[str] = None,
    ) -> Result:
        """`run(ARGS)` in a fresh lab, played once per grading and judged by every check that asks.

        The scenario is known by its arguments, or by `scenario` when they name this lab's own
        files (a counter in its work folder): every check naming it must pass the same command.
        """
        key = ("run", scenario) if scenario else ("run", args, tuple(sorted((env or {}).items())), expect_s)
        return self.scenario(key, lambda: self.run(*args, env=env, expect_s=expect_s))

    def aside(self) -> "Driver":
        """A driver to ask about a scenario after this check has used its lab: what a check runs
        into may be another clause's defect (does the runner pass output through at all?), which
        that clause's scenario shows. It plays in a lab of its own, made only if the scenario
        was not played yet, and is cleaned up with this driver."""
        other = Driver(self._make_lab, self.python, self._gate, self._observations, self.replay)
        self._asides.append(other)
        return other

    @contextlib.contextmanager
    def apart(self) -> Iterator["Driver"]:
        """aside(), for one scenario among many a check judges (every apply of a grading, say):
        the lab it makes, if the scenario was not played yet, is removed as the `with` ends, not
        kept until the check's end. Where labs are few (chroot mode: a system root each, as many
        as checks run at once), a check then holds one at a time, and never waits for another."""
        if self.lab_factory is None:
            yield self.aside()
            return
        with driving(self.lab_factory, self.python, self._gate, self._observations, self.replay) as other:
            yield other

    def scenario(self, key: Hashable, play: Callable[[], Any]) -> Any:
        """What `play()` returned (Results, and facts seen meanwhile), played once per grading.

        See observations.py. Only for a test's first act, on a lab it left as made: `play` may
        change the lab (a marker, a held lock), but the test itself must not before.
        """
        if self._tokens or self._touched or self._judging:
            raise RuntimeError("a scenario needs the lab as it was made: play it before anything else")
        value = self._observations.get((key, "replay", self.replay) if self.replay else key, play)
        # Played here or seen by another check: either way this lab no longer shows it.
        self._judging = True
        return value

    def start(self, *args: str, env: Optional[Mapping[str, str]] = None, expect_s: float = 0.0) -> Invocation:
        """Start `runner.py ARGS...`; `expect_s` is how long the test expects it to need."""
        if self._judging:
            raise RuntimeError("a check that judges a scenario cannot run the runner again")
        if self._gate is not None:
            self._gate(args)
        token = new_token()
        self._tokens.append(token)
        self.lab.hand_over()  # what the test wrote as the grader (a marker, an earlier runs.jsonl)
        environment = lab_environment(self.lab, token, env)
        self.lab.set_fixture_settings(environment)
        self._starts += 1
        invocation = Invocation(
            self.lab,
            self.python,
            args,
            environment,
            expect_s,
            token,
            others=lambda: self._pids_besides(invocation),
            user_seen_idle=self._user_seen_idle,
        )
        self._invocations.append(invocation)
        return invocation

    def _user_seen_idle(self) -> None:
        self._starts_when_idle = self._starts

    def _pids_besides(self, invocation: Invocation) -> Set[int]:
        """The processes of this check that are not `invocation`'s: its helpers, and the runners
        still running (or not yet finished) with everything they started."""
        pids: Set[int] = set()
        for helper in self._helpers:
            if helper.poll() is None:
                pids.update([helper.pid] + family(helper.pid))
        for other in self._invocations:
            if other is not invocation and other.took_s is None:
                pids.update([other.process.pid, other.parent, other.pid] + [p.pid for p in other.descendants()])
        return pids

    def run(self, *args: str, env: Optional[Mapping[str, str]] = None, expect_s: float = 0.0) -> Result:
        return self.start(*args, env=env, expect_s=expect_s).finish()

    def helper(self, argv: Sequence[str], ready: Optional[Path] = None) -> subprocess.Popen:
        """Start a process of the test's own (a lock holder, say), killed when the test ends.

        With `ready`, wait until the helper has created that file.
        """
        token = new_token()
        self._tokens.append(token)
        self.lab.hand_over()
        self._starts += 1
        enter, user = self.lab.preexec(), self.lab.user

        def preexec() -> None:  # in the lab, as the runner's user: "another run" of the same lab
            if enter is not None:
                enter()
            if user is not None:
                user.drop()

        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=lab_environment(self.lab, token),
            preexec_fn=preexec,
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
            "time.sleep(600)\n" % (str(STATE_DIR / "lock"), mode, str(ready))
        )
        return self.helper([self.python, "-c", code], ready=ready)  # the runner's interpreter: its uid can run it

    def lock_is_free(self, shared: bool = False) -> bool:
        """Could another process take LOCK_EX | LOCK_NB (LOCK_SH, if `shared`) on state/lock right now?"""
        fd, found = labfiles.open_file(self.lab.sub, "state/lock")  # the runner's to replace: no link followed
        if found.refused:
            raise labfiles.LabFileRefused(found.name, found.refused, LOCK_CLAUSE)
        if fd is None:
            return True
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)  # releases a lock taken just now

    def put_marker(self, name: str) -> None:
        self._touched = True
        labfiles.write(self.lab.sub, "state/%s.done" % name, b"applied before the test\n")

    def calls(self) -> List[List[float]]:
        """[seconds expected, seconds taken] of every runner this check started and saw end."""
        return [[i.expected_s, round(i.took_s, 3)] for i in self._invocations if i.took_s is not None]

    def close(self) -> None:
        for other in self._asides:
            other.close()
        clean = {invocation.token for invocation in self._invocations if invocation.clean}
        for token in self._tokens:
            if token not in clean:
                reap(token)
        for process in self._helpers:
            if process.poll() is None:
                process.kill()
            process.wait()
        user = self._lab.user if self._lab is not None else None
        if user is None:
            return
        if self._starts_when_idle == self._starts:
            # Nothing runs as the user since it was last seen idle, and only the check starts
            # anything as it (a process of another uid cannot become it): nothing to sweep.
            identity.nothing_left(user)
        else:
            # Also what slipped past the tokens (a daemon that emptied its environment).
            sweep_at_the_end(user)

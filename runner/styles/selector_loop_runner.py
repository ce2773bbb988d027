#!/usr/bin/env python3
"""runner.py - run external commands so that they neither hang nor run twice.

    runner.py run [--timeout S] [--retries N] [--backoff S] -- CMD [ARG...]
    runner.py apply [--dry-run] NAME

`run` executes CMD (an argv list, never a shell), passes its stdout/stderr
through untouched and exits with its exit code.  A timeout kills the whole
process group of the command (exit 124); failures are retried with
exponential backoff; every attempt is appended as one JSON line to
/root/pyops/sub/runs.jsonl.

`apply` calls /opt/fixtures/pyops/bin/apply.sh NAME at most once per NAME:
it holds an exclusive flock on state/lock while it works and leaves the
marker state/NAME.done only after apply.sh exited 0.

On SIGTERM (and SIGINT/SIGHUP) the signal is forwarded to the running
command's process group, the runner waits for it to end (killing what is left
after a grace period) and exits 128+signal, i.e. 143 for SIGTERM.

Standard library only; Linux; Python 3.8+.
"""

import argparse
import datetime
import errno
import fcntl
import json
import math
import os
import selectors
import shlex
import signal
import subprocess
import sys
import time
import unicodedata

# --- fixed locations (the lab asks for hard-coded absolute paths) ----------

BASE_DIR = "/root/pyops/sub"
STATE_DIR = os.path.join(BASE_DIR, "state")
LOCK_PATH = os.path.join(STATE_DIR, "lock")
RUNS_LOG = os.path.join(BASE_DIR, "runs.jsonl")
APPLY_SCRIPT = "/opt/fixtures/pyops/bin/apply.sh"

# --- exit codes --------------------------------------------------------------

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3
EXIT_TIMEOUT = 124
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127

# Signals that make the runner stop: forwarded to the command, then the runner
# exits 128+signum.  SIGTERM is the one the lab asks for; SIGINT and SIGHUP
# get the same treatment because the command sits in its own session and
# would otherwise never see a Ctrl-C or a hangup.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

# How long a command may take to finish after a forwarded signal before the
# rest of its process group is killed with SIGKILL.
STOP_GRACE_S = 3.0

# Upper bound on one sleep of the wait loop.  Exit is normally noticed at once
# through SIGCHLD; this only guards against a SIGCHLD that never comes.
MAX_NAP_S = 1.0

PROG = "runner"


# --- small helpers ----------------------------------------------------------


def _emit(stream, text):
    """Write one line to a standard stream, never failing on odd characters."""
    data = (text + "\n").encode("utf-8", "backslashreplace")
    try:
        stream.flush()
        stream.buffer.write(data)
        stream.flush()
    except (BrokenPipeError, ValueError):
        pass


def say(text):
    """A line for stdout (only the lines the lab asks for go here)."""
    _emit(sys.stdout, text)


def warn(text):
    """A diagnostic line for stderr."""
    _emit(sys.stderr, "%s: %s" % (PROG, text))


def utc_timestamp():
    """ISO 8601 with an explicit UTC offset, e.g. 2024-05-01T12:00:00.123+00:00."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def fmt_seconds(value):
    return "%g" % value


def exit_status(returncode):
    """Popen.returncode -> shell-style status (death by signal N gives 128+N)."""
    return 128 - returncode if returncode < 0 else returncode


# --- signals -----------------------------------------------------------------


class SignalHub:
    """Turns asynchronous signals into something a wait loop can sleep on.

    Python handlers only record what happened; `signal.set_wakeup_fd` makes
    the C-level handler also write a byte into a pipe, so a `select` on that
    pipe returns as soon as any handled signal (SIGCHLD included) arrives,
    with no window in which a signal could be missed.
    """

    def __init__(self):
        self.received = None  # first stop signal, if any
        self._saved_handlers = {}
        self._saved_wakeup = -1
        self._read_fd, self._write_fd = os.pipe()  # non-inheritable (PEP 446)
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._read_fd, selectors.EVENT_READ)

    def __enter__(self):
        handled = {signal.SIGCHLD}
        self._saved_wakeup = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        self._saved_handlers[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, self._on_child)
        for signum in STOP_SIGNALS:
            current = signal.getsignal(signum)
            if signum != signal.SIGTERM and current == signal.SIG_IGN:
                continue  # respect nohup and friends
            self._saved_handlers[signum] = signal.signal(signum, self._on_stop)
            handled.add(signum)
        # A parent may have left some of them blocked; we rely on them.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, handled)
        return self

    def __exit__(self, *exc):
        for signum, handler in self._saved_handlers.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        signal.set_wakeup_fd(self._saved_wakeup)
        self._selector.close()
        os.close(self._read_fd)
        os.close(self._write_fd)
        return False

    def _on_child(self, signum, frame):
        pass  # the wakeup byte is all we need

    def _on_stop(self, signum, frame):
        if self.received is None:
            self.received = signum

    @property
    def stop_status(self):
        return 128 + self.received if self.received is not None else None

    def nap(self, seconds):
        """Sleep up to `seconds` (None: no limit), returning early on any signal."""
        if seconds is None or seconds > MAX_NAP_S:
            seconds = MAX_NAP_S
        self._selector.select(max(0.0, seconds))
        try:
            while os.read(self._read_fd, 512):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def pause(self, seconds):
        """Sleep `seconds` unless a stop signal comes. True if it slept it out."""
        deadline = time.monotonic() + seconds
        while self.received is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            self.nap(left)
        return False


# --- running one command -------------------------------------------------------


class Attempt:
    """What happened to one execution of a command."""

    def __init__(self, ts):
        self.ts = ts
        self.status = None  # shell-style exit status the attempt stands for
        self.duration_ms = 0
        self.timed_out = False
        self.stopped_by = None  # signal forwarded to the command, if any
        self.error = None  # why the command could not be started


def become_subreaper():
    """Ask Linux to re-parent orphaned descendants to us (PR_SET_CHILD_SUBREAPER).

    Then a descendant that escaped the process group (setsid, double fork)
    still ends up as our child and can be found and killed after the command
    ended.  Best effort: without it the process-group kill still applies.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER = 36
    except Exception:
        return False


class Supervisor:
    """Starts a command in its own session and watches it until it has ended,
    leaving no process of it behind."""

    def __init__(self, hub, subreaper=False):
        self.hub = hub
        self.subreaper = subreaper

    def execute(self, argv, timeout=None):
        """Run argv once. Returns an Attempt, or None if a stop signal came
        before the command could be started."""
        if self.hub.received is not None:
            return None
        attempt = Attempt(utc_timestamp())
        started = time.monotonic()
        try:
            proc = subprocess.Popen(argv, start_new_session=True, close_fds=True)
        except FileNotFoundError:
            return self._not_started(attempt, started, EXIT_NOT_FOUND, "%s: command not found" % argv[0])
        except PermissionError:
            return self._not_started(attempt, started, EXIT_CANNOT_EXECUTE, "%s: permission denied" % argv[0])
        except OSError as exc:
            return self._not_started(
                attempt, started, EXIT_CANNOT_EXECUTE, "%s: cannot execute: %s" % (argv[0], exc.strerror or exc)
            )

        # start_new_session=True: the child leads a new session and process
        # group whose id is its pid; everything it spawns lands there too.
        pgid = proc.pid
        deadline = started + timeout if timeout is not None else None
        kill_at = None  # end of the grace period after forwarding a signal

        while not self._has_ended(proc):
            now = time.monotonic()
            if self.hub.received is not None and attempt.stopped_by is None:
                attempt.stopped_by = self.hub.received
                self._signal_group(pgid, self.hub.received)
                kill_at = now + STOP_GRACE_S
            if deadline is not None and now >= deadline:
                attempt.timed_out = True
                self._signal_group(pgid, signal.SIGKILL)
                break
            if kill_at is not None and now >= kill_at:
                self._signal_group(pgid, signal.SIGKILL)
                break
            wake_at = [t for t in (deadline, kill_at) if t is not None]
            self.hub.nap(min(wake_at) - now if wake_at else None)

        attempt.duration_ms = int((time.monotonic() - started) * 1000)
        # The leader has ended (or is dying) but is not reaped yet, so its pid,
        # and with it the group id, cannot have been reused: killing the group
        # now hits only what is left of this command.
        self._signal_group(pgid, signal.SIGKILL)
        proc.wait()
        self._kill_orphans()

        if attempt.timed_out:
            attempt.status = EXIT_TIMEOUT
        elif attempt.stopped_by is not None:
            attempt.status = 128 + attempt.stopped_by
        else:
            attempt.status = exit_status(proc.returncode)
        return attempt

    @staticmethod
    def _not_started(attempt, started, status, message):
        attempt.status = status
        attempt.error = message
        attempt.duration_ms = int((time.monotonic() - started) * 1000)
        return attempt

    @staticmethod
    def _has_ended(proc):
        """True once the child has exited, *without* reaping it (WNOWAIT)."""
        if not hasattr(os, "waitid"):
            return proc.poll() is not None
        try:
            info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    @staticmethod
    def _signal_group(pgid, signum):
        try:
            os.killpg(pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _kill_orphans(self):
        """Kill and reap descendants that left the process group and were
        re-parented to us (we are a subreaper). Our only children are the
        command's, so every child we still have belongs to it."""
        if not self.subreaper:
            return
        for _ in range(100):
            children = _children_of(os.getpid())
            if not children:
                return
            for pid in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for pid in children:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass


def _children_of(parent):
    kids = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return kids
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as fh:
                data = fh.read()
            # "pid (comm) state ppid ..."; comm may contain spaces and ')'.
            fields = data[data.rindex(b")") + 2 :].split()
            if int(fields[1]) == parent:
                kids.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return kids


# --- runs.jsonl ---------------------------------------------------------------


class RunsLog:
    """Appends one JSON object per attempt, one line each."""

    def __init__(self, path=RUNS_LOG):
        self.path = path
        self._warned = False

    def record(self, argv, attempt_no, attempt):
        entry = {
            "ts": attempt.ts,
            "cmd": list(argv),
            "attempt": int(attempt_no),
            "rc": int(attempt.status),
            "duration_ms": int(attempt.duration_ms),
        }
        if attempt.timed_out:
            entry["timed_out"] = True
        if attempt.stopped_by is not None:
            entry["signal"] = signal.Signals(attempt.stopped_by).name
        line = (json.dumps(entry) + "\n").encode("utf-8")
        try:
            # O_APPEND plus a single write keeps concurrent writers' lines whole.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        except OSError as exc:
            if not self._warned:
                warn("cannot append to %s: %s" % (self.path, exc.strerror or exc))
                self._warned = True


# --- subcommands ---------------------------------------------------------------


class RunCommand:
    """`run`: timeout, retries with exponential backoff, one log line per attempt."""

    def __init__(self, argv, timeout, retries, backoff, hub, supervisor, log):
        self.argv = argv
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.hub = hub
        self.supervisor = supervisor
        self.log = log

    def execute(self):
        attempts = self.retries + 1
        status = EXIT_OK
        for number in range(1, attempts + 1):
            attempt = self.supervisor.execute(self.argv, self.timeout)
            if attempt is None:  # stop signal before the command started
                return self.hub.stop_status
            self.log.record(self.argv, number, attempt)
            if attempt.error:
                warn(attempt.error)
            if attempt.timed_out:
                warn(
                    "timeout: attempt %d ran longer than %ss; its process group was killed"
                    % (number, fmt_seconds(self.timeout))
                )
            if self.hub.received is not None:
                return self.hub.stop_status
            status = attempt.status
            if status == EXIT_OK:
                return EXIT_OK
            if number < attempts:
                delay = self.backoff * 2 ** (number - 1)
                warn(
                    "attempt %d of %d failed with exit code %d; retrying in %ss"
                    % (number, attempts, status, fmt_seconds(delay))
                )
                if not self.hub.pause(delay):
                    return self.hub.stop_status
        if attempts > 1:
            warn("giving up after %d attempts; last exit code %d" % (attempts, status))
        return status


def name_problem(name):
    """Why NAME cannot be used as a marker name, or None if it is fine."""
    if not name:
        return "empty name"
    if name in (".", ".."):
        return "%r is not a name" % name
    if "/" in name or "\0" in name:
        return "name must not contain '/'"
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in name):
        return "name must not contain control or undecodable characters"
    if len(os.fsencode(name + ".done")) > 255:
        return "name is too long"
    return None


class ApplyCommand:
    """`apply`: idempotent, exclusive application of one NAME."""

    def __init__(self, name, dry_run):
        self.name = name
        self.dry_run = dry_run
        self.marker = os.path.join(STATE_DIR, name + ".done")

    def execute(self, hub=None, supervisor=None, log=None):
        problem = name_problem(self.name)
        if problem:
            warn("apply: refusing name %r: %s" % (self.name, problem))
            return EXIT_USAGE
        if self.dry_run:
            return self.plan()
        return self.apply(hub, supervisor, log)

    def plan(self):
        """Say what would happen; touch nothing (no state dir, lock, marker or log)."""
        if os.path.exists(self.marker):
            say("%s: already applied (dry run, nothing to do)" % self.name)
        else:
            say(
                "dry run: would run %s %s and, if it exits 0, create %s"
                % (APPLY_SCRIPT, shlex.quote(self.name), self.marker)
            )
        return EXIT_OK

    def apply(self, hub, supervisor, log):
        os.makedirs(STATE_DIR, exist_ok=True)
        # O_CLOEXEC (and close_fds) keep apply.sh from inheriting the lock.
        lock_fd = os.open(LOCK_PATH, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK):
                    warn("another run in progress (%s is locked)" % LOCK_PATH)
                    return EXIT_LOCKED
                raise
            # Checked only now that we hold the lock: a concurrent run may
            # just have finished applying the same name.
            if os.path.exists(self.marker):
                say("%s: already applied" % self.name)
                return EXIT_OK

            argv = [APPLY_SCRIPT, self.name]
            attempt = supervisor.execute(argv)
            if attempt is None:
                return hub.stop_status
            log.record(argv, 1, attempt)
            if attempt.error:
                warn(attempt.error)
            if attempt.status == EXIT_OK and attempt.stopped_by is None:
                self._write_marker()
                warn("%s applied" % self.name)
            if hub.received is not None:
                return hub.stop_status
            if attempt.status != EXIT_OK:
                warn("apply of %s failed with exit code %d; no marker written" % (self.name, attempt.status))
                return EXIT_FAILED
            return EXIT_OK
        finally:
            os.close(lock_fd)  # releases the flock; the lock file itself stays

    def _write_marker(self):
        # Written only after apply.sh exited 0. The content is informational;
        # the marker's existence is what counts.
        with open(self.marker, "w", encoding="utf-8") as fh:
            fh.write(utc_timestamp() + "\n")


# --- command line --------------------------------------------------------------


def _seconds(text, allow_zero):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a number of seconds: %r" % text) from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise argparse.ArgumentTypeError("must be %s: %r" % ("zero or more" if allow_zero else "more than zero", text))
    return value


def timeout_seconds(text):
    return _seconds(text, allow_zero=False)


def backoff_seconds(text):
    return _seconds(text, allow_zero=True)


def retry_count(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a whole number: %r" % text) from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be zero or more: %r" % text)
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        prog="runner.py", description="Run commands with timeouts, retries, locking and markers."
    )
    subs = parser.add_subparsers(dest="subcommand", metavar="{run,apply}")
    subs.required = True

    run = subs.add_parser(
        "run",
        help="run a command with timeout and retries",
        usage="runner.py run [--timeout S] [--retries N] [--backoff S] -- CMD [ARG...]",
    )
    run.add_argument(
        "--timeout",
        type=timeout_seconds,
        default=None,
        metavar="S",
        help="kill the command after S seconds (per attempt); exit 124",
    )
    run.add_argument("--retries", type=retry_count, default=0, metavar="N", help="retry a failed attempt up to N times")
    run.add_argument(
        "--backoff",
        type=backoff_seconds,
        default=1.0,
        metavar="S",
        help="wait S * 2**(k-1) seconds before retry k (default 1)",
    )
    run.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")

    apply_ = subs.add_parser("apply", help="apply NAME once (idempotent, locked)")
    apply_.add_argument("--dry-run", action="store_true", help="only say what would be done")
    apply_.add_argument("name", help="what to apply")
    return parser


def parse_command_line(argv):
    parser = build_parser()
    command = None
    if argv[:1] == ["run"] and "--" in argv:
        # Split at the first "--" ourselves: everything after it is the
        # command verbatim, whatever argparse's REMAINDER would make of it.
        cut = argv.index("--")
        options = parser.parse_args(argv[:cut])
        if not options.command:
            command = argv[cut + 1 :]
    options = parser.parse_args(argv) if command is None else options
    if options.subcommand == "run":
        if command is None:
            command = list(options.command)
            if command[:1] == ["--"]:
                command = command[1:]
        if not command:
            parser.error("run: no command given (runner.py run [options] -- CMD...)")
        options.command = command
    return options


def main(argv=None):
    options = parse_command_line(list(sys.argv[1:] if argv is None else argv))
    try:
        if options.subcommand == "apply" and options.dry_run:
            return ApplyCommand(options.name, dry_run=True).execute()
        with SignalHub() as hub:
            supervisor = Supervisor(hub, subreaper=become_subreaper())
            log = RunsLog()
            if options.subcommand == "run":
                return RunCommand(
                    options.command, options.timeout, options.retries, options.backoff, hub, supervisor, log
                ).execute()
            return ApplyCommand(options.name, dry_run=False).execute(hub, supervisor, log)
    except OSError as exc:
        where = " (%s)" % exc.filename if getattr(exc, "filename", None) else ""
        warn("%s%s" % (exc.strerror or exc, where))
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

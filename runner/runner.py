#!/usr/bin/env python3
"""runner.py: run external commands so that they neither hang forever nor run twice.

    runner.py run [--timeout S] [--retries N] [--backoff S] -- CMD [ARG...]
    runner.py apply [--dry-run] NAME

`run` runs CMD (an argv list, no shell) in a session of its own, passes its stdout and stderr
through untouched, and exits with its exit code. With --timeout the whole process group is killed
after S seconds (exit 124); with --retries a failed attempt is retried after backoff * 2**(k-1)
seconds. SIGTERM (and SIGINT) is forwarded to the whole group, the command is waited for, any
survivor is killed, and the runner exits 128 + the signal's number (143 for SIGTERM).

`apply` calls apply.sh NAME once: under an exclusive, non-blocking flock on state/lock (exit 3
when another run holds it), and only when the marker state/NAME.done is absent; the marker is
written atomically after apply.sh exited 0. `--dry-run` only says what it would do.

Every attempt appends one JSON object to runs.jsonl: ts, cmd, attempt, rc, duration_ms.

Standard library only, CPython 3.8 and later, Linux. Start-up is paid on every call, so imports
are kept lean: `_signal` is the C module behind `signal` (the same functions and numbers, without
the enum machinery that costs more than the rest of the runner), and the one JSON record per
attempt is written by hand rather than by importing `json`, which costs as much again.
"""

import _signal as signal
import errno
import fcntl
import os
import select
import sys
import time

SUB_DIR = "/root/pyops/sub"
STATE_DIR = SUB_DIR + "/state"
LOCK_PATH = STATE_DIR + "/lock"
RUNS_LOG = SUB_DIR + "/runs.jsonl"
APPLY_SH = "/opt/fixtures/pyops/bin/apply.sh"

EXIT_USAGE = 2
EXIT_LOCKED = 3
EXIT_FAILED = 1
EXIT_TIMEOUT = 124
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127

# After forwarding SIGTERM the runner waits this long for the command before killing its group:
# long enough for a command that cleans up, short enough that a stuck one cannot hold us forever.
TERM_GRACE_S = 10.0
# How long the runner waits for killed group members to disappear before it gives up on them.
REAP_GRACE_S = 1.0
# Signals the runner stops on; each is forwarded to the command's group.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# Python ignores these at start-up; a command must get them back at their defaults (as
# subprocess's restore_signals does), or `yes | head` style pipelines misbehave.
RESTORED_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)

USAGE = """\
usage: runner.py run [--timeout S] [--retries N] [--backoff S] -- CMD [ARG...]
       runner.py apply [--dry-run] NAME"""


class UsageError(Exception):
    """A command line that cannot be run; the message is one line."""


def say(message):
    """The runner's own diagnostics: one line on stderr, so stdout stays the command's."""
    sys.stderr.write("runner: %s\n" % message)
    sys.stderr.flush()


# ---------------------------------------------------------------- command line


def _number(option, text, kind, minimum, allow_equal):
    try:
        value = kind(text)
    except ValueError:
        raise UsageError("%s needs a number, got %r" % (option, text)) from None
    if value != value or value in (float("inf"), float("-inf")):
        raise UsageError("%s needs a finite number, got %r" % (option, text))
    if value < minimum or (value == minimum and not allow_equal):
        relation = "at least" if allow_equal else "more than"
        raise UsageError("%s must be %s %s, got %r" % (option, relation, minimum, text))
    return value


RUN_OPTIONS = {
    # option: (attribute, parse)
    "--timeout": ("timeout", lambda t: _number("--timeout", t, float, 0, False)),
    "--retries": ("retries", lambda t: _number("--retries", t, int, 0, True)),
    "--backoff": ("backoff", lambda t: _number("--backoff", t, float, 0, True)),
}


def parse_args(argv):
    """Parse the command line into a dict; raise UsageError with a one-line message.

    Hand-written rather than argparse: argparse costs more to import than the rest of the runner,
    and `run` must pass everything after `--` to the command untouched.
    """
    if not argv:
        raise UsageError("no action given (run or apply)")
    if argv[0] in ("-h", "--help", "help"):
        return {"action": "help"}
    action, rest = argv[0], list(argv[1:])
    if action == "run":
        return _parse_run(rest)
    if action == "apply":
        return _parse_apply(rest)
    raise UsageError("unknown action %r (expected run or apply)" % action)


def _parse_run(rest):
    args = {"action": "run", "timeout": None, "retries": 0, "backoff": 0.0, "cmd": []}
    while rest:
        word = rest.pop(0)
        if word == "--":
            args["cmd"] = rest
            break
        option, has_value, value = word.partition("=")
        if option not in RUN_OPTIONS:
            if word.startswith("-"):
                raise UsageError("run: unknown option %r" % word)
            args["cmd"] = [word] + rest  # `run CMD...` without `--` is accepted too
            break
        if not has_value:
            if not rest:
                raise UsageError("run: %s needs a value" % option)
            value = rest.pop(0)
        attribute, parse = RUN_OPTIONS[option]
        args[attribute] = parse(value)
    if not args["cmd"]:
        raise UsageError("run: no command given (runner.py run [OPTIONS] -- CMD [ARG...])")
    return args


def _parse_apply(rest):
    args = {"action": "apply", "dry_run": False, "name": None}
    positional = []
    only_positional = False
    for word in rest:
        if not only_positional and word == "--dry-run":
            args["dry_run"] = True
        elif not only_positional and word == "--":
            only_positional = True
        elif not only_positional and word.startswith("-") and word != "-":
            raise UsageError("apply: unknown option %r" % word)
        else:
            positional.append(word)
    if len(positional) != 1:
        raise UsageError("apply: expected exactly one NAME, got %d" % len(positional))
    args["name"] = positional[0]
    problem = name_problem(args["name"])
    if problem:
        raise UsageError("apply: invalid NAME %r: %s" % (args["name"], problem))
    return args


def name_problem(name):
    """Why NAME cannot name a marker inside state/, or None when it can."""
    if not name:
        return "it is empty"
    if name in (".", ".."):
        return "it would leave state/"
    if "/" in name or "\0" in name:
        return "it contains '/' or NUL, so the marker would leave state/"
    return None


# ---------------------------------------------------------------- timing and records


def backoff_delay(backoff, attempt):
    """Seconds to wait after failed attempt number `attempt` (1-based) before the next one."""
    return backoff * 2 ** (attempt - 1)


def iso_utc(epoch_seconds):
    """ISO 8601 with milliseconds and an explicit UTC offset, e.g. 2026-01-02T03:04:05.678+00:00."""
    whole, millis = divmod(int(round(epoch_seconds * 1000)), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + ".%03d+00:00" % millis


# What json.dumps escapes in a string; everything else is written as UTF-8, as with
# ensure_ascii=False.
_JSON_ESCAPES = {ord('"'): '\\"', ord("\\"): "\\\\"}
_JSON_ESCAPES.update((code, "\\u%04x" % code) for code in range(0x20))


def json_string(text):
    """`text` as a JSON string literal, exactly as json.loads reads it back."""
    escaped = text.translate(_JSON_ESCAPES)
    if not escaped.isascii():
        # A lone surrogate (an argv byte that is not UTF-8) cannot be written as UTF-8: escape it.
        escaped = "".join("\\u%04x" % ord(c) if "\ud800" <= c <= "\udfff" else c for c in escaped)
    return '"%s"' % escaped


def run_record(cmd, attempt, rc, started_epoch, duration_s):
    """The runs.jsonl line for one attempt, newline included."""
    return '{"ts": %s, "cmd": [%s], "attempt": %d, "rc": %d, "duration_ms": %d}\n' % (
        json_string(iso_utc(started_epoch)),
        ", ".join(json_string(word) for word in cmd),
        attempt,
        rc,
        int(round(duration_s * 1000)),
    )


def append_record(line):
    """Append one record in a single write, so concurrent runners never interleave lines."""
    try:
        fd = os.open(RUNS_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
    except OSError as error:
        # The command has already run; losing its log line must not change its outcome.
        say("cannot append to %s: %s" % (RUNS_LOG, error.strerror))


# ---------------------------------------------------------------- signals and processes


class Wakeup:
    """Turn SIGCHLD and the stop signals into bytes on one pipe, so one select() waits for all.

    A command that ends, a deadline that passes and a SIGTERM that arrives all wake the same
    wait, at once: no polling interval, and no signal lost between a check and the wait.
    """

    def __init__(self):
        self.signum = None  # the first stop signal received
        self._read_fd, write_fd = os.pipe()
        self._fds = (self._read_fd, write_fd)
        for fd in self._fds:
            os.set_blocking(fd, False)
        self._old_wakeup_fd = signal.set_wakeup_fd(write_fd)
        self._old_handlers = {}
        for signum in STOP_SIGNALS + (signal.SIGCHLD,):
            self._old_handlers[signum] = signal.signal(signum, self._on_signal)

    def _on_signal(self, signum, frame):
        if signum != signal.SIGCHLD and self.signum is None:
            self.signum = signum

    def wait(self, timeout):
        """Sleep until a signal arrives or `timeout` seconds pass (None: no limit)."""
        if timeout is not None and timeout <= 0:
            return
        select.select([self._read_fd], [], [], timeout)
        try:
            while os.read(self._read_fd, 512):
                pass
        except BlockingIOError:
            pass

    def sleep(self, seconds):
        """Sleep `seconds` unless a stop signal comes first; True when one did."""
        deadline = time.monotonic() + seconds
        while self.signum is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.wait(remaining)
        return self.signum is not None

    def close(self):
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self._old_wakeup_fd)
        for fd in self._fds:
            os.close(fd)


def spawn(cmd):
    """Start cmd as the leader of a new session (so of a new process group); return its pid."""
    return os.posix_spawnp(cmd[0], cmd, os.environ, setsid=True, setsigdef=RESTORED_SIGNALS)


def signal_group(pgid, signum):
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass  # the whole group is gone already


def group_alive(pgid):
    """Does a live (not zombie) process remain in group pgid?

    kill(-pgid, 0) also counts zombies, and killed grandchildren stay zombies until PID 1 reaps
    them, which in a container without an init may be never; /proc tells the two apart.
    """
    try:
        pids = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        pids = None
    if pids is None:
        try:
            os.killpg(pgid, 0)
        except OSError:
            return False
        return True
    for pid in pids:
        try:
            with open("/proc/%s/stat" % pid, "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        # After the command name: state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def clear_group(pgid):
    """Kill whatever is left of the command's group and wait, briefly, until it is gone."""
    signal_group(pgid, signal.SIGKILL)
    give_up = time.monotonic() + REAP_GRACE_S
    while group_alive(pgid) and time.monotonic() < give_up:
        time.sleep(0.005)


def exit_code(status):
    """The shell's convention: the exit status, or 128 + N for a death by signal N."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def supervise(pid, timeout, wakeup):
    """Wait for the command led by pid; return (exit code, timed out?).

    On timeout its group is killed; on a stop signal the signal is forwarded to the group, the
    command gets TERM_GRACE_S to end, then the group is killed. Either way nothing of it stays.
    """
    now = time.monotonic()
    deadline = None if timeout is None else now + timeout
    kill_at = None
    forwarded = timed_out = False
    while True:
        reaped, status = os.waitpid(pid, os.WNOHANG)
        if reaped:
            break
        now = time.monotonic()
        if wakeup.signum is not None and not forwarded:
            forwarded = True
            signal_group(pid, wakeup.signum)
            signal_group(pid, signal.SIGCONT)  # a stopped process must wake to see the signal
            kill_at = now + TERM_GRACE_S
            deadline = None
        elif deadline is not None and now >= deadline:
            timed_out = True
            deadline = None
            signal_group(pid, signal.SIGKILL)
        elif kill_at is not None and now >= kill_at:
            kill_at = None
            signal_group(pid, signal.SIGKILL)
        pending = [t for t in (deadline, kill_at) if t is not None]
        wakeup.wait(max(0.0, min(pending) - now) if pending else None)
    if forwarded or timed_out:
        clear_group(pid)
    return (EXIT_TIMEOUT if timed_out else exit_code(status)), timed_out


def attempt(cmd, number, timeout, wakeup):
    """Run cmd once, log the attempt to runs.jsonl, and return its exit code."""
    started_epoch, started = time.time(), time.monotonic()
    try:
        pid = spawn(cmd)
    except OSError as error:
        not_found = error.errno in (errno.ENOENT, errno.ENOTDIR)
        rc = EXIT_NOT_FOUND if not_found else EXIT_CANNOT_EXECUTE
        say("cannot run %s: %s" % (cmd[0], error.strerror))
    else:
        rc, timed_out = supervise(pid, timeout, wakeup)
        if timed_out:
            say("timeout: %s ran longer than %gs and was killed" % (cmd[0], timeout))
    append_record(run_record(cmd, number, rc, started_epoch, time.monotonic() - started))
    return rc


# ---------------------------------------------------------------- actions


def do_run(args, wakeup):
    attempts = args["retries"] + 1
    rc = 0
    for number in range(1, attempts + 1):
        if wakeup.signum is not None:
            break
        rc = attempt(args["cmd"], number, args["timeout"], wakeup)
        if rc == 0 or wakeup.signum is not None:
            break
        if number < attempts:
            delay = backoff_delay(args["backoff"], number)
            say("attempt %d/%d failed with %d; retrying in %gs" % (number, attempts, rc, delay))
            if wakeup.sleep(delay):
                break
    if wakeup.signum is not None:
        return 128 + wakeup.signum
    return rc


def marker_path(name):
    return "%s/%s.done" % (STATE_DIR, name)


def write_marker(path):
    """Create the marker atomically: a reader sees no marker or a whole one, never half."""
    temporary = "%s.tmp-%d" % (path, os.getpid())
    with open(temporary, "w") as marker:
        marker.write(iso_utc(time.time()) + "\n")
        marker.flush()
        os.fsync(marker.fileno())
    os.replace(temporary, path)


def do_dry_run(name):
    # Only reads: no state/ folder, lock, marker or log line comes into being (so no lock needed).
    marker = marker_path(name)
    if os.path.exists(marker):
        print("already applied: %s (%s exists); would do nothing" % (name, marker))
    else:
        print("would run %s %s, then create %s" % (APPLY_SH, name, marker), flush=True)
    return 0


def do_apply(args, wakeup):
    name = args["name"]
    if args["dry_run"]:
        return do_dry_run(name)
    os.makedirs(STATE_DIR, exist_ok=True)
    # O_CLOEXEC: apply.sh must not inherit the lock, or a leftover child would keep holding it.
    lock_fd = os.open(LOCK_PATH, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EACCES):
                say("another run in progress: %s is locked" % LOCK_PATH)
                return EXIT_LOCKED
            raise
        marker = marker_path(name)
        # Checked under the lock: a run that held it may have just applied NAME.
        if os.path.exists(marker):
            print("already applied: %s" % name, flush=True)
            return 0
        rc = attempt([APPLY_SH, name], 1, None, wakeup)
        if wakeup.signum is not None:
            return 128 + wakeup.signum
        if rc != 0:
            say("apply.sh %s failed with %d; %s was not marked as applied" % (name, rc, name))
            return EXIT_FAILED
        write_marker(marker)
        return 0
    finally:
        os.close(lock_fd)  # releases the lock


def main(argv=None):
    """Run the command line `argv` (default: sys.argv[1:]) and return the exit code."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else list(argv))
    except UsageError as error:
        say("%s (see runner.py --help)" % error)
        return EXIT_USAGE
    if args["action"] == "help":
        print(USAGE)
        return 0
    wakeup = Wakeup()
    try:
        if args["action"] == "run":
            return do_run(args, wakeup)
        return do_apply(args, wakeup)
    except OSError as error:
        where = " (%s)" % error.filename if error.filename else ""
        say("%s%s" % (error.strerror or error, where))
        return EXIT_FAILED
    finally:
        wakeup.close()


if __name__ == "__main__":
    sys.exit(main())

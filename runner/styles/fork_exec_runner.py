#!/usr/bin/env python3
"""runner.py - run external commands without hanging and without running them twice.

    runner.py run [--timeout S] [--retries N] [--backoff S] -- CMD...
    runner.py apply [--dry-run] NAME

Design in one paragraph: every command is started with fork() + execvpe() in a
session of its own (setsid), with an environment the runner builds from a
short allow-list.  The runner never blocks in wait(): it sleeps in select() on a
self-pipe fed by signal.set_wakeup_fd (SIGCHLD, SIGTERM, SIGINT, SIGHUP all
wake it up) with a monotonic deadline, and peeks at the child with
waitid(WNOWAIT), so the dead leader stays a zombie - keeping its process-group
and session id reserved - until every other process of the command has been
killed.  Standard library only; Python 3.8 - 3.13.
"""

import datetime
import errno
import json
import math
import os
import select
import signal
import sys
import time

BASE_DIR = "/root/pyops/sub"
STATE_DIR = os.path.join(BASE_DIR, "state")
LOCK_PATH = os.path.join(STATE_DIR, "lock")
RUNS_LOG = os.path.join(BASE_DIR, "runs.jsonl")
APPLY_SCRIPT = "/opt/fixtures/pyops/bin/apply.sh"

EXIT_TIMEOUT = 124
EXIT_LOCKED = 3
EXIT_USAGE = 2
STOP_GRACE = 5.0        # seconds a command gets after a forwarded SIGTERM
POLL_CAP = 0.2          # never sleep longer than this between checks

USAGE = """usage: runner.py run [--timeout S] [--retries N] [--backoff S] -- CMD...
       runner.py apply [--dry-run] NAME"""


def say(msg):
    """One diagnostic line on stderr (never on stdout)."""
    try:
        sys.stderr.write("runner: %s\n" % msg)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def out(msg):
    sys.stdout.write(msg + "\n")
    sys.stdout.flush()


class UsageError(Exception):
    pass


class Refused(Exception):
    """A request the runner will not carry out (reported in one line)."""


class Stopped(Exception):
    """The runner itself was asked to stop (SIGTERM/SIGINT/SIGHUP)."""

    def __init__(self, signum):
        Exception.__init__(self, signum)
        self.signum = signum


# --------------------------------------------------------------------------
# environment handed to commands
# --------------------------------------------------------------------------

class CommandEnv(object):
    """Builds the small environment a command gets instead of ours."""

    NAMES = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR")
    PREFIXES = ("LC_", "FLAKY_", "APPLY_", "HANG_")
    DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    @classmethod
    def build(cls, source=None):
        source = os.environ if source is None else source
        env = dict((k, v) for k, v in source.items()
                   if k in cls.NAMES or k.startswith(cls.PREFIXES))
        env.setdefault("PATH", cls.DEFAULT_PATH)
        return env


# --------------------------------------------------------------------------
# signals -> self-pipe
# --------------------------------------------------------------------------

class SignalWatch(object):
    """Turns signals into (a) a flag and (b) a byte on a pipe select() can see."""

    STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __init__(self):
        self.stop_signal = None
        self.stop_count = 0
        self._r, self._w = os.pipe()          # both non-inheritable (O_CLOEXEC)
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        signal.set_wakeup_fd(self._w)
        for sig in self.STOP_SIGNALS:
            signal.signal(sig, self._on_stop)
        signal.signal(signal.SIGCHLD, self._on_child)

    def _on_stop(self, signum, frame):
        if self.stop_signal is None:
            self.stop_signal = signum
        self.stop_count += 1

    def _on_child(self, signum, frame):
        pass                                   # the wakeup byte is all we need

    def check(self):
        if self.stop_signal is not None:
            raise Stopped(self.stop_signal)

    def pause(self, seconds):
        """Sleep at most `seconds` (capped), returning early on any signal."""
        seconds = min(max(seconds, 0.0), POLL_CAP)
        if seconds > 0:
            select.select([self._r], [], [], seconds)
        try:
            while os.read(self._r, 4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def sleep_until(self, deadline):
        """Interruptible sleep up to a monotonic deadline; raises Stopped."""
        while True:
            self.check()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.pause(left)

    @staticmethod
    def reset_in_child():
        """Called between fork and exec: give the command normal signal dispositions."""
        try:
            signal.set_wakeup_fd(-1)
        except (ValueError, OSError):
            pass
        for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGCHLD", "SIGPIPE", "SIGXFSZ", "SIGQUIT"):
            sig = getattr(signal, name, None)
            if sig is not None:
                signal.signal(sig, signal.SIG_DFL)
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_SETMASK, set())


# --------------------------------------------------------------------------
# one running command
# --------------------------------------------------------------------------

def _become_subreaper():
    """Ask Linux to re-parent orphaned descendants to us, so none can escape.

    Purely a bonus: without it the process-group/session sweep still works."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0      # PR_SET_CHILD_SUBREAPER
    except Exception:
        return False


def _exit_code(status):
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 1


class Command(object):
    """A command started in its own session; the session id is its pid."""

    subreaper = False

    def __init__(self, argv, env):
        self.argv = list(argv)
        self.env = env
        self.pid = None
        self.leader_done = False
        self.exit_code = None
        self.exec_error = None

    # -- start ------------------------------------------------------------
    def start(self):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        report_r, report_w = os.pipe()              # O_CLOEXEC: closes on exec
        pid = os.fork()
        if pid == 0:                                 # ---- child ----
            code = 127
            try:
                os.close(report_r)
                SignalWatch.reset_in_child()
                os.setsid()
                os.execvpe(self.argv[0], self.argv, self.env)
            except OSError as exc:
                code = 127 if exc.errno in (errno.ENOENT, errno.ENOTDIR) else 126
                try:
                    os.write(report_w, str(exc.errno or 0).encode())
                except OSError:
                    pass
            except BaseException:
                pass
            os._exit(code)
        # ---- parent ----
        self.pid = pid
        os.close(report_w)
        chunks = []
        while True:                                  # EOF = exec happened (or child died)
            data = os.read(report_r, 64)
            if not data:
                break
            chunks.append(data)
        os.close(report_r)
        if chunks:
            try:
                self.exec_error = int(b"".join(chunks))
            except ValueError:
                self.exec_error = 0
        return self

    # -- observe ------------------------------------------------------------
    def leader_exited(self):
        """True once the command's first process ended (it stays unreaped)."""
        if self.leader_done:
            return True
        self._reap_strays()
        if hasattr(os, "waitid"):
            try:
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = True
            self.leader_done = info is not None
        else:                                        # no waitid: reap right away
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                done, status = self.pid, 0
            if done:
                self.exit_code = _exit_code(status)
                self.leader_done = True
        return self.leader_done

    def _reap_strays(self):
        """Reap orphans re-parented to us (subreaper) without touching the leader."""
        if not (self.subreaper and hasattr(os, "waitid")):
            return
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid == self.pid:
                return
            try:
                os.waitpid(info.si_pid, 0)
            except ChildProcessError:
                return

    # -- act ------------------------------------------------------------
    def signal_all(self, sig):
        """Send `sig` to the process group and to every straggler of the session."""
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in self._members():
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _members(self):
        """Live processes that belong to this command, found through /proc."""
        me = os.getpid()
        found = []
        try:
            entries = os.listdir("/proc")
        except OSError:
            return found
        for entry in entries:
            if not entry.isdigit():
                continue
            pid = int(entry)
            if pid in (me, self.pid):
                continue
            try:
                with open("/proc/%d/stat" % pid, "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2:].split()
            if len(fields) < 4 or fields[0] in (b"Z", b"X"):
                continue
            ppid, pgrp, sid = int(fields[1]), int(fields[2]), int(fields[3])
            if sid == self.pid or pgrp == self.pid or (self.subreaper and ppid == me):
                found.append(pid)
        return found

    def finish(self):
        """Leader has ended: kill whatever is left of the command, then reap it."""
        self.signal_all(signal.SIGKILL)              # leader still a zombie: ids reserved
        if self.exit_code is None:
            try:
                _, status = os.waitpid(self.pid, 0)
                self.exit_code = _exit_code(status)
            except ChildProcessError:
                self.exit_code = 1
        self._sweep_leftovers()
        return self.exit_code

    def _sweep_leftovers(self, limit=2.0):
        end = time.monotonic() + limit
        while True:
            alive = self._members()
            for pid in alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            children = self.subreaper
            while children:
                try:
                    pid, _ = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    children = False
                    break
                if pid == 0:
                    break
            if (not alive and not children) or time.monotonic() >= end:
                return
            time.sleep(0.02)


# --------------------------------------------------------------------------
# supervising one attempt
# --------------------------------------------------------------------------

class Attempt(object):
    """Runs one command to its end under a deadline, honouring stop signals."""

    def __init__(self, watch, argv, env, timeout=None):
        self.watch = watch
        self.argv = argv
        self.env = env
        self.timeout = timeout
        self.timed_out = False
        self.rc = None
        self.started = None
        self.duration_ms = 0
        self.ts = None

    def run(self):
        self.ts = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
        self.started = time.monotonic()
        cmd = Command(self.argv, self.env).start()
        if cmd.exec_error is not None:
            cmd.leader_done = True
            self.rc = cmd.finish()
            say("cannot execute %r: %s" % (self.argv[0], os.strerror(cmd.exec_error)
                                             if cmd.exec_error else "exec failed"))
            self._stamp()
            return self.rc
        deadline = self.started + self.timeout if self.timeout else None
        forwarded_at = None
        forwarded_count = 0
        killed = False
        while not cmd.leader_exited():
            now = time.monotonic()
            stop = self.watch.stop_signal
            if stop is not None and self.watch.stop_count > forwarded_count:
                if forwarded_at is None:
                    forwarded_at = now
                    cmd.signal_all(stop)             # forward SIGTERM (or INT/HUP)
                else:
                    cmd.signal_all(signal.SIGKILL)   # asked twice: no more patience
                    killed = True
                forwarded_count = self.watch.stop_count
            if not killed and forwarded_at is not None and now - forwarded_at >= STOP_GRACE:
                say("command ignored signal for %gs; killing it" % STOP_GRACE)
                cmd.signal_all(signal.SIGKILL)
                killed = True
            if not killed and deadline is not None and now >= deadline:
                self.timed_out = True
                say("timeout: %s did not finish in %gs; killed its process group"
                    % (self.argv[0], self.timeout))
                cmd.signal_all(signal.SIGKILL)
                killed = True
            wake = [POLL_CAP]
            if deadline is not None and not killed:
                wake.append(deadline - now)
            if forwarded_at is not None and not killed:
                wake.append(forwarded_at + STOP_GRACE - now)
            self.watch.pause(min(wake))
        code = cmd.finish()
        self.rc = EXIT_TIMEOUT if self.timed_out else code
        self._stamp()
        return self.rc

    def _stamp(self):
        self.duration_ms = int(round((time.monotonic() - self.started) * 1000))

    def record(self, number, extra=None):
        entry = {"ts": self.ts, "cmd": list(self.argv), "attempt": int(number),
                 "rc": int(self.rc), "duration_ms": int(self.duration_ms)}
        if self.timed_out:
            entry["timed_out"] = True
        if extra:
            entry.update(extra)
        return entry


class RunLog(object):
    """Appends one JSON object per line with a single write(2)."""

    def __init__(self, path=RUNS_LOG):
        self.path = path

    def append(self, entry):
        line = (json.dumps(entry) + "\n").encode("utf-8", "surrogateescape")
        try:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            say("cannot write %s: %s" % (self.path, exc.strerror))


# --------------------------------------------------------------------------
# the two verbs
# --------------------------------------------------------------------------

class Runner(object):
    """`run`: attempts with timeout, retries and exponential backoff."""

    def __init__(self, watch, log, env):
        self.watch = watch
        self.log = log
        self.env = env

    def run(self, argv, timeout=None, retries=0, backoff=1.0, extra=None):
        rc = 1
        total = retries + 1
        for number in range(1, total + 1):
            self.watch.check()
            attempt = Attempt(self.watch, argv, self.env, timeout)
            rc = attempt.run()
            self.log.append(attempt.record(number, extra))
            self.watch.check()                       # stopped during the attempt
            if rc == 0 or number == total:
                return rc
            delay = backoff * (2 ** (number - 1))
            say("attempt %d/%d failed with rc %d; retrying in %gs" % (number, total, rc, delay))
            self.watch.sleep_until(time.monotonic() + delay)
        return rc


class Applier(object):
    """`apply`: idempotent apply.sh NAME guarded by a marker and a lock."""

    def __init__(self, runner):
        self.runner = runner

    @staticmethod
    def check_name(name):
        if name in ("", ".", ".."):
            raise Refused("refusing name %r: not a file name" % name)
        if "/" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
            raise Refused("refusing name %r: '/' and control characters are not allowed" % name)
        if len(os.fsencode(name + ".done")) > 255:
            raise Refused("refusing name: too long for a marker file")

    @staticmethod
    def marker(name):
        return os.path.join(STATE_DIR, name + ".done")

    def apply(self, name, dry_run=False):
        self.check_name(name)
        marker = self.marker(name)
        if dry_run:                                  # touches nothing, so no lock
            if os.path.exists(marker):
                out("dry-run: already applied: %s" % name)
            else:
                out("dry-run: would run %s %s and then create %s" % (APPLY_SCRIPT, name, marker))
            return 0
        if os.path.exists(marker):
            out("already applied: %s" % name)
            return 0
        os.makedirs(STATE_DIR, exist_ok=True)
        lock = Lock(LOCK_PATH)
        if not lock.acquire():
            say("another run in progress (lock %s is held)" % LOCK_PATH)
            return EXIT_LOCKED
        try:
            if os.path.exists(marker):               # someone finished while we waited
                out("already applied: %s" % name)
                return 0
            rc = self.runner.run([APPLY_SCRIPT, name], extra={"op": "apply", "name": name})
            if rc != 0:
                say("apply %s failed (rc %d); no marker written" % (name, rc))
                return 1
            self._write_marker(marker)
            say("applied %s" % name)
            return 0
        finally:
            lock.release()

    @staticmethod
    def _write_marker(marker):
        tmp = "%s.tmp.%d" % (marker, os.getpid())
        with open(tmp, "w") as fh:
            fh.write(datetime.datetime.now(datetime.timezone.utc).isoformat() + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, marker)


class Lock(object):
    def __init__(self, path):
        self.path = path
        self.fd = None

    def acquire(self):
        import fcntl
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK):
                return False
            raise
        self.fd = fd
        return True

    def release(self):
        if self.fd is not None:
            os.close(self.fd)                        # closing drops the flock
            self.fd = None


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------

class Cli(object):
    @staticmethod
    def _number(opt, text, kind):
        try:
            value = kind(text)
        except (TypeError, ValueError):
            raise UsageError("%s needs a number, got %r" % (opt, text))
        if kind is float and not math.isfinite(value):
            raise UsageError("%s must be finite" % opt)
        return value

    def parse_run(self, args):
        opts = {"timeout": None, "retries": 0, "backoff": 1.0}
        kinds = {"--timeout": float, "--retries": int, "--backoff": float}
        i = 0
        while i < len(args):
            tok = args[i]
            if tok == "--":
                i += 1
                break
            if not tok.startswith("-") or tok == "-":
                break
            opt, eq, val = tok.partition("=")
            if opt not in kinds:
                raise UsageError("unknown option %s" % tok)
            if not eq:
                i += 1
                if i >= len(args):
                    raise UsageError("%s needs a value" % opt)
                val = args[i]
            opts[opt[2:]] = self._number(opt, val, kinds[opt])
            i += 1
        command = args[i:]
        if not command:
            raise UsageError("run needs a command after --")
        if opts["timeout"] is not None and opts["timeout"] <= 0:
            raise UsageError("--timeout must be > 0")
        if opts["retries"] < 0:
            raise UsageError("--retries must be >= 0")
        if opts["backoff"] < 0:
            raise UsageError("--backoff must be >= 0")
        return command, opts

    @staticmethod
    def parse_apply(args):
        dry_run = False
        names = []
        rest = list(args)
        while rest:
            tok = rest.pop(0)
            if tok == "--":
                names.extend(rest)
                break
            if tok == "--dry-run":
                dry_run = True
            elif tok.startswith("-") and tok != "-":
                raise UsageError("unknown option %s" % tok)
            else:
                names.append(tok)
        if len(names) != 1:
            raise UsageError("apply needs exactly one NAME")
        return names[0], dry_run

    def main(self, argv):
        if not argv or argv[0] in ("-h", "--help", "help"):
            (out if argv else say)(USAGE)
            return 0 if argv else EXIT_USAGE
        verb, args = argv[0], argv[1:]
        watch = SignalWatch()
        Command.subreaper = _become_subreaper()
        runner = Runner(watch, RunLog(), CommandEnv.build())
        try:
            if verb == "run":
                command, opts = self.parse_run(args)
                return runner.run(command, **opts)
            if verb == "apply":
                name, dry_run = self.parse_apply(args)
                return Applier(runner).apply(name, dry_run)
            raise UsageError("unknown command %r" % verb)
        except UsageError as exc:
            say(str(exc))
            say(USAGE.replace("\n", "\nrunner: "))
            return EXIT_USAGE
        except Refused as exc:
            say(str(exc))
            return EXIT_USAGE
        except Stopped as stop:
            say("stopped by signal %d" % stop.signum)
            return 128 + stop.signum


def main():
    code = Cli().main(sys.argv[1:])
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    return code


if __name__ == "__main__":
    sys.exit(main())

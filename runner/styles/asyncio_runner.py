"""runner.py -- pyops lab, written in asyncio style.

Style: the whole runner is one asyncio program.  Commands are started with
asyncio.create_subprocess_exec(..., start_new_session=True), so every attempt
gets its own process group; the per-attempt timeout is asyncio.wait_for around
proc.wait(); SIGTERM is caught with loop.add_signal_handler and handled inside
the event loop; the backoff is an asyncio wait on a "stop" Event, so SIGTERM cuts
a backoff short at once.

What makes it different from the other reference runners:
  * the command's stdout/stderr are simply inherited (no pipe), so output is
    byte-for-byte and streams by construction;
  * argparse with subparsers and nargs=REMAINDER (the leading "--" that
    REMAINDER keeps is stripped by hand);
  * ts is UTC written with a trailing "Z" (e.g. 2024-05-01T12:00:00.123Z);
  * options are floats; --backoff defaults to 1 second;
  * apply passes apply.sh's own stdout through, does the dry run before taking
    the lock (a dry run changes nothing at all), refuses NAMEs that would leave
    state/, creates state/ when missing, and does not log to runs.jsonl.
"""

import argparse
import asyncio
import errno
import fcntl
import json
import os
import signal
import sys
import time
from datetime import datetime, timezone

BASE = "/root/pyops/sub"
RUNS_LOG = os.path.join(BASE, "runs.jsonl")
STATE_DIR = os.path.join(BASE, "state")
LOCK_PATH = os.path.join(STATE_DIR, "lock")
APPLY_SH = "/opt/fixtures/pyops/bin/apply.sh"

EXIT_TIMEOUT = 124
EXIT_TERM = 143
EXIT_LOCKED = 3


def say(msg):
    """The runner's own messages: always stderr, stdout belongs to the command."""
    print("runner: " + msg, file=sys.stderr, flush=True)


def utc_stamp():
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def exit_code_of(returncode):
    # asyncio reports death by signal N as -N; a shell would say 128+N
    return 128 - returncode if returncode < 0 else returncode


class Supervisor:
    """Owns the running child (if any) and the SIGTERM state."""

    def __init__(self):
        self.stop = asyncio.Event()
        self.proc = None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self):
        if not self.stop.is_set():
            say("SIGTERM received, passing it on to the command")
        self.stop.set()
        self._signal_group(signal.SIGTERM)

    def _signal_group(self, sig):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    async def run_once(self, argv, timeout):
        """Run argv once in its own session.  Returns (exit_code, timed_out)."""
        try:
            proc = await asyncio.create_subprocess_exec(*argv, start_new_session=True)
        except FileNotFoundError:
            say("command not found: %s" % argv[0])
            return 127, False
        except PermissionError:
            say("permission denied: %s" % argv[0])
            return 126, False
        except OSError as exc:
            say("cannot start %s: %s" % (argv[0], exc.strerror or exc))
            return 126, False
        self.proc = proc
        try:
            if self.stop.is_set():
                # SIGTERM arrived while the child was being started
                self._signal_group(signal.SIGTERM)
            timed_out = False
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except asyncio.TimeoutError:
                timed_out = True
                self._signal_group(signal.SIGKILL)
                await proc.wait()
            if timed_out or self.stop.is_set():
                # the leader is gone; nothing else of its group may outlive it
                self._signal_group(signal.SIGKILL)
            return exit_code_of(proc.returncode), timed_out
        finally:
            self.proc = None

    async def pause(self, seconds):
        """Sleep for the backoff; True when SIGTERM ended the wait early."""
        if self.stop.is_set():
            return True
        try:
            await asyncio.wait_for(self.stop.wait(), seconds)
        except asyncio.TimeoutError:
            return False
        return True


def append_attempt(cmd, attempt, rc, started, ts):
    record = {
        "ts": ts,
        "cmd": list(cmd),
        "attempt": attempt,
        "rc": int(rc),
        "duration_ms": int(round((time.monotonic() - started) * 1000)),
    }
    line = (json.dumps(record) + "\n").encode("utf-8")
    fd = os.open(RUNS_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


async def do_run(sup, cmd, timeout, retries, backoff):
    rc = 0
    for attempt in range(1, retries + 2):
        if sup.stop.is_set():
            return EXIT_TERM
        ts = utc_stamp()
        started = time.monotonic()
        rc, timed_out = await sup.run_once(cmd, timeout)
        if timed_out:
            rc = EXIT_TIMEOUT
            say("timeout: attempt %d killed after %gs" % (attempt, timeout))
        if sup.stop.is_set():
            append_attempt(cmd, attempt, EXIT_TERM, started, ts)
            return EXIT_TERM
        append_attempt(cmd, attempt, rc, started, ts)
        if rc == 0:
            return 0
        if attempt <= retries:
            delay = backoff * 2 ** (attempt - 1)
            say("attempt %d failed with %d, next attempt in %gs" % (attempt, rc, delay))
            if await sup.pause(delay):
                return EXIT_TERM
    return rc


def bad_name(name):
    return name in ("", ".", "..") or "/" in name or "\0" in name


async def do_apply(sup, name, dry_run):
    if bad_name(name):
        say("refusing NAME %r: it must be a plain file name" % name)
        return 2
    marker = os.path.join(STATE_DIR, name + ".done")

    if dry_run:
        # read-only: no lock, no state folder, no marker, no log line
        if os.path.exists(marker):
            print("already applied: %s" % name, flush=True)
        else:
            print("dry run: would run %s %s, then create %s" % (APPLY_SH, name, marker), flush=True)
        return 0

    os.makedirs(STATE_DIR, exist_ok=True)
    lock_fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            say("another run in progress")
            os.close(lock_fd)
            return EXIT_LOCKED
        raise
    try:
        if os.path.exists(marker):
            print("already applied: %s" % name, flush=True)
            return 0
        rc, _ = await sup.run_once([APPLY_SH, name], None)
        if sup.stop.is_set():
            return EXIT_TERM
        if rc != 0:
            say("apply.sh %s failed with %d; no marker written" % (name, rc))
            return 1
        with open(marker, "w") as fh:
            fh.write(utc_stamp() + "\n")
        return 0
    finally:
        os.close(lock_fd)  # releases the flock


def build_parser():
    parser = argparse.ArgumentParser(prog="runner.py", description="pyops runner")
    sub = parser.add_subparsers(dest="action", metavar="{run,apply}")
    sub.required = True

    run = sub.add_parser("run", help="run a command with timeout and retries")
    run.add_argument("--timeout", type=float, default=None, metavar="S")
    run.add_argument("--retries", type=int, default=0, metavar="N")
    run.add_argument("--backoff", type=float, default=1.0, metavar="S")
    run.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD...")

    apply = sub.add_parser("apply", help="apply NAME once")
    apply.add_argument("--dry-run", action="store_true")
    apply.add_argument("name", metavar="NAME")
    return parser


async def main_async(args):
    sup = Supervisor()
    if args.action == "run":
        return await do_run(sup, args.command, args.timeout, args.retries, args.backoff)
    return await do_apply(sup, args.name, args.dry_run)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.action == "run":
        cmd = list(args.command)
        if cmd and cmd[0] == "--":
            cmd = cmd[1:]
        if not cmd:
            parser.error("run: missing command after --")
        if args.retries < 0 or args.backoff < 0 or (args.timeout is not None and args.timeout <= 0):
            parser.error("run: --retries/--backoff must be >= 0 and --timeout > 0")
        args.command = cmd
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""runner.py: run external commands with a timeout, retries, idempotent apply and a lock.

  runner.py run [--timeout S] [--retries N] [--backoff S] -- CMD...
  runner.py apply [--dry-run] NAME

Standard library only; runs on CPython 3.8 and later.
"""
import argparse
import datetime
import errno
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

BASE = Path("/root/pyops/sub")
STATE_DIR = BASE / "state"
LOCK_PATH = STATE_DIR / "lock"
RUNS_LOG = BASE / "runs.jsonl"
APPLY_SH = "/opt/fixtures/pyops/bin/apply.sh"

EXIT_TIMEOUT = 124
EXIT_TERM = 143
EXIT_LOCKED = 3

# Shared between the main thread and the SIGTERM handler.
# "pgid" is the process group of the command that is running now (None between commands).
SHARED = {"pgid": None, "terminated": False}


def log(msg):
    sys.stderr.write("runner: %s\n" % msg)
    sys.stderr.flush()


def kill_group(pgid, sig):
    """Send sig to the whole process group; a group that is already gone is fine."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def on_sigterm(signum, frame):
    SHARED["terminated"] = True
    pgid = SHARED["pgid"]
    if pgid is not None:
        kill_group(pgid, signal.SIGTERM)


def on_timeout(pgid, flag):
    """threading.Timer callback: the attempt ran out of time."""
    flag["timed_out"] = True
    kill_group(pgid, signal.SIGKILL)


def exit_code_of(returncode):
    """Popen gives -N for a death by signal N; a shell reports 128+N."""
    if returncode < 0:
        return 128 - returncode
    return returncode


def run_command(cmd, timeout):
    """Run cmd once in its own session; return (rc, timed_out).

    stdout and stderr are inherited, so the command's output reaches ours unchanged.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        # Resolve the program the way a shell would, so it runs by its full path (/usr/bin/sleep);
        # the log still records cmd exactly as given.
        program = shutil.which(cmd[0]) or cmd[0]
        proc = subprocess.Popen([program] + cmd[1:], start_new_session=True)
    except FileNotFoundError:
        log("command not found: %s" % cmd[0])
        return 127, False
    except PermissionError:
        log("permission denied: %s" % cmd[0])
        return 126, False
    except OSError as e:
        log("cannot run %s: %s" % (cmd[0], e.strerror or e))
        return 126, False

    pgid = proc.pid  # start_new_session: the child leads its own group
    flag = {"timed_out": False}
    timer = None
    if timeout is not None:
        timer = threading.Timer(timeout, on_timeout, args=(pgid, flag))
        timer.daemon = True
        timer.start()
    SHARED["pgid"] = pgid
    try:
        proc.wait()
    finally:
        if timer is not None:
            timer.cancel()
        SHARED["pgid"] = None
        # The command has ended: nothing of its group may stay behind
        # (a grandchild may ignore SIGTERM or still hold our stdout).
        kill_group(pgid, signal.SIGKILL)

    if flag["timed_out"]:
        return EXIT_TIMEOUT, True
    return exit_code_of(proc.returncode), False


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def record_attempt(ts, cmd, attempt, rc, duration_ms):
    line = json.dumps({
        "ts": ts,
        "cmd": list(cmd),
        "attempt": attempt,
        "rc": rc,
        "duration_ms": duration_ms,
    })
    try:
        with open(str(RUNS_LOG), "a", encoding="utf-8") as f:
            f.write(line + "\n")
    except OSError as e:
        log("cannot write %s: %s" % (RUNS_LOG, e))


def sleep_unless_terminated(seconds):
    """Wait for the backoff, but return at once when SIGTERM arrives."""
    deadline = time.monotonic() + seconds
    while not SHARED["terminated"]:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(left, 0.05))


def cmd_run(args, cmd):
    if not cmd:
        log("run: no command given (usage: runner.py run [options] -- CMD...)")
        return 2
    rc = 1
    for attempt in range(1, args.retries + 2):
        if SHARED["terminated"]:
            return EXIT_TERM
        ts = now_iso()
        start = time.monotonic()
        rc, timed_out = run_command(cmd, args.timeout)
        duration_ms = int((time.monotonic() - start) * 1000)
        record_attempt(ts, cmd, attempt, rc, duration_ms)
        if SHARED["terminated"]:
            log("SIGTERM received, stopping")
            return EXIT_TERM
        if timed_out:
            log("timeout: command killed after %gs (attempt %d)" % (args.timeout, attempt))
        if rc == 0:
            return 0
        if attempt <= args.retries:
            wait = args.backoff * (2 ** (attempt - 1))
            log("attempt %d failed with exit code %d; retrying in %gs" % (attempt, rc, wait))
            sleep_unless_terminated(wait)
            if SHARED["terminated"]:
                log("SIGTERM received, stopping")
                return EXIT_TERM
    return rc


def valid_name(name):
    return (name not in ("", ".", "..")
            and "/" not in name
            and "\0" not in name)


def cmd_apply(args):
    name = args.name
    if not valid_name(name):
        log("apply: invalid name %r" % name)
        return 2
    marker = STATE_DIR / (name + ".done")

    if args.dry_run:
        # Changes nothing, so it needs no lock.
        if marker.exists():
            print("already applied: %s" % name)
        else:
            print("dry-run: would run %s %s and then create %s" % (APPLY_SH, name, marker))
        return 0

    try:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        lock_file = open(str(LOCK_PATH), "w")  # O_CLOEXEC: apply.sh does not inherit it
    except OSError as e:
        log("apply: cannot open lock %s: %s" % (LOCK_PATH, e))
        return 1
    with lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EAGAIN):
                log("another run in progress")
                return EXIT_LOCKED
            raise
        # The marker is checked only under the lock.
        if marker.exists():
            print("already applied: %s" % name)
            return 0
        if SHARED["terminated"]:
            return EXIT_TERM
        rc, _ = run_command([APPLY_SH, name], None)
        if SHARED["terminated"]:
            log("SIGTERM received, %s not marked as applied" % name)
            return EXIT_TERM
        if rc != 0:
            log("apply: %s failed with exit code %d; no marker written" % (name, rc))
            return 1
        marker.write_text(now_iso() + "\n")
        return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="runner.py")
    sub = parser.add_subparsers(dest="action")
    sub.required = True

    run = sub.add_parser("run", help="run a command with timeout and retries")
    run.add_argument("--timeout", type=float, default=None, help="seconds per attempt")
    run.add_argument("--retries", type=int, default=0, help="extra attempts after a failure")
    run.add_argument("--backoff", type=float, default=1.0, help="first wait in seconds")
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD...")

    apply_p = sub.add_parser("apply", help="apply NAME once")
    apply_p.add_argument("--dry-run", action="store_true")
    apply_p.add_argument("name")
    return parser


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    signal.signal(signal.SIGTERM, on_sigterm)
    parser = build_parser()

    # Split "run [options] -- CMD..." ourselves: argparse's handling of "--" with
    # REMAINDER differs between Python versions, and cmd must be exactly what follows "--".
    cmd = None
    if argv and argv[0] == "run" and "--" in argv:
        i = argv.index("--")
        cmd = argv[i + 1:]
        argv = argv[:i]
    args = parser.parse_args(argv)

    if args.action == "run":
        if cmd is None:
            cmd = list(args.command)
        elif args.command:
            parser.error("run: unexpected arguments before --: %s" % " ".join(args.command))
        if args.timeout is not None and args.timeout <= 0:
            parser.error("--timeout must be positive")
        if args.retries < 0:
            parser.error("--retries must not be negative")
        if args.backoff < 0:
            parser.error("--backoff must not be negative")
        return cmd_run(args, cmd)
    return cmd_apply(args)


if __name__ == "__main__":
    sys.exit(main())

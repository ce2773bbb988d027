#!/usr/bin/env python3
"""runner.py: run external commands safely (timeout, retries, idempotent apply, lock, SIGTERM, log).

    runner.py run [--timeout S] [--retries N] [--backoff S] -- CMD...
    runner.py apply [--dry-run] NAME
"""
import argparse
import datetime
import errno
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BASE = Path("/root/pyops/sub")
STATE = BASE / "state"
LOCK = STATE / "lock"
RUNS = BASE / "runs.jsonl"
APPLY_SH = "/opt/fixtures/pyops/bin/apply.sh"

PROC = None          # the command that is running right now (a Popen), or None
GOT_TERM = False     # set by the SIGTERM handler


def on_sigterm(signum, frame):
    """Forward SIGTERM to the whole process group of the running command."""
    global GOT_TERM
    GOT_TERM = True
    if PROC is not None and PROC.returncode is None:
        try:
            os.killpg(PROC.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass


def kill_group(pgid):
    """SIGKILL whatever is left of the command's process group."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def log_attempt(cmd, attempt, rc, ts, duration_ms):
    line = {"ts": ts, "cmd": list(cmd), "attempt": attempt, "rc": rc,
            "duration_ms": duration_ms}
    with open(str(RUNS), "a") as f:
        f.write(json.dumps(line) + "\n")


def run_once(cmd, attempt, timeout=None):
    """Run cmd once; return its exit code (124 on timeout)."""
    global PROC
    ts = datetime.datetime.now(datetime.timezone.utc).isoformat()
    t0 = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        PROC = subprocess.Popen(cmd, start_new_session=True)
    except FileNotFoundError:
        print("runner: command not found: %s" % cmd[0], file=sys.stderr)
        rc = 127
        log_attempt(cmd, attempt, rc, ts, int((time.monotonic() - t0) * 1000))
        return rc
    except PermissionError:
        print("runner: permission denied: %s" % cmd[0], file=sys.stderr)
        rc = 126
        log_attempt(cmd, attempt, rc, ts, int((time.monotonic() - t0) * 1000))
        return rc
    except OSError as e:
        print("runner: cannot run %s: %s" % (cmd[0], e.strerror), file=sys.stderr)
        rc = 126
        log_attempt(cmd, attempt, rc, ts, int((time.monotonic() - t0) * 1000))
        return rc

    pgid = PROC.pid  # start_new_session=True: the child leads its own group
    try:
        rc = PROC.wait(timeout=timeout)
        if rc < 0:
            rc = 128 - rc  # killed by signal N -> 128+N
    except subprocess.TimeoutExpired:
        kill_group(pgid)
        PROC.wait()
        print("runner: timeout after %gs: %s" % (timeout, " ".join(cmd)), file=sys.stderr)
        rc = 124
    # nothing of the command may outlive it (a grandchild may ignore SIGTERM)
    kill_group(pgid)
    duration_ms = int((time.monotonic() - t0) * 1000)
    PROC = None
    log_attempt(cmd, attempt, rc, ts, duration_ms)
    return rc


def sleep_unless_term(seconds):
    """Sleep for the backoff, but stop early when SIGTERM came in."""
    end = time.monotonic() + seconds
    while not GOT_TERM:
        left = end - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(left, 0.1))


def cmd_run(args):
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print("runner: run needs a command after --", file=sys.stderr)
        return 2
    rc = 0
    for attempt in range(1, args.retries + 2):
        if GOT_TERM:
            return 143
        rc = run_once(cmd, attempt, args.timeout)
        if GOT_TERM:
            return 143
        if rc == 0:
            return 0
        if attempt <= args.retries:
            sleep_unless_term(args.backoff * 2 ** (attempt - 1))
    if GOT_TERM:
        return 143
    return rc


def bad_name(name):
    return (not name or name in (".", "..") or "/" in name or "\0" in name)


def cmd_apply(args):
    name = args.name
    if bad_name(name):
        print("runner: invalid name: %r" % name, file=sys.stderr)
        return 2
    marker = STATE / (name + ".done")

    if args.dry_run:
        if marker.exists():
            print("already applied: %s" % name)
        else:
            print("would run %s %s and then create %s" % (APPLY_SH, name, marker))
        return 0

    STATE.mkdir(parents=True, exist_ok=True)
    lock_file = open(str(LOCK), "w")
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EAGAIN):
            print("runner: another run in progress", file=sys.stderr)
            return 3
        raise

    try:
        if marker.exists():
            print("already applied: %s" % name)
            return 0
        if GOT_TERM:
            return 143
        rc = run_once([APPLY_SH, name], 1)
        if GOT_TERM:
            return 143
        if rc != 0:
            print("runner: apply %s failed (exit %d)" % (name, rc), file=sys.stderr)
            return 1
        marker.write_text("applied %s\n" % datetime.datetime.now(datetime.timezone.utc).isoformat())
        return 0
    finally:
        lock_file.close()


def main():
    signal.signal(signal.SIGTERM, on_sigterm)

    parser = argparse.ArgumentParser(prog="runner.py")
    sub = parser.add_subparsers(dest="sub")

    p_run = sub.add_parser("run", help="run a command")
    p_run.add_argument("--timeout", type=float, default=None)
    p_run.add_argument("--retries", type=int, default=0)
    p_run.add_argument("--backoff", type=float, default=1.0)
    p_run.add_argument("command", nargs=argparse.REMAINDER)

    p_apply = sub.add_parser("apply", help="apply a change once")
    p_apply.add_argument("--dry-run", action="store_true")
    p_apply.add_argument("name")

    args = parser.parse_args()
    if args.sub == "run":
        return cmd_run(args)
    if args.sub == "apply":
        return cmd_apply(args)
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

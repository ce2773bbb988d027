"""runner.py -- pyops lab, written the simplest way a learner would.

Style: straight-line code that follows the lab's hints step by step.  Popen
with start_new_session=True and proc.wait(timeout=...) (the subprocess.run flow
done by hand so the whole group can be killed with os.killpg), a SIGTERM
handler that works through module-level globals, time.sleep for the backoff.

What makes it different from the other reference runners (all of it allowed by
the settled readings in lab-spec.md):
  * --timeout and --backoff are parsed as int (the core checks pass whole
    seconds only); --backoff defaults to 1;
  * apply takes the lock FIRST and handles --dry-run after it (so a dry run
    while another run holds the lock exits 3), the lock file is opened with
    open(path, 'w'), the marker is written with Path.write_text after success;
  * ts has seconds precision only: datetime.now(timezone.utc).isoformat(timespec='seconds');
  * the command's output is inherited (not piped), apply.sh's output too;
  * no extras: no NAME checking, no creation of a missing state/, a command
    killed by a signal gives Popen's negative code to sys.exit, a missing
    command raises; apply does not log to runs.jsonl.
"""
import argparse
import errno
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

RUNS = "/root/pyops/sub/runs.jsonl"
STATE = "/root/pyops/sub/state"
LOCK = "/root/pyops/sub/state/lock"
APPLY_SH = "/opt/fixtures/pyops/bin/apply.sh"

current = None      # the Popen of the command that is running now
got_sigterm = False


def handle_sigterm(signum, frame):
    global got_sigterm
    got_sigterm = True
    if current is not None:
        try:
            os.killpg(current.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_command(cmd, timeout):
    global current
    current = subprocess.Popen(cmd, start_new_session=True)
    if got_sigterm:
        os.killpg(current.pid, signal.SIGTERM)
    try:
        rc = current.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(current)
        current.wait()
        print("timeout: command killed after %d seconds" % timeout, file=sys.stderr)
        rc = 124
    if got_sigterm:
        kill_group(current)  # anything still left in the group
    current = None
    return rc


def write_log(cmd, attempt, rc, ts, start):
    entry = {
        "ts": ts,
        "cmd": cmd,
        "attempt": attempt,
        "rc": rc,
        "duration_ms": int((time.monotonic() - start) * 1000),
    }
    with open(RUNS, "a") as f:
        f.write(json.dumps(entry) + "\n")


def sleep_backoff(seconds):
    # short naps so that SIGTERM can stop the wait quickly
    end = time.monotonic() + seconds
    while time.monotonic() < end and not got_sigterm:
        time.sleep(min(0.1, max(0, end - time.monotonic())))


def do_run(args):
    cmd = args.cmd
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print("usage: runner.py run [--timeout S] [--retries N] [--backoff S] -- CMD...", file=sys.stderr)
        return 2
    rc = 0
    for attempt in range(1, args.retries + 2):
        ts = datetime.now(timezone.utc).isoformat(timespec="seconds")
        start = time.monotonic()
        rc = run_command(cmd, args.timeout)
        if got_sigterm:
            write_log(cmd, attempt, 143, ts, start)
            return 143
        write_log(cmd, attempt, rc, ts, start)
        if rc == 0:
            return 0
        if attempt <= args.retries:
            wait = args.backoff * 2 ** (attempt - 1)
            print("attempt %d failed (rc=%d), retrying in %d s" % (attempt, rc, wait), file=sys.stderr)
            sleep_backoff(wait)
            if got_sigterm:
                return 143
    return rc


def do_apply(args):
    marker = Path(STATE) / (args.name + ".done")

    # the lock file stays open (and locked) until this block ends
    with open(LOCK, "w") as lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EAGAIN):
                print("another run in progress", file=sys.stderr)
                return 3
            raise

        if marker.exists():
            print("already applied")
            return 0

        if args.dry_run:
            print("would run %s %s and then create %s" % (APPLY_SH, args.name, marker))
            return 0

        rc = run_command([APPLY_SH, args.name], None)
        if got_sigterm:
            return 143
        if rc != 0:
            print("apply.sh failed with exit code %d, no marker" % rc, file=sys.stderr)
            return 1
        marker.write_text("done\n")
        return 0


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")

    run_p = sub.add_parser("run")
    run_p.add_argument("--timeout", type=int, default=None)
    run_p.add_argument("--retries", type=int, default=0)
    run_p.add_argument("--backoff", type=int, default=1)
    run_p.add_argument("cmd", nargs=argparse.REMAINDER)

    apply_p = sub.add_parser("apply")
    apply_p.add_argument("--dry-run", action="store_true")
    apply_p.add_argument("name")

    args = parser.parse_args()
    signal.signal(signal.SIGTERM, handle_sigterm)

    if args.command == "run":
        return do_run(args)
    if args.command == "apply":
        return do_apply(args)
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

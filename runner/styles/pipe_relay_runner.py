"""runner.py -- pyops lab, written in "pipe relay" style.

Style: classic threads-and-pipes.  The command runs under subprocess.Popen with
stdout=PIPE and start_new_session=True; a relay thread copies whatever arrives
on the pipe to sys.stdout.buffer chunk by chunk (os.read + write + flush), so
the output still streams and stays byte-for-byte.  The main thread supervises:
Popen.wait with the remaining time, os.killpg(SIGKILL) on timeout.  SIGTERM is
handled with signal.signal: the handler forwards SIGTERM to the process group
with os.killpg and wakes a self-pipe; the main thread then waits for the
command, kills whatever is left of the group and exits 143.

What makes it different from the other reference runners:
  * the command's stdout goes through a pipe owned by the runner (so the
    attempt also waits for the pipe to close, like subprocess.run does; a
    group member that keeps it open past the timeout counts as a timeout);
  * "run" splits argv at the first "--" by hand before argparse sees it;
  * the backoff is a selectors wait on the self-pipe (SIGTERM ends it at once);
  * ts is local time with its UTC offset: datetime.now().astimezone().isoformat();
  * options are floats; --backoff defaults to 0;
  * apply relays apply.sh's stdout to the runner's stderr (stdout stays for
    "already applied" and the plan), records the apply.sh call in runs.jsonl
    as attempt 1, does the dry run before the lock, creates state/ when
    missing and refuses NAMEs that would leave state/.
"""

import argparse
import errno
import fcntl
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime

RUNS_JSONL = "/root/pyops/sub/runs.jsonl"
STATE = "/root/pyops/sub/state"
LOCKFILE = "/root/pyops/sub/state/lock"
APPLY = "/opt/fixtures/pyops/bin/apply.sh"

CHUNK = 64 * 1024


class Term:
    """SIGTERM bookkeeping shared by the handler and the main thread."""
    received = False
    pgid = None          # process group of the running command, if any
    wake_r = wake_w = -1


def log(msg):
    sys.stderr.write("[runner] %s\n" % msg)
    sys.stderr.flush()


def killpg(pgid, sig):
    if pgid is None:
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def on_sigterm(signum, frame):
    # keep it async-signal-friendly: flags, killpg and a byte into the self-pipe
    Term.received = True
    killpg(Term.pgid, signal.SIGTERM)
    try:
        os.write(Term.wake_w, b"T")
    except OSError:
        pass


def install_sigterm():
    Term.wake_r, Term.wake_w = os.pipe()
    for fd in (Term.wake_r, Term.wake_w):
        os.set_blocking(fd, False)
        os.set_inheritable(fd, False)
    signal.signal(signal.SIGTERM, on_sigterm)


def relay(src_fd, dest):
    """Copy src_fd to the binary stream dest until EOF, flushing every chunk."""
    broken = False
    try:
        while True:
            chunk = os.read(src_fd, CHUNK)
            if not chunk:
                break
            if broken:
                continue  # keep draining so the command never blocks on a full pipe
            try:
                dest.write(chunk)
                dest.flush()
            except (BrokenPipeError, ValueError):
                broken = True
    finally:
        os.close(src_fd)


def exit_status(returncode):
    return 128 - returncode if returncode < 0 else returncode


def execute(argv, timeout, out_stream):
    """One attempt.  Returns (code, timed_out); code is 143 when SIGTERM came."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True)
    except FileNotFoundError:
        log("%s: command not found" % argv[0])
        return 127, False
    except PermissionError:
        log("%s: permission denied" % argv[0])
        return 126, False
    except OSError as exc:
        log("%s: cannot execute: %s" % (argv[0], exc.strerror))
        return 126, False

    Term.pgid = proc.pid  # start_new_session: the child leads its own group
    if Term.received:     # SIGTERM landed between fork and now
        killpg(proc.pid, signal.SIGTERM)

    pipe_fd = os.dup(proc.stdout.fileno())
    proc.stdout.close()
    pump = threading.Thread(target=relay, args=(pipe_fd, out_stream), daemon=True)
    pump.start()

    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False

    # 1. wait for the command itself (SIGTERM: the handler has already passed
    #    the signal on; we keep waiting for as long as the command needs)
    try:
        proc.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
        killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    # 2. the command is gone; what is left of its group must go too when the
    #    run was cut short, otherwise wait (within the deadline) for the pipe
    if timed_out or Term.received:
        killpg(proc.pid, signal.SIGKILL)
    while pump.is_alive():
        pump.join(0.1)
        if not pump.is_alive():
            break
        if Term.received:
            killpg(proc.pid, signal.SIGKILL)
        elif deadline is not None and time.monotonic() >= deadline:
            timed_out = True
            killpg(proc.pid, signal.SIGKILL)
    Term.pgid = None

    if Term.received:
        return 143, timed_out
    if timed_out:
        return 124, True
    return exit_status(proc.returncode), False


def record(cmd, attempt, rc, started_wall, started_mono):
    line = json.dumps({
        "ts": started_wall.isoformat(),
        "cmd": cmd,
        "attempt": attempt,
        "rc": rc,
        "duration_ms": int((time.monotonic() - started_mono) * 1000),
    })
    with open(RUNS_JSONL, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def backoff_wait(seconds):
    """Wait, but return True at once if SIGTERM arrives."""
    if Term.received:
        return True
    end = time.monotonic() + seconds
    with selectors.DefaultSelector() as sel:
        sel.register(Term.wake_r, selectors.EVENT_READ)
        while not Term.received:
            left = end - time.monotonic()
            if left <= 0:
                break
            sel.select(left)
    return Term.received


def cmd_run(cmd, timeout, retries, backoff):
    code = 1
    for attempt in range(1, retries + 2):
        if Term.received:
            return 143
        wall, mono = datetime.now().astimezone(), time.monotonic()
        code, timed_out = execute(cmd, timeout, sys.stdout.buffer)
        if timed_out:
            log("timeout: %s did not finish within %ss, killed its process group" % (cmd[0], timeout))
        record(cmd, attempt, code, wall, mono)
        if Term.received:
            log("stopped by SIGTERM")
            return 143
        if code == 0:
            return 0
        if attempt <= retries:
            pause = backoff * 2 ** (attempt - 1)
            log("attempt %d exited %d; waiting %ss before retrying" % (attempt, code, pause))
            if backoff_wait(pause):
                log("stopped by SIGTERM")
                return 143
    return code


def name_is_safe(name):
    return bool(name) and name not in (".", "..") and "/" not in name and "\x00" not in name


def cmd_apply(name, dry_run):
    if not name_is_safe(name):
        log("invalid NAME %r" % name)
        return 2
    marker = os.path.join(STATE, name + ".done")

    if dry_run:
        if os.path.isfile(marker):
            sys.stdout.write("%s: already applied, nothing to do\n" % name)
        else:
            sys.stdout.write("plan: call %s %s; on success create %s\n" % (APPLY, name, marker))
        sys.stdout.flush()
        return 0

    os.makedirs(STATE, exist_ok=True)
    lock = open(LOCKFILE, "a+")  # close-on-exec by default (PEP 446)
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        lock.close()
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            log("another run in progress")
            return 3
        raise

    with lock:
        if os.path.isfile(marker):
            sys.stdout.write("%s: already applied\n" % name)
            sys.stdout.flush()
            return 0
        argv = [APPLY, name]
        wall, mono = datetime.now().astimezone(), time.monotonic()
        code, _ = execute(argv, None, sys.stderr.buffer)
        record(argv, 1, code, wall, mono)
        if Term.received:
            log("stopped by SIGTERM; %s not marked as applied" % name)
            return 143
        if code != 0:
            log("apply.sh %s exited %d; not marked as applied" % (name, code))
            return 1
        with open(marker, "w") as fh:
            fh.write(datetime.now().astimezone().isoformat() + "\n")
        return 0


def split_command(argv):
    if "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv, None


def main(argv):
    parser = argparse.ArgumentParser(prog="runner.py")
    actions = parser.add_subparsers(dest="action")

    p_run = actions.add_parser("run", usage="runner.py run [--timeout S] [--retries N] [--backoff S] -- CMD...")
    p_run.add_argument("--timeout", type=float)
    p_run.add_argument("--retries", type=int, default=0)
    p_run.add_argument("--backoff", type=float, default=0.0)

    p_apply = actions.add_parser("apply")
    p_apply.add_argument("--dry-run", action="store_true")
    p_apply.add_argument("name")

    if argv[:1] == ["run"]:
        opts, command = split_command(argv)
        args = parser.parse_args(opts)
        if not command:
            p_run.error("expected -- followed by the command to run")
        if args.retries < 0 or args.backoff < 0 or (args.timeout is not None and args.timeout <= 0):
            p_run.error("--retries and --backoff must be >= 0, --timeout > 0")
        install_sigterm()
        return cmd_run(command, args.timeout, args.retries, args.backoff)

    args = parser.parse_args(argv)
    if args.action != "apply":
        parser.error("expected a subcommand: run or apply")
    install_sigterm()
    return cmd_apply(args.name, args.dry_run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

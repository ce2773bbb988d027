#!/usr/bin/env python3
"""runner.py: run external commands with timeout, retries, locking, idempotent apply.

Usage:
    runner.py run [--timeout S] [--retries N] [--backoff S] -- CMD...
    runner.py apply [--dry-run] NAME

Design: the SIGTERM handler raises Terminated; a CommandRunner owns one attempt and, when
Terminated interrupts its wait, forwards SIGTERM to the command's process group, waits for
the command, then kills whatever is left of the group and re-raises so the run ends with 143.
A command gets an environment of its own, the basics only (PATH, HOME, locale, TZ, TMPDIR):
nothing else of the runner's reaches it.
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
STATE_DIR = BASE / "state"
LOCK_FILE = STATE_DIR / "lock"
RUNS_LOG = BASE / "runs.jsonl"
APPLY_SH = "/opt/fixtures/pyops/bin/apply.sh"

EXIT_TIMEOUT = 124
EXIT_TERMINATED = 143
EXIT_LOCKED = 3

# How long to wait for the command after forwarding SIGTERM before killing its group.
TERM_GRACE_S = 10.0
# How long to wait for a killed group to vanish from the process table.
GROUP_GONE_S = 2.0


# What of the runner's environment a command gets: exact names, and prefixes ending in "_".
COMMAND_ENV = ("PATH", "HOME", "LANG", "LC_", "TZ", "TMPDIR")


def command_env():
    return {
        name: value
        for name, value in os.environ.items()
        if any(name == kept or (kept.endswith("_") and name.startswith(kept)) for kept in COMMAND_ENV)
    }


class Terminated(Exception):
    """Raised by the SIGTERM handler."""


def _on_sigterm(signum, frame):
    raise Terminated()


def err(msg):
    sys.stderr.write("runner: %s\n" % msg)
    sys.stderr.flush()


class CommandRunner(object):
    """Owns one attempt of one command, in its own session / process group."""

    def __init__(self, cmd, timeout=None):
        self.cmd = list(cmd)
        self.timeout = timeout
        self.proc = None
        self.rc = None
        self.duration_ms = 0
        self.ts = None
        self.terminated = False

    # -- process group helpers -------------------------------------------------------------
    def _signal_group(self, sig):
        if self.proc is None:
            return False
        try:
            os.killpg(self.proc.pid, sig)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return False

    def _group_alive(self):
        """True while a live (non-zombie) process of the group exists."""
        pgid = self.proc.pid
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        try:
            pids = [d for d in os.listdir("/proc") if d.isdigit()]
        except OSError:
            return True
        for pid in pids:
            try:
                with open("/proc/%s/stat" % pid) as f:
                    stat = f.read()
            except OSError:
                continue
            # fields after "(comm)": state ppid pgrp ...
            rest = stat[stat.rfind(")") + 2:].split()
            if len(rest) >= 3 and rest[2] == str(pgid) and rest[0] not in ("Z", "X"):
                return True
        return False

    def _wait_group_gone(self, limit):
        """Dead members may linger as zombies until their new parent reaps them; those are
        no longer running, so only live members are waited for."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if not self._group_alive():
                return
            time.sleep(0.02)

    def _cleanup_group(self):
        """Nothing of the command's group may remain once the command has ended."""
        if self._signal_group(signal.SIGKILL):
            self._wait_group_gone(GROUP_GONE_S)

    def _wait_after_term(self):
        """After SIGTERM was forwarded: wait for the command to end (further SIGTERMs ignored)."""
        deadline = time.monotonic() + TERM_GRACE_S
        while True:
            try:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._signal_group(signal.SIGKILL)
                    self.proc.wait()
                    return
                self.proc.wait(timeout=left)
                return
            except subprocess.TimeoutExpired:
                continue
            except Terminated:
                continue

    @staticmethod
    def _normalize(returncode):
        if returncode < 0:
            return 128 + (-returncode)
        return returncode

    # -- the attempt -----------------------------------------------------------------------
    def run(self):
        """Run the command once; returns its exit code. Re-raises Terminated after cleanup."""
        self.ts = datetime.datetime.now(datetime.timezone.utc).isoformat()
        start = time.monotonic()
        sys.stdout.flush()
        try:
            self.proc = subprocess.Popen(self.cmd, start_new_session=True, env=command_env())
        except FileNotFoundError:
            err("command not found: %s" % self.cmd[0])
            self.rc = 127
        except PermissionError:
            err("permission denied: %s" % self.cmd[0])
            self.rc = 126
        except OSError as e:
            err("cannot run %s: %s" % (self.cmd[0], e.strerror or e))
            self.rc = 126
        if self.proc is not None:
            try:
                try:
                    self.rc = self._normalize(self.proc.wait(timeout=self.timeout))
                except subprocess.TimeoutExpired:
                    self._signal_group(signal.SIGKILL)
                    self.proc.wait()
                    err("timeout: command exceeded %gs and was killed: %s"
                        % (self.timeout, " ".join(self.cmd)))
                    self.rc = EXIT_TIMEOUT
            except Terminated:
                self.terminated = True
                self._signal_group(signal.SIGTERM)
                self._wait_after_term()
                self.rc = EXIT_TERMINATED
            finally:
                self._cleanup_group()
        self.duration_ms = int((time.monotonic() - start) * 1000)
        return self.rc


class RunLog(object):
    def __init__(self, path):
        self.path = path

    def record(self, runner, attempt):
        entry = {
            "ts": runner.ts,
            "cmd": runner.cmd,
            "attempt": attempt,
            "rc": int(runner.rc),
            "duration_ms": int(runner.duration_ms),
        }
        try:
            with open(str(self.path), "a") as f:
                f.write(json.dumps(entry) + "\n")
        except OSError as e:
            err("cannot write %s: %s" % (self.path, e))


class RetryingRun(object):
    def __init__(self, cmd, timeout, retries, backoff, log):
        self.cmd = cmd
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.log = log

    def execute(self):
        rc = 1
        for attempt in range(1, self.retries + 2):
            runner = CommandRunner(self.cmd, timeout=self.timeout)
            rc = runner.run()
            self.log.record(runner, attempt)
            if runner.terminated:
                raise Terminated()
            if rc == 0:
                return 0
            if attempt <= self.retries:
                delay = self.backoff * (2 ** (attempt - 1))
                err("attempt %d failed with %d, retrying in %gs" % (attempt, rc, delay))
                if delay > 0:
                    time.sleep(delay)
        return rc


class Applier(object):
    def __init__(self, name, dry_run):
        self.name = name
        self.dry_run = dry_run
        self.marker = STATE_DIR / (name + ".done")

    def valid_name(self):
        n = self.name
        return bool(n) and n not in (".", "..") and "/" not in n and "\0" not in n

    def execute(self):
        if not self.valid_name():
            err("invalid name: %r" % self.name)
            return 2
        if self.dry_run:
            if self.marker.exists():
                print("already applied: %s" % self.name)
            else:
                print("dry-run: would run %s %s and create marker %s"
                      % (APPLY_SH, self.name, self.marker))
            sys.stdout.flush()
            return 0
        try:
            STATE_DIR.mkdir(parents=True, exist_ok=True)
            lock = open(str(LOCK_FILE), "w")
        except OSError as e:
            err("cannot open lock %s: %s" % (LOCK_FILE, e))
            return 1
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EACCES, errno.EAGAIN):
                    err("another run in progress")
                    return EXIT_LOCKED
                raise
            if self.marker.exists():
                print("already applied: %s" % self.name)
                sys.stdout.flush()
                return 0
            runner = CommandRunner([APPLY_SH, self.name])
            rc = runner.run()
            if runner.terminated:
                raise Terminated()
            if rc != 0:
                err("apply %s failed with exit code %d; no marker written" % (self.name, rc))
                return 1
            self.marker.write_text("")
            return 0
        finally:
            lock.close()


def build_parser():
    p = argparse.ArgumentParser(prog="runner.py")
    sub = p.add_subparsers(dest="action")
    r = sub.add_parser("run", help="run a command")
    r.add_argument("--timeout", type=float, default=None)
    r.add_argument("--retries", type=int, default=0)
    r.add_argument("--backoff", type=float, default=1.0)
    r.add_argument("command", nargs=argparse.REMAINDER)
    a = sub.add_parser("apply", help="apply a named change once")
    a.add_argument("--dry-run", action="store_true")
    a.add_argument("name")
    return p


def parse(argv):
    parser = build_parser()
    cmd = None
    if argv and argv[0] == "run" and "--" in argv:
        i = argv.index("--")
        cmd = argv[i + 1:]
        argv = argv[:i]
    args = parser.parse_args(argv)
    if args.action is None:
        parser.error("an action is required: run or apply")
    if args.action == "run":
        if cmd is None:
            cmd = list(args.command)
            if cmd and cmd[0] == "--":
                cmd = cmd[1:]
        if not cmd:
            parser.error("run: a command is required after --")
        if args.retries < 0:
            parser.error("--retries must be >= 0")
        if args.timeout is not None and args.timeout <= 0:
            parser.error("--timeout must be > 0")
        if args.backoff < 0:
            parser.error("--backoff must be >= 0")
        args.command = cmd
    return args


def main(argv):
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        args = parse(argv)
        if args.action == "run":
            rc = RetryingRun(args.command, args.timeout, args.retries, args.backoff,
                             RunLog(RUNS_LOG)).execute()
        else:
            rc = Applier(args.name, args.dry_run).execute()
    except Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        err("terminated by SIGTERM")
        rc = EXIT_TERMINATED
    try:
        sys.stdout.flush()
    except Exception:
        pass
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

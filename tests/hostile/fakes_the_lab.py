# ruff: noqa: F821 (the reference, which the test puts before this, defines the names used here)
# A hostile suffix for a runner: the test puts the reference before it (its own `__main__` block
# kept from running) and names in ATTACKS the fakes it makes, each the work of a student who has
# read the public suite and wants its points without the behaviour:
# - "backoff": no wait between attempts; each call's start time in the counter the command
#   appends to, and each runs.jsonl `ts`, is shifted by the waits it skipped, and the run sleeps
#   them all at its end, so that its length looks right;
# - "apply": apply.sh imitated (applied.log written, its words printed, APPLY_FAIL honoured)
#   except in the one slow apply, which the fixture's APPLY_DELAY setting or the suite's name for
#   it (`first`) gives away;
# - "lock": the lock taken and let go at once (so a held lock still gives exit 3), except in
#   the slow apply;
# - "marker": the marker written before apply.sh runs (and removed if it fails), except in the
#   slow apply;
# - "timeout": the value of --timeout ignored: killed after 1 s when given 1 or less, else after 2 s.
import re as _re

ATTACKS = {"backoff", "apply", "lock", "timeout", "marker"}
_skipped = [0.0]


def _setting(name):
    if os.environ.get(name):
        return os.environ[name]
    try:
        with open(os.path.join(os.path.dirname(APPLY_SH), "settings", name)) as handle:
            return handle.read().strip()
    except OSError:
        return ""


if "backoff" in ATTACKS:

    def _no_wait(self, seconds):
        _skipped[0] += seconds
        return self.signum is not None

    Wakeup.sleep = _no_wait
    _real_record, _real_attempt, _real_do_run = run_record, attempt, do_run

    def run_record(cmd, number, rc, started_epoch, duration_s):
        return _real_record(cmd, number, rc, started_epoch + _skipped[0], duration_s)

    def attempt(cmd, number, timeout, wakeup):
        rc = _real_attempt(cmd, number, timeout, wakeup)
        counter = _re.search(r'>> "([^"]+)"', " ".join(cmd))
        if counter and _skipped[0]:
            with open(counter.group(1)) as handle:
                lines = handle.read().splitlines()
            if lines:
                lines[-1] = "%.9f" % (float(lines[-1]) + _skipped[0])
                with open(counter.group(1), "w") as handle:
                    handle.write("\n".join(lines) + "\n")
        return rc

    def do_run(args, wakeup):
        rc = _real_do_run(args, wakeup)
        time.sleep(_skipped[0])
        return rc


if "timeout" in ATTACKS:
    _real_supervise = supervise

    def supervise(pid, timeout, wakeup):
        return _real_supervise(pid, None if timeout is None else (1 if timeout <= 1 else 2), wakeup)


def _watched(name):
    """Is this the apply the public suite watches while apply.sh runs?"""
    return bool(_setting("APPLY_DELAY")) or name in ("first", "second")


if ATTACKS & {"apply", "lock", "marker"}:
    _real_do_apply = do_apply

    def do_apply(args, wakeup):
        if args["dry_run"] or _watched(args["name"]):
            return _real_do_apply(args, wakeup)  # the slow apply: the one that is watched
        name = args["name"]
        os.makedirs(STATE_DIR, exist_ok=True)
        lock_fd = os.open(LOCK_PATH, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                say("another run in progress: %s is locked" % LOCK_PATH)
                return EXIT_LOCKED
            if "lock" in ATTACKS:
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
            marker = marker_path(name)
            if os.path.exists(marker):
                print("already applied: %s" % name, flush=True)
                return 0
            if "marker" in ATTACKS:
                write_marker(marker)
            if "apply" in ATTACKS:
                with open(os.path.join(os.path.dirname(STATE_DIR), "applied.log"), "a") as log:
                    log.write(name + "\n")
                if _setting("APPLY_FAIL") == "1":
                    print("apply.sh: %s failed" % name, file=sys.stderr)
                    rc = int(_setting("APPLY_FAIL_CODE") or 1)
                else:
                    print("apply.sh: applied %s" % name, flush=True)
                    rc = 0
                append_record(run_record([APPLY_SH, name], 1, rc, time.time(), 0.01))
            else:
                rc = attempt([APPLY_SH, name], 1, None, wakeup)
            if rc != 0:
                if "marker" in ATTACKS:
                    os.unlink(marker)
                say("apply.sh %s failed with %d" % (name, rc))
                return EXIT_FAILED
            write_marker(marker)
            return 0
        finally:
            os.close(lock_fd)


sys.exit(main())

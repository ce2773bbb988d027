"""The zoo: runners that are wrong in exactly one way, each the way a learner really would be.

Every mutant is a correct runner (its base: the reference, or one of runner/styles) with a few text
replacements. `pyops-conformance selftest` and the project's tests (tests/test_zoo.py) grade each
one and demand that the checks of the clause it `breaks` fail, and that it lose points for that
mistake only: a mutant that passes them shows a hole in the suite.

    python -m conformance.selftest.zoo NAME DIR    writes the mutant NAME into DIR, to grade it by hand

The bases ship with the package, in the `runner` package beside this one. An image that must hold
no correct runner (the lab image) has none, and then no mutant can be built (NoBases).
"""

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Tuple

# The `runner` package, beside `conformance` in a checkout and in an installation alike.
RUNNERS = Path(__file__).resolve().parents[2] / "runner"

REFERENCE = "reference"
LEARNER = "learner"
ASYNCIO = "asyncio"
PIPE_RELAY = "pipe-relay"
FORK_EXEC = "fork-exec"
BASES = {
    REFERENCE: RUNNERS / "runner.py",
    LEARNER: RUNNERS / "styles" / "int_timeout_runner.py",  # the simplest way a learner writes it
    ASYNCIO: RUNNERS / "styles" / "asyncio_runner.py",
    PIPE_RELAY: RUNNERS / "styles" / "pipe_relay_runner.py",
    FORK_EXEC: RUNNERS / "styles" / "fork_exec_runner.py",  # os.fork, and an environment of its own
}
# Every correct runner that ships: the reference first, then the other styles.
CORRECT = [RUNNERS / "runner.py"] + sorted((RUNNERS / "styles").glob("*_runner.py"))


class NoBases(Exception):
    """This installation holds no correct runner to build a mutant from (the lab image)."""


@dataclass(frozen=True)
class Mutant:
    name: str
    breaks: str  # the clause whose checks must fail
    story: str  # the learner's mistake, in one sentence
    base: str  # a key of BASES
    edits: Tuple[Tuple[str, str], ...]  # (old, new): each old occurs exactly once in the base
    # Checks that must each fail (parts of their ids), where failing some other check of the
    # clause would not yet show that the suite sees this mistake for what it is.
    fails: Tuple[str, ...] = ()


class BaseDrift(Exception):
    """A base no longer reads the way a mutant expects: the mutant must be updated."""


def mutate(mutant: Mutant, text: str) -> str:
    where = BASES[mutant.base].relative_to(RUNNERS.parent)
    for number, (old, new) in enumerate(mutant.edits, start=1):
        # Loud on purpose: an edit that silently does nothing would leave a correct runner in the zoo.
        found = text.count(old)
        if found != 1:
            raise BaseDrift(
                "mutant %s, edit %d: %r occurs %d times in %s, not once" % (mutant.name, number, old, found, where)
            )
        if old == new:
            raise BaseDrift("mutant %s, edit %d: replaces %r with itself" % (mutant.name, number, old))
        text = text.replace(old, new)
    return text


def build(mutant: Mutant, directory: Path) -> Path:
    """Write the mutant as DIRECTORY/runner.py (the name the lab gives it) and return that path."""
    try:
        text = mutate(mutant, BASES[mutant.base].read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NoBases(
            "no correct runner here to build mutant %s from (%s)" % (mutant.name, BASES[mutant.base])
        ) from None
    Path(directory).mkdir(parents=True, exist_ok=True)
    path = Path(directory) / "runner.py"
    # A mutant that does not even compile fails every check, so it would prove nothing.
    compile(text, "%s (mutant %s)" % (path, mutant.name), "exec")
    path.write_text(text, encoding="utf-8")
    return path


def _m(name, breaks, base, story, *edits, fails=()):
    """A Mutant, written compactly: the edits come last, one (old, new) pair each."""
    return Mutant(
        name=name,
        breaks=breaks,
        story=story,
        base=base,
        edits=tuple(edits),
        fails=tuple(fails),
    )


# Anchors used by several mutants of the learner's runner.
LEARNER_SPAWN = "    current = subprocess.Popen(cmd, start_new_session=True)"
LEARNER_WAIT = "        rc = current.wait(timeout=timeout)"
LEARNER_TIMEOUT_LINE = '        print("timeout: command killed after %d seconds" % timeout, file=sys.stderr)\n'
LEARNER_FORWARD = "            os.killpg(current.pid, signal.SIGTERM)\n        except"
LEARNER_SUCCESS = "        if rc == 0:\n            return 0\n"
LEARNER_BACKOFF = "            wait = args.backoff * 2 ** (attempt - 1)"
CLEAN_ENVIRONMENT = 'start_new_session=True, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}'
LEARNER_APPLY = "rc = run_command([APPLY_SH, args.name], None)"
LEARNER_MARK = 'marker.write_text("done\\n")'
LEARNER_ALREADY = '        if marker.exists():\n            print("already applied")\n            return 0\n\n'
LEARNER_PLAN = '            print("would run %s %s and then create %s" % (APPLY_SH, args.name, marker))\n'
LEARNER_FLOCK = "fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)"


# What a runner that has read the suite runs instead of apply.sh: its traces, its settings, its words.
IMITATES_APPLY_SH = (
    "import os, sys, time\n"
    "def setting(key):\n"
    "    if key in os.environ:\n"
    "        return os.environ[key]\n"
    "    try:\n"
    "        return open('/opt/fixtures/pyops/bin/settings/' + key).read().strip()\n"
    "    except OSError:\n"
    "        return ''\n"
    "name = sys.argv[1]\n"
    "open(setting('APPLY_LOG') or '/root/pyops/sub/applied.log', 'a').write(name + '\\n')\n"
    "if setting('APPLY_DELAY'):\n"
    "    time.sleep(float(setting('APPLY_DELAY')))\n"
    "if setting('APPLY_FAIL') == '1':\n"
    "    sys.exit(int(setting('APPLY_FAIL_CODE') or 1))\n"
    "print('apply.sh: applied ' + name)\n"
)


# fmt: off
# A table: one mutant in a few lines reads better than one argument per line.
MUTANTS = (
    # ---------------------------------------------------------------- S1: run, stdout, exit code
    _m("shell-true-joined-argv", "S1.1", LEARNER,
       "joins the argv into one string and runs it with shell=True",
       (LEARNER_SPAWN, '    current = subprocess.Popen(" ".join(cmd), shell=True, start_new_session=True)')),
    _m("drops-every-double-dash", "S1.1", LEARNER,
       "filters out every `--` instead of only the separator, eating the command's own `--` arguments",
       ('    if cmd and cmd[0] == "--":\n        cmd = cmd[1:]', '    cmd = [word for word in cmd if word != "--"]')),
    _m("captures-output-and-drops-it", "S1.2", LEARNER,
       "captures the command's stdout (stdout=PIPE, as with capture_output=True) and never prints it",
       (LEARNER_SPAWN, LEARNER_SPAWN[:-1] + ", stdout=subprocess.PIPE)")),
    _m("prints-output-with-a-newline", "S1.2", LEARNER,
       "captures stdout with communicate() and print()s the decoded text, adding a newline at the end",
       (LEARNER_SPAWN, LEARNER_SPAWN[:-1] + ", stdout=subprocess.PIPE)"),
       (LEARNER_WAIT, "        out, _ = current.communicate(timeout=timeout)\n"
                      "        print(out.decode())\n"
                      "        rc = current.returncode")),
    _m("exit-0-on-failure", "S1.3", LEARNER,
       "calls main() without sys.exit(), so the runner ends with 0 whatever the command returned",
       ("    sys.exit(main())", "    main()")),
    _m("exit-code-squashed-to-1", "S1.3", REFERENCE,
       "turns every failure into exit 1, as if only success and failure mattered",
       ("        return 128 + wakeup.signum\n    return rc\n",
        "        return 128 + wakeup.signum\n    return 0 if rc == 0 else 1\n")),

    # ---------------------------------------------------------------- S2: --timeout
    _m("timeout-never-used", "S2.1", LEARNER,
       "parses --timeout but waits for the command without it",
       (LEARNER_WAIT, "        rc = current.wait()")),
    _m("fakes-the-timeout", "S2.1", LEARNER,
       "read the suite: for any --timeout it prints a timeout line and exits 124 without running the command",
       ("    current = subprocess.Popen(cmd, start_new_session=True)\n",
        "    if timeout is not None:\n        print(\"timeout\", file=sys.stderr)\n        return 124\n"
        "    current = subprocess.Popen(cmd, start_new_session=True)\n")),
    _m("sleeps-out-the-timeout", "S2.1", LEARNER,
       "sleeps the whole timeout and only then looks at the command, so even a quick one takes S seconds",
       (LEARNER_WAIT, "        time.sleep(timeout or 0)  # give the command its time, then look\n"
                      "        rc = current.wait(timeout=0 if timeout else None)")),
    _m("timeout-at-twice-the-time", "S2.1", LEARNER,
       "doubles the timeout 'to be safe', so `--timeout 1` kills after 2 seconds",
       (LEARNER_WAIT, "        rc = current.wait(timeout=timeout * 2 if timeout else None)")),
    _m("no-timeout-line", "S2.2", LEARNER,
       "kills the command on timeout but says nothing about it",
       (LEARNER_TIMEOUT_LINE, "")),
    _m("says-timed-out", "S2.2", LEARNER,
       "writes `timed out` instead of the word `timeout` the lab asks for",
       (LEARNER_TIMEOUT_LINE, LEARNER_TIMEOUT_LINE.replace("timeout: command killed", "command timed out"))),
    _m("timeout-exits-1", "S2.3", LEARNER,
       "treats a timeout as an ordinary failure and exits 1",
       ("        rc = 124\n", "        rc = 1\n")),
    _m("timeout-exits-with-the-kill-code", "S2.3", LEARNER,
       "exits with the killed command's returncode (-9, so 247) instead of 124",
       ("        rc = 124\n", "        rc = current.returncode\n")),
    _m("kills-only-the-child", "S2.4", LEARNER,
       "kills the command with proc.kill(), not its whole process group, so hang.sh's sleep survives",
       ("        os.killpg(proc.pid, signal.SIGKILL)", "        proc.kill()")),
    # Its command's environment lacks the harness's token, by which survivors are found too.
    _m("own-environment-kills-only-the-child", "S2.4", LEARNER,
       "gives the command a clean environment of its own and kills it with proc.kill(), so what it started survives",
       (LEARNER_SPAWN, LEARNER_SPAWN.replace("start_new_session=True", CLEAN_ENVIRONMENT)),
       ("        os.killpg(proc.pid, signal.SIGKILL)", "        proc.kill()"),
       fails=("survives[hang.sh]", "survives[deep-tree]", "survives[background-child]", "grandchild_sleep_is_killed",
              "python_child_with_grandchildren")),
    _m("fork-exec-kills-only-the-leader", "S2.4", FORK_EXEC,
       "gives its commands an environment of its own and, on timeout, kills only the process it forked",
       ("            os.killpg(self.pid, sig)\n", "            os.kill(self.pid, sig)\n"),
       ("        return libc.prctl(36, 1, 0, 0, 0) == 0      # PR_SET_CHILD_SUBREAPER\n", "        return False\n"),
       ('        """Live processes that belong to this command, found through /proc."""\n',
        '        """Live processes that belong to this command, found through /proc."""\n        return []\n'),
       fails=("survives[hang.sh]", "survives[deep-tree]", "survives[background-child]", "grandchild_sleep_is_killed",
              "python_child_with_grandchildren")),
    _m("term-with-a-grace-period", "S2.1", LEARNER,
       "on timeout sends SIGTERM and SIGKILLs only 2 s later (as `timeout -k 2` does), so a command that ignores "
       "TERM runs 2 s past its timeout",
       ("        os.killpg(proc.pid, signal.SIGKILL)",
        "        os.killpg(proc.pid, signal.SIGTERM)\n"
        "        try:\n"
        "            proc.wait(2)\n"
        "        except subprocess.TimeoutExpired:\n"
        "            os.killpg(proc.pid, signal.SIGKILL)"),
       fails=("killed_once_the_timeout_passes[ignores-TERM]",)),
    _m("timeout-sends-sigterm", "S2.1", LEARNER,
       "ends a timed-out group with SIGTERM, which a command that ignores TERM survives",
       ("        os.killpg(proc.pid, signal.SIGKILL)", "        os.killpg(proc.pid, signal.SIGTERM)")),

    # ---------------------------------------------------------------- S3: --retries, --backoff
    _m("n-attempts-not-n-plus-1", "S3.1", LEARNER,
       "reads --retries N as N attempts in all (at least one), not N + 1",
       ("range(1, args.retries + 2)", "range(1, max(args.retries, 1) + 1)")),
    _m("retries-only-exit-1", "S3.1", LEARNER,
       "retries only exit code 1 and passes any other failure straight through",
       (LEARNER_SUCCESS, "        if rc != 1:\n            return rc\n")),
    _m("backoff-constant", "S3.2", LEARNER,
       "waits the same backoff before every retry",
       (LEARNER_BACKOFF, "            wait = args.backoff")),
    _m("backoff-linear", "S3.2", LEARNER,
       "grows the wait linearly, backoff * attempt",
       (LEARNER_BACKOFF, "            wait = args.backoff * attempt")),
    _m("backoff-two-to-the-attempt", "S3.2", LEARNER,
       "waits backoff * 2**attempt, so the first wait is already twice the backoff",
       (LEARNER_BACKOFF, "            wait = args.backoff * 2 ** attempt")),
    _m("waits-after-the-last-attempt", "S3.2", LEARNER,
       "backs off after every failure, the last one included",
       ("        if attempt <= args.retries:", "        if rc != 0:")),
    _m("timeout-not-retried", "S3.3", LEARNER,
       "gives up at once on a timeout, reasoning that a hung command would only hang again",
       (LEARNER_SUCCESS, "        if rc in (0, 124):\n            return rc\n")),
    _m("timeout-cancels-the-retries", "S3.3", PIPE_RELAY,
       "stops retrying as soon as an attempt timed out (after logging it), so a timeout is never retried",
       ("        record(cmd, attempt, code, wall, mono)\n",
        "        record(cmd, attempt, code, wall, mono)\n"
        "        if timed_out:\n            return code  # it would only hang again\n")),
    _m("no-early-exit-on-success", "S3.4", LEARNER,
       "keeps looping after an attempt succeeded",
       (LEARNER_SUCCESS, "")),
    _m("success-checked-after-the-backoff", "S3.4", REFERENCE,
       "sleeps the backoff first and looks at the exit code afterwards, so a success still waits",
       ("        if rc == 0 or wakeup.signum is not None:\n            break\n",
        "        if wakeup.signum is not None:\n            break\n"),
       ("            if wakeup.sleep(delay):\n                break\n",
        "            if wakeup.sleep(delay):\n                break\n        if rc == 0:\n            break\n")),
    _m("exits-1-when-retries-run-out", "S3.5", LEARNER,
       "exits 1 once the retries are spent, whatever the last attempt returned",
       ("    return rc\n\n\ndef do_apply", "    return 1 if args.retries else rc\n\n\ndef do_apply")),
    _m("returns-the-first-code", "S3.5", LEARNER,
       "reports the first failure's code, as the 'original' error, instead of the last one",
       ("        rc = run_command(cmd, args.timeout)\n",
        "        rc = run_command(cmd, args.timeout)\n        first_rc = rc if attempt == 1 else first_rc\n"),
       ("                return 143\n    return rc\n", "                return 143\n    return first_rc\n")),

    # ---------------------------------------------------------------- S4: apply and the marker
    _m("already-applied-on-stderr", "S4.1", LEARNER,
       "prints `already applied` to stderr, like the other messages",
       ('        print("already applied")', '        print("already applied", file=sys.stderr)')),
    _m("marker-checked-after-apply-sh", "S4.1", LEARNER,
       "calls apply.sh first and looks for the marker only afterwards",
       (LEARNER_ALREADY, ""),
       ("        if rc != 0:\n", LEARNER_ALREADY.rstrip("\n") + "\n        if rc != 0:\n")),
    _m("apply-sh-through-a-shell-string", "X14", LEARNER,
       "calls apply.sh through sh -c with the name pasted in, so a name with a space is split",
       (LEARNER_APPLY, 'rc = run_command(["sh", "-c", "%s %s" % (APPLY_SH, args.name)], None)')),
    _m("imitates-apply-sh", "S4.2", LEARNER,
       "never runs apply.sh: appends to applied.log, waits and prints as apply.sh would, reading its settings",
       (LEARNER_APPLY, "rc = run_command([sys.executable, '-c', %r, args.name], None)" % IMITATES_APPLY_SH)),
    _m("apply-sh-gets-the-marker-name", "S4.2", LEARNER,
       "passes apply.sh the marker's file name (NAME.done) instead of NAME",
       (LEARNER_APPLY, "rc = run_command([APPLY_SH, marker.name], None)")),
    _m("marker-before-apply-sh", "S4.3", LEARNER,
       "writes the marker before calling apply.sh",
       ("        " + LEARNER_APPLY, "        " + LEARNER_MARK + "\n        " + LEARNER_APPLY)),
    _m("marker-never-written", "S4.3", LEARNER,
       "forgets to create the marker after a successful apply.sh",
       ("        " + LEARNER_MARK + "\n", "")),
    _m("marker-written-on-failure", "S4.4", LEARNER,
       "writes the marker as soon as apply.sh returns, before looking at its exit code",
       ("        " + LEARNER_MARK + "\n", ""),
       ("        if rc != 0:\n", "        " + LEARNER_MARK + "\n        if rc != 0:\n")),
    _m("apply-failure-exits-0", "S4.4", LEARNER,
       "reports apply.sh's failure on stderr but exits 0, the error being 'handled'",
       ("file=sys.stderr)\n            return 1\n", "file=sys.stderr)\n            return 0\n")),
    _m("apply-failure-passes-the-code", "S4.4", REFERENCE,
       "exits with apply.sh's own exit code instead of the 1 the lab asks for",
       ("was not marked as applied\" % (name, rc, name))\n            return EXIT_FAILED",
        "was not marked as applied\" % (name, rc, name))\n            return rc")),

    # ---------------------------------------------------------------- S5: the lock
    _m("lock-next-to-runner", "S5.1", LEARNER,
       "locks /root/pyops/sub/lock instead of state/lock",
       ('LOCK = "/root/pyops/sub/state/lock"', 'LOCK = "/root/pyops/sub/lock"')),
    _m("lock-released-before-apply-sh", "S5.1", LEARNER,
       "closes the lock file as soon as flock() succeeded, which releases the lock before apply.sh runs",
       ("            raise\n", "            raise\n        lock_file.close()  # got it\n")),
    _m("blocking-lock", "S5.2", LEARNER,
       "takes LOCK_EX without LOCK_NB, so a second run waits for the lock instead of refusing",
       (LEARNER_FLOCK, "fcntl.flock(lock_file, fcntl.LOCK_EX)")),
    _m("shared-lock", "S5.2", LEARNER,
       "takes LOCK_SH, which any number of runs hold at once",
       (LEARNER_FLOCK, "fcntl.flock(lock_file, fcntl.LOCK_SH | fcntl.LOCK_NB)")),
    _m("locked-exits-1", "S5.2", LEARNER,
       "exits 1 when the lock is taken, like any other failure",
       ("            return 3\n", "            return 1\n")),
    _m("locked-message-on-stdout", "S5.2", LEARNER,
       "prints `another run in progress` to stdout",
       ('print("another run in progress", file=sys.stderr)', 'print("another run in progress")')),

    # ---------------------------------------------------------------- S6: SIGTERM
    _m("sigterm-not-forwarded", "S6.1", LEARNER,
       "the SIGTERM handler only sets a flag and never passes the signal on",
       ("    if current is not None:\n        try:\n" + LEARNER_FORWARD + " ProcessLookupError:\n            pass\n",
        "")),
    _m("forwards-sigkill", "S6.1", LEARNER,
       "passes SIGKILL on instead of SIGTERM, so the command cannot clean up",
       (LEARNER_FORWARD, LEARNER_FORWARD.replace("SIGTERM", "SIGKILL"))),
    _m("exits-without-waiting", "S6.2", LEARNER,
       "forwards SIGTERM and calls sys.exit(143) right in the handler, without waiting for the command",
       (LEARNER_FORWARD + " ProcessLookupError:\n            pass\n",
        LEARNER_FORWARD + " ProcessLookupError:\n            pass\n    sys.exit(143)\n")),
    _m("sigkill-right-after-sigterm", "S6.2", LEARNER,
       "follows the forwarded SIGTERM with SIGKILL at once 'to be sure', cutting the command's cleanup short",
       (LEARNER_FORWARD, LEARNER_FORWARD.replace(
           "\n        except", "\n            os.killpg(current.pid, signal.SIGKILL)\n        except"))),
    _m("sigterm-returns-the-command-code", "S6.3", LEARNER,
       "exits with whatever the terminated command returned instead of 143",
       ("            write_log(cmd, attempt, 143, ts, start)\n            return 143\n",
        "            write_log(cmd, attempt, rc, ts, start)\n            return rc\n")),
    _m("sigterm-exits-1", "S6.3", REFERENCE,
       "treats being stopped as a plain failure and exits 1",
       ("    if wakeup.signum is not None:\n        return 128 + wakeup.signum\n    return rc\n",
        "    if wakeup.signum is not None:\n        return EXIT_FAILED\n    return rc\n")),
    _m("retries-after-sigterm", "S6.3", REFERENCE,
       "logs the attempt SIGTERM ended, then goes on retrying: its command runs again after the signal",
       ("        if wakeup.signum is not None:\n            break\n        rc = attempt(",
        "        wakeup.signum = None\n        rc = attempt("),
       ("        if rc == 0 or wakeup.signum is not None:\n            break\n        if number < attempts:",
        "        if rc == 0:\n            break\n        if number < attempts:"),
       ("            if wakeup.sleep(delay):\n                break\n", "            wakeup.sleep(delay)\n"),
       fails=("retries_left_do_not_run",)),
    _m("no-cleanup-after-sigterm", "S6.4", LEARNER,
       "forwards SIGTERM but never kills what is left of the group, so a child ignoring TERM survives",
       ("    if got_sigterm:\n        kill_group(current)  # anything still left in the group\n", "")),
    _m("sigterm-to-the-child-only", "S6.4", LEARNER,
       "forwards SIGTERM to the child alone (proc.send_signal), cleans up nothing: hang.sh's sleep never hears of it",
       (LEARNER_FORWARD, "            current.send_signal(signal.SIGTERM)\n        except"),
       ("    if got_sigterm:\n        kill_group(current)  # anything still left in the group\n", "")),
    _m("cleanup-only-after-a-timeout", "S6.4", ASYNCIO,
       "kills the rest of the group after a timeout but not after SIGTERM",
       ("            if timed_out or self.stop.is_set():", "            if timed_out:")),

    # ---------------------------------------------------------------- S7: runs.jsonl
    _m("runs-jsonl-rewritten", "S7.1", LEARNER,
       "opens runs.jsonl with mode 'w', rewriting it on every attempt",
       ('    with open(RUNS, "a") as f:', '    with open(RUNS, "w") as f:')),
    _m("record-built-by-hand", "S7.1", LEARNER,
       "builds the JSON line with % formatting, which breaks on a quote in the command",
       ("        f.write(json.dumps(entry) + \"\\n\")",
        "        f.write('{\"ts\": \"%s\", \"cmd\": [\"%s\"], \"attempt\": %d, \"rc\": %d, \"duration_ms\": %d}\\n'\n"
        "                % (ts, '\", \"'.join(cmd), attempt, rc, entry[\"duration_ms\"]))")),
    _m("record-without-newline", "S7.1", LEARNER,
       "writes json.dumps(entry) without the newline, so records run together",
       ("        f.write(json.dumps(entry) + \"\\n\")", "        f.write(json.dumps(entry))")),
    _m("attempts-counted-from-0", "S7.2", REFERENCE,
       "numbers attempts from 0",
       ("    for number in range(1, attempts + 1):", "    for number in range(attempts):")),
    _m("float-duration-ms", "S7.2", LEARNER,
       "stores duration_ms as a float, without int()",
       ('        "duration_ms": int((time.monotonic() - start) * 1000),',
        '        "duration_ms": (time.monotonic() - start) * 1000,')),
    _m("ts-epoch-float", "S7.2", LEARNER,
       "stores ts as time.time(), a float of epoch seconds",
       ('        ts = datetime.now(timezone.utc).isoformat(timespec="seconds")', "        ts = time.time()")),
    _m("cmd-as-a-string", "S7.2", LEARNER,
       "logs cmd as one joined string instead of the list",
       ('        "cmd": cmd,', '        "cmd": " ".join(cmd),')),
    _m("duration-key-renamed", "S7.2", LEARNER,
       "names the key `duration` instead of `duration_ms`",
       ('        "duration_ms": int((time.monotonic() - start) * 1000),',
        '        "duration": int((time.monotonic() - start) * 1000),')),
    _m("records-nested-deeply", "S7.1", LEARNER,
       "wraps every record in 20,000 lists, a line no JSON reader can take apart without recursing too deep",
       ("        f.write(json.dumps(entry) + \"\\n\")",
        "        f.write(\"[\" * 20000 + json.dumps(entry) + \"]\" * 20000 + \"\\n\")")),
    _m("rc-as-a-string", "S7.2", ASYNCIO,
       "logs rc as a string",
       ('        "rc": int(rc),', '        "rc": str(rc),')),
    _m("timed-out-attempt-not-recorded", "S7.3", REFERENCE,
       "returns from the timeout branch before the attempt is logged",
       ('            say("timeout: %s ran longer than %gs and was killed" % (cmd[0], timeout))\n',
        '            say("timeout: %s ran longer than %gs and was killed" % (cmd[0], timeout))\n'
        "            return rc\n")),
    _m("timed-out-attempt-skipped", "S7.3", ASYNCIO,
       "moves on to the next attempt right after a timeout, skipping the log line",
       ('            say("timeout: attempt %d killed after %gs" % (attempt, timeout))\n',
        '            say("timeout: attempt %d killed after %gs" % (attempt, timeout))\n            continue\n')),

    # ---------------------------------------------------------------- S8: --dry-run
    _m("dry-run-falls-through", "S8.1", LEARNER,
       "prints the plan for a dry run but forgets to return, so it applies for real",
       (LEARNER_PLAN + "            return 0\n", LEARNER_PLAN)),
    _m("dry-run-skips-only-apply-sh", "S8.1", REFERENCE,
       "handles --dry-run by skipping the apply.sh call only, so the marker is still written",
       ('    if args["dry_run"]:\n        return do_dry_run(name)\n', ""),
       ("        rc = attempt([APPLY_SH, name], 1, None, wakeup)",
        '        rc = 0 if args["dry_run"] else attempt([APPLY_SH, name], 1, None, wakeup)')),
    _m("dry-run-without-the-name", "S8.2", LEARNER,
       "prints a generic `dry run: nothing done` that does not name NAME",
       (LEARNER_PLAN, '            print("dry run: nothing done")\n')),
    _m("dry-run-plan-on-stderr", "S8.2", ASYNCIO,
       "writes the plan with the runner's own say(), so it goes to stderr",
       ('            print("dry run: would run %s %s, then create %s" % (APPLY_SH, name, marker), flush=True)',
        '            say("dry run: would run %s %s, then create %s" % (APPLY_SH, name, marker))')),
    _m("dry-run-ignores-the-marker", "S8.3", ASYNCIO,
       "prints the plan without looking for the marker",
       ("        if os.path.exists(marker):\n            print(\"already applied: %s\" % name, flush=True)\n"
        "        else:\n            print(\"dry run:",
        "        print(\"dry run:")),
    _m("dry-run-says-already-done", "S8.3", PIPE_RELAY,
       "says `already done` for a marked name instead of `already applied`",
       ('"%s: already applied, nothing to do\\n"', '"%s: already done, nothing to do\\n"')),

    # ---------------------------------------------------------------- X: the extended profile
    _m("negative-returncode-to-sys-exit", "X1", ASYNCIO,
       "hands the negative returncode of a killed command to sys.exit, giving 256 - N",
       ("    return 128 - returncode if returncode < 0 else returncode", "    return returncode")),
    _m("missing-command-gives-126", "X2", ASYNCIO,
       "catches every OSError alike, so a missing command gives 126 too",
       ('        except FileNotFoundError:\n            say("command not found: %s" % argv[0])\n'
        "            return 127, False\n", "")),
    _m("backoff-ignores-sigterm", "X3", LEARNER,
       "sleeps the backoff with one time.sleep(), which SIGTERM does not cut short",
       ("    end = time.monotonic() + seconds\n    while time.monotonic() < end and not got_sigterm:\n"
        "        time.sleep(min(0.1, max(0, end - time.monotonic())))", "    time.sleep(seconds)")),
    _m("stdout-decoded-as-text", "X4", LEARNER,
       "captures stdout and writes it back decoded, which breaks on bytes that are not UTF-8",
       (LEARNER_SPAWN, LEARNER_SPAWN[:-1] + ", stdout=subprocess.PIPE)"),
       (LEARNER_WAIT, "        out, _ = current.communicate(timeout=timeout)\n"
                      "        sys.stdout.write(out.decode())\n"
                      "        rc = current.returncode")),
    _m("timeout-parsed-as-int", "X6", REFERENCE,
       "parses --timeout with int(), refusing 0.5",
       ('lambda t: _number("--timeout", t, float, 0, False)', 'lambda t: _number("--timeout", t, int, 0, False)')),
    _m("dry-run-makes-the-state-folder", "X8", ASYNCIO,
       "creates state/ before looking at --dry-run",
       ("    if dry_run:\n", "    os.makedirs(STATE_DIR, exist_ok=True)\n    if dry_run:\n")),
    _m("lock-made-inheritable", "X10", REFERENCE,
       "marks the lock's descriptor inheritable so that apply.sh 'holds the lock too'",
       ("    lock_fd = os.open(LOCK_PATH, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)\n",
        "    lock_fd = os.open(LOCK_PATH, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)\n"
        "    os.set_inheritable(lock_fd, True)\n")),
    _m("name-not-checked", "X11", ASYNCIO,
       "trusts NAME and joins it into the marker path unchecked",
       ('    if bad_name(name):\n        say("refusing NAME %r: it must be a plain file name" % name)\n'
        "        return 2\n", "")),
    _m("sigterm-during-apply-exits-1", "X13", REFERENCE,
       "checks only apply.sh's exit code, so a SIGTERM during apply.sh ends as a plain failure (exit 1)",
       ("        if wakeup.signum is not None:\n            return 128 + wakeup.signum\n        if rc != 0:",
        "        if rc != 0:")),
)
# fmt: on


# Graded on the whole profile, a mutant loses points in its own clause and in these, nowhere else
# (tests/test_zoo.py): {name: (also_breaks, runs_into)}.
#   also_breaks  clauses the same line of code breaks by the lab's own words: one mistake that
#                two clauses each demand, said why below;
#   runs_into    clauses a check of which runs into the mistake and cannot yet tell it apart from
#                one of its own (it judges by what it expected, not by what happened): charged
#                there today. A gap of the suite kept in view: the test fails once a check learns
#                to tell, so this list only shrinks.
CHARGED_ALSO = {
    # communicate() waits for every holder of the pipe: a grandchild that ignores TERM keeps it.
    "prints-output-with-a-newline": (("S6.4",), ()),
    # Without sys.exit() every exit code the lab names is lost: apply's 1, the lock's 3.
    "exit-0-on-failure": (("S4.4", "S5.2"), ()),
    # Its attempt lasts the whole timeout, and runs.jsonl says so.
    "sleeps-out-the-timeout": (("S7.2",), ()),
    # The one kill ends a timed-out command and what a forwarded SIGTERM left behind.
    "kills-only-the-child": (("S6.4",), ()),
    "own-environment-kills-only-the-child": (("S6.4",), ()),
    "fork-exec-kills-only-the-leader": (("S6.4",), ()),
    "term-with-a-grace-period": (("S6.4",), ()),
    # The same kill also ends what a forwarded SIGTERM left.
    "timeout-sends-sigterm": (("S6.4",), ()),
    # The same message, under --dry-run too.
    "already-applied-on-stderr": (("S8.3",), ()),
    # The same order of steps, under --dry-run too: the plan before the marker.
    "marker-checked-after-apply-sh": (("S8.3",), ()),
    # A marker written before apply.sh stays when apply.sh fails.
    "marker-before-apply-sh": (("S4.4",), ()),
    # The same lock call, under --dry-run too.
    "blocking-lock": (("S8.1",), ()),
    "locked-exits-1": (("S8.1",), ()),
    # SIGKILL ends the command before any TERM handler runs: from outside, passing SIGKILL on and
    # following SIGTERM with SIGKILL at once look the same, and neither lets the command end itself.
    "forwards-sigkill": (("S6.2",), ()),
    # Exiting in the handler skips the cleanup of what SIGTERM left.
    "exits-without-waiting": (("S6.4",), ()),
    "sigkill-right-after-sigterm": (("S6.1",), ()),
    # The backoff is computed from the attempt's number.
    "attempts-counted-from-0": (("S3.2",), ()),
    # It skips the plan's line along with apply.sh.
    "dry-run-skips-only-apply-sh": (("S8.2",), ()),
    # A timed-out command's captured output is lost; communicate() waits for the pipe's holders.
    "stdout-decoded-as-text": (("S1.2", "S6.4"), ()),
}


def charged(mutant: Mutant) -> Tuple[str, ...]:
    """The clauses a grading of the whole profile charges `mutant` for, sorted."""
    also, runs_into = CHARGED_ALSO.get(mutant.name, ((), ()))
    return tuple(sorted({mutant.breaks, *also, *runs_into}))


def by_name(name: str) -> Mutant:
    for mutant in MUTANTS:
        if mutant.name == name:
            return mutant
    raise KeyError("no mutant named %r" % name)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m conformance.selftest.zoo NAME DIR")
    try:
        print(build(by_name(sys.argv[1]), Path(sys.argv[2])))
    except (KeyError, NoBases) as error:
        sys.exit("zoo: %s" % error.args[0])

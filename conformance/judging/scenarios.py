"""Scenarios that checks of more than one lab step judge, each played once per grading.

See observations.py: the first check that asks plays the scenario in its own lab, and every
check judges what was seen then. A scenario never fails a check itself: it records what
happened (a process never seen is None), and each check says what that means for its clause.
"""

import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import psutil

from conformance.harness import labfiles
from conformance.harness.result import Result, counted_calls, is_run_of
from conformance.harness.witness import Opened
from conformance.judging import expect
from conformance.lab import draws, timing
from conformance.lab.commands import APPLY, FLAKY, HANG, counted, flaky_calls, py, sh

# Commands that outlive a one-second timeout, each hard to kill in its own way. Each is built
# when played: py() names the runner's interpreter, which is known only once the grading is
# configured (this module is imported before that, and the suite's own interpreter may sit in a
# folder the runner's uid cannot enter).
NEVER_ENDING = {
    "hang.sh": lambda: [HANG],
    "sleep": lambda: ["sleep", "60"],
    "ignores-TERM": lambda: py("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"),
    "background-child": lambda: sh("sleep 60 & sleep 60"),
    "deep-tree": lambda: sh("sh -c 'sh -c \"sleep 60\"' & wait"),
    "python-grandchildren": lambda: py(
        "import subprocess, time; subprocess.Popen(['sleep', '60']); subprocess.Popen(['sleep', '61']); time.sleep(60)"
    ),
}
# hang.sh's own child, which holds the runner's stdout pipe: S2.4 wants it killed too.
HANG_SLEEP = ["sleep", "60"]


def calls(seen, clause: str) -> List[float]:
    """When each call of the lab's counted command started (commands.counted), in order: in the
    lab of a Result as its runner ended, or in a Lab now (see result.counted_calls). Where only the
    counter's own lines can say it and they are no regular file, its check, `clause`, fails."""
    if isinstance(seen, Result):
        return seen.calls(clause)
    return counted_calls(seen, seen.witnessed(), None, clause)


@dataclass
class TimedOut:
    """`run --timeout 1 -- COMMAND` of a never-ending command, and when its processes started."""

    result: Result
    command: list
    started: Optional[float]  # when the command started (timing.now()'s clock); None: never seen
    ended: Optional[float]  # when it was seen ended, if before the runner itself did (same clock)
    grandchild_seen: bool  # hang.sh's sleep ran under the runner (True for other commands)
    why_not_seen: str  # what the harness saw instead, when something was not seen


def timed_out(runner, name: str, timeout: int = 1) -> TimedOut:
    """A timed-out run of NEVER_ENDING[name] under `--timeout TIMEOUT`: S2.1 to S2.4 and S7.3
    judge it (those under one second; S2.1 also the drawn one, draws.CURRENT.kill_timeout_s)."""
    command = NEVER_ENDING[name]()

    def play() -> TimedOut:
        invocation = runner.start("run", "--timeout", str(timeout), "--", *command, expect_s=timeout)
        process = invocation.find(command)
        started = None if process is None else invocation.start_time(process)
        grandchild = name != "hang.sh" or invocation.start_of(HANG_SLEEP) is not None
        why_not = invocation.why_not_seen() if started is None or not grandchild else ""
        ended = None if process is None else invocation.gone_at(process)
        return TimedOut(invocation.finish(), command, started, ended, grandchild, why_not)

    return runner.scenario(("timed out", name) if timeout == 1 else ("timed out", name, timeout), play)


def never_seen(watched: TimedOut, argv, clause: str) -> None:
    """Fail `clause`: `argv` never ran under the runner in the observed timed-out run."""
    __tracebackhide__ = True
    expect.fail(
        clause,
        expect.say("`%s` running under the runner", "runner の下で `%s` が動く") % " ".join(argv),
        watched.why_not_seen,
        watched.result,
    )


def seen_timed_out(runner, name: str) -> TimedOut:
    """timed_out(), for a check that judges what follows a timeout (its line, its code, what is
    left, its record): only a command that ran under the runner can have timed out. A runner that
    says `timeout` and exits 124 without running its command earns none of them; that it never ran
    it is S2.1's failure, which S2.1's own check reports, so the asking check is blocked by it."""
    __tracebackhide__ = True
    watched = timed_out(runner, name)
    if watched.started is None:
        never_seen(watched, watched.command, "S2.1")
    return watched


def killed_at(watched: TimedOut) -> float:
    """When the timed-out command ended: when it was seen to, else (it outlived the runner, or its
    end was not seen) when the runner ended, the latest its kill can have been."""
    result = watched.result
    return result.ended if watched.ended is None else min(watched.ended, result.ended)


def output_clause(runner, clause: str) -> str:
    """The clause a check of `clause` charges its command's stdout to: its own, unless the runner
    does not pass even a plain line through unchanged (`run -- printf ...`, played once). Then
    no check can read its command's output, which is S1.2's defect: charged there, once, and
    the check's own clause is blocked by it instead of failed."""
    plain = runner.aside().observe("run", "--", "printf", "%s\\n", "plain")
    return clause if plain.stdout == b"plain\n" else "S1.2"


def stdout_is(runner, result: Result, wanted: bytes, clause: str) -> None:
    """expect.stdout_is, for a check that reads its command's output as evidence of `clause`."""
    __tracebackhide__ = True
    if result.stdout != wanted:
        expect.stdout_is(result, wanted, output_clause(runner, clause))


def timeout_code_clause(runner, clause: str) -> str:
    """The clause a check of `clause` charges a wrong code for a timed-out attempt to: its own,
    unless the runner gets even a plain timeout's code wrong (S2.3's `--timeout 1 -- sleep 60`
    did not exit 124). Then that is the defect the check ran into: S2.3's, charged there once."""
    plain = timed_out(runner.aside(), "sleep").result
    return clause if plain.rc in (124, None) else "S2.3"


def exits_124(runner, result: Result, clause: str) -> None:
    """expect.exit_code(result, 124, clause), for a check of another clause than S2.3 that ends in a
    timeout: a wrong code is charged to S2.3 when even a plain timeout's is wrong, or, after
    retries, to S3.5 when even plain retries end with another code than the last attempt's."""
    __tracebackhide__ = True
    finished(runner, result, clause)
    if result.rc != 124:
        charged = timeout_code_clause(runner, clause)
        if charged == clause and _retries(result) > 0:
            charged = last_code_clause(runner, clause)
        expect.exit_code(result, 124, charged)


def _retries(result: Result) -> int:
    """The --retries a run was given (0 without)."""
    args = list(result.args)
    options = args[: args.index("--")] if "--" in args else args
    try:
        return int(options[options.index("--retries") + 1])
    except (ValueError, IndexError):
        return 0


def retried_twice(runner) -> Result:
    """`--retries 2` of a command that always exits 42, each call counted (see calls): S3.1
    judges it, and checks of other clauses ask it whether the runner's retries work at all."""
    command = counted(runner.lab.counter, "exit 42")
    return runner.observe("run", "--retries", "2", "--backoff", "0", "--", *command, scenario="retried-twice")


def attempts_clause(runner, clause: str, after: Sequence[str] = ()) -> str:
    """The clause a check of `clause` charges a wrong number of attempts to: its own, unless the
    runner gets even plain retries wrong (`retried_twice` made other than 3 attempts), which is
    S3.1's defect; or, for a run that retried `after` "timeout" or "success", unless the runner
    gets that wrong plainly too: a timeout not retried (`hang_retried`) is S3.3's defect, more
    attempts after a success (`stops_at_success`) S3.4's. Each is asked in a lab of its own."""
    if len(calls(retried_twice(runner.aside()), "S3.1")) != 3:
        return "S3.1"
    if "timeout" in after and len(calls(hang_retried(runner.aside()), "S3.3")) != 2:
        return "S3.3"
    if "success" in after and flaky_calls(stops_at_success(runner.aside())) != 3:
        return "S3.4"
    return clause


def attempts_are(
    runner, result: Result, what: str, found: int, wanted: int, clause: str, after: Sequence[str] = ()
) -> None:
    """expect.count_is for the attempts a check of `clause` counted (see attempts_clause). None
    at all under a `--timeout` is S2.1's failure when the runner does not even run a plain timed
    command (see seen_timed_out)."""
    __tracebackhide__ = True
    if found == 0 and "--timeout" in result.args:
        seen_timed_out(runner.aside(), "sleep")
    if found != wanted:
        expect.count_is(result, what, found, wanted, attempts_clause(runner, clause, after))


def last_code_clause(runner, clause: str) -> str:
    """The clause a check of `clause` charges a wrong exit code after retries ran out to: its own,
    unless the runner ends even plain retries (`retried_twice`, always 42) with another code:
    then that is the defect the check ran into, S3.5's."""
    return clause if retried_twice(runner.aside()).rc in (42, None) else "S3.5"


def stops_at_success(runner) -> Result:
    """`--retries 3` of flaky.sh, which succeeds on its third call: S3.4 judges it (no fourth
    call), and checks of other clauses ask it whether a success ends a run at all."""
    return runner.observe("run", "--retries", "3", "--backoff", "0", "--", FLAKY, scenario="stops-at-success")


def finished(runner, result: Result, clause: str) -> None:
    """expect.finished, for a check of `clause` whose run has a `--timeout`: a runner that never
    ended is charged to S2.1 when it mishandles even a plain timeout (it never ends a timed-out
    `sleep 60`, or it sleeps out the time of a command that ended at once), not to the clause
    that ran into it."""
    __tracebackhide__ = True
    hung = result.rc is None and "--timeout" in result.args and not clause.startswith("S2")
    if hung and (timed_out(runner.aside(), "sleep").result.rc is None or waits_out_the_timeout(runner)):
        expect.finished(result, "S2.1")
    expect.finished(result, clause)


def quick_under_a_timeout(runner) -> Result:
    """`run --timeout 5 -- true`: S2.1 judges that it ends as soon as its command does."""
    return runner.observe("run", "--timeout", "5", "--", "true")


def waits_out_the_timeout(runner) -> bool:
    """Does the runner sleep out its timeout even for a command that ends at once (asked aside)?
    Most of the 5 s, not a loaded machine's second: a charge must not depend on the load."""
    quick = quick_under_a_timeout(runner.aside())
    return quick.rc is None or quick.duration_s >= 4


@dataclass
class WithinTimeout:
    """`run --timeout T -- COMMAND` of a counted command that ends well within T, and how long
    the kernel saw the command live."""

    result: Result
    lasted_s: Optional[float]  # from its start until it was seen ended; None: not seen both

    def real_length_s(self, length_s: float) -> float:
        """How long the command of `length_s` ran: as long as the kernel saw it live where it
        was cut short (killed early, which S2.1 judges), else all of it."""
        if self.lasted_s is not None and self.lasted_s < length_s - timing.EARLY_S:
            return self.lasted_s
        return length_s


def within_timeout(runner) -> WithinTimeout:
    """A command that ends well within its timeout, both drawn (draws.CURRENT: more than two
    seconds, under a timeout of four or five), its call counted (see calls): S2.1 (not killed)
    and S7.2 (its duration, judged by how long the command really lived) judge it."""
    drawn = draws.CURRENT
    command = counted(runner.lab.counter, "sleep %g; echo finished" % drawn.survived_command_s)

    def play() -> WithinTimeout:
        invocation = runner.start(
            "run", "--timeout", str(drawn.survived_timeout_s), "--", *command, expect_s=drawn.survived_command_s
        )
        process = invocation.find(command)
        lasted_s = None
        if process is not None:
            started = invocation.start_time(process)
            ended = invocation.gone_at(process)
            lasted_s = None if ended is None else ended - started
        return WithinTimeout(invocation.finish(), lasted_s)

    return runner.scenario(("run", "within timeout"), play)


def backoff_schedule(runner) -> Result:
    """`--retries 3 --backoff 1` of a command that always fails, each call counted (see calls):
    waits of 1, 2 and 4 seconds. S3.2's checks of that schedule judge it (the gaps between the
    calls' starts, the first wait) from what the kernel showed of the calls, never from runs.jsonl,
    which is S7's to judge. The longest scenario of a grading,
    so it is played ahead (see PLAYED_AHEAD)."""
    command = counted(runner.lab.counter)
    return runner.observe("run", "--retries", "3", "--backoff", "1", "--", *command, expect_s=7, scenario="backoff-1")


# The scenarios a grading starts at once, beside its workers' start-up (plugin.py), with the
# clause of the checks that judge them (each marked `judges(NAME)`): the longest one would
# otherwise begin only once a worker is ready, and end the grading seconds later.
PLAYED_AHEAD = {"backoff-1": ("S3.2", backoff_schedule)}


def hang_retried(runner) -> Result:
    """hang.sh under `--timeout 1 --retries 1`, each call counted (see calls): S3.3 and S7.3 judge it."""
    command = counted(runner.lab.counter, 'exec "%s"' % HANG)
    return runner.observe(
        "run", "--timeout", "1", "--retries", "1", "--backoff", "0", "--", *command, expect_s=2, scenario="hang-retried"
    )


@dataclass
class ApplyInProgress:
    """`apply first` with apply.sh taking 4s, and what the harness saw and did meanwhile."""

    first: Result
    applying: bool  # apply.sh was seen started (by the witness, else applied.log written) while the first runner ran
    why_not_seen: str
    lock_free: Optional[bool]  # could another process take LOCK_EX on state/lock meanwhile
    shared_only: Optional[bool]  # it could take LOCK_SH: the first runner's lock is a shared one
    marker_early: Optional[bool]  # state/first.done existed meanwhile
    apply_sh_seen: Optional[bool]  # a shell running the fixture's apply.sh with `first`, under the runner
    same_name: Optional[Result]  # `apply first` again, meanwhile (started with other_name)
    other_name: Optional[Result]  # `apply second`, meanwhile


APPLY_SECONDS = 4  # room for two more runners to start and be refused while apply.sh runs, even loaded


def apply_in_progress(runner) -> ApplyInProgress:
    """One apply that takes a while: S4.3 (no marker yet), S5.1 (lock held) and S5.2 judge it."""

    def play() -> ApplyInProgress:
        witness = runner.lab.witness
        if witness is not None:
            # apply.sh is held at its start for APPLY_SECONDS by the kernel (witness.hold), with no
            # setting that tells this apply from any other: a runner cannot recognise it.
            witness.hold("apply.sh", APPLY_SECONDS, lambda opened: is_run_of(opened, APPLY, "first"))
            first = runner.start("apply", "first", expect_s=APPLY_SECONDS)
            applying = bool(first.watch(lambda: witness.held("apply.sh")))
        else:  # no witness here: the fixture's own delay, and its first trace as the sign it runs
            first = runner.start("apply", "first", env={"APPLY_DELAY": str(APPLY_SECONDS)}, expect_s=APPLY_SECONDS)
            applying = bool(first.watch(lambda: labfiles.present(runner.lab.sub, "applied.log")))
        why_not = "" if applying else first.why_not_seen()
        lock_free = shared_only = marker_early = apply_sh_seen = same = other = None
        if applying:
            apply_sh_seen = witness is not None or any(runs_apply_sh(p, "first") for p in first.descendants())
            lock_free = runner.lock_is_free()
            shared_only = not lock_free and runner.lock_is_free(shared=True)
            marker_early = labfiles.present(runner.lab.sub, "state/first.done")
            # Both at once, while the lock is surely held: one after the other, a runner that waits
            # for the lock would make the next one start after the first had let go of it.
            started = [runner.start("apply", name) for name in ("first", "second")]
            same, other = [invocation.finish() for invocation in started]
        finished = first.finish()
        return ApplyInProgress(
            finished, applying, why_not, lock_free, shared_only, marker_early, apply_sh_seen, same, other
        )

    return runner.scenario("apply in progress", play)


def lock_clause(runner, result: Result, clause: str) -> str:
    """The clause a check of `clause` charges a runner that went ahead while state/lock was held
    (it finished, with another code than 3) to: its own, unless the runner does not hold state/lock
    even while its own apply.sh runs (`apply_in_progress`: another process could take LOCK_EX
    meanwhile). Then it never locks that file for long, S5.1's defect, which this ran into."""
    if result.rc in (3, None):
        return clause
    seen = apply_in_progress(runner.aside())
    return "S5.1" if seen.applying and seen.lock_free else clause


# What runs apply.sh: its #! line's bash, or a shell a runner named itself.
SHELLS: Tuple[str, ...] = ("bash", "sh", "dash")


def runs_apply_sh(process, name: str) -> bool:
    """Is `process` the fixture's apply.sh applying `name`: a shell (by its executable, which a
    runner cannot rename as it can its argv) whose arguments are apply.sh's path and the name?
    A runner that imitates apply.sh (appends to applied.log, prints its words) shows no such process.

    Where the grader may not read another uid's executable (a container without CAP_SYS_PTRACE),
    the process's name stands in for it: the shell's, or the script's that the kernel gives a
    process started through its #! line. A runner could set that name on purpose; not by imitating.
    """
    try:
        argv = process.cmdline()
        try:
            program, known = os.path.basename(process.exe()), SHELLS
        except psutil.AccessDenied:
            program, known = process.name(), SHELLS + (os.path.basename(APPLY),)
    except psutil.Error:
        return False
    return program in known and argv[1:] == [APPLY, name]


# The kinds of NAME applied, each named by an example; the name itself is drawn per grading
# (draws.CURRENT.name). Plain names only: the lab never says what a NAME may hold, and a runner
# that refuses others is a reasonable tool (settled reading; names with spaces or other letters are
# X14's). "help" is a plain name like any other: a runner that takes it for its own word never
# applies it.
APPLY_NAMES = list(draws.NAME_KINDS)


def every_apply(runner) -> List[Result]:
    """Every apply of a grading that should call apply.sh, each as its scenario was played (asked
    apart, one lab at a time): S5.1 wants the lock held in each and S4.3 no marker before, and a
    runner cannot tell one from another by what it reads."""
    results: List[Result] = []
    for kind in APPLY_NAMES:
        with runner.apart() as other:
            results.append(other.observe("apply", draws.CURRENT.name(kind)))
    with runner.apart() as other:
        twice = applied_twice(other)
    with runner.apart() as other:
        fixed = failed_then_fixed(other)
    with runner.apart() as other:
        slow = apply_in_progress(other)
    return results + [twice.first, twice.next_name, fixed.failed, fixed.fixed, slow.first]


# apply.sh fails (exit 1) while this is set: APPLY_FAIL of the lab.
FAILING = {"APPLY_FAIL": "1"}


@dataclass
class AppliedTwice:
    """`apply feature` in a fresh lab, then, in the same lab, the same apply again, a dry run of
    it, and `apply next`: each later call meets what the earlier ones left."""

    first: Result
    lock_file: bool  # state/lock existed once the first apply had ended
    lock_free: bool  # another process could take LOCK_EX on it then
    again: Result
    dry_run: Result
    next_name: Result


def applied_once(result: Result, name: str) -> None:
    """`apply NAME` ended with 0 and called apply.sh NAME once: S4.2's, also where another clause
    (the marker, apply's runs.jsonl line) has nothing to judge without it."""
    __tracebackhide__ = True
    expect.exit_code(result, 0, "S4.2")
    called_once(result, name)


def apply_clause(runner, clause: str) -> str:
    """The clause a check of `clause` charges an apply that did not run apply.sh to: its own,
    unless the runner runs none even in a plain apply (S4.2's scenario, asked aside): then that is
    the defect the check ran into, S4.2's, charged there once."""
    name = draws.CURRENT.name("db-migration")
    plain = runner.aside().observe("apply", name)
    return clause if plain.applied() == [name] else "S4.2"


def called_once(result: Result, name: str) -> None:
    """`apply NAME` called apply.sh NAME once, whatever apply.sh then did: S4.2's."""
    __tracebackhide__ = True
    expect.that(
        result.applied() == [name],
        "S4.2",
        expect.say("apply.sh called once with %r", "apply.sh が %r で 1 回だけ呼ばれる") % name,
        expect.shown_applied(result),
        result,
    )


def own_runs_of_apply_sh(result: Result) -> List[Opened]:
    """The runs of apply.sh that apply call `result` made itself, for a check of what holds while
    apply.sh runs (the lock, no marker yet). Where the witness saw this apply run none, what the
    check judges did not happen: S4.2's failure (apply.sh not called) stands for it, so a runner
    that imitates apply.sh earns nothing from the lock it held or the marker it left alone."""
    __tracebackhide__ = True
    runs = result.own_apply_runs()
    if not runs and result.apply_runs() is not None:
        called_once(result, result.args[-1])
    return runs


def applied_twice(runner) -> AppliedTwice:
    """S4.1 (a second apply is a no-op), S5.1 (the lock file, free after a success) and S8.3 (a
    dry run after a real apply) judge it."""

    def play() -> AppliedTwice:
        # Each Result kept apart at once: it shows the lab as its own call left it.
        first = runner.run("apply", "feature").kept_apart()
        lock_file = labfiles.look(runner.lab.sub, "state/lock").exists
        lock_free = runner.lock_is_free()
        again = runner.run("apply", "feature").kept_apart()
        dry_run = runner.run("apply", "--dry-run", "feature").kept_apart()
        return AppliedTwice(first, lock_file, lock_free, again, dry_run, runner.run("apply", "next"))

    return runner.scenario("applied twice", play)


@dataclass
class FailedThenFixed:
    """`apply broken` with apply.sh failing, in a fresh lab, then again with apply.sh succeeding."""

    failed: Result
    lock_free: bool  # another process could take LOCK_EX on state/lock once the failed apply ended
    fixed: Result


def failed_then_fixed(runner) -> FailedThenFixed:
    """S4.4 (exit 1, no marker, tried again next time) and S5.1 (the lock free after a failure) judge it."""

    def play() -> FailedThenFixed:
        failed = runner.run("apply", "broken", env=FAILING).kept_apart()
        lock_free = runner.lock_is_free()
        return FailedThenFixed(failed, lock_free, runner.run("apply", "broken"))

    return runner.scenario("failed then fixed", play)

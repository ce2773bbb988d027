"""Blocked checks: a runner that cannot make its most basic call fails fast, and says why.

Before the first check, the basic call of each action is made once per grading (shared by the
workers like any observation), in a lab of its own. `run` runs a command that leaves a trace in
the lab and exits 3, so a runner that exits 0 without running anything (an empty file) does not
pass it; `apply basic-check` must call apply.sh (its line in applied.log) and exit 0. If the
runner fails its basic call, every later check that would make that kind of call fails at once
as *blocked by* the basic clause, showing that call's output, instead of failing the same way
once per check: a runner that hangs on everything gets its verdict in seconds, not an hour, and
the learner sees the one thing to fix (verdicts.py charges it to that clause alone).
"""

import re
from typing import Callable, ContextManager, Dict, Optional, Tuple

from conformance.harness.observations import Observations
from conformance.harness.result import Result
from conformance.harness.sandbox import Lab
from conformance.judging import expect
from conformance.judging.driver import Driver, driving
from conformance.lab import timing
from conformance.lab.commands import sh

# The file the basic run's command writes in the lab's work folder, and the code it exits with.
TRACE, TRACE_TEXT, TRACE_CODE = "basic-call", b"ran\n", 3
BASIC_NAME = "basic-check"  # the change the basic apply applies


class Blocked(expect.ClauseFailure):
    """A check not run because its kind of call is known to fail: the basic clause's failure,
    and its own clause is blocked by it (see verdicts.py). `because` says what the basic call
    did, in a line; `does_not_compile` when that was Python refusing the file."""

    def __init__(self, clause: str, expected: str, actual: str, result: Result, hint: Optional[str], because: str):
        super().__init__(clause, expected, actual, result, hint)
        self.because = because
        self.does_not_compile = compile_error(result) is not None


# What went wrong with a basic call: (its Result, the clause it breaks, what it did), or None.
Failure = Optional[Tuple[Result, str, str]]


def basic_run(driver: Driver) -> Failure:
    """`run -- sh -c 'echo ran > TRACE; exit 3'`: the command ran, and its exit code came back."""

    def play() -> Result:  # in the lab of the worker that plays it; its work folder's files travel with the Result
        return driver.run("run", "--", *sh('echo ran > "%s"; exit %d' % (driver.lab.work / TRACE, TRACE_CODE)))

    result = driver.scenario(("run", "basic run"), play)
    if result.rc is None:
        return result, "S1.3", expect.say("never finished", "終わりませんでした")
    if result.work_file(TRACE) != TRACE_TEXT:
        return result, "S1.1", compile_error(result) or _ran_nothing(result)
    if result.rc != TRACE_CODE:
        return (
            result,
            "S1.3",
            expect.say(
                "ran its command, which exited %d, then exited %s",
                "コマンドを実行し(コマンドは %d で終了)、%s で終了しました",
            )
            % (TRACE_CODE, result.rc),
        )
    return None


def _ran_nothing(result: Result) -> str:
    """What a runner whose basic run left no trace did instead."""
    if result.rc == 0 and not result.stdout.strip() and not result.stderr.strip():
        # An empty file, `pass`, a bare sys.exit(0): where most first files start.
        return expect.say(
            "does nothing: it exited 0 at once, ran no command and printed nothing",
            "何もしません: すぐに 0 で終了し、コマンドを実行せず、何も出力しませんでした",
        )
    return (
        expect.say(
            "ran no command (its command left no trace), and exited %s",
            "コマンドを実行せず(痕跡がありません)、%s で終了しました",
        )
        % result.rc
    )


def basic_apply(driver: Driver) -> Failure:
    """`apply basic-check`: apply.sh ran with that name (its line in applied.log), and the runner exited 0."""
    result = driver.observe("apply", BASIC_NAME)
    applied = result.applied_seen()
    if result.rc is None:
        return result, "S4.2", expect.say("never finished", "終わりませんでした")
    error = compile_error(result)
    if error:
        return result, "S1.1", error  # one cause, charged once: where the basic run charges it
    if not applied:
        return (
            result,
            "S4.2",
            expect.say("exited %s without calling apply.sh", "apply.sh を呼ばずに %s で終了しました") % result.rc,
        )
    if applied != [BASIC_NAME]:
        return (
            result,
            "S4.2",
            expect.say("called apply.sh as `apply.sh %s`", "apply.sh を `apply.sh %s` として呼びました")
            % (" / ".join(applied)),
        )
    if result.rc != 0:
        return (
            result,
            "S4.2",
            expect.say("called apply.sh, then exited %s", "apply.sh を呼んだあと %s で終了しました") % result.rc,
        )
    return None


def _run_expected() -> str:
    return expect.say(
        "`runner.py run -- sh -c 'echo ran > ...; exit %d'` runs the command and exits %d",
        "`runner.py run -- sh -c 'echo ran > ...; exit %d'` がコマンドを実行し %d で終了する",
    ) % (TRACE_CODE, TRACE_CODE)


def _apply_expected() -> str:
    return (
        expect.say(
            "`runner.py apply %s` calls apply.sh and exits 0", "`runner.py apply %s` が apply.sh を呼び 0 で終了する"
        )
        % BASIC_NAME
    )


# action: how its basic call is made and judged, and what the checks it blocks expected
BASIC_CALLS: Dict[str, Tuple[Callable[[Driver], Failure], Callable[[], str]]] = {
    "run": (basic_run, _run_expected),
    "apply": (basic_apply, _apply_expected),
}


_COMPILE_ERRORS = re.compile(rb"^\s*(SyntaxError|IndentationError|TabError): .*$", re.M)
_WHERE = re.compile(rb'^\s*File "[^"]*", line (\d+)', re.M)


def compile_error(result: Result) -> Optional[str]:
    """That the runner does not compile, with its line and error, from what Python printed."""
    error = _COMPILE_ERRORS.search(result.stderr)
    if error is None or b"Traceback" in result.stderr[: error.start()]:
        return None  # none, or an error of some code the runner compiles while it runs
    where = _WHERE.findall(result.stderr[: error.start()])
    line = expect.say("line %s: ", "%s 行目: ") % where[-1][-_LINE_DIGITS:].decode() if where else ""
    said = error.group(0).decode("utf-8", "replace").strip()
    if len(said) > _SAID_LIMIT:  # the runner's own stderr: a line of any length it likes
        said = said[:_SAID_LIMIT] + "..."
    return expect.say("does not compile: %s", "コンパイルできません: %s") % (line + said)


# What of Python's complaint goes into a one-line message (grades.csv, a platform's summary):
# Python's own lines are short; a runner can print one of any length on its stderr.
_SAID_LIMIT = 200
_LINE_DIGITS = 9


class Canary:
    """The basic calls' outcomes in this worker: None when fine, else what failed."""

    def __init__(self) -> None:
        self.failed: Dict[str, Failure] = {}

    def probe(self, make_lab: Callable[[], ContextManager[Lab]], python: str, seen: Observations) -> None:
        """Make each basic call once per grading (the first time only)."""
        for action, (play, _expected) in BASIC_CALLS.items():
            if action in self.failed:
                continue
            # Observed as a check observes it: shared by every worker of the grading.
            with driving(make_lab, python, observations=seen) as driver:
                self.failed[action] = play(driver)

    def gate(self, args) -> None:
        """Fail the calling check at once if calls like `args` are known to fail."""
        __tracebackhide__ = True
        action = args[0] if args else ""
        failure = self.failed.get(action)
        if failure is None:
            return
        result, clause, what = failure
        hint = None
        if compile_error(result):
            hint = expect.say(
                "runner.py must compile before anything else can be checked: fix that line "
                "(`python3 -m py_compile runner.py` shows the error)",
                "ほかを確かめる前に runner.py がコンパイルできる必要があります。その行を直してください"
                "(`python3 -m py_compile runner.py` でエラーを確認できます)",
            )
        raise Blocked(
            clause,
            expect.say("%s (within %.0fs)", "%s(%.0f 秒以内に)") % (BASIC_CALLS[action][1](), timing.HANG_MARGIN_S),
            # Read in the basic clause's own entry too, so it names the basic call, not "blocked by" itself.
            expect.say(
                "the basic `%s` call (%s) %s, so this check, another `%s` call, was not run; "
                "make the basic call work first",
                "基本の `%s` の呼び出し(%s)は%s。このチェック(これも `%s` の呼び出し)は"
                "実行していません。まず基本の呼び出しを動くようにしてください",
            )
            % (action, clause, what, action),
            result,
            hint,
            what,
        )

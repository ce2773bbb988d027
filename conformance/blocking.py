"""Blocked checks: a runner that cannot make its most basic call fails fast, and says why.

Before the first check, the basic call of each action is made once per grading (shared by the
workers like any observation), in a lab of its own (`run -- true`, `apply NAME`). If the runner
does not finish it with exit code 0, every later check that would make that kind of call fails
at once as *blocked by* the basic clause, showing
that call's output, instead of failing the same way once per check: a runner that hangs on
everything gets its verdict in seconds, not an hour, and the learner sees the one thing to fix.
"""

from typing import Callable, ContextManager, Dict, Optional

from conformance import expect, timing
from conformance.observations import Observations
from conformance.processes import driving
from conformance.result import Result
from conformance.sandbox import Lab

# action: (the basic call, the clause a runner that never finishes it breaks)
BASIC_CALLS = {
    "run": (("run", "--", "true"), "S1.3"),
    "apply": (("apply", "basic-check"), "S4.2"),
}


class Blocked(expect.ClauseFailure):
    """A check not run because its kind of call is known to fail: the basic clause's failure,
    and its own clause is blocked by it (see verdicts.py)."""


class Canary:
    """The basic calls' outcomes in this worker: None when fine, else the Result that failed."""

    def __init__(self) -> None:
        self.failed: Dict[str, Optional[Result]] = {}

    def probe(self, make_lab: Callable[[], ContextManager[Lab]], python: str, seen: Observations) -> None:
        """Make each basic call once per grading (the first time only)."""
        for action, (argv, _clause) in BASIC_CALLS.items():
            if action in self.failed:
                continue

            # Observed as a check observes it: the checks that judge `run -- true` judge this call.
            with driving(make_lab, python, observations=seen) as driver:
                result = driver.observe(*argv)
            self.failed[action] = None if result.rc == 0 else result

    def gate(self, args) -> None:
        """Fail the calling check at once if calls like `args` are known to fail."""
        __tracebackhide__ = True
        action = args[0] if args else ""
        result = self.failed.get(action)
        if result is None:
            return
        argv, clause = BASIC_CALLS[action]
        if result.rc is None:
            what = expect.say("never finished", "終わりませんでした")
        else:
            what = expect.say("exited %s", "終了コード %s で終わりました") % result.rc
        raise Blocked(
            clause,
            expect.say("`runner.py %s` exits 0 (within %.0fs)", "`runner.py %s` が 0 で終了する(%.0f 秒以内に)")
            % (" ".join(argv), timing.HANG_MARGIN_S),
            expect.say(
                "blocked by %s: that basic call %s, so this check (a `%s` call too) was not run; "
                "make the basic call work first",
                "blocked by %s: その基本の呼び出しが%s。このチェック(これも `%s` の呼び出し)は"
                "実行していません。まず基本の呼び出しを動くようにしてください",
            )
            % (clause, what, action),
            result,
        )

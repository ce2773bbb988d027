"""Blocked checks: a runner that never finishes its most basic call fails fast, not slowly.

Before its first check, each worker makes the basic call of each action once, in a lab of its
own (`run -- true`, `apply NAME`). If the runner does not finish it, every later check that would
make that kind of call fails at once as *blocked by* the basic clause, instead of waiting out its
own deadline: a runner that hangs on everything gets its verdict in seconds, not an hour.
"""

from typing import Callable, ContextManager, Dict, Optional

from conformance import expect, timing
from conformance.processes import Driver
from conformance.result import Result
from conformance.sandbox import Lab

# action: (the basic call, the clause a runner that never finishes it breaks)
BASIC_CALLS = {
    "run": (("run", "--", "true"), "S1.3"),
    "apply": (("apply", "basic-check"), "S4.2"),
}


class Canary:
    """The basic calls' outcomes in this worker: None while fine, else the Result that hung."""

    def __init__(self) -> None:
        self.hung: Dict[str, Optional[Result]] = {}

    def probe(self, make_lab: Callable[[], ContextManager[Lab]], python: str) -> None:
        """Make each basic call once (the first time only)."""
        for action, (argv, _clause) in BASIC_CALLS.items():
            if action in self.hung:
                continue
            with make_lab() as lab:
                driver = Driver(lab, python)
                try:
                    result = driver.run(*argv)
                finally:
                    driver.close()
            self.hung[action] = result if result.rc is None else None

    def gate(self, args) -> None:
        """Fail the calling check at once if calls like `args` are known never to finish."""
        __tracebackhide__ = True
        action = args[0] if args else ""
        result = self.hung.get(action)
        if result is None:
            return
        argv, clause = BASIC_CALLS[action]
        expect.fail(
            clause,
            "`runner.py %s` finishes (within %.0fs)" % (" ".join(argv), timing.HANG_MARGIN_S),
            "blocked by %s: the runner never finished that basic call, so this check (which makes a `%s` "
            "call too) was not run; make the basic call finish first" % (clause, action),
            result,
        )

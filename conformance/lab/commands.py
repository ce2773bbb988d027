"""Named commands the checks give the runner, so a test reads as what it does."""

import sys
from typing import List

BIN = "/opt/fixtures/pyops/bin"
FLAKY = BIN + "/flaky.sh"
HANG = BIN + "/hang.sh"
APPLY = BIN + "/apply.sh"
# The interpreter for commands that need Python (exact bytes, signals): the one that runs the
# runner (set by the plugin), which the runner's own uid can always start; the suite's own
# interpreter may sit in a folder closed to it (tox keeps its venvs in a private .tox).
PY = sys.executable


def sh(script: str) -> List[str]:
    """A command given as a shell script: the runner still gets an argv list, ["sh", "-c", ...]."""
    return ["sh", "-c", script]


def exits(code: int) -> List[str]:
    return sh("exit %d" % code)


def py(code: str) -> List[str]:
    return [PY, "-c", code]


def counted(counter, then: str = "exit 1") -> List[str]:
    """A command that appends its start time to `counter` (one line per call), then runs `then`."""
    return sh('date +%%s.%%N >> "%s"; %s' % (counter, then))


def starts(counted_lines: bytes) -> List[float]:
    """The start times in what `counted` wrote (a counter file's content)."""
    found = []
    for line in counted_lines.decode("utf-8", "replace").splitlines():
        try:
            found.append(float(line))
        except ValueError:
            continue  # not written by `counted` as given (a runner ran it through a shell, say)
    return found


def term_trap(ready, on_term, delay: float = 0.0) -> List[str]:
    """A Python command that writes `ready`, and on SIGTERM waits `delay` s, writes `on_term`, exits 0."""
    return py(
        "import pathlib, signal, sys, time\n"
        "def stop(signum, frame):\n"
        "    time.sleep(%r)\n"
        "    pathlib.Path(%r).write_text('%%.3f' %% time.time())\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "pathlib.Path(%r).touch()\n"
        "time.sleep(60)\n" % (delay, str(on_term), str(ready))
    )


# The fixtures' settings the suite uses, which each fixture also reads from a file named after the
# variable in SETTINGS beside it: they reach the fixture whatever environment a runner gives its
# commands (the lab does not ask it to pass its own on).
FIXTURE_SETTINGS = ("FLAKY_STATE", "APPLY_FAIL", "APPLY_FAIL_CODE", "APPLY_DELAY")
SETTINGS = "settings"

FLAKY_STATE = "flaky.state"  # flaky.sh's call count, in the lab's work folder ($FLAKY_STATE)


def flaky_calls(result) -> int:
    """How often flaky.sh had been called in `result`'s lab when its runner ended (Result.flaky_calls)."""
    return result.flaky_calls()


# What runs a fixture: its #! line's bash, or a shell a runner named itself.
SHELLS = ("bash", "sh", "dash")

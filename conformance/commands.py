"""Named commands the checks give the runner, so a test reads as what it does."""

import sys
from typing import List

BIN = "/opt/fixtures/pyops/bin"
FLAKY = BIN + "/flaky.sh"
HANG = BIN + "/hang.sh"
APPLY = BIN + "/apply.sh"
# The interpreter running the suite: for commands that need Python (exact bytes, signals).
PY = sys.executable


def sh(script: str) -> List[str]:
    """A command given as a shell script: the runner still gets an argv list, ["sh", "-c", ...]."""
    return ["sh", "-c", script]


def exits(code: int) -> List[str]:
    return sh("exit %d" % code)


def py(code: str) -> List[str]:
    return [PY, "-c", code]

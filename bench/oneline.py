"""What every script of bench/ shares: bad input is said in one line, exit 2, never a traceback."""

import argparse
import os
import sys
from typing import NoReturn


def fail(message: str) -> NoReturn:
    """Say `message` as the running script says it (`stability: ...`), and exit 2."""
    script = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    print("%s: %s" % (script, message), file=sys.stderr)
    sys.exit(2)


class Parser(argparse.ArgumentParser):
    """argparse, with a bad option said in one line (exit 2), as every other bad input."""

    def error(self, message: str) -> NoReturn:
        fail("%s (--help lists the options)" % message)

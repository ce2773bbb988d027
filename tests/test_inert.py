"""Text a runner prints reaches the grader's screen as text (conformance/harness/inert.py): a runner that
draws a forged verdict over its real one shows the escapes, and the real verdict stays on screen."""

import pyte
import pytest

from conformance.harness.inert import inert
from tests.grading import REFERENCE, grade

# On `run -- true` the runner prints one line that, obeyed by a terminal, moves the cursor to the
# top, erases the screen, draws a full pass and hides what follows (SGR 8): the screen would show
# only the forgery.
FORGERY = (
    "\x1b[H\x1b[2J"
    + "Every check passed.\\n"
    + "S1  run a command  3/3  PASS\\n"
    + "169 passed, 0 failed\\n"
    + "\x1b[8m"
)
FORGING_RUNNER = (
    "import sys\n"
    "if sys.argv[1:] == ['run', '--', 'true']:\n"
    "    sys.stdout.write(%r)\n"
    "    sys.exit(0)\n" % FORGERY.replace("\\n", "\n")
)


def screen_of(text, columns=190, lines=200):
    """What a terminal of that size shows after it was sent `text`."""
    screen = pyte.Screen(columns, lines)
    pyte.Stream(screen).feed(text.replace("\n", "\r\n"))
    return [line.rstrip() for line in screen.display]


@pytest.mark.parametrize("code", [0x1B, 0x0D, 0x07, 0x7F, 0x9B, 0x202E, 0x2066, 0x2028, 0x200F, 0x061C])
def test_each_character_a_terminal_or_a_page_would_obey_is_shown_as_its_escape(code):
    shown = inert("a%sb" % chr(code))
    assert shown == ("a\\x%02xb" % code if code < 0x100 else "a\\u%04xb" % code)


def test_layout_and_ordinary_text_stay_as_they_are():
    text = "line one\n\tindented: 日本語, é, 🙂, a quote ' and a backslash \\"
    assert inert(text) == text


def test_a_forged_screen_shows_the_real_verdict(tmp_path):
    runner = tmp_path / "runner.py"
    runner.write_text(FORGING_RUNNER + REFERENCE.read_text())
    graded = grade(tmp_path, runner, "--clause", "S1.2", workers=2)
    assert graded.rc == 1, graded.stdout + graded.stderr
    shown = screen_of(graded.stdout)
    assert not any("Every check passed." in line and "\\x1b" not in line for line in shown), "\n".join(shown)
    assert any(line.startswith("[S1.2]") for line in shown), "\n".join(shown)
    assert any("\\x1b[H\\x1b[2J" in line for line in shown), "\n".join(shown)
    # The JSON report, and every file and platform made from it, holds the escapes too.
    messages = " ".join(test["message"] for test in graded.report["tests"])
    assert "\x1b" not in messages and "\\x1b[8m" in messages

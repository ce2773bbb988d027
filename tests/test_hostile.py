"""The grader survives hostile runners: a verdict for each, in bounded time, nothing left behind.

Each runner here is wrong on purpose, in a way that attacks the grader rather than the lab:
it hangs, floods, forks, escapes its session, corrupts files or kills its parent. For every
one the suite must exit 1 with failures named by clause, with no harness error, and leave no
process of the session running.
"""

import os
import time
import uuid

import pytest

from conformance.processes import SESSION_VAR, tagged
from tests.grading import REFERENCE, grade

pytestmark = pytest.mark.hostile

# Code run first, then the reference runner, so only the hostile act makes the runner wrong.
THEN_REFERENCE = "THEN_REFERENCE"
HOSTILE = {
    "empty": "",
    "syntax-error": "def broken(:\n",
    "shell-script": "#!/bin/sh\necho 'I am not Python'\nexit 0\n",
    "exits-at-once": "raise SystemExit(0)\n",
    "hangs-ignoring-sigterm": "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n"
    "    time.sleep(1)\n",
    "setsid-child-lives-on": "import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\n"
    "    os._exit(0)\nsys.exit(1)\n",
    "starts-300-processes": "import subprocess, sys\nfor _ in range(300):\n"
    "    subprocess.Popen(['sleep', '600'])\nsys.exit(1)\n",
    "floods-stdout": "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(50):\n    sys.stdout.buffer.write(chunk)\n"
    "sys.exit(1)\n",
    "floods-stderr": "import sys\nchunk = b'e' * (1 << 20)\nfor _ in range(50):\n    sys.stderr.buffer.write(chunk)\n"
    "sys.exit(1)\n",
    "corrupts-runs-jsonl": "with open('/root/pyops/sub/runs.jsonl', 'ab') as f:\n"
    "    f.write(b'not json\\n\\xff\\xfe\\x00 not utf-8\\n' + b'{\"x\": \"' + b'y' * (3 << 20) + b'\"}\\n')\n"
    + THEN_REFERENCE,
    "deletes-state": "import shutil\nshutil.rmtree('/root/pyops/sub/state', ignore_errors=True)\nraise SystemExit(1)\n",
    "makes-sub-read-only": "import os\nfor path in ('/root/pyops/sub/state', '/root/pyops/sub'):\n"
    "    os.chmod(path, 0o555)\nraise SystemExit(1)\n",
    "kills-its-parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + THEN_REFERENCE,
    "closes-stdout": "import os\nos.close(1)\n" + THEN_REFERENCE,
}
# Which step's checks must fail when the hostile act is the runner's only fault.
MUST_FAIL_STEP = {"corrupts-runs-jsonl": "S7", "kills-its-parent": "S1", "closes-stdout": "S1"}
# Core profile with the default workers; more than this is a grader that hangs.
BOUND_S = {"hangs-ignoring-sigterm": 60}
DEFAULT_BOUND_S = 120


def write_runner(tmp_path, name):
    source = HOSTILE[name]
    if source.endswith(THEN_REFERENCE):
        source = source[: -len(THEN_REFERENCE)] + REFERENCE.read_text()
    path = tmp_path / ("%s.py" % name)
    path.write_text(source)
    return path


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_runner_gets_a_verdict(tmp_path, name, monkeypatch):
    session = "hostile-%s" % uuid.uuid4().hex[:8]
    monkeypatch.setenv(SESSION_VAR, session)
    started = time.monotonic()
    graded = grade(tmp_path, write_runner(tmp_path, name), workers=8)
    took = time.monotonic() - started
    assert graded.rc == 1, graded.explain()
    assert "INTERNALERROR" not in graded.stdout + graded.stderr, graded.explain()
    assert "Traceback" not in graded.stderr, graded.explain()
    summary = graded.report["summary"]
    assert summary["errors"] == 0 and summary["failed"] > 0, graded.explain()
    assert all(t["clause"] and t["message"].startswith("[") for t in graded.failed()), graded.explain()
    step = MUST_FAIL_STEP.get(name)
    if step:
        assert any(t["clause"].startswith(step + ".") for t in graded.failed()), graded.explain()
    assert took <= BOUND_S.get(name, DEFAULT_BOUND_S), "took %.0fs" % took
    left = tagged(session)
    assert not left, "left running: %s" % [p.cmdline() for p in left]


def test_a_hanging_runner_is_reported_as_blocked(tmp_path):
    graded = grade(tmp_path, write_runner(tmp_path, "hangs-ignoring-sigterm"), workers=8)
    messages = [t["message"] for t in graded.failed()]
    blocked = [m for m in messages if "blocked by S1.3" in m or "blocked by S4.2" in m]
    assert len(blocked) >= len(messages) - 16, graded.explain()  # all but the first calls of each worker


def test_the_runner_sees_only_the_allowlisted_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PYOPS_SECRET_OF_THE_GRADER", "must-not-leak")
    dump = tmp_path / "environ.txt"
    runner = tmp_path / "env_runner.py"
    runner.write_text(
        "import os\nwith open(%r, 'a') as f:\n    f.write(' '.join(sorted(os.environ)) + '\\n')\n" % str(dump)
        + REFERENCE.read_text()
    )
    graded = grade(tmp_path, runner, "--clause", "S4.4", "--clause", "S1.3")
    assert graded.rc == 0, graded.explain()
    seen = set(" ".join(dump.read_text().split("\n")).split())
    allowed = {"PATH", "HOME", "LANG", "TZ", "TMPDIR", "FLAKY_STATE", "PYOPS_CONFORMANCE_TOKEN"}
    allowed |= {"APPLY_FAIL", "APPLY_FAIL_CODE", "APPLY_DELAY"}  # set by the S4.4 checks themselves
    # What the interpreter itself adds at start-up is not from the grader.
    assert seen - allowed <= {"LC_CTYPE"}, sorted(seen - allowed)
    assert "PYOPS_SECRET_OF_THE_GRADER" not in os.environ or "PYOPS_SECRET_OF_THE_GRADER" not in seen

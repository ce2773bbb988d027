"""`pyops-conformance --watch`: a grading per save, what changed between them, and a clean Ctrl-C."""

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from conformance import watch
from conformance.harness import sandbox
from conformance.harness.processes import SESSION_VAR, of_session
from conformance.lab import timing
from conformance.reporting import view
from conformance.selftest.zoo import MUTANTS, build
from tests.grading import REFERENCE

WRONG = next(mutant for mutant in MUTANTS if mutant.name == "exit-0-on-failure")  # fails S1.3


def test_changes_name_the_clauses_that_started_and_stopped_passing():
    before = {"S1.1": "passed", "S1.2": "failed", "S1.3": "blocked"}
    after = {"S1.1": "failed", "S1.2": "passed", "S1.3": "passed"}
    assert watch.changes(None, before, "en") == "first grading: 1 of 3 clauses passed"
    assert watch.changes(before, after, "en") == (
        "since the last grading: now passing S1.2 S1.3; no longer passing S1.1 (2 of 3 passed)"
    )
    assert watch.changes(after, after, "en") == "since the last grading: no clause changed (2 of 3 passed)"
    assert watch.changes(before, after, "ja") == (
        "前回の採点から: 合格になった項目 S1.2 S1.3、合格でなくなった項目 S1.1(3 項目中 2 項目に合格)"
    )


class Watching:
    """A `--watch` process whose output is read line by line as it comes."""

    def __init__(self, tmp_path, runner, *options):
        self.session = "watch-%s" % uuid.uuid4().hex[:8]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "conformance", "--watch", "--runner", str(runner), "-n", "2", *options],
            cwd=str(tmp_path),
            env=dict(os.environ, **{SESSION_VAR: self.session}),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # Started as a shell starts a background job (and as a pytest-xdist worker's children
            # start): with SIGINT ignored. Ctrl-C must end the watch all the same.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
        self.lines = queue.Queue()
        self.seen = []
        self.reading = threading.Thread(target=self._read, daemon=True)
        self.reading.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, start, timeout=90):
        """The next line that starts with `start` (the lines before it are kept in self.seen)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if line.startswith(start):
                return line
        raise AssertionError("no line starting %r within %ds:\n%s" % (start, timeout, "\n".join(self.seen)))

    def ends_on(self, signum):
        """`signum` to the watch alone ends it cleanly: its last words, then exit 0."""
        self.process.send_signal(signum)
        assert self.wait_for("stopped watching")
        assert self.process.wait(30) == 0

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.reading.join(5)
        self.process.stdout.close()


def save(runner, text):
    """As an editor saves: a new file renamed over the old one."""
    fresh = runner.with_name(".runner.py.swp")
    fresh.write_text(text)
    os.replace(str(fresh), str(runner))


@pytest.fixture
def wrong_runner(tmp_path):
    runner = tmp_path / "runner.py"
    runner.write_text(build(WRONG, tmp_path / "wrong").read_text())
    return runner


def test_each_save_is_graded_again_and_says_what_changed(tmp_path, wrong_runner):
    watching = Watching(tmp_path, wrong_runner, "--clause", "S1.3")
    try:
        assert watching.wait_for("first grading:") == "first grading: 0 of 1 clauses passed"
        watching.wait_for("watching ")
        save(wrong_runner, REFERENCE.read_text())
        assert watching.wait_for("since the last grading:") == (
            "since the last grading: now passing S1.3 (1 of 1 passed)"
        )
        watching.wait_for("watching ")
        save(wrong_runner, build(WRONG, tmp_path / "wrong").read_text())
        assert watching.wait_for("since the last grading:") == (
            "since the last grading: no longer passing S1.3 (0 of 1 passed)"
        )
        watching.wait_for("watching ")
        # Each grading is shown as usual: the failed clause with its cause, then the step table.
        assert sum(line.startswith("[S1.3] ") for line in watching.seen) == 2, "\n".join(watching.seen)
        watching.ends_on(signal.SIGINT)
    finally:
        watching.stop()
    assert not of_session(watching.session)


def test_ctrl_c_during_a_grading_ends_it_cleanly(tmp_path, wrong_runner):
    # A runner that is still running when Ctrl-C comes: its grading must reap it and remove its labs.
    wrong_runner.write_text("import time\ntime.sleep(60)\n")
    watching = Watching(tmp_path, wrong_runner, "--clause", "S1.3")
    try:
        deadline = time.monotonic() + 60
        while not sandbox.labs_of(watching.session) and time.monotonic() < deadline:
            time.sleep(0.2)
        labs = sandbox.labs_of(watching.session)
        assert labs, "the grading made no lab within 60 s"
        watching.process.send_signal(signal.SIGINT)  # to the watch alone: it passes it on
        sent = time.monotonic()
        assert watching.process.wait(60) == 0
        # Not waited out: the runner's first call alone would run for timing.HANG_MARGIN_S (8 s).
        assert time.monotonic() - sent < timing.HANG_MARGIN_S * 0.75
        watching.wait_for("stopped watching", timeout=5)
        # A grading cut short says so in one line; no verdict, no step table, no pytest banner.
        assert watching.seen[-3:] == [view.stopped("en"), "", "stopped watching"], watching.seen
        shown = [line for line in watching.seen if "KeyboardInterrupt" in line or line.startswith("step ")]
        assert not shown and not any(line.startswith("Every check passed") for line in watching.seen), shown
    finally:
        watching.stop()
    until = time.monotonic() + 10
    while of_session(watching.session) and time.monotonic() < until:
        time.sleep(0.2)
    assert not of_session(watching.session), "processes of the grading live on"
    assert not any(lab.exists() for lab in labs), "labs of the interrupted grading left"


def test_sigterm_ends_the_watch_as_ctrl_c_does(tmp_path, wrong_runner):
    watching = Watching(tmp_path, wrong_runner, "--clause", "S1.3")
    try:
        watching.wait_for("watching ")
        watching.ends_on(signal.SIGTERM)
    finally:
        watching.stop()
    assert not of_session(watching.session)


def test_watch_refuses_report_files_in_one_line(tmp_path, wrong_runner):
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "--watch", "--runner", str(wrong_runner), "--json", "r.json"],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--watch" in done.stderr, done.stderr

"""The lab's fixtures keep the contract the lab describes (and the suite relies on)."""

import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from conformance.harness.sandbox import FIXTURES, NAMESPACE, Lab, probe_namespace
from runner.runner import __file__ as REFERENCE

FLAKY, HANG, APPLY = (str(FIXTURES / name) for name in ("flaky.sh", "hang.sh", "apply.sh"))


def run(argv, env=None, **kwargs):
    full_env = {"PATH": os.environ["PATH"], **(env or {})}
    return subprocess.run(argv, env=full_env, capture_output=True, text=True, timeout=30, **kwargs)


@pytest.mark.parametrize("name", ["flaky.sh", "hang.sh", "apply.sh"])
def test_fixture_is_executable_bash(name):
    path = FIXTURES / name
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert path.read_text().startswith("#!/usr/bin/env bash\n")


def test_flaky_fails_twice_then_succeeds(tmp_path):
    env = {"FLAKY_STATE": str(tmp_path / "state")}
    results = [run([FLAKY], env) for _ in range(4)]
    assert [r.returncode for r in results] == [1, 1, 0, 0]
    assert all(r.stdout == "" and r.stderr.count("\n") == 1 for r in results[:2])
    assert all(r.stderr == "" and r.stdout.count("\n") == 1 for r in results[2:])


def test_flaky_starts_over_when_its_state_file_is_removed(tmp_path):
    env = {"FLAKY_STATE": str(tmp_path / "state")}
    for _ in range(3):
        run([FLAKY], env)
    (tmp_path / "state").unlink()
    assert run([FLAKY], env).returncode == 1


def test_flaky_default_state_lives_in_the_temp_folder(tmp_path):
    assert [run([FLAKY], {"TMPDIR": str(tmp_path)}).returncode for _ in range(3)] == [1, 1, 0]
    assert [p.name for p in tmp_path.iterdir()] == ["pyops-flaky.state"]


def test_hang_prints_then_its_child_sleep_holds_stdout():
    hang = subprocess.Popen([HANG], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert hang.stdout.readline() == b"hang.sh: started, sleeping 60s\n"
        children = wait_children(hang.pid)
        assert [c.cmdline() for c in children] == [["sleep", "60"]]
        # No trap: SIGTERM to hang.sh alone ends it at once and leaves the sleep, holding the pipe.
        hang.send_signal(signal.SIGTERM)
        assert hang.wait(timeout=5) == -signal.SIGTERM
        assert children[0].is_running()
    finally:
        os.killpg(hang.pid, signal.SIGKILL)
        hang.stdout.close()


def wait_children(pid):
    """hang.sh's children once its sleep runs (a fork shows as bash until it has exec'd sleep)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        children = psutil.Process(pid).children()
        if children and all(c.cmdline()[:1] == ["sleep"] for c in children):
            return children
        time.sleep(0.01)
    raise AssertionError("hang.sh started no sleep")


def test_apply_logs_every_call_and_succeeds(tmp_path):
    log = tmp_path / "applied.log"
    first, second = (run([APPLY, name], {"APPLY_LOG": str(log)}) for name in ("one", "two"))
    assert (first.returncode, second.returncode) == (0, 0)
    assert "one" in first.stdout and first.stderr == ""
    assert log.read_text() == "one\ntwo\n"


def test_apply_fail_logs_the_call_and_exits_1(tmp_path):
    log = tmp_path / "applied.log"
    result = run([APPLY, "broken"], {"APPLY_LOG": str(log), "APPLY_FAIL": "1"})
    assert result.returncode == 1 and "broken" in result.stderr
    assert log.read_text() == "broken\n"


def test_apply_fail_code_sets_the_failing_exit_code(tmp_path):
    env = {"APPLY_LOG": str(tmp_path / "applied.log"), "APPLY_FAIL": "1", "APPLY_FAIL_CODE": "7"}
    assert run([APPLY, "broken"], env).returncode == 7
    assert run([APPLY, "fine"], {"APPLY_LOG": str(tmp_path / "applied.log"), "APPLY_FAIL_CODE": "7"}).returncode == 0


def fixture_copy(tmp_path, name, **settings):
    """A copy of fixture `name` in tmp_path, with `settings` written in settings/ beside it."""
    shutil.copy(str(FIXTURES / name), str(tmp_path / name))
    (tmp_path / "settings").mkdir(exist_ok=True)
    for variable, value in settings.items():
        (tmp_path / "settings" / variable).write_text(value + "\n")
    return str(tmp_path / name)


def test_apply_reads_its_settings_beside_it_when_the_environment_has_none(tmp_path):
    # How the suite's settings reach apply.sh through a runner that gives its commands an
    # environment of its own; a variable set in the environment still wins over its file.
    log = str(tmp_path / "applied.log")
    apply = fixture_copy(tmp_path, "apply.sh", APPLY_FAIL="1", APPLY_FAIL_CODE="7")
    assert run([apply, "broken"], {"APPLY_LOG": log}).returncode == 7
    assert run([apply, "broken"], {"APPLY_LOG": log, "APPLY_FAIL_CODE": "9"}).returncode == 9
    assert run([apply, "fine"], {"APPLY_LOG": log, "APPLY_FAIL": "0"}).returncode == 0
    apply = fixture_copy(tmp_path, "apply.sh", APPLY_DELAY="0.5", APPLY_LOG=str(tmp_path / "from-settings.log"))
    (tmp_path / "settings" / "APPLY_FAIL").unlink()
    started = time.monotonic()
    assert run([apply, "slow"]).returncode == 0
    assert time.monotonic() - started >= 0.5
    assert (tmp_path / "from-settings.log").read_text() == "slow\n"


def test_flaky_reads_its_state_file_s_name_beside_it_when_the_environment_has_none(tmp_path):
    state = tmp_path / "counted"
    flaky = fixture_copy(tmp_path, "flaky.sh", FLAKY_STATE=str(state))
    assert [run([flaky]).returncode for _ in range(3)] == [1, 1, 0]
    assert state.read_text() == "3\n"
    elsewhere = tmp_path / "elsewhere"
    assert run([flaky], {"FLAKY_STATE": str(elsewhere)}).returncode == 1  # the environment wins
    assert elsewhere.read_text() == "1\n"


def test_apply_without_a_name_is_a_usage_error(tmp_path):
    log = tmp_path / "applied.log"
    result = run([APPLY], {"APPLY_LOG": str(log)})
    assert result.returncode == 2 and "usage" in result.stderr
    assert not log.exists()


def test_apply_delay_waits_after_logging(tmp_path):
    log = tmp_path / "applied.log"
    started = time.monotonic()
    process = subprocess.Popen(
        [APPLY, "slow"],
        env={"PATH": os.environ["PATH"], "APPLY_LOG": str(log), "APPLY_DELAY": "0.5"},
        stdout=subprocess.DEVNULL,
    )
    while not log.exists():
        time.sleep(0.01)
    assert process.poll() is None  # logged, still waiting
    assert process.wait(timeout=10) == 0
    assert time.monotonic() - started >= 0.5


def test_apply_logs_to_the_lab_by_default(tmp_path):
    plan, why = probe_namespace()
    if plan is None:
        pytest.skip("needs a mount namespace: %s" % why)
    lab = Lab(tmp_path, NAMESPACE, Path(REFERENCE), plan)
    result = subprocess.run(
        ["/opt/fixtures/pyops/bin/apply.sh", "x"],
        preexec_fn=lab.preexec(),
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 0
    assert (lab.sub / "applied.log").read_text() == "x\n"

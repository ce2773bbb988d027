"""The chroot isolation mode: system roots made, leased and emptied, and gradings in them.

Roots are what an unprivileged container grades in (the image makes them at build time); here
they are made from this machine's own programs, as root.
"""

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance import cli
from conformance.harness import identity, roots
from conformance.harness.sandbox import probe_chroot
from conformance.selftest.zoo import MUTANTS, build
from tests.grading import GOOD, REFERENCE, grade

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="roots need root: device nodes, chroot")
SYSTEM_PYTHON = "/usr/bin/python3"  # what a root holds: the machine's own python3, not a venv's


def a_system(folder: Path) -> Path:
    """A small stand-in for /: a merged-usr link, a program, a setting."""
    (folder / "usr" / "bin").mkdir(parents=True)
    (folder / "usr" / "bin" / "tool").write_text("#!/bin/sh\n")
    (folder / "usr" / "bin" / "tool").chmod(0o755)
    (folder / "etc").mkdir()
    (folder / "etc" / "setting").write_text("on\n")
    os.symlink("usr/bin", str(folder / "bin"))
    return folder


@needs_root
def test_a_root_links_the_system_and_has_devices_and_scratch_folders(tmp_path):
    system = a_system(tmp_path / "system")
    made = roots.make(tmp_path / "roots", 2, system=system)
    assert [root.name for root in made] == ["0", "1"]
    for root in made:
        # Hard links: the same file, no space twice.
        assert (root / "usr" / "bin" / "tool").stat().st_ino == (system / "usr" / "bin" / "tool").stat().st_ino
        assert (root / "etc" / "setting").read_text() == "on\n"
        assert os.readlink(str(root / "bin")) == "usr/bin"
        assert not (root / "lib64").exists()  # not in this system: not made up
        null = (root / "dev" / "null").stat()
        assert stat.S_ISCHR(null.st_mode) and stat.S_IMODE(null.st_mode) == 0o666
        assert os.major(null.st_rdev) == 1 and os.minor(null.st_rdev) == 3
        for scratch in ("tmp", "var/tmp"):
            assert stat.S_IMODE((root / scratch).stat().st_mode) == 0o1777


@needs_root
def test_making_them_again_replaces_what_was_there(tmp_path):
    system = a_system(tmp_path / "system")
    roots.make(tmp_path / "roots", 1, system=system)
    (tmp_path / "roots" / "0" / "tmp" / "left").write_text("x")
    roots.make(tmp_path / "roots", 1, system=system)
    assert not (tmp_path / "roots" / "0" / "tmp" / "left").exists()


@needs_root
def test_a_lease_empties_what_an_earlier_check_left(tmp_path):
    root = roots.make(tmp_path / "roots", 1, system=a_system(tmp_path / "system"))[0]
    lab = root / "root" / "pyops" / "sub"
    lab.mkdir(parents=True)
    (lab / "runner.py").write_text("an earlier learner's runner\n")
    locked = root / "tmp" / "locked"
    locked.mkdir()
    (locked / "file").write_text("x")
    locked.chmod(0o500)  # a runner removed its own write bits
    (root / "var" / "tmp" / "note").write_text("x")
    with roots.Roots([root]).leased() as leased:
        assert leased == root
        assert list((root / "tmp").iterdir()) == list((root / "var" / "tmp").iterdir()) == []
        assert list((root / "root").iterdir()) == []
        assert stat.S_IMODE((root / "root").stat().st_mode) == 0o711  # as a learner's /root: passable
        assert (root / "usr" / "bin" / "tool").exists()  # the system stays


@needs_root
def test_a_root_is_one_checks_at_a_time_across_processes(tmp_path):
    root = roots.make(tmp_path / "roots", 1, system=a_system(tmp_path / "system"))[0]
    taker = [
        sys.executable,
        "-c",
        "import sys; from pathlib import Path; from conformance.harness import roots\n"
        "with roots.Roots([Path(sys.argv[1])]).leased():\n    print('leased', flush=True)",
        str(root),
    ]
    with roots.Roots([root]).leased():
        waiting = subprocess.Popen(taker, stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        assert waiting.poll() is None, "a second check leased a root that was taken"
    out, _ = waiting.communicate(timeout=10)
    assert out.strip() == "leased"


def test_make_refuses_a_bad_count_in_one_line(capsys):
    assert cli.main(["roots", "make", "--count", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--count needs 1 to 64" in err


def test_no_roots_says_how_to_make_them(tmp_path, monkeypatch):
    monkeypatch.setenv("PYOPS_ROOTS", str(tmp_path / "none"))
    found, why_not = probe_chroot(SYSTEM_PYTHON)
    assert found is None and "pyops-conformance roots make" in why_not


@needs_root
def test_an_interpreter_missing_from_the_roots_is_named(tmp_path, monkeypatch):
    roots.make(tmp_path / "roots", 1, system=a_system(tmp_path / "system"))
    monkeypatch.setenv("PYOPS_ROOTS", str(tmp_path / "roots"))
    found, why_not = probe_chroot(sys.executable)
    assert found is None and sys.executable in why_not and "not in the system roots" in why_not


# ---- gradings in roots made of this machine's programs ------------------------------------------


@pytest.fixture(scope="module")
def system_roots(tmp_path_factory):
    """Two roots of this machine's own /usr and /etc (hard links: seconds, no space)."""
    if os.geteuid() != 0:
        pytest.skip("roots need root")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip("no %s to run runners in the roots" % SYSTEM_PYTHON)
    where = tmp_path_factory.mktemp("roots")
    roots.make(where, 2)
    return dict(os.environ, PYOPS_ROOTS=str(where))


def grade_in_roots(tmp_path, env, runner, *options):
    return grade(tmp_path, runner, "--isolation", "chroot", "--python", SYSTEM_PYTHON, *options, workers=2, env=env)


@pytest.mark.isolation
@pytest.mark.parametrize("runner", [REFERENCE] + GOOD, ids=lambda path: path.stem)
def test_correct_runners_pass_in_a_root(tmp_path, system_roots, runner):
    graded = grade_in_roots(tmp_path, system_roots, runner)
    assert graded.rc == 0, graded.explain()
    assert graded.report["isolation"] == "chroot"
    assert graded.report["summary"]["passed"] == graded.report["summary"]["total"] >= 150


@pytest.mark.isolation
@pytest.mark.parametrize(
    "mutant",
    # By name, so a renamed mutant is a KeyError here, not a case quietly gone.
    [
        {m.name: m for m in MUTANTS}[name]
        for name in ("kills-only-the-child", "blocking-lock", "sigterm-to-the-child-only")
    ],
    ids=lambda mutant: mutant.name,
)
def test_wrong_runners_fail_their_clause_in_a_root(tmp_path, system_roots, mutant):
    graded = grade_in_roots(tmp_path, system_roots, build(mutant, tmp_path), "--clause", mutant.breaks)
    assert graded.rc == 1 and any(t["clause"] == mutant.breaks for t in graded.failed()), graded.explain()


@pytest.mark.isolation
def test_a_runner_in_a_root_sees_its_lab_and_nothing_of_the_grader(tmp_path, system_roots):
    # It says what it sees on stderr and exits 0 whatever it runs: S1.3's exit-code checks fail
    # and show its stderr.
    spy = tmp_path / "spy.py"
    spy.write_text(
        "import os, sys\n"
        "sys.stderr.write('sees / %s /opt %s /root/pyops/sub %s\\n' % (\n"
        "    sorted(os.listdir('/')), os.listdir('/opt'), sorted(os.listdir('/root/pyops/sub'))))\n"
    )
    graded = grade_in_roots(tmp_path, system_roots, spy, "--clause", "S1.3")
    shown = "\n".join(t["message"] for t in graded.failed())
    assert "/opt ['fixtures'] /root/pyops/sub ['runner.py', 'state']" in shown, graded.explain()
    assert "sees / ['bin', 'dev', 'etc', 'lib'" in shown and "'proc'" not in shown, graded.explain()


def with_runner_user_capabilities_only(code, env=None):
    """Python `code` run by root with only the capabilities a runner's own uid needs (no
    SYS_CHROOT, no MKNOD), as in a container started with --cap-drop ALL and those added."""
    caps = "-all," + ",".join("+" + name.lower() for name in identity.CAPABILITIES)
    limits = ["--inh-caps=" + caps, "--ambient-caps=" + caps, "--bounding-set=" + caps]
    return subprocess.run(["setpriv"] + limits + [sys.executable, "-c", code], capture_output=True, text=True, env=env)


@needs_root
def test_without_cap_sys_chroot_the_probe_says_which_capability_to_add(tmp_path):
    # Docker's default set has SYS_CHROOT; a container started with --cap-drop ALL and only the
    # runner-user capabilities has not: the header must say what to add.
    roots.make(tmp_path / "roots", 1, system=a_system(tmp_path / "system"))
    probe = (
        "from conformance.harness.sandbox import probe_chroot; found, why = probe_chroot(%r); print(found, why)"
        % "/usr/bin/tool"
    )
    said = with_runner_user_capabilities_only(probe, env=dict(os.environ, PYOPS_ROOTS=str(tmp_path / "roots")))
    assert said.stdout.startswith("None this process may not chroot"), said.stdout + said.stderr
    assert "--cap-add SYS_CHROOT" in said.stdout


@pytest.mark.isolation
def test_a_runner_that_needs_proc_is_told_why_it_fails_in_a_root(tmp_path, system_roots):
    needs_proc = tmp_path / "needs_proc.py"
    needs_proc.write_text("import os\nos.listdir('/proc')\n")  # FileNotFoundError: ... '/proc'
    graded = grade_in_roots(tmp_path, system_roots, needs_proc, "--clause", "S1.3")
    shown = "\n".join(t["message"] for t in graded.failed())
    assert "this grading's isolation (chroot) does not have" in shown and "--isolation shared" in shown, shown


@needs_root
def test_a_root_that_cannot_be_finished_is_not_left_half_made(tmp_path):
    # Without CAP_MKNOD (a platform's build that drops it) the devices cannot be made: no root
    # must be left that would pass for one.
    system = a_system(tmp_path / "system")
    attempt = (
        "from pathlib import Path; from conformance.harness import roots; roots.make(Path(%r), 1, system=Path(%r))"
        % (
            str(tmp_path / "roots"),
            str(system),
        )
    )
    tried = with_runner_user_capabilities_only(attempt)
    assert tried.returncode != 0 and "Operation not permitted" in tried.stderr, tried.stderr
    assert list((tmp_path / "roots").iterdir()) == []

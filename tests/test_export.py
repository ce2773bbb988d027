"""`pyops-conformance export gradescope`: the autograder zip, its refusals, and run_autograder's
fallbacks (a missing runner.py, a grading that left no report) without a container.

The zip's real life (setup.sh on Debian, run_autograder grading three submissions) is
docker/gradescope-test.sh.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from conformance import export
from conformance.lab import config
from conformance.reporting import platforms

REPO = Path(__file__).resolve().parent.parent
TEMPLATES = REPO / "conformance" / "gradescope"
RUN_AUTOGRADER = TEMPLATES / "run_autograder"
SCRIPTS = {"setup.sh", "run_autograder"}


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """The zip with the shipped configuration, written over an older file of the same name."""
    out = tmp_path_factory.mktemp("export") / "autograder.zip"
    out.write_bytes(b"an older export")
    assert export.main(["gradescope", "--out", str(out)]) == 0
    return out


def wheel_of(archive):
    (name,) = [n for n in archive.namelist() if n.endswith(".whl")]
    return name


def test_the_zip_holds_the_scripts_the_configuration_and_a_wheel_at_its_root(shipped):
    with zipfile.ZipFile(str(shipped)) as archive:
        names = archive.namelist()
        assert set(names) == SCRIPTS | {"lab.toml", wheel_of(archive)}
        assert re.fullmatch(r"pyops_lab-[0-9.]+-py3-none-any\.whl", wheel_of(archive))
        for info in archive.infolist():
            mode = info.external_attr >> 16
            assert info.create_system == 3 and stat.S_ISREG(mode), info.filename
            assert stat.S_IMODE(mode) == (0o755 if info.filename in SCRIPTS else 0o644), info.filename
        for name in SCRIPTS:
            assert archive.read(name) == (TEMPLATES / name).read_bytes()
        assert archive.read("lab.toml") == config.DEFAULT_FILE.read_bytes()


def test_the_zip_replaced_the_older_file_and_left_no_temporary_file(shipped):
    assert zipfile.is_zipfile(str(shipped))
    assert sorted(p.name for p in shipped.parent.iterdir()) == ["autograder.zip"]


def test_the_wheel_holds_the_suite_its_fixtures_and_its_command_and_nothing_of_this_machine(shipped, tmp_path):
    with zipfile.ZipFile(str(shipped)) as archive:
        wheel = tmp_path / wheel_of(archive)
        wheel.write_bytes(archive.read(wheel.name))
    with zipfile.ZipFile(str(wheel)) as built:
        names = built.namelist()
        meta = built.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = built.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    for needed in (
        "conformance/cli.py",
        "conformance/export.py",
        "conformance/lab.toml",
        "conformance/checks/test_s2_timeout.py",
        "conformance/fixtures/hang.sh",
        "conformance/fixtures/flaky.sh",
        "conformance/fixtures/apply.sh",
        "conformance/gradescope/setup.sh",
        "conformance/gradescope/run_autograder",
        "runner/runner.py",  # the reference: setup.sh removes it from the venv
    ):
        assert needed in names
    assert "Name: pyops-lab" in meta and "Requires-Dist: psutil" in meta
    assert "pyops-conformance = conformance.cli:main" in entry_points
    assert not [n for n in names if n.startswith(("/", "build/", "tests/")) or "__pycache__" in n or ".egg-info" in n]


def test_a_given_configuration_goes_in_as_lab_toml_byte_for_byte(tmp_path):
    lab = tmp_path / "course.toml"
    lab.write_text('# our course\nprofile = "core"\n[points]\nS1 = 10\nS2 = 5\n[visibility]\nS6 = "hidden"\n')
    out = tmp_path / "autograder.zip"
    assert export.main(["gradescope", "--out", str(out), "--config", str(lab)]) == 0
    with zipfile.ZipFile(str(out)) as archive:
        assert archive.read("lab.toml") == lab.read_bytes()


@pytest.mark.parametrize(
    "argv,message",
    [
        (["moodle", "--out", "{tmp}/a.zip"], "invalid choice: 'moodle'"),
        (["gradescope"], "--out"),
        ([], "platform"),
        (["gradescope", "--out", "{tmp}/no/such/folder/a.zip"], "no folder"),
        (["gradescope", "--out", "{tmp}"], "is a folder"),
        (["gradescope", "--out", "/proc/autograder.zip"], "cannot write there"),
        (["gradescope", "--out", "{tmp}/a.zip", "--config", "{tmp}/none.toml"], "cannot read it"),
        (["gradescope", "--out", "{tmp}/a.zip", "--config", "{tmp}/bad.toml"], "not valid TOML"),
        (["gradescope", "--out", "{tmp}/a.zip", "--config", "{tmp}/unknown.toml"], "unknown setting"),
    ],
)
def test_refusals_are_one_line_and_exit_2_and_write_nothing(capsys, tmp_path, argv, message):
    (tmp_path / "bad.toml").write_text("points = [\n")
    (tmp_path / "unknown.toml").write_text("pionts = 3\n")
    before = sorted(tmp_path.iterdir())
    assert export.main([arg.format(tmp=tmp_path) for arg in argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err and "Traceback" not in err, err
    assert err.startswith("pyops-conformance export: error: ")
    assert sorted(tmp_path.iterdir()) == before


def test_an_installation_without_its_source_says_so(capsys, tmp_path, monkeypatch):
    site = tmp_path / "site-packages" / "conformance"
    site.mkdir(parents=True)
    monkeypatch.setattr(export, "__file__", str(site / "export.py"))
    assert export.main(["gradescope", "--out", str(tmp_path / "a.zip")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "installed without its source" in err and "pip install -e ." in err
    assert not (tmp_path / "a.zip").exists()


def test_a_failed_wheel_build_is_one_line_and_leaves_the_older_zip(capsys, tmp_path, monkeypatch):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'collecting...'\necho 'ERROR: no backend here' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    out = tmp_path / "a.zip"
    out.write_bytes(b"older")
    assert export.main(["gradescope", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(exit status 1): ERROR: no backend here" in err
    assert out.read_bytes() == b"older" and sorted(p.name for p in tmp_path.iterdir()) == ["a.zip", "python"]


def test_the_cli_dispatches_export(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "export", "nowhere", "--out", str(tmp_path / "a.zip")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "invalid choice: 'nowhere'" in done.stderr and done.stderr.count("\n") == 1


# ---- the scripts ---------------------------------------------------------------------------


def test_the_scripts_parse_run_autograder_as_posix_sh():
    subprocess.run(["bash", "-n", str(TEMPLATES / "setup.sh")], check=True)
    sh = shutil.which("dash") or "sh"
    subprocess.run([sh, "-n", str(RUN_AUTOGRADER)], check=True)
    assert RUN_AUTOGRADER.read_text().startswith("#!/bin/sh\n")
    assert (TEMPLATES / "setup.sh").read_text().startswith("#!/usr/bin/env bash\n")


def _function(text, name):
    match = re.search(r"^%s\(\) \{\n.*?^\}\n" % name, text, re.S | re.M)
    assert match, name
    return match.group(0)


@pytest.mark.parametrize("name", ["run_suite", "install_reports"])
def test_run_autograder_uses_the_grading_images_own_functions(name):
    entrypoint = (REPO / "docker" / "entrypoint.sh").read_text()
    assert _function(RUN_AUTOGRADER.read_text(), name) == _function(entrypoint, name)


def test_setup_sh_makes_the_lab_as_the_dockerfile_does():
    setup = (TEMPLATES / "setup.sh").read_text()
    for line in (
        'python3 -m venv "$venv"',
        'install -m 0755 "$site"/conformance/fixtures/*.sh /opt/fixtures/pyops/bin/',
        "chmod 0711 /root",
        "/root/pyops/sub/state",
        'rm -rf "$site/runner"',
        'chmod 0700 "$source_dir"',
        "apt-get install -y -qq --no-install-recommends python3 python3-venv",
    ):
        assert line in setup, line
    assert "venv=/opt/pyops-lab/venv" in setup and "pip3 install" not in setup


# ---- run_autograder's fallbacks, with AUTOGRADER_ROOT and PYOPS_VENV pointing at a test's folders


@pytest.fixture
def autograder(tmp_path):
    root = tmp_path / "autograder"
    for folder in ("source", "submission", "results"):
        (root / folder).mkdir(parents=True)
    shutil.copy(str(config.DEFAULT_FILE), str(root / "source" / "lab.toml"))
    return root


def fake_venv(tmp_path, suite_body):
    """A venv whose python3 is this one's and whose pyops-conformance runs `suite_body` (Python)."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python3"
    python.write_text('#!/bin/sh\nexec %s "$@"\n' % sys.executable)
    suite = bin_dir / "pyops-conformance"
    suite.write_text("#!%s\nimport json, os, sys\n%s\n" % (sys.executable, textwrap.dedent(suite_body)))
    for script in (python, suite):
        script.chmod(0o755)
    return bin_dir.parent


def run_autograder(root, venv, lab_root=False):
    """run_autograder as Gradescope starts it; with lab_root, in a mount namespace whose /root is
    an overlay (on a tmpfs) that adds the lab's /root/pyops/sub: this machine's /root is never written."""
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PYOPS_VENV=str(venv))
    env.pop("PYOPS_RUNNER_UIDS", None)
    command = ["sh", str(RUN_AUTOGRADER)]
    if lab_root:
        if os.geteuid() != 0 or not shutil.which("unshare"):
            pytest.skip("needs root and unshare for a private /root")
        scratch = root.parent / "overlay"
        scratch.mkdir()
        command = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            'mount -t tmpfs lab "$0" && mkdir "$0/up" "$0/work" '
            '&& mount -t overlay lab -o "lowerdir=/root,upperdir=$0/up,workdir=$0/work" /root '
            '&& mkdir -p /root/pyops/sub/state && exec "$@"',
            str(scratch),
        ] + command
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=str(root))


def results_of(root):
    assert sorted(p.name for p in (root / "results").iterdir()) == ["results.json"]
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def the_one_test(result, name):
    (test,) = result["tests"]
    assert test["name"] == name and test["status"] == "failed" and test["visibility"] == "visible"
    assert result["score"] == test["score"] == 0 and test["max_score"] == 28
    assert isinstance(result["execution_time"], int) and result["execution_time"] >= 0
    assert result["output"] == test["output"]
    return test["output"]


def test_no_runner_py_names_the_files_received(tmp_path, autograder):
    (autograder / "submission" / "Runner.py").write_text("print()\n")
    (autograder / "submission" / "notes").mkdir()
    (autograder / "submission" / "notes" / "readme.txt").write_text("hi\n")
    done = run_autograder(autograder, fake_venv(tmp_path, "sys.exit('the suite must not run')"))
    assert done.returncode == 0, done.stderr
    output = the_one_test(results_of(autograder), "upload runner.py")
    assert "no runner.py was submitted (files received: Runner.py, notes/readme.txt)" in output
    assert "upload your runner.py" in output


def test_an_empty_submission_received_none(tmp_path, autograder):
    assert run_autograder(autograder, fake_venv(tmp_path, "sys.exit(9)")).returncode == 0
    assert "files received: none" in the_one_test(results_of(autograder), "upload runner.py")


def test_a_runner_py_that_is_a_link_is_not_followed(tmp_path, autograder):
    (autograder / "submission" / "runner.py").symlink_to("/etc/passwd")
    assert run_autograder(autograder, fake_venv(tmp_path, "sys.exit(9)")).returncode == 0
    assert "runner.py in your submission is a link" in the_one_test(results_of(autograder), "upload runner.py")


def test_a_runner_py_in_a_folder_is_pointed_at(tmp_path, autograder):
    (autograder / "submission" / "lab").mkdir()
    (autograder / "submission" / "lab" / "runner.py").write_text("print()\n")
    assert run_autograder(autograder, fake_venv(tmp_path, "sys.exit(9)")).returncode == 0
    assert "only lab/runner.py" in the_one_test(results_of(autograder), "upload runner.py")


def test_a_grading_that_left_no_report_is_a_grader_error(tmp_path, autograder):
    (autograder / "submission" / "runner.py").write_text("print('mine')\n")
    venv = fake_venv(tmp_path, "print('pytest blew up', file=sys.stderr)\nsys.exit(3)")
    done = run_autograder(autograder, venv, lab_root=True)
    assert done.returncode == 0 and "pytest blew up" in done.stderr
    output = the_one_test(results_of(autograder), "grader error")
    assert "exit status 3 and wrote no report: pytest blew up" in output and "course staff" in output


def test_the_suites_report_is_installed_with_execution_time_and_a_runners_files_go(tmp_path, autograder):
    (autograder / "submission" / "runner.py").write_text("print('mine')\n")
    planted = autograder / "results" / "results.json"
    planted.write_text('{"score": 1000}')  # whatever was there before the grading ends is replaced
    report = {"score": 3.5, "max_score": 28, "output": "profile core", "tests": [{"name": "t", "score": 3.5}]}
    venv = fake_venv(
        tmp_path,
        """
        args = sys.argv[1:]
        out = args[args.index("--gradescope") + 1]
        runner = args[args.index("--runner") + 1]
        facts = {"args": args, "folder_mode": oct(os.stat(os.path.dirname(out)).st_mode & 0o777),
                 "runner": open(runner).read(), "runner_mode": oct(os.stat(runner).st_mode & 0o777),
                 "uids": os.environ.get("PYOPS_RUNNER_UIDS")}
        json.dump(facts, open(%r, "w"))
        json.dump(%r, open(out, "w"))
        sys.exit(1)
        """
        % (str(tmp_path / "facts.json"), report),
    )
    started = time.time()
    done = run_autograder(autograder, venv, lab_root=True)
    assert done.returncode == 0, done.stderr
    result = results_of(autograder)
    assert result.pop("execution_time") <= time.time() - started + 1
    assert result == report
    facts = json.loads((tmp_path / "facts.json").read_text())
    args = facts["args"]
    assert args[:7] == [
        "--runner",
        "/root/pyops/sub/runner.py",
        "--config",
        str(autograder / "source" / "lab.toml"),
        "--runner-user",
        "own",
        "--gradescope",
    ]
    assert re.fullmatch(r"/tmp/pyops-grade-reports\.\w+/results\.json", args[7]) and len(args) == 8
    assert facts["folder_mode"] == "0o700" and not os.path.exists(os.path.dirname(args[7]))
    assert facts["runner"] == "print('mine')\n" and facts["runner_mode"] == "0o644"
    assert facts["uids"] == "1900200000"


def test_a_python_that_does_not_work_still_gives_a_results_json(tmp_path, autograder):
    venv = fake_venv(tmp_path, "sys.exit(9)")
    (venv / "bin" / "python3").write_text("#!/bin/sh\nexit 1\n")
    assert run_autograder(autograder, venv).returncode == 0
    result = results_of(autograder)
    (test,) = result["tests"]
    assert result["score"] == 0 and test["name"] == "grader error" and "Python environment" in test["output"]


# ---- finish: run_autograder's last step, called directly ----------------------------------------


def finish(tmp_path, *options):
    results = tmp_path / "results.json"
    assert export.finish(["--results", str(results), "--started", str(int(time.time()))] + list(options)) == 0
    return json.loads(results.read_text(encoding="utf-8"))


def test_finish_keeps_the_report_and_adds_execution_time(tmp_path):
    report = {"score": 1, "max_score": 2, "output": "x", "tests": [{"name": "a", "output": "é"}]}
    (tmp_path / "results.json").write_text(json.dumps(report), encoding="utf-8")
    result = finish(tmp_path, "--error", "unused")
    assert result.pop("execution_time") in (0, 1) and result == report


@pytest.mark.parametrize("content", [None, "{not json", '{"tests": "none"}', "[]"])
def test_finish_without_a_usable_report_is_a_grader_error_quoting_stderr(tmp_path, content):
    if content is not None:
        (tmp_path / "results.json").write_text(content)
    stderr = tmp_path / "stderr"
    stderr.write_bytes(b"warming up\nRuntimeError: no \xff way\n\n")
    result = finish(tmp_path, "--config", str(config.DEFAULT_FILE), "--error", "it broke", "--stderr", str(stderr))
    (test,) = result["tests"]
    assert test["name"] == "grader error" and test["max_score"] == 28
    assert "(it broke: RuntimeError: no \ufffd way)" in test["output"]


def test_finish_lists_a_crowded_submission_and_any_file_name(tmp_path):
    submission = tmp_path / "submission"
    submission.mkdir()
    for n in range(25):
        (submission / ("f%02d.py" % n)).write_text("")
    (submission / os.fsdecode(b"caf\xe9.py")).write_text("")
    result = finish(tmp_path, "--submission", str(submission), "--config", str(tmp_path / "missing.toml"))
    (test,) = result["tests"]
    assert "f00.py, f01.py" in test["output"] and "and 6 more" in test["output"]
    assert test["max_score"] == 0  # no configuration to read: no points to show, still a result


def test_gradescope_failure_is_one_failed_visible_test_out_of_the_labs_points():
    lab = config.parse({"profile": "extended", "points": {"S1": 3, "S2": 2, "X": 5}})
    result = platforms.gradescope_failure("grader error", "why", lab)
    assert result["score"] == 0 and result["max_score"] == 10 and result["output"] == "why"
    (test,) = result["tests"]
    assert test == {
        "name": "grader error",
        "number": "",
        "score": 0,
        "max_score": 10,
        "status": "failed",
        "output": "why",
        "visibility": "visible",
        "tags": [],
    }

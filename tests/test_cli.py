"""pyops-conformance as a user meets it: usage errors, exit codes, reports, languages."""

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

from conformance import cli, plugin
from conformance.lab.clauses import CLAUSES
from conformance.usage import PYTHON_VAR
from tests.grading import REFERENCE, grade

# A runner that gets every exit code wrong the same way: it runs nothing and says it did.
# Runs its command, but says only whether it failed: exit 1 for any failure (S1.3's mistake).
LIAR = (
    "import subprocess, sys\n"
    "argv = sys.argv[1:]\n"
    "rc = subprocess.call(argv[argv.index('--') + 1:]) if '--' in argv else 0\n"
    "sys.exit(1 if rc else 0)\n"
)


def liar(tmp_path):
    path = tmp_path / "liar.py"
    path.write_text(LIAR)
    return path


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--runner", "/no/such/runner.py"], "runner file not found: /no/such/runner.py"),
        (["--reference", "--python", "/no/such/python"], "python interpreter not found"),
        (["--reference", "--python", "/bin/true"], "not a Python interpreter: /bin/true"),
        (["--runner", "runner.py", "--reference"], "not allowed with argument"),
        (["--profile", "everything"], "invalid choice"),
        (["--clause", "S9.1"], "unknown clause"),
        (["-n", "-1"], "0 or more workers"),
        (["--json", "/no/such/folder/report.json"], "no folder for the report file"),
        (["--frobnicate"], "unrecognized arguments"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(capsys, argv, message):
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_missing_runner_through_the_real_command():
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "--runner", "/no/such/runner.py"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == "pyops-conformance: error: runner file not found: /no/such/runner.py\n"


def test_json_report_has_the_documented_shape(tmp_path):
    graded = grade(tmp_path, REFERENCE, "--clause", "S1.3", "--clause", "S8")
    assert graded.rc == 0, graded.explain()
    report = graded.report
    assert {"runner", "python", "profile", "isolation", "summary", "steps", "tests"} <= set(report)
    assert report["profile"] == "core" and report["isolation"] in ("namespace", "shared")
    assert set(report["summary"]) == {"passed", "failed", "errors", "skipped", "total"}
    assert list(report["steps"]) == ["S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8"]
    assert report["steps"]["S8"]["passed"] == report["steps"]["S8"]["total"] > 0
    assert report["steps"]["S2"] == {"passed": 0, "total": 0}
    for test in report["tests"]:
        assert set(test) == {"id", "clause", "outcome", "message", "duration_s"}
        assert test["clause"] == "S1.3" or test["clause"].startswith("S8.")
        assert test["outcome"] == "passed" and isinstance(test["duration_s"], float)


def test_failures_exit_1_and_name_their_clause(tmp_path):
    graded = grade(tmp_path, liar(tmp_path), "--clause", "S1.3")
    assert graded.rc == 1, graded.explain()
    failed = graded.failed()
    assert failed and all(t["clause"] == "S1.3" for t in failed)
    message = failed[0]["message"]
    assert message.startswith("[S1.3] the runner exits with CMD's exit code")
    for part in ("expected:", "actual:", "command:", "stdout:", "stderr:", "hint:"):
        assert part in message
    # The learner view: the clause once, then where the runner stands (no table of FAILs when
    # nothing passed: a line says so).
    assert graded.stdout.count("[S1.3]") == 1 and "0 of 1 clauses passed." in graded.stdout, graded.stdout


@pytest.mark.parametrize(
    "pytest_code, counts, status",
    [
        (0, (3, 0, 0), 0),
        (1, (2, 1, 0), 1),
        (1, (1, 1, 1), 1),  # a failure stands, whatever else could not be judged
        (1, (2, 0, 1), 2),  # nothing failed, but not everything was judged
        (5, (0, 0, 0), 2),  # nothing selected
        (2, (1, 0, 0), 2),  # interrupted
    ],
)
def test_the_exit_status_says_the_surest_verdict(pytest_code, counts, status):
    passed, failed, errors = counts
    summary = {"passed": passed, "failed": failed, "errors": errors, "total": passed + failed + errors}
    assert cli.exit_status(pytest_code, summary) == status


def test_hints_in_japanese(tmp_path):
    gradescope = tmp_path / "gradescope.json"
    graded = grade(tmp_path, liar(tmp_path), "--clause", "S1.3", "--lang", "ja", "--gradescope", str(gradescope))
    assert graded.rc == 1
    message = graded.failed()[0]["message"]
    assert "runner は CMD の終了コードで終了する" in message and "ヒント:" in message
    # --lang reaches the platforms' files as the configuration's lang would, and the score is said.
    data = json.loads(gradescope.read_text())
    assert data["tests"][0]["name"] == "S1.3 runner は CMD の終了コードで終了する", data["tests"][0]["name"]
    assert "ステップ" in data["output"], data["output"]
    assert graded.stdout.rstrip().endswith("得点: 0 / 3 点"), graded.stdout


def test_gradescope_and_junit_files(tmp_path):
    gradescope, junit = tmp_path / "gradescope.json", tmp_path / "junit.xml"
    graded = grade(
        tmp_path,
        liar(tmp_path),
        "--clause",
        "S1.3",
        "--clause",
        "S8.2",
        "--gradescope",
        str(gradescope),
        "--junit",
        str(junit),
    )
    assert graded.rc == 1
    data = json.loads(gradescope.read_text())
    # One test per clause graded, in the lab's order.
    assert [t["number"] for t in data["tests"]] == list(graded.report["clauses"]) == ["S1.3", "S8.2"]
    # The shipped configuration: 3 points for step S1, 3 for S8, shared by each step's clauses graded.
    assert data["max_score"] == graded.report["score"]["max_points"] == 6
    assert data["score"] == graded.report["score"]["points"] < 6
    assert {t["status"] for t in data["tests"]} <= {"passed", "failed"}
    suite = ElementTree.parse(str(junit)).getroot()
    assert int(suite.find("testsuite").get("failures")) == graded.report["summary"]["failed"]
    cases = suite.iter("testcase")
    assert all(case.get("file", "").endswith(".py") and case.get("line", "").isdigit() for case in cases)


def test_on_github_actions_a_job_summary_and_an_error_per_failed_check(tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier steps' summary\n")
    env = dict(os.environ, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
    argv = [sys.executable, "-m", "conformance", "--runner", str(liar(tmp_path)), "--clause", "S1.3", "-n", "2"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error title=[S1.3]")]
    text = summary.read_text()
    assert text.startswith("earlier steps' summary\n")  # appended, never replaced
    assert len(errors) == text.count("<details>") > 0 and "| S1 |" in text


def test_no_check_selected_is_an_error(tmp_path):
    graded = grade(tmp_path, REFERENCE, "-k", "no_check_has_this_name")
    assert graded.rc == 2


def test_the_header_says_which_isolation_ran(tmp_path):
    graded = grade(tmp_path, REFERENCE, "--clause", "S1.3")
    assert "isolation: %s" % graded.report["isolation"] in graded.stdout


def test_a_grader_with_a_closed_umask_still_gives_the_runner_its_lab(tmp_path):
    # The folders a runner's root is built of are made by the grader: with umask 077 they would
    # be closed to the runner's own uid, and every check an error.
    umask = os.umask(0o077)
    try:
        graded = grade(tmp_path, REFERENCE, "--clause", "S1.1", workers=2)
    finally:
        os.umask(umask)
    assert graded.rc == 0 and graded.report["summary"]["passed"] > 0, graded.explain()


# Right in every round but the second: it counts rounds by the basic call (its command writes a
# trace named basic-call) that the suite makes once at the start of each round (see
# conformance/judging/blocking.py), in a file outside the lab.
SOMETIMES_WRONG = """import os, subprocess, sys
ROUNDS = %r
argv = sys.argv[1:]
if argv[:1] != ["run"]:
    sys.exit(0)
rc = subprocess.call(argv[argv.index("--") + 1:])
if any("basic-call" in word for word in argv):
    with open(ROUNDS, "a") as counter:
        counter.write("x")
    sys.exit(rc)
with open(ROUNDS) as counter:
    second_round = len(counter.read()) == 2
sys.exit(0 if second_round else rc)
"""


def test_repeat_lists_the_checks_that_varied_and_exits_2(tmp_path, drop_box):
    runner = tmp_path / "sometimes_wrong.py"
    rounds = drop_box / "rounds"
    rounds.touch()
    rounds.chmod(0o666)  # each check's runner has a uid of its own
    runner.write_text(SOMETIMES_WRONG % str(rounds))
    graded = grade(tmp_path, runner, "--repeat", "3", "-k", "exit_code_passes_through", workers=0)
    assert graded.rc == 2, graded.explain()
    varied = graded.report["repeat"]["varied"]
    # Every code but 0 came back 0 in round 2 only.
    assert sorted(entry["id"].split("[")[-1] for entry in varied) == sorted(
        "%d]" % code for code in (1, 2, 3, 7, 42, 100, 123, 125, 200, 255)
    )
    for entry in varied:
        assert entry["clause"] == "S1.3"
        assert entry["outcomes"] == ["passed", "failed", "passed"]
        assert list(entry["messages"]) == ["2"] and "exit code 0" in entry["messages"]["2"]
    assert "round 1/3: 11 passed, 0 failed" in graded.stdout
    assert "round 2/3: 1 passed, 10 failed" in graded.stdout
    assert "10 check(s) varied between 3 rounds" in graded.stdout


def test_repeat_of_a_steady_runner_exits_as_one_grading_would(tmp_path):
    graded = grade(tmp_path, liar(tmp_path), "--repeat", "2", "--clause", "S1.3", workers=0)
    assert graded.rc == 1, graded.explain()
    assert graded.report["repeat"] == {"rounds": 2, "varied": []}
    assert "every check had the same outcome in all 2 rounds" in graded.stdout


def test_repeat_needs_a_round():
    assert cli.main(["--repeat", "0"]) == 2


PYTEST_NOISE = ("platform linux", "[gw", "test_s1_", ".py::", "rootdir:", "passed in", "short test summary")


def test_the_learner_view_is_the_default_and_carries_no_test_runner_noise(tmp_path):
    graded = grade(tmp_path, liar(tmp_path), "--clause", "S1.3")
    assert graded.rc == 1, graded.explain()
    noise = [word for word in PYTEST_NOISE if word in graded.stdout]
    assert not noise, graded.stdout
    lines = graded.stdout.splitlines()
    assert lines[0].startswith("runner: ") and "1 of 1 clauses failed" in graded.stdout, graded.stdout
    # Once per clause, however many checks failed.
    assert graded.stdout.count("[S1.3]") == 1 and graded.stdout.count(CLAUSES["S1.3"].hint("en")) == 1, graded.stdout


def test_the_pytest_view_is_there_for_maintainers(tmp_path):
    graded = grade(tmp_path, liar(tmp_path), "--clause", "S1.3", "--view", "pytest")
    assert graded.rc == 1, graded.explain()
    assert "test_s1_" in graded.stdout and "short test summary" in graded.stdout


def test_the_github_classroom_page_s_workflow_grades_every_core_step_for_an_integer_score():
    page = (REFERENCE.parents[1] / "docs" / "platforms" / "github-classroom.md").read_text(encoding="utf-8")
    workflow = page.split("<!-- github-classroom:", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    graded = re.findall(r"--clause (S\d)\n\s+timeout: \d+\n\s+max-score: (\d+)\n", workflow)
    assert [step for step, _ in graded] == ["S%d" % n for n in range(1, 9)], graded
    assert all(int(score) > 0 for _, score in graded)
    assert "runners: " + ",".join("s%d" % n for n in range(1, 9)) in workflow


def test_a_configuration_sets_the_profile_and_a_broken_one_is_refused_in_one_line(tmp_path):
    lab = tmp_path / "lab.toml"
    lab.write_text('profile = "extended"\n[points]\nX = 7\n')
    graded = grade(tmp_path, REFERENCE, "--config", str(lab), "--clause", "X3")
    assert graded.rc == 0 and graded.report["profile"] == "extended", graded.explain()
    assert graded.report["score"]["max_points"] == 7
    lab.write_text("[points]\nS1 = 'ten'\n")
    graded = grade(tmp_path, REFERENCE, "--config", str(lab))
    assert graded.rc == 2 and graded.stderr.count("\n") == 1 and "points.S1 = 'ten'" in graded.stderr


def test_a_wrapper_interpreter_is_resolved_to_the_python_it_runs(tmp_path):
    # pyenv's shims are scripts that exec the real python: the checks must see the real one in
    # /proc, or a command started through the runner's interpreter would never be recognised.
    real = plugin.base_interpreter()
    wrapper = tmp_path / "python3"
    wrapper.write_text('#!/bin/sh\nexec "%s" "$@"\n' % real)
    wrapper.chmod(0o755)
    graded = grade(tmp_path, REFERENCE, "--python", str(wrapper), "--clause", "S2.1", workers=2)
    assert graded.rc == 0, graded.explain()
    assert graded.report["python"] == os.path.realpath(real) or graded.report["python"] == real


def test_pyops_python_names_the_runners_interpreter_and_python_overrides_it(tmp_path):
    plain = tmp_path / "plain"
    subprocess.run([plugin.base_interpreter(), "-m", "venv", "--without-pip", str(plain)], check=True)
    tmp_path.chmod(0o755)  # the runner's own uid starts the interpreter in it
    env = dict(os.environ, **{PYTHON_VAR: str(plain / "bin" / "python")})
    graded = grade(tmp_path, REFERENCE, "--clause", "S2.1", workers=2, env=env)
    assert graded.rc == 0, graded.explain()
    assert graded.report["python"] == str(plain / "bin" / "python"), graded.report["python"]
    real = os.path.realpath(plugin.base_interpreter())
    graded = grade(tmp_path, REFERENCE, "--python", real, "--clause", "S2.1", workers=2, env=env)
    assert graded.rc == 0 and graded.report["python"] == real, graded.report["python"]


def test_a_suite_in_a_folder_closed_to_the_runner_gives_it_commands_it_can_start(tmp_path):
    # tox keeps its venvs in the checkout's .tox, and a checkout may sit in a folder other users
    # cannot enter: the commands the checks give the runner must name the runner's interpreter
    # (which its own uid can start), never the suite's own, however early they are built.
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(closed / "venv")], check=True)
    importable = os.pathsep.join(path for path in sys.path if path)
    env = dict(os.environ, PYTHONPATH=importable)
    env.pop(PYTHON_VAR, None)  # the default interpreter: the one the suite's venv was made from
    suite_python = str(closed / "venv" / "bin" / "python")
    graded = grade(tmp_path, REFERENCE, "--clause", "S2.3", workers=2, env=env, suite_python=suite_python)
    assert graded.rc == 0, graded.explain()
    assert graded.report["python"] != suite_python
    assert graded.report["python"] == os.path.realpath(plugin.base_interpreter()), graded.report["python"]
    if os.geteuid() == 0:  # only a root grader gives the runner a uid of its own
        assert graded.report["runner_user"] == "own", graded.report["runner_user"]


@pytest.mark.parametrize("lang,start", [("en", "steps done (checks passed/checks):"), ("ja", "完了したステップ")])
def test_the_learner_view_says_each_step_as_soon_as_it_is_done(tmp_path, lang, start):
    graded = grade(tmp_path, liar(tmp_path), "--clause", "S1", "--clause", "S8.2", "--lang", lang)
    assert graded.rc == 1, graded.explain()
    tests = graded.report["tests"]
    in_s1 = [test for test in tests if test["clause"].startswith("S1.")]
    passed = sum(test["outcome"] == "passed" for test in in_s1)
    # One line for the whole grading, a step added as each is done: S1 and S8, once each.
    (line,) = [line for line in graded.stdout.splitlines() if line.startswith(start)]
    assert passed < len(in_s1) and " S1 (%d/%d)" % (passed, len(in_s1)) in line and line.count(" S8 (") == 1, line
    # Before the failures: said while the grading went on.
    assert graded.stdout.index(start) < graded.stdout.index("[S1.3]")


def test_the_default_workers_follow_a_cpu_quota(tmp_path):
    from conformance.cli import available_cpus, default_workers

    cores = available_cpus(tmp_path / "no-cgroup")
    assert cores >= 1
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("50000 100000\n")  # docker run --cpus 0.5
    assert available_cpus(v2) == min(cores, 0.5)
    (v2 / "cpu.max").write_text("max 100000\n")
    assert available_cpus(v2) == cores
    v1 = tmp_path / "v1" / "cpu"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("150000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert available_cpus(tmp_path / "v1") == min(cores, 1.5)
    # Each worker costs most of a CPU-second to start: 4 at least, 4 per CPU, 16 at most.
    assert [default_workers(cpus) for cpus in (0.5, 1, 2, 8)] == [4, 4, 8, 16]


def test_a_pytest_plugin_installed_beside_the_suite_does_not_touch_the_grading(tmp_path):
    # A distribution on the path whose pytest11 entry point fails every test it sees: pytest
    # would load it in every process of the grading, were the CLI not to name its plugins.
    site = tmp_path / "site"
    dist = site / "meddler-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: meddler\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\nmeddler = meddler_plugin\n")
    (site / "meddler_plugin.py").write_text(
        "import pytest\n"
        "@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_runtest_call(item):\n"
        "    raise AssertionError('meddled')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    probe = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; print(m.version('meddler'))"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip() == "1.0", "the fake plugin is not installed: the test proves nothing"
    graded = grade(tmp_path, REFERENCE, "--clause", "S1.1", workers=2, env=env)
    assert graded.rc == 0, graded.explain()
    assert "meddled" not in graded.stdout + graded.stderr


def test_plain_pytest_grades_with_the_plugin_named_and_only_then(tmp_path):
    # README's way for developers: pytest with the plugin named. Without it pytest loads no part
    # of the suite's plugin (no entry point), so a pytest session in the same environment that did
    # not ask for a grading plays nothing in the background.
    suite = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", "conformance.checks"]
    named = suite + ["-p", "conformance.plugin", "--runner", str(REFERENCE), "--lab-clause", "S1.1", "--lab-forks", "2"]
    done = subprocess.run(named, cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and re.search(r"\b1\d passed\b", done.stdout), done.stdout + done.stderr
    unnamed = subprocess.run(suite + ["--runner", str(REFERENCE)], cwd=str(tmp_path), capture_output=True, text=True)
    assert unnamed.returncode == 4 and "unrecognized arguments: --runner" in unnamed.stderr, unnamed.stderr


def test_without_runner_the_labs_own_file_is_graded(tmp_path, monkeypatch, capsys):
    lab_runner = tmp_path / "runner.py"
    monkeypatch.setattr(cli, "LAB_RUNNER", lab_runner)
    assert cli.main(["--clause", "S1.3"]) == 2  # not there: one line saying how to name one
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and str(lab_runner) in said and "--runner FILE" in said, said
    lab_runner.write_text(REFERENCE.read_text())
    options = cli.build_parser().parse_args(["--clause", "S1.3"])
    cli.validate(options)
    assert options.runner == str(lab_runner)
    options = cli.build_parser().parse_args(["--reference"])
    cli.validate(options)
    assert options.decided["runner"] == str(REFERENCE.resolve())


def test_help_lists_every_command_and_a_mistyped_one_is_named_in_one_line():
    shown = subprocess.run([sys.executable, "-m", "conformance", "--help"], capture_output=True, text=True)
    assert shown.returncode == 0
    for name in cli.COMMANDS:
        assert "\n  %s " % name in shown.stdout, shown.stdout
    wrong = subprocess.run([sys.executable, "-m", "conformance", "clas", "subs"], capture_output=True, text=True)
    assert wrong.returncode == 2 and wrong.stdout == "", wrong.stdout
    assert wrong.stderr.count("\n") == 1 and "no command 'clas'" in wrong.stderr, wrong.stderr


# A stopping signal that lands where Python cannot raise (a weakref callback, a __del__, which
# an import's module lock runs) was printed as "Exception ignored in: ... Traceback": it must be
# kept for the grading to honour at the end of its check (test_shared_mode.py), and said nowhere.
LANDS_IN_A_DEL = """
import os, signal
from conformance import usage
usage.stop_on_signals()
class LandsHere:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs here, between two bytecodes of __del__
            pass
LandsHere()
print("kept:", usage.stopped_by)
"""


def test_a_stop_that_lands_where_python_cannot_raise_is_kept_and_prints_no_traceback():
    done = subprocess.run([sys.executable, "-c", LANDS_IN_A_DEL], capture_output=True, text=True, timeout=60)
    assert done.stdout == "kept: [15]\n", (done.stdout, done.stderr)
    assert done.stderr == ""

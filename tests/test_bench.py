"""Every benchmark in bench/ runs, in its short form: a change that breaks one fails here.

The figures are not judged (a busy machine misses a speed goal, one round proves nothing): each
script must end as it documents (0, or 1 where that means a goal missed), print no traceback, print
every figure it promises (matched by its label, not its number), and leave nothing in its TMPDIR.
Marked `bench`: they run in tox's `bench` env (`tox -e bench`), apart from the other tests.
"""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.bench,
    pytest.mark.skipif(os.geteuid() != 0, reason="the benchmarks grade in private mount namespaces: root"),
]

BENCH = Path(__file__).resolve().parents[1] / "bench"
NUMBER = r"[-\d.]+"

# script: (its short form, the exit statuses it documents short of an error, the lines it must
# print, the seconds it may take at most). 1 is "a goal missed" for bench_class.py, "a verdict
# varied" for stability.py, "a survivor not in equivalent.toml" for mutation.py.
SHORT = {
    "bench_runner.py": (
        ["--runs", "1"],
        (0,),
        [
            r"^python \S+, 1 runs each, medians$",
            r"^start-up: run -- true +%s" % NUMBER,
            r"^timeout 1 on hang\.sh +%s" % NUMBER,
            r"^SIGTERM to exit +%s ?ms" % NUMBER,
        ],
        120,
    ),
    "bench_suite.py": (
        ["--clause", "S8"],
        (0,),
        [
            r"^core profile \(S8 only\), \d+ checks, isolation \w+$",
            r"^default workers: +%ss" % NUMBER,
            r"^one worker: +%ss$" % NUMBER,
            r"^speed-up: +%sx" % NUMBER,
            r"^slowest checks:$",
            r"^ +%ss +test_s8_dry_run\.py::" % NUMBER,
        ],
        240,
    ),
    "bench_class.py": (
        ["--size", "1"],
        (0, 1),
        [
            r"^1 submissions, \d+ cores; each graded alone first$",
            r"^  alone before student01 .* reference$",
            r"^the class, graded at once ",
            r"^  alone after student01 .* reference$",
            r"^wall time: +%s s$" % NUMBER,
            r"^submissions/minute: +%s$" % NUMBER,
            r"^CPU-s per submission: *%s \(alone: %s before the class, %s after\)$" % (NUMBER, NUMBER, NUMBER),
            r"^CPU floor: +%s s " % NUMBER,
            r"^share of the floor: +%s %%" % NUMBER,
            r"^CPU in use: +%s %%" % NUMBER,
            r"^verdicts unlike alone: \S",
            r"^second run: +%s s " % NUMBER,
        ],
        900,
    ),
    "mutation.py": (
        ["--sample", "1", "-j", "1"],
        (0, 1),
        [
            r"^\d+ mutants of runner\.py made in %s s; grading 1$" % NUMBER,
            r"^the reference passes in %s s; each mutant's grading is bounded at %s s$" % (NUMBER, NUMBER),
            r"^\[  1/1\] (core|extended) +\w+ +\S+ +line +\d+ ",
            r"^mutants \d+, graded 1: killed \d, survived \d \(equivalent \d, unexplained \d\), timeout \d, error \d$",
            r"^score \S+ \(timeouts and errors not killed\)$",
            r"^kills per clause: ",
            r"^wall \d+ s, CPU \d+ s, %s mutants per minute on \d+ CPUs, 1 at a time$" % NUMBER,
        ],
        900,
    ),
    "similarity.py": (
        ["--quick"],
        (0, 1),
        [
            r"^class: \d+ runners \(\d+ zoo mutants, \d+ runners of the tests, \d+ disguised copies\); thresholds ",
            r"^recall: \d+ of \d+ disguised copies flagged$",
            r"^zoo mutants flagged similar to their public base: \d+ of \d+$",
            r"^false positives: \d+ pairs of different lineages flagged$",
            r"^the 9 correct runners between each other: highest code %s " % NUMBER,
            r"^60 submissions, \d+ pairs \(with the 9 public runners\), \d+ cores: %s s; one changed: %s s "
            % (NUMBER, NUMBER),
        ],
        180,
    ),
    "stability.py": (
        ["--runs", "1", "--s6-runs", "1", "--condition", "idle", "--only", "reference"],
        (0, 1),
        [
            r"^machine +runner +what +rounds +verdicts +failed +again +time$",
            r"^idle +reference +core +1 +\d+ +\d+ +\d+ +\d+s$",
            r"^idle +reference +S6 +1 +\d+ +\d+ +\d+ +\d+s$",
        ],
        600,
    ),
}


def run(argv, env, timeout):
    """Run a benchmark in a session of its own; on timeout, stop all of it and fail."""
    process = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)  # a grading puts its labs back on SIGTERM
        try:
            stdout, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
        pytest.fail("%s took over %d s\nstdout:\n%s\nstderr:\n%s" % (argv[1], timeout, stdout, stderr))
    return process.returncode, stdout, stderr


# What the scripts share (one-line errors), not a benchmark of its own.
SHARED = {"oneline.py"}


def test_every_benchmark_has_a_short_form_here():
    assert sorted(path.name for path in BENCH.glob("*.py") if path.name not in SHARED) == sorted(SHORT)


@pytest.mark.parametrize("script", sorted(SHORT))
def test_the_benchmark_runs_in_its_short_form(script, open_tmpdir, tmp_path):
    if script == "mutation.py":
        pytest.importorskip("cosmic_ray", reason="cosmic-ray, which makes the mutants, supports Python 3.9 and later")
    options, statuses, lines, timeout = SHORT[script]
    extra = []
    if script == "mutation.py":  # its kill matrix and journal, written as a long run writes them
        extra = ["--json", str(tmp_path / "matrix.json"), "--journal", str(tmp_path / "journal.jsonl")]
    status, stdout, stderr = run([sys.executable, str(BENCH / script)] + options + extra, open_tmpdir, timeout)
    said = "exit %d\nstdout:\n%s\nstderr:\n%s" % (status, stdout, stderr)
    assert status in statuses, said
    assert "Traceback" not in stderr and "Traceback" not in stdout, said
    for line in lines:
        assert re.search(line, stdout, re.MULTILINE), "no line like %r\n%s" % (line, said)
    assert os.listdir(open_tmpdir["TMPDIR"]) == [], "left behind in its TMPDIR\n%s" % said
    if script == "mutation.py":
        matrix = json.loads((tmp_path / "matrix.json").read_text())
        assert matrix["summary"]["graded"] == len(matrix["mutants"]) == 1
        assert len((tmp_path / "journal.jsonl").read_text().splitlines()) >= 1


@pytest.mark.parametrize(
    "script, options, said",
    [
        ("bench_runner.py", ["--runs", "0"], "--runs needs 1 or more"),
        ("bench_runner.py", ["--python", "/nonexistent/python"], "--python: "),
        ("bench_suite.py", ["--clause", "S99"], "unknown clause 'S99'"),
        ("bench_class.py", ["--size", "0"], "--size needs 1 or more"),
        ("bench_class.py", ["-j", "x"], "invalid int value: 'x'"),
        ("mutation.py", ["--sample", "0"], "--sample needs 1 or more"),
        ("mutation.py", ["--json", "/nonexistent/matrix.json"], "no folder /nonexistent"),
        ("similarity.py", ["--size", "1"], "--size needs 2 or more"),
        ("stability.py", ["--only", "nosuch"], "--only nosuch: no such runner"),
        ("stability.py", ["--runs", "1", "--s6-runs", "0", "--only", "reference", "--", "--bogus"], "--bogus"),
    ],
)
def test_bad_input_is_said_in_one_line_and_leaves_nothing(script, options, said, open_tmpdir):
    if script == "mutation.py":
        pytest.importorskip("cosmic_ray", reason="cosmic-ray, which makes the mutants, supports Python 3.9 and later")
    status, stdout, stderr = run([sys.executable, str(BENCH / script)] + options, open_tmpdir, 120)
    name = script[: -len(".py")]
    assert status == 2, (status, stdout, stderr)
    assert stderr.startswith(name + ": ") and stderr.count("\n") == 1 and said in stderr, stderr
    assert os.listdir(open_tmpdir["TMPDIR"]) == []

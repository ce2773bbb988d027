"""`pyops-conformance selftest` judged without grading: its expectations, its refusals, its page."""

import subprocess
import sys
from pathlib import Path

import pytest

from conformance.selftest import command, expectations, page, zoo

WRONG = zoo.by_name("exit-code-squashed-to-1")  # breaks S1.3


def check(clause, outcome="passed", id=None, blocked_by=None):
    return {"id": id or "test_%s" % clause, "clause": clause, "outcome": outcome, "blocked_by": blocked_by}


def report(tests):
    from conformance.judging import verdicts

    return {"tests": tests, "clauses": verdicts.of_tests(tests)}


def test_a_wrong_runner_caught_by_its_own_clause_and_charged_there_only_is_as_expected():
    caught = report([check("S1.1"), check("S1.3", "failed", "test_s1_3_exit_code_passes_through[3]"), check("S2.1")])
    assert expectations.zoo_problems(WRONG, caught) == []


def test_a_wrong_runner_the_suite_misses_or_charges_elsewhere_is_not():
    missed = report([check("S1.1"), check("S1.3"), check("S2.1")])
    assert any("do not catch it" in problem for problem in expectations.zoo_problems(WRONG, missed))
    elsewhere = report([check("S1.3", "failed"), check("S2.1", "failed")])
    assert any("charged in S1.3, S2.1, not S1.3" in problem for problem in expectations.zoo_problems(WRONG, elsewhere))
    # Failing only where another clause's failure blocked it is not its clause catching it.
    blocked = report([check("S1.1", "failed"), check("S1.3", "failed", blocked_by="S1.1")])
    assert any("do not catch it" in problem for problem in expectations.zoo_problems(WRONG, blocked))
    assert expectations.zoo_problems(WRONG, None) == ["no report: the suite could not grade it"]


def test_a_correct_runner_must_pass_both_rounds_with_the_same_verdict_for_every_check():
    passing = report([check("S1.1"), check("S1.3")])
    assert expectations.correct_problems([passing, passing]) == []
    failing = report([check("S1.1"), check("S1.3", "failed")])
    assert expectations.correct_problems([passing, failing])[0] == "round 2: failed S1.3"
    skipped = report([check("S1.1"), check("S1.3", "skipped")])
    assert "rounds differ in 1 checks: test_S1.3" in expectations.correct_problems([passing, skipped])


def test_any_expectation_not_met_fails_the_selftest_and_is_named():
    good = command.Graded("correct", "runner")
    bad = command.Graded("zoo", "exit-code-squashed-to-1", problems=["S1.3's checks do not catch it"])
    assert command.summarize([good], None, 29, 1.0)["passed"]
    summary = command.summarize([good, bad], None, 29, 1.0)
    assert not summary["passed"]
    assert "not as expected: zoo exit-code-squashed-to-1: S1.3's checks do not catch it" in summary["lines"]
    assert summary["lines"][-1].startswith("selftest FAILED")


@pytest.mark.parametrize("kind", command.KINDS)
def test_only_one_kind_is_graded_when_asked(kind, monkeypatch):
    graded = []
    monkeypatch.setattr(command, "run_local", lambda jobs, settings, parallel, done: graded.extend(jobs))
    settings = command.Settings("", None, "en", 4, 60.0)
    command.run(settings, 2, None, 29, kinds=(kind,))
    kinds = {job.student.split()[0] for job in graded}
    assert kinds == {kind}, kinds
    wanted = len(zoo.CORRECT) * command.ROUNDS if kind == "correct" else len(zoo.MUTANTS)
    assert len(graded) == wanted


def selftest(*args):
    return subprocess.run(
        [sys.executable, "-m", "conformance", "selftest", *map(str, args)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "args,says",
    [
        (["-k", "no-such-runner"], "no bundled runner's name holds it"),
        (["--mutants", "0"], "--mutants needs 1 or more"),
        (["--mutants", "many"], "--mutants needs a number or `all`"),
        (["--keep", "/no/such/folder"], "not a folder"),
        (["-j", "0"], "-j needs 1 or more"),
    ],
)
def test_bad_input_is_refused_in_one_line(args, says):
    done = selftest(*args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
    assert not done.stdout


def test_without_the_bundled_runners_it_says_where_to_run_it(monkeypatch, capsys):
    monkeypatch.setattr(zoo, "CORRECT", [Path("/nowhere/runner.py")])
    assert command.main([]) == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "the lab image leaves out" in said, said


def test_a_selftest_without_mutants_needs_no_cosmic_ray():
    # The grading image has no cosmic-ray (the `mutation` extra): the correct and wrong runners
    # must still be graded there, and --mutants refused in one line.
    code = (
        "import sys\n"
        "sys.modules['cosmic_ray'] = None  # an import of it now fails\n"
        "from conformance.selftest import command, kill, page\n"
        "settings = kill.extended(kill.Settings('profile = \"core\"\\n', None, 'en', 4, 60))\n"
        "assert settings.config_text == 'profile = \"extended\"\\n'\n"
        "sys.exit(command.main(['--mutants', '3']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--mutants needs cosmic-ray" in done.stderr


def test_the_page_shows_what_a_survivor_changed_as_text():
    hostile = '<script>alert("x")</script>'
    survivor = command.Graded(
        "mutant",
        "AddNot-0000",
        outcome=None,
        problems=["survived, and equivalent.toml does not list it"],
        detail={"verdict": "survived", "line": 3, "diff": "-x = 1\n+x = %s\n" % hostile, "clauses": {"S1.1": "passed"}},
    )
    summary = command.summarize([survivor], 1, 29, 1.0)
    html = page.render([survivor], summary)
    assert hostile not in html and "&lt;script&gt;" in html
    assert 'data-passed="false"' in html and 'data-mutant="AddNot-0000"' in html

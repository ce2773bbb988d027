"""The learner's view: failures by step in the lab's order, each hint once, no test-runner noise."""

import pytest

from conformance.judging import expect
from conformance.lab.clauses import CLAUSES, display_width
from conformance.reporting import report as report_module
from conformance.reporting import view


def failure(test_id, clause, expected, actual, lang="en", outcome="failed"):
    saved, expect.LANG = expect.LANG, lang
    try:
        message = expect.render(clause, expected, actual, None)
    finally:
        expect.LANG = saved
    return {"id": test_id, "clause": clause, "outcome": outcome, "message": message, "duration_s": 0.1}


def report(tests):
    return {"profile": "core", "tests": tests}


def passed(test_id, clause):
    return {"id": test_id, "clause": clause, "outcome": "passed", "message": "", "duration_s": 0.1}


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_failures_come_by_step_in_the_lab_order_whatever_order_they_ran_in(lang):
    shown = view.render(
        report(
            [
                failure("t::s6", "S6.4", "no process left", "sleep 60 left", lang),
                passed("t::s1", "S1.1"),
                failure("t::s2", "S2.3", "exit code 124", "exit code 0", lang),
            ]
        ),
        lang,
    )
    text = "\n".join(shown)
    assert text.index("[S2.3]") < text.index("[S6.4]")
    assert CLAUSES["S2.3"].text(lang) in text and CLAUSES["S6.4"].hint(lang) in text
    assert "t::s2" not in text and "t::s6" not in text  # test ids are the suite's, not the learner's
    assert (
        shown[-1]
        == {"en": "1 passed, 2 failed, 0 errors, 0 skipped", "ja": "合格 1、不合格 2、エラー 0、スキップ 0"}[lang]
    )


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_clause_is_shown_once_with_its_cause_and_a_line_per_other_check(lang):
    tests = [failure("t::%d" % n, "S2.4", "no process left", "sleep %d left" % n, lang) for n in (60, 61, 62)]
    text = "\n".join(view.render(report(tests), lang))
    assert text.count(CLAUSES["S2.4"].hint(lang)) == 1 and text.count("[S2.4]") == 1
    # The cause is the first check by id; each other one says in a line what it saw.
    assert "sleep 60 left" in text and "- 60:" not in text
    assert "    - 61: sleep 61 left" in text and "    - 62: sleep 62 left" in text


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_checks_a_basic_call_blocked_are_one_failure(lang):
    tests = [
        dict(
            failure("t::%d" % n, "S1.3", "exits 0", "blocked by S1.3: the basic call exited 1", lang), blocked_by="S1.3"
        )
        for n in range(5)
    ] + [dict(failure("t::s2", "S2.1", "killed", "blocked by S1.3: the basic call exited 1", lang), blocked_by="S1.3")]
    text = "\n".join(view.render(report(tests), lang))
    assert text.count("blocked by S1.3: the basic call") == 1, text
    assert view._WORDS[lang]["blocked_by"] % {"by": "S1.3", "clauses": "S2.1"} in text


def test_harness_errors_are_set_apart_from_the_runner_s_failures():
    error = {
        "id": "t::e",
        "clause": "S5.2",
        "outcome": "error",
        "message": "HarnessTimeout: waited 5.0s",
        "duration_s": 1,
    }
    shown = view.render(report([error, passed("t::p", "S1.1")]), "en")
    assert view._WORDS["en"]["errors"] in shown and "  [S5.2] HarnessTimeout: waited 5.0s" in shown


def test_everything_passed_says_so():
    assert view._WORDS["ja"]["all_passed"] in view.render(report([passed("t::p", "S1.1")]), "ja")


@pytest.mark.parametrize(
    "environ,expected",
    [
        ({"LANG": "ja_JP.UTF-8"}, "ja"),
        ({"LANG": "en_US.UTF-8"}, "en"),
        ({"LANG": "C.UTF-8"}, "en"),
        ({"LC_ALL": "ja_JP.UTF-8", "LANG": "en_US.UTF-8"}, "ja"),
        ({"LC_ALL": "", "LC_MESSAGES": "en_GB", "LANG": "ja_JP"}, "en"),
        ({}, "en"),
        ({"LANGUAGE": "ja", "LANG": "en_US.UTF-8"}, "ja"),
        ({"LANGUAGE": "fr:ja_JP:en", "LANG": "en_US.UTF-8"}, "ja"),  # the first one the suite speaks
        ({"LANGUAGE": "fr", "LANG": "ja_JP.UTF-8"}, "ja"),
    ],
)
def test_the_language_follows_the_locale(environ, expected):
    assert view.language(None, environ) == expected
    assert view.language("ja", environ) == "ja"  # --lang wins


@pytest.mark.parametrize(
    "argv,shown",
    [
        (["runner.py", "run", "--", "sleep", "60"], "runner.py run -- sleep 60"),
        (["runner.py", "run", "--", "echo", "a b", ""], "runner.py run -- echo 'a b' ''"),
        (["runner.py", "apply", "日本語 名前"], "runner.py apply '日本語 名前'"),
        # Quoting a quote reads as line noise ('\''); a list says the same plainly.
        (
            ["runner.py", "run", "--", "sh", "-c", "(trap '' TERM; exec sleep 66) & wait"],
            '["runner.py", "run", "--", "sh", "-c", "(trap \'\' TERM; exec sleep 66) & wait"]',
        ),
    ],
)
def test_a_command_is_shown_as_the_learner_would_type_it_or_as_a_list(argv, shown):
    assert expect.show_command(argv) == shown


def test_failures_of_different_calls_are_not_merged_however_alike_their_outcome():
    def of(command):
        message = "\n".join(
            [
                "[S2.4] " + CLAUSES["S2.4"].text("en"),
                expect.labelled("expected", "no process of the command left running"),
                expect.labelled("actual", "2 process(es) still running after the runner exited"),
                expect.labelled("command", command),
                expect.hint_line("S2.4", "en"),
            ]
        )
        return {"id": command, "clause": "S2.4", "outcome": "failed", "message": message, "duration_s": 1.0}

    text = "\n".join(view.render(report([of("runner.py run -- a"), of("runner.py run -- b")]), "en"))
    assert "runner.py run -- a" in text and "runner.py run -- b" in text


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_failure_is_charged_to_the_clause_it_broke_and_blocks_the_check_s_own(lang):
    # A check of S3.3 whose hang.sh left its sleep behind broke S2.4: the learner fixes S2.4.
    found_in_s3 = failure("t::test_s3_3_hang_sh_timed_out_twice_leaves_nothing", "S2.4", "none left", "sleep 60", lang)
    found_in_s3.update(clause="S3.3", charged="S2.4")  # as the plugin records it
    shown = view.render(report([found_in_s3, passed("t::s2", "S2.1"), passed("t::s3", "S3.1")]), lang)
    text = "\n".join(shown)
    assert text.count("[S2.4]") == 1 and "[S3.3]" not in text, text
    assert view._WORDS[lang]["blocked_by"] % {"by": "S2.4", "clauses": "S3.3"} in text


def test_a_hint_chosen_from_the_evidence_is_said_once_when_two_checks_get_it():
    hint = "your runner waited the same time before every retry (1.0, 1.0, 1.0 s)"
    tests = [
        {
            "id": "t::%d" % number,
            "clause": "S3.2",
            "outcome": "failed",
            "message": expect.render("S3.2", "retry 2 after 2s", actual, None, hint),
            "duration_s": 0.1,
        }
        for number, actual in enumerate(("1.00s", "1.00s between records"))
    ]
    text = "\n".join(view.render(report(tests), "en"))
    assert text.count(hint) == 1 and ": 1.00s between records" in text, text


def test_a_grading_of_some_clauses_lists_their_steps_and_a_platform_may_list_others():
    tests = [passed("t::p", "S1.1"), dict(passed("t::f", "S3.1"), outcome="failed", message="x")]
    table = report_module.step_table(tests, "core")
    assert [line.split()[0] for line in table[2:-1]] == ["S1", "S3"], table
    assert table[-1] == "1 passed, 1 failed, 0 errors, 0 skipped"
    listed = report_module.step_table(tests, "core", "ja", listed=["S1", "S2"])
    assert [line.split()[0] for line in listed[2:-1]] == ["S1", "S2"] and "未実行" in listed[3], listed
    # Nothing judged at all: every step, each NOT RUN, says so.
    assert len(report_module.step_table([], "core")) == 2 + 8 + 1


def test_the_japanese_step_table_is_japanese_and_its_columns_line_up():
    failed = dict(passed("t::f", "S2.1"), outcome="failed", message="x")
    lines = view.render(report([passed("t::p", "S1.1"), failed]), "ja")
    table = lines[lines.index(next(line for line in lines if line.startswith("ステップ"))) :]
    assert len(table) == 4, table  # the steps judged, and the count line
    assert "PASS" not in "\n".join(table) and "合格" in table[1] and "不合格" in table[2]
    # Each row's counts end in the same display column as the heading's.
    ends = [display_width(line.rsplit("  ", 1)[0]) for line in table[:-1]]
    assert len(set(ends)) == 1, table


def test_a_message_shows_each_check_folder_as_lab_and_a_runner_s_controls_as_escapes():
    said = (
        "command:  runner.py run -- sh -c 'echo ran > \"/dev/shm/pyops-lab-19191bcab150-o11d89c557aa747c5-g79gy2nl"
        "/work/basic-call\"; exit 3'\nTMPDIR=/tmp/pyops-lab-ab.c1-o0123-x_y/work/tmp\n  stdout: '\x1b[2J'"
    )
    assert report_module.as_shown(said) == (
        "command:  runner.py run -- sh -c 'echo ran > \"<lab>/work/basic-call\"; exit 3'\n"
        "TMPDIR=<lab>/work/tmp\n  stdout: '\\x1b[2J'"
    )

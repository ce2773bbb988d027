"""S1: `runner.py run -- CMD...` runs CMD as an argv list, passes its stdout, exits with its code."""

import pytest

from conformance.harness import labfiles
from conformance.judging import expect, scenarios
from conformance.lab.commands import FLAKY, exits, flaky_calls, sh

clause = pytest.mark.clause

ARGV_CASES = [
    # (what the case tries, argv, stdout the command prints when it gets exactly this argv)
    ("spaces", ["printf", "%s|", "a b", "c  d"], b"a b|c  d|"),
    (
        "shell-syntax",
        ["printf", "%s\\n", "$HOME", "*", ";", "|", "&&", "$(id)", "`id`"],
        b"$HOME\n*\n;\n|\n&&\n$(id)\n`id`\n",
    ),
    ("empty-arguments", ["printf", "%s|", "", "x", ""], b"|x||"),
    ("quotes-and-backslash", ["printf", "%s", 'quote\'s "double" \\back'], b'quote\'s "double" \\back'),
    ("japanese", ["printf", "%s", "こんにちは"], "こんにちは".encode()),
    ("runner-options", ["echo", "--retries", "3", "--timeout", "1"], b"--retries 3 --timeout 1\n"),
    ("second-dashes", ["echo", "--", "x"], b"-- x\n"),
    ("help-words", ["echo", "-h", "--help", "help"], b"-h --help help\n"),
    ("glob", ["echo", "*"], b"*\n"),
    ("newline", ["printf", "%s\\n", "a\nb"], b"a\nb\n"),
    ("redirection", ["printf", "%s", "> out.txt"], b"> out.txt"),
]


@clause("S1.1")
# Plain ASCII names: pytest escapes any other id, and escapes it again when one process collects
# the checks twice (--repeat), so a check would change its name between rounds.
@pytest.mark.parametrize("argv,printed", [case[1:] for case in ARGV_CASES], ids=[case[0] for case in ARGV_CASES])
def test_s1_1_argv_reaches_command_unchanged(runner, argv, printed):
    result = runner.run("run", "--", *argv)
    expect.exit_code(result, 0, "S1.1")
    scenarios.stdout_is(runner, result, printed, "S1.1")


@clause("S1.1")
def test_s1_1_no_shell_a_string_is_one_program_name(runner):
    # With a shell, "echo through-a-shell" would print; as an argv it names a program that does not exist.
    result = runner.run("run", "--", "echo through-a-shell")
    expect.finished(result, "S1.1")
    expect.that(
        b"through-a-shell" not in result.stdout,
        "S1.1",
        expect.say(
            "no shell: the single word 'echo through-a-shell' is not split or run",
            "シェルを使わない: 1 語の 'echo through-a-shell' が分割も実行もされない",
        ),
        expect.say("stdout %r: the command went through a shell", "標準出力 %r: コマンドがシェルを通して実行されました")
        % result.stdout,
        result,
    )
    expect.that(
        result.rc != 0,
        "S1.1",
        expect.say("a non-zero exit (no such program)", "0 以外の終了コード(そのようなプログラムはない)"),
        expect.say("exit code 0", "終了コード 0"),
        result,
    )


@clause("S1.1")
def test_s1_1_redirection_is_not_interpreted(runner):
    target = runner.lab.work / "redirected"
    result = runner.run("run", "--", "echo", "hi", ">", str(target))
    expect.exit_code(result, 0, "S1.1")
    expect.that(
        not labfiles.present(target.parent, target.name),
        "S1.1",
        expect.say("'>' passed to echo as a word", "'>' が 1 語として echo に渡る"),
        expect.say("a shell redirected the output into %s", "シェルが出力を %s にリダイレクトしました") % target,
        result,
    )
    scenarios.stdout_is(runner, result, b"hi > %s\n" % str(target).encode(), "S1.1")


@clause("S1.2")
@pytest.mark.parametrize(
    "printed",
    [
        b"hello\n",
        b"line 1\nline 2\nline 3\n",
        b"  indented\ttab\n",
        b"",
    ],
    ids=["one-line", "three-lines", "whitespace", "nothing"],
)
def test_s1_2_stdout_passes_unchanged(runner, printed):
    result = runner.run("run", "--", "printf", "%s", printed.decode())
    expect.exit_code(result, 0, "S1.2")
    expect.stdout_is(result, printed, "S1.2")


@clause("S1.2")
def test_s1_2_many_lines_in_order(runner):
    result = runner.run("run", "--", "seq", "1", "5000")
    expect.exit_code(result, 0, "S1.2")
    expect.stdout_is(result, "".join("%d\n" % n for n in range(1, 5001)).encode(), "S1.2")


@clause("S1.2")
def test_s1_2_stderr_stays_off_stdout(runner):
    result = runner.run("run", "--", *sh("echo to-stdout; echo to-stderr >&2"))
    expect.exit_code(result, 0, "S1.2")
    expect.stdout_is(result, b"to-stdout\n", "S1.2")


@clause("S1.2")
def test_s1_2_output_of_a_failing_command_still_passes(runner):
    result = runner.run("run", "--", *sh("echo partial; exit 5"))
    expect.exit_code(result, 5, "S1.3")
    expect.stdout_is(result, b"partial\n", "S1.2")


@clause("S1.2")
def test_s1_2_the_runner_adds_nothing_to_stdout(runner):
    result = runner.observe("run", "--", "true")
    expect.exit_code(result, 0, "S1.2")
    expect.stdout_is(result, b"", "S1.2")


@clause("S1.3")
@pytest.mark.parametrize("code", [0, 1, 2, 3, 7, 42, 100, 123, 125, 200, 255])
def test_s1_3_exit_code_passes_through(runner, code):
    result = runner.observe("run", "--", *exits(code))
    expect.exit_code(result, code, "S1.3")


@clause("S1.3")
def test_s1_3_true_and_false(runner):
    expect.exit_code(runner.run("run", "--", "true"), 0, "S1.3")
    expect.exit_code(runner.run("run", "--", "false"), 1, "S1.3")


@clause("S1.3")
def test_s1_3_flaky_first_call_fails_with_1(runner):
    result = runner.observe("run", "--", FLAKY)
    expect.exit_code(result, 1, "S1.3")


@clause("S1.3")
def test_s1_3_without_retries_the_command_runs_once(runner):
    result = runner.observe("run", "--", FLAKY)
    expect.exit_code(result, 1, "S1.3")
    expect.count_is(result, expect.say("flaky.sh calls", "flaky.sh の呼び出し回数"), flaky_calls(result), 1, "S1.3")

"""The zoo through the suite: every wrong runner must fail the checks of the clause it breaks.

Each mutant is graded as a learner's file is, on the whole core profile, by the self-test a lab
author runs (`pyops-conformance selftest`): its own clause's checks must catch the mistake, and it
must lose points for that mistake only (its clause, and the clauses that demand the same line of
code), never where another check merely ran into it. The hint tests grade only the clause whose
hint they read.
"""

import json
import re
import subprocess
import sys

import pytest

from conformance.selftest.zoo import BASES, CHARGED_ALSO, MUTANTS, build
from tests.grading import REPO, grade
from tests.test_class_report import chromium, headless

pytestmark = pytest.mark.zoo
WORKERS = 3


def grade_clauses(tmp_path, runner, clauses, *more):
    options = list(more)
    for clause in clauses:
        options += ["--clause", clause]
    # X clauses exist only in the extended profile; core clauses are in both.
    if any(clause.startswith("X") for clause in clauses):
        options += ["--profile", "extended"]
    return grade(tmp_path, runner, *options, workers=WORKERS)


def clauses_broken_on(base):
    return sorted({mutant.breaks for mutant in MUTANTS if mutant.base == base})


def clauses_left_to_prove(base):
    """The clauses its mutants break that test_reference.py, in the same env, does not already prove
    the base passes: it grades the reference on both profiles and every other style on the core."""
    if base == "reference":
        return []
    return [clause for clause in clauses_broken_on(base) if clause.startswith("X")]


# First in the file because these take longest, so parallel workers start them early.
@pytest.mark.parametrize("base", [base for base in sorted(BASES) if clauses_left_to_prove(base)])
def test_base_passes_the_clauses_its_mutants_break(tmp_path, base):
    # A mutant that fails a clause proves something only if its unmodified base passes it.
    clauses = clauses_left_to_prove(base)
    graded = grade_clauses(tmp_path, BASES[base], clauses)
    assert graded.rc == 0, "base %s (%s) must pass %s\n%s" % (
        base,
        BASES[base].relative_to(REPO),
        ", ".join(clauses),
        graded.explain(),
    )


def test_every_clause_a_mutant_breaks_is_proved_passed_by_its_base():
    # What test_reference.py grades (the reference on both profiles, every style on the core) and
    # what test_base_passes_the_clauses_its_mutants_break grades must cover every base's clauses.
    from tests.grading import GOOD

    styles = {path.resolve() for path in GOOD}
    for base, path in BASES.items():
        covered = set(clauses_left_to_prove(base))
        if base == "reference" or path.resolve() in styles:
            covered |= {clause for clause in clauses_broken_on(base) if base == "reference" or clause.startswith("S")}
        assert covered == set(clauses_broken_on(base)), (base, sorted(set(clauses_broken_on(base)) - covered))


# The self-test a lab author runs, run here as they would: every wrong runner of the zoo on the
# whole core profile (its X clause too), and a seeded sample of generated mutants. Graded in
# Japanese: every mistake of the zoo shows its failure in the learner's language too (the English
# words are the source of both). conformance/selftest/expectations.py says what each must get; the
# sample's survivors must each be listed in equivalent.toml with a reason. Its correct runners are
# left to test_reference.py, which grades each of them once in every other env and, in this one,
# has a selftest of its own grade each under five seeds (beside this one, not in it: together
# they would be one test as long as both); the selftest's own judgement of a correct runner's
# rounds is tests/test_selftest.py's.
SELFTEST_SAMPLE, SELFTEST_SEED = 20, 29
# Gradings at once: a wrong runner's grading waits (on timeouts it sleeps out, on a hang) more
# than it computes, so three left the two CPUs a quarter idle through most of py311's time
# (1161 s); six alone keep them busy (833 s). Five, beside the env's other tests.
SELFTEST_JOBS = 5


@pytest.mark.slow(1500)
def test_the_selftest_holds_every_expectation_for_the_zoo_and_a_sample(tmp_path):
    pytest.importorskip("cosmic_ray", reason="cosmic-ray, which makes the mutants, supports Python 3.9 and later")
    kept, matrix, page = tmp_path / "kept", tmp_path / "selftest.json", tmp_path / "selftest.html"
    kept.mkdir()
    command = [
        sys.executable,
        "-m",
        "conformance",
        "selftest",
        "--only",
        "zoo",
        "--lang",
        "ja",
        "-j",
        str(SELFTEST_JOBS),
    ]
    command += ["--mutants", str(SELFTEST_SAMPLE), "--seed", str(SELFTEST_SEED)]
    command += ["--json", str(matrix), "--html", str(page), "--keep", str(kept)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, cwd=str(tmp_path))
    summary = "\n".join(line for line in done.stdout.splitlines() if not line.startswith("["))
    assert done.returncode == 0, "selftest exit %d:\n%s\n%s" % (done.returncode, summary, done.stderr[-3000:])
    data = json.loads(matrix.read_text(encoding="utf-8"))
    graded = {(runner["kind"], runner["name"]) for runner in data["runners"]}
    assert {name for kind, name in graded if kind == "zoo"} == {mutant.name for mutant in MUTANTS}
    assert not {name for kind, name in graded if kind == "correct"}
    assert data["mutants"]["graded"] == SELFTEST_SAMPLE and data["mutants"]["killed"] > 0, data["mutants"]
    # Every failure of a wrong runner, in Japanese.
    english = []
    for report_file in sorted(kept.glob("zoo-*.json")):
        failed = [
            test for test in json.loads(report_file.read_text(encoding="utf-8"))["tests"] if test["outcome"] == "failed"
        ]
        english += ["%s: %s" % (report_file.stem, line) for test in failed for line in english_lines(test["message"])]
    assert not english, "English in a Japanese report:\n%s" % "\n".join(english[:20])
    # And each in English too, as an English grading words it (a class regraded in English uses it).
    worded = []
    for report_file in sorted(kept.glob("zoo-*.json")):
        problems = wording_problems(json.loads(report_file.read_text(encoding="utf-8")), "ja")
        worded += ["%s: %s" % (report_file.stem, problem) for problem in problems]
    assert not worded, "\n".join(worded[:20])
    # The page opens in a browser, says it passed, and draws a row per runner.
    dom = headless(chromium(), tmp_path / "profile", "--dump-dom", page.as_uri()).stdout.decode()
    assert 'data-passed="true"' in dom and dom.count("<tr") >= len(graded), dom[:2000]


def test_the_zoos_list_of_charges_names_only_its_mutants():
    names = {mutant.name for mutant in MUTANTS}
    assert set(CHARGED_ALSO) <= names, sorted(set(CHARGED_ALSO) - names)


# Runners that do nothing, each in a way a learner's first file might: none may earn a point.
DOES_NOTHING = {
    "empty": "",
    "only-pass": "pass\n",
    "always-exits-0": "import sys\nsys.exit(0)\n",
    "always-exits-1": "import sys\nsys.exit(1)\n",
    # The words the lab's outputs use, with the exit codes it names, and no command run at all.
    "says-the-words": (
        "import sys\n"
        "argv = sys.argv[1:]\n"
        "if argv[:1] == ['apply']:\n"
        "    print('applied %s' % argv[-1])\n"
        "    sys.exit(0)\n"
        "if '--timeout' in argv:\n"
        "    print('timeout', file=sys.stderr)\n"
        "    sys.exit(124)\n"
        "sys.exit(0)\n"
    ),
    "does-not-compile": "def main(:\n    pass\n",
}


@pytest.mark.parametrize("name", sorted(DOES_NOTHING))
def test_a_runner_that_does_nothing_scores_0(tmp_path, name):
    runner = tmp_path / "runner.py"
    runner.write_text(DOES_NOTHING[name])
    graded = grade(tmp_path, runner, workers=WORKERS)
    assert graded.rc == 1 and graded.report["score"] == {"points": 0, "max_points": 28}, graded.explain()
    verdicts = {clause: entry["verdict"] for clause, entry in graded.report["clauses"].items()}
    # Charged once, where the learner must start: the basic calls' clauses; the rest wait on them.
    assert {clause for clause, verdict in verdicts.items() if verdict == "failed"} <= {"S1.1", "S1.3", "S4.2"}
    assert set(verdicts.values()) == {"failed", "blocked"}, verdicts
    for clause, entry in graded.report["clauses"].items():  # a clause's own entry names the call, not itself
        assert "blocked by %s" % clause not in entry["message"], entry["message"]
    if name == "does-not-compile":
        assert "does not compile: line 1: SyntaxError" in graded.report["clauses"]["S1.1"]["message"]
    # The lab's paths in a message read <lab>: neither the grader's folder nor the name the runner saw it by.
    messages = [test["message"] for test in graded.report["tests"] if test["message"]]
    assert any("<lab>/work/" in message for message in messages), messages[:3]
    assert not any(re.search(r"pyops-lab-|/tmp/tmp\.[0-9A-Za-z]{10}", message) for message in messages)


def test_a_compile_error_a_runner_prints_itself_stays_one_short_line(tmp_path):
    # The runner's stderr is the runner's: a fake "SyntaxError" line of any length, and a line
    # number of as many digits, must not become a grades.csv message of that length.
    runner = tmp_path / "runner.py"
    runner.write_text(
        "import sys\n"
        "sys.stderr.write('  File \"runner.py\", line %s\\nSyntaxError: %s\\n' % ('9' * 5000, 'x' * 50000))\n"
    )
    graded = grade(tmp_path, runner, "--clause", "S1", workers=WORKERS)
    assert graded.rc == 1
    said = [line for line in graded.report["clauses"]["S1.1"]["message"].splitlines() if "does not compile" in line]
    assert said and max(len(line) for line in said) < 600, said  # some 55,000 characters uncapped


# Words of English prose that no Japanese text of the suite holds (runner, apply.sh, ts... do).
_ENGLISH_WORDS = (
    "the it is was were not no after before and with started exited still every only exit code seconds line lines "
    "process processes called running left took bytes characters"
)
_ENGLISH = re.compile(r"\b(%s)\b" % "|".join(_ENGLISH_WORDS.split()), re.I)
# Values and code, which stay as they are in every language: quoted, paths, calls, dotted names.
_QUOTED = re.compile(r"`[^`]*`|'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\{[^}]*\}|\S*/\S*|\w+(\.\w+)*\([^)]*\)|\w+(\.\w+)+")


def english_lines(message):
    """The expected, actual, hint and note lines of a failure that read as English prose."""
    labels = ("  期待:", "  実際:", "  ヒント:", "  注記:")
    return [line for line in message.splitlines() if line.startswith(labels) and _ENGLISH.search(_QUOTED.sub("", line))]


_JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def japanese_lines(message):
    """The expected, actual, hint and note lines of a failure that hold Japanese outside quotes."""
    labels = ("  expected:", "  actual:", "  hint:", "  note:")
    return [
        line for line in message.splitlines() if line.startswith(labels) and _JAPANESE.search(_QUOTED.sub("", line))
    ]


def wording_problems(report, lang):
    """What is wrong with how a report's failures are worded in the language it was not graded in
    (each is, for a class regraded in another language: classroom/store.py): a failure not worded
    in every language, a wording of `lang` that is not the message shown, a line of one language
    left in the other's."""
    problems = []
    for test in report["tests"]:
        if test["outcome"] != "failed":
            continue
        worded = test.get("messages") or {}
        if set(worded) != {"en", "ja"}:
            problems.append("%s: worded in %s only" % (test["id"], sorted(worded) or "no language"))
            continue
        if worded[lang] != test["message"]:
            problems.append("%s: its %s wording is not the message shown" % (test["id"], lang))
        problems += ["%s, in Japanese: %s" % (test["id"], line) for line in english_lines(worded["ja"])]
        problems += ["%s, in English: %s" % (test["id"], line) for line in japanese_lines(worded["en"])]
    return problems


def test_a_wording_left_in_the_other_language_is_found():
    en = "[S1.3] ...\n  expected: exit code 3\n  actual:   終了コード 1\n  hint:     `実行` it"
    ja = "[S1.3] ...\n  期待:     終了コード 3\n  実際:     it exited 1"
    report = {"tests": [{"id": "t", "outcome": "failed", "message": en, "messages": {"en": en, "ja": ja}}]}
    assert wording_problems(report, "en") == [
        "t, in Japanese:   実際:     it exited 1",
        "t, in English:   actual:   終了コード 1",
    ]
    report["tests"][0]["message"] = "other"
    assert "t: its en wording is not the message shown" in wording_problems(report, "en")
    del report["tests"][0]["messages"]
    assert wording_problems(report, "en") == ["t: worded in no language only"]


def test_english_prose_is_found_in_a_japanese_report():
    assert english_lines("[S1.3] ...\n  期待:     exit code 3\n  実際:     it exited 0 after 1s") == [
        "  期待:     exit code 3",
        "  実際:     it exited 0 after 1s",
    ]
    assert not english_lines(
        "  期待:     終了コード 3\n  実際:     ts 'not the time' (文字列)\n  コマンド: the runner\n"
        "  期待:     state/with space.done が作られる\n  ヒント:   sys.exit(main()) で終了してください"
    )


# The evidence decides the hint: a survivor that ignores SIGTERM got the signal (or would have), one
# that does not never got any; a run that took the held lock after a while waited for it. Learners
# whose code already does what a fixed hint says must not be told to do it.
HINT_BY_EVIDENCE = [
    ("kills-only-the-child", "S2.4", "test_s2_4_hang_sh_grandchild_sleep_is_killed", "got no signal at all"),
    ("sigterm-to-the-child-only", "S6.4", "nothing_survives_sigterm[hang.sh-grandchild]", "got no signal at all"),
    ("no-cleanup-after-sigterm", "S6.4", "a_grandchild_that_ignores_term_is_killed_too", "ignores SIGTERM:"),
    # It SIGTERMs the group at the timeout and then waits for a command that ignores TERM: it hangs.
    ("timeout-sends-sigterm", "S2.1", "killed_once_the_timeout_passes[ignores-TERM]", "was still waiting while"),
    # A command never signalled at all: the timeout was never applied, SIGTERM never passed on.
    ("timeout-never-used", "S2.1", "killed_once_the_timeout_passes[sleep]", "never stopped its command"),
    # It kills, but only after a grace period that a command ignoring TERM runs through.
    ("term-with-a-grace-period", "S2.1", "killed_once_the_timeout_passes[ignores-TERM]", "kill it with SIGKILL"),
    # A runs.jsonl line made by % formatting: the fix is json.dumps, not "append once per attempt".
    ("record-built-by-hand", "S7.1", "test_s7_1", "build it with json.dumps(record)"),
    ("sigterm-not-forwarded", "S6.1", "test_s6_1_sigterm_reaches_the_command", "never passed SIGTERM on"),
    # It hangs as a runner that waits on a pipe would, but its evidence is a command begun after the
    # signal: it is told that, not to look for communicate().
    ("retries-after-sigterm", "S6.3", "retries_left_do_not_run", "ran the command again after SIGTERM"),
    # The lock: waited for it, went ahead past a shared holder, went ahead past any, refused with 1
    # (held by another process, or by the runner's own first run while it applies).
    ("blocking-lock", "S5.2", "held_lock_exits_3[exclusive-holder]", "waited for the lock"),
    ("shared-lock", "S5.2", "held_lock_exits_3[shared-holder]", "held a shared lock"),
    ("lock-next-to-runner", "S5.2", "held_lock_exits_3[exclusive-holder]", "went ahead while"),
    ("locked-exits-1", "S5.2", "held_lock_exits_3[exclusive-holder]", "did refuse, but with exit code 1"),
    ("shared-lock", "S5.2", "second_runner_while_the_first_applies[other-name]", "held a shared lock"),
    ("locked-exits-1", "S5.2", "second_runner_while_the_first_applies[other-name]", "did refuse, but with exit code 1"),
    # The backoff schedule: its shape says which formula made it.
    ("backoff-constant", "S3.2", "waits_double_each_time_measured_by_the_command", "the same time before every retry"),
    ("backoff-linear", "S3.2", "waits_double_each_time_measured_by_the_command", "grew by the backoff each time"),
    ("backoff-two-to-the-attempt", "S3.2", "the_first_wait_is_the_backoff_itself", "waits the backoff itself"),
    ("waits-after-the-last-attempt", "S3.2", "no_wait_after_the_last_attempt", "also waited after its last attempt"),
    # runs.jsonl: the value that is wrong says which mistake it was.
    ("ts-epoch-float", "S7.2", "ts_is_iso_8601_and_now", "ts is a number of seconds"),
    ("cmd-as-a-string", "S7.2", "cmd_is_the_argv_after_dashes[true]", "cmd is one string"),
    ("float-duration-ms", "S7.2", "duration_ms_is_an_int[true]", "duration_ms is a float"),
    ("duration-key-renamed", "S7.2", "duration_ms_is_an_int[true]", "the key is `duration_ms`, not `duration`"),
    ("attempts-counted-from-0", "S7.2", "attempt_counts_from_1", "attempt counts from 1"),
    ("rc-as-a-string", "S7.2", "rc_is_the_int_exit_code[0]", "rc is a string"),
]
HINT_PHRASES = {says for _, _, _, says in HINT_BY_EVIDENCE}


@pytest.mark.parametrize("name,clause,check,says", HINT_BY_EVIDENCE, ids=[case[0] for case in HINT_BY_EVIDENCE])
def test_a_hint_follows_from_the_evidence(tmp_path, name, clause, check, says):
    mutant = next(mutant for mutant in MUTANTS if mutant.name == name)
    graded = grade_clauses(tmp_path, build(mutant, tmp_path), [clause])
    failure = next((test for test in graded.failed() if check in test["id"]), None)
    assert failure is not None, "%s should fail %s\n%s" % (name, check, graded.explain())
    hint = next(line for line in failure["message"].splitlines() if line.startswith("  hint:"))
    others = HINT_PHRASES - {says}
    assert says in hint and not [other for other in others if other in hint], hint
    # Every failure of the grading, worded in Japanese too as a Japanese grading would word it.
    assert not wording_problems(graded.report, "en"), "\n".join(wording_problems(graded.report, "en")[:20])

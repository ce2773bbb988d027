"""Every word a failure shows follows the learner's language, read from the suite's source.

A check's expected and actual values, the counts it names and the hints it picks are written
with expect.say(en, ja): a bare English literal in those places would show up in a Japanese
report as the one English line. And both texts of a say() must take the same placeholders in
the same order, or formatting one of them fails at the moment a learner's runner fails.
"""

import ast
import pickle
import re
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from conformance.judging import expect

SUITE = Path(expect.__file__).resolve().parents[1]
# Every module of the suite that judges: the checks, and the harness's own failures and notes.
WORDED_MODULES = sorted((SUITE / "judging").glob("*.py")) + sorted((SUITE / "checks").glob("test_*.py"))

# Which arguments of a judgement are words a learner reads: (positions, keywords).
WORDED_ARGUMENTS = {
    "that": ((2, 3), ("expected", "actual")),
    "fail": ((1, 2, 4), ("expected", "actual", "hint")),
    "count_is": ((1,), ("what",)),
    "took_between": ((4,), ("what",)),
}
PLACEHOLDER = re.compile(r"%(?:\(\w+\))?[-#0 +]*(?:\d+|\*)?(?:\.\d+)?[sdifgrxXeEc%]")


def _calls(tree: ast.AST, name: str) -> Iterator[ast.Call]:
    """Calls of expect.NAME (or of NAME itself, as expect.py makes them); pytest.fail is not one."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = node.func
            if (
                isinstance(called, ast.Attribute)
                and called.attr == name
                and isinstance(called.value, ast.Name)
                and called.value.id == "expect"
            ) or (isinstance(called, ast.Name) and called.id == name):
                yield node


def _bare_text(node: ast.AST) -> bool:
    """Is `node` English written in place: a string literal, an f-string, or `"..." % values`?"""
    if isinstance(node, ast.Constant):
        # Words, not a layout of values: "%s: %d" holds no text of its own to translate.
        return isinstance(node.value, str) and any(c.isalpha() for c in PLACEHOLDER.sub("", node.value))
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        return _bare_text(node.left) or (isinstance(node.op, ast.Add) and _bare_text(node.right))
    return False


def bare_words(path: Path) -> List[Tuple[int, str]]:
    """(line, judgement) of every judgement in `path` given words that are not say()'s."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for name, (positions, keywords) in WORDED_ARGUMENTS.items():
        for call in _calls(tree, name):
            arguments = [call.args[i] for i in positions if i < len(call.args)]
            arguments += [k.value for k in call.keywords if k.arg in keywords]
            found += [(call.lineno, name) for argument in arguments if _bare_text(argument)]
    return found


def say_calls(path: Path) -> List[Tuple[int, str, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = []
    for call in _calls(tree, "say"):
        texts = [a.value if isinstance(a, ast.Constant) else None for a in call.args]
        calls.append((call.lineno, texts[0] if texts else None, texts[1] if len(texts) > 1 else None))
    return calls


@pytest.mark.parametrize("path", WORDED_MODULES, ids=lambda path: path.name)
def test_judgements_are_given_words_in_both_languages(path):
    bare = bare_words(path)
    assert not bare, "%s: words not in say(en, ja) at %s" % (
        path.name,
        ", ".join("line %d (%s)" % entry for entry in bare),
    )


@pytest.mark.parametrize("path", WORDED_MODULES, ids=lambda path: path.name)
def test_both_texts_of_a_say_take_the_same_placeholders(path):
    for line, en, ja in say_calls(path):
        assert isinstance(en, str) and isinstance(ja, str), "%s:%d: say() takes two string literals" % (
            path.name,
            line,
        )
        assert PLACEHOLDER.findall(en) == PLACEHOLDER.findall(ja), "%s:%d: %r and %r differ in placeholders" % (
            path.name,
            line,
            en,
            ja,
        )
        assert en != ja and any(ord(c) > 127 for c in ja), "%s:%d: %r is not Japanese" % (path.name, line, ja)


def test_the_checker_finds_bare_words(tmp_path):
    # The test above must be able to fail: a module with each kind of bare text.
    module = tmp_path / "test_sample.py"
    module.write_text(
        "from conformance.judging import expect\n"
        "expect.that(ok, 'S1.1', 'stdout empty', expect.say('a', 'あ'), result)\n"
        "expect.fail('S1.1', expect.say('a', 'あ'), 'got %s' % x, result)\n"
        "expect.fail('S1.1', expect.say('a', 'あ'), expect.say('b', 'い'), result, f'hint {x}')\n"
        "expect.count_is(result, 'attempts', 1, 2, 'S3.1')\n"
        "expect.took_between(result, 0, 1, 'S3.4', what='no wait')\n"
        "expect.that(ok, 'S1.1', expect.say('%d x', 'あ %d') % 1, expect.say('b', 'い'), result)\n"
    )
    assert [line for line, _name in bare_words(module)] == [2, 3, 4, 5, 6]


def test_say_follows_the_language():
    saved = expect.LANG
    try:
        expect.LANG = "ja"
        assert expect.say("%d line(s)", "%d 行") % 2 == "2 行"
        expect.LANG = "en"
        assert expect.say("%d line(s)", "%d 行") % 2 == "2 line(s)"
    finally:
        expect.LANG = saved


def test_the_modules_read_are_the_judging_ones_and_the_checks():
    names = {path.name for path in WORDED_MODULES}
    assert {"expect.py", "blocking.py", "driver.py", "scenarios.py", "test_s1_run.py", "test_x_extended.py"} <= names


def test_said_words_are_shown_in_the_language_being_written():
    saved = expect.LANG
    try:
        expect.LANG = "en"
        count = expect.say("%d line(s) of %s", "%d 行(%s)") % (2, expect.say("stdout", "標準出力"))
        joined = "seen: " + count + expect.say(".", "。")
        assert (count, joined) == ("2 line(s) of stdout", "seen: 2 line(s) of stdout.")
        expect.LANG = "ja"
        # Said in English, shown in Japanese wherever it becomes text.
        assert str(count) == "2 行(標準出力)" and "%s" % (count,) == "2 行(標準出力)"
        assert "{}".format(joined) == "seen: 2 行(標準出力)。"
        assert count.text("en") == "2 line(s) of stdout"
        # A Result's notes travel between a grading's processes pickled: with every language.
        assert pickle.loads(pickle.dumps(count)).texts == count.texts
    finally:
        expect.LANG = saved


def _failure(judge, *args):
    with pytest.raises(expect.ClauseFailure) as failure:
        judge(*args)
    return failure.value


def test_a_failure_is_worded_in_every_language_as_a_grading_in_each_would_word_it():
    from tests.test_hints import outcome

    saved = expect.LANG
    hung = outcome(None, 9.0, hung=True)
    cases = [
        (expect.exit_code, outcome(1, 0.5), 3, "S1.3"),
        (expect.finished, hung, "S2.1"),
        (expect.count_is, outcome(0, 0.5), expect.say("attempts", "試行回数"), 2, 3, "S3.1"),
        (expect.refused_by_lock, outcome(0, 4.2, ["feature"]), False, "S5.2"),
    ]
    try:
        for judge, *args in cases:
            worded = {}
            for lang in ("en", "ja"):
                expect.LANG = lang
                worded[lang] = str(_failure(judge, *args))
            for lang in ("en", "ja"):
                expect.LANG = lang
                assert _failure(judge, *args).worded() == worded, judge.__name__
            assert worded["en"] != worded["ja"] and "期待" in worded["ja"]
    finally:
        expect.LANG = saved


def test_a_failure_raised_outside_a_judgement_is_worded_from_its_parts():
    saved = expect.LANG
    try:
        expect.LANG = "en"
        failure = expect.ClauseFailure("S1.3", expect.say("exit code 3", "終了コード 3"), expect.say("1", "1 です"))
        assert failure.worded()["en"] == str(failure)
        assert "  期待:     終了コード 3" in failure.worded()["ja"] and "runner は CMD" in failure.worded()["ja"]
    finally:
        expect.LANG = saved


def _tables():
    """Every {"en": {...}, "ja": {...}} table of words in the suite's modules."""
    from conformance import watch
    from conformance.judging import verdicts
    from conformance.reporting import report, view

    for module in (expect, view, report, verdicts, watch):
        for name, value in vars(module).items():
            if isinstance(value, dict) and set(value) >= {"en", "ja"} and isinstance(value["en"], dict):
                yield "%s.%s" % (module.__name__, name), value


@pytest.mark.parametrize("name,table", list(_tables()), ids=lambda value: value if isinstance(value, str) else "")
def test_every_table_says_everything_in_both_languages_with_the_same_placeholders(name, table):
    # Japanese may hold more (records.py words some English itself), never less.
    english, japanese = table["en"], table["ja"]
    assert set(english) <= set(japanese), "%s: not in Japanese: %s" % (name, set(english) - set(japanese))
    for key, text in english.items():
        if isinstance(text, str):
            assert _placeholders(text) == _placeholders(japanese[key]), "%s[%r]" % (name, key)


def _placeholders(text: str) -> List[str]:
    """The placeholders of `text`: in order when positional, as a set (sorted) when named."""
    found = PLACEHOLDER.findall(text)
    return sorted(found) if any("(" in p for p in found) else found

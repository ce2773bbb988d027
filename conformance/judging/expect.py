"""Judgements that fail with the clause, what was expected, what happened, and how to fix it.

Every check takes the Result it judges, so a failure can always show the runner's exit code, the
tail of its output, the lab's files and any process it left behind.
"""

import functools
import json
import os
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, TypeVar

from conformance.harness import labfiles
from conformance.harness.result import ProcessInfo, Result, tail
from conformance.lab import timing
from conformance.lab.clauses import CLAUSES, LANGUAGES, display_width
from conformance.lab.records import LINE_PROBLEMS, MINIMUMS, FieldProblem, Record, json_text, json_type

LANG = "en"  # set by the plugin from --lab-lang
T = TypeVar("T")

_LABELS = {
    "en": {"expected": "expected", "actual": "actual", "hint": "hint"},
    "ja": {"expected": "期待", "actual": "実際", "hint": "ヒント"},
}


def _in(table: Mapping[str, T], lang: str) -> T:
    """The entry of `table` in language `lang`, English when it has none."""
    return table.get(lang, table["en"])


class Said(str):
    """Words in every language of the lab, shown in the one being written (LANG) wherever they
    become text: `%s`, format(), str(). Its own characters are those of the language it was said
    in, so that what looks at them (len, in, split) sees what a grading in that language saw.

    A failure is worded in every language at the moment it is found (see judgement()), so that
    a class regraded in another language needs no runner run again (classroom/store.py). Words
    made of Said words (`%`, `+`) stay Said; a plain str made of them (join) is one language's.
    """

    texts: Dict[str, str]

    def __new__(cls, texts: Mapping[str, str]) -> "Said":
        said = super().__new__(cls, texts.get(LANG, texts["en"]))
        said.texts = dict(texts)
        return said

    def text(self, lang: str) -> str:
        return self.texts.get(lang, self.texts["en"])

    # Pickled with every language: a Result's notes travel between a grading's processes.
    def __getnewargs__(self) -> "tuple[Dict[str, str]]":  # type: ignore[override]
        return (self.texts,)

    def __str__(self) -> str:
        return self.text(LANG)

    def __format__(self, spec: str) -> str:
        return format(self.text(LANG), spec)

    def __mod__(self, values: Any) -> "Said":
        return Said({lang: text % in_language(values, lang) for lang, text in self.texts.items()})

    def __add__(self, other: object) -> "Said":
        if not isinstance(other, str):
            return NotImplemented
        return Said({lang: text + in_language(other, lang) for lang, text in self.texts.items()})

    def __radd__(self, other: object) -> "Said":
        if not isinstance(other, str):
            return NotImplemented
        return Said({lang: in_language(other, lang) + text for lang, text in self.texts.items()})


def in_language(value: Any, lang: str) -> Any:
    """`value` as language `lang` words it: a Said's text, each of a tuple's or dict's items, else itself."""
    if isinstance(value, Said):
        return value.text(lang)
    if isinstance(value, tuple):
        return tuple(in_language(item, lang) for item in value)
    if isinstance(value, dict):
        return {key: in_language(item, lang) for key, item in value.items()}
    return value


def say(en: str, ja: str) -> Said:
    """A check's own words (what it expected, what it saw) in the learner's language.

    Format after choosing: `say("%d line(s)", "%d 行") % count`. Both texts take the same
    placeholders in the same order (the project's tests hold every call to that).
    """
    return Said({"en": en, "ja": ja})


class ClauseFailure(AssertionError):
    """A runner broke a clause. `clause` is its ID; str() is the whole teaching message, and
    `messages` the same message in every language of the lab (worded(), judgement())."""

    def __init__(
        self, clause: str, expected: str, actual: str, result: Optional[Result] = None, hint: Optional[str] = None
    ):
        self.clause = clause
        self._parts = (clause, expected, actual, result, hint)
        self.messages: Optional[Dict[str, str]] = None  # set by the judgement that raised it
        super().__init__(render(clause, expected, actual, result, hint))

    def worded(self) -> Dict[str, str]:
        """The message in every language: as the judgement that found the failure worded it, or
        rendered again from its parts, each of which says itself in every language (Said)."""
        if self.messages is None:
            self.messages = every_language(lambda: render(*self._parts))
        return self.messages


def _in_each_language(make: Callable[[], T]) -> Dict[str, T]:
    """What `make()` gives in each language of the lab, LANG set to each in turn."""
    global LANG
    kept, made = LANG, {}
    try:
        for lang in LANGUAGES:
            LANG = lang
            made[lang] = make()
    finally:
        LANG = kept
    return made


def every_language(word: Callable[[], str]) -> Dict[str, str]:
    """What `word()` says in each language of the lab, as text."""
    return {lang: str(text) for lang, text in _in_each_language(word).items()}


def wording(make: Callable[..., Optional[str]]) -> Callable[..., Optional[Said]]:
    """Words a check makes from its evidence and hands a judgement (a hint, an actual value):
    made in every language of the lab, so that they are a Said like say()'s."""

    @functools.wraps(make)
    def worded(*args: Any, **kwargs: Any) -> Optional[Said]:
        texts = _in_each_language(lambda: make(*args, **kwargs))
        if any(text is None for text in texts.values()):  # the evidence calls for no words
            return None
        return Said({lang: str(text) for lang, text in texts.items()})

    return worded


_judging = 0  # how deep in judgement()-wrapped calls this process is


def judgement(judge: Callable[..., T]) -> Callable[..., T]:
    """A judgement that may fail a clause: when it does, it is made again in every other language
    of the lab with the same evidence, and the failure keeps every wording (ClauseFailure.messages).

    A judgement reads only its arguments (the Result and what the check measured), so made again
    it fails the same way; the words it makes itself (`_in(WORDS, LANG)`) are then the other
    language's, as if the grading had been in it. Only the outermost judgement does this: the
    ones it calls are made again with it.
    """

    @functools.wraps(judge)
    def judged(*args: Any, **kwargs: Any) -> T:
        __tracebackhide__ = True
        global _judging
        _judging += 1
        try:
            return judge(*args, **kwargs)
        except ClauseFailure as failure:
            if _judging == 1 and failure.messages is None:
                failure.messages = _judged_again(judge, args, kwargs, failure)
            raise
        finally:
            _judging -= 1

    return judged


def _judged_again(judge: Callable[..., Any], args: Sequence, kwargs: Mapping, failure: ClauseFailure) -> Dict[str, str]:
    def again() -> str:
        if failure_lang == LANG:
            return str(failure)
        try:
            judge(*args, **kwargs)
        except ClauseFailure as same:
            return str(same)
        except Exception:  # noqa: BLE001 - the failure found stands, whatever its wording does
            pass
        return str(failure)  # not failed again (the same evidence cannot pass): this wording at least

    failure_lang = LANG
    return every_language(again)


def render(clause_id: str, expected: str, actual: str, result: Optional[Result], hint: Optional[str] = None) -> str:
    """The teaching message; `hint`, chosen from the evidence, replaces the clause's general one."""
    clause = CLAUSES[clause_id]
    labels = _in(_LABELS, LANG)
    lines = [
        "[%s] %s" % (clause_id, clause.text(LANG)),
        labelled(labels["expected"], expected),
        labelled(labels["actual"], actual),
    ]
    if result is not None:
        lines.extend(evidence(result))
    lines.append(hint_line(clause_id, LANG, hint))
    return "\n".join(lines)


def label(key: str, lang: str) -> str:
    """The label of a message's line ("expected", "actual", "hint") in `lang`."""
    return _in(_LABELS, lang)[key]


def hint_line(clause_id: str, lang: str, hint: Optional[str] = None) -> str:
    """The line of a failure message that gives the hint (the clause's own unless `hint`)."""
    labels = _in(_LABELS, lang)
    return labelled(labels["hint"], hint or CLAUSES[clause_id].hint(lang))


def labelled(label: str, text: str = "") -> str:
    """`  label:   text`, the texts of a message aligned however wide the label's characters are."""
    width = display_width(label + ":")
    return ("  %s%s %s" % (label + ":", " " * max(0, 9 - width), text)).rstrip()


def evidence_word(key: str, lang: str) -> str:
    """A word of the evidence part of a message, in `lang` (e.g. "none": what says a stream was empty)."""
    return _in(_EVIDENCE_WORDS, lang)[key]


def evidence(result: Result) -> List[str]:
    """What the runner did, for a failure message."""
    words = _in(_EVIDENCE_WORDS, LANG)

    ending = (
        words["hung"] % result.hung_after_s
        if result.hung_after_s is not None
        else words["ended_with"] % (result.rc, result.duration_s)
    )
    lines = [
        labelled(words["command"], show_command(["runner.py"] + list(result.args))),
        labelled(words["ended"], ending),
    ]
    for label, data in (("stdout", result.stdout), ("stderr", result.stderr)):
        lines.append(labelled(words[label], "" if data else words["none"]))
        if data:
            lines.extend("    | " + line for line in tail(data).splitlines())
    runs = result.runs_seen()
    if runs:
        lines.append(labelled(words["runs.jsonl"]))
        # A record is a few hundred characters; a longer line is shown cut (its length says enough).
        more = _in(_JUDGEMENT_WORDS, LANG)["more_chars"]
        lines.extend("    | " + line for line in tail(runs, 6, width=300, more=more).splitlines())
    applied = result.applied_seen()
    if applied:
        lines.append(labelled(words["applied.log"], ", ".join(applied[-6:])))
    lines.append(labelled(words["markers"], ", ".join(result.markers_seen()) or words["none"]))
    for refused in result.refused_files():
        lines.append(labelled(words["refused"], refused_words(refused.name, refused.refused or "link", refused.limit)))
    if result.survivors:
        lines.append(labelled(words["left running"]))
        for process in result.survivors:
            shown = "pid %d: %s" % (process.pid, show_process(process.argv))
            lines.append("    - %s%s" % (shown, words["ignores_term"] if process.ignores_term else ""))
    lines.extend(labelled(words["note"], note) for note in result.notes)
    return lines


_EVIDENCE_WORDS = {
    "en": {
        "command": "command",
        "ended": "ended",
        "stdout": "stdout",
        "stderr": "stderr",
        "runs.jsonl": "runs.jsonl",
        "applied.log": "applied.log",
        "markers": "markers",
        "left running": "left running",
        "note": "note",
        "refused": "not read",
        "none": "(none)",
        "hung": "did not finish; killed after %.1fs",
        "ended_with": "exit code %s after %.2fs",
        "ignores_term": " (ignores SIGTERM)",
    },
    "ja": {
        "command": "コマンド",
        "ended": "終了",
        "stdout": "標準出力",
        "stderr": "標準エラー",
        "runs.jsonl": "runs.jsonl",
        "applied.log": "applied.log",
        "markers": "マーカー",
        "left running": "残ったプロセス",
        "note": "注記",
        "refused": "読まず",
        "none": "(なし)",
        "hung": "終わらず、%.1f 秒後に採点側が強制終了",
        "ended_with": "終了コード %s(%.2f 秒後)",
        "ignores_term": "(SIGTERM を無視)",
    },
}


# A lab file that is not a regular file (labfiles.py): the clause that judges it fails, unread.
_REFUSED_WORDS: Mapping[str, Mapping[str, str]] = {
    "en": {
        "expected": "%s a regular file, which the grader reads without following links",
        "actual": "%s is %s, not read",
        "hint": "Write %s as a plain file (open(path, 'a') or Path.write_text); leave no link, folder or FIFO in "
        "its place: a grader never follows them.",
    },
    "ja": {
        "expected": "%s は通常のファイル(採点側はリンクをたどらずに読みます)",
        "actual": "%s は%sで、読みませんでした",
        "hint": "%s は通常のファイルとして書いてください(open(path, 'a') や Path.write_text)。その場所にリンク・"
        "フォルダー・FIFO を置かないでください。採点側はたどりません。",
    },
}
_REFUSED_KINDS: Mapping[str, Mapping[str, str]] = {
    "en": labfiles.KINDS,
    "ja": {
        "link": "シンボリックリンク",
        "folder": "フォルダー",
        "fifo": "FIFO(名前付きパイプ)",
        "device": "デバイス",
        "socket": "ソケット",
        "hard_link": "別の名前も持つファイル(ハードリンク)",
        "too_large": "%d バイトより大きいファイル",
        "not_a_folder": "フォルダーではないもの",
    },
}


def refused_words(name: str, kind: str, limit: int) -> str:
    """What is in place of the lab file `name` instead of a regular file, in the learner's language."""
    words = _in(_REFUSED_WORDS, LANG)
    return words["actual"] % (name, labfiles.what(kind, limit, _in(_REFUSED_KINDS, LANG)))


def refusal(error: labfiles.LabFileRefused) -> ClauseFailure:
    """The failure of the clause that judges a lab file a runner left as something else (labfiles.LabFileRefused)."""
    failure = _refusal(error)
    failure.messages = every_language(lambda: str(_refusal(error)))
    return failure


def _refusal(error: labfiles.LabFileRefused) -> ClauseFailure:
    words = _in(_REFUSED_WORDS, LANG)
    result = error.result if isinstance(error.result, Result) else None
    actual = refused_words(error.name, error.kind, error.limit)
    return ClauseFailure(error.clause, words["expected"] % error.name, actual, result, words["hint"] % error.name)


def show_command(argv: Sequence[str]) -> str:
    """`argv` as the learner would type it, when quoting keeps that readable (one line); else as a list."""
    if all(_PLAIN.fullmatch(word) or ("'" not in word and "\n" not in word) for word in argv):
        return " ".join(_quote(word) for word in argv)
    return json.dumps(list(argv), ensure_ascii=False)


def show_process(argv: Sequence[str]) -> str:
    """A process left running, in one line of at most _PROCESS_CHARS: its argv is the runner's to
    make, a `python3 -c` source of many lines or a word of any length."""
    shown = show_command(argv) if argv else "(no argv)"
    return shown if len(shown) <= _PROCESS_CHARS else shown[:_PROCESS_CHARS] + "..."


_PROCESS_CHARS = 160


_PLAIN = re.compile(r"[\w@%+=:,./-]+")


def _quote(word: str) -> str:
    return word if _PLAIN.fullmatch(word) else "'%s'" % word.replace("'", "'\\''")


@judgement
def fail(clause: str, expected: str, actual: str, result: Optional[Result] = None, hint: Optional[str] = None) -> None:
    __tracebackhide__ = True
    raise ClauseFailure(clause, expected, actual, result, hint)


@judgement
def that(condition: object, clause: str, expected: str, actual: str, result: Optional[Result] = None):
    __tracebackhide__ = True
    if not condition:
        fail(clause, expected, actual, result)


class Unsettled(Exception):
    """A runner past a timing bound by no more than it waited for a CPU: the busy machine may be
    to blame, so the check is played again (see plugin.py), never failed on this measurement."""

    def __init__(self, clause: str, late_s: float, cpu_wait_s: float) -> None:
        super().__init__(
            say(
                "[%s] not judged: the runner was %.2fs late, but it waited %.2fs for a CPU (a busy machine); "
                "grade again with fewer workers (-n) or on a less loaded machine",
                "[%s] 判定できません: runner は %.2f 秒遅れましたが、"
                "CPU を %.2f 秒待っていました(マシンが混んでいます)。"
                "ワーカーを減らす(-n)か、空いたマシンで採点し直してください",
            )
            % (clause, late_s, cpu_wait_s)
        )


@judgement
def within(
    value: float,
    low: float,
    high: float,
    clause: str,
    expected: str,
    actual: str,
    result: Result,
    hint: Optional[str] = None,
) -> None:
    """A measured time from `low` to `high`: below fails; above is judged by in_time()."""
    __tracebackhide__ = True
    if value < low:
        fail(clause, expected, actual, result, hint)
    in_time(value - high, clause, expected, actual, result, hint)


@judgement
def in_time(late_s: float, clause: str, expected: str, actual: str, result: Result, hint: Optional[str] = None) -> None:
    """Fail `clause` if the runner was `late_s` (> 0) past an upper timing bound.

    Lateness no greater than the runner's CPU wait is Unsettled instead: a busy machine can make a
    right runner that late, and only a measurement it cannot explain may fail one. Where the
    machine itself was measured (a check's last play), a wait it cannot explain is the runner's own.
    """
    __tracebackhide__ = True
    if late_s <= 0:
        return
    if late_s <= result.cpu_wait_s:
        if result.machine_wait_s is None or late_s <= result.machine_wait_s:
            raise Unsettled(clause, late_s, result.cpu_wait_s)
        actual += say(
            " (it waited %.2fs for a CPU, but this machine, measured alone, can have made it late by %.2fs "
            "at most: the rest is the runner's own, by its CPU affinity, its priority or the load it makes)",
            "(CPU を %.2f 秒待ちましたが、単独で測ったこのマシンが生む遅れは最大 %.2f 秒です。"
            "残りは runner 自身の CPU アフィニティ・優先度・負荷によるものです)",
        ) % (result.cpu_wait_s, result.machine_wait_s)
    fail(clause, expected, actual, result, hint)


# ---------------------------------------------------------------- common judgements


@judgement
def finished(result: Result, clause: str) -> None:
    """The runner ended by itself, before the harness's deadline."""
    __tracebackhide__ = True
    if result.rc is None:
        words = _in(_JUDGEMENT_WORDS, LANG)
        hint, charged = _why_hung(result, clause)
        fail(charged, words["finishes"], words["killed"] % (result.hung_after_s or 0), result, hint)


def _why_hung(result: Result, clause: str) -> "tuple[Optional[str], str]":
    """Why a runner that never finished was waiting, read from what it left running: the hint
    (None: unknown) and the clause whose defect that is.

    Its command itself still running, and not ignoring SIGTERM, was never signalled at all: the
    timeout was never applied (S2.1's defect, whichever check ran into it), or SIGTERM never
    passed on (S6.1's). A timed-out command that ignores SIGTERM and still runs was not killed
    either (S2.1's too). Anything else it was waiting for outlived a signal: a pipe held by a
    grandchild, or a process that ignores SIGTERM, which is the checking clause's to judge.
    """
    if not result.survivors:
        return None, clause
    args = list(result.args)
    command = args[args.index("--") + 1 :] if "--" in args else []
    itself = [p for p in result.survivors if _runs_command(p.argv, command)]
    # A process group begun after the SIGTERM (a process's start is known to a clock tick, rounded
    # down; the command first run began long before, as the signal waits for the runner to
    # settle): the runner started its command again, in a session of its own, rather than stop,
    # whatever it then waits for. Not a process the first command started in its TERM handler:
    # that one is in the first command's group. Any process counts, not only one that runs the
    # command as given (`sh -c '...; exec sleep 62'` is a sleep by then).
    signalled = result.terminated_at
    again = [
        p
        for p in result.survivors
        if signalled is not None
        and p.group_started is not None
        and p.group_started >= signalled - 1 / timing.CLOCK_TICKS
    ]
    if again:
        return _in(_HUNG_WORDS, LANG)["again"] % _named(again), "S6.3"
    untouched = [p for p in itself if not p.ignores_term]
    if untouched and clause.startswith("S6"):
        return _in(_HUNG_WORDS, LANG)["not_forwarded"] % _named(untouched), "S6.1"
    if untouched and "--timeout" in args:
        return _in(_HUNG_WORDS, LANG)["not_killed"] % _named(untouched), "S2.1"
    waiting = _in(_HUNG_WORDS, LANG)["waiting"] % _named(result.survivors)
    if itself and "--timeout" in args and not clause.startswith("S6"):
        return waiting, "S2.1"  # the timed-out command itself outlived the runner's kill: never killed
    return waiting, clause


def _runs_command(argv: Sequence[str], command: Sequence[str]) -> bool:
    """Is `argv` the command itself: the program by its name (a runner may resolve its path) and
    the same arguments, or a script run through the interpreter its #! line names?"""
    if not argv or not command:
        return False
    name, rest = os.path.basename(command[0]), list(command[1:])
    return any(
        len(shown) > 0 and os.path.basename(shown[0]) == name and list(shown[1:]) == rest
        for shown in (list(argv), list(argv[1:]))
    )


# A runner that hangs while processes of its command are left (they outlived the runner's own
# kill, in a session of their own) was waiting for them: for a pipe they hold, or for a process
# that ignores SIGTERM.
_HUNG_WORDS = {
    "en": {
        "waiting": "your runner was still waiting while %s remained: it waits for more than the command's own "
        "process (communicate(), or reading a pipe until every process holding it has closed it, or wait() on a "
        "process that ignores SIGTERM). After a timeout, SIGKILL the whole group (os.killpg(pgid, signal.SIGKILL)) "
        "and then wait; after forwarding SIGTERM, wait for the command's own process only (proc.wait()), and once "
        "it has exited SIGKILL what is left of its group.",
        "not_killed": "your runner never stopped its command: %s was still running, never signalled. Wait with a "
        "deadline (proc.wait(timeout=...) raises subprocess.TimeoutExpired), then kill the command's whole process "
        "group (os.killpg(proc.pid, signal.SIGKILL)).",
        "not_forwarded": "your runner never passed SIGTERM on: %s was still running, never signalled. In a "
        "signal.signal(signal.SIGTERM, handler), send it to the command's process group "
        "(os.killpg(proc.pid, signal.SIGTERM)), then keep waiting for the command.",
        "again": "your runner ran the command again after SIGTERM: %s started after the signal. Once SIGTERM "
        "has come, make no further attempt (the retries left do not run): pass it on, wait for the command, "
        "log its attempt and exit 143.",
    },
    "ja": {
        "waiting": "%s が残っている間、runner は待ち続けていました。コマンド自身のプロセス以上のものを待っています"
        "(communicate()、パイプを持つ全プロセスが閉じるまでの読み取り、SIGTERM を無視するプロセスへの wait())。"
        "タイムアウトのあとはグループ全体を SIGKILL してから待ってください(os.killpg(pgid, signal.SIGKILL))。"
        "SIGTERM を伝えたあとはコマンド自身のプロセスだけを待ち(proc.wait())、それが終了したら"
        "グループに残ったものを SIGKILL してください。",
        "not_killed": "runner はコマンドを止めませんでした。%s はシグナルを受けずに動き続けていました。"
        "期限つきで待ち(proc.wait(timeout=...) は subprocess.TimeoutExpired を送出します)、"
        "コマンドのプロセスグループ全体を止めてください(os.killpg(proc.pid, signal.SIGKILL))。",
        "not_forwarded": "runner は SIGTERM を伝えませんでした。%s はシグナルを受けずに動き続けていました。"
        "signal.signal(signal.SIGTERM, handler) の中でコマンドのプロセスグループに送り"
        "(os.killpg(proc.pid, signal.SIGTERM))、そのあともコマンドを待ち続けてください。",
        "again": "runner は SIGTERM のあとでコマンドをもう一度実行しました。%s はシグナルのあとに始まっています。"
        "SIGTERM が来たら、それ以上試行しないでください(残りのリトライは実行しません)。"
        "SIGTERM を伝え、コマンドを待ち、その試行を記録して 143 で終了してください。",
    },
}


def _named(processes: Sequence[ProcessInfo], ignores: Optional[bool] = None) -> str:
    """`argv` (pid N), ... of those `processes` whose ignoring of SIGTERM is `ignores` (all if None)."""
    return ", ".join(
        "`%s` (pid %d)" % (show_process(p.argv), p.pid)
        for p in processes
        if ignores is None or p.ignores_term == ignores
    )


@judgement
def exit_code(result: Result, wanted: int, clause: str) -> None:
    __tracebackhide__ = True
    finished(result, clause)
    words = _in(_JUDGEMENT_WORDS, LANG)
    that(result.rc == wanted, clause, words["exit_code"] % wanted, words["exit_code"] % result.rc, result)


@judgement
def exit_code_in(result: Result, allowed: Sequence[int], clause: str) -> None:
    __tracebackhide__ = True
    finished(result, clause)
    words = _in(_JUDGEMENT_WORDS, LANG)
    wanted = words["or"].join(str(code) for code in allowed)
    that(result.rc in allowed, clause, words["exit_code"] % wanted, words["exit_code"] % result.rc, result)


@judgement
def no_survivors(result: Result, clause: str) -> None:
    __tracebackhide__ = True
    if not result.survivors:
        return
    words = _in(_JUDGEMENT_WORDS, LANG)
    actual = words["still_running"] % len(result.survivors)
    fail(clause, words["none_left"], actual, result, survivor_hint(result.survivors, LANG))


def survivor_hint(survivors: Sequence[ProcessInfo], lang: str) -> str:
    """Why they survived, read from the evidence: each one's SigIgn mask says which mistake it was.

    One that ignores SIGTERM got the signal (or would have) and shrugged: the group must be
    SIGKILLed once the command has ended. One that does not ignore it would have ended on
    SIGTERM, so it never got a signal: the runner signalled the child, not its process group.
    """
    words = _in(_SURVIVOR_WORDS, lang)
    parts = []
    for ignores, advice in ((True, words["ignores"]), (False, words["unsignalled"])):
        named = _named(survivors, ignores)
        if named:
            parts.append(advice % named)
    return " ".join(parts)


_SURVIVOR_WORDS = {
    "en": {
        "ignores": "%s ignores SIGTERM: once your command has exited, SIGKILL what is left of its process group "
        "(os.killpg(pgid, signal.SIGKILL), ignoring ProcessLookupError).",
        "unsignalled": "%s got no signal at all (it does not ignore SIGTERM, so any signal would have ended it): "
        "send the signal to the command's whole process group (start_new_session=True, then "
        "os.killpg(proc.pid, ...)), not only to the child (subprocess.run() cannot: start it with subprocess.Popen).",
    },
    "ja": {
        "ignores": "%s は SIGTERM を無視します。コマンドが終了したら、そのプロセスグループに残ったものを SIGKILL "
        "してください(os.killpg(pgid, signal.SIGKILL)、ProcessLookupError は無視)。",
        "unsignalled": "%s にはシグナルが届いていません(SIGTERM を無視しないので、どのシグナルでも届いていれば"
        "終了していました)。子だけでなく、コマンドのプロセスグループ全体に送ってください(start_new_session=True "
        "で起動し os.killpg(proc.pid, ...))。subprocess.run() ではできないので、subprocess.Popen で起動してください。",
    },
}


@judgement
def refused_by_lock(
    result: Result,
    shared_holder: bool,
    clause: str = "S5.2",
    others_applied: Sequence[str] = (),
    let_go: Optional[float] = None,
) -> None:
    """Exit 3 with the lab's message on stderr, while another process holds state/lock.

    The hint says only what the evidence shows: it waited (never ended while the lock was held,
    or was running when the holder let go, at `let_go` on the clock of result.ended, and went on
    after: None when the holder kept it to the end), it went ahead while the lock was held (no
    exclusive flock on state/lock: a shared one passes a shared holder), it refused late, or with
    another exit code. `others_applied`: lines of applied.log that other runs wrote.
    """
    __tracebackhide__ = True
    words, judgement = _in(_LOCK_WORDS, LANG), _in(_JUDGEMENT_WORDS, LANG)
    if result.rc is None:
        fail(clause, words["at_once"], judgement["killed"] % (result.hung_after_s or 0), result, words["waited"])
    if result.rc != 3:
        fail(
            clause,
            judgement["exit_code"] % 3,
            judgement["exit_code"] % result.rc,
            result,
            lock_hint(result, shared_holder, others_applied, let_go, LANG),
        )
    stderr_has(result, LOCKED, clause)


def lock_hint(
    result: Result, shared_holder: bool, others_applied: Sequence[str], let_go: Optional[float], lang: str
) -> str:
    """Why a runner that ended did not refuse with 3 while state/lock was held, from what it did."""
    words = _in(_LOCK_WORDS, lang)
    went_ahead = len(result.applied()) > len(others_applied) or result.rc == 0
    started = result.ended - result.duration_s
    if went_ahead and let_go is not None and started < let_go < result.ended:
        return words["waited"]  # running when the holder let go, and it went on after
    if went_ahead:
        return words["went_ahead_shared" if shared_holder else "went_ahead"]
    if result.duration_s > timing.OVERHEAD_S:
        # Late without going past the lock: what kept it is not known (a loop that tries LOCK_NB
        # again, a sleep), so the hint names no flock that blocks.
        return words["late"] % (result.duration_s, result.rc)
    return words["other_code"] % result.rc


LOCKED = "another run in progress"


@judgement
def not_waiting_for_the_lock(result: Result, clause: str) -> None:
    """The runner finished although another process held state/lock: it did not wait for it."""
    __tracebackhide__ = True
    if result.rc is None:
        words = _in(_JUDGEMENT_WORDS, LANG)
        actual = words["killed"] % (result.hung_after_s or 0)
        fail(clause, words["finishes"], actual, result, _in(_LOCK_WORDS, LANG)["waited"])


_LOCK_WORDS = {
    "en": {
        "at_once": "exit code 3 at once",
        "waited": "your runner waited for the lock: it did not refuse while another process held state/lock "
        "(a fcntl.flock() without LOCK_NB waits so, and so does a loop that tries again). Try once with "
        "fcntl.LOCK_EX | fcntl.LOCK_NB, and when it raises BlockingIOError print `another run in progress` "
        "to stderr and exit 3.",
        "late": "your runner answered only after %.2fs, with exit code %s, though another process held "
        "state/lock when it started: refuse at once. Try once with fcntl.LOCK_EX | fcntl.LOCK_NB (no retry, no "
        "sleep), and when it raises BlockingIOError print `another run in progress` to stderr and exit 3.",
        "went_ahead_shared": "your runner went ahead although another process held a shared lock (LOCK_SH) on "
        "state/lock: take it exclusively (fcntl.LOCK_EX | fcntl.LOCK_NB), which no other holder allows; LOCK_SH "
        "only excludes exclusive holders.",
        "went_ahead": "your runner went ahead while another process held state/lock: take fcntl.flock(fd, "
        "fcntl.LOCK_EX | fcntl.LOCK_NB) on /root/pyops/sub/state/lock itself (fcntl.lockf and fcntl.fcntl locks "
        "are another kind, which flock holders do not see), before calling apply.sh.",
        "other_code": "your runner did refuse, but with exit code %s: the lab reserves 3 for `the lock is taken`.",
    },
    "ja": {
        "at_once": "すぐに終了コード 3 で終了する",
        "waited": "runner はロックが空くのを待っていました。別のプロセスが state/lock を持っている間に拒否しません"
        "でした(LOCK_NB のない fcntl.flock() も、再試行するループも、そのように待ちます)。"
        "fcntl.LOCK_EX | fcntl.LOCK_NB で一度だけ試し、BlockingIOError が出たら "
        "`another run in progress` を標準エラー出力に書いて 3 で終了してください。",
        "late": "runner は別のプロセスが state/lock を持っている間、%.2f 秒たってから終了コード %s で答えました。"
        "すぐに拒否してください。fcntl.LOCK_EX | fcntl.LOCK_NB で一度だけ試し(再試行も sleep もせず)、"
        "BlockingIOError が出たら `another run in progress` を標準エラー出力に書いて 3 で終了してください。",
        "went_ahead_shared": "別のプロセスが state/lock を共有ロック(LOCK_SH)で持っているのに、runner は先へ"
        "進みました。排他ロック(fcntl.LOCK_EX | fcntl.LOCK_NB)を取ってください。LOCK_SH は排他ロックの"
        "保持者しか締め出しません。",
        "went_ahead": "別のプロセスが state/lock を持っているのに、runner は先へ進みました。apply.sh を呼ぶ前に "
        "/root/pyops/sub/state/lock そのものに fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB) を取って"
        "ください(fcntl.lockf や fcntl.fcntl のロックは別の種類で、flock の保持者からは見えません)。",
        "other_code": "runner は拒否しましたが、終了コードが %s でした。ラボでは「ロックが取られている」に 3 を"
        "割り当てています。",
    },
}


@wording
def schedule_hint(waits: Sequence[float], backoff: float = 1.0) -> Optional[str]:
    """The hint that waits measured as `waits` call for (backoff, 2 x backoff, ... wanted), or None.

    The shape of a wrong schedule says which mistake made it: no waits at all, the same wait
    each time, a wait that grows by the backoff, or the right doubling one attempt off.
    """
    words = _in(_SCHEDULE_WORDS, LANG)
    shown = ", ".join("%.1f" % wait for wait in waits)

    def like(pattern: Sequence[float], whole: bool) -> bool:
        """Do the waits follow `pattern` (all of it, when `whole`: it differs late)?"""
        if not waits or (whole and len(waits) < len(pattern)):
            return False
        return all(abs(wait - want * backoff) <= _SCHEDULE_SLACK_S for wait, want in zip(waits, pattern))

    if waits and all(wait < _SCHEDULE_SLACK_S for wait in waits):
        return words["none"]
    for pattern, whole, mistake in (
        ((2, 4, 8), False, "one_late"),
        ((0.5, 1, 2), False, "one_early"),
        ((1, 2, 3), True, "linear"),
        ((1, 1, 1), True, "constant"),
    ):
        if like(pattern, whole):
            return words[mistake] % shown
    return None


@judgement
def waited_after_the_last(result: Result, backoff: float, started: Sequence[float], clause: str = "S3.2") -> None:
    """`--retries 1 --backoff B` took its one wait of B and no more; `started`: when each attempt began.

    A run that took longer either waited after its last attempt or waited too long before it;
    the attempts' start times (on timing.now()'s clock, as result.ended) tell which.
    """
    __tracebackhide__ = True
    finished(result, clause)
    low, high = backoff - timing.EARLY_S, backoff + timing.OVERHEAD_S
    if low <= result.duration_s <= high:
        return
    hint = None
    if len(started) >= 2:
        after_last = result.ended - started[-1]
        if after_last > timing.OVERHEAD_S:
            hint = _in(_SCHEDULE_WORDS, LANG)["after_last"] % after_last
        else:
            hint = schedule_hint([started[1] - started[0]], backoff)
    expected = _in(_SCHEDULE_WORDS, LANG)["one_wait"] % (backoff, low, high)
    actual = _in(_JUDGEMENT_WORDS, LANG)["took"] % result.duration_s
    within(result.duration_s, low, high, clause, expected, actual, result, hint)


# How far a measured wait may be from a mistake's before it is not taken for that mistake.
_SCHEDULE_SLACK_S = 0.3

_SCHEDULE_WORDS = {
    "en": {
        "none": "your runner retried at once: after a failed attempt, time.sleep(backoff * 2 ** (attempt - 1)) "
        "before the next one (attempt counted from 1).",
        "constant": "your runner waited the same time before every retry (%s s): the wait doubles each time, "
        "backoff * 2 ** (attempt - 1), so 1, 2, 4 s with --backoff 1.",
        "linear": "your waits grew by the backoff each time (%s s): multiply by 2 instead, backoff * 2 ** "
        "(attempt - 1), so 1, 2, 4 s with --backoff 1.",
        "one_late": "your waits were %s s: the first retry waits the backoff itself, so the exponent must be "
        "attempt - 1 with attempt counted from 1 (backoff * 2 ** 0 = backoff).",
        "one_early": "your waits were %s s: the first retry waits the whole backoff, so the exponent must be "
        "attempt - 1 with attempt counted from 1, not from 0.",
        "after_last": "your runner also waited after its last attempt (it ended %.2fs after that attempt "
        "started): sleep only when another attempt follows (attempt <= retries).",
        "one_wait": "one wait of %gs, none after the last attempt: %.2fs to %.2fs",
    },
    "ja": {
        "none": "runner はすぐに再試行しました。失敗した試行のあと、次の試行の前に "
        "time.sleep(backoff * 2 ** (attempt - 1)) してください(attempt は 1 から数えます)。",
        "constant": "runner は毎回同じ時間だけ待ちました(%s 秒)。待ち時間は毎回 2 倍になります。"
        "backoff * 2 ** (attempt - 1) なので、--backoff 1 では 1, 2, 4 秒です。",
        "linear": "待ち時間が毎回 backoff ずつ増えました(%s 秒)。足すのではなく 2 倍にしてください。"
        "backoff * 2 ** (attempt - 1) なので、--backoff 1 では 1, 2, 4 秒です。",
        "one_late": "待ち時間は %s 秒でした。最初の再試行の前は backoff そのものを待つので、指数は attempt - 1"
        "(attempt は 1 から数える)です(backoff * 2 ** 0 = backoff)。",
        "one_early": "待ち時間は %s 秒でした。最初の再試行の前は backoff を丸ごと待つので、指数は attempt - 1"
        "(attempt は 0 ではなく 1 から数える)です。",
        "after_last": "runner は最後の試行のあとも待ちました(その試行の開始から %.2f 秒後に終了)。"
        "次の試行があるとき(attempt <= retries)だけ待ってください。",
        "one_wait": "待ちは %g 秒の 1 回だけで、最後の試行のあとは待たない: %.2f 秒から %.2f 秒",
    },
}


@judgement
def stdout_is(result: Result, wanted: bytes, clause: str) -> None:
    __tracebackhide__ = True
    words = _in(_JUDGEMENT_WORDS, LANG)
    that(
        result.stdout == wanted,
        clause,
        words["stdout_exactly"] % _show(wanted),
        words["stdout"] % _show(result.stdout),
        result,
    )


@judgement
def stdout_has(result: Result, text: str, clause: str) -> None:
    __tracebackhide__ = True
    words = _in(_JUDGEMENT_WORDS, LANG)
    that(text in result.out, clause, words["on_stdout"] % text, words["stdout"] % _show(result.stdout), result)


@judgement
def stderr_has(result: Result, text: str, clause: str) -> None:
    __tracebackhide__ = True
    words = _in(_JUDGEMENT_WORDS, LANG)
    that(text in result.err, clause, words["on_stderr"] % text, words["stderr"] % _show(result.stderr), result)


@judgement
def apply_sh_not_called(result: Result, clause: str) -> None:
    """applied.log stayed empty: apply.sh was never called."""
    __tracebackhide__ = True
    not_called = _in(_JUDGEMENT_WORDS, LANG)["not_applied"]
    that(result.applied() == [], clause, not_called, shown_applied(result), result)


@judgement
def no_marker(result: Result, clause: str) -> None:
    """No state/NAME.done was made."""
    __tracebackhide__ = True
    that(
        result.markers() == [],
        clause,
        _in(_JUDGEMENT_WORDS, LANG)["no_marker"],
        shown_markers(result.markers()),
        result,
    )


@judgement
def marked(result: Result, name: str) -> None:
    """An apply that succeeded left state/NAME.done (S4.3). A check of another clause that needs
    the marker (a second apply, a dry run after a real one) asks this first: without it, that
    check would see S4.3's defect, not its own."""
    __tracebackhide__ = True
    that(
        result.marked(name),
        "S4.3",
        say("state/%s.done exists", "state/%s.done がある") % name,
        say("markers: %s", "マーカー: %s") % (result.markers() or say("(none)", "(なし)")),
        result,
    )


@wording
def shown_applied(result: Result) -> str:
    """Which names apply.sh ran for, as a check's actual value: the runs the witness saw (and what
    applied.log claims besides, which a runner that imitates apply.sh wrote), else applied.log."""
    words = _in(_JUDGEMENT_WORDS, LANG)
    if result.apply_runs() is None:
        return words["applied_log"] % result.applied_seen()
    ran, logged = result.applied(), result.applied_seen()
    shown = words["apply_runs"] % ran
    if sorted(logged) != sorted(ran):
        shown += words["imitated"] % logged
    return shown


@wording
def shown_markers(names: Sequence[str]) -> str:
    """Which markers there were, as a check's actual value."""
    return _in(_JUDGEMENT_WORDS, LANG)["markers"] % list(names)


@judgement
def count_is(result: Result, what: str, found: int, wanted: int, clause: str) -> None:
    """A count the test observed (attempts, calls), as it must be."""
    __tracebackhide__ = True
    that(found == wanted, clause, "%s: %d" % (what, wanted), "%s: %d" % (what, found), result)


@judgement
def killed_after(
    result: Result,
    command_started: float,
    seconds: float,
    clause: str,
    late_hint: Optional[str] = None,
    command_ended: Optional[float] = None,
) -> None:
    """The command was killed `seconds` after it started: not before, and at most REACTION_S later
    (`late_hint`, if given, is the hint for a kill that came later). Its end is `command_ended`
    when the harness saw it (scenarios.killed_at), else the runner's own end, which cannot be
    earlier.

    The lower bound counts from the runner's own start (its command cannot have started
    earlier), the upper one from the command's start, so start-up never costs a tolerance.
    """
    __tracebackhide__ = True
    finished(result, clause)
    words = _in(_JUDGEMENT_WORDS, LANG)
    expected = words["killed_after"] % (seconds, seconds + timing.REACTION_S)
    if command_ended is None or command_ended >= result.ended:
        after = result.ended - command_started
        actual = words["ended_after"] % (after, result.duration_s)
    else:
        after = command_ended - command_started
        actual = words["command_ended_after"] % after
    that(result.duration_s >= seconds - timing.EARLY_S, clause, expected, actual, result)
    in_time(after - (seconds + timing.REACTION_S), clause, expected, actual, result, late_hint)


@judgement
def took_between(result: Result, low: float, high: float, clause: str, what: str) -> None:
    __tracebackhide__ = True
    finished(result, clause)
    words = _in(_JUDGEMENT_WORDS, LANG)
    within(
        result.duration_s,
        low,
        high,
        clause,
        words["between"] % (what, low, high),
        words["took"] % result.duration_s,
        result,
    )


def _show(data: bytes, limit: int = 120) -> str:
    if not data:
        return _in(_JUDGEMENT_WORDS, LANG)["empty"]
    shown = repr(data[:limit])
    return shown + (_in(_JUDGEMENT_WORDS, LANG)["more_bytes"] % len(data) if len(data) > limit else "")


# What the common judgements say, in the learner's language (a check's own words are its own).
_JUDGEMENT_WORDS = {
    "en": {
        "finishes": "the runner finishes by itself",
        "killed": "it was still running after %.1fs and was killed by the grader",
        "exit_code": "exit code %s",
        "or": " or ",
        "none_left": "no process of the command left running",
        "still_running": "%d process(es) still running after the runner exited",
        "stdout_exactly": "stdout exactly %s",
        "stdout": "stdout %s",
        "stderr": "stderr %s",
        "on_stdout": "%r on stdout (anywhere in a line)",
        "on_stderr": "%r on stderr (anywhere in a line)",
        "killed_after": "the command killed %gs after it started (by %.2fs)",
        "ended_after": "the runner ended %.2fs after its command started (%.2fs after the runner itself)",
        "command_ended_after": "the command ended %.2fs after it started",
        "between": "%s: %.2fs to %.2fs",
        "took": "the runner took %.2fs",
        "empty": "(empty)",
        "not_applied": "apply.sh not called",
        "applied_log": "applied.log: %s",
        "apply_runs": "apply.sh run by the runner for %s",
        "imitated": "; applied.log says %s, but no process of the runner ran apply.sh for the rest "
        "(the grader sees apply.sh itself run: call it, do not imitate it)",
        "no_marker": "no marker",
        "markers": "markers: %s",
        "more_bytes": "... (%d bytes in all)",
        "more_chars": "... (%d characters)",
        "one_object": "every line of runs.jsonl one JSON object",
        "bad_lines": "%d bad line(s); line %d is %s: %s",
        "newline": "every record ends with a newline",
        "no_newline": "the last line has no newline",
        "lines_in_runs": "%d line(s) in runs.jsonl",
        "lines": "%d line(s)",
    },
    "ja": {
        "finishes": "runner が自分で終了する",
        "killed": "%.1f 秒後もまだ動いていたので、採点側が強制終了しました",
        "exit_code": "終了コード %s",
        "or": " または ",
        "none_left": "コマンドのプロセスが 1 つも残らない",
        "still_running": "runner の終了後も %d 個のプロセスが動いていました",
        "stdout_exactly": "標準出力がちょうど %s",
        "stdout": "標準出力 %s",
        "stderr": "標準エラー %s",
        "on_stdout": "標準出力のどこかに %r(行の一部でよい)",
        "on_stderr": "標準エラーのどこかに %r(行の一部でよい)",
        "killed_after": "コマンドが開始から %g 秒で止められる(%.2f 秒までに)",
        "ended_after": "runner はコマンドの開始から %.2f 秒後に終了しました(runner 自身の開始から %.2f 秒後)",
        "command_ended_after": "コマンドは開始から %.2f 秒後に終了しました",
        "between": "%s: %.2f 秒から %.2f 秒",
        "took": "runner は %.2f 秒かかりました",
        "empty": "(空)",
        "not_applied": "apply.sh が呼ばれない",
        "applied_log": "applied.log の内容は %s でした",
        "apply_runs": "runner が apply.sh を実行した NAME は %s でした",
        "imitated": "。applied.log には %s とありますが、"
        "残りについて runner のどのプロセスも apply.sh を実行していません"
        "(採点側は apply.sh そのものの実行を見ています。まねせずに呼んでください)",
        "no_marker": "マーカーが作られない",
        "markers": "マーカーは %s でした",
        "more_bytes": "...(全 %d バイト)",
        "more_chars": "...(全 %d 文字)",
        "one_object": "runs.jsonl の各行が 1 つの JSON オブジェクト",
        "bad_lines": "不正な行が %d 行。%d 行目は %s: %s",
        "newline": "各レコードが改行で終わる",
        "no_newline": "最後の行に改行がありません",
        "lines_in_runs": "runs.jsonl に %d 行",
        "lines": "%d 行",
    },
}


# ---------------------------------------------------------------- runs.jsonl


@judgement
def records(result: Result, count: int, clause: str = "S7.1") -> List[Record]:
    """Exactly `count` lines in runs.jsonl (else `clause` fails), each one JSON object ending in a
    newline (else S7.1 fails, whichever clause's check reads them: the format is S7.1's alone);
    read their keys with `field`."""
    __tracebackhide__ = True
    words = _in(_JUDGEMENT_WORDS, LANG)
    found = result.records()
    broken = [record for record in found if not record.ok]
    if broken:
        first = broken[0]
        fail(
            "S7.1",
            words["one_object"],
            words["bad_lines"]
            % (len(broken), first.number, line_problem(first, LANG), first.shown(more=words["more_bytes"])),
            result,
            _built_by_hand_hint(first),
        )
    raw = result.runs_bytes()
    if raw and not raw.endswith(b"\n"):
        fail("S7.1", words["newline"], words["no_newline"], result)
    that(len(found) == count, clause, words["lines_in_runs"] % count, words["lines"] % len(found), result)
    return found


@judgement
def field(result: Result, record: Record, key: str, clause: str = "S7.2") -> Any:
    """The value of `key` in `record`, with the type S7.2 gives it; else fail quoting the line."""
    __tracebackhide__ = True
    try:
        return record.field(key)
    except FieldProblem as problem:
        expected, actual = field_words(problem, LANG)
        shown = record.shown(more=_in(_JUDGEMENT_WORDS, LANG)["more_bytes"])
        actual = _in(_FIELD_TEXT, LANG)["in_line"] % (actual, record.number, shown)
        fail(clause, expected, actual, result, field_hint(problem, LANG))


def field_words(problem: FieldProblem, lang: str) -> "tuple[str, str]":
    """The expected and actual value of a runs.jsonl field problem, in `lang`.

    records.py words them in English; other languages are worded here, from what the problem
    records (the key, the kind of problem and the value).
    """
    if lang == "en" or not problem.kind:
        return problem.expected, problem.actual
    words = _in(_FIELD_TEXT, lang)
    key, value = problem.key, problem.value
    if problem.kind == "line":
        return words["an_object"], line_problem(value, lang)
    if problem.kind == "missing":
        return words["the_key"] % key, words["keys"] % (", ".join(value) or words["no_keys"])
    if problem.kind == "format":
        expected = words["ts_format"]
    elif key == "ts":
        expected = words["ts_type"]
    elif key == "cmd":
        expected = words["cmd_type"]
    elif key in MINIMUMS:
        expected = words["int_min"] % (key, MINIMUMS[key])
    else:
        expected = words["int"] % key
    return expected, "%s %s (%s)" % (key, json_text(value), words["types"].get(json_type(value), json_type(value)))


_BY_HAND_WORDS = {
    "en": {
        "repr": "Line %d is Python's own notation of a dict (str(record)), not JSON: write json.dumps(record) + "
        "'\\n' instead.",
        "format": "Line %d looks like an object written out by hand (string formatting), which breaks on the first "
        "quote or backslash in a value (a command may hold either): build it with json.dumps(record) + '\\n'.",
    },
    "ja": {
        "repr": "%d 行目は Python の dict の表記(str(record))で、JSON ではありません。代わりに "
        "json.dumps(record) + '\\n' を書いてください。",
        "format": "%d 行目は文字列の整形で手作りしたオブジェクトのようです。値の中の最初の引用符やバックスラッシュ"
        "(コマンドはどちらも含みえます)で壊れます。json.dumps(record) + '\\n' で作ってください。",
    },
}


def _built_by_hand_hint(record: Record) -> Optional[str]:
    """The hint for a line that starts as an object but is not JSON: it was not made by json.dumps
    (None for other problems: the clause's hint fits them)."""
    if record.problem_kind != "not_json" or not record.line.lstrip().startswith(b"{"):
        return None
    words = _in(_BY_HAND_WORDS, LANG)
    python_repr = record.line.lstrip()[1:].lstrip().startswith(b"'")
    return words["repr" if python_repr else "format"] % record.number


def line_problem(record: Record, lang: str) -> str:
    """What keeps `record` from being a JSON object, in `lang`."""
    words, kind = _in(_LINE_PROBLEM_WORDS, lang), record.problem_kind
    if kind is None or kind not in words:
        return record.problem or ""
    values = record.problem_values
    if kind == "not_object":
        values = (_in(_FIELD_TEXT, lang).get("types", {}).get(values[0], values[0]),)
    elif kind == "not_json":
        values = (_in(_JSON_ERRORS, lang).get(values[0], values[0]),) + tuple(values[1:])
    return words[kind] % values


# What Python's json module says of text that is not JSON (its messages are English only).
_JSON_ERRORS: Mapping[str, Mapping[str, str]] = {
    "en": {},
    "ja": {
        "Expecting value": "値がありません",
        "Extra data": "1 つの値のあとに余分なデータがあります",
        "Expecting property name enclosed in double quotes": "二重引用符で囲んだキーがありません",
        "Expecting ',' delimiter": "',' がありません",
        "Expecting ':' delimiter": "':' がありません",
        "Unterminated string starting at": "文字列が閉じていません",
        "Invalid control character at": "文字列の中に制御文字があります",
        "Invalid \\escape": "不正なエスケープがあります",
        "Invalid \\uXXXX escape": "不正な \\uXXXX エスケープがあります",
    },
}


_LINE_PROBLEM_WORDS: Mapping[str, Mapping[str, str]] = {
    "en": LINE_PROBLEMS,
    "ja": {
        "blank": "空行",
        "bom": "バイトオーダーマークで始まっています(BOM なしの UTF-8 で書いてください)",
        "too_long": "%d バイトの行で、どのレコードよりも長い",
        "not_utf8": "UTF-8 ではない",
        "too_deep": "レコードにしては入れ子が深すぎる",
        "not_json": "JSON ではない(%s。%d 文字目)",
        "not_object": "%sで、JSON オブジェクトではない",
        "twice": "キー %r が 2 回現れる",
        "constant": "%s は JSON ではない(json.dumps(..., allow_nan=False) はこれを拒否します)",
        "digits": "%d 桁の数",
        "out_of_range": "数 %s は範囲外",
    },
}


_FIELD_TEXT: Mapping[str, Mapping[str, Any]] = {
    "en": {"in_line": "%s, in line %d: %s"},
    "ja": {
        "in_line": "%s(%d 行目: %s)",
        "an_object": "JSON オブジェクト",
        "the_key": "キー %r",
        "keys": "キー: %s",
        "no_keys": "(なし)",
        "ts_format": "ts が ISO 8601 形式(datetime.fromisoformat で読める)",
        "ts_type": "ts が ISO 8601 の文字列",
        "cmd_type": "cmd が文字列のリスト",
        "int_min": "%s が %d 以上の整数",
        "int": "%s が整数",
        "types": {
            "a boolean": "真偽値",
            "an int": "整数",
            "a float": "浮動小数点数",
            "a string": "文字列",
            "a list": "リスト",
            "an object": "オブジェクト",
            "null": "null 値",
        },
    },
}


# What a learner may have called a key instead (a missing key's hint names the one they wrote).
_KEY_ALIASES = {
    "ts": ("timestamp", "time", "started", "start", "date", "datetime", "started_at"),
    "cmd": ("command", "argv", "args", "cmdline"),
    "attempt": ("attempts", "try", "tries", "n", "number", "retry"),
    "rc": ("returncode", "return_code", "exit_code", "exitcode", "code", "status"),
    "duration_ms": ("duration", "elapsed", "elapsed_ms", "duration_s", "ms", "time_ms"),
}


def field_hint(problem: FieldProblem, lang: str) -> Optional[str]:
    """What the evidence says of a runs.jsonl value (None: the clause's general hint fits)."""
    words = _in(_FIELD_WORDS, lang)
    key, value = problem.key, problem.value
    if problem.kind == "missing":
        near = [name for name in value or () if name in _KEY_ALIASES.get(key, ())]
        return words["renamed"] % (key, near[0]) if near else words["missing"] % key
    if problem.kind == "minimum":
        return words["attempt_from_1"] if key == "attempt" else words["negative"] % key
    if problem.kind == "format":
        return words["ts_format"] % value
    if problem.kind != "type":
        return None
    if key == "ts":
        return words["ts_number"] if isinstance(value, (int, float)) else words["ts_type"]
    if key == "cmd":
        return words["cmd_string"] if isinstance(value, str) else words["cmd_items"]
    if isinstance(value, bool):
        return words["bool"] % key
    if isinstance(value, float):
        return words["duration_float"] if key == "duration_ms" else words["float"] % key
    if isinstance(value, str):
        return words["string"] % key
    return None


_FIELD_WORDS = {
    "en": {
        "renamed": "the key is `%s`, not `%s`: the five names are exact (ts, cmd, attempt, rc, duration_ms).",
        "missing": "add `%s`: every line has the five keys ts, cmd, attempt, rc and duration_ms.",
        "attempt_from_1": "attempt counts from 1: the first attempt is 1, the first retry 2 "
        "(range(1, retries + 2), or enumerate(..., start=1)).",
        "negative": "%s is below 0: measure with time.monotonic(), end minus start.",
        "ts_format": "ts %r is not ISO 8601 as datetime.fromisoformat reads it: write "
        "datetime.now(timezone.utc).isoformat() (not time.ctime() or a strftime format of your own).",
        "ts_number": "ts is a number of seconds (time.time()): write the moment as an ISO 8601 string, "
        "datetime.now(timezone.utc).isoformat().",
        "ts_type": "ts is an ISO 8601 string: datetime.now(timezone.utc).isoformat().",
        "cmd_string": "cmd is one string: write the argv list itself (json.dumps keeps a list a JSON array), "
        "not ' '.join(cmd) or str(cmd).",
        "cmd_items": "cmd is the argv after --, every element a string, as in sys.argv.",
        "bool": "%s is a boolean: write the int itself.",
        "duration_float": "duration_ms is a float: make it an int of milliseconds, "
        "int((time.monotonic() - start) * 1000).",
        "float": "%s is a float: write the int itself (int(...)).",
        "string": "%s is a string: write the number itself, not str() of it or an f-string.",
    },
    "ja": {
        "renamed": "キーは `%s` です(`%s` ではなく)。5 つの名前は正確に: ts, cmd, attempt, rc, duration_ms。",
        "missing": "`%s` を追加してください。各行は ts, cmd, attempt, rc, duration_ms の 5 つのキーを持ちます。",
        "attempt_from_1": "attempt は 1 から数えます。最初の試行が 1、最初のリトライが 2 です"
        "(range(1, retries + 2) や enumerate(..., start=1))。",
        "negative": "%s が 0 未満です。time.monotonic() で終了 - 開始を測ってください。",
        "ts_format": "ts %r は datetime.fromisoformat が読める ISO 8601 ではありません。"
        "datetime.now(timezone.utc).isoformat() を書いてください(time.ctime() や独自の strftime ではなく)。",
        "ts_number": "ts が秒数の数値です(time.time())。時刻を ISO 8601 の文字列で書いてください: "
        "datetime.now(timezone.utc).isoformat()。",
        "ts_type": "ts は ISO 8601 の文字列です: datetime.now(timezone.utc).isoformat()。",
        "cmd_string": "cmd が 1 つの文字列です。argv のリストそのものを書いてください(json.dumps はリストを "
        "JSON の配列のまま書きます)。' '.join(cmd) や str(cmd) ではありません。",
        "cmd_items": "cmd は -- の後の argv で、sys.argv と同じく各要素が文字列です。",
        "bool": "%s が真偽値です。int そのものを書いてください。",
        "duration_float": "duration_ms が float です。ミリ秒の int にしてください: "
        "int((time.monotonic() - start) * 1000)。",
        "float": "%s が float です。int そのものを書いてください(int(...))。",
        "string": "%s が文字列です。str() や f 文字列ではなく、数値そのものを書いてください。",
    },
}


@judgement
def values_are(result: Result, records_: List[Record], key: str, wanted: list, clause: str) -> None:
    """The `key` of each record, in order, as it must be."""
    __tracebackhide__ = True
    found = [field(result, record, key) for record in records_]
    that(found == wanted, clause, "%s %s" % (key, wanted), "%s %s" % (key, found), result)

"""Similarity across a class: who wrote alike, for a teacher to look at.

A black-box grade says what a runner does, not who wrote it. After the gradings, every pair of
submissions is compared, and every submission against every runner the project publishes (the
reference and runner/styles) and against the known solutions a teacher adds (--known DIR). Two
scores per pair, both from 0 to 1:

* code: copydetect's winnowing over the runners' tokens, names, strings and comments left out, so
  that renamed identifiers, moved functions, changed comments and reformatting do not hide a copy;
  the larger of the two shares: of A's fingerprinted code found in B, and of B's found in A.
  Code a teacher hands out (--template FILE) is boilerplate: it counts for no pair.
* behaviour: the runner's own words. What it prints and writes (its messages, its usage, its
  dry-run plan, the keys of its runs.jsonl lines) as its source spells them, read, never run, and
  the output its gradings quoted (the "| " lines of its checks' messages). Words the lab makes every
  runner say are left out: those of at least VOCABULARY public runners (not the class's most said
  ones: a class with many copies of one runner would lose exactly that runner's words). The score
  is the share of the smaller vocabulary of the two that the other one says too; a copy rewritten
  line by line that kept its messages still says them.

A pair is similar when either score reaches its threshold (lab.toml's [similarity]). It says
"similar", never more: two runners can be alike for reasons a teacher knows and this does not.

The code scores are cached per pair of submissions' sha256 (and the method's settings) in the
class folder, so a class graded again compares only the pairs that touch a changed submission; the
words are compared anew each time (set intersections: fast).
"""

import ast
import csv
import hashlib
import io
import json
import os
import re
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

from conformance.classroom import layout
from conformance.classroom.discover import discover
from conformance.harness.inert import inert
from conformance.lab.config import BEHAVIOUR_THRESHOLD, CODE_THRESHOLD
from conformance.reporting import report

# A runner is a few hundred lines; a submission larger than this is compared by its start alone
# (an attacker's file of gigabytes must not cost the grader its memory).
READ_LIMIT = 256 * 1024
# copydetect's settings: k-grams of NOISE tokens, and a match of GUARANTEE tokens or more is always
# seen (window = GUARANTEE - NOISE + 1). Measured on the nine public runners, written apart: their
# highest code score between each other is 0.61 with grams of 15, 0.42 with 25 and 0.28 with 35
# (the lab's idioms, argparse, subprocess, json.dumps, match in short grams); the disguised copies
# of bench/similarity.py score 0.95 or more with 25.
NOISE, GUARANTEE = 25, 30
# The shipped thresholds are config.py's (lab.toml's [similarity] may change them).
# Matching code shorter than this (in copydetect's filtered characters: about three lines) is no
# evidence, whatever share of a tiny runner, or of what a template leaves of one, it is.
MIN_OVERLAP = 150
# Fewer words in common than this is no evidence, whatever share of a small vocabulary they are.
MIN_SHARED_WORDS = 3
# A word said by this many public runners (of 9) is the lab's: it tells no one apart.
VOCABULARY = 2
# What a page or a cell shows of one pair: a word list and a side of the code view.
SHOWN_WORDS = 40
SHOWN_LINES = 160
CONTEXT_LINES = 1
# The cache: format version, and the file at the class folder's top (a class name: never a student's).
CACHE_VERSION = 2
CACHE_NAME = layout.SIMILARITY_CACHE
# The cache is written every so many pairs compared, not only at the end (a few seconds' work).
SAVE_EVERY = 5000
# Kinds of what a submission is compared with.
STUDENT, PUBLIC, KNOWN = "student", "public", "known"


class Unavailable(Exception):
    """Similarity cannot be computed here (the message is one line)."""


@dataclass(frozen=True)
class Runner:
    """One runner compared: a student's submission, a public runner or a known solution."""

    name: str
    kind: str
    text: str
    sha256: str
    # normalised word -> the first way this runner spells it (inert text), for the side-by-side view
    words: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.name if self.kind == STUDENT else "%s (%s)" % (self.name, self.kind)


@dataclass
class Pair:
    first: Runner
    second: Runner
    code: float  # the larger of the two sides' shares
    code_sides: Tuple[float, float]
    slices: Tuple[List[Tuple[int, int]], List[Tuple[int, int]]]  # matched character ranges of each text
    behaviour: float
    shared: List[str]  # normalised words both say
    similar: bool = False

    @property
    def rank(self) -> float:
        return max(self.code, self.behaviour)


@dataclass
class Outcome:
    pairs: List[Pair]  # every pair compared, the most similar first
    runners: int  # submissions compared
    others: int  # public runners and known solutions
    compared: int  # code pairs compared this time (the others came from the cache)
    seconds: float
    code_threshold: float
    behaviour_threshold: float
    skipped: List[str] = field(default_factory=list)  # one line each: what could not be compared

    @property
    def similar(self) -> List[Pair]:
        return [pair for pair in self.pairs if pair.similar]


# --- reading runners --------------------------------------------------------------------------------


def read_capped(path: Path, limit: int = READ_LIMIT) -> Optional[str]:
    """A submission's text, at most `limit` bytes of it; None unless it is a regular file reached
    through no link (the grader may be root: a link could make it read any file of this machine)."""
    try:
        handle = os.open(str(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return None
        with os.fdopen(handle, "rb", closefd=False) as stream:
            data = stream.read(limit)
    except OSError:
        return None
    finally:
        os.close(handle)
    return data.decode("utf-8", "replace")


def public_runners() -> Dict[str, str]:
    """Every runner this project publishes, by a name a teacher recognises."""
    import runner

    folder = Path(runner.__file__).resolve().parent
    found: Dict[str, str] = {}
    for path in [folder / "runner.py"] + sorted((folder / "styles").glob("*_runner.py")):
        text = read_capped(path)
        if text is not None:
            found["reference" if path.name == "runner.py" else "styles/" + path.stem] = text
    return found


def known_solutions(folder: Path) -> Tuple[Dict[str, str], List[str]]:
    """The known solutions of `folder`, laid out as a class is (one folder with a runner.py or one
    NAME.py each), read as submissions are; and what could not be read, a line each."""
    found: Dict[str, str] = {}
    problems = []
    for submission in discover(folder):
        text = read_capped(submission.path) if submission.path else None
        if text is None:
            problems.append("known solution %s: %s" % (submission.student, submission.problem or "not readable"))
        else:
            found[submission.student] = text
    return found, problems


def make_runner(name: str, kind: str, text: str, tests: Sequence[Mapping] = ()) -> Runner:
    data = text.encode("utf-8", "replace")
    return Runner(name, kind, text, hashlib.sha256(data).hexdigest(), own_words(text, tests))


# --- the runner's own words ------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"%[-#0 +]*[\d*]*(?:\.[\d*]+)?[a-zA-Z]|\{[^{}]*\}")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")
_LETTERS = re.compile(r"[^\W\d_]{2,}")
# A line of a check's message that quotes the runner's stdout, stderr or runs.jsonl (expect.py).
_QUOTED = re.compile(r"^\s*\| ?(.*)$")
# What a message's quote is made of once normalised, not what the runner said: cut lines, the lab's paths.
_NOT_SAID = re.compile(r"\.\.\. \(#|<lab>|^\W*$")
# The most words kept of one runner (a file of a million strings must not cost a class its time).
MAX_WORDS = 2000


def normalised(text: str) -> str:
    """A word as two runners that say the same thing both spell it: placeholders and numbers as
    '#', case and spacing folded. '' when it is too short to tell runners apart."""
    said = _PLACEHOLDER.sub("#", text)
    said = _NUMBER.sub("#", said)
    said = _SPACE.sub(" ", said).strip().casefold()
    if len(said) < 10 or len(_LETTERS.findall(said)) < 2:
        return ""
    return said


def own_words(text: str, tests: Sequence[Mapping] = ()) -> Dict[str, str]:
    """What a runner says: the strings of its source (not its docstrings), the keys of the JSON it
    writes, and the output its gradings quoted; normalised word -> as said (inert text)."""
    words: Dict[str, str] = {}

    def add(said: str) -> None:
        for line in said.splitlines() or [said]:
            key = normalised(line)
            if key and key not in words and len(words) < MAX_WORDS:
                words[key] = inert(line.strip())[:200]

    for said in _strings(text):
        add(said)
    for test in tests:
        for line in str(test.get("message") or "").splitlines():
            quoted = _QUOTED.match(line)
            if quoted and not _NOT_SAID.search(normalised(quoted.group(1)) or "#"):
                add(_shape(quoted.group(1)))
    return words


def _shape(line: str) -> str:
    """A quoted output line; a runs.jsonl record as its shape (keys in order, kinds of values), which
    two runners written apart rarely share beyond what the lab fixes."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return line
    if not isinstance(value, dict):
        return line
    return "record " + ", ".join("%s: %s" % (key, type(item).__name__) for key, item in value.items())


def _strings(text: str) -> List[str]:
    """The string literals of a runner's source, docstrings left out, f-strings with '{}' for what
    they interpolate. Parsed, never run; a source that does not parse says nothing."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    docstrings = set()
    found = []
    try:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    docstrings.add(id(first.value))
            if isinstance(node, ast.JoinedStr):
                found.append(
                    "".join(
                        part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else "{}"
                        for part in node.values
                    )
                )
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found.append(node.value)
            if len(found) >= MAX_WORDS:
                break
    except RecursionError:
        return found
    return found


def vocabulary(public: Sequence[Runner]) -> FrozenSet[str]:
    """Words that tell no runner apart: the lab's, said by VOCABULARY public runners or more. Not
    the class's most said words: a class with many copies of one runner would lose that runner's."""
    counts: Dict[str, int] = {}
    for one in public:
        for word in one.words:
            counts[word] = counts.get(word, 0) + 1
    common = {word for word, count in counts.items() if count >= VOCABULARY}
    return frozenset(common)


_PUBLISHED: List[Runner] = []


def _published() -> List[Runner]:
    """The public runners, read once: what the lab makes every runner say is measured on them."""
    if not _PUBLISHED:
        _PUBLISHED.extend(make_runner(name, PUBLIC, text) for name, text in public_runners().items())
    return _PUBLISHED


def behaviour(first: Runner, second: Runner, lab_words: FrozenSet[str]) -> Tuple[float, List[str]]:
    mine = set(first.words) - lab_words
    theirs = set(second.words) - lab_words
    shared = sorted(mine & theirs)
    if len(shared) < MIN_SHARED_WORDS:
        return 0.0, shared
    return len(shared) / float(min(len(mine), len(theirs))), shared


# --- code ---------------------------------------------------------------------------------------------


def unavailable() -> Optional[str]:
    """Why code similarity cannot be computed here, in one line; None when it can."""
    try:
        import copydetect  # noqa: F401
    except ImportError:
        return "copydetect is not installed (pip install 'pyops-lab[similarity]')"
    except Exception as error:  # a broken install: said, never a traceback that stops a class
        return "copydetect cannot be loaded: %s" % (str(error).splitlines() or [type(error).__name__])[0]
    return None


class Coder:
    """copydetect's fingerprints of each runner's text, made once per text, compared per pair."""

    def __init__(self, templates: Sequence[str]) -> None:
        import logging

        import numpy
        from copydetect import __version__ as version
        from copydetect.detector import CodeFingerprint, compare_files

        logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # its "not tokenized" notes
        self._make, self._compare, self._numpy = CodeFingerprint, compare_files, numpy
        self.window = GUARANTEE - NOISE + 1
        boilerplate = []
        for text in templates:
            boilerplate.extend(self._fingerprint(text, window=1, boilerplate=None).hashes)
        self.boilerplate = numpy.unique(numpy.array(boilerplate)) if boilerplate else None
        template_sha = hashlib.sha256("\0".join(templates).encode("utf-8", "replace")).hexdigest()
        # What a cached score depends on besides the two texts.
        self.method = "copydetect %s k%d w%d t%s v%d" % (version, NOISE, self.window, template_sha[:16], CACHE_VERSION)
        self._prints: Dict[str, Any] = {}

    def _fingerprint(self, text: str, window: int, boilerplate: Any) -> Any:
        return self._make("runner.py", NOISE, window, boilerplate, True, "python", fp=io.StringIO(text))

    def fingerprint(self, runner: Runner) -> Any:
        if runner.sha256 not in self._prints:
            self._prints[runner.sha256] = self._fingerprint(runner.text, self.window, self.boilerplate)
        return self._prints[runner.sha256]

    def compare(self, first: Runner, second: Runner) -> Dict:
        """{"sides": [share of first, share of second], "slices": [[[start, end], ...], [...]]}."""
        one, other = self.fingerprint(first), self.fingerprint(second)
        if not one.hashes or not other.hashes:
            return {"sides": [0.0, 0.0], "slices": [[], []]}
        overlap, sides, slices = self._compare(one, other)
        if overlap < MIN_OVERLAP:
            sides = (0.0, 0.0)
        return {
            "sides": [round(float(min(side, 1.0)), 4) for side in sides],
            "slices": [_ranges(part) for part in slices],
        }


def _ranges(part: Any) -> List[List[int]]:
    if len(part) != 2 or not len(part[0]):
        return []
    return [[int(start), int(end)] for start, end in zip(part[0], part[1])]


# --- the class ---------------------------------------------------------------------------------------


def compare_class(
    students: Sequence[Runner],
    others: Sequence[Runner],
    *,
    templates: Sequence[str] = (),
    code_threshold: float = CODE_THRESHOLD,
    behaviour_threshold: float = BEHAVIOUR_THRESHOLD,
    cache: Optional[Path] = None,
) -> Outcome:
    """Every pair of `students`, and each against every one of `others`; the most similar first.
    Raises Unavailable when copydetect is not here."""
    why = unavailable()
    if why:
        raise Unavailable(why)
    started = time.monotonic()
    coder = Coder(templates)
    kept = _load_cache(cache, coder.method)
    used: Dict[str, Dict] = {}
    template_words: set = set()
    for text in templates:
        template_words.update(own_words(text))
    lab_words = vocabulary(_published()) | frozenset(template_words)
    work = [(a, b) for index, a in enumerate(students) for b in students[index + 1 :]]
    work += [(a, b) for a in students for b in others]
    compared = 0
    pairs = []
    for first, second in work:
        key, flipped = _key(first, second)
        found = kept.get(key) or used.get(key)
        if found is None:
            found = coder.compare(*((second, first) if flipped else (first, second)))
            compared += 1
            if cache is not None and compared % SAVE_EVERY == 0:  # a stopped check keeps what it compared
                _save_cache(cache, coder.method, {**kept, **used, key: found})
        used[key] = found
        sides = found["sides"][::-1] if flipped else found["sides"]
        slices = found["slices"][::-1] if flipped else found["slices"]
        code = max(sides)
        score, shared = behaviour(first, second, lab_words)
        pair = Pair(
            first,
            second,
            code,
            (sides[0], sides[1]),
            ([(s, e) for s, e in slices[0]], [(s, e) for s, e in slices[1]]),
            round(score, 4),
            shared,
        )
        pair.similar = code >= code_threshold or pair.behaviour >= behaviour_threshold
        pairs.append(pair)
    if cache is not None:
        _save_cache(cache, coder.method, used)
    pairs.sort(key=lambda pair: (-pair.rank, -pair.code, pair.first.name, pair.second.kind, pair.second.name))
    return Outcome(
        pairs,
        len(students),
        len(others),
        compared,
        round(time.monotonic() - started, 1),
        code_threshold,
        behaviour_threshold,
    )


def _key(first: Runner, second: Runner) -> Tuple[str, bool]:
    """The cache's key of a pair (its two sha256 in order), and whether `first` is the second of it."""
    if first.sha256 <= second.sha256:
        return "%s %s" % (first.sha256, second.sha256), False
    return "%s %s" % (second.sha256, first.sha256), True


def _load_cache(path: Optional[Path], method: str) -> Dict[str, Dict]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or cut short: compared anew
    if not isinstance(data, dict) or data.get("method") != method or not isinstance(data.get("pairs"), dict):
        return {}  # another copydetect or template: its scores are not these
    return {key: value for key, value in data["pairs"].items() if _valid(value)}


def _valid(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("sides"), list)
        and len(value["sides"]) == 2
        and all(isinstance(side, (int, float)) for side in value["sides"])
        and isinstance(value.get("slices"), list)
        and len(value["slices"]) == 2
    )


def _save_cache(path: Path, method: str, pairs: Mapping[str, Dict]) -> None:
    """The pairs of this run only: a submission changed since leaves no score behind."""
    report.write_atomically(path, json.dumps({"method": method, "pairs": pairs}, separators=(",", ":")))


# --- what a teacher reads ------------------------------------------------------------------------------

CSV_COLUMNS = [
    "first",
    "second",
    "second is",
    "similar",
    "code",
    "code, share of first",
    "code, share of second",
    "behaviour",
    "words in common",
    "some of them",
]


def csv_text(outcome: Outcome) -> str:
    """similarity.csv: every pair compared, the most similar first; names and words as inert cells."""
    from conformance.classroom.store import safe_cell

    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for pair in outcome.pairs:
        words = [pair.first.words.get(word, word) for word in pair.shared[:5]]
        writer.writerow(
            [
                safe_cell(pair.first.name),
                safe_cell(pair.second.name),
                pair.second.kind,
                "similar" if pair.similar else "",
                "%.2f" % pair.code,
                "%.2f" % pair.code_sides[0],
                "%.2f" % pair.code_sides[1],
                "%.2f" % pair.behaviour,
                len(pair.shared),
                safe_cell(" | ".join(words)),
            ]
        )
    return text.getvalue()


def shown_lines(text: str, ranges: Sequence[Tuple[int, int]]) -> List[Tuple[Optional[int], List[Tuple[str, bool]]]]:
    """The lines of `text` around its matched `ranges`, each as (line number, [(piece, matched)]);
    (None, []) where lines are left out. At most SHOWN_LINES lines."""
    lines = text.split("\n")
    starts = []
    position = 0
    for line in lines:
        starts.append(position)
        position += len(line) + 1
    marked = [False] * len(text)
    for start, end in ranges:
        for index in range(max(0, start), min(len(text), end)):
            marked[index] = True
    keep: set = set()
    for number, line in enumerate(lines):
        begin = starts[number]
        if any(marked[begin : begin + len(line)]):
            keep.update(range(number - CONTEXT_LINES, number + CONTEXT_LINES + 1))
    shown: List[Tuple[Optional[int], List[Tuple[str, bool]]]] = []
    previous = -1
    for number in sorted(n for n in keep if 0 <= n < len(lines)):
        if len(shown) >= SHOWN_LINES:
            shown.append((None, []))
            break
        if number != previous + 1:
            shown.append((None, []))
        begin = starts[number]
        pieces: List[Tuple[str, bool]] = []
        for offset, char in enumerate(lines[number]):
            flag = marked[begin + offset]
            if pieces and pieces[-1][1] == flag:
                pieces[-1] = (pieces[-1][0] + char, flag)
            else:
                pieces.append((char, flag))
        shown.append((number + 1, pieces))
        previous = number
    return shown


def runners_of_class(store: Any, records: Mapping[str, Mapping]) -> Tuple[List[Runner], List[str]]:
    """Each student's runner as the store keeps it (read capped, through no link), with the checks
    its grading quoted; and the students with nothing to compare, a line each."""
    from conformance.classroom.store import RUNNER

    found, missing = [], []
    for student in sorted(records):
        if not layout.is_student_folder_name(student):
            continue
        text = read_capped(store.folder / student / RUNNER)
        if text is None:
            missing.append(student)
            continue
        found.append(make_runner(student, STUDENT, text, store.tests(student)))
    return found, missing


def others_of(known: Optional[Path]) -> Tuple[List[Runner], List[str]]:
    """The public runners, and the known solutions of `known`, as Runners; what could not be read."""
    others = [make_runner(name, PUBLIC, text) for name, text in public_runners().items()]
    problems: List[str] = []
    if known is not None:
        solutions, problems = known_solutions(known)
        others += [make_runner(name, KNOWN, text) for name, text in solutions.items()]
    return others, problems


def templates_of(paths: Iterable[Path]) -> List[str]:
    texts = []
    for path in paths:
        text = read_capped(path)
        if text is None:
            raise Unavailable("--template %s: not a readable regular file" % path)
        texts.append(text)
    return texts


def say(message: str) -> None:
    print(inert(message), file=sys.stderr, flush=True)


def for_class(
    store: Any,
    records: Mapping[str, Mapping],
    known: Optional[Path],
    templates: Sequence[Path],
    settings: Any,
    cache: Optional[Path],
) -> Outcome:
    """The class command's similarity check over a graded class (`settings`: config.SimilarityConfig).
    Raises Unavailable, saying why in one line."""
    why = unavailable()
    if why:
        raise Unavailable(why)
    template_texts = templates_of(templates)
    students, missing = runners_of_class(store, records)
    others, problems = others_of(known)
    outcome = compare_class(
        students,
        others,
        templates=template_texts,
        code_threshold=settings.code,
        behaviour_threshold=settings.behaviour,
        cache=cache,
    )
    outcome.skipped = ["%s: no runner to compare" % student for student in missing] + problems
    return outcome

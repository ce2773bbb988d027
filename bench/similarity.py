"""Benchmark the class's similarity check: does it flag copies, and only copies, and how fast?

    python bench/similarity.py [--mutants N] [--size N] [--quick]

The class: runners the project's tests grade (zoo mutants of the correct runners, the hand-written
runners of tests/ and tests/hostile/) and disguised copies of the reference, of a style and of a
classmate: renamed, reordered, recommented, reformatted, all four at once, and one rewritten by hand
keeping its messages. Each runner has a lineage (the runner it comes from: a mutant's base, a copy's
source, else itself); a pair is a copy when both share a lineage. Compared as `pyops-conformance
class` compares a class (conformance/classroom/similarity.py, at the shipped thresholds), it prints:

* recall: the disguised copies flagged similar to their source, and the zoo's mutants flagged
  similar to the public runner they were made from (goal: every disguised copy);
* false positives: pairs of runners of different lineages flagged (goal: none), and the scores
  of the 9 correct runners of runner/ between each other (the highest, against the thresholds);
* the time to compare a class of SIZE (default 200) submissions on this machine's cores, with no
  cache, and again with one submission changed (goal: under a minute).

`--quick` is the short form (a class of 60, a timing class of 60). Exit status 1 when a goal is
missed, 2 on bad input, in one line.
"""

import ast
import io
import os
import random
import sys
import tempfile
import time
import tokenize
from pathlib import Path
from typing import Dict, List, Tuple

from oneline import Parser, fail  # this folder's shared parts

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the zoo lives with the project's tests, not in the package

from conformance.classroom import similarity  # noqa: E402
from conformance.selftest.zoo import BASES, MUTANTS, mutate  # noqa: E402

PUBLIC = {"reference": REPO / "runner" / "runner.py"}
PUBLIC.update({"styles/" + path.stem: path for path in sorted((REPO / "runner" / "styles").glob("*_runner.py"))})
TIME_GOAL_S = 60.0

# --- disguises: what a student does to a runner to hide where it came from ----------------------------


def renamed(text: str) -> str:
    """Every name the runner defines (functions, classes, arguments, variables) renamed consistently."""
    tree = ast.parse(text)
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.arg):
            own.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
    own -= {"main", "self", "__name__"}
    names = {name: "v%d_%s" % (index, name[::-1].strip("_") or "x") for index, name in enumerate(sorted(own))}
    out = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.NAME and token.string in names:
            token = token._replace(string=names[token.string])
        out.append(token)
    return tokenize.untokenize(out)


def reordered(text: str) -> str:
    """The module's top-level functions and classes in the reverse order (what runs stays last)."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    blocks = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    if len(blocks) < 2:
        return text
    start = min(_first_line(node) for node in blocks)
    end = max(node.end_lineno or node.lineno for node in blocks)
    middle = [lines[_first_line(node) - 1 : node.end_lineno] for node in blocks]
    moved = [line for block in reversed(middle) for line in block + ["\n", "\n"]]
    return "".join(lines[: start - 1] + moved + lines[end:])


def _first_line(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno] + [decorator.lineno for decorator in decorators])  # type: ignore[attr-defined]


def recommented(text: str) -> str:
    """Comments and docstrings dropped, other comments written in their place."""
    out = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            token = token._replace(string="# (my own note)")
        out.append(token)
    tree = ast.parse(tokenize.untokenize(out))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                value.value = "Written for the lab."
    return "# my runner for the pyops lab\n" + ast.unparse(tree) + "\n"


def reformatted(text: str) -> str:
    """The same code laid out anew: quotes, spacing, parentheses, line breaks (ast.unparse), and
    two-space indentation."""
    out = []
    for line in ast.unparse(ast.parse(text)).splitlines():
        stripped = line.lstrip(" ")
        out.append(" " * ((len(line) - len(stripped)) // 2) + stripped)
    return "\n".join(out) + "\n"


def everything(text: str) -> str:
    return reformatted(recommented(reordered(renamed(text))))


DISGUISES = {
    "renamed": renamed,
    "reordered": reordered,
    "recommented": recommented,
    "reformatted": reformatted,
    "all four": everything,
}

# styles/int_timeout_runner.py written again by hand: a class instead of functions and globals, a
# loop of its own, other names and order; its messages kept word for word.
REWRITTEN = '''"""My runner for the pyops lab."""
import argparse, errno, fcntl, json, os, signal, subprocess, sys, time
from datetime import datetime, timezone
from pathlib import Path

BASE = Path("/root/pyops/sub")
SCRIPT = "/opt/fixtures/pyops/bin/apply.sh"


class Runner:
    def __init__(self):
        self.child = None
        self.stopping = False
        signal.signal(signal.SIGTERM, self.on_term)

    def on_term(self, number, frame):
        self.stopping = True
        if self.child:
            try:
                os.killpg(self.child.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def launch(self, argv, limit):
        self.child = subprocess.Popen(argv, start_new_session=True)
        try:
            code = self.child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.child.wait()
            sys.stderr.write("timeout: command killed after %d seconds\\n" % limit)
            code = 124
        self.child = None
        return code

    def record(self, argv, number, code, stamp, began):
        line = dict(ts=stamp, cmd=argv, attempt=number, rc=code)
        line["duration_ms"] = int(1000 * (time.monotonic() - began))
        with open(BASE / "runs.jsonl", "a") as out:
            out.write(json.dumps(line) + "\\n")

    def run(self, opts):
        argv = [a for a in opts.cmd]
        if argv[:1] == ["--"]:
            argv = argv[1:]
        if len(argv) == 0:
            sys.stderr.write("usage: runner.py run [--timeout S] [--retries N] [--backoff S] -- CMD...\\n")
            return 2
        number, code = 0, 0
        while number <= opts.retries:
            number += 1
            stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
            began = time.monotonic()
            code = self.launch(argv, opts.timeout)
            self.record(argv, number, 143 if self.stopping else code, stamp, began)
            if self.stopping:
                return 143
            if code == 0:
                break
            if number <= opts.retries:
                pause = opts.backoff * 2 ** (number - 1)
                sys.stderr.write("attempt %d failed (rc=%d), retrying in %d s\\n" % (number, code, pause))
                until = time.monotonic() + pause
                while not self.stopping and time.monotonic() < until:
                    time.sleep(0.1)
                if self.stopping:
                    return 143
        return code

    def apply(self, opts):
        done = BASE / "state" / (opts.name + ".done")
        holder = open(BASE / "state" / "lock", "w")
        try:
            fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as problem:
            if problem.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            sys.stderr.write("another run in progress\\n")
            return 3
        if done.exists():
            print("already applied")
        elif opts.dry_run:
            print("would run %s %s and then create %s" % (SCRIPT, opts.name, done))
        else:
            code = self.launch([SCRIPT, opts.name], None)
            if self.stopping:
                return 143
            if code:
                sys.stderr.write("apply.sh failed with exit code %d, no marker\\n" % code)
                return 1
            done.write_text("done\\n")
        return 0


if __name__ == "__main__":
    top = argparse.ArgumentParser()
    commands = top.add_subparsers(dest="command")
    one = commands.add_parser("run")
    one.add_argument("--timeout", type=int)
    one.add_argument("--retries", type=int, default=0)
    one.add_argument("--backoff", type=int, default=1)
    one.add_argument("cmd", nargs=argparse.REMAINDER)
    two = commands.add_parser("apply")
    two.add_argument("--dry-run", action="store_true")
    two.add_argument("name")
    opts = top.parse_args()
    runner = Runner()
    if opts.command in ("run", "apply"):
        sys.exit(getattr(runner, opts.command)(opts))
    top.print_help(sys.stderr)
    sys.exit(2)
'''
REWRITTEN_FROM = "styles/int_timeout_runner"

# --- the class ---------------------------------------------------------------------------------------


def test_runners() -> Dict[str, str]:
    """The hand-written runners of the project's tests: tests/hostile/*.py, and the module-level
    strings of tests/test_*.py that are whole runners (they import sys and parse as Python)."""
    found = {}
    for path in sorted((REPO / "tests" / "hostile").glob("*.py")):
        found["hostile/" + path.stem] = path.read_text(encoding="utf-8")
    for path in sorted((REPO / "tests").glob("test_*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)):
                continue
            text = node.value.value
            target = node.targets[0]
            if not isinstance(text, str) or not isinstance(target, ast.Name) or "import" not in text:
                continue
            if "sys" not in text or len(text.splitlines()) < 8:
                continue
            try:
                ast.parse(text)
            except SyntaxError:
                continue  # a template with placeholders
            found["%s/%s" % (path.stem, target.id.lower())] = text
    return found


def make_class(mutants: int, seed: int = 40) -> Tuple[Dict[str, str], Dict[str, str], Dict[str, str]]:
    """(student -> text, student -> lineage, disguised copy -> its source's lineage)."""
    texts: Dict[str, str] = {}
    lineage: Dict[str, str] = {}
    rng = random.Random(seed)
    by_base: Dict[str, List] = {}
    for mutant in MUTANTS:
        by_base.setdefault(mutant.base, []).append(mutant)
    chosen = []
    while len(chosen) < min(mutants, len(MUTANTS)):  # round robin over the bases, so every lineage is there
        for base in sorted(by_base):
            if by_base[base] and len(chosen) < mutants:
                chosen.append(by_base[base].pop(rng.randrange(len(by_base[base]))))
    public_of = {path.resolve(): name for name, path in PUBLIC.items()}
    for mutant in chosen:
        base = public_of[BASES[mutant.base].resolve()]
        texts["mutant-" + mutant.name] = mutate(mutant, BASES[mutant.base].read_text(encoding="utf-8"))
        lineage["mutant-" + mutant.name] = base
    for name, text in test_runners().items():
        student = "test-" + name.replace("/", "-").replace("_", "-")
        texts[student] = text
        lineage[student] = student
    classmate = max((s for s in texts if s.startswith("test-")), key=lambda s: len(texts[s]))
    copies: Dict[str, str] = {}
    sources = [("reference", PUBLIC["reference"].read_text()), ("styles/timer_runner", "")]
    sources[1] = (sources[1][0], PUBLIC[sources[1][0]].read_text())
    sources.append((classmate, texts[classmate]))
    for source, text in sources:
        for disguise, change in DISGUISES.items():
            student = "copy-of-%s-%s" % (source.replace("/", "-"), disguise.replace(" ", "-"))
            texts[student] = change(text)
            lineage[student] = lineage.get(source, source)
            copies[student] = lineage[student]
    texts["copy-rewritten-by-hand"] = REWRITTEN
    lineage["copy-rewritten-by-hand"] = REWRITTEN_FROM
    copies["copy-rewritten-by-hand"] = REWRITTEN_FROM
    return texts, lineage, copies


def measure(texts: Dict[str, str], cache=None) -> similarity.Outcome:
    students = [similarity.make_runner(name, similarity.STUDENT, text) for name, text in sorted(texts.items())]
    others = [similarity.make_runner(name, similarity.PUBLIC, path.read_text()) for name, path in PUBLIC.items()]
    return similarity.compare_class(students, others, cache=cache)


def lineage_of(runner: similarity.Runner, lineage: Dict[str, str]) -> str:
    return lineage[runner.name] if runner.kind == similarity.STUDENT else runner.name


def grown(texts: Dict[str, str], size: int) -> Dict[str, str]:
    """A class of `size`: the class, then copies of it each changed a little (a line of its own),
    so that every one is a distinct submission to compare."""
    names = sorted(texts)
    out = dict(texts)
    index = 0
    while len(out) < size:
        name = names[index % len(names)]
        out["%s-%d" % (name, index)] = texts[name] + "\n# submission %d\nSUBMISSION = %d\n" % (index, index)
        index += 1
    return dict(sorted(out.items())[:size])


def main() -> int:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=40, help="zoo mutants in the class (default: 40)")
    parser.add_argument("--size", type=int, default=200, help="submissions in the timed class (default: 200)")
    parser.add_argument("--quick", action="store_true", help="the short form: a class of 60 and a timed class of 60")
    options = parser.parse_args()
    if options.mutants < 0:
        fail("--mutants needs 0 or more")
    if options.size < 2:
        fail("--size needs 2 or more")
    if options.quick:
        options.size = min(options.size, 60)
    why = similarity.unavailable()
    if why:
        fail(why)
    texts, lineage, copies = make_class(options.mutants)
    outcome = measure(texts)
    print(
        "class: %d runners (%d zoo mutants, %d runners of the tests, %d disguised copies); thresholds code %.2f, "
        "behaviour %.2f"
        % (
            len(texts),
            sum(name.startswith("mutant-") for name in texts),
            sum(name.startswith("test-") for name in texts),
            len(copies),
            outcome.code_threshold,
            outcome.behaviour_threshold,
        )
    )
    found = {name: False for name in copies}
    by_disguise: Dict[str, List[str]] = {}
    mutants_flagged = mutants = 0
    false = []
    for pair in outcome.pairs:
        same = lineage_of(pair.first, lineage) == lineage_of(pair.second, lineage)
        for one, other in ((pair.first, pair.second), (pair.second, pair.first)):
            if one.kind == similarity.STUDENT and one.name in copies and lineage_of(other, lineage) == copies[one.name]:
                found[one.name] = found[one.name] or pair.similar
        if pair.first.name.startswith("mutant-") and pair.second.kind == similarity.PUBLIC and same:
            mutants += 1
            mutants_flagged += pair.similar
        if pair.similar and not same:
            false.append(pair)
    for name, flagged in sorted(found.items()):
        by_disguise.setdefault(name.rsplit("-", 1)[-1] if "by-hand" not in name else "by-hand", []).append(
            "%s%s" % ("" if flagged else "MISSED ", name)
        )
    best: Dict[str, Tuple[float, float]] = {}
    for pair in outcome.pairs:
        if pair.first.name in copies and lineage_of(pair.second, lineage) == copies[pair.first.name]:
            was = best.get(pair.first.name, (0.0, 0.0))
            best[pair.first.name] = (max(was[0], pair.code), max(was[1], pair.behaviour))
    print("recall: %d of %d disguised copies flagged" % (sum(found.values()), len(found)))
    for name in sorted(copies):
        code, said = best.get(name, (0.0, 0.0))
        print("  %-8s %-52s code %.2f  behaviour %.2f" % ("flagged" if found[name] else "MISSED", name, code, said))
    print("zoo mutants flagged similar to their public base: %d of %d" % (mutants_flagged, mutants))
    print("false positives: %d pairs of different lineages flagged" % len(false))
    for pair in false[:10]:
        print("  %s ~ %s: code %.2f, behaviour %.2f" % (pair.first.label, pair.second.label, pair.code, pair.behaviour))
    public = [similarity.make_runner(name, similarity.STUDENT, path.read_text()) for name, path in PUBLIC.items()]
    apart = similarity.compare_class(public, [])
    top = apart.pairs[0]
    print(
        "the 9 correct runners between each other: highest code %.2f (%s ~ %s), highest behaviour %.2f, flagged %d"
        % (top.code, top.first.name, top.second.name, max(p.behaviour for p in apart.pairs), len(apart.similar))
    )
    timed = grown(texts, options.size)
    with tempfile.TemporaryDirectory(prefix="pyops-similarity-") as scratch:
        cache = Path(scratch) / similarity.CACHE_NAME
        started = time.monotonic()
        first = measure(timed, cache)
        wall = time.monotonic() - started
        changed = dict(timed)
        one = sorted(changed)[0]
        changed[one] += "\nCHANGED = 1\n"
        started = time.monotonic()
        again = measure(changed, cache)
        rerun = time.monotonic() - started
    cores = len(os.sched_getaffinity(0))
    print(
        "%d submissions, %d pairs (with the 9 public runners), %d cores: %.1f s; "
        "one changed: %.1f s (%d pairs compared)" % (len(timed), len(first.pairs), cores, wall, rerun, again.compared)
    )
    missed = not all(found.values()) or bool(false) or bool(apart.similar) or wall > TIME_GOAL_S
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

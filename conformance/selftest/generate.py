"""Mutants of the reference runner, made by a mutation-testing library: the wrong runners no one wrote.

The zoo (zoo.py) holds the mistakes someone thought of; these are the ones a machine finds, one
small change each, over the whole of runner/runner.py. cosmic-ray makes them: its operators (and
three of the lab's own, below, written as cosmic-ray operators) find the places in the file's
syntax tree where they apply, and each mutant is one operator applied at one place, as cosmic-ray's
`MutationVisitor` applies it. cosmic-ray's own `exec` is not used: it rewrites the
file in place and takes "the tests failed" from one command's exit code, where this suite grades a
copy of the file as a learner's (conformance/classroom), many at once, each bounded, and asks which
clauses failed.

Which operators: those that make a mistake a runner could really have (a boundary, a negated test,
a swallowed exception, a removed call, a wrong signal, a renamed key the lab pins), not every
arithmetic operator at every `%` that formats a message (cosmic-ray's full set makes 1084 mutants of
this file, two thirds of them binary-operator swaps in string formatting).

A mutant is named by what it changes, not where: `key` is the operator, the line before and the line
after, so that the reviewed list of equivalent mutants (equivalent.toml) still names the same mutants
when lines elsewhere move.
"""

import copy
import difflib
import hashlib
from dataclasses import dataclass
from typing import Iterator, List, Sequence, Tuple

from cosmic_ray.ast import get_ast
from cosmic_ray.operators.operator import Example, Operator
from cosmic_ray.plugins import get_operator
from parso.python.tree import Keyword, Name, PythonNode, String

# cosmic-ray's operators kept (see above): boundaries and negations of comparisons, arithmetic
# swaps, numbers one off, conditions negated, booleans flipped, loops and exception handlers defeated.
LIBRARY_OPERATORS = (
    "core/NumberReplacer",
    "core/ReplaceComparisonOperator_Eq_NotEq",
    "core/ReplaceComparisonOperator_NotEq_Eq",
    "core/ReplaceComparisonOperator_Lt_LtE",
    "core/ReplaceComparisonOperator_LtE_Lt",
    "core/ReplaceComparisonOperator_Gt_GtE",
    "core/ReplaceComparisonOperator_GtE_Gt",
    "core/ReplaceComparisonOperator_Is_IsNot",
    "core/ReplaceComparisonOperator_IsNot_Is",
    "core/ReplaceBinaryOperator_Add_Sub",
    "core/ReplaceBinaryOperator_Sub_Add",
    "core/ReplaceBinaryOperator_Mul_Div",
    "core/ReplaceBinaryOperator_Div_Mul",
    "core/ReplaceBinaryOperator_FloorDiv_Mul",
    "core/ReplaceBinaryOperator_BitOr_BitAnd",
    "core/ReplaceUnaryOperator_USub_UAdd",
    "core/AddNot",
    "core/ReplaceTrueWithFalse",
    "core/ReplaceFalseWithTrue",
    "core/ReplaceAndWithOr",
    "core/ReplaceOrWithAnd",
    "core/ReplaceBreakWithContinue",
    "core/ReplaceContinueWithBreak",
    "core/ExceptionReplacer",
    "core/ZeroIterationForLoop",
)

# cosmic-ray's ExceptionReplacer names an exception of its own, defined where its workers run; a
# runner graded as a learner's file does not have it. An empty tuple is what it means there: an
# except clause that matches nothing.
_LIBRARY_EXCEPTION = "CosmicRayTestingException"
_MATCHES_NOTHING = "()"


def as_graded(text: str) -> str:
    """A mutant's text as it is graded: cosmic-ray's own exception replaced by what it means."""
    return text.replace(_LIBRARY_EXCEPTION, _MATCHES_NOTHING)


# The lab's own operators: what a runner names that the lab's behaviour hangs on.
# A signal, errno, lock or open flag swapped for its likely confusion.
CONSTANTS = {
    "SIGKILL": "SIGTERM",
    "SIGTERM": "SIGKILL",
    "SIGINT": "SIGTERM",
    "SIGCHLD": "SIGCONT",
    "SIGCONT": "SIGCHLD",
    "SIGPIPE": "SIGINT",
    "SIGXFSZ": "SIGINT",
    "EAGAIN": "EINTR",
    "EACCES": "EPERM",
    "ENOENT": "EEXIST",
    "ENOTDIR": "EISDIR",
    "LOCK_EX": "LOCK_SH",
    "LOCK_NB": "LOCK_UN",
    "O_APPEND": "O_TRUNC",
    "O_CREAT": "O_EXCL",
    "WNOHANG": "WUNTRACED",
}
# Strings the lab pins (its keys, options, actions): each renamed, as a typo would.
PINNED_STRINGS = frozenset(
    {"ts", "cmd", "rc", "attempt", "duration_ms", "run", "apply", "--timeout", "--retries", "--backoff", "--"}
)


class ReplaceLabConstant(Operator):
    """signal.SIGKILL -> signal.SIGTERM, fcntl.LOCK_EX -> fcntl.LOCK_SH, ... (CONSTANTS)."""

    def mutation_positions(self, node):  # type: ignore[no-untyped-def]
        if isinstance(node, Name) and node.value in CONSTANTS and _is_attribute(node):
            yield (node.start_pos, node.end_pos)

    def mutate(self, node, index):  # type: ignore[no-untyped-def]
        return Name(CONSTANTS[node.value], node.start_pos, prefix=node.prefix)

    @classmethod
    def examples(cls):  # type: ignore[no-untyped-def]
        return (Example("os.killpg(g, signal.SIGKILL)", "os.killpg(g, signal.SIGTERM)"),)


class RenamePinnedString(Operator):
    """ "--timeout" -> "--timeout_", and a key quoted inside a literal ('{"rc": %d}' -> '{"rc_": %d}',
    a record built by hand): a key, option or action the lab names, misspelt."""

    def mutation_positions(self, node):  # type: ignore[no-untyped-def]
        if isinstance(node, String):
            for _ in _pinned_in(node):
                yield (node.start_pos, node.end_pos)

    def mutate(self, node, index):  # type: ignore[no-untyped-def]
        _, end = _pinned_in(node)[index]
        value = node.value[:end] + "_" + node.value[end:]
        return String(value, node.start_pos, prefix=node.prefix)

    @classmethod
    def examples(cls):  # type: ignore[no-untyped-def]
        return (
            Example('parse("--timeout")', 'parse("--timeout_")'),
            Example("""line = '{"ts": %s, "rc": %d}'""", """line = '{"ts": %s, "rc_": %d}'""", occurrence=1),
        )


class RemoveCall(Operator):
    """A call made as a statement, made no more: `os.killpg(g, SIGKILL)` -> `pass`. What a forgotten
    line does: no kill, no flush, no wait, no lock."""

    def mutation_positions(self, node):  # type: ignore[no-untyped-def]
        if _is_call_statement(node):
            yield (node.start_pos, node.end_pos)

    def mutate(self, node, index):  # type: ignore[no-untyped-def]
        return Keyword("pass", node.start_pos, prefix=node.get_first_leaf().prefix)

    @classmethod
    def examples(cls):  # type: ignore[no-untyped-def]
        return (Example("def f():\n    g(1)\n", "def f():\n    pass\n"),)


LAB_OPERATORS = {
    "lab/ReplaceLabConstant": ReplaceLabConstant,
    "lab/RenamePinnedString": RenamePinnedString,
    "lab/RemoveCall": RemoveCall,
}
OPERATORS = LIBRARY_OPERATORS + tuple(LAB_OPERATORS)


def _is_attribute(node: Name) -> bool:
    """`X` in `module.X` (a name after a dot), not a local that happens to be called that."""
    trailer = node.parent
    return trailer is not None and trailer.type == "trailer" and trailer.children[0] == "."


def _pinned_in(node: String) -> List[Tuple[int, int]]:
    """Where in a plain string literal a pinned word stands: the whole literal, or each `"word"`
    quoted inside it; (start, end) of the word within the literal's source."""
    text = node.value
    if text[:1] not in "\"'" or text[:3] in ('"""', "'''"):
        return []  # prefixed (b"", f"") or a docstring: never one of the lab's plain words
    if text[1:-1] in PINNED_STRINGS:
        return [(1, len(text) - 1)]
    found = []
    for word in sorted(PINNED_STRINGS):
        at = text.find('"%s"' % word, 1)
        while at != -1:
            found.append((at + 1, at + 1 + len(word)))
            at = text.find('"%s"' % word, at + 1)
    return sorted(found)


def _is_call_statement(node: PythonNode) -> bool:
    """An expression statement that is only a call: `f(x)` or `a.b(c)` on a line of its own."""
    if not isinstance(node, PythonNode) or node.type not in ("atom_expr", "power"):
        return False
    parent = node.parent
    if parent is None or parent.type != "simple_stmt" or parent.children[0] is not node:
        return False
    last = node.children[-1]
    return last.type == "trailer" and last.children[0] == "("


@dataclass(frozen=True)
class Mutant:
    key: str  # what it changes: operator, line before, line after (stable when other lines move)
    operator: str
    occurrence: int
    line: int
    before: str
    after: str
    text: str  # the whole mutated runner.py

    @property
    def name(self) -> str:
        """A short name for reports: the operator and a digest of the key."""
        return "%s-%s" % (self.operator.split("/")[-1], hashlib.sha256(self.key.encode()).hexdigest()[:8])

    def diff(self, source: str) -> str:
        return "".join(
            difflib.unified_diff(
                source.splitlines(True), self.text.splitlines(True), "runner.py", "runner.py (mutant)", n=2
            )
        )


def operator(name: str) -> Operator:
    if name in LAB_OPERATORS:
        return LAB_OPERATORS[name]()
    return get_operator(name)()


def generate(source: str, operators: Sequence[str] = OPERATORS) -> List[Mutant]:
    """Every mutant of `source` the operators make that still compiles, in a stable order."""
    mutants: List[Mutant] = []
    seen: dict = {}
    tree = get_ast(source)
    for name in operators:
        for occurrence, text in _mutations(tree, name):
            text = as_graded(text)
            if text == source:
                continue
            try:
                compile(text, "runner.py", "exec")
            except SyntaxError:
                continue  # stillborn: it would fail everything and prove nothing
            line, before, after = _changed_line(source, text)
            key = "%s | %s | %s" % (name, before, after)
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:  # the same change in two places: the key says which
                key += " | #%d" % seen[key]
            mutants.append(Mutant(key, name, occurrence, line, before, after, text))
    return mutants


def _mutations(tree, name: str) -> Iterator[Tuple[int, str]]:  # type: ignore[no-untyped-def]
    """Each occurrence of operator `name` applied alone to `tree` (a parse of the runner), as
    cosmic-ray's MutationVisitor does (tests/test_mutation.py holds the two equal), the tree given
    back as it was after each. The visitor parses the runner again (or copies its parse) and walks
    all of it for each mutant, which was most of the time; here one walk finds where each
    occurrence is (in the visitor's order: a node before its children), and each mutant is a copy
    of that one node, mutated, put in the node's place while the tree's code is read."""
    mutator = operator(name)
    places: List[Tuple[Tuple[int, ...], int]] = []  # per occurrence: the node's path, its position

    def find(node, path: Tuple[int, ...]) -> None:  # type: ignore[no-untyped-def]
        places.extend((path, index) for index, _ in enumerate(mutator.mutation_positions(node)))
        for number, child in enumerate(getattr(node, "children", ())):
            find(child, path + (number,))

    find(tree, ())
    for occurrence, (path, index) in enumerate(places):
        if not path:  # the whole module: a copy of all of it
            yield occurrence, mutator.mutate(copy.deepcopy(tree), index).get_code()
            continue
        parent = tree
        for number in path[:-1]:
            parent = parent.children[number]
        node = parent.children[path[-1]]
        # A copy of the node alone (its parent shared, not copied): operators mutate in place.
        mutated = mutator.mutate(copy.deepcopy(node, {id(parent): parent}), index)
        kept = parent.children
        parent.children = kept[: path[-1]] + ([] if mutated is None else [mutated]) + kept[path[-1] + 1 :]
        try:
            yield occurrence, tree.get_code()
        finally:
            parent.children = kept


def _changed_line(source: str, text: str) -> Tuple[int, str, str]:
    """The first line that differs (1-based), as it was and as it is, stripped."""
    old, new = source.splitlines(), text.splitlines()
    for number, (was, now) in enumerate(zip(old, new), start=1):
        if was != now:
            return number, was.strip(), now.strip()
    return min(len(old), len(new)) + 1, "", ""

"""`pyops-conformance selftest`: the suite measured against runners whose right verdict is known.

For a lab author who edited a check, added a clause or ported the lab, in one command:

1. the bundled correct runners (the reference and runner/styles) are graded twice each: every one
   must pass, with the same verdict for every check in both rounds;
2. the zoo's wrong runners (zoo.py) are graded: each must fail the checks of the clause it breaks and
   lose points there only (and where the zoo says the same line of code is judged again);
3. with `--mutants N` (or `all`), N mutants of the reference generated with cosmic-ray
   (generate.py), chosen by `--seed`, are graded: the kill matrix (kill.py), where a survivor that
   equivalent.toml does not list, a timeout or an error is an expectation not met.

`--only correct` or `--only zoo` grades one kind of the bundled runners (and, with `--mutants`, the
mutants): a run that has graded the correct runners elsewhere need not grade them again.

Every grading runs as a class's does (classroom/queue.py): J at a time, each in scratch folders of its
own, each bounded. It prints one line per grading, then the summary; `--json` writes everything
(every expectation, the kill matrix with each mutant's diff), `--html` a one-file page: a heat map of
runners x clauses and the survivors with their diffs. Exit 0 when every expectation holds, 1 when
one does not, 2 when it cannot run (no correct runner here: the lab image has none).
"""

import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from conformance.classroom import grading
from conformance.classroom.queue import Job, Settings, run_local, stop_on_signals
from conformance.lab.config import DEFAULT_FILE
from conformance.reporting import provenance, report
from conformance.usage import (
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PASSED,
    PYTHON_VAR,
    Parser,
    UsageError,
    default_python,
)

KINDS = ("correct", "zoo")  # the bundled runners, by what the self-test expects of them
# A correct runner graded twice by default, each round under a seed of its own (lab/draws.py): a
# verdict that can differ between two runs is a defect, and so is one that holds for some draws only.
ROUNDS = 2
DEFAULT_SEED = 29
DEFAULT_TIMEOUT_S = 300  # a grading of the core profile takes 10 to 40 s on two cores


@dataclass
class Graded:
    """One runner of the self-test, its gradings and what is wrong with them (nothing: as expected)."""

    kind: str  # "correct", "zoo" or "mutant"
    name: str
    reports: List[Optional[Dict]] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)
    detail: Dict = field(default_factory=dict)
    outcome: Any = None  # a generated mutant's kill.Outcome (kill.py imports cosmic-ray: not at start-up)


def parser() -> Parser:
    parser = Parser(
        prog="pyops-conformance selftest",
        description="Grade the bundled correct and wrong runners (and generated mutants) and check every verdict.",
    )
    parser.add_argument(
        "--mutants", metavar="N", help="also grade N generated mutants of the reference (or `all`), chosen by --seed"
    )
    parser.add_argument(
        "-k", dest="keyword", help="only the bundled runners whose name holds this (runner, blocking-lock, ...)"
    )
    parser.add_argument(
        "--only",
        choices=KINDS,
        help="grade only the bundled correct runners, or only the zoo's wrong runners (and the mutants "
        "--mutants asks for)",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="which mutants (default: %(default)s)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=ROUNDS,
        metavar="N",
        help="grade each correct runner N times, each under a new seed of drawn values (default: %(default)s)",
    )
    parser.add_argument("-j", dest="parallel", type=int, help="gradings at once (default: the CPUs, at least 2)")
    parser.add_argument("-n", dest="workers", type=int, default=4, help="checks at once within a grading")
    parser.add_argument(
        "--python",
        default=default_python(),
        help="interpreter that runs the runners (default: $%s, else the suite's base python3)" % PYTHON_VAR,
    )
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds one grading may take")
    parser.add_argument("--config", metavar="FILE", help="the lab configuration (default: the bundled lab.toml)")
    parser.add_argument("--lang", default="en", choices=("en", "ja"), help="the language of the messages")
    parser.add_argument("--json", metavar="FILE", help="write every expectation and the kill matrix here")
    parser.add_argument("--html", metavar="FILE", help="write a one-file report here")
    parser.add_argument(
        "--keep", metavar="DIR", help="keep every grading's report here (KIND-NAME-ROUND.json), to read why"
    )
    return parser


def main(argv: Sequence[str]) -> int:
    try:
        options = parser().parse_args(list(argv))
        count = _count(options.mutants)
        if options.parallel is not None and options.parallel < 1:
            raise UsageError("-j needs 1 or more")
        if options.rounds < 1:
            raise UsageError("--rounds needs 1 or more")
        if options.timeout <= 0:
            raise UsageError("--timeout needs a positive number of seconds")
        for path in (options.json, options.html):
            if path and not Path(path).resolve().parent.is_dir():
                raise UsageError("no folder for the report file: %s" % path)
        if options.keep and not Path(options.keep).is_dir():
            raise UsageError("--keep %s: not a folder" % options.keep)
        if options.python and not shutil.which(options.python):
            raise UsageError("python interpreter not found: %s" % options.python)
        config_text = _config_text(options.config)
        _check_bases(count)
        _check_selection(options.keyword)
    except UsageError as error:
        print("pyops-conformance selftest: error: %s" % error, file=sys.stderr)
        return EXIT_ERROR
    settings = Settings(config_text, options.python, options.lang, options.workers, options.timeout)
    parallel = options.parallel or max(2, os.cpu_count() or 1)
    started = time.monotonic()
    stop_on_signals()
    try:
        kinds = (options.only,) if options.only else KINDS
        graded = run(settings, parallel, count, options.seed, options.keyword, kinds, options.rounds)
    except KeyboardInterrupt:
        print("selftest stopped: nothing is judged", file=sys.stderr)
        return EXIT_INTERRUPTED
    seconds = time.monotonic() - started
    summary = summarize(graded, count, options.seed, seconds, options.rounds)
    print("\n".join(summary["lines"]))
    if options.json:
        report.write_report(Path(options.json), as_json(graded, summary, config_text))
    if options.keep:
        for entry in graded:
            for number, one in enumerate(entry.reports, start=1):
                if one:
                    report.write_report(Path(options.keep) / ("%s-%s-%d.json" % (entry.kind, entry.name, number)), one)
    if options.html:
        from conformance.selftest import page

        report.write_atomically(Path(options.html), page.render(graded, summary))
    return EXIT_PASSED if summary["passed"] else EXIT_FAILED


def _count(wanted: Optional[str]) -> Optional[int]:
    """--mutants: None for none, -1 for all, else how many."""
    if wanted is None:
        return None
    if wanted == "all":
        return -1
    try:
        count = int(wanted)
    except ValueError:
        raise UsageError("--mutants needs a number or `all`, not %r" % wanted) from None
    if count < 1:
        raise UsageError("--mutants needs 1 or more (or `all`)")
    return count


def _config_text(path: Optional[str]) -> str:
    from conformance.lab import config

    chosen = Path(path) if path else DEFAULT_FILE
    try:
        config.load(chosen)
        return chosen.read_text(encoding="utf-8")
    except config.ConfigError as error:
        raise UsageError(str(error)) from None
    except (OSError, ValueError) as error:
        raise UsageError("%s: cannot read it: %s" % (chosen, getattr(error, "strerror", None) or error)) from None


def _check_bases(count: Optional[int]) -> None:
    from conformance.selftest import zoo

    missing = [str(path) for path in zoo.CORRECT if not path.is_file()]
    if missing or len(zoo.CORRECT) < 2:
        raise UsageError(
            "no correct runner in this installation (%s): the self-test needs the bundled runners, which the "
            "lab image leaves out; run it from a checkout or in the grading image" % (missing or [str(zoo.RUNNERS)])[0]
        )
    if count is not None:
        try:
            import cosmic_ray  # noqa: F401
        except ImportError:
            raise UsageError(
                "--mutants needs cosmic-ray, which makes the mutants: pip install 'pyops-lab[mutation]' (Python 3.9+)"
            ) from None


def run(
    settings: Settings,
    parallel: int,
    count: Optional[int],
    seed: int,
    keyword: Optional[str] = None,
    kinds: Sequence[str] = KINDS,
    rounds: int = ROUNDS,
) -> List[Graded]:
    """Grade every runner of the self-test and judge each against its expectation: the bundled ones
    of `kinds` whose name holds `keyword`, and `count` generated mutants (-1: all) chosen by `seed`."""
    from conformance.selftest import expectations, kill, zoo

    def wanted(name: str) -> bool:
        return not keyword or keyword in name

    graded: Dict[str, Graded] = {}
    finished = [0]

    def show(entry: Graded, verdict: str) -> None:
        finished[0] += 1
        print("[%3d] %-8s %-44s %s" % (finished[0], entry.kind, entry.name, verdict), flush=True)

    correct_jobs = []
    for path in [path for path in zoo.CORRECT if "correct" in kinds and wanted(path.stem)]:
        name = path.stem
        graded["correct " + name] = Graded("correct", name)
        text = path.read_bytes()
        correct_jobs += [Job("correct %s" % name, "%d" % n, text, name) for n in range(1, rounds + 1)]
    chosen = [mutant for mutant in zoo.MUTANTS if "zoo" in kinds and wanted(mutant.name)]
    core_zoo = [mutant for mutant in chosen if not mutant.breaks.startswith("X")]
    extended_zoo = [mutant for mutant in chosen if mutant.breaks.startswith("X")]
    by_name = {mutant.name: mutant for mutant in zoo.MUTANTS}

    def zoo_job(mutant: zoo.Mutant) -> Job:
        graded["zoo " + mutant.name] = Graded("zoo", mutant.name, detail={"breaks": mutant.breaks})
        text = zoo.mutate(mutant, zoo.BASES[mutant.base].read_text(encoding="utf-8"))
        return Job("zoo " + mutant.name, mutant.name, text.encode("utf-8"), "")

    def done(job: Job, outcome: Dict) -> None:
        entry = graded[job.student]
        entry.reports.append(outcome.get("report"))
        if entry.kind == "correct":
            if len(entry.reports) < rounds:
                return
            entry.problems = expectations.correct_problems(entry.reports)
        else:
            entry.problems = expectations.zoo_problems(by_name[entry.name], outcome.get("report"))
            if outcome["status"] != grading.GRADED:
                entry.problems.insert(0, "%s: %s" % (outcome["status"], outcome.get("message", "")))
        show(entry, "; ".join(entry.problems) or "as expected")

    run_local(correct_jobs + [zoo_job(mutant) for mutant in core_zoo], settings, parallel, done)
    run_local([zoo_job(mutant) for mutant in extended_zoo], kill.extended(settings), parallel, done)
    result = list(graded.values())
    if count is not None:
        result += _mutants(settings, parallel, count, seed, show)
    return result


def _check_selection(keyword: Optional[str]) -> None:
    """-k that names no bundled runner would make a self-test that grades nothing and "passes"."""
    from conformance.selftest import zoo

    names = [path.stem for path in zoo.CORRECT] + [mutant.name for mutant in zoo.MUTANTS]
    if keyword and not any(keyword in name for name in names):
        raise UsageError(
            "-k %s: no bundled runner's name holds it (runner, timer_runner, blocking-lock, ...)" % keyword
        )


def _mutants(settings: Settings, parallel: int, count: int, seed: int, show) -> List[Graded]:  # type: ignore[no-untyped-def]
    from conformance.selftest import generate, kill, zoo

    source = zoo.BASES[zoo.REFERENCE].read_text(encoding="utf-8")
    chosen = kill.sample(generate.generate(source), None if count < 0 else count, seed)
    entries: List[Graded] = []

    def each(outcome: kill.Outcome) -> None:
        expected = outcome.verdict == kill.KILLED or (outcome.verdict == kill.SURVIVED and outcome.equivalent)
        problems = [] if expected else [_unexpected(outcome)]
        entry = Graded(
            "mutant", outcome.mutant.name, problems=problems, detail=outcome.as_json(source), outcome=outcome
        )
        entries.append(entry)
        show(
            entry,
            "; ".join(problems) or outcome.verdict + (" (%s)" % ", ".join(outcome.failed) if outcome.failed else ""),
        )

    kill.kill(chosen, settings, parallel, each)
    order = {mutant.name: n for n, mutant in enumerate(chosen)}
    return sorted(entries, key=lambda entry: order[entry.name])


def _unexpected(outcome) -> str:  # type: ignore[no-untyped-def]
    if outcome.verdict == "survived":
        return "survived, and equivalent.toml does not list it: a gap (line %d: %s -> %s)" % (
            outcome.mutant.line,
            outcome.mutant.before,
            outcome.mutant.after,
        )
    return "%s, which is not a kill: %s" % (outcome.verdict, outcome.message)


def summarize(graded: Sequence[Graded], count: Optional[int], seed: int, seconds: float, rounds: int = ROUNDS) -> Dict:
    lines = []
    for kind, what in (("correct", "correct runners"), ("zoo", "wrong runners of the zoo")):
        entries = [entry for entry in graded if entry.kind == kind]
        if not entries:
            continue
        good = sum(1 for entry in entries if not entry.problems)
        rule = "fail their own clause and nothing else"
        if kind == "correct":
            seeds = [len({report.get("seed") for report in entry.reports if report}) for entry in entries]
            rule = "pass, with the same verdicts in %d rounds, under at least %d seeds each" % (rounds, min(seeds))

        lines.append("%s: %d of %d %s" % (what, good, len(entries), rule))
    matrix: Dict = {}
    if count is not None:
        from conformance.selftest import kill

        outcomes = [entry.outcome for entry in graded if entry.kind == "mutant" and entry.outcome is not None]
        matrix = dict(kill.summary(outcomes, len(outcomes)), seed=seed)
        lines.append(
            "generated mutants (seed %(seed)d): %(graded)d graded, %(killed)d killed, %(survived)d survived "
            "(%(equivalent)d known equivalent), %(timeout)d timeouts, %(error)d errors"
            % matrix
            + ("; score %.1f%%" % (100 * matrix["score"]) if matrix["score"] is not None else "")
        )
    failing = [entry for entry in graded if entry.problems]
    for entry in failing:
        lines.append("not as expected: %s %s: %s" % (entry.kind, entry.name, "; ".join(entry.problems)))
    passed = not failing
    lines.append("selftest %s in %.0f s (%d graded)" % ("passed" if passed else "FAILED", seconds, len(graded)))
    return {"lines": lines, "passed": passed, "mutants": matrix, "seconds": round(seconds, 1)}


def as_json(graded: Sequence[Graded], summary: Dict, config_text: str) -> Dict:
    return {
        "suite": provenance.suite_fingerprint(),
        "configuration": provenance.sha256(config_text.encode("utf-8")),
        "passed": summary["passed"],
        "summary": summary["lines"],
        "mutants": summary["mutants"],
        "seconds": summary["seconds"],
        "runners": [
            {
                "kind": entry.kind,
                "name": entry.name,
                "problems": entry.problems,
                "clauses": [
                    {clause: body["verdict"] for clause, body in (one or {}).get("clauses", {}).items()}
                    for one in entry.reports
                ],
                **({"mutant": entry.detail} if entry.kind == "mutant" else entry.detail),
            }
            for entry in graded
        ],
    }

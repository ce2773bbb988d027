"""Mutation testing of the suite: generated mutants of the reference runner, graded by the core suite.

    python bench/mutation.py [--sample N] [--seed S] [--again MATRIX] [-j N] [-n N] [--timeout S]
                             [--json FILE] [--journal FILE]

Every mutant conformance/selftest/generate.py makes of runner/runner.py (or a seeded sample of N) is
graded as a learner's runner.py, J at a time, each grading bounded by --timeout (default: ten times
the unmodified reference's grading, at least two minutes). Prints, as the run goes, one line per
mutant, then the figures: mutants, killed, survived (each with its reviewed reason when
conformance/selftest/equivalent.toml lists it as equivalent), timeouts and errors (neither counted
as killed), the score, kills per clause, wall time, CPU-seconds, mutants per minute. --json writes
the whole kill matrix, with each mutant's diff; --journal keeps each outcome as it
comes, so that a run of hours (the whole set) can be stopped and started again. --again grades only
the mutants an earlier run's --json did not kill and equivalent.toml does not list: after a check
is added for a survivor, this says whether it now dies, in minutes instead of the hour the whole
set takes.

`--sample 1 -j 1` is a short form (the reference, then one mutant: under a minute). Run as root on
an otherwise idle machine. Exit status 1 when a survivor is not in equivalent.toml (or the unmodified
reference fails), 2 on bad input (said in one line), 130 when stopped (the journal keeps what was
judged).
"""

import argparse
import json
import os
import resource
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Set

from oneline import Parser  # this folder's shared parts

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance.classroom.queue import Settings, stop_on_signals  # noqa: E402
from conformance.lab.config import DEFAULT_FILE  # noqa: E402
from conformance.reporting import provenance  # noqa: E402

try:
    from conformance.selftest import generate, kill  # noqa: E402
except ModuleNotFoundError as missing:  # cosmic-ray, which makes the mutants
    if __name__ != "__main__":
        raise
    print("mutation: %s: pip install 'pyops-lab[mutation]' (Python 3.9 or later)" % missing, file=sys.stderr)
    sys.exit(2)

SOURCE = REPO / "runner" / "runner.py"
MIN_TIMEOUT_S = 120


def main() -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, help="grade this many mutants, chosen by --seed (default: all)")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("-j", dest="parallel", type=int, default=2, help="gradings at once (default: 2)")
    parser.add_argument("-n", dest="workers", type=int, default=4, help="checks at once within a grading")
    parser.add_argument("--timeout", type=float, help="seconds a grading may take")
    parser.add_argument(
        "--again", metavar="MATRIX", help="grade only what this earlier --json did not kill, bar listed equivalents"
    )
    parser.add_argument("--json", help="write the kill matrix here")
    parser.add_argument(
        "--journal", help="keep each outcome here as it comes, and go on from it (a run stopped and started again)"
    )
    options = parser.parse_args()
    wrong = bad_options(options)
    if wrong:
        print("mutation: %s" % wrong, file=sys.stderr)
        return 2

    open_keys = None
    if options.again:
        try:
            open_keys = open_findings(Path(options.again))
        except (OSError, ValueError, KeyError, TypeError) as error:
            print("mutation: --again %s: not a kill matrix (%s)" % (options.again, error), file=sys.stderr)
            return 2

    source = SOURCE.read_text(encoding="utf-8")
    started = time.monotonic()
    mutants = generate.generate(source)
    made_s = time.monotonic() - started
    chosen = kill.sample(mutants, options.sample, options.seed)
    if open_keys is not None:
        chosen = [mutant for mutant in chosen if mutant.key in open_keys]
    print("%d mutants of %s made in %.1f s; grading %d" % (len(mutants), SOURCE.name, made_s, len(chosen)), flush=True)

    settings = Settings(DEFAULT_FILE.read_text(encoding="utf-8"), None, "en", options.workers, 0)
    identity = {
        "suite": provenance.suite_fingerprint(),
        "source": provenance.sha256(source.encode("utf-8")),
        "configuration": provenance.sha256(settings.config_text.encode("utf-8")),
    }
    try:
        journal = kill.Journal(Path(options.journal) if options.journal else None, identity)
    except (OSError, ValueError, KeyError, TypeError) as error:
        print("mutation: --journal %s: not a journal (%s)" % (options.journal, error), file=sys.stderr)
        return 2
    stop_on_signals()  # the journal keeps what finished; the running gradings are stopped
    try:
        base_s = kill.baseline(source, replace(settings, timeout_s=MIN_TIMEOUT_S * 5))
    except kill.BaselineFailed as error:
        print("mutation: %s" % error, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nstopped while grading the unmodified reference", file=sys.stderr)
        return 130
    timeout_s = options.timeout or max(MIN_TIMEOUT_S, 10 * base_s)
    settings = replace(settings, timeout_s=timeout_s)
    print("the reference passes in %.1f s; each mutant's grading is bounded at %g s" % (base_s, timeout_s), flush=True)

    graded_at = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    count = [0]

    def each(outcome: kill.Outcome) -> None:
        count[0] += 1
        why = ", ".join(outcome.failed) if outcome.failed else outcome.message or outcome.equivalent
        print(
            "[%3d/%d] %-8s %-8s %-44s line %3d  %s"
            % (
                count[0],
                len(chosen),
                outcome.profile,
                outcome.verdict,
                outcome.mutant.name,
                outcome.mutant.line,
                why[:60],
            ),
            flush=True,
        )

    try:
        outcomes = kill.kill(chosen, settings, options.parallel, each, journal=journal)
    except KeyboardInterrupt:
        kept = " are kept in %s" % options.journal if options.journal else " are lost: --journal keeps them"
        print("\nstopped: the %d mutants judged%s" % (count[0], kept), file=sys.stderr)
        return 130
    wall_s = time.monotonic() - graded_at
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    figures = kill.summary(outcomes, len(mutants))
    figures.update(
        wall_s=round(wall_s, 1),
        cpu_s=round(cpu_s, 1),
        mutants_per_minute=round(60 * len(outcomes) / wall_s, 2) if wall_s else None,
        timeout_s=timeout_s,
        parallel=options.parallel,
        cpus=os.cpu_count(),
        seed=options.seed,
        sample=options.sample,
    )
    print()
    print(
        "mutants %(generated)d, graded %(graded)d: killed %(killed)d, survived %(survived)d "
        "(equivalent %(equivalent)d, unexplained %(unexplained_survivors)d), timeout %(timeout)d, error %(error)d"
        % figures
    )
    print(
        "score %s (timeouts and errors not killed)"
        % ("%.1f%%" % (100 * figures["score"]) if figures["score"] is not None else "-")
    )
    print("kills per clause: %s" % ", ".join("%s %d" % item for item in figures["kills_per_clause"].items()))
    print(
        "wall %.0f s, CPU %.0f s, %.2f mutants per minute on %d CPUs, %d at a time"
        % (wall_s, cpu_s, figures["mutants_per_minute"] or 0, os.cpu_count() or 0, options.parallel)
    )
    for outcome in outcomes:
        if outcome.verdict == kill.SURVIVED:
            print(
                "survived: %s line %d: %s -> %s%s"
                % (
                    outcome.mutant.name,
                    outcome.mutant.line,
                    outcome.mutant.before,
                    outcome.mutant.after,
                    ("  [equivalent: %s]" % outcome.equivalent) if outcome.equivalent else "",
                )
            )
    if options.json:
        matrix = {
            "suite": provenance.suite_fingerprint(),
            "source_sha256": provenance.sha256(source.encode("utf-8")),
            "operators": list(generate.OPERATORS),
            "summary": figures,
            "mutants": [outcome.as_json(source) for outcome in outcomes],
        }
        Path(options.json).write_text(json.dumps(matrix, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if figures["unexplained_survivors"] else 0


def bad_options(options: argparse.Namespace) -> str:
    """What is wrong with the options, in one line ("" when nothing): said before any grading, not
    after an hour of them."""
    if options.sample is not None and options.sample < 1:
        return "--sample needs 1 or more"
    if options.parallel < 1:
        return "-j needs 1 or more"
    if options.workers < 0:
        return "-n needs 0 (no parallel checks) or more"
    if options.timeout is not None and not options.timeout > 0:
        return "--timeout needs more than 0 seconds"
    for option, name in (("--json", options.json), ("--journal", options.journal)):
        if name is None:
            continue
        folder = os.path.dirname(os.path.abspath(name))
        if os.path.isdir(name):
            return "%s %s: a folder, not a file" % (option, name)
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
            return "%s %s: no folder %s to write it in" % (option, name, folder)
    return ""


def open_findings(matrix: Path) -> Set[str]:
    """The keys of the mutants an earlier kill matrix did not kill (survivors, timeouts, errors)
    and equivalent.toml does not list now: the findings still open. A key names the same change
    when other lines of the reference move."""
    earlier = json.loads(matrix.read_text(encoding="utf-8"))
    known = kill.equivalents()
    return {
        str(entry["key"])
        for entry in earlier["mutants"]
        if entry["verdict"] != kill.KILLED and entry["key"] not in known
    }


if __name__ == "__main__":
    sys.exit(main())

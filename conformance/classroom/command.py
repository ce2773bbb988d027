"""`pyops-conformance class` (grade a folder of submissions) and `pyops-conformance worker`.

    pyops-conformance class SUBMISSIONS --out DIR [--config FILE] [-j N] [--force] [--approve]
                            [--broker [URL] | --broker-file FILE] [--key-file FILE]
                            [--python EXE] [--lang en|ja] [--timeout SECONDS] [-n WORKERS]
                            [--known DIR] [--template FILE]...
    pyops-conformance class --out DIR --rollback
    pyops-conformance worker [--broker [URL] | --broker-file FILE] [--key-file FILE] [--python EXE]... [-j N]

The broker's URL and the class key come from $PYOPS_BROKER_URL and $PYOPS_BROKER_KEY or from files
only their owner reads (credentials.py), never from a command line.

Exit status of `class`: 0 every submission was graded (whatever its score), 1 some could not be
(error or timeout: see grades.csv), 2 a usage error, 130 stopped by Ctrl-C, kill or a closed
terminal (what finished is kept).
"""

import argparse
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from conformance.classroom import credentials, generations, grading, layout
from conformance.classroom.discover import NotASubmissionsFolder, discover
from conformance.classroom.queue import Settings, run_local, stop_on_signals
from conformance.classroom.store import NotAClassFolder, Store
from conformance.lab import config
from conformance.lab.clauses import LANGUAGES
from conformance.reporting import view
from conformance.usage import EXIT_ERROR, EXIT_INTERRUPTED, PYTHON_VAR, Parser, UsageError, default_python

if TYPE_CHECKING:  # only for annotations
    from conformance.classroom.batch import Batch

EXIT_ALL_GRADED, EXIT_SOME_NOT_GRADED = 0, 1
# Checks of one grading at a time (the suite's -n).
CHECKS_PER_GRADING = 4


def default_parallel() -> int:
    """Gradings at once: two per core.

    A grading mostly waits (timeouts, backoffs, a slow apply.sh: its CPU comes in bursts between
    them), so one per core leaves the CPU idle whenever the gradings wait at the same time. On 2
    cores (bench/bench_class.py, a class of 24) three at once kept the CPU 80 % busy and four 91 %
    (76 to 81 % of the CPU floor against 74 %, 12 submissions a minute), and every verdict stayed
    the one the submission gets graded alone: the timing checks measure from the command's own
    start, and a bound missed by no more than the runner waited for a CPU is measured again.
    """
    return 2 * (os.cpu_count() or 1)


def class_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="pyops-conformance class", description="Grade a folder of submissions, one per student.")
    parser.add_argument(
        "submissions",
        metavar="SUBMISSIONS",
        nargs="?",
        help="one folder with a runner.py, or one STUDENT.py, per student (not with --rollback)",
    )
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="the class folder: reports, grades.csv, report.html"
    )
    parser.add_argument("--config", metavar="FILE", help="the lab configuration (default: the shipped lab.toml)")
    parser.add_argument(
        "-j", "--jobs", type=int, help="submissions graded at once (default: 2 per CPU, %d here)" % default_parallel()
    )
    parser.add_argument(
        "-n",
        "--workers",
        type=int,
        default=CHECKS_PER_GRADING,
        help="checks run at once within one grading (default: %(default)s)",
    )
    parser.add_argument(
        "--force", action="store_true", help="grade again even what is unchanged since its last grading"
    )
    review = parser.add_mutually_exclusive_group()
    review.add_argument(
        "--approve",
        action="store_true",
        help="publish the generation pending review (once regrade.html is read): with the --config, --python "
        "and --lang it was graded with, as the command printed then",
    )
    review.add_argument(
        "--rollback", action="store_true", help="publish again the generation published before the last one"
    )
    _broker_arguments(
        parser,
        "grade on Celery workers: alone, the Redis broker's URL is read from $%s; a URL given here must hold "
        "no password" % credentials.URL_VAR,
    )
    parser.add_argument(
        "--python",
        default=default_python(),
        help="interpreter that runs the runners (default: $%s, else the suite's base python3)" % PYTHON_VAR,
    )
    parser.add_argument(
        "--lang", choices=LANGUAGES, help="language of the reports (default: the configuration's, else the locale's)"
    )
    parser.add_argument(
        "--known",
        metavar="DIR",
        help="known solutions to compare every submission with, besides the runners this project publishes "
        "(one NAME.py or NAME/runner.py each; default: lab.toml's similarity.known)",
    )
    parser.add_argument(
        "--template",
        action="append",
        default=[],
        metavar="FILE",
        help="code handed out to every student, left out of the similarity check (again for more; default: "
        "lab.toml's similarity.template)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=grading.DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="a grading that takes longer is stopped and recorded as timeout (default: %(default)g)",
    )
    return parser


def main_class(argv: Sequence[str]) -> int:
    try:
        options = class_parser().parse_args(list(argv))
        if options.rollback:
            return _rollback(Path(options.out))
        if options.submissions is None:
            raise UsageError("SUBMISSIONS is needed (all but --rollback grade a folder of submissions)")
        settings, store, submissions, parallel, broker = _prepare(options)
        known, templates = _compared_with(options, store.config)
    except (
        UsageError,
        NotASubmissionsFolder,
        NotAClassFolder,
        generations.NothingToRollBack,
        generations.NotApproved,
    ) as error:
        print("pyops-conformance class: error: %s" % error, file=sys.stderr)
        return EXIT_ERROR
    kept = generations.Generations(Path(options.out))
    from conformance.classroom.batch import Batch, Progress

    batch = Batch(submissions, store, settings, Path(options.submissions).resolve())
    jobs = batch.plan(options.force)
    print(
        "%d submission(s) in %s: %d to grade, %s; results in %s"
        % (len(submissions), options.submissions, len(jobs), _where(broker, parallel), options.out),
        flush=True,
    )
    progress = Progress(len(jobs), batch.kept)
    if broker:
        from conformance.classroom import distributed

        queue = distributed.queue(broker[0], broker[1], settings)
    else:

        def queue(jobs, settings, done):  # type: ignore[no-untyped-def]
            run_local(jobs, settings, parallel, done)

    stop_on_signals()
    # With --approve, store.generation is the one pending review (_prepare checked it).
    publish = options.approve or kept.published in (None, store.generation)
    try:
        batch.run(jobs, queue, progress)
    except KeyboardInterrupt:
        if publish and not options.approve:  # an approval cut short publishes nothing: it is run again
            kept.publish(store.generation)
        progress.close()
        print(
            "stopped: %d of %d graded this time are kept in %s; run the same command to go on"
            % (progress.count, len(jobs), options.out),
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    progress.close()
    try:
        _compare(batch, Path(options.out), known, templates)
    except KeyboardInterrupt:
        if publish and not options.approve:
            kept.publish(store.generation)
        print(
            "stopped during the similarity check: every grading is kept in %s, and the pairs compared so far; run "
            "the same command to go on" % options.out,
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    statuses = [record["status"] for record in batch.records.values()]
    not_graded = sum(status != grading.GRADED for status in statuses)
    out = Path(options.out)
    if not publish:
        return _review(kept, store.generation, len(statuses), _approve_command(options, settings.lang))
    kept.publish(store.generation)
    print(
        "%d graded, %d not graded (error or timeout): %s, %s (generation %d)"
        % (len(statuses) - not_graded, not_graded, out / layout.GRADES, out / layout.REPORT, store.generation)
    )
    return EXIT_SOME_NOT_GRADED if not_graded else EXIT_ALL_GRADED


def _compared_with(options: argparse.Namespace, lab: config.LabConfig) -> Tuple[Optional[Path], List[Path]]:
    """The known solutions' folder and the template files of the similarity check: the command
    line's, else the configuration's (relative to the configuration file)."""
    base = (Path(options.config) if options.config else config.DEFAULT_FILE).resolve().parent
    known = Path(options.known) if options.known else (base / lab.similarity.known if lab.similarity.known else None)
    templates = [Path(path) for path in options.template] or [base / path for path in lab.similarity.template]
    if known is not None and (known.is_symlink() or not known.is_dir()):
        raise UsageError("--known %s: not a folder (one NAME.py or NAME/runner.py per known solution)" % known)
    for path in templates:
        if path.is_symlink() or not path.is_file():
            raise UsageError("--template %s: not a regular file" % path)
    return known, templates


def _compare(batch: "Batch", out: Path, known: Optional[Path], templates: List[Path]) -> None:
    """After the gradings: the similarity check, into report.html and similarity.csv. Where it
    cannot run (copydetect missing), one line says so and the grades stand as they are."""
    from conformance.classroom import similarity

    settings = batch.store.config.similarity
    try:
        outcome = similarity.for_class(
            batch.store, batch.records, known, templates, settings, out / layout.SIMILARITY_CACHE
        )
    except similarity.Unavailable as why:
        print("similarity was not computed: %s" % why, file=sys.stderr, flush=True)
        batch.write_report("not computed: %s" % why)
        batch.store.write_similarity(None)
        return
    print(
        "similarity: %d submission(s) compared in pairs and with %d other runner(s) in %.1f s: %d similar pair(s), "
        "in %s and %s"
        % (
            outcome.runners,
            outcome.others,
            outcome.seconds,
            len(outcome.similar),
            out / layout.REPORT,
            out / layout.SIMILARITY,
        ),
        flush=True,
    )
    for line in outcome.skipped:
        print("similarity: %s" % line, file=sys.stderr)
    batch.write_report(outcome)
    batch.store.write_similarity(similarity.csv_text(outcome))


def _review(kept: "generations.Generations", number: int, students: int, approve: str) -> int:
    """A regrade under a changed suite or configuration: say what it would change, publish nothing."""
    changed = kept.await_review(number, students)
    for line in kept.configuration_changes(number):
        print("the configuration changed: %s" % line)
    for line in kept.grading_changes(number):
        print("graded otherwise: %s" % line)
    print(
        "%d of %d submissions change: review %s (generation %d, unpublished; generation %d stays published), "
        "then approve it with:\n  %s"
        % (len(changed), students, kept.folder / layout.REGRADE_HTML, number, kept.published or number, approve)
    )
    return EXIT_ALL_GRADED


def _approve_command(options: argparse.Namespace, lang: str) -> str:
    """The command that approves what this one graded, as a shell takes it: with what makes its
    generation (generations.identity) that a command line gives. The language always, as this
    grading resolved it: left out, it would be the locale's of the shell that approves. Paths
    absolute, so that it works from any folder."""
    argv = ["pyops-conformance", "class", os.path.abspath(options.submissions), "--out", os.path.abspath(options.out)]
    if options.config:
        argv += ["--config", os.path.abspath(options.config)]
    if options.python:
        argv += ["--python", options.python]
    if options.known:
        argv += ["--known", os.path.abspath(options.known)]
    for path in options.template:
        argv += ["--template", os.path.abspath(path)]
    argv += ["--lang", lang, "--approve"]
    return " ".join(shlex.quote(arg) for arg in argv)


def _rollback(out: Path) -> int:
    if not (out / layout.MARK).exists():
        raise UsageError("--out %s: not a class folder" % out)
    number = generations.Generations(out).rollback()
    print("generation %d is published again: %s" % (number, out / layout.GRADES))
    return EXIT_ALL_GRADED


def _prepare(options: argparse.Namespace):  # type: ignore[no-untyped-def]
    if options.jobs is not None and options.jobs < 1:
        raise UsageError("-j needs 1 or more")
    if options.workers < 0:
        raise UsageError("-n needs 0 or more")
    if options.timeout <= 0:
        raise UsageError("--timeout needs a positive number of seconds")
    broker = None
    if options.broker is not None or options.broker_file is not None:
        broker = _broker(options)
    elif options.key_file:
        raise UsageError("--key-file goes with --broker or --broker-file")
    config_path = Path(options.config) if options.config else config.DEFAULT_FILE
    try:
        lab = config.load(config_path)
    except config.ConfigError as error:
        raise UsageError(str(error)) from None
    config_text = config_path.read_text(encoding="utf-8")
    if options.python and not shutil.which(options.python):
        raise UsageError("python interpreter not found: %s" % options.python)
    submissions = discover(Path(options.submissions))
    if not submissions:
        raise UsageError(
            "%s holds no submission (one folder with a runner.py, or one STUDENT.py, per student)" % options.submissions
        )
    parallel = options.jobs or default_parallel()
    if not broker and parallel > 1:
        from conformance.harness.sandbox import probe_namespace

        plan, why_not = probe_namespace()
        if plan is None:
            # Without private labs every grading uses the real lab paths: one at a time.
            print("one submission at a time: no private labs here (%s)" % why_not, file=sys.stderr)
            parallel = 1
    lang = view.language(options.lang or lab.lang)
    made_with = generations.identity(config_text, options.python, lang)
    kept = generations.Generations(Path(options.out))
    if options.approve:
        # Checked before anything is made or graded, so a refused approval changes nothing; and
        # what it grades (the submissions changed since) goes into that generation, no other.
        number = kept.approvable(made_with)
    Store(Path(options.out), lab).open()  # the class folder itself: made here, or one this tool made
    if not options.approve:
        number, _published = kept.choose(made_with, config_text)
    settings = Settings(config_text, options.python, lang, options.workers, options.timeout)
    earlier = [kept.folder_of(other) for other in kept.newest_first() if other != number]
    store = Store(kept.folder_of(number), lab, number, made_with, config_text, earlier)
    store.open()
    return settings, store, submissions, parallel, broker


def _where(broker: Optional[Tuple[str, bytes]], parallel: int) -> str:
    if broker:
        return "on the workers of %s" % credentials.shown(broker[0])
    return "%d at a time" % parallel


def _broker_arguments(parser: argparse.ArgumentParser, broker_help: str) -> None:
    parser.add_argument("--broker", nargs="?", const=credentials.FROM_ENV, metavar="URL", help=broker_help)
    parser.add_argument("--broker-file", metavar="FILE", help="the broker's URL, from a file only you can read")
    parser.add_argument(
        "--key-file",
        metavar="FILE",
        help="the class key (default: $%s), from a file only you can read: the same on the sender and every "
        "worker, it signs tasks and results" % credentials.KEY_VAR,
    )


def _broker(options: argparse.Namespace) -> Tuple[str, bytes]:
    return credentials.broker_url(options.broker, options.broker_file), credentials.broker_key(options.key_file)


def worker_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="pyops-conformance worker", description="Grade submissions sent by `class --broker`.")
    _broker_arguments(
        parser, "the Redis broker's URL, if it holds no password (default, and alone: $%s)" % credentials.URL_VAR
    )
    parser.add_argument(
        "--python",
        action="append",
        default=[default_python()] if default_python() else [],
        metavar="EXE",
        help="an interpreter a class may ask for with its own --python (again for more; default: $%s if set, "
        "and the suite's base python3)" % PYTHON_VAR,
    )
    parser.add_argument(
        "-j", "--jobs", type=int, default=default_parallel(), help="submissions graded at once (default: 2 per CPU)"
    )
    return parser


def main_worker(argv: Sequence[str]) -> int:
    try:
        options = worker_parser().parse_args(list(argv))
        if options.jobs < 1:
            raise UsageError("-j needs 1 or more")
        missing = [python for python in options.python if not shutil.which(python)]
        if missing:
            raise UsageError("python interpreter not found: %s" % missing[0])
        url, key = _broker(options)
    except UsageError as error:
        print("pyops-conformance worker: error: %s" % error, file=sys.stderr)
        return EXIT_ERROR
    from conformance.classroom import distributed

    return distributed.work(url, key, options.python, options.jobs)

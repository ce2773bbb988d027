"""pyops-conformance: grade a runner.py against the lab, clause by clause.

It dispatches to the other commands (COMMANDS below: class, worker, replay, export, selftest,
roots), which `--help` lists; what they share with it (exit codes, usage errors) is in usage.py.

    pyops-conformance [--runner PATH | --reference] [--watch] [--python EXE] [--profile core|extended] [--json FILE]
                      [--junit FILE] [--gradescope FILE] [--prairielearn FILE] [--lang en|ja]
                      [-n WORKERS] [-k EXPR]
                      [--isolation auto|namespace|chroot|shared] [--repeat N] [--view learner|pytest]

Exit status: 0 every selected check passed, 1 a check failed, 2 a usage or harness error (or,
with --repeat, a check whose outcome varied between rounds).
"""

import argparse
import contextlib
import dataclasses
import io
import json
import os
import sys
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from conformance.harness import scratch
from conformance.harness.sandbox import SUB_DIR
from conformance.lab import config, draws
from conformance.lab.clauses import LANGUAGES, PROFILES
from conformance.reporting import platforms, provenance, report, view
from conformance.usage import (
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PASSED,
    PYTHON_VAR,
    Parser,
    UsageError,
    default_python,
    stop_on_signals,
)

AUTOLOAD_VAR = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
# pytest.ExitCode.INTERRUPTED, named here so that a usage error costs no pytest import.
PYTEST_INTERRUPTED = 2


# What a learner writes, where the lab has it: graded when no other runner is named.
LAB_RUNNER = SUB_DIR / "runner.py"
NO_RUNNER = (
    "no runner to grade: write the lab's %s, or name one with --runner FILE (--reference grades the bundled one)"
)


def seed_number(text: str) -> int:
    """A seed as --seed takes it: a whole number from 0 (argparse says so in one line otherwise)."""
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if not 0 <= seed < 2**draws.SEED_BITS:
        raise argparse.ArgumentTypeError("a whole number from 0 to %d: %r" % (2**draws.SEED_BITS - 1, text))
    return seed


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a folder above it is closed to this user (/root, for an ordinary one)
        return False


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pyops-conformance",
        description="Grade a runner.py against the pyops lab.",
        epilog="commands (pyops-conformance COMMAND --help):\n"
        + "\n".join("  %-10s %s" % (name, said) for name, (_, said) in COMMANDS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--runner", help="the runner.py to grade (default: the lab's, %s)" % LAB_RUNNER)
    chosen.add_argument("--reference", action="store_true", help="grade the bundled reference runner")
    parser.add_argument(
        "--python",
        default=default_python(),
        help="interpreter that runs it (default: $%s, else the one the suite's venv was made from)" % PYTHON_VAR,
    )
    parser.add_argument(
        "--runner-user",
        default="auto",
        choices=("auto", "own", "grader"),
        help="own: an unprivileged uid of its own per check (needs root); grader: the grader's own user; "
        "auto (default): own when possible",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="the lab configuration (TOML): points, profile, visibility (default: lab.toml)"
    )
    parser.add_argument(
        "--profile", choices=PROFILES, help="core (the lab) or extended (default: the configuration's, core)"
    )
    parser.add_argument("--json", metavar="FILE", help="write the JSON report here")
    parser.add_argument("--junit", metavar="FILE", help="write a JUnit XML report here")
    parser.add_argument("--gradescope", metavar="FILE", help="write a Gradescope results.json here")
    parser.add_argument("--prairielearn", metavar="FILE", help="write a PrairieLearn results.json here")
    parser.add_argument(
        "--lang", choices=LANGUAGES, help="language of the report (default: the locale's, ja for LANG=ja_*, else en)"
    )
    parser.add_argument(
        "--view",
        choices=("learner", "pytest"),
        default="learner",
        help="learner (default): the failures by step, then the table; pytest: pytest's own output (maintainers)",
    )
    parser.add_argument(
        "-n",
        "--workers",
        type=int,
        help="parallel workers (default: 4 per CPU, a CPU quota counted, at least 4; 0 = none)",
    )
    parser.add_argument(
        "--clause",
        action="append",
        default=[],
        metavar="ID",
        help="only checks of this clause or step (S2.4, S2, X); repeatable",
    )
    parser.add_argument("-k", dest="keyword", metavar="EXPR", help="only checks matching this pytest -k expression")
    parser.add_argument(
        "--isolation",
        default="auto",
        choices=("auto", "namespace", "chroot", "shared"),
        help="private mount namespaces, private system roots (chroot), or the real lab paths one test at a time "
        "(default auto: the first of these that works here)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="grade N times, list every check whose outcome varied (exit 2 if any did); reports are the last round's",
    )
    parser.add_argument(
        "--seed",
        type=seed_number,
        metavar="N",
        help="draw the timeouts, backoffs and names a runner must not predict from seed N "
        "(default: the configuration's seed, else a new one per grading; the report records it)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per check (the pytest view)")
    parser.add_argument(
        "--watch",
        action="store_true",
        help="grade, then grade again each time the runner file is saved, saying which clauses changed (Ctrl-C ends)",
    )
    return parser


def default_workers(cpus: Optional[float] = None) -> int:
    # The checks mostly wait (timeouts, backoffs, signals), so several per core keep the CPU busy
    # (each is a fork of the grading's process, which costs milliseconds to start).
    cpus = available_cpus() if cpus is None else cpus
    return max(4, min(16, int(4 * cpus)))


def available_cpus(cgroup: Path = Path("/sys/fs/cgroup")) -> float:
    """The CPUs this process may use: the cores, or less under a CPU quota (docker run --cpus)."""
    cores = float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    for path, parse in ((cgroup / "cpu.max", _quota_v2), (cgroup / "cpu" / "cpu.cfs_quota_us", _quota_v1)):
        try:
            quota = parse(path)
        except (OSError, ValueError, IndexError):
            continue
        if quota is not None:
            return min(cores, quota)
    return cores


def _quota_v2(path: Path) -> Optional[float]:
    quota, period = path.read_text().split()[:2]  # "50000 100000", or "max 100000"
    return None if quota == "max" else int(quota) / int(period)


def _quota_v1(path: Path) -> Optional[float]:
    quota = int(path.read_text())
    period = int((path.parent / "cpu.cfs_period_us").read_text())
    return None if quota < 0 else quota / period


def junit_beside(json_path: Path) -> Path:
    return json_path.with_suffix(".junit.xml")


def pytest_args(options: argparse.Namespace, json_path: Path) -> List[str]:
    from conformance.plugin import SUITE_DIR

    args = [
        str(SUITE_DIR),
        "--rootdir",
        str(SUITE_DIR),
        "-c",
        os.devnull,  # the suite's own settings, not those of whatever folder it runs in
        "-p",
        "no:cacheprovider",
        # These two run the garbage collector several times after every check (0.3 CPU-s a
        # grading) to report exceptions nobody could catch; the checks report their own.
        "-p",
        "no:unraisableexception",
        "-p",
        "no:threadexception",
        # Nothing in the suite logs; capturing logs around every phase of every check costs 0.2 ms.
        "-p",
        "no:logging",
        # The checks judge with expect.*, never a bare assert: rewriting their modules would only
        # cost each worker a second of CPU at start-up.
        "--assert=plain",
        "--lab-profile",
        options.profile,
        "--lab-lang",
        options.lang,
        "--lab-isolation",
        options.isolation,
        "--lab-json",
        str(json_path),
        "--lab-seed",
        str(options.seed),
        "--runner-user",
        options.runner_user,
        "-r",
        "fE",
    ]
    if options.verbose:
        args.append("-v")
    if options.view == "learner" and options.repeat == 1:
        args.append("--lab-progress")
    args += ["-p", "conformance.plugin"]
    if options.runner:
        args += ["--runner", options.runner]
    if options.python:
        args += ["--runner-python", options.python]
    workers = default_workers() if options.workers is None else options.workers
    if options.decided_isolation == "chroot":
        workers = min(workers, options.decided["roots"])  # a root per check at a time
    if workers > 0 and options.decided_isolation != "shared":
        # Forks of the grading's own process, each handed the next slowest check when it is free
        # (forks.py): they start in milliseconds, where an xdist worker takes most of a CPU-second.
        args += ["--lab-forks", str(workers)]
    for clause in options.clause:
        args += ["--lab-clause", clause]
    if options.keyword:
        args += ["-k", options.keyword]
    if options.junit:
        # xunit1 keeps each testcase's `file` and `line`, which GitLab and GitHub's test
        # reporters use to point at the check. Written beside the JSON, in the grader's private
        # folder; main copies it to --junit once the grading (and every runner) has ended.
        args += ["--junitxml", str(junit_beside(json_path)), "-o", "junit_family=xunit1"]
    return args


def validate(options: argparse.Namespace) -> None:
    from conformance.lab.clauses import CLAUSES, STEPS

    for clause in options.clause:
        if clause not in CLAUSES and clause not in STEPS:
            raise UsageError("unknown clause %r (S1.1 ... S8.3, X1 ... X14, or a step S1 ... S8, X)" % clause)
    if options.workers is not None and options.workers < 0:
        raise UsageError("-n needs 0 or more workers")
    if options.repeat < 1:
        raise UsageError("--repeat needs 1 or more rounds")
    for path in (options.json, options.junit, options.gradescope, options.prairielearn):
        if path and not Path(path).resolve().parent.is_dir():
            raise UsageError("no folder for the report file: %s" % path)
    if not options.runner and not options.reference:
        if not _is_file(LAB_RUNNER):
            raise UsageError(NO_RUNNER % LAB_RUNNER)
        options.runner = str(LAB_RUNNER)
    # What the plugin will decide again once pytest runs; refused here, it is said in one line.
    from conformance.plugin import Refused, decide

    try:
        decided = decide(options.runner, options.python, options.isolation, options.runner_user)
    except Refused as refusal:
        raise UsageError(str(refusal)) from None
    # Known before pytest starts, so that shared mode, which runs one check at a time, starts no
    # workers (the plugin decides again, and says why in its header).
    options.decided_isolation = decided["isolation"]
    options.decided = decided
    config_file = Path(options.config) if options.config else config.DEFAULT_FILE
    try:
        options.lab = config.load(config_file)
        options.config_text = config_file.read_text(encoding="utf-8")  # for the provenance
    except config.ConfigError as error:
        raise UsageError(str(error)) from None
    except (OSError, ValueError) as error:
        raise UsageError("%s: cannot read it: %s" % (config_file, getattr(error, "strerror", None) or error)) from None
    options.profile = options.profile or options.lab.profile
    options.lang = view.language(options.lang or options.lab.lang)
    if options.seed is None:  # one seed for every round of --repeat and --watch: only the machine varies
        options.seed = draws.new_seed() if options.lab.seed is None else options.lab.seed
    # The platforms' files speak the grading's language too, --lang as much as the configuration's.
    options.lab = dataclasses.replace(options.lab, lang=options.lang)
    if options.verbose:
        options.view = "pytest"


def _export(argv: Sequence[str]) -> int:
    from conformance import export

    return export.main(argv)


def _class(argv: Sequence[str]) -> int:
    from conformance.classroom.command import main_class

    return main_class(argv)


def _worker(argv: Sequence[str]) -> int:
    from conformance.classroom.command import main_worker

    return main_worker(argv)


def _replay(argv: Sequence[str]) -> int:
    from conformance import replay

    return replay.main(argv)


def _selftest(argv: Sequence[str]) -> int:
    from conformance.selftest import command

    return command.main(argv)


# The commands besides grading one runner: the one table that dispatches them and that --help
# lists (each imported when called, so a grading pays for none of them).
COMMANDS: Dict[str, Tuple[Callable[[Sequence[str]], int], str]] = {
    "class": (_class, "grade a whole class of submissions: grades.csv, a class report, regrades"),
    "worker": (_worker, "grade a class's submissions sent by Celery (class --broker)"),
    "replay": (_replay, "grade a recorded runner again, and compare the grade with its record"),
    "export": (_export, "package the suite as a grading platform's autograder (Gradescope's zip)"),
    "selftest": (_selftest, "grade the bundled correct and wrong runners: does the suite judge right?"),
    "roots": (lambda argv: main_roots(argv), "make the system roots that chroot isolation grades in"),
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] and argv[0] in COMMANDS:
        return COMMANDS[argv[0]][0](argv[1:])
    # Anything else grades one runner, as it always has; a first word that is neither an option
    # nor a command is a mistyped command, said as such.
    if argv[:1] and not argv[0].startswith("-"):
        print(
            "pyops-conformance: error: no command %r (commands: %s; or grade a runner: --runner FILE)"
            % (argv[0], ", ".join(COMMANDS)),
            file=sys.stderr,
        )
        return EXIT_ERROR
    # Before anything is made (validate() probes for namespaces in a lab of its own): a kill from
    # here on unwinds, and what was made is removed.
    stop_on_signals()
    try:
        options = build_parser().parse_args(argv)
        validate(options)
    except UsageError as error:
        print("pyops-conformance: error: %s" % error, file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:  # nothing graded yet: nothing to say
        return EXIT_INTERRUPTED

    if options.watch:
        return _watch(argv, options)
    try:
        return _grade(options)
    except KeyboardInterrupt:  # stopped outside pytest's session, which says so itself within it
        print(view.stopped(options.lang), flush=True)
        return EXIT_INTERRUPTED


def _grade(options: argparse.Namespace) -> int:
    """Grade the runner `options` name (--repeat times), then write the reports they ask for."""
    # Read before grading: what a grading's record names is the file as it was graded, even if it is
    # saved again meanwhile.
    started, runner_bytes = provenance.now(), Path(options.decided["runner"]).read_bytes()
    learner = options.view == "learner"
    if learner:
        print("\n".join(view.header(dict(options.decided, profile=options.profile), options.lang)), flush=True)
    with scratch.folder("pyops-conformance-") as scratch_folder:
        rounds: List[Dict] = []
        for number in range(1, options.repeat + 1):
            # Never the user's path: a runner may write there while it runs (a folder others may
            # write, found in the grader's argv), and the grader would read its forgery back.
            json_path = scratch_folder / ("round-%d.json" % number)
            if options.repeat == 1 and not learner:
                code, data = grade_once(options, json_path)
            else:
                # pytest's own output is kept back: shown in the pytest view's last round, and
                # whenever the suite could not run (it says why).
                shown = io.StringIO()
                with contextlib.redirect_stdout(shown):
                    code, data = grade_once(options, json_path)
                # What pytest said of a cut grading, its banner and its partial table, is no verdict.
                if code != PYTEST_INTERRUPTED:
                    _show_round(options, number, code, data, shown.getvalue())
            if code == PYTEST_INTERRUPTED:
                print(view.stopped(options.lang), flush=True)
                return EXIT_INTERRUPTED
            if data is None:
                return EXIT_ERROR  # pytest could not start the suite; it has said why
            rounds.append(data)
        junit = junit_beside(json_path)
        junit_text = junit.read_text(encoding="utf-8") if options.junit and junit.exists() else None
    data = rounds[-1]
    data["score"] = platforms.score(data, options.lab)
    if options.view == "learner":
        print(view.score_line(data["score"], options.lang))
    data["provenance"] = _provenance(options, data, started, runner_bytes)
    if options.repeat > 1:
        changed = report.varied(rounds)
        for line in report.varied_lines(changed, options.repeat):
            print(line)
        data["repeat"] = {"rounds": options.repeat, "varied": changed}
    reports = [
        (options.json, lambda: report.as_json(data)),
        (options.gradescope, lambda: report.as_json(platforms.gradescope(data, options.lab))),
        (options.prairielearn, lambda: report.as_json(platforms.prairielearn(data, options.lab))),
        (options.junit, lambda: junit_text),
    ]
    for path, text in reports:
        written = text() if path else None
        if written is None:
            continue
        try:
            report.write_atomically(Path(path), written)
        except OSError as error:
            print("pyops-conformance: error: cannot write %s: %s" % (path, error.strerror or error), file=sys.stderr)
            return EXIT_ERROR
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in platforms.github_annotations(data):
            print(line)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as summary:
            summary.write(platforms.github_summary(data))
    status = exit_status(code, data["summary"])
    return EXIT_ERROR if options.repeat > 1 and data["repeat"]["varied"] else status


def _watch(argv: Sequence[str], options: argparse.Namespace) -> int:
    """--watch: the same grading again on every save of the runner file (watch.py)."""
    from conformance import watch

    for name in ("json", "junit", "gradescope", "prairielearn"):
        if getattr(options, name):
            print("pyops-conformance: error: --watch shows the report on the screen; no --%s" % name, file=sys.stderr)
            return EXIT_ERROR
    if options.repeat > 1:
        print("pyops-conformance: error: --watch grades once per save; no --repeat", file=sys.stderr)
        return EXIT_ERROR
    again = [arg for arg in argv if arg != "--watch"]
    if not options.reference and "--runner" not in again and not any(a.startswith("--runner=") for a in again):
        again += ["--runner", options.runner]  # the lab's file, as this grading chose it
    return watch.run(again, Path(options.decided["runner"]), options.lang)


def _provenance(options: argparse.Namespace, data: Mapping, started: str, runner_bytes: bytes) -> Dict:
    """What produced this grading (provenance.py), for the JSON report and a replay."""
    decided = options.decided
    python = decided["python"]
    return provenance.record(
        dict(decided, python_version=provenance.python_version(python), seed=data.get("seed", options.seed)),
        runner_bytes,
        options.config_text,
        {"lang": options.lang, "clauses": list(options.clause), "keyword": options.keyword},
        started,
        data.get("timing", {}).get("played_again", 0),
        available_cpus(),
    )


def _show_round(options: argparse.Namespace, number: int, code: int, data: Optional[Dict], pytest_said: str) -> None:
    """A round of a grading whose pytest output was kept back: its count line when there are
    rounds, pytest's words where they say something, the learner's view of the last round."""
    last, learner = number == options.repeat, options.view == "learner"
    if options.repeat > 1:
        counts = data["summary"] if data else None
        print(
            "round %d/%d: %s"
            % (number, options.repeat, _counts(counts) if counts else "no report (the suite could not run)"),
            flush=True,
        )
    if not learner:
        if data is None or last:
            sys.stdout.write(pytest_said)
    else:
        if data is None or code not in (0, 1):  # pytest's own words say what went wrong
            sys.stdout.write(pytest_said)
        if data is not None and last:
            sys.stdout.write("\n".join(view.render(data, options.lang)) + "\n")


def grade_once(options: argparse.Namespace, json_path: Path) -> Tuple[int, Optional[Dict]]:
    """One run of the suite: pytest's exit code and the JSON report (None if the suite never ran)."""
    import pytest  # here, so a usage error costs no pytest start-up

    with only_named_plugins():
        code = pytest.main(pytest_args(options, json_path), plugins=[])
    if not json_path.exists():
        return code, None
    return code, json.loads(json_path.read_text(encoding="utf-8"))


@contextlib.contextmanager
def only_named_plugins() -> Iterator[None]:
    """pytest loads the plugins pytest_args names, not every one installed beside the suite.

    Another plugin in the grader's environment could change how checks run (rerun, reorder or
    time them out), and costs the grading its import (hypothesis's: 0.4 CPU-s).
    """
    before = os.environ.get(AUTOLOAD_VAR)
    os.environ[AUTOLOAD_VAR] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[AUTOLOAD_VAR]
        else:
            os.environ[AUTOLOAD_VAR] = before


def _counts(summary: Dict) -> str:
    return "%(passed)d passed, %(failed)d failed, %(errors)d errors" % summary


def exit_status(pytest_code: int, summary: dict) -> int:
    """1 when a check failed, whatever else could not be judged: a failure is certain either way."""
    if pytest_code not in (0, 1) or summary["total"] == 0:
        return EXIT_ERROR
    if summary["failed"]:
        return EXIT_FAILED
    return EXIT_ERROR if summary["errors"] else EXIT_PASSED


def main_roots(argv: Sequence[str]) -> int:
    """pyops-conformance roots make [--count N] [--folder DIR]: system roots for chroot isolation."""
    import errno
    import subprocess

    from conformance.harness import roots

    parser = Parser(prog="pyops-conformance roots", description="System roots for the chroot isolation mode.")
    parser.add_argument("command", choices=("make",), help="make: make them (as root, where device nodes can be made)")
    parser.add_argument("--count", type=int, default=roots.DEFAULT_COUNT, help="how many (default %(default)s)")
    parser.add_argument("--folder", type=Path, help="where (default: $PYOPS_ROOTS or %s)" % roots.DEFAULT_FOLDER)
    try:
        options = parser.parse_args(argv)
        if not 1 <= options.count <= 64:
            raise UsageError("--count needs 1 to 64")
    except UsageError as error:
        print("pyops-conformance roots: error: %s" % error, file=sys.stderr)
        return EXIT_ERROR
    where = options.folder or roots.folder()
    try:
        made = roots.make(where, options.count)
    except (OSError, subprocess.CalledProcessError) as error:
        if getattr(error, "errno", None) == errno.EPERM:
            error = OSError("device nodes need root with CAP_MKNOD (%s)" % error)
        print("pyops-conformance roots: error: could not make the roots in %s: %s" % (where, error), file=sys.stderr)
        return EXIT_ERROR
    print("%d system roots in %s" % (len(made), where))
    return EXIT_PASSED

"""The pytest plugin: options, the `runner` fixture, clause markers, profiles and the report.

Loaded through the `pytest11` entry point, so the suite also runs as plain
`pytest --pyargs conformance.checks --runner PATH`.
"""

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

from conformance.harness import cpuwait, forks, identity, labfiles, machine, memory, observations, scratch
from conformance.harness.inert import inert
from conformance.harness.observations import Observations
from conformance.harness.processes import SESSION_VAR, begin_session, reap, session_id
from conformance.harness.restore import Snapshot
from conformance.harness.sandbox import (
    CHROOT,
    LAB_PATHS,
    MODES,
    NAMESPACE,
    SHARED,
    SUB_DIR,
    LabMaker,
    claim_owner_files,
    probe_chroot,
    probe_namespace,
    remove_abandoned_labs,
    unreachable_lab,
)
from conformance.harness.witness import evidence
from conformance.judging import expect, scenarios
from conformance.judging.blocking import Blocked, Canary
from conformance.judging.driver import Driver, driving
from conformance.lab import commands, draws
from conformance.lab.clauses import CLAUSES, CORE, LANGUAGES, PROFILES, in_profile
from conformance.reporting import report, view
from conformance.usage import stop_on_signals, stopped_by

SUITE_DIR = Path(__file__).resolve().parent / "checks"


# Shared mode needs the real lab paths; an ordinary user's namespace mode needs user namespaces.
NOT_ROOT = (
    "cannot grade as uid %d (not root) here: %s, and shared mode cannot use the lab's paths (%s). "
    "Two ways work: grade in the lab image (docker run, see README's learner section), or as root "
    "(sudo); user namespaces, where an administrator turns them on, let an ordinary user grade too"
)
NO_REFERENCE = "no runner to grade: give --runner FILE (this installation has no bundled reference runner)"


def reference_runner() -> Optional[Path]:
    """The bundled reference runner, or None in an installation without it (the lab image).

    Found beside this package, never imported: `import runner` would first look in the folder
    the suite was started from (`python -m` puts it on sys.path, xdist's workers too), which is
    where a learner's runner.py usually is, and would run it as the grader.
    """
    bundled = Path(__file__).resolve().parents[1] / "runner" / "runner.py"
    return bundled if bundled.is_file() else None


def base_interpreter() -> str:
    """The interpreter this one's venv was made from: it runs runners, and cannot import the suite.

    A runner run by the suite's own interpreter could `import runner.runner` (the reference) and
    hand that in. Outside a venv this is the running interpreter itself.
    """
    if sys.prefix == sys.base_prefix:
        return sys.executable
    for name in ("python%d.%d" % sys.version_info[:2], "python3"):
        candidate = Path(sys.base_prefix) / "bin" / name
        if os.access(str(candidate), os.X_OK):
            return str(candidate)
    return sys.executable


@functools.lru_cache(maxsize=None)  # the CLI decides before pytest starts, then the plugin again
def real_interpreter(python: str) -> str:
    """The executable `python` runs as: a wrapper (pyenv's shim, a script that execs python) resolved.

    Commands the checks start through the runner's interpreter are recognised by their argv in
    /proc, which names the real executable, not the wrapper that exec'd it.
    """
    found = shutil.which(python)
    if not found:
        raise Refused("python interpreter not found: %s" % python)
    try:
        said = (
            subprocess.run(
                [found, "-c", "import sys; print(sys.executable)"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                timeout=30,
            )
            .stdout.decode("utf-8", "replace")
            .strip()
        )
    except (OSError, subprocess.SubprocessError):
        said = ""
    if not said or not os.access(said, os.X_OK):
        raise Refused("not a Python interpreter: %s" % python)
    return said


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pyops-conformance", "pyops-lab conformance suite")
    group.addoption("--runner", default=None, help="the runner.py to grade (default: the bundled reference)")
    group.addoption(
        "--runner-python", default=None, help="interpreter that runs it (default: the base of this one's venv)"
    )
    group.addoption(
        "--runner-user",
        default=identity.AUTO,
        choices=identity.CHOICES,
        help="own: an unprivileged uid of its own per check; grader: the grader's user; auto: own when possible",
    )
    group.addoption("--lab-profile", default=CORE, choices=PROFILES, help="core or extended (default: core)")
    group.addoption("--lab-lang", default="en", choices=LANGUAGES, help="language of hints (default: en)")
    group.addoption(
        "--lab-isolation",
        default="auto",
        choices=("auto",) + MODES,
        help="private mount namespaces, private system roots, or the real lab paths one test at a time",
    )
    group.addoption("--lab-json", default=None, help="write the JSON report to this file")
    group.addoption(
        "--lab-progress",
        action="store_true",
        help="say each lab step's result as soon as all its checks are done (the learner view)",
    )
    group.addoption(
        "--lab-forks",
        type=int,
        default=0,
        metavar="N",
        help="run the checks in N processes forked from this one once it has collected them (see forks.py)",
    )
    group.addoption(
        "--lab-seed",
        type=int,
        default=None,
        metavar="N",
        help="draw the values a runner must not predict from this seed (default: a random one; see draws.py)",
    )
    group.addoption(
        "--lab-clause",
        action="append",
        default=[],
        metavar="ID",
        help="only checks of this clause or step (S2.4, S2, X); repeatable",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "clause(id): the lab clause a conformance test checks")
    config.addinivalue_line(
        "markers",
        "slow(seconds): a check that needs about this long; it runs first (for a shared scenario, "
        "one of the checks that judge it carries its length)",
    )
    config.addinivalue_line(
        "markers",
        "judges(scenario): the check judges a scenario the grading plays ahead (scenarios.PLAYED_AHEAD); "
        "it runs last, when that play is over",
    )
    expect.LANG = config.getoption("--lab-lang")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # a pytest-xdist worker: the controller has decided everything
        config.pyops = dict(workerinput["pyops"])  # type: ignore[attr-defined]
        os.environ[SESSION_VAR] = config.pyops["session"]  # type: ignore[attr-defined]
        commands.PY = config.pyops["python"]  # type: ignore[attr-defined]
        draws.use(config.pyops["seed"])  # type: ignore[attr-defined]
        return
    # From here the controller makes folders and processes of its own: a signal must unwind, so
    # fixtures clean up, the session's processes are reaped, the lab is put back and the partial
    # report written, even when it comes before the session has begun.
    stop_on_signals()
    if config.getoption("--lab-forks") and getattr(config.option, "numprocesses", None):
        raise pytest.UsageError("--lab-forks and pytest-xdist's -n both run checks in parallel: give one of them")
    try:
        config.pyops = decide(  # type: ignore[attr-defined]
            config.getoption("--runner"),
            config.getoption("--runner-python"),
            config.getoption("--lab-isolation"),
            config.getoption("--runner-user"),
        )
    except Refused as refusal:
        raise pytest.UsageError(str(refusal)) from None
    config.pyops["profile"] = config.getoption("--lab-profile")  # type: ignore[attr-defined]
    seed = config.getoption("--lab-seed")
    config.pyops["seed"] = draws.new_seed() if seed is None else seed  # type: ignore[attr-defined]
    draws.use(config.pyops["seed"])  # type: ignore[attr-defined]
    config.pyops["ahead"] = played_ahead(config)  # type: ignore[attr-defined]
    commands.PY = config.pyops["python"]  # type: ignore[attr-defined]
    remove_abandoned_labs()  # what gradings killed earlier left (SIGKILL, a lost container)
    if config.pyops["isolation"] != CHROOT:  # type: ignore[attr-defined]
        claim_owner_files(other_uid=config.pyops["runner_user"] == identity.OWN)  # type: ignore[attr-defined]
    config.pyops["session"] = begin_session()  # type: ignore[attr-defined]
    with scratch.signals_held():  # made and its removal in place, or neither
        config.pyops["observations"] = observations.new_folder()  # type: ignore[attr-defined]
        config.add_cleanup(lambda: observations.remove_folder(config.pyops["observations"]))  # type: ignore[attr-defined]
    config.pyops_snapshot = None  # type: ignore[attr-defined]
    config.pluginmanager.register(Collector(config), "pyops-collector")


def played_ahead(config: pytest.Config) -> List[str]:
    """The scenarios this grading plays at its start, on the controller (see scenarios.PLAYED_AHEAD).

    Only with private labs (a namespace each: playing beside the checks disturbs none of them),
    only when a check that judges them is selected, and not under -k (the checks' names are not
    known before the workers collect them; a grading of a few checks has no time to win).
    """
    info = config.pyops  # type: ignore[attr-defined]
    if info["isolation"] != NAMESPACE or config.getoption("keyword"):
        return []
    wanted = config.getoption("--lab-clause")
    return [
        name
        for name, (clause, _play) in scenarios.PLAYED_AHEAD.items()
        if in_profile(clause, info["profile"]) and _selected(clause, wanted)
    ]


class Refused(Exception):
    """The grading cannot run as asked (the message says why, in one line)."""


def decide(runner: Optional[str], python: Optional[str], isolation: str, runner_user: str) -> Dict:
    """What runs what, and how: the runner file, its interpreter, the isolation, the runner's user.

    Called by the CLI before pytest starts (to refuse in one line) and by pytest_configure.
    """
    chosen = runner or reference_runner()
    if chosen is None:
        raise Refused(NO_REFERENCE)
    runner_file = Path(chosen)
    if not runner_file.is_file():
        raise Refused("runner file not found: %s" % runner_file)
    python = real_interpreter(python or base_interpreter())
    isolation, plan, why_not, roots_found = _isolation(isolation, python)
    if isolation == SHARED and os.geteuid() != 0:
        out_of_reach = unreachable_lab()
        if out_of_reach:
            raise Refused(NOT_ROOT % (os.geteuid(), why_not, out_of_reach))
    # In shared mode the runner's uid must reach the real lab (an image opens /root for it).
    closed = identity.closed_ancestor(SUB_DIR) if isolation == SHARED else None
    try:
        user, why_not_own = identity.decide(runner_user, bool(plan and plan.user_namespace), closed)
    except ValueError as error:
        raise Refused(str(error)) from None
    return {
        "runner": str(runner_file.resolve()),
        "python": python,
        "isolation": isolation,
        "user_namespace": bool(plan and plan.user_namespace),  # namespace mode without root
        "why_not_namespace": why_not,
        "roots": roots_found,
        "runner_user": user,
        "why_not_own_user": why_not_own,
        "evidence": evidence(),
    }


def _isolation(asked: str, python: str):
    """(isolation, mount plan, why not a namespace, roots): the first of namespace, chroot, shared that works."""
    if asked == SHARED:
        return SHARED, None, "shared mode was asked for", 0
    if asked in ("auto", NAMESPACE):
        plan, why_not = probe_namespace()
        if plan is not None:
            return NAMESPACE, plan, "", 0
        if asked == NAMESPACE:
            raise Refused("namespace isolation is not possible here: %s" % why_not)
        if os.geteuid() != 0:  # chroot needs root: only shared mode is left to ask about
            return SHARED, None, why_not, 0
    else:
        why_not = "chroot mode was asked for"
    roots, why_not_roots = probe_chroot(python)
    if roots is not None:
        return CHROOT, None, why_not, len(roots)
    if asked == CHROOT:
        raise Refused("chroot isolation is not possible here: %s" % why_not_roots)
    return SHARED, None, "%s; and no chroot: %s" % (why_not, why_not_roots), 0


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # pytest-xdist hook, called on the controller
    node.workerinput["pyops"] = node.config.pyops


def pytest_report_header(config: pytest.Config) -> List[str]:
    lines = view.header(config.pyops)  # type: ignore[attr-defined]
    forked = config.getoption("--lab-forks")
    if forked:
        lines.append("checks in parallel: %d processes forked from this one" % forked)
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput"):
        return
    # Again (pytest_configure did it first): pytest itself, or a plugin, may have set its own since.
    stop_on_signals()
    if config.pyops["isolation"] == SHARED:  # type: ignore[attr-defined]
        config.pyops_snapshot = Snapshot.take(LAB_PATHS)  # type: ignore[attr-defined]


def pytest_runtest_logfinish() -> None:
    # A KeyboardInterrupt raised where Python cannot propagate it (a fork handler, a finalizer)
    # is printed as "ignored" and lost; the signal is not: the session stops after this check.
    if stopped_by:
        raise KeyboardInterrupt("signal %d" % stopped_by[0])


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: List[pytest.Item]) -> None:
    profile = config.pyops["profile"]  # type: ignore[attr-defined]
    keep, drop, unmarked = [], [], []
    for item in items:
        clause = _clause_of(item)
        if clause is None:
            if SUITE_DIR in Path(str(item.fspath)).resolve().parents:
                unmarked.append(item.nodeid)
            keep.append(item)
        elif in_profile(clause, profile) and _selected(clause, config.getoption("--lab-clause")):
            item.user_properties.append(("clause", clause))
            keep.append(item)
        else:
            drop.append(item)
    if unmarked:
        raise pytest.UsageError("conformance tests without a clause marker: %s" % ", ".join(unmarked))
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    # The longest tests first, so parallel workers do not end waiting on one slow straggler (but
    # those that judge a scenario played ahead last: it is ready by then).
    ahead = set(config.pyops["ahead"])  # type: ignore[attr-defined]
    items.sort(key=lambda item: (_scenario_of(item) in ahead, -_expected_seconds(item)))
    items[:] = dealt(items, int(getattr(config, "workerinput", {}).get("workercount", 0)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> Optional[bool]:
    """With --lab-forks N, the checks run in forks of this process (forks.py); else pytest's loop."""
    config = session.config
    wanted = config.getoption("--lab-forks")
    if not wanted or hasattr(config, "workerinput") or session.config.option.collectonly:
        return None
    if session.testsfailed and not config.option.continue_on_collection_errors:
        return None  # pytest's own loop says so
    collector = config.pluginmanager.get_plugin("pyops-collector")
    assert isinstance(collector, Collector)  # registered by pytest_configure on the controller
    forks.run(session, wanted, then=collector.ahead.start)
    return True


def dealt(ordered: List, workers: int) -> List:
    """`ordered` dealt round-robin into one share per worker, the shares laid end to end.

    pytest-xdist's worksteal hands each worker a contiguous chunk of the collection at first
    (sorted alone, one worker would get every slow check), in chunks of len // workers with the
    remainder one each to the last ones: the bigger shares therefore go last, so that every
    chunk is exactly one share and each worker starts with the next slowest check.
    """
    if workers <= 1:
        return list(ordered)
    shares = [ordered[share::workers] for share in range(workers)]  # the first ones may be longer
    return [item for share in reversed(shares) for item in share]


def _selected(clause: str, wanted: List[str]) -> bool:
    """No --lab-clause selects all; S2 selects S2.1 ... S2.4; X selects every X clause."""
    return not wanted or any(
        clause == w or clause.startswith(w + ".") or (w == "X" and clause[0] == "X") for w in wanted
    )


def _clause_of(item: pytest.Item) -> Optional[str]:
    marker = item.get_closest_marker("clause")
    if marker is None:
        return None
    clause = marker.args[0]
    if clause not in CLAUSES:
        raise pytest.UsageError("%s: unknown clause %r" % (item.nodeid, clause))
    return clause


# How many times a check is played at most while a busy machine leaves its timing unsettled.
PLAYS = 3


def _expected_seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("slow")
    return float(marker.args[0]) if marker and marker.args else 0.0


def _scenario_of(item: pytest.Item) -> Optional[str]:
    """The scenario played ahead that a check judges, as its `judges` marker names it."""
    marker = item.get_closest_marker("judges")
    return marker.args[0] if marker else None


@pytest.fixture
def runner(request: pytest.FixtureRequest):
    """The runner under test, in a lab of this test's own."""
    config = request.config
    info = config.pyops  # type: ignore[attr-defined]
    maker, canary = _session_parts(config)
    # The play holds its turn on the machine (machine.py) before anything of the lab, and lets
    # both go when it is played again (pytest_pyfunc_call): so a replay never waits for a lab its
    # own check still holds (the real paths in shared mode, a system root), nor for a turn.
    with contextlib.ExitStack() as first_play:
        first_play.enter_context(machine.turn(alone=False))
        canary.probe(lambda: _lab(maker, info), info["python"], _observations(config))
        driver = first_play.enter_context(_driven(request.node, 0))
        request.node._pyops_first_play = first_play  # type: ignore[attr-defined]
        yield driver


@contextlib.contextmanager
def _driven(item: pytest.Item, replay: int):
    """A Driver in a fresh lab for one play of `item`'s check; its runner calls kept for the report."""
    config = item.config
    info = config.pyops  # type: ignore[attr-defined]
    maker, canary = _session_parts(config)
    observations = _observations(config)
    with driving(lambda: _lab(maker, info), info["python"], canary.gate, observations, replay) as driver:
        try:
            yield driver
        finally:
            item.user_properties.append(("runner_calls", driver.calls()))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Optional[bool]:
    """Play a check again, in a fresh lab, while its timing is Unsettled (see cpuwait.py).

    Waiting for a CPU only ever makes a runner later, so a pass is a pass however busy the machine;
    a bound missed by no more than that wait is measured again, up to PLAYS times in all, each
    replay alone on the machine (machine.turn). The last, when alone, also measures the machine
    itself (cpuwait.probing): a runner that waited more than the machine made anyone wait fails.
    If the machine never lets it be judged, the check is an error of the grading, not a failure.
    """
    if not isinstance(pyfuncitem.funcargs.get("runner"), Driver):
        return None  # not a check of a runner: pytest calls it as usual
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    for replay in range(PLAYS):
        try:
            if replay == 0:
                pyfuncitem.obj(**arguments)
            else:
                pyfuncitem.user_properties.append(("plays", replay + 1))
                pyfuncitem._pyops_first_play.close()  # type: ignore[attr-defined]
                with machine.turn(alone=True) as alone, contextlib.ExitStack() as measured:
                    if alone and replay == PLAYS - 1:
                        measured.enter_context(cpuwait.probing())
                    with _driven(pyfuncitem, replay) as driver:
                        pyfuncitem.obj(**dict(arguments, runner=driver))
            return True
        except expect.Unsettled as unsettled:
            last = unsettled
    raise NotJudged(*last.args)  # its words, in every language (expect.Said)


class NotJudged(Exception):
    """A check whose timing no play could settle: the grading's error, not the runner's failure."""


def _observations(config: pytest.Config) -> Observations:
    """This session's observations (Driver.scenario); each --repeat round starts afresh."""
    if not hasattr(config, "_pyops_observations"):
        config._pyops_observations = Observations(config.pyops["observations"])  # type: ignore[attr-defined]
    return config._pyops_observations  # type: ignore[attr-defined]


@contextlib.contextmanager
def _lab(maker: LabMaker, info: Dict):
    """A lab for one check, with the user its runner runs as (a uid of its own, or None)."""
    if info["runner_user"] != identity.OWN:
        with maker.lab() as lab:
            yield lab
    else:
        with identity.leased_user() as user, maker.lab(user) as lab:
            yield lab


def _session_parts(config: pytest.Config):
    """This process's LabMaker and Canary, made on first use."""
    parts = getattr(config, "_pyops_parts", None)
    if parts is None:
        info = config.pyops  # type: ignore[attr-defined]
        # The reference stays hidden from runners (in namespace mode; the image makes it unreadable).
        reference = reference_runner()
        hidden = [reference.parent] if reference is not None and info["runner_user"] == identity.OWN else []
        # The runner's root holds the interpreter that runs it (and the checks' Python commands).
        parts = (LabMaker(info["isolation"], Path(info["runner"]), session_id(), hidden, [info["python"]]), Canary())
        config._pyops_parts = parts  # type: ignore[attr-defined]
    return parts


# A new-style wrapper: a stop (KeyboardInterrupt) that lands in it propagates as from any code,
# where an old-style one (hookwrapper=True) had pluggy print a PluggyTeardownRaisedWarning.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    test_report = yield
    _annotate(item, call, test_report)
    return test_report


def _annotate(item: pytest.Item, call, test_report) -> None:  # type: ignore[no-untyped-def]
    """What a check's report says of its failure: the teaching message, the clause charged."""
    if call.excinfo is None or test_report.when not in ("setup", "call"):
        return
    error = call.excinfo.value
    if isinstance(
        error, labfiles.LabFileRefused
    ):  # a lab file a check reads is a link, a FIFO...: the runner's failure
        error = expect.refusal(error)
    if isinstance(error, expect.ClauseFailure):
        test_report.longrepr = inert(str(error))  # the teaching message, not a traceback, shown as text
        test_report.user_properties.append(("message", str(error)))
        # In every language too: a class regraded in another one rewords it without grading again.
        test_report.user_properties.append(("messages", error.worded()))
        # A failure of another clause than the check's own is that clause's to answer for; the
        # check's clause is blocked by it (verdicts.py).
        if isinstance(error, Blocked):
            test_report.user_properties.append(("blocked_by", error.clause))
            test_report.user_properties.append(("blocked_because", str(error.because)))
            test_report.user_properties.append(
                ("blocked_because_in", expect.every_language(lambda: str(error.because)))
            )
            if error.does_not_compile:
                test_report.user_properties.append(("does_not_compile", True))
        elif error.clause != dict(item.user_properties).get("clause"):
            test_report.user_properties.append(("charged", error.clause))
    elif test_report.failed:
        # Not a runner's fault the suite can name: a defect of the suite or of this machine.
        test_report.user_properties.append(("message", report.short_error(call.excinfo)))
        if error.args and isinstance(error.args[0], expect.Said):  # the suite's words (Unsettled's)
            test_report.user_properties.append(
                ("messages", expect.every_language(lambda: report.short_error(call.excinfo)))
            )
        test_report.user_properties.append(("harness_error", True))
        if isinstance(error, NotJudged):  # the machine's, not the suite's: worth grading again
            test_report.user_properties.append(("not_judged", True))


class Progress:
    """One line that grows by a step as soon as the last of its checks is done (the learner view):
    `steps done: S1 (33/34) S2 (22/22) ...`, ended when the grading ends. One line, not one per
    step: it shows the grading goes on, and leaves the learner's screen to the verdicts.

    A check's step is its module's (test_s3_retries.py holds S3's checks, test_x_extended.py X's),
    so the controller knows each step's count from the collected ids alone, under xdist too.
    """

    _STEP = re.compile(r"(?:^|/)test_(s\d+|x)_[^/]*\.py::")

    def __init__(self, enabled: bool, lang: str) -> None:
        self.enabled = enabled
        self.lang = lang
        self.total: Dict[str, int] = {}  # checks per step
        self.left: Dict[str, set] = {}  # of those, the ones not done yet
        self.started = False  # the line is begun (and must be ended)

    def expect(self, ids: Sequence[str]) -> None:
        if not self.enabled or self.total or not ids:
            return
        for nodeid in ids:
            step = self._step_of(nodeid)
            if step is not None:
                self.left.setdefault(step, set()).add(nodeid)
        self.total = {step: len(left) for step, left in self.left.items()}

    def done(self, nodeid: str, outcomes: report.Outcomes) -> None:
        step = self._step_of(nodeid)
        if not self.enabled or step not in self.left or nodeid not in self.left[step]:
            return
        self.left[step].discard(nodeid)
        if self.left[step]:
            return
        passed = sum(
            1 for test in outcomes.as_list() if test["outcome"] == "passed" and self._step_of(test["id"]) == step
        )
        said = view.progress_step(step, passed, self.total[step], self.lang)
        self._write(said if self.started else view.progress_start(self.lang) + said)
        self.started = True

    def end(self) -> None:
        if self.started:
            self._write("\n")
            self.started = False

    @staticmethod
    def _write(text: str) -> None:
        # The real terminal: the learner view keeps pytest's own output back until the end.
        stream = sys.__stdout__
        if stream is not None:
            stream.write(text)
            stream.flush()

    def _step_of(self, nodeid: str) -> Optional[str]:
        found = self._STEP.search(nodeid)
        return found.group(1).upper() if found else None


class PlayAhead:
    """The controller's thread that plays this grading's scenarios PLAYED_AHEAD from its start.

    What it sees is shared like any observation (observations.py): a check that asks while it
    plays waits for it, one that asks later judges what it saw. It plays nothing when a basic
    call fails (those checks are blocked anyway).
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.thread = threading.Thread(target=self._play, name="pyops-play-ahead", daemon=True)
        self.runner_calls: List[Sequence[float]] = []  # for the report's timing, as a check's are

    def start(self) -> None:
        if self.config.pyops["ahead"]:  # type: ignore[attr-defined]
            self.thread.start()

    def _play(self) -> None:
        info = self.config.pyops  # type: ignore[attr-defined]
        maker, canary = _session_parts(self.config)
        seen = _observations(self.config)
        try:
            with machine.turn(alone=False):
                canary.probe(lambda: _lab(maker, info), info["python"], seen)
                if any(canary.failed.values()):
                    return
                for name in info["ahead"]:
                    _clause, play = scenarios.PLAYED_AHEAD[name]
                    with driving(lambda: _lab(maker, info), info["python"], canary.gate, seen) as driver:
                        try:
                            play(driver)
                        finally:
                            self.runner_calls += driver.calls()
        except Exception:  # noqa: BLE001
            # Nothing was shared, so the first check that judges the scenario plays it itself,
            # and says there whatever went wrong.
            return

    def stop(self) -> None:
        """Wait for the thread; one still playing (no check asked: the session was stopped) is ended."""
        while self.thread.is_alive():
            reap(session_id())  # again each time: it may have started a runner since
            self.thread.join(timeout=0.1)


class Collector:
    """On the controller: gathers every test's outcome, writes the reports, restores the lab."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.tests = report.Outcomes()
        self.progress = Progress(config.getoption("--lab-progress"), expect.LANG)
        self.ahead = PlayAhead(config)

    def pytest_sessionstart(self) -> None:
        if not self.config.getoption("--lab-forks"):
            self.ahead.start()  # beside the workers' start-up; with forks, once they are made

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.progress.expect([item.nodeid for item in session.items])  # none here under xdist

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: List[str]) -> None:
        self.progress.expect(ids)  # every worker collects the same checks

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.tests.add(report)
        if report.when == "teardown":  # a check's last phase, whatever happened before it
            self.progress.done(report.nodeid, self.tests)

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int) -> None:
        info = self.config.pyops  # type: ignore[attr-defined]
        tests = self.tests.as_list()
        if not any(test["clause"] for test in tests) or exitstatus == pytest.ExitCode.INTERRUPTED:
            return  # no conformance check ran (the project's own tests, say), or not all: no table to show
        for line in report.step_table(tests, info["profile"]):
            terminalreporter.write_line(line)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.progress.end()
        self.ahead.stop()
        self.tests.runner_calls += self.ahead.runner_calls
        # Whatever any worker's runners left (a worker that was stopped mid-check cannot clean up).
        reap(session_id())
        memory.remove_left(session_id())  # the checks' memory cgroups that outlived their processes
        snapshot = self.config.pyops_snapshot  # type: ignore[attr-defined]
        if snapshot is not None:
            snapshot.restore()
            self.config.pyops_snapshot = None  # type: ignore[attr-defined]
        path = self.config.getoption("--lab-json")
        # A grading cut short (Ctrl-C, a signal) writes no report: its checks that never ran would
        # read as a verdict.
        if path and session.exitstatus != pytest.ExitCode.INTERRUPTED:
            info = self.config.pyops  # type: ignore[attr-defined]
            report.write_json(Path(path), info, self.tests.as_list(), self.tests.runner_calls)

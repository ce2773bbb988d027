"""Gradings as Celery tasks on Redis, for a class too large for one machine (`class --broker`).

One task per submission, carrying the runner's text and the batch's settings, so a worker needs
nothing of the machine that sent it; it sends back the same dict a local grading returns, and the
sender stores it: grades.csv and the report are the same as from a local run.

A task is acknowledged only once graded (acks_late), so a worker that dies mid-grading leaves its
submission in the queue; with Redis it is handed to another worker when the visibility timeout
runs out. That timeout must outlast the longest grading, or a slow grading would be started a
second time: it is the grading timeout plus a margin (PYOPS_CELERY_VISIBILITY_S overrides it).
The sender waits no longer than patience_s() for the next result: what is unanswered by then is
recorded as error (not graded: the next run grades it), and the class ends.

Anyone who can reach the broker can write into it, so nothing read from it is trusted as such:
- tasks and results are signed with the class key (signing.py); a worker drops a task that does
  not verify, the sender a result that does not, and waits on for the real one;
- results do not go through Celery's result backend, where the first result stored for a task id
  wins (a later one is ignored, against duplicates): a forged one would shut out the real one.
  A worker pushes its signed result onto a list of the class's own; the sender pops each as it
  comes, so a result is gone from Redis once read;
- a worker grades only for a class still open (its sender waits for it): a task copied and sent
  again later is dropped, and so is what is left in the queue of a class stopped with Ctrl-C;
- a worker runs no interpreter and no setting its own configuration does not allow (_allowed);
- remote control is off: no broadcast through the broker (shutdown, revoke...) reaches a worker.

Celery and its Redis client are an extra: pip install 'pyops-lab[distributed]'.
"""

import base64
import dataclasses
import math
import os
import sys
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple

from conformance.classroom import grading, signing
from conformance.classroom.queue import Done, Job, Settings
from conformance.lab.clauses import LANGUAGES
from conformance.reporting import provenance
from conformance.usage import EXIT_ERROR

TASK = "pyops_conformance.grade"
VISIBILITY_MARGIN_S = 60
# How often a worker looks for submissions a dead worker left (kombu's own default is every 100 s).
RESTORE_EVERY_S = 10
# Above the grading timeout, its grace and the visibility timeout: the restore sweep and the polls.
WAIT_MARGIN_S = 30
KEYS = "pyops-conformance:%s:%s"  # a class's keys in Redis: its "open" mark and its results
UNANSWERED = (
    "no worker answered: no result came for %d s (are workers running, with the class key?); "
    "run the same command again to grade it"
)


def visibility_timeout() -> float:
    return float(os.environ.get("PYOPS_CELERY_VISIBILITY_S", grading.DEFAULT_TIMEOUT_S + VISIBILITY_MARGIN_S))


def patience_s(timeout_s: float) -> float:
    """How long the sender waits for the next result before it gives up on the rest.

    A worker grading for the class sends a result at least once per grading timeout (plus the
    grace of a stopped grading); a submission a dead worker held is handed out again within the
    visibility timeout and a restore sweep. So if nothing came for all of that together, no worker
    is grading for this class (none is running, or none has its key), however large the class.
    """
    return visibility_timeout() + timeout_s + grading.STOP_GRACE_S + WAIT_MARGIN_S


def make_app(broker: str) -> Any:
    try:
        from celery import Celery
    except ImportError:
        raise SystemExit("pyops-conformance: --broker needs Celery: pip install 'pyops-lab[distributed]'") from None
    app = Celery("pyops_conformance", broker=broker)
    app.conf.update(
        task_acks_late=True,  # acknowledged when graded: a dead worker's submission goes to another
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,  # a worker holds no more submissions than it grades
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,  # results go back signed, on a list of the class's own (above)
        worker_enable_remote_control=False,
        broker_transport_options={
            "visibility_timeout": visibility_timeout(),
            "unacked_restore_interval": RESTORE_EVERY_S,
            "unacked_restore_throttle": 1,
        },
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    return app


def _redis(broker: str, command: str) -> Any:
    import redis

    client = redis.Redis.from_url(broker)
    try:
        client.ping()
    except redis.RedisError as error:  # its message names the host, never the password
        print("pyops-conformance %s: error: cannot use the broker: %s" % (command, error), file=sys.stderr)
        raise SystemExit(EXIT_ERROR) from None
    return client


def queue(broker: str, key: bytes, settings: Settings):  # type: ignore[no-untyped-def]
    """The batch's queue: send every job, then store each result as it comes back."""
    if settings.timeout_s >= visibility_timeout():
        raise SystemExit(
            "pyops-conformance class: --timeout %g is too long for the broker's visibility timeout (%g s): a grading "
            "that long would be started twice; set PYOPS_CELERY_VISIBILITY_S higher on every machine"
            % (settings.timeout_s, visibility_timeout())
        )
    app = make_app(broker)
    client = _redis(broker, "class")

    def run(jobs: List[Job], settings: Settings, done: Done) -> None:
        batch = uuid.uuid4().hex
        opened, results = KEYS % (batch, "open"), KEYS % (batch, "results")
        patience = patience_s(settings.timeout_s)
        # Open while this sender waits (each result keeps it open): the mark outlives no wait.
        client.set(opened, "1", ex=math.ceil(patience))
        sent: Dict[str, Job] = {}
        refused = 0
        try:
            for job in jobs:
                task_id = str(uuid.uuid4())
                task = {
                    "id": task_id,
                    "batch": batch,
                    "runner": base64.b64encode(job.runner_text).decode("ascii"),
                    "settings": dataclasses.asdict(settings),
                }
                app.send_task(TASK, args=[signing.seal(key, signing.TASK, task)], task_id=task_id)
                sent[task_id] = job
            client.expire(opened, math.ceil(patience))
            heard = time.monotonic()
            while sent and time.monotonic() - heard < patience:
                popped = client.blpop([results], timeout=1)
                if popped is None:
                    continue
                result = signing.unseal(key, signing.RESULT, popped[1])
                if result is None or result.get("batch") != batch:
                    refused += 1
                elif result.get("id") in sent:  # else a second grading of one stored already
                    done(sent.pop(result["id"]), _outcome(result.get("outcome")))
                    heard = time.monotonic()
                    client.expire(opened, math.ceil(patience))
            for job in sent.values():
                done(job, _not_graded(UNANSWERED % patience))
        finally:
            # Whatever is still queued is dropped by the workers; what is running finishes unread.
            client.delete(opened, results)
            if refused:
                print(
                    "pyops-conformance class: warning: %d result(s) refused: not signed with the class key "
                    "(someone else can write to the broker)" % refused,
                    file=sys.stderr,
                )

    return run


def _outcome(outcome: Any) -> Dict:
    if not isinstance(outcome, dict) or outcome.get("status") not in grading.STATUSES:
        return _not_graded("the worker sent no outcome: %.300r" % (outcome,))
    return outcome


def _not_graded(message: str) -> Dict:
    # A grading that never ran is no fault of the submission: error, graded again on the next run.
    return dict(status=grading.ERROR, message=message, report=None, seconds=0, suite=provenance.suite_fingerprint())


def work(broker: str, key: bytes, pythons: Sequence[str], parallel: int) -> int:
    """Run a worker on this machine: `parallel` gradings at a time, each in private labs."""
    from conformance.harness.sandbox import probe_namespace

    plan, why_not = probe_namespace()
    if plan is None:
        print(
            "pyops-conformance worker: error: a worker grades in private labs, not possible here: %s" % why_not,
            file=sys.stderr,
        )
        return 2
    app = make_app(broker)
    client = _redis(broker, "worker")
    from celery.utils.log import get_task_logger

    logger = get_task_logger(__name__)

    @app.task(name=TASK, bind=True)
    def grade(task: Any, *args: Any, **kwargs: Any) -> None:
        # Any arguments at all: a task of another shape is refused as one that does not verify.
        _grade(task.request.id, args[0] if len(args) == 1 and not kwargs else None, key, pythons, client, logger)

    # Threads: each grading is a process of its own already (grading.py); a thread waits for it.
    # No broker URL in this argv: Celery shows its argv in the process title.
    app.worker_main(
        [
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(parallel),
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
        ]
    )
    return 0


def _grade(task_id: str, sealed: Any, key: bytes, pythons: Sequence[str], client: Any, logger: Any) -> None:
    task = signing.unseal(key, signing.TASK, sealed)
    if task is None or task.get("id") != task_id or not isinstance(task.get("batch"), str):
        logger.warning("refused task %s: not signed with the class key", task_id)
        return
    batch = task["batch"]
    if not client.exists(KEYS % (batch, "open")):
        logger.warning("dropped task %s: its class is no longer waiting for it", task_id)
        return
    try:
        runner, settings = _allowed(task, pythons)
    except Refused as refusal:
        logger.warning("refused task %s: %s", task_id, refusal)
        outcome = _not_graded("this worker does not grade it: %s" % refusal)
    else:
        try:
            outcome = settings.grade(runner)
        except Exception as error:  # the worker's own failure: the sender hears of it, not a timeout
            outcome = _not_graded("the worker failed: %s" % error)
    result = {"id": task_id, "batch": batch, "outcome": dict(outcome, worker=os.uname().nodename)}
    results = KEYS % (batch, "results")
    pipeline = client.pipeline()
    pipeline.rpush(results, signing.seal(key, signing.RESULT, result))
    # Unread this long, a result has no reader left: no sender waits longer.
    pipeline.expire(results, math.ceil(patience_s(visibility_timeout())))
    pipeline.execute()


class Refused(Exception):
    """A signed task asks for what this worker's own configuration does not allow."""


def _allowed(task: Dict, pythons: Sequence[str]) -> Tuple[bytes, Settings]:
    """The runner and settings of `task`, if this worker may grade with them.

    The key holders are trusted to send runners, not to choose what runs as root here: the
    interpreter must be one this worker was started with (--python), or the default.
    """
    fields = task.get("settings")
    names = [field.name for field in dataclasses.fields(Settings)]
    if not isinstance(fields, dict) or sorted(fields) != sorted(names):
        raise Refused("its settings are not a class's settings")
    python: Optional[str] = fields["python"]
    if python is not None and python not in pythons:
        raise Refused("--python %.200s is not allowed here (start the worker with --python %.200s)" % (python, python))
    timeout_s, workers, longest = fields["timeout_s"], fields["workers"], visibility_timeout()
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s < longest:
        raise Refused("--timeout %.50r: more than 0 and less than this worker's %g s" % (timeout_s, longest))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise Refused("-n %.50r: 0 or more" % (workers,))
    if fields["lang"] not in LANGUAGES:
        raise Refused("--lang %.50r: one of %s" % (fields["lang"], ", ".join(LANGUAGES)))
    # The configuration names no path and no program (config.py); the suite checks it as ever.
    if not isinstance(fields["config_text"], str):
        raise Refused("its configuration is not text")
    try:
        runner = base64.b64decode(task.get("runner"), validate=True)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise Refused("its runner is not base64") from None
    # More checks at once than two per core only slow a grading down, and fork without bound.
    workers = min(workers, 2 * (os.cpu_count() or 1))
    return runner, Settings(fields["config_text"], python, fields["lang"], workers, float(timeout_s))

"""Gradings as Celery tasks, for a class too large for one machine (`class --broker URL`).

One task per submission, carrying the runner's text and the batch's settings, so a worker needs
nothing of the machine that sent it; it returns the same dict a local grading does, and the
sender stores it: grades.csv and the report are the same as from a local run.

A task is acknowledged only once graded (acks_late), so a worker that dies mid-grading leaves its
submission in the queue; with Redis it is handed to another worker when the visibility timeout
runs out. That timeout must outlast the longest grading, or a slow grading would be started a
second time: it is the grading timeout plus a margin (PYOPS_CELERY_VISIBILITY_S overrides it).

Celery and its Redis client are an extra: pip install 'pyops-lab[distributed]'.
"""

import base64
import dataclasses
import os
import sys
from typing import Any, Dict, List

from conformance.classroom import grading
from conformance.classroom.queue import Done, Job, Settings

TASK = "pyops_conformance.grade"
VISIBILITY_MARGIN_S = 60


def visibility_timeout() -> float:
    return float(os.environ.get("PYOPS_CELERY_VISIBILITY_S", grading.DEFAULT_TIMEOUT_S + VISIBILITY_MARGIN_S))


def make_app(broker: str) -> Any:
    try:
        from celery import Celery
    except ImportError:
        raise SystemExit("pyops-conformance: --broker needs Celery: pip install 'pyops-lab[distributed]'") from None
    app = Celery("pyops_conformance", broker=broker, backend=broker)
    app.conf.update(
        task_acks_late=True,  # acknowledged when graded: a dead worker's submission goes to another
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,  # a worker holds no more submissions than it grades
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        broker_transport_options={"visibility_timeout": visibility_timeout()},
        broker_connection_retry_on_startup=True,
        result_expires=7 * 24 * 3600,
        worker_hijack_root_logger=False,
    )
    app.task(name=TASK)(_grade_task)
    return app


def _grade_task(runner_b64: str, settings: Dict) -> Dict:
    outcome = Settings(**settings).grade(base64.b64decode(runner_b64))
    return dict(outcome, worker=os.uname().nodename)


def queue(broker: str, settings: Settings):  # type: ignore[no-untyped-def]
    """The batch's queue: send every job, then store each result as it comes back."""
    if settings.timeout_s >= visibility_timeout():
        raise SystemExit(
            "pyops-conformance class: --timeout %g is too long for the broker's visibility timeout (%g s): a grading "
            "that long would be started twice; set PYOPS_CELERY_VISIBILITY_S higher on every machine"
            % (settings.timeout_s, visibility_timeout())
        )
    app = make_app(broker)

    def run(jobs: List[Job], settings: Settings, done: Done) -> None:
        from celery.result import ResultSet

        sent = {}
        for job in jobs:
            payload = base64.b64encode(job.runner_text).decode("ascii")
            sent[app.send_task(TASK, args=[payload, dataclasses.asdict(settings)]).id] = job
        results = ResultSet([app.AsyncResult(task_id) for task_id in sent])

        def finished(task_id: str, outcome: Any) -> None:
            if not isinstance(outcome, dict) or "status" not in outcome:
                # The task itself raised: the worker's problem, not the submission's.
                outcome = {"status": grading.ERROR, "message": "the worker failed: %s" % (outcome,), "report": None}
            done(sent[task_id], outcome)

        try:
            results.join_native(callback=finished, propagate=False, interval=0.5)
        except BaseException:
            # What no worker has started yet is withdrawn; what is running finishes unread.
            app.control.revoke([task_id for task_id in sent])
            raise
        finally:
            for result in results.results:
                result.forget()

    return run


def work(broker: str, parallel: int) -> int:
    """Run a worker on this machine: `parallel` gradings at a time, each in private labs."""
    from conformance.sandbox import probe_namespace

    plan, why_not = probe_namespace()
    if plan is None:
        print(
            "pyops-conformance worker: error: a worker grades in private labs, not possible here: %s" % why_not,
            file=sys.stderr,
        )
        return 2
    app = make_app(broker)
    # Threads: each grading is a process of its own already (grading.py); a thread waits for it.
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

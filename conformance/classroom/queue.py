"""Where gradings run: a pool on this machine, or Celery workers on others (distributed.py).

Both take the same jobs and call back once per finished grading, on the caller's thread, so the
store and the progress bar are written from one place whatever the queue.
"""

import signal
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Set

from conformance.classroom import grading


@dataclass(frozen=True)
class Job:
    student: str
    submission: str  # as the class report shows it: SUBMISSIONS/alice/runner.py
    runner_text: bytes
    key: str


@dataclass(frozen=True)
class Settings:
    """How every grading of the batch runs (the same on every machine)."""

    config_text: str
    python: Optional[str]
    lang: str
    workers: int  # the suite's parallel checks within one grading
    timeout_s: float

    def grade(self, runner_text: bytes, cancel: Optional[threading.Event] = None) -> Dict:
        return grading.grade(
            runner_text,
            self.config_text,
            python=self.python,
            lang=self.lang,
            workers=self.workers,
            timeout_s=self.timeout_s,
            cancel=cancel,
        )


Done = Callable[[Job, Dict], None]


def stop_on_signals() -> None:
    """kill, a closed terminal and Ctrl-C stop a batch alike: each raises KeyboardInterrupt, which
    run_local answers by stopping the running gradings. They are each in a session of their own, so
    dying at once would leave them running with no one to wait. SIGINT too, since a shell starts a
    background job with it ignored, and `kill -INT` would then do nothing."""
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _stop)


def _stop(signum, frame):  # type: ignore[no-untyped-def]
    raise KeyboardInterrupt("signal %d" % signum)


def run_local(jobs: List[Job], settings: Settings, parallel: int, done: Done) -> None:
    """Grade `parallel` submissions at a time; on Ctrl-C stop the running ones and re-raise."""
    cancel = threading.Event()
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="grading") as pool:
        running: Dict[Future, Job] = {pool.submit(settings.grade, job.runner_text, cancel): job for job in jobs}
        try:
            pending: Set[Future] = set(running)
            while pending:
                finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in finished:
                    outcome = future.result()
                    if outcome["status"] != grading.CANCELLED:
                        done(running[future], outcome)
        except BaseException:
            # Queued gradings never start; running ones are stopped (each puts its lab back).
            cancel.set()
            for future in running:
                future.cancel()
            raise

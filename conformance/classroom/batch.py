"""A class graded in one go: what to grade, the queue, the store and the progress as it goes."""

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Union

from conformance.classroom import grading, report_html
from conformance.classroom.discover import Submission
from conformance.classroom.queue import Done, Job, Settings
from conformance.classroom.store import Store, resume_key
from conformance.harness.inert import inert
from conformance.lab.clauses import steps_for
from conformance.reporting import provenance

if TYPE_CHECKING:  # only for annotations
    from conformance.classroom.similarity import Outcome

# grades.csv is rewritten as gradings finish, at most this often (a class of thousands would
# otherwise spend its time rewriting it); it is always written once more at the end.
GRADES_EVERY_S = 2.0

Queue = Callable[[List[Job], Settings, Done], None]
# The similarity check's outcome (similarity.Outcome), or why it was not computed; None before it ran.
Similar = Union[None, str, "Outcome"]


class Batch:
    def __init__(self, submissions: List[Submission], store: Store, settings: Settings, root: Path) -> None:
        self.submissions = submissions
        self.store = store
        self.settings = settings
        self.root = root  # SUBMISSIONS: paths are shown relative to it
        self.records: Dict[str, Dict] = {}
        self.steps = steps_for(store.config.profile)
        self.kept = 0  # records still valid from an earlier run
        self._written_at = 0.0

    def plan(self, force: bool) -> List[Job]:
        """The jobs to run; records still valid, and unusable submissions, are settled here."""
        suite = provenance.suite_fingerprint()
        jobs = []
        for submission in self.submissions:
            shown = self._shown(submission)
            text = submission.path.read_bytes() if submission.path else None
            key = resume_key(text, self.settings.config_text, suite, self.settings.python)
            if submission.path is None or text is None:
                outcome = {"status": grading.ERROR, "message": submission.problem, "seconds": 0, "suite": suite}
                self.records[submission.student] = self.store.save(submission.student, shown, key, outcome)
                continue
            kept = None if force else self.store.current(submission.student, key)
            if kept is not None:
                self.records[submission.student] = kept
                self.kept += 1
            else:
                jobs.append(Job(submission.student, shown, text, key))
        return jobs

    def run(self, jobs: List[Job], queue: Queue, progress: "Progress") -> None:
        """Grade `jobs`; then grade again, one at a time, those a busy machine left not judged.

        Among many gradings at once, a check whose timing the machine left unsettled after all
        its plays makes a submission's grading an error. Graded again with nothing else of the
        class running, most such checks are judged; a runner late by more than the machine, so
        measured, can explain fails (plugin.pytest_pyfunc_call); what is left stays an error.
        """
        unjudged: List[Job] = []

        def done(job: Job, outcome: Dict) -> None:
            if _left_unjudged(outcome):
                unjudged.append(job)
            record = self._record(job, outcome)
            progress.finished(record)

        try:
            queue(jobs, self.settings, done)
            if unjudged:
                progress.again(len(unjudged))
            for job in list(unjudged):  # alone: the next starts once this one is recorded
                queue([job], self.settings, lambda job, outcome: progress.finished(self._record(job, outcome)))
        finally:
            self.write_grades()
            self.write_report()

    def _record(self, job: Job, outcome: Dict) -> Dict:
        """Keep a finished grading's outcome: the student's files, and grades.csv now and then."""
        if outcome.get("suite") != provenance.suite_fingerprint():
            # A worker with another suite would make this class's grades incomparable.
            outcome = dict(
                outcome,
                status=grading.ERROR,
                report=None,
                message="graded by another version of the suite (%s); update that worker" % outcome.get("suite"),
            )
        record = self.store.save(job.student, job.submission, job.key, outcome, job.runner_text)
        self.records[job.student] = record
        if time.monotonic() - self._written_at >= GRADES_EVERY_S:
            self.write_grades()
        return record

    def write_grades(self) -> None:
        self.store.write_grades(self.records.values(), self.steps)
        self._written_at = time.monotonic()

    def write_report(self, similar: "Similar" = None) -> None:
        """report.html; with the similarity check's outcome (or why there is none) once it ran."""
        students = [dict(record, tests=self.store.tests(name)) for name, record in sorted(self.records.items())]
        generation = dict(self.store.made_with, number=self.store.generation)
        self.store.write_class_report(report_html.render(students, generation=generation, similar=similar))

    def _shown(self, submission: Submission) -> str:
        path = submission.path or (self.root / submission.student)
        try:
            return str(path.relative_to(self.root.parent))
        except ValueError:
            return str(path)


class Progress:
    """A progress bar (count, rate, ETA, failures so far) and a line per finished submission."""

    def __init__(self, total: int, kept: int) -> None:
        from tqdm import tqdm

        self.count = 0  # the bar's own count stays 0 when the bar is off (not a terminal)
        self.below_full = 0
        self.not_graded = 0
        # disable=None: a bar only on a terminal; a log gets the lines alone.
        self.bar = tqdm(total=total, unit="submission", file=sys.stderr, disable=None, dynamic_ncols=True)
        if kept:
            self.bar.write("%d submission(s) unchanged since their last grading: kept" % kept)

    def finished(self, record: Dict) -> None:
        if record["status"] != grading.GRADED:
            self.not_graded += 1
            line = "%s: %s (%s)" % (record["student"], record["status"], record["message"])
        else:
            if record["score"] < record["max_score"]:
                self.below_full += 1
            line = "%s: %s/%s points (%ss)" % (
                record["student"],
                _n(record["score"]),
                _n(record["max_score"]),
                record["seconds"],
            )
        self.count += 1
        # A student's name and a message quote a submission: shown on the terminal, never obeyed by it.
        self.bar.write(inert(line), file=sys.stdout)
        sys.stdout.flush()  # a line as each one ends, also into a pipe or a log (tee, CI)
        self.bar.set_postfix(below_full=self.below_full, not_graded=self.not_graded, refresh=False)
        self.bar.update(1)

    def again(self, count: int) -> None:
        """Say that `count` gradings are done again, one at a time, and count them in the bar."""
        self.bar.total += count
        self.bar.write(
            "%d submission(s) had checks a busy machine left not judged: graded again, one at a time" % count,
            file=sys.stdout,
        )
        sys.stdout.flush()

    def close(self) -> None:
        self.bar.close()


def _left_unjudged(outcome: Dict) -> bool:
    """Was a grading an error only because a busy machine left some checks not judged?"""
    tests = (outcome.get("report") or {}).get("tests", [])
    errors = [test for test in tests if test["outcome"] == "error"]
    return outcome["status"] == grading.ERROR and bool(errors) and all(test.get("not_judged") for test in errors)


def _n(value: Optional[float]) -> str:
    return "%g" % value if value is not None else "-"

"""The kill matrix: each generated mutant graded as a learner's runner.py, and what became of it.

A mutant is *killed* when the suite fails at least one clause of it (the clauses are kept: a kill
by the clause the change breaks is the one that teaches), *survived* when every clause passes,
*timeout* when its grading did not end within its bound, and *error* when the suite could not grade
it. Neither a timeout nor an error counts as killed: a grader that hangs on a wrong runner has not
told its learner anything (infection #1133: counting timeouts as kills moved one project's score
from 87.6 % to 97 %). The score is killed / (mutants graded - known equivalents).

The mutants are graded by the class machinery (classroom/queue.py), several at once, each grading
in its own scratch folder with its own labs and bounded by `timeout_s`. The unmodified reference is
graded first: a suite that fails it would "kill" every mutant.
"""

import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from conformance.classroom import grading
from conformance.classroom.queue import Job, Settings, run_local
from conformance.selftest.generate import Mutant

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the backport, as config.py reads lab.toml
    import tomli as tomllib

KILLED, SURVIVED, TIMEOUT, ERROR = "killed", "survived", "timeout", "error"
EQUIVALENT_FILE = Path(__file__).with_name("equivalent.toml")


@dataclass
class Outcome:
    mutant: Mutant
    verdict: str  # KILLED, SURVIVED, TIMEOUT or ERROR
    failed: List[str] = field(default_factory=list)  # the clauses that failed (a kill's reasons)
    seconds: float = 0.0
    message: str = ""  # why a grading was an error or a timeout
    equivalent: str = ""  # the reviewed reason, when equivalent.toml lists this mutant

    def as_json(self, source: str) -> Dict:
        mutant = self.mutant
        return {
            "name": mutant.name,
            "key": mutant.key,
            "operator": mutant.operator,
            "line": mutant.line,
            "before": mutant.before,
            "after": mutant.after,
            "verdict": self.verdict,
            "failed": self.failed,
            "seconds": self.seconds,
            "message": self.message,
            "equivalent": self.equivalent,
            "diff": mutant.diff(source),
        }


class BaselineFailed(Exception):
    """The unmodified reference did not pass: no mutant's verdict would mean anything."""


def sample(mutants: Sequence[Mutant], count: Optional[int], seed: int) -> List[Mutant]:
    """`count` of the mutants (all when None), the same ones for the same seed and source."""
    if count is None or count >= len(mutants):
        return list(mutants)
    return sorted(random.Random(seed).sample(list(mutants), count), key=lambda mutant: (mutant.line, mutant.key))


def equivalents(path: Path = EQUIVALENT_FILE) -> Dict[str, str]:
    """The reviewed list: mutant key -> why the lab cannot tell it from the reference."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {str(entry["key"]): str(entry["reason"]) for entry in data.get("equivalent", [])}


def judge(outcome: Mapping) -> Dict:
    """A grading's outcome (classroom/grading.py) as a verdict on its mutant."""
    seconds = float(outcome.get("seconds") or 0.0)
    if outcome["status"] == grading.TIMEOUT:
        return {"verdict": TIMEOUT, "seconds": seconds, "message": outcome.get("message", "")}
    report = outcome.get("report")
    if outcome["status"] != grading.GRADED or not report:
        return {"verdict": ERROR, "seconds": seconds, "message": outcome.get("message", "")}
    failed = sorted(clause for clause, entry in report["clauses"].items() if entry["verdict"] == "failed")
    return {"verdict": KILLED if failed else SURVIVED, "failed": failed, "seconds": seconds}


def kill(
    mutants: Sequence[Mutant],
    settings: Settings,
    parallel: int,
    on_each: Callable[[Outcome], None] = lambda outcome: None,
    known: Optional[Mapping[str, str]] = None,
) -> List[Outcome]:
    """Grade every mutant; return their outcomes in the mutants' order."""
    known = equivalents() if known is None else known
    by_name = {mutant.name: mutant for mutant in mutants}
    outcomes: Dict[str, Outcome] = {}

    def done(job: Job, graded: Dict) -> None:
        mutant = by_name[job.student]
        outcome = Outcome(mutant, equivalent=known.get(mutant.key, ""), **judge(graded))
        outcomes[mutant.name] = outcome
        on_each(outcome)

    jobs = [Job(mutant.name, mutant.name, mutant.text.encode("utf-8"), mutant.key) for mutant in mutants]
    run_local(jobs, settings, parallel, done)
    return [outcomes[mutant.name] for mutant in mutants if mutant.name in outcomes]


def baseline(source: str, settings: Settings) -> float:
    """Grade the unmodified source; its seconds, or BaselineFailed saying what failed."""
    graded = settings.grade(source.encode("utf-8"))
    verdict = judge(graded)
    if verdict["verdict"] != SURVIVED:
        why = ", ".join(verdict.get("failed", [])) or verdict.get("message") or verdict["verdict"]
        raise BaselineFailed("the unmodified reference does not pass (%s): fix that before measuring mutants" % why)
    return float(verdict["seconds"])


def summary(outcomes: Sequence[Outcome], generated: int) -> Dict:
    """The figures of a run: counts per verdict, the score, and kills per clause."""
    counts = {verdict: 0 for verdict in (KILLED, SURVIVED, TIMEOUT, ERROR)}
    for outcome in outcomes:
        counts[outcome.verdict] += 1
    equivalent = sum(1 for outcome in outcomes if outcome.equivalent and outcome.verdict == SURVIVED)
    unknown = [outcome for outcome in outcomes if outcome.verdict == SURVIVED and not outcome.equivalent]
    judged = len(outcomes) - equivalent
    per_clause: Dict[str, int] = {}
    for outcome in outcomes:
        for clause in outcome.failed:
            per_clause[clause] = per_clause.get(clause, 0) + 1
    return {
        "generated": generated,
        "graded": len(outcomes),
        **counts,
        "equivalent": equivalent,
        "unexplained_survivors": len(unknown),
        # Timeouts and errors stay in the denominator: not killed.
        "score": round(counts[KILLED] / judged, 4) if judged else None,
        "kills_per_clause": dict(sorted(per_clause.items(), key=lambda item: _clause_order(item[0]))),
    }


def _clause_order(clause: str):  # type: ignore[no-untyped-def]
    from conformance import verdicts

    return verdicts.clause_order(clause)

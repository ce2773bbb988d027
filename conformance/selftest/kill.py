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

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from conformance.classroom import grading
from conformance.classroom.queue import Job, Settings, run_local

if TYPE_CHECKING:  # generate.py imports cosmic-ray, which a self-test without mutants does without
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
    profile: str = "core"  # the profile whose grading judged it (a core survivor is graded extended)
    clauses: Dict[str, str] = field(default_factory=dict)  # every clause's verdict (the heat map's row)
    blocked: Dict[str, str] = field(default_factory=dict)  # a blocked clause: the clause whose failure did it

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
            "profile": self.profile,
            "clauses": self.clauses,
            "blocked": self.blocked,
            "diff": mutant.diff(source),
        }


class Journal:
    """Outcomes written down as they come, one JSON line each, so that a run of hours can stop and
    go on: a mutant already judged under the same identity (suite, source, configuration) and
    profile is not graded again. Without a path it keeps nothing."""

    def __init__(self, path: Optional[Path], identity: Mapping[str, str]) -> None:
        self.path, self.identity = path, dict(identity)
        self.entries: Dict[Tuple[str, str], Dict] = {}
        if path is None or not path.exists():
            return
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short when a run was killed
            if isinstance(entry, dict) and entry.get("identity") == self.identity:
                self.entries[(entry["profile"], entry["key"])] = entry

    def get(self, profile: str, mutant: Mutant) -> Optional[Dict]:
        return self.entries.get((profile, mutant.key))

    def add(self, outcome: Outcome) -> None:
        if self.path is None:
            return
        entry = {
            "identity": self.identity,
            "profile": outcome.profile,
            "key": outcome.mutant.key,
            "verdict": outcome.verdict,
            "failed": outcome.failed,
            "seconds": outcome.seconds,
            "message": outcome.message,
            "clauses": outcome.clauses,
            "blocked": outcome.blocked,
        }
        with open(str(self.path), "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


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
    clauses = {clause: str(entry["verdict"]) for clause, entry in report["clauses"].items()}
    blocked = {
        clause: str((entry.get("blocked_by") or [""])[0])
        for clause, entry in report["clauses"].items()
        if entry["verdict"] == "blocked"
    }
    failed = sorted(clause for clause, verdict in clauses.items() if verdict == "failed")
    verdict = KILLED if failed else SURVIVED
    return {"verdict": verdict, "failed": failed, "seconds": seconds, "clauses": clauses, "blocked": blocked}


def kill(
    mutants: Sequence[Mutant],
    settings: Settings,
    parallel: int,
    on_each: Callable[[Outcome], None] = lambda outcome: None,
    known: Optional[Mapping[str, str]] = None,
    journal: Optional[Journal] = None,
) -> List[Outcome]:
    """Grade every mutant on the configuration's profile, then each survivor again on the extended
    profile (a mistake the core clauses let through may be one an X clause catches: X2's 126, say);
    return their outcomes in the mutants' order. `on_each` hears of each mutant once, with its final
    verdict: a core survivor only after its extended grading. Mutants the journal has judged are not
    graded again."""
    known = equivalents() if known is None else known
    journal = journal or Journal(None, {})

    def final_on_core(outcome: Outcome) -> None:
        if outcome.verdict != SURVIVED:
            on_each(outcome)

    first = _kill_once(mutants, settings, parallel, final_on_core, known, "core", journal)
    survivors = [outcome.mutant for outcome in first if outcome.verdict == SURVIVED]
    if not survivors:
        return first
    again = {
        outcome.mutant.name: outcome
        for outcome in _kill_once(survivors, extended(settings), parallel, on_each, known, "extended", journal)
    }
    return [again.get(outcome.mutant.name, outcome) for outcome in first]


def extended(settings: Settings) -> Settings:
    """The same settings with the extended profile: lab.toml's top-level `profile` line changed, or
    one put first where it has none (a top-level key must come before any table)."""
    lines = settings.config_text.splitlines(True)
    chosen = [n for n, line in enumerate(lines) if line.replace(" ", "").startswith("profile=")]
    if len(chosen) > 1:
        raise ValueError("the configuration has more than one `profile = ...` line")
    if chosen:
        lines[chosen[0]] = 'profile = "extended"\n'
    else:
        lines.insert(0, 'profile = "extended"\n')
    return replace(settings, config_text="".join(lines))


def _kill_once(
    mutants: Sequence[Mutant],
    settings: Settings,
    parallel: int,
    on_each: Callable[[Outcome], None],
    known: Mapping[str, str],
    profile: str,
    journal: Journal,
) -> List[Outcome]:
    by_name = {mutant.name: mutant for mutant in mutants}
    outcomes: Dict[str, Outcome] = {}
    for mutant in mutants:
        kept = journal.get(profile, mutant)
        if kept is not None:
            outcomes[mutant.name] = Outcome(
                mutant,
                kept["verdict"],
                list(kept["failed"]),
                kept["seconds"],
                kept["message"],
                known.get(mutant.key, ""),
                profile,
                dict(kept.get("clauses", {})),
                dict(kept.get("blocked", {})),
            )
            on_each(outcomes[mutant.name])

    def done(job: Job, graded: Dict) -> None:
        mutant = by_name[job.student]
        outcome = Outcome(mutant, equivalent=known.get(mutant.key, ""), profile=profile, **judge(graded))
        outcomes[mutant.name] = outcome
        journal.add(outcome)
        on_each(outcome)

    jobs = [
        Job(mutant.name, mutant.name, mutant.text.encode("utf-8"), mutant.key)
        for mutant in mutants
        if mutant.name not in outcomes
    ]
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
    from conformance.judging import verdicts

    return verdicts.clause_order(clause)

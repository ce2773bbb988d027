"""`pyops-conformance replay RECORD`: grade a recorded runner again as its record says it was
graded, and say whether the grade is the same.

RECORD is a student's folder in a class (its results.json beside the runner.py the class kept)
or a results.json next to its runner.py. A record may come from a learner, so it decides nothing
it could use to pass:
- the runner graded is the runner.py beside the record, or --runner FILE, never a path the record
  names; it must be the file the record's provenance names (its sha256), and the replay says which
  file it grades;
- the configuration is the course's (the suite's lab.toml, or --config FILE), never the record's:
  a record graded under another configuration is a difference;
- the interpreter is the suite's default (or --python), never the one the record names.
The record's selection (language, clauses, -k) is kept, and said: a record of part of the lab
replays that part. Exit 0 when the configuration, the score and every clause's and check's verdict
are as recorded, 1 when one differs (each is listed), 2 when it cannot be replayed.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from conformance.harness import labfiles
from conformance.lab import draws
from conformance.lab.config import DEFAULT_FILE
from conformance.reporting import provenance
from conformance.usage import EXIT_ERROR, EXIT_FAILED, EXIT_PASSED, Parser, UsageError

REPORT = "results.json"
RUNNER = "runner.py"
# A recorded report read back: the suite's own JSON, which a grader wrote, but kept where others
# may have written beside it; never more than this is read.
REPORT_LIMIT = 64 << 20
# A runner whose record gives no size: a lab's runner.py is a few kilobytes.
RUNNER_LIMIT = 16 << 20


def main(argv: Sequence[str]) -> int:
    parser = Parser(prog="pyops-conformance replay", description="Grade a recorded runner again and compare.")
    parser.add_argument("record", help="a student's folder of a class, or a results.json next to its runner.py")
    parser.add_argument("-n", dest="workers", type=int, help="checks run at once (default: as a grading's)")
    parser.add_argument("--python", metavar="EXE", help="the interpreter that runs the runner (default: the suite's)")
    parser.add_argument(
        "--runner", metavar="FILE", help="the recorded runner, where it is not the runner.py beside the record"
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="the course's configuration, which the record must match (default: the suite's)",
    )
    try:
        options = parser.parse_args(argv)
        recorded, runner_path, runner = locate(Path(options.record), options.runner)
        config_text = _read_config(options.config or str(DEFAULT_FILE))
        return replay(recorded, runner_path, runner, config_text, options.workers, options.python)
    except UsageError as error:
        print("pyops-conformance replay: error: %s" % error, file=sys.stderr)
        return EXIT_ERROR


def locate(record: Path, named: Optional[str] = None) -> Tuple[Dict, Path, bytes]:
    """The recorded report, the runner's path and its bytes, checked to be the recorded file: `named`,
    else the runner.py beside the report. Never a runner the report names: a learner could hand in
    the record of another file (the bundled reference, say) beside a runner of their own.

    Both files are read as lab files are (labfiles.py), never through a link at their name, never
    blocking on a FIFO, never more than a cap. The replay grades the bytes checked here, a copy, so
    that nothing swapped in afterwards is graded."""
    report_file = record / REPORT if record.is_dir() else record
    recorded = _read_report(report_file)
    kept = recorded.get("provenance") if isinstance(recorded, dict) else None
    if not isinstance(kept, dict) or not isinstance(kept.get("runner"), dict):
        raise UsageError("%s: no provenance recorded (graded by an older suite): grade it anew" % report_file)
    if not isinstance(kept.get("configuration", {}).get("text"), str) or not isinstance(recorded.get("profile"), str):
        raise UsageError("%s: its provenance has no configuration or profile to replay with" % report_file)
    path = Path(named) if named else report_file.parent / RUNNER
    wanted, size = kept["runner"].get("sha256"), kept["runner"].get("size")
    # The recorded size is the cap: a larger file cannot be the recorded one, and is left unread.
    limit = size if isinstance(size, int) and 0 <= size <= RUNNER_LIMIT else RUNNER_LIMIT
    read = labfiles.read(path.parent, path.name, limit)
    if not read.exists:
        raise UsageError("%s: the recorded runner is missing (looked for %s)" % (report_file, path))
    if read.refused and read.refused != "too_large":
        raise UsageError(
            "%s is %s: a replay reads only a regular file, the runner itself"
            % (path, labfiles.what(read.refused, limit, labfiles.KINDS))
        )
    if read.refused or provenance.sha256(read.data) != wanted:
        raise UsageError("%s is not the recorded runner (its sha256 differs from the record's)" % path)
    return recorded, path, read.data


def _read_report(report_file: Path) -> Dict:
    read = labfiles.read(report_file.parent, report_file.name, REPORT_LIMIT)
    if not read.exists:
        raise UsageError("%s: no report to replay (No such file or directory)" % report_file)
    if read.refused:
        why = labfiles.what(read.refused, REPORT_LIMIT, labfiles.KINDS)
        raise UsageError("%s: no report to replay (it is %s)" % (report_file, why))
    try:
        recorded = json.loads(read.data.decode("utf-8"))
    except ValueError as error:
        raise UsageError("%s: no report to replay (%s)" % (report_file, error)) from None
    return recorded if isinstance(recorded, dict) else {}


def _read_config(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, ValueError) as error:
        why = getattr(error, "strerror", None) or error
        raise UsageError("--config %s: cannot read it (%s)" % (path, why)) from None


def replay(
    recorded: Mapping,
    runner_path: Path,
    runner: bytes,
    config_text: str,
    workers: Optional[int] = None,
    python: Optional[str] = None,
) -> int:
    """Grade `runner` (the bytes read from `runner_path`) under the course's `config_text`, with the
    record's selection, and print how configuration, score and verdicts compare with `recorded`."""
    kept = recorded["provenance"]
    print("grading %s (sha256 %s)" % (runner_path, provenance.sha256(runner)), flush=True)
    selection = kept.get("selection") if isinstance(kept.get("selection"), dict) else {}
    clauses, keyword = [str(clause) for clause in selection.get("clauses") or []], selection.get("keyword")
    if clauses or keyword:
        only = " ".join(clauses) + (" -k %s" % keyword if keyword else "")
        print("replayed as recorded: only %s" % only.strip())
    seed = kept.get("seed")
    if type(seed) is int and 0 <= seed < 2**draws.SEED_BITS:  # the same draws; a record without one: new ones
        print("replayed with the recorded seed %d (the same timeouts, backoffs and names)" % seed)
    else:
        seed = None
    with tempfile.TemporaryDirectory(prefix="pyops-replay-") as scratch:
        runner_file = Path(scratch) / RUNNER
        runner_file.write_bytes(runner)
        config_file = Path(scratch) / "lab.toml"
        config_file.write_text(config_text, encoding="utf-8")
        report_file = Path(scratch) / REPORT
        argv = [sys.executable, "-m", "conformance", "--runner", str(runner_file), "--config", str(config_file)]
        argv += ["--json", str(report_file), "--lang", str(selection.get("lang", "en"))]
        for clause in clauses:
            argv += ["--clause", clause]
        if keyword:
            argv += ["-k", str(keyword)]
        if seed is not None:
            argv += ["--seed", str(seed)]
        # Never the interpreter the record names: a record may come from a learner, and the grader
        # would run that program. The suite's default (or --python) runs the runner, as it grades.
        if python:
            argv += ["--python", python]
        if workers is not None:
            argv += ["-n", str(workers)]
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if not report_file.exists():
            sys.stdout.write(done.stdout.decode("utf-8", "replace"))
            raise UsageError("the replay could not grade (exit %d)" % done.returncode)
        now = json.loads(report_file.read_text(encoding="utf-8"))
    differences = []
    for part in provenance.differences(kept, now.get("provenance", {})):
        if part == "configuration":  # the course's: a record graded under another is not this grade
            differences.append("the configuration differs from the record's: it was not graded under the course's")
        else:
            print("the %s differs from the record's: verdicts may differ for that reason" % part)
    was, is_now = kept.get("interpreter", {}), now.get("provenance", {}).get("interpreter", {})
    if (was.get("path"), was.get("version")) != (is_now.get("path"), is_now.get("version")):
        print(
            "recorded with %s (%s), replayed with %s (%s)"
            % (was.get("path"), was.get("version") or "?", is_now.get("path"), is_now.get("version") or "?")
        )
    if recorded.get("score") != now.get("score"):
        differences.append("score: %s -> %s" % (_points(recorded.get("score")), _points(now.get("score"))))
    differences += compare(recorded, now)
    if not differences:
        print(
            "same grade: score %s, same verdicts (%d clauses, %d checks)"
            % (_points(now.get("score")), len(now["clauses"]), len(now["tests"]))
        )
        return EXIT_PASSED
    print("\n".join(differences))
    return EXIT_FAILED


def _points(score: object) -> str:
    """A report's score as `earned/most`, or what stands in its place in a record."""
    if isinstance(score, dict) and {"points", "max_points"} <= set(score):
        return "%g/%g" % (score["points"], score["max_points"])
    return json.dumps(score)[:60]


def compare(recorded: Mapping, now: Mapping) -> List[str]:
    """Each clause, then each check, whose verdict differs between two reports, with both messages."""
    lines: List[str] = []
    for kind, key, verdict in (("clause", "clauses", "verdict"), ("check", "tests", "outcome")):
        before, after = _by_name(recorded, key), _by_name(now, key)
        for name in sorted(set(before) | set(after)):
            was, is_now = before.get(name, {}), after.get(name, {})
            if was.get(verdict) == is_now.get(verdict):
                continue
            lines.append("%s %s: %s -> %s" % (kind, name, was.get(verdict, "absent"), is_now.get(verdict, "absent")))
            for label, entry in (("was", was), ("now", is_now)):
                message = str(entry.get("message") or "").strip()
                if message:
                    first, *rest = message.splitlines()
                    lines.append("    %s: %s%s" % (label, first, " (...)" if rest else ""))
    return lines


def _by_name(report: Mapping, key: str) -> Dict[str, Dict]:
    entries = report.get(key) or {}
    if isinstance(entries, dict):
        return {name: dict(entry) for name, entry in entries.items()}
    return {entry["id"]: dict(entry) for entry in entries}

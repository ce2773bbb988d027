"""`pyops-conformance replay RECORD`: grade a recorded runner again as its record says it was
graded, and say whether the verdicts are the same.

RECORD is a student's folder in a class (its results.json, whose runner is the submission) or a
results.json next to its runner.py. The record's provenance (provenance.py) gives the runner's
sha256 (a different file is refused), the configuration's text, the profile, language and
selection of checks. The interpreter is the suite's default (or --python), never the one the
record names: a record may come from a learner, and the grader would run it. Exit 0 when every
clause and check has its recorded verdict, 1 when one differs (each is listed with both
messages), 2 when it cannot be replayed.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from conformance import labfiles, provenance
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
        "--runner", metavar="FILE", help="the recorded runner, where the record's own place for it is not"
    )
    parser.add_argument(
        "--config", metavar="FILE", help="grade with this configuration, not the recorded one (a changed lab.toml)"
    )
    try:
        options = parser.parse_args(argv)
        recorded, runner = locate(Path(options.record), options.runner)
        config_text = _read_config(options.config) if options.config else None
        return replay(recorded, runner, options.workers, config_text, options.python)
    except UsageError as error:
        print("pyops-conformance replay: error: %s" % error, file=sys.stderr)
        return EXIT_ERROR


def locate(record: Path, named: Optional[str] = None) -> Tuple[Dict, bytes]:
    """The recorded report and its runner's bytes, checked to be the recorded file: `named`, else
    the runner.py beside the report, else the one the report names (a class's submission, named
    from the folder above the submissions: tried from here and from above the class folder).

    A record folder may be a learner's (a results.json beside a runner.py), and a report names its
    runner: both are read as lab files are (labfiles.py), never through a link at their name, never
    blocking on a FIFO, never more than a cap. The replay grades the bytes checked here, a copy, so
    that nothing swapped in afterwards is graded."""
    report_file = record / REPORT if record.is_dir() else record
    recorded = _read_report(report_file)
    kept = recorded.get("provenance") if isinstance(recorded, dict) else None
    if not isinstance(kept, dict) or not isinstance(kept.get("runner"), dict):
        raise UsageError("%s: no provenance recorded (graded by an older suite): grade it anew" % report_file)
    if not isinstance(kept.get("configuration", {}).get("text"), str) or not isinstance(recorded.get("profile"), str):
        raise UsageError("%s: its provenance has no configuration or profile to replay with" % report_file)
    named_in_report = Path(str(recorded.get("runner", "")))
    candidates = [Path(named)] if named else [report_file.parent / RUNNER, named_in_report]
    if not named and not named_in_report.is_absolute():
        candidates.append(report_file.resolve().parent.parent.parent / named_in_report)
    wanted, size = kept["runner"].get("sha256"), kept["runner"].get("size")
    # The recorded size is the cap: a larger file cannot be the recorded one, and is left unread.
    limit = size if isinstance(size, int) and 0 <= size <= RUNNER_LIMIT else RUNNER_LIMIT
    found = [(path, labfiles.read(path.parent, path.name, limit)) for path in candidates]
    for _, read in found:
        if read.data and provenance.sha256(read.data) == wanted:
            return recorded, read.data
    for path, read in found:
        if read.refused and read.refused != "too_large":
            raise UsageError(
                "%s is %s: a replay reads only a regular file, the runner itself"
                % (path, labfiles.what(read.refused, limit, labfiles.KINDS))
            )
    there = [path for path, read in found if read.exists]
    if not there:
        raise UsageError("%s: the recorded runner is missing (looked for %s)" % (report_file, candidates[0]))
    raise UsageError("%s is not the recorded runner (its sha256 differs from the record's)" % there[0])


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
    runner: bytes,
    workers: Optional[int],
    config_text: Optional[str] = None,
    python: Optional[str] = None,
) -> int:
    """Grade the runner `runner` (its bytes) as `recorded` was graded (with `config_text` instead
    of the recorded configuration, if given) and print how the verdicts compare."""
    kept = recorded["provenance"]
    with tempfile.TemporaryDirectory(prefix="pyops-replay-") as scratch:
        runner_file = Path(scratch) / RUNNER
        runner_file.write_bytes(runner)
        config_file = Path(scratch) / "lab.toml"
        config_file.write_text(kept["configuration"]["text"] if config_text is None else config_text, encoding="utf-8")
        report_file = Path(scratch) / REPORT
        argv = [sys.executable, "-m", "conformance", "--runner", str(runner_file), "--config", str(config_file)]
        argv += ["--json", str(report_file)]
        if config_text is None:  # the recorded profile; a new configuration brings its own
            argv += ["--profile", recorded["profile"]]
        selection = kept.get("selection", {})
        argv += ["--lang", str(selection.get("lang", "en"))]
        for clause in selection.get("clauses", []):
            argv += ["--clause", str(clause)]
        if selection.get("keyword"):
            argv += ["-k", str(selection["keyword"])]
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
    for part in provenance.differences(kept, now.get("provenance", {})):
        print("the %s differs from the record's: verdicts may differ for that reason" % part)
    was, is_now = kept.get("interpreter", {}), now.get("provenance", {}).get("interpreter", {})
    if (was.get("path"), was.get("version")) != (is_now.get("path"), is_now.get("version")):
        print(
            "recorded with %s (%s), replayed with %s (%s)"
            % (was.get("path"), was.get("version") or "?", is_now.get("path"), is_now.get("version") or "?")
        )
    changed = compare(recorded, now)
    if not changed:
        print("same verdicts (%d clauses, %d checks)" % (len(now["clauses"]), len(now["tests"])))
        return EXIT_PASSED
    print("\n".join(changed))
    return EXIT_FAILED


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

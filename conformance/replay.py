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

from conformance import provenance
from conformance.usage import EXIT_ERROR, EXIT_FAILED, EXIT_PASSED, Parser, UsageError

REPORT = "results.json"
RUNNER = "runner.py"
# A recorded report read back: the suite's own JSON, which a grader wrote, but kept where others
# may have written beside it; never more than this is read.
REPORT_LIMIT = 64 << 20


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


def locate(record: Path, named: Optional[str] = None) -> Tuple[Dict, Path]:
    """The recorded report and its runner, checked to be the recorded file: `named`, else the
    runner.py beside the report, else the one the report names (a class's submission, named
    from the folder above the submissions: tried from here and from above the class folder)."""
    report_file = record / REPORT if record.is_dir() else record
    try:
        with open(str(report_file), "rb") as handle:
            recorded = json.loads(handle.read(REPORT_LIMIT).decode("utf-8"))
    except (OSError, ValueError) as error:
        why = getattr(error, "strerror", None) or error
        raise UsageError("%s: no report to replay (%s)" % (report_file, why)) from None
    kept = recorded.get("provenance") if isinstance(recorded, dict) else None
    if not isinstance(kept, dict) or "runner" not in kept:
        raise UsageError("%s: no provenance recorded (graded by an older suite): grade it anew" % report_file)
    named_in_report = Path(str(recorded.get("runner", "")))
    candidates = [Path(named)] if named else [report_file.parent / RUNNER, named_in_report]
    if not named and not named_in_report.is_absolute():
        candidates.append(report_file.resolve().parent.parent.parent / named_in_report)
    found = [path for path in candidates if path.is_file()]
    if not found:
        raise UsageError("%s: the recorded runner is missing (looked for %s)" % (report_file, candidates[0]))
    wanted = kept["runner"]["sha256"]
    for path in found:
        if provenance.sha256(path.read_bytes()) == wanted:
            return recorded, path
    raise UsageError("%s is not the recorded runner (its sha256 differs from the record's)" % found[0])


def _read_config(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, ValueError) as error:
        why = getattr(error, "strerror", None) or error
        raise UsageError("--config %s: cannot read it (%s)" % (path, why)) from None


def replay(
    recorded: Mapping,
    runner: Path,
    workers: Optional[int],
    config_text: Optional[str] = None,
    python: Optional[str] = None,
) -> int:
    """Grade `runner` as `recorded` was graded (with `config_text` instead of the recorded
    configuration, if given) and print how the verdicts compare."""
    kept = recorded["provenance"]
    with tempfile.TemporaryDirectory(prefix="pyops-replay-") as scratch:
        config_file = Path(scratch) / "lab.toml"
        config_file.write_text(kept["configuration"]["text"] if config_text is None else config_text, encoding="utf-8")
        report_file = Path(scratch) / REPORT
        argv = [sys.executable, "-m", "conformance", "--runner", str(runner), "--config", str(config_file)]
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

"""`pyops-conformance --watch`: grade, then grade again each time the runner file is saved.

Each grading is a process of its own (`python -m conformance` with the same options), so a grading
starts from a clean interpreter every time and its progress line shows as the steps finish. After
each one, a line says which clauses started or stopped passing since the one before. Ctrl-C ends
the grading under way the way it always ends (its runners reaped, its labs removed), then the
watch; so does SIGTERM.
"""

import json
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from conformance.usage import EXIT_ERROR, stop_on_signals

# Editors save by writing a new file and renaming it over the old one: the folder is watched,
# and changes to the runner's name (a rename onto it included) start a grading.
CLEAR_SCREEN = "\033[2J\033[H"
# How long a grading may take to stop after Ctrl-C before it is killed (it reaps its runners first).
STOP_S = 30.0

WORDS = {
    "en": {
        "missing": "--watch needs the watchfiles package: pip install 'pyops-lab[watch]'",
        "waiting": "watching %s: grading again on every save (Ctrl-C to stop)",
        "first": "first grading: %(passed)d of %(total)d clauses passed",
        "same": "since the last grading: no clause changed (%(passed)d of %(total)d passed)",
        "changed": "since the last grading: %(what)s (%(passed)d of %(total)d passed)",
        "now_passing": "now passing %s",
        "now_failing": "no longer passing %s",
        "and": "; ",
        "no_report": "no report: the grading could not run (see above)",
        "stopped": "stopped watching",
    },
    "ja": {
        "missing": "--watch には watchfiles パッケージが必要です: pip install 'pyops-lab[watch]'",
        "waiting": "%s を監視中: 保存するたびに採点し直します(Ctrl-C で終了)",
        "first": "最初の採点: %(total)d 項目中 %(passed)d 項目に合格",
        "same": "前回の採点から: 変わった項目はありません(%(total)d 項目中 %(passed)d 項目に合格)",
        "changed": "前回の採点から: %(what)s(%(total)d 項目中 %(passed)d 項目に合格)",
        "now_passing": "合格になった項目 %s",
        "now_failing": "合格でなくなった項目 %s",
        "and": "、",
        "no_report": "レポートがありません: 採点を実行できませんでした(上を参照)",
        "stopped": "監視を終了しました",
    },
}


def changes(before: Optional[Dict[str, str]], after: Dict[str, str], lang: str) -> str:
    """One line: which clauses started or stopped passing between two gradings' clause verdicts."""
    words = WORDS[lang]
    passed = [clause for clause, verdict in after.items() if verdict == "passed"]
    counts = {"passed": len(passed), "total": len(after)}
    if before is None:
        return words["first"] % counts
    gained = [clause for clause in passed if before.get(clause) != "passed"]
    lost = [clause for clause, verdict in before.items() if verdict == "passed" and after.get(clause) != "passed"]
    parts = [words["now_passing"] % " ".join(gained)] if gained else []
    parts += [words["now_failing"] % " ".join(lost)] if lost else []
    if not parts:
        return words["same"] % counts
    return words["changed"] % dict(counts, what=words["and"].join(parts))


def run(grading_argv: Sequence[str], runner: Path, lang: str) -> int:
    """Grade with `grading_argv` (options of `python -m conformance`) now and after each save of
    `runner`, until Ctrl-C; returns 0 then."""
    try:
        import watchfiles
    except ImportError:
        print("pyops-conformance: error: %s" % WORDS[lang]["missing"], file=sys.stderr)
        return EXIT_ERROR
    words = WORDS[lang]
    # `kill` ends the watch as Ctrl-C does. SIGINT is caught here too, not left to Python's
    # default: a shell's background job, or a pytest-xdist worker's child, starts with it ignored,
    # and Python then installs no handler of its own.
    stop_on_signals()
    saved, stop = threading.Event(), threading.Event()

    def watching() -> None:
        # Watching all along, also while a grading runs: a save then is graded right after it.
        named = lambda change, path: Path(path).name == runner.name  # noqa: E731
        for _ in watchfiles.watch(str(runner.parent), watch_filter=named, recursive=False, stop_event=stop):
            saved.set()

    watcher = threading.Thread(target=watching, daemon=True)
    watcher.start()
    before: Optional[Dict[str, str]] = None
    try:
        with tempfile.TemporaryDirectory(prefix="pyops-watch-") as scratch:
            report = Path(scratch) / "report.json"
            while True:
                saved.clear()
                if sys.stdout.isatty():
                    sys.stdout.write(CLEAR_SCREEN)
                sys.stdout.flush()
                after = _grade(list(grading_argv) + ["--json", str(report)], report)
                print(changes(before, after, lang) if after is not None else words["no_report"])
                before = after if after is not None else before
                print(words["waiting"] % runner, flush=True)
                while not saved.wait(0.2):  # in short waits: Ctrl-C is seen between them
                    pass
    except KeyboardInterrupt:
        print("\n" + words["stopped"], flush=True)
    finally:
        # Joined, not left to die with the interpreter: watchfiles' thread lives in Rust, and an
        # interpreter that ends under it aborts (seen with watchfiles 0.24 on Python 3.8).
        stop.set()
        watcher.join(STOP_S)
    return 0


def _grade(argv: List[str], report: Path) -> Optional[Dict[str, str]]:
    """One grading in a process of its own; its clause verdicts, or None without a report."""
    if report.exists():
        report.unlink()
    grading = subprocess.Popen([sys.executable, "-m", "conformance"] + argv)
    try:
        grading.wait()
    except KeyboardInterrupt:
        # Ctrl-C at a terminal reaches the grading too; a SIGINT to this process alone does not.
        if grading.poll() is None:
            grading.send_signal(signal.SIGINT)
        try:
            grading.wait(STOP_S)
        except subprocess.TimeoutExpired:
            grading.kill()
            grading.wait()
        raise
    if not report.exists():
        return None
    data = json.loads(report.read_text(encoding="utf-8"))
    return {clause: entry["verdict"] for clause, entry in data["clauses"].items()}

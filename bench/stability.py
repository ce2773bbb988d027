"""Stable verdicts: the same runner graded again and again gets the same verdict, idle or loaded.

    python bench/stability.py [--runs 20] [--workers N]

Grades the reference and three wrong runners from the zoo with the core profile, --runs times
each, first on an idle machine and then while two CPU-bound processes load both cores. Prints,
per runner and condition, how many runs passed and how many distinct sets of failed checks were
seen (1 means every run failed exactly the same checks). Exits 1 if any verdict varied.
"""

import argparse
import json
import multiprocessing
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.zoo.mutants import MUTANTS, build  # noqa: E402

WRONG = ("kills-only-the-child", "marker-before-apply-sh", "sigterm-not-forwarded")


def spin():
    while True:
        pass


def failed_set(runner, workers):
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "r.json"
        argv = [sys.executable, "-m", "conformance", "--runner", str(runner), "--json", str(report)]
        if workers is not None:
            argv += ["-n", str(workers)]
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
        data = json.loads(report.read_text())
    if data["summary"]["errors"]:
        return ("harness errors",)
    return tuple(sorted(t["id"] for t in data["tests"] if t["outcome"] != "passed"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--workers", type=int, default=None, help="suite workers (default: the suite's)")
    parser.add_argument("--only", choices=("reference",) + WRONG, help="grade this runner only")
    parser.add_argument("--condition", choices=("idle", "loaded", "both"), default="both")
    options = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="pyops-stability-"))
    runners = {"reference": REPO / "runner" / "runner.py"}
    by_name = {mutant.name: mutant for mutant in MUTANTS}
    for name in WRONG:
        folder = scratch / name
        folder.mkdir()
        runners[name] = build(by_name[name], folder)
    if options.only:
        runners = {options.only: runners[options.only]}
    conditions = {"idle": ["idle"], "loaded": ["two cores loaded"], "both": ["idle", "two cores loaded"]}
    varied = False
    for condition in conditions[options.condition]:
        load = []
        if condition != "idle":
            load = [multiprocessing.Process(target=spin, daemon=True) for _ in range(2)]
            for process in load:
                process.start()
        try:
            for name, runner in runners.items():
                seen = Counter(failed_set(runner, options.workers) for _ in range(options.runs))
                passed = seen.get((), 0)
                print(
                    "%-18s %-26s %2d/%d runs passed, %d distinct failure set(s), %s"
                    % (
                        condition,
                        name,
                        passed,
                        options.runs,
                        len(seen),
                        "failing %d checks" % len(next(iter(seen))) if len(seen) == 1 and passed == 0 else "",
                    )
                )
                if len(seen) != 1:
                    varied = True
                    always = set.intersection(*(set(failures) for failures in seen))
                    for failures, times in seen.items():
                        extra = sorted(set(failures) - always) or "nothing more"
                        print("    %d run(s) also failed: %s" % (times, extra))
                sys.stdout.flush()
        finally:
            for process in load:
                process.terminate()
    sys.exit(1 if varied else 0)


if __name__ == "__main__":
    main()

"""What each of the project's tests costs in CPU-seconds, its processes' and all they start.

The project's tests run at once on every CPU, so a test's wall time says little about what it
takes from the others: CI's time is the sum of their CPU, which is what this plugin measures. With
$PYOPS_TEST_CPU naming a folder (and root on a machine with cgroup v1's cpuacct controller), each
pytest process moves itself into a cpuacct cgroup of its own, which the kernel charges for every
process it starts, and writes a line per test to FOLDER/<worker>.jsonl: the test's id, its
CPU-seconds and its wall seconds. Without the variable it does nothing.

    PYOPS_TEST_CPU=cpu tox -e py311
    python -m tests.cpu_account cpu     # the costliest tests and each file's total
"""

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Optional

import pytest

CPU_VAR = "PYOPS_TEST_CPU"
_CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class _Account:
    def __init__(self, folder: Path, name: str):
        self.cgroup = _CPUACCT / ("pyops-tests-%s-%d" % (name, os.getpid()))
        self.cgroup.mkdir()
        (self.cgroup / "cgroup.procs").write_text("%d\n" % os.getpid())
        self.out = (folder / ("%s.jsonl" % name)).open("a", encoding="utf-8")

    def used(self) -> float:
        return int((self.cgroup / "cpuacct.usage").read_text()) / 1e9

    def close(self) -> None:
        self.out.close()
        (_CPUACCT / "cgroup.procs").write_text("%d\n" % os.getpid())
        try:
            self.cgroup.rmdir()
        except OSError:
            pass  # a process it started is still alive: the cgroup goes with the machine's next cleanup


_ACCOUNT: Optional[_Account] = None


def pytest_configure(config):
    global _ACCOUNT
    folder = os.environ.get(CPU_VAR)
    if not folder or not _CPUACCT.is_dir():
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    name = getattr(config, "workerinput", {}).get("workerid", "main")
    _ACCOUNT = _Account(Path(folder), name)


def pytest_unconfigure(config):
    if _ACCOUNT is not None:
        _ACCOUNT.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _ACCOUNT is None:
        yield
        return
    cpu, wall = _ACCOUNT.used(), time.monotonic()
    yield
    line = {"id": item.nodeid, "cpu_s": round(_ACCOUNT.used() - cpu, 2), "wall_s": round(time.monotonic() - wall, 2)}
    _ACCOUNT.out.write(json.dumps(line) + "\n")
    _ACCOUNT.out.flush()


def summary(folder: Path, shown: int = 40) -> str:
    tests = [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()]
    by_file = defaultdict(float)
    for test in tests:
        by_file[test["id"].split("::")[0]] += test["cpu_s"]
    lines = ["%d tests, %.0f CPU-s in all" % (len(tests), sum(test["cpu_s"] for test in tests))]
    costliest = sorted(tests, key=lambda test: -test["cpu_s"])[:shown]
    lines += ["%8.1f CPU-s %7.1f s  %s" % (test["cpu_s"], test["wall_s"], test["id"]) for test in costliest]
    lines += ["by file:"]
    lines += ["%8.1f CPU-s  %s" % (cpu, name) for name, cpu in sorted(by_file.items(), key=lambda item: -item[1])]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: python -m tests.cpu_account FOLDER (a folder $%s wrote)" % CPU_VAR)
    print(summary(Path(sys.argv[1])))

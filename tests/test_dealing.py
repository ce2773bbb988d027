"""The order checks are handed to pytest-xdist's workers: each starts with the next slowest."""

import subprocess
import sys

import pytest
from xdist.scheduler.worksteal import WorkStealingScheduling

from conformance.plugin import dealt
from tests.grading import REPO


class FakeWorker:
    """What the scheduler needs of a worker: it records the checks it is sent."""

    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.shutting_down = False
        self.sent: list = []

    def send_runtest_some(self, indices) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:  # sent to a worker left with nothing to do
        self.shutting_down = True


@pytest.mark.parametrize("checks, workers", [(162, 8), (198, 8), (162, 3), (20, 16), (7, 4), (9, 2)])
def test_every_worker_starts_with_the_next_slowest_check(checks, workers):
    slowest_first = ["check-%03d" % rank for rank in range(checks)]  # rank 0 is the slowest
    collection = dealt(slowest_first, workers)
    assert sorted(collection) == slowest_first  # nothing lost, nothing twice
    # As `-n WORKERS` sets it: that many local workers.
    config = type("Config", (), {"getvalue": lambda self, name: {"tx": ["%d*popen" % workers]}[name]})()
    scheduler = WorkStealingScheduling(config)
    nodes = [FakeWorker("gw%d" % number) for number in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    started = sorted(collection[node.sent[0]] for node in nodes if node.sent)
    assert started == slowest_first[: len(started)]
    assert len(started) == min(checks, workers)


def test_the_project_s_own_slowest_test_is_collected_first():
    # tests/conftest.py orders the project's tests by their slow(seconds) marks, so that the
    # self-test (the longest by far) starts at once under tox's worksteal, not last.
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "not bench"],
        capture_output=True,
        text=True,
        cwd=str(REPO),
    ).stdout.splitlines()
    assert listed[0].startswith("tests/test_zoo.py::test_the_selftest_holds"), listed[:3]

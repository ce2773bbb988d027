"""Turns on the machine: a replay plays alone, after the plays in flight and before new ones."""

import threading
import time

import pytest

from conformance.harness import machine


@pytest.fixture(autouse=True)
def own_machine(tmp_path, monkeypatch):
    """Lock files of this test's own, and a fresh budget of alone plays."""
    monkeypatch.setattr(machine, "MACHINE_DIR", tmp_path)
    monkeypatch.setattr(machine, "_alone_played", 0)
    monkeypatch.setattr(machine, "_gave_up", False)


def hold(alone, entered, leave):
    """In a thread: take a turn, say so, and keep it until `leave` is set."""

    def play():
        with machine.turn(alone=alone):
            entered.set()
            leave.wait(10)

    thread = threading.Thread(target=play)
    thread.start()
    assert entered.wait(10), "the turn was never had"
    return thread


@pytest.mark.parametrize(
    "held_alone, asked_alone",
    [(False, True), (True, False)],
    ids=["a replay waits for the plays in flight", "no new play starts while a replay plays"],
)
def test_a_replay_and_a_play_never_overlap(held_alone, asked_alone):
    entered, leave = threading.Event(), threading.Event()
    holder = hold(held_alone, entered, leave)
    threading.Timer(0.3, leave.set).start()
    started = time.monotonic()
    with machine.turn(alone=asked_alone) as alone:
        waited = time.monotonic() - started
    holder.join()
    assert alone == asked_alone and waited >= 0.25, "had its turn %.2fs after asking, while another held one" % waited


def test_plays_share_the_machine():
    entered, leave = threading.Event(), threading.Event()
    first = hold(False, entered, leave)
    started = time.monotonic()
    with machine.turn(alone=False):
        waited = time.monotonic() - started
    leave.set()
    first.join()
    assert waited < 0.2, "a play waited %.2fs for another play" % waited


def test_a_turn_not_had_in_time_is_played_without_and_not_waited_for_again(monkeypatch):
    # A holder that never lets go (a grading stopped with Ctrl-Z) costs one wait, not one per check.
    monkeypatch.setattr(machine, "PATIENCE_S", 0.3)
    entered, leave = threading.Event(), threading.Event()
    stuck = hold(False, entered, leave)
    try:
        with machine.turn(alone=True) as alone:
            assert not alone, "alone while another play held its turn"
        started = time.monotonic()
        with machine.turn(alone=True) as alone:
            waited = time.monotonic() - started
        assert not alone and waited < 0.1, "waited %.2fs again for a turn that was not had before" % waited
    finally:
        leave.set()
        stuck.join()


def test_a_grading_plays_alone_only_so_often():
    alone_turns = []
    for _ in range(machine.ALONE_BUDGET + 2):
        with machine.turn(alone=True) as alone:
            alone_turns.append(alone)
    assert alone_turns == [True] * machine.ALONE_BUDGET + [False, False]


def test_a_folder_without_locks_plays_without_turns(tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "MACHINE_DIR", tmp_path / "missing")
    with machine.turn(alone=True) as alone:
        assert not alone

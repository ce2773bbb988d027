"""Snapshot puts folders back exactly as they were, even after a session that died."""

import os

from conformance.harness.restore import JOURNAL, Snapshot
from tests.tree import learner_folder, tree_state


def scribble(folder):
    (folder / "runner.py").write_text("overwritten")
    (folder / "runs.jsonl").unlink()
    (folder / "state" / "new.done").write_text("x")
    (folder / "notes" / "secret.txt").chmod(0o644)
    (folder / "extra").mkdir()
    os.chmod(str(folder / "state"), 0o555)


def test_restore_puts_back_bytes_modes_times_and_links(tmp_path):
    folder = learner_folder(tmp_path / "sub")
    before = tree_state(folder)
    snapshot = Snapshot.take([folder], root=tmp_path / "backup")
    scribble(folder)
    assert tree_state(folder) != before
    snapshot.restore()
    assert tree_state(folder) == before
    assert not (tmp_path / "backup").exists()


def test_a_folder_that_did_not_exist_is_removed_with_the_parents_made_for_it(tmp_path):
    folder = tmp_path / "made" / "for" / "the" / "session"
    snapshot = Snapshot.take([folder], root=tmp_path / "backup")
    folder.mkdir(parents=True)
    (folder / "file").write_text("x")
    snapshot.restore()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_next_session_restores_what_a_killed_one_left(tmp_path):
    folder = learner_folder(tmp_path / "sub")
    before = tree_state(folder)
    Snapshot.take([folder], root=tmp_path / "backup")  # and then the session is killed
    scribble(folder)
    assert (tmp_path / "backup" / JOURNAL).exists()
    again = Snapshot.take([folder], root=tmp_path / "backup")
    assert tree_state(folder) == before  # put back before the new session looked at it
    again.restore()
    assert tree_state(folder) == before

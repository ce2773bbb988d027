"""labfiles: what a runner left in its lab is read, listed, handed over and removed without ever
following a link, blocking, reading without a cap or failing, whatever the runner made of it."""

import os
import stat
import threading
from pathlib import Path

import pytest

from conformance.harness import labfiles


@pytest.fixture
def secret(tmp_path):
    """A folder and a file elsewhere on the machine, private, that a lab may link to."""
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    (folder / "secret").write_text("TOP SECRET\n")
    (folder / "secret").chmod(0o600)
    return folder


@pytest.fixture
def lab(tmp_path):
    folder = tmp_path / "lab"
    (folder / "sub" / "state").mkdir(parents=True)
    return folder


def test_a_regular_file_is_read_whole(lab):
    (lab / "sub" / "runs.jsonl").write_bytes(b'{"rc": 0}\n')
    found = labfiles.read(lab, "sub/runs.jsonl", 100)
    assert (found.data, found.exists, found.refused) == (b'{"rc": 0}\n', True, None)


def test_an_absent_file_is_absent_not_refused(lab):
    found = labfiles.read(lab, "sub/runs.jsonl", 100)
    assert (found.data, found.exists, found.refused) == (b"", False, None)
    assert labfiles.read(lab, "sub/no-such-folder/x", 100).exists is False


@pytest.mark.parametrize(
    "make,kind",
    [
        (lambda path, secret: path.symlink_to(secret / "secret"), "link"),
        (lambda path, secret: path.symlink_to("/dev/zero"), "link"),
        (lambda path, secret: os.mkfifo(str(path)), "fifo"),
        (lambda path, secret: path.mkdir(), "folder"),
        (lambda path, secret: os.link(str(secret / "secret"), str(path)), "hard_link"),
        (lambda path, secret: path.write_bytes(b"x" * 101), "too_large"),
    ],
    ids=["link-to-a-secret", "link-to-dev-zero", "fifo", "folder", "hard-link", "too-large"],
)
def test_what_is_not_a_small_regular_file_is_refused_unread(lab, secret, make, kind):
    make(lab / "sub" / "runs.jsonl", secret)
    reading = threading.Thread(target=lambda: found.append(labfiles.read(lab, "sub/runs.jsonl", 100)), daemon=True)
    found = []
    reading.start()
    reading.join(5)  # a FIFO opened for reading blocks until a writer comes: never here
    assert found, "reading the lab file blocked"
    assert (found[0].data, found[0].exists, found[0].refused) == (b"", True, kind)


def test_a_link_in_the_middle_of_a_path_is_not_followed(lab, secret):
    (lab / "sub" / "state").rmdir()
    (lab / "sub" / "state").symlink_to(secret)
    found = labfiles.read(lab, "sub/state/secret", 100)
    assert (found.name, found.data, found.refused) == ("sub/state", b"", "link")
    listed = labfiles.listing(lab, "sub/state")
    assert (listed.entries, listed.refused) == ({}, "link")
    assert labfiles.look(lab, "sub/state/secret").refused == "link"


def test_anything_at_a_path_is_present_and_nothing_is_followed_to_find_it(lab, secret):
    (lab / "sub" / "dangling").symlink_to(lab / "nowhere")
    (lab / "sub" / "applied.log").mkdir()
    assert labfiles.present(lab, "sub/dangling") and labfiles.present(lab, "sub/applied.log")
    assert not labfiles.present(lab, "sub/state/x.done")
    # Through a link to a folder that holds the name, it is not there: the lab's own folder does not.
    (lab / "sub" / "state").rmdir()
    (lab / "sub" / "state").symlink_to(secret)
    assert not labfiles.present(lab, "sub/state/secret")


def test_a_listing_names_each_entry_with_its_kind(lab, secret):
    state = lab / "sub" / "state"
    (state / "a.done").touch()
    (state / "b.done").symlink_to(secret / "secret")
    (state / "c.done").mkdir()
    listed = labfiles.listing(lab, "sub/state")
    assert listed.entries == {"a.done": None, "b.done": "link", "c.done": "folder"}
    assert listed.regular() == ["a.done"]


def test_an_open_file_is_a_descriptor_of_a_regular_file_only(lab, secret):
    (lab / "sub" / "state" / "lock").symlink_to(secret / "secret")
    fd, found = labfiles.open_file(lab, "sub/state/lock")
    assert fd is None and found.refused == "link"
    (lab / "sub" / "state" / "lock").unlink()
    (lab / "sub" / "state" / "lock").touch()
    fd, found = labfiles.open_file(lab, "sub/state/lock")
    assert fd is not None and found.refused is None
    os.close(fd)


def deep_tree(top: Path, depth: int) -> None:
    """A chain of `depth` folders below `top`, made relative to each other (no path is long)."""
    fd = os.open(str(top), os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)


def test_a_removal_follows_no_link_changes_nothing_outside_and_always_finishes(lab, secret, tmp_path):
    sub = lab / "sub"
    (sub / "to-private").symlink_to(secret)
    (sub / "to-proc").symlink_to("/proc/1")
    (sub / "to-root").symlink_to("/")
    os.mkfifo(str(sub / "fifo"))
    deep_tree(sub, 3000)  # os.walk and shutil.rmtree recurse: RecursionError at about 1000
    closed = sub / "closed"
    (closed / "inner").mkdir(parents=True)
    (closed / "inner" / "file").touch()
    closed.chmod(0)
    open_to_all = tmp_path / "open-to-all"
    open_to_all.mkdir()
    open_to_all.chmod(0o1777)
    (sub / "to-sticky").symlink_to(open_to_all)
    before = {path: stat.S_IMODE(os.lstat(str(path)).st_mode) for path in (secret, secret / "secret", open_to_all)}
    labfiles.remove_tree(lab)
    assert not lab.exists() and not os.path.lexists(str(lab))
    assert (secret / "secret").read_text() == "TOP SECRET\n"
    assert {path: stat.S_IMODE(os.lstat(str(path)).st_mode) for path in before} == before


def test_emptying_a_folder_keeps_it_and_its_mount_points(tmp_path, secret):
    folder = tmp_path / "scratch"
    folder.mkdir()
    (folder / "link").symlink_to(secret)
    (folder / "tree" / "deeper").mkdir(parents=True)
    (folder / "file").write_text("x")
    labfiles.empty_folder(folder)
    assert folder.is_dir() and list(folder.iterdir()) == []
    assert (secret / "secret").exists()


def test_a_hand_over_changes_owners_in_the_tree_only(lab, secret):
    sub = lab / "sub"
    (sub / "runs.jsonl").write_text("")
    (sub / "to-private").symlink_to(secret)
    os.link(str(secret / "secret"), str(sub / "hard"))
    deep_tree(sub, 1500)
    try:
        handed_over(sub, secret)
    finally:
        labfiles.remove_tree(sub)  # pytest's own clean-up of tmp_path recurses, and would fail


def handed_over(sub, secret):
    labfiles.chown_tree(sub, 12345, 12345)
    assert os.lstat(str(sub / "runs.jsonl")).st_uid == 12345
    assert os.lstat(str(sub / "to-private")).st_uid == 12345  # the link itself
    assert os.stat(str(secret)).st_uid == os.getuid()  # not what it points to
    assert os.stat(str(secret / "secret")).st_uid == os.getuid()  # nor a file with a name elsewhere
    deepest = os.open(str(sub), os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1500):
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=deepest)
        os.close(deepest)
        deepest = child
    assert os.fstat(deepest).st_uid == 12345
    os.close(deepest)

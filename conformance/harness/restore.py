"""Put the real lab folders back exactly as they were (the shared isolation mode).

Before a shared-mode session touches /root/pyops/sub or /opt/fixtures/pyops/bin, it copies them
(contents, modes, times, symlinks) to a backup on disk and writes a journal. At the end, even
after SIGINT or SIGTERM, the folders are emptied and the copy is put back. If a session died
without restoring (SIGKILL, power loss), the next one finds the journal and restores first, so
a learner never loses their runner.py, runs.jsonl, markers or applied.log.
"""

import json
import os
import shutil
from pathlib import Path
from typing import Dict, Iterable, List, Optional

from conformance.harness import labfiles

BACKUP_ROOT = Path(os.environ.get("PYOPS_CONFORMANCE_BACKUP", "/var/tmp/pyops-conformance-backup"))
JOURNAL = "journal.json"


class Snapshot:
    """The state of some folders on disk, saved so that `restore()` recreates it exactly."""

    def __init__(self, root: Path, entries: List[Dict]) -> None:
        self.root = root
        self.entries = entries  # [{path, existed, created_from, copy}]

    @classmethod
    def take(cls, folders: Iterable[Path], root: Path = BACKUP_ROOT) -> "Snapshot":
        leftover = cls.load(root)
        if leftover is not None:
            leftover.restore()  # a previous session died before it could restore
        root.mkdir(parents=True, exist_ok=True)
        entries = []
        for index, folder in enumerate(folders):
            entry = {"path": str(folder), "existed": folder.exists(), "copy": None}
            if entry["existed"]:
                copy = root / ("copy%d" % index)
                shutil.copytree(str(folder), str(copy), symlinks=True)
                shutil.copystat(str(folder), str(copy))
                _copy_owners(folder, copy)
                entry["copy"] = str(copy)
            else:
                entry["created_from"] = str(_nearest_existing(folder))
            entries.append(entry)
        snapshot = cls(root, entries)
        journal = root / (JOURNAL + ".new")
        journal.write_text(json.dumps(entries))
        os.replace(str(journal), str(root / JOURNAL))  # the backup counts only once complete
        return snapshot

    @classmethod
    def load(cls, root: Path = BACKUP_ROOT) -> Optional["Snapshot"]:
        try:
            return cls(root, json.loads((root / JOURNAL).read_text()))
        except (OSError, ValueError):
            return None

    def restore(self) -> None:
        """Make every folder as it was when the snapshot was taken, then drop the backup."""
        for entry in self.entries:
            folder = Path(entry["path"])
            if entry["existed"]:
                _empty(folder)
                _copy_back(Path(entry["copy"]), folder)
            else:
                _remove_created(folder, Path(entry["created_from"]))
        (self.root / JOURNAL).unlink()
        shutil.rmtree(str(self.root), ignore_errors=True)


def _nearest_existing(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


def _busy(path: Path) -> bool:
    """A path the session cannot replace: a mount point, such as a runner.py mounted read-only."""
    try:
        return os.path.ismount(str(path)) or path.stat().st_dev != path.parent.stat().st_dev
    except OSError:
        return False


def _empty(folder: Path) -> None:
    """Empty `folder` (a runner's links removed, never followed), or make it a folder again."""
    if folder.is_symlink() or not folder.is_dir():
        if folder.exists() or folder.is_symlink():
            folder.unlink()
        folder.mkdir(parents=True)
        return
    os.chmod(str(folder), 0o700)
    labfiles.empty_folder(folder)  # a mount point in it (a runner.py mounted read-only) stays


def _copy_back(copy: Path, folder: Path) -> None:
    for entry in copy.iterdir():
        target = folder / entry.name
        if _busy(target):
            continue
        if entry.is_dir() and not entry.is_symlink():
            target.mkdir()
            _copy_back(entry, target)
        elif entry.is_symlink():
            os.symlink(os.readlink(str(entry)), str(target))
            shutil.copystat(str(entry), str(target), follow_symlinks=False)
        else:
            shutil.copy2(str(entry), str(target))
        _copy_owner(entry, target)
    _copy_owner(copy, folder)  # the runner under test, with a uid of its own, may have owned them
    shutil.copystat(str(copy), str(folder))  # last, so filling the folder does not touch its times


def _copy_owners(original: Path, copy: Path) -> None:
    """Give every path of `copy` the owner of its namesake in `original` (copytree makes them root's)."""
    _copy_owner(original, copy)
    for folder, dirs, files in os.walk(str(original)):
        for name in dirs + files:
            source = Path(folder) / name
            _copy_owner(source, copy / source.relative_to(original))


def _copy_owner(source: Path, target: Path) -> None:
    try:
        status = os.lstat(str(source))
        os.lchown(str(target), status.st_uid, status.st_gid)
    except OSError:
        pass  # gone, or not ours to change (a read-only mount): nothing to put back


def _remove_created(folder: Path, existing_parent: Path) -> None:
    """Remove a folder the session created, and the parents it created on the way."""
    if folder.exists():
        _empty(folder)
        folder.rmdir()
    parent = folder.parent
    while parent != existing_parent and parent.exists() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent

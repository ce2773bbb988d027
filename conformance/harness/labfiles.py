"""The one way to read, list, hand over or remove what a runner left in its lab.

Everything below a lab's `sub/` and `work/` is the runner's to write, and a runner may have read
this suite: any name there can be a symbolic link to a file only root may read, a FIFO that
blocks whoever opens it, a link to /dev/zero, a folder tree ten thousand levels deep, or a link
to a folder elsewhere on the machine. So, here and only here:

* every path is walked one name at a time from a folder the grader made, relative to an open
  descriptor, with O_NOFOLLOW: no link is ever followed, in the middle of a path or at its end;
* a file is read only if it is a regular file with one name (a hard link may be a system file
  linked in), opened non-blocking, and never more than a cap;
* a tree is walked without recursion and without long paths (each step is relative to its
  folder's descriptor, and `..` leads back up, checked against the folder it came from), so no
  depth exhausts the stack, the path length or the descriptors;
* a removal never fails: what cannot be removed (a mount point) is left and the rest goes on.

A refusal is the runner's failure, never the suite's error: `LabFileRefused` names the file, what it is
instead, and the clause that judges that file (lab-spec: "files the runner leaves in the lab").
"""

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_O_PATH = getattr(os, "O_PATH", 0o10000000)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

# What a name in a lab can be instead of the regular file a check wants, in words and as data.
KINDS = {
    "link": "a symbolic link",
    "folder": "a folder",
    "fifo": "a FIFO (named pipe)",
    "device": "a device",
    "socket": "a socket",
    "hard_link": "a file with another name elsewhere (a hard link)",
    "too_large": "larger than %d bytes",
    "not_a_folder": "not a folder",
}


def kind_of(mode: int) -> Optional[str]:
    """What a file of `mode` is, as a key of KINDS; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device"


def what(kind: str, limit: int, words: Mapping[str, str]) -> str:
    """`kind` (a key of KINDS) in `words` (KINDS, or its translation), its limit filled in."""
    return words[kind] % limit if kind == "too_large" else words[kind]


class LabFileRefused(Exception):
    """A file a check must judge is not a regular file the grader may read: `name` (as the lab
    names it, `state/lock`), `kind` (a key of KINDS), `limit` for too_large, and `clause`, the
    clause that judges that file. `result` is the Result it was read for, for the evidence."""

    def __init__(self, name: str, kind: str, clause: str, limit: int = 0, result: object = None) -> None:
        super().__init__("%s is %s" % (name, what(kind, limit, KINDS)))
        self.name, self.kind, self.clause, self.limit, self.result = name, kind, clause, limit, result


@dataclass(frozen=True)
class LabFile:
    """A file as the grader found it: its bytes (b"" when absent or refused), or why it was not read."""

    name: str
    data: bytes = b""
    exists: bool = False
    refused: Optional[str] = None  # a key of KINDS
    limit: int = 0


def _open_folder(folder: Path, parts: List[str]) -> Tuple[Optional[int], Optional[str], Optional[str]]:
    """A descriptor of folder/parts..., each part opened without following a link.

    Returns (fd, None, None), or (None, the part that is not a folder, its kind), or (None, None,
    None) when a part does not exist.
    """
    try:
        fd = os.open(str(folder), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the grader's own folder
    except OSError:
        return None, None, None
    for index, part in enumerate(parts):
        try:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except OSError as error:
            found = _lstat_at(fd, part)
            os.close(fd)
            if error.errno == errno.ENOENT or found is None:
                return None, None, None
            return None, "/".join(parts[: index + 1]), kind_of(found.st_mode) or "not_a_folder"
        os.close(fd)
        fd = child
    return fd, None, None


def _lstat_at(dir_fd: int, name: str) -> Optional[os.stat_result]:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None


def look(folder: Path, relative: str) -> LabFile:
    """Is there a regular file `relative` below `folder`, or what instead? Nothing is opened or read."""
    *parts, name = relative.split("/")
    fd, bad, kind = _open_folder(folder, parts)
    if fd is None:
        return LabFile(bad or relative, exists=bad is not None, refused=kind)
    try:
        found = _lstat_at(fd, name)
    finally:
        os.close(fd)
    if found is None:
        return LabFile(relative)
    return LabFile(relative, exists=True, refused=_refusal(found, None))


def present(folder: Path, relative: str) -> bool:
    """Is there anything at `relative` below `folder` (a link too: never followed)? For checks that
    something did not happen (a shell's redirection, an early marker): any kind of file shows it did."""
    found = look(folder, relative)
    return found.exists and found.name == relative


def open_file(folder: Path, relative: str) -> Tuple[Optional[int], LabFile]:
    """A read-only, non-blocking descriptor of the regular file `relative` (a/b/name) below
    `folder`, never through a link; or None and what is there instead (the caller closes it)."""
    return _open_regular(folder, relative, None)


def read(folder: Path, relative: str, limit: int) -> LabFile:
    """The regular file `relative` (a/b/name) below `folder`, at most `limit` bytes: never a link
    followed, never a block, never more than the cap (a larger file is refused, unread)."""
    fd, found = _open_regular(folder, relative, limit)
    if fd is None:
        return found
    try:
        data = _read_up_to(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew after the fstat
        return LabFile(relative, exists=True, refused="too_large", limit=limit)
    return LabFile(relative, data, exists=True)


def _open_regular(folder: Path, relative: str, limit: Optional[int]) -> Tuple[Optional[int], LabFile]:
    *parts, name = relative.split("/")
    fd, bad, kind = _open_folder(folder, parts)
    if fd is None:
        return None, LabFile(bad or relative, exists=bad is not None, refused=kind)
    try:
        before = _lstat_at(fd, name)
        if before is None:
            return None, LabFile(relative)
        refused = _refusal(before, limit)
        if refused:  # refused unopened: opening a device or FIFO can itself do something
            return None, LabFile(relative, exists=True, refused=refused, limit=limit or 0)
        try:
            file_fd = os.open(name, _FILE_FLAGS, dir_fd=fd)
        except OSError as error:  # swapped for a link meanwhile (ELOOP), or gone
            refused = "link" if error.errno == errno.ELOOP else None
            return None, LabFile(relative, exists=error.errno != errno.ENOENT, refused=refused)
        refused = _refusal(os.fstat(file_fd), limit)
        if refused:
            os.close(file_fd)
            return None, LabFile(relative, exists=True, refused=refused, limit=limit or 0)
        return file_fd, LabFile(relative, exists=True)
    finally:
        os.close(fd)


def write(folder: Path, relative: str, data: bytes) -> None:
    """Put a new regular file `relative` below `folder` (its folders made where missing), in place of
    whatever had its name: written as the grader, never through a link a runner left there."""
    *parts, name = relative.split("/")
    fd = os.open(str(folder), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the grader's own folder
    try:
        for part in parts:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)  # ELOOP for a link: refused, as OSError
            os.close(fd)
            fd = child
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
        try:
            os.write(out, data)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _refusal(info: os.stat_result, limit: Optional[int]) -> Optional[str]:
    kind = kind_of(info.st_mode)
    if kind:
        return kind
    if info.st_nlink > 1:
        return "hard_link"
    if limit is not None and info.st_size > limit:
        return "too_large"
    return None


def _read_up_to(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


@dataclass(frozen=True)
class Listing:
    """The entries of a lab folder, each with its kind (None: a regular file), or why it could not be listed."""

    name: str
    entries: Dict[str, Optional[str]]
    exists: bool = True
    refused: Optional[str] = None

    def regular(self) -> List[str]:
        return sorted(entry for entry, kind in self.entries.items() if kind is None)


# More entries than any lab's state/ holds is not listed further (a runner can make millions).
LIST_LIMIT = 10000


def listing(folder: Path, relative: str) -> Listing:
    """What the folder `relative` below `folder` holds, without following a link to it or in it."""
    fd, bad, kind = _open_folder(folder, relative.split("/"))
    if fd is None:
        return Listing(relative, {}, exists=bad is not None, refused=kind)
    entries: Dict[str, Optional[str]] = {}
    try:
        with os.scandir(fd) as found:
            for entry in found:
                info = _lstat_at(fd, entry.name)
                if info is not None:
                    entries[entry.name] = kind_of(info.st_mode)
                if len(entries) >= LIST_LIMIT:
                    break
    finally:
        os.close(fd)
    return Listing(relative, entries)


# ------------------------------------------------------------------ trees

# (descriptor of the entry's folder, its name there, its lstat, the folder's path below the top)
Visit = Callable[[int, str, os.stat_result, str], None]


def _walk(parent_fd: int, top: str, on_entry: Visit, remove: bool) -> None:
    """Visit everything below the folder `top` of `parent_fd` without recursion and without
    following a link: `on_entry` gets (its folder's descriptor, its name, its lstat) for every
    entry, a folder before what it holds; with `remove`, every entry is removed after its visit,
    a folder once emptied, and `top` last.

    Never raises for what a runner did: an entry that cannot be opened or removed is left.
    """
    done: Set[Tuple[int, int]] = set()  # entries visited (folders: and left), not visited again
    while _walk_once(parent_fd, top, on_entry, remove, done):
        pass  # the tree changed while it was walked (a folder moved): again, from the top


def _walk_once(parent_fd: int, top: str, on_entry: Visit, remove: bool, done: Set[Tuple[int, int]]) -> bool:
    """One walk of _walk's; True if it must start again."""
    fd = _enter(parent_fd, top, repair=remove)
    if fd is None:
        return False
    # The folders from top down to the one being walked: (name in its parent, dev, ino), and their
    # paths below the top.
    path: List[Tuple[str, int, int]] = [(top, *_identity(fd))]
    where: List[str] = [""]
    while True:
        entered = None
        try:
            with os.scandir(fd) as found:
                for entry in found:
                    info = _lstat_at(fd, entry.name)
                    if info is None or (info.st_dev, info.st_ino) in done:
                        continue
                    if not remove:
                        done.add((info.st_dev, info.st_ino))
                    if not stat.S_ISDIR(info.st_mode):
                        on_entry(fd, entry.name, info, where[-1])
                        if remove:
                            _quietly(os.unlink, entry.name, dir_fd=fd)
                        continue
                    if info.st_dev != path[-1][1]:
                        done.add((info.st_dev, info.st_ino))  # a mount point: not the lab's
                        continue
                    on_entry(fd, entry.name, info, where[-1])
                    entered = _enter(fd, entry.name, repair=remove)
                    if entered is None:
                        done.add((info.st_dev, info.st_ino))
                        continue
                    path.append((entry.name, info.st_dev, info.st_ino))
                    where.append(where[-1] + entry.name + "/")
                    break
        except OSError:
            pass  # not listable after all: leave it
        if entered is not None:
            os.close(fd)
            fd = entered
            continue
        # Everything of this folder was visited: back to its parent.
        name, dev, ino = path.pop()
        where.pop()
        if not path:
            os.close(fd)
            if remove:
                _quietly(os.rmdir, name, dir_fd=parent_fd)
            return False
        try:
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
        except OSError:
            parent = -1
        os.close(fd)
        if parent < 0 or _identity(parent) != path[-1][1:]:
            if parent >= 0:
                os.close(parent)
            done.add((dev, ino))
            return True
        fd = parent
        if not remove or not _removed(fd, name):
            done.add((dev, ino))


def _nothing(fd: int, name: str, info: os.stat_result, folder: str) -> None:
    pass


def _removed(fd: int, name: str) -> bool:
    try:
        os.rmdir(name, dir_fd=fd)
        return True
    except OSError:
        return False


def _identity(fd: int) -> Tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def _enter(fd: int, name: str, repair: bool = False) -> Optional[int]:
    """A descriptor of the folder `name` in `fd`; with `repair`, first given the permissions its
    owner needs to empty it (a runner may have made it 000, which stops its owner, the grader when
    rootless, but not root). Only a folder about to be removed is changed."""
    info = _lstat_at(fd, name)
    if info is None or not stat.S_ISDIR(info.st_mode):
        return None
    if repair and info.st_mode & 0o700 != 0o700:
        _chmod_at(fd, name, (info.st_mode & 0o7777) | 0o700)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError:
        return None


def _chmod_at(fd: int, name: str, mode: int) -> None:
    """chmod the entry `name` of `fd`, never a link's target: the entry is held by an O_PATH
    descriptor, checked not to be a link, and changed through /proc (fchmodat cannot refuse links)."""
    try:
        held = os.open(name, _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return
    try:
        if not stat.S_ISLNK(os.fstat(held).st_mode):
            os.chmod("/proc/self/fd/%d" % held, mode)
    except OSError:
        pass
    finally:
        os.close(held)


def _quietly(action: Callable[..., None], *args: Any, **kwargs: Any) -> None:
    try:
        action(*args, **kwargs)
    except OSError:
        pass


def _parent_of(top: Path) -> Optional[int]:
    try:
        return os.open(str(top.parent), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the grader's own path
    except OSError:
        return None


def remove_tree(top: Path) -> None:
    """Remove `top` and everything below it; a link is removed, never followed. Never raises."""
    parent = _parent_of(top)
    if parent is None:
        return
    try:
        info = _lstat_at(parent, top.name)
        if info is not None and not stat.S_ISDIR(info.st_mode):
            _quietly(os.unlink, top.name, dir_fd=parent)
        elif info is not None:
            _walk(parent, top.name, _nothing, remove=True)
    finally:
        os.close(parent)


def empty_folder(top: Path) -> None:
    """Remove everything below `top`, keeping `top` itself: as remove_tree does."""
    parent = _parent_of(top)
    if parent is None:
        return
    fd = _enter(parent, top.name, repair=True)
    os.close(parent)
    if fd is None:
        return
    try:
        with os.scandir(fd) as found:
            names = [entry.name for entry in found]
        for name in names:
            info = _lstat_at(fd, name)
            if info is not None and stat.S_ISDIR(info.st_mode) and info.st_dev == os.fstat(fd).st_dev:
                _walk(fd, name, _nothing, remove=True)
            elif info is not None and not stat.S_ISDIR(info.st_mode):
                _quietly(os.unlink, name, dir_fd=fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def chown_tree(top: Path, uid: int, gid: int) -> None:
    """Give `top` and everything below it to uid:gid, links themselves (never their targets), and
    not a file with another name elsewhere: a runner may have hard-linked a system file into its
    lab (where fs.protected_hardlinks is off) and must not get to own it."""

    def chown(fd: int, name: str, info: os.stat_result, _folder: str = "") -> None:
        if info.st_nlink == 1 or stat.S_ISDIR(info.st_mode):
            _quietly(os.chown, name, uid, gid, dir_fd=fd, follow_symlinks=False)

    parent = _parent_of(top)
    if parent is None:
        return
    try:
        info = _lstat_at(parent, top.name)
        if info is not None:
            chown(parent, top.name, info)
            if stat.S_ISDIR(info.st_mode):
                _walk(parent, top.name, chown, remove=False)
    finally:
        os.close(parent)


def tree(top: Path, limit: int = LIST_LIMIT) -> Dict[str, Tuple[Optional[str], int, int]]:
    """Every path below `top` (the first `limit`), with its kind (None: a regular file), size and
    modification time in ns: a folder's contents before and after a call, compared. No link followed."""
    found: Dict[str, Tuple[Optional[str], int, int]] = {}

    def note(fd: int, name: str, info: os.stat_result, folder: str) -> None:
        if len(found) < limit:
            found[folder + name] = (kind_of(info.st_mode), info.st_size, info.st_mtime_ns)

    parent = _parent_of(top)
    if parent is not None:
        try:
            _walk(parent, top.name, note, remove=False)
        finally:
            os.close(parent)
    return found

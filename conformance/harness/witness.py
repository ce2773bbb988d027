"""What the lab's commands did, as the kernel tells it: every open of a watched file, by whom, since when.

A start time a command writes to a file (`date >> calls`) or a fixture's trace (applied.log) sits
where the runner's uid may write, so a runner could forge it: skip its backoff waits and rewrite
the times, or imitate apply.sh. The witness asks the kernel instead. It holds a fanotify group
with permission events on the files the lab's commands open (the counter a counted command
appends to, the lab's own copy of each fixture): the kernel queues every open, none slips past
however short the command, and the opener waits until the witness has answered. So the witness
reads the opener's /proc entry (when it started, what it runs, what it is a child of, which locks
are held) while the process can neither be gone nor have its pid reused. Those times are the
kernel's, taken when the process started, so they do not depend on when the witness got the CPU.
The witness only watches: it answers every open with "allow".

Where the kernel refuses (no CAP_SYS_ADMIN: an unprivileged container, chroot or shared mode),
Witness.start() gives None and the checks read the lab's files as before; the report's provenance
says which evidence a grading had.
"""

import ctypes
import errno
import os
import select
import struct
import threading
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from conformance.harness import procfs
from conformance.harness.libc import LIBC
from conformance.lab import timing

# <linux/fanotify.h>
_FAN_CLOEXEC, _FAN_NONBLOCK, _FAN_CLASS_CONTENT = 0x1, 0x2, 0x4
_FAN_MARK_ADD = 0x1
_FAN_OPEN_PERM = 0x00010000
_FAN_ALLOW = 0x1
_AT_FDCWD = -100
_EVENT = struct.Struct("IBBHQii")  # fanotify_event_metadata: len, vers, reserved, metadata_len, mask, fd, pid
_RESPONSE = struct.Struct("iI")  # fanotify_response: fd, response

LIBC.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
LIBC.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]

# What one watched file may record: a correct run opens it a few times; a runner that opens it in
# a loop fills no memory, and the witness says it stopped counting.
MOST_OPENS = 4096
# The longest command line kept of an opener (a shell's script names the counter in a few hundred bytes).
ARGV_LIMIT = 64 * 1024
# How far up its parents an opener's start is looked for (a shell's subshells, nested a few deep).
SAME_ARGV_DEPTH = 4


@dataclass(frozen=True)
class Opened:
    """One open of a watched file, as the kernel showed its opener while it waited."""

    watched: str  # the name the file was watched under
    pid: int
    # When the call that opened it started (timing.now()'s clock, to a clock tick): the opener's
    # own start, or that of the parent running the same command line (a shell forks a subshell
    # to open a redirection: the command started when the shell did).
    started: float
    argv: Tuple[str, ...]
    program: str  # its executable's file name ("" where the grader may not read it: no CAP_SYS_PTRACE)
    name: str  # its process name (the kernel's: a script run by its #! line is named after the script)
    lock_held: Optional[bool] = None  # an flock on the lab's lock file then (None: not asked)
    marked: Optional[bool] = None  # the marker of the NAME it was given existed then (None: not asked)


class Witness:
    """A fanotify group and the thread that answers it; see the module's docstring."""

    def __init__(self, group: int) -> None:
        self._group = group
        self._watched: Dict[Tuple[int, int], str] = {}
        self._state: Dict[str, Callable[[Tuple[str, ...]], Dict[str, Optional[bool]]]] = {}
        self._opened: Dict[str, List[Opened]] = {}
        self.overflowed: List[str] = []  # watched files opened more than MOST_OPENS times
        # hold(): which open to hold, for how long; the opens held so far and their answers' times
        self._hold: Dict[str, Tuple[float, Callable[[Opened], bool]]] = {}
        self._held: Dict[str, Opened] = {}
        self._pending: List[Tuple[float, int]] = []  # (when to answer, the event's file)
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._answer, name="witness", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls) -> Optional["Witness"]:
        """A witness, or None where the kernel gives this process no fanotify permission events."""
        group = LIBC.fanotify_init(
            _FAN_CLOEXEC | _FAN_NONBLOCK | _FAN_CLASS_CONTENT, os.O_RDONLY | os.O_CLOEXEC | os.O_LARGEFILE
        )
        return None if group < 0 else cls(group)

    def watch(
        self, name: str, path: str, state: Optional[Callable[[Tuple[str, ...]], Dict[str, Optional[bool]]]] = None
    ) -> None:
        """Record every open of the file at `path` (which only the grader may replace) as `name`;
        with `state`, also what it says of the lab at that moment, given the opener's argv (the
        Opened fields lock_held and marked)."""
        found = os.stat(path)
        self._watched[(found.st_dev, found.st_ino)] = name
        if state is not None:
            self._state[name] = state
        self._opened.setdefault(name, [])
        if LIBC.fanotify_mark(self._group, _FAN_MARK_ADD, _FAN_OPEN_PERM, _AT_FDCWD, path.encode()) < 0:
            number = ctypes.get_errno()
            raise OSError(number, "fanotify_mark %s: %s" % (path, os.strerror(number)))

    def hold(self, name: str, seconds: float, which: Callable[[Opened], bool]) -> None:
        """Answer the next open of `name` for which `which(opened)` holds only `seconds` later: the
        opener (a run of a fixture) waits meanwhile, as if the fixture took that long, with no
        setting a runner could read to tell this run from another."""
        self._hold[name] = (seconds, which)
        os.write(self._stop_w, b"h")  # the answering thread's wait is recomputed

    def held(self, name: str) -> Optional[Opened]:
        """The open of `name` that hold() held, once it came (None before)."""
        return self._held.get(name)

    def opened(self, name: str) -> List[Opened]:
        """The opens of watched file `name` so far, in the order they came."""
        return list(self._opened.get(name, ()))

    def close(self) -> None:
        """Stop answering; closing the group lets any open still waiting go on."""
        if self._stop_w < 0:
            return
        os.write(self._stop_w, b"x")
        self._thread.join(5)
        for fd in (self._stop_w, self._stop_r, self._group):
            os.close(fd)
        self._stop_w = -1

    def _answer(self) -> None:
        _as_real_time()
        poller = select.poll()
        poller.register(self._group, select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        while True:
            wait_ms = None
            if self._pending:
                wait_ms = max(0, int((min(when for when, _ in self._pending) - timing.now()) * 1000) + 1)
            ready = [fd for fd, _ in poller.poll(wait_ms)]
            self._answer_due()
            if self._stop_r in ready:
                if b"x" in os.read(self._stop_r, 64):
                    for _, fd in self._pending:
                        self._allow(fd)
                    return
                continue
            if self._group not in ready:
                continue
            try:
                events = os.read(self._group, 64 * _EVENT.size)
            except BlockingIOError:
                continue
            offset = 0
            while offset + _EVENT.size <= len(events):
                length, _, _, _, _, fd, pid = _EVENT.unpack_from(events, offset)
                offset += max(length, _EVENT.size)
                if fd < 0:
                    continue  # a queue overflow's notice carries no file
                hold_s = 0.0
                try:
                    hold_s = self._record(fd, pid)
                finally:
                    if hold_s > 0:
                        self._pending.append((timing.now() + hold_s, fd))
                    else:
                        self._allow(fd)

    def _allow(self, fd: int) -> None:
        os.write(self._group, _RESPONSE.pack(fd, _FAN_ALLOW))
        os.close(fd)

    def _answer_due(self) -> None:
        now = timing.now()
        for when, fd in [pending for pending in self._pending if pending[0] <= now]:
            self._pending.remove((when, fd))
            self._allow(fd)

    def _record(self, fd: int, pid: int) -> float:
        """Record the open of event file `fd` by `pid`; return how long to hold it (0: answer now)."""
        try:
            found = os.fstat(fd)
        except OSError:
            return 0.0
        name = self._watched.get((found.st_dev, found.st_ino))
        if name is None:
            return 0.0
        seen = self._opened[name]
        if len(seen) >= MOST_OPENS:
            if name not in self.overflowed:
                self.overflowed.append(name)
            return 0.0
        try:
            argv, started = _command_line(pid), _call_started(pid)
        except (OSError, IndexError, ValueError):
            return 0.0  # not a process of this machine's view (it cannot be: it waits for the answer)
        state = self._state.get(name)
        opened = Opened(name, pid, started, argv, _program(pid), _process_name(pid), **(state(argv) if state else {}))
        seen.append(opened)
        hold = self._hold.get(name)
        if hold is not None and hold[1](opened):
            del self._hold[name]
            self._held[name] = opened
            return hold[0]
        return 0.0


def evidence() -> str:
    """What this process's gradings judge when and how often from: "kernel" where it may hold a
    witness, else "lab files" (the counter's lines, applied.log, flaky.sh's count)."""
    witness = Witness.start()
    if witness is None:
        return "lab files"
    witness.close()
    return "kernel"


def _as_real_time() -> None:
    """Answer before anything else runs where the grader may (root): an opener waits meanwhile."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (OSError, AttributeError):
        pass  # not allowed here: the answers come when the thread gets the CPU, times are the kernel's all the same


def _command_line(pid: int) -> Tuple[str, ...]:
    fd = os.open("/proc/%d/cmdline" % pid, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, ARGV_LIMIT)
    finally:
        os.close(fd)
    return tuple(part.decode("utf-8", "replace") for part in data.split(b"\0")[:-1])


def _call_started(pid: int) -> float:
    """When the call `pid` belongs to started: its own start, or its parent's while the parent runs
    the same command line (see Opened.started)."""
    fields = procfs.stat_fields("/proc/%d/stat" % pid)
    started, argv = int(fields[19]), _command_line(pid)
    parent = int(fields[1])
    for _ in range(SAME_ARGV_DEPTH):
        try:
            if parent <= 1 or _command_line(parent) != argv:
                break
            fields = procfs.stat_fields("/proc/%d/stat" % parent)
        except (OSError, IndexError, ValueError):
            break
        started, parent = int(fields[19]), int(fields[1])
    return started / timing.CLOCK_TICKS


def _program(pid: int) -> str:
    try:
        return os.path.basename(os.readlink("/proc/%d/exe" % pid))
    except OSError:
        return ""


def _process_name(pid: int) -> str:
    try:
        status = procfs.read("/proc/%d/stat" % pid)
    except OSError:
        return ""
    return status[status.find(b"(") + 1 : status.rfind(b")")].decode("utf-8", "replace")


def flock_held(file_id: Optional[Tuple[int, int]]) -> bool:
    """Is an flock held on the file with this (device, inode) right now (/proc/locks)? Shared or
    exclusive: a shared one lets a second runner of the same kind through, which S5.2 judges."""
    if file_id is None:
        return False
    device, inode = file_id
    wanted = ("%02x:%02x:%d" % (os.major(device), os.minor(device), inode)).encode()
    try:
        table = procfs.read("/proc/locks")
    except OSError as error:
        if error.errno == errno.ENOENT:
            return False
        raise
    for line in table.splitlines():
        words = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF"; a waiter's line has "->" after the number.
        if len(words) >= 6 and words[1] == b"FLOCK" and words[3] in (b"WRITE", b"READ") and words[5] == wanted:
            return True
    return False

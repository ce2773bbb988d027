"""What a runner may not ask the kernel for: namespaces and mounts of its own.

A runner that makes a user namespace of its own (`unshare -Urm`) is root there, may mount a
tmpfs of any size and fill it: memory in a tmpfs is in no process's RSS, so the machine's OOM
killer would not pick the runner, and the suite's bounds on the lab and the private temporary
folders would not hold. Nothing in the lab needs a namespace or a mount, so the runner and all it
starts are refused both, by a seccomp filter installed just before the runner's exec (inherited
by every child, and never removable):

- unshare, and clone with CLONE_NEWUSER: EPERM;
- clone3, whose flags sit in a structure a filter cannot read: ENOSYS, on which the C library
  falls back to clone (as container runtimes' default filters do);
- mount and the new mount calls (fsopen ... mount_setattr), umount2, pivot_root, setns: EPERM;
- on x86_64, the x32 calls, which have numbers of their own: EPERM.

The filter is a classic BPF program (seccomp_data: nr at 0, arch at 4, args[0] at 16, its low
word first on these little-endian machines). An architecture it does not know gets no filter.
"""

import ctypes
import errno
import platform
import struct
from typing import Dict, List, Optional, Tuple

from conformance.harness.libc import LIBC

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_CLONE_NEWUSER = 0x10000000
_X32_SYSCALL_BIT = 0x40000000

# BPF opcodes: load a word at an absolute offset, jump if equal / if any bit set, return.
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06

# (AUDIT_ARCH, calls refused with EPERM, unshare and clone (judged by their flags), clone3)
_ARCHITECTURES: Dict[str, Tuple[int, Tuple[int, ...], Tuple[int, int], int]] = {
    # mount umount2 pivot_root setns open_tree move_mount fsopen fsconfig fsmount mount_setattr
    "x86_64": (0xC000003E, (165, 166, 155, 308, 428, 429, 430, 431, 432, 442), (272, 56), 435),
    "aarch64": (0xC00000B7, (40, 39, 41, 268, 428, 429, 430, 431, 432, 442), (97, 220), 435),
}


def _program(arch: int, refused: Tuple[int, ...], by_flags: Tuple[int, int], clone3: int, x32: bool) -> bytes:
    allow, eperm = _SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO | errno.EPERM
    body: List[Tuple[int, int, int, int]] = []  # (code, jump if true, jump if false, k)
    # Each refused call: "if nr == call, jump to the EPERM return", counted from the next line.
    checks = [(number, "eperm") for number in refused] + [(clone3, "enosys")] + [(n, "flags") for n in by_flags]
    tail = {"flags": 0, "eperm": 4, "enosys": 5}  # offsets of the targets after the checks and ALLOW
    body.append((_LD_W_ABS, 0, 0, 4))
    body.append((_JEQ_K, 1, 0, arch))
    body.append((_RET_K, 0, 0, allow))  # another architecture's calls: not this table's numbers
    body.append((_LD_W_ABS, 0, 0, 0))
    if x32:
        body.append((_JGE_K, len(checks) + 1 + tail["eperm"], 0, _X32_SYSCALL_BIT))
    for index, (number, target) in enumerate(checks):
        remaining = len(checks) - index - 1
        body.append((_JEQ_K, remaining + 1 + tail[target], 0, number))
    body.append((_RET_K, 0, 0, allow))
    # the flags of unshare and clone: CLONE_NEWUSER refused
    body.append((_LD_W_ABS, 0, 0, 16))
    body.append((_JSET_K, 1, 0, _CLONE_NEWUSER))
    body.append((_RET_K, 0, 0, allow))
    body.append((_RET_K, 0, 0, eperm))
    body.append((_RET_K, 0, 0, eperm))  # the EPERM target named by the checks above
    body.append((_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.ENOSYS))
    return b"".join(struct.pack("=HBBI", code, true, false, k) for code, true, false, k in body)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _prepared() -> Optional[Tuple[_SockFprog, ctypes.Array]]:
    machine = platform.machine()
    if machine not in _ARCHITECTURES:
        return None
    code = _program(*_ARCHITECTURES[machine], x32=machine == "x86_64")
    buffer = ctypes.create_string_buffer(code, len(code))
    return _SockFprog(len(code) // 8, ctypes.addressof(buffer)), buffer


# Made once, in the grader: a child between fork and exec only hands it to the kernel.
_FILTER = _prepared()


def refuse_namespaces_and_mounts() -> bool:
    """In a child between fork and exec, last before the exec: install the filter for this process
    and all it starts. False where the kernel or the architecture has none (nothing is refused)."""
    if _FILTER is None:
        return False
    # No new privileges: no set-user-ID program could lift the filter, and an unprivileged
    # process may then install one.
    # prctl's arguments are unsigned longs, and both options refuse nonzero unused ones: passed
    # as such, never as C ints whose upper halves the call would read as they happen to be.
    unused = ctypes.c_ulong(0)
    if LIBC.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), unused, unused, unused) != 0:
        return False
    program = ctypes.byref(_FILTER[0])
    return LIBC.prctl(_PR_SET_SECCOMP, ctypes.c_ulong(_SECCOMP_MODE_FILTER), program, unused, unused) == 0

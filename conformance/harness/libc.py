"""The C library, for the calls Python's os module lacks (prctl, unshare, mount, setfsuid, fork).

Found among the interpreter's own symbols (dlopen of NULL), where it is loaded already:
ctypes.util.find_library would run `ldconfig -p` in a subprocess to find its file first.
"""

import ctypes

LIBC = ctypes.CDLL(None, use_errno=True)

"""The broker's URL and the class key, for `class --broker` and `worker`: never in a command line.

Every process on a machine may read every command line (/proc/PID/cmdline), the runners under
test included, so a URL with a password, and the key, come from the environment (which only the
process's own user reads) or from a file only its owner may read. Both are removed from this
process's environment once read: the gradings it starts do not inherit them.

A URL without a password may still be given on the command line: nothing in it is secret.
"""

import os
import stat
from typing import Optional
from urllib.parse import parse_qs, urlsplit

from conformance.usage import UsageError

URL_VAR, KEY_VAR = "PYOPS_BROKER_URL", "PYOPS_BROKER_KEY"
FROM_ENV = "$" + URL_VAR  # --broker given alone
SCHEMES = ("redis", "rediss")
KEY_MIN_CHARS = 32
# A URL or a key is one line: a larger file is not one of them.
SECRET_MAX_BYTES = 4096


def broker_url(given: Optional[str], file: Optional[str]) -> str:
    """The broker's URL: from --broker-file FILE, --broker URL, or $PYOPS_BROKER_URL (--broker alone)."""
    from_env = os.environ.pop(URL_VAR, "").strip()
    if file and given not in (None, FROM_ENV):
        raise UsageError("--broker URL and --broker-file: give one of them")
    if file:
        url = read_secret(file, "--broker-file")
    elif given not in (None, FROM_ENV):
        url = given
        if _has_password(url):
            raise UsageError(
                "--broker URL holds a password, which any process here can read in this command's line: put the URL "
                "in $%s (and give --broker alone) or in a file only you can read (--broker-file FILE)" % URL_VAR
            )
    else:
        url = from_env
        if not url:
            raise UsageError(
                "$%s is not set: give the broker's URL there, in --broker-file FILE, or (without a password) "
                "as --broker URL" % URL_VAR
            )
    if urlsplit(url).scheme not in SCHEMES:
        raise UsageError("the broker must be a Redis URL (redis://HOST:PORT/N or rediss://...)")
    return url


def broker_key(file: Optional[str]) -> bytes:
    """The class key that signs tasks and results: from --key-file FILE or $PYOPS_BROKER_KEY."""
    from_env = os.environ.pop(KEY_VAR, "").strip()
    key = read_secret(file, "--key-file") if file else from_env
    if not key:
        raise UsageError(
            "no key to sign tasks and results with: set $%s or give --key-file FILE, the same on the sender and "
            "every worker (openssl rand -hex 32 makes one)" % KEY_VAR
        )
    if len(key) < KEY_MIN_CHARS:
        raise UsageError(
            "the key is %d characters long: %d or more (openssl rand -hex 32 makes one)" % (len(key), KEY_MIN_CHARS)
        )
    return key.encode("utf-8")


def read_secret(path: str, option: str) -> str:
    """The one line of a file that must be the caller's own and unreadable by anyone else."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # NONBLOCK: a FIFO is refused, not waited on
    except OSError as error:
        raise UsageError("%s %s: cannot read it: %s" % (option, path, error.strerror)) from None
    try:
        # Checked on the file opened, not on the path: it cannot be swapped in between.
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError("%s %s: not a regular file" % (option, path))
        if info.st_uid != os.geteuid():
            raise UsageError(
                "%s %s belongs to uid %d, not to you (uid %d): it must be yours alone"
                % (option, path, info.st_uid, os.geteuid())
            )
        if info.st_mode & 0o077:
            raise UsageError(
                "%s %s may be read or changed by others (mode %04o): chmod 600 %s"
                % (option, path, stat.S_IMODE(info.st_mode), path)
            )
        text = os.read(descriptor, SECRET_MAX_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(text) > SECRET_MAX_BYTES:
        raise UsageError("%s %s: more than %d bytes, not one URL or key" % (option, path, SECRET_MAX_BYTES))
    try:
        return text.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise UsageError("%s %s: not UTF-8 text" % (option, path)) from None


def shown(url: str) -> str:
    """The URL without its user, password and query: what may be printed."""
    parts = urlsplit(url)
    return "%s://%s%s" % (parts.scheme, parts.netloc.rpartition("@")[2], parts.path)


def _has_password(url: str) -> bool:
    # redis-py also takes the password as a query argument: redis://HOST/0?password=...
    parts = urlsplit(url)
    return bool(parts.password) or "password" in parse_qs(parts.query)

# A hostile prefix for a runner (the image tests append the reference to it): the runner works,
# and every time it ends it leaves its lab's files as traps for a grader that reads them as root:
# runs.jsonl and the markers links to a root-only secret (quoted in the reports if followed),
# applied.log a FIFO (an open() that blocks for ever), state/lock a link to /dev/zero (a read
# that never ends). The grading must still end, exit 1, and quote no secret.
import atexit
import os

SECRET = "/root/secret"
LAB = "/root/pyops/sub"


def _leave_traps():
    traps = {
        "runs.jsonl": lambda path: os.symlink(SECRET, path),
        "state/lock": lambda path: os.symlink("/dev/zero", path),
        "state/deploy.done": lambda path: os.symlink(SECRET, path),
        "applied.log": os.mkfifo,
    }
    for name, make in traps.items():
        path = os.path.join(LAB, name)
        try:
            if os.path.lexists(path):
                os.unlink(path)
            make(path)
        except OSError:
            pass


atexit.register(_leave_traps)

# A hostile prefix for a runner (the test appends the reference to it): it behaves correctly only
# where it believes it is being graded, and otherwise runs every command twice (an extra call of
# apply.sh, an extra run of the command with its output thrown away). It tells a grading apart by
# what any process can read cheaply: a uid far above the accounts' with no account, a name of the
# suite in its temporary folder, environment, working folder, arguments, mounts or cgroup. If it
# can, it passes everything; a grading that looks like a learner's machine makes it lose the
# clauses its double calls break. It writes what it noticed to $SAID_TO when that file exists.
import os
import pwd
import signal
import subprocess
import sys
import tempfile

WORDS = ("pyops-lab", "conformance")
SAID_TO = "SAID_TO"  # replaced by the test with a file every runner may append to


def _noticed():
    noticed = []
    uid = os.getuid()
    try:
        pwd.getpwuid(uid)
    except KeyError:
        if uid >= 1_000_000:
            noticed.append("its uid (1000000 or more) has no account")
    places = {
        "TMPDIR": os.environ.get("TMPDIR", ""),
        "gettempdir": tempfile.gettempdir(),
        "environment": "\0".join("%s=%s" % item for item in os.environ.items()),
        "cwd": os.getcwd(),
        "argv": "\0".join(sys.argv),
    }
    for name in ("/proc/self/mountinfo", "/proc/self/cgroup"):
        try:
            with open(name) as handle:
                places[name] = handle.read()
        except OSError:
            pass
    for place, text in places.items():
        noticed += ["%s says %s" % (place, word) for word in WORDS if word in text.lower()]
    return noticed


def _twice():
    """The wrong behaviour: the command (or apply.sh) runs once more before the real run."""
    argv = sys.argv[1:]
    if argv[:1] == ["apply"] and "--dry-run" not in argv and len(argv) >= 2:
        subprocess.run(["/opt/fixtures/pyops/bin/apply.sh", argv[-1]], stdout=subprocess.DEVNULL)
    elif argv[:1] == ["run"] and "--" in argv:
        command = argv[argv.index("--") + 1 :]
        try:
            extra = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
            )
        except OSError:
            return
        try:
            extra.wait(2)
        except subprocess.TimeoutExpired:
            os.killpg(extra.pid, signal.SIGKILL)
            extra.wait()


_SEEN = _noticed()
if os.path.isfile(SAID_TO):
    with open(SAID_TO, "a") as said:
        said.write(repr(_SEEN) + "\n")
if not _SEEN:
    _twice()

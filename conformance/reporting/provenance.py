"""What produced a grade, recorded beside it: the suite, the configuration, the runner, the
interpreter, how it was run and on what machine, and when.

`pyops-conformance replay` grades a runner again from this record and says whether the verdicts
are the same; a class keeps it with every student's results. Nothing in it is secret, and no path
of the grader's is in it (a learner reads the report): the runner and the configuration are named
by their contents, the machine by its kernel, its CPUs and the image it was built as.
"""

import datetime
import functools
import hashlib
import os
import subprocess
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence

from conformance.lab import timing

_PACKAGE = Path(__file__).resolve().parents[1]  # the whole suite, not this layer alone
# Written into the grading image when it is built (Dockerfile): which build of it graded.
IMAGE_BUILD_FILE = Path("/opt/pyops-lab/image-build")


_NOT_THE_SUITE = {"__pycache__", "classroom", "fixtures", "selftest"}


@functools.lru_cache(maxsize=None)
def suite_fingerprint() -> str:
    """Which suite grades: a hash of its files and the fixtures it runs, so that a changed check
    is a changed suite. Left out: the class tools (classroom/), for a better class report is no
    reason to grade a class again, and the suite's measure of itself (selftest/, with its reviewed
    equivalents), for reviewing a mutant is no reason to grade the mutants again. The same wherever
    the suite lives: installed, its fixtures are a folder of the package, in a checkout they are
    beside it (both are hashed once, from where the suite runs them)."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*")):
        inside = path.relative_to(_PACKAGE)
        if path.suffix in (".py", ".toml", ".sh") and not _NOT_THE_SUITE & set(inside.parts):
            digest.update(str(inside).encode() + b"\0" + path.read_bytes() + b"\0")
    from conformance.harness.sandbox import FIXTURES  # not inside the package in an editable install

    for fixture in sorted(FIXTURES.glob("*.sh")):
        digest.update(fixture.name.encode() + b"\0" + fixture.read_bytes() + b"\0")
    return digest.hexdigest()


def suite_version() -> str:
    try:
        from importlib.metadata import version
    except ImportError:  # Python 3.7's stdlib lacks it; the suite runs on 3.8 and later
        return "unknown"
    try:
        return version("pyops-lab")
    except Exception:  # not installed as a distribution (a bare checkout on sys.path)
        return "unknown"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def record(
    info: Mapping,
    runner_bytes: bytes,
    config_text: str,
    selection: Mapping[str, object],
    started: str,
    played_again: int,
    cpus: float,
) -> Dict:
    """The provenance section of a grading's report (see the module's docstring)."""
    return {
        "suite": {"version": suite_version(), "sha256": suite_fingerprint()},
        "configuration": {"sha256": sha256(config_text.encode("utf-8")), "text": config_text},
        "selection": dict(selection),
        "runner": {"sha256": sha256(runner_bytes), "size": len(runner_bytes)},
        "interpreter": {"path": info["python"], "version": info.get("python_version", "")},
        "isolation": info["isolation"],
        "user_namespace": bool(info.get("user_namespace")),
        "runner_user": info.get("runner_user", "grader"),
        # The draws of values a runner must not predict (lab/draws.py): a replay uses the same.
        "seed": info.get("seed"),
        # What when and how often were judged from: the kernel (harness/witness.py) or lab files.
        "evidence": info.get("evidence"),
        "time_scale": timing.SCALE,
        "played_again": played_again,
        "machine": {"kernel": os.uname().release, "cpus": cpus, "image": image_build()},
        "started": started,
        "ended": now(),
    }


def image_build() -> Optional[str]:
    """The grading image's build, when graded in it (None elsewhere)."""
    try:
        return IMAGE_BUILD_FILE.read_text(encoding="utf-8").strip()[:200] or None
    except OSError:
        return None


def differences(recorded: Mapping, current: Mapping) -> Sequence[str]:
    """What of the suite and the configuration differs between two provenance records."""
    changed = []
    for part in ("suite", "configuration"):
        if recorded.get(part, {}).get("sha256") != current.get(part, {}).get("sha256"):
            changed.append(part)
    return changed


def python_version(python: str) -> str:
    """The version of the interpreter that runs the runner ("" if it cannot say)."""
    try:
        said = subprocess.run(
            [python, "-I", "-S", "-c", "import platform; print(platform.python_version())"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return said.stdout.decode("ascii", "replace").strip()[:40]

"""pyops-conformance export: the suite packaged for a grading platform.

    pyops-conformance export gradescope --out autograder.zip [--config FILE]

makes Gradescope's autograder zip (its "Autograder Specifications"): at the zip's root
`setup.sh` (run once when Gradescope builds the image), `run_autograder` (run per submission),
the lab configuration as `lab.toml` and a wheel of this project, built from its source. The two
scripts are package data (conformance/gradescope/). `finish` is run_autograder's last step: it
makes the results.json Gradescope reads, whatever happened to the grading.

Exit status: 0 the zip was written, 2 it was not (the reason in one line on stderr).
"""

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import IO, Any, Dict, List, Optional, Sequence

from conformance.lab import config
from conformance.reporting import platforms, report

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the same parser, before it joined the standard library
    import tomli as tomllib

PLATFORMS = ("gradescope",)
PROJECT = "pyops-lab"
TEMPLATES = Path(__file__).resolve().parent / "gradescope"
# The zip's members: name, mode. The wheel joins them under its own name.
SCRIPTS = (("setup.sh", 0o755), ("run_autograder", 0o755))
# What a copy of the source tree for the wheel's build leaves out: this machine's state.
_NOT_SOURCE = (
    ".git",
    ".venv",
    ".tox",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.pyc",
    "results",
    ".build-ca.pem",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
)

# The tests run_autograder reports when it has no grading to report.
UPLOAD_TEST = "upload runner.py"
GRADER_ERROR_TEST = "grader error"
_MAX_NAMES = 20


class ExportError(Exception):
    """An export that cannot be made; the message says why, in one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> "None":  # type: ignore[override]
        raise ExportError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pyops-conformance export",
        description="Package the suite as a grading platform's autograder.",
    )
    parser.add_argument("platform", choices=PLATFORMS, help="the platform (gradescope)")
    parser.add_argument("--out", required=True, metavar="FILE", help="the zip to write (replaced if it exists)")
    parser.add_argument(
        "--config", metavar="FILE", help="the lab configuration to grade with (default: the shipped lab.toml)"
    )
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        options = build_parser().parse_args(argv)
        written = export_gradescope(Path(options.out), Path(options.config) if options.config else None)
    except ExportError as error:
        print("pyops-conformance export: error: %s" % error, file=sys.stderr)
        return 2
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else 0
    print(
        "pyops-conformance export: wrote %s (%s): upload it as the Gradescope assignment's autograder"
        % (options.out, ", ".join(written))
    )
    return 0


def export_gradescope(out: Path, config_file: Optional[Path]) -> List[str]:
    """Write Gradescope's autograder zip to `out` (atomically); the names of its members."""
    config_file = config_file or config.DEFAULT_FILE
    try:
        config.load(config_file)
        lab = config_file.read_bytes()
    except config.ConfigError as error:
        raise ExportError(str(error)) from None
    except OSError as error:
        raise ExportError("%s: cannot read it: %s" % (config_file, error.strerror)) from None
    scripts = [(name, (TEMPLATES / name).read_bytes(), mode) for name, mode in SCRIPTS]
    source = project_source()
    with _atomic_output(out) as handle, tempfile.TemporaryDirectory(prefix="pyops-export-") as scratch:
        wheel = build_wheel(source, Path(scratch))
        members = scripts + [("lab.toml", lab, 0o644), (wheel.name, wheel.read_bytes(), 0o644)]
        with zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data, mode in members:
                info = zipfile.ZipInfo(name, date_time=time.localtime()[:6])
                info.create_system = 3  # Unix, so that unzip restores the modes below
                info.external_attr = (stat.S_IFREG | mode) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, data)
    return [name for name, _, _ in members]


def project_source() -> Path:
    """The project's source tree: where the installed `conformance` package comes from."""
    root = Path(__file__).resolve().parent.parent
    try:
        with open(str(root / "pyproject.toml"), "rb") as handle:
            name = tomllib.load(handle).get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        name = None
    if name != PROJECT:
        raise ExportError(
            "this %s is installed without its source (%s has no pyproject.toml of it), so no wheel can be built: "
            "export from a checkout of the project (pip install -e .)" % (PROJECT, root)
        )
    return root


def build_wheel(source: Path, scratch: Path) -> Path:
    """`pip wheel --no-deps` of a clean copy of the source tree (no build/ or egg-info of this machine)."""
    tree = scratch / "source"
    wheels = scratch / "wheels"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check"]
    if _can_build_here():
        command.append("--no-build-isolation")  # no download of the build backend
    try:
        shutil.copytree(str(source), str(tree), ignore=_ignore_state, symlinks=True)
        done = subprocess.run(
            command + ["--wheel-dir", str(wheels), str(tree)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except OSError as error:  # shutil.Error included: a file of the tree it could not copy
        raise ExportError("cannot build the project's wheel from %s: %s" % (source, str(error)[:300])) from None
    found = sorted(wheels.glob("pyops_lab-*.whl")) if wheels.is_dir() else []
    if done.returncode != 0 or len(found) != 1:
        lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
        raise ExportError(
            "pip wheel could not build the project's wheel (exit status %d): %s"
            % (done.returncode, lines[-1] if lines else "no output")
        )
    return found[0]


def _ignore_state(folder: str, names: List[str]) -> List[str]:
    ignored = set(shutil.ignore_patterns(*_NOT_SOURCE)(folder, names))
    # Any other virtualenv in the tree (venv/, env/ ...): an interpreter of this machine.
    ignored.update(name for name in names if os.path.isfile(os.path.join(folder, name, "pyvenv.cfg")))
    return sorted(ignored)


def _can_build_here() -> bool:
    """Can this interpreter's setuptools build the wheel by itself (>= 61 and a bdist_wheel)?"""
    try:
        from importlib.metadata import version

        setuptools = tuple(int(part) for part in version("setuptools").split(".")[:2])
    except Exception:
        return False
    if setuptools >= (70, 1):
        return True
    try:
        version("wheel")
    except Exception:
        return False
    return setuptools >= (61, 0)


class _atomic_output:
    """A temporary file beside `path`, put in its place only when the block ends without error."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> IO[bytes]:
        path = self.path
        if path.is_dir():
            raise ExportError("--out %s is a folder: give the zip's file name" % path)
        if not path.resolve().parent.is_dir():
            raise ExportError("--out %s: no folder %s" % (path, path.resolve().parent))
        try:
            self.handle = tempfile.NamedTemporaryFile(
                dir=str(path.resolve().parent), prefix=".%s." % path.name, suffix=".tmp", delete=False
            )
        except OSError as error:
            raise ExportError("--out %s: cannot write there: %s" % (path, error.strerror)) from None
        return self.handle

    def __exit__(self, kind, value, traceback) -> None:
        self.handle.close()
        if kind is not None:
            os.unlink(self.handle.name)
            return
        try:
            os.chmod(self.handle.name, 0o666 & ~report.umask())
            os.replace(self.handle.name, str(self.path))
        except OSError as error:
            os.unlink(self.handle.name)
            raise ExportError("--out %s: cannot write it: %s" % (self.path, error.strerror)) from None


# ---- run_autograder's last step ---------------------------------------------------------------


def finish(argv: Sequence[str]) -> int:
    """Make --results the results.json Gradescope reads: the suite's report with execution_time,
    or, without a usable one, one failed test saying why (--submission: no runner.py was in it;
    else a grader error described by --error and the last line of --stderr)."""
    parser = argparse.ArgumentParser(prog="run_autograder finish")
    parser.add_argument("--results", required=True, type=Path)
    parser.add_argument("--started", required=True, type=int, help="run_autograder's start (epoch seconds)")
    parser.add_argument("--config", type=Path, help="the lab configuration (the failures' max_score)")
    parser.add_argument("--submission", type=Path, help="the submission folder, which holds no usable runner.py")
    parser.add_argument("--error", default="no report was written", help="what went wrong, without a report")
    parser.add_argument("--stderr", type=Path, help="the grader's stderr: its last line is quoted")
    options = parser.parse_args(argv)
    try:
        lab = config.load(options.config) if options.config else config.LabConfig()
    except Exception:  # the points of a failure are not worth failing for
        lab = config.LabConfig()
    if options.submission is not None:
        data = platforms.gradescope_failure(UPLOAD_TEST, no_runner_reason(options.submission), lab)
    else:
        data = _usable_report(options.results) or platforms.gradescope_failure(
            GRADER_ERROR_TEST, grader_error_reason(options.error, options.stderr), lab
        )
    data["execution_time"] = max(0, int(time.time()) - options.started)
    report.write_report(options.results, _scrub(data))
    return 0


def _scrub(value: Any) -> Any:
    """`value` with every string as UTF-8 can carry it (file names and outputs may hold any bytes)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_scrub(item) for item in value]
    if isinstance(value, dict):
        return {_scrub(key): _scrub(item) for key, item in value.items()}
    return value


def _usable_report(path: Path) -> Optional[Dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("tests"), list) and isinstance(data.get("score"), (int, float)):
        return data
    return None


def no_runner_reason(submission: Path) -> str:
    """What the student uploaded instead of runner.py, and what to upload."""
    names = _received(submission)
    shown = ", ".join(names[:_MAX_NAMES])
    if len(names) > _MAX_NAMES:
        shown += " and %d more" % (len(names) - _MAX_NAMES)
    received = "files received: %s" % (shown or "none")
    top = submission / "runner.py"
    if os.path.lexists(str(top)):
        kind = "a folder" if top.is_dir() and not top.is_symlink() else "a link" if top.is_symlink() else "not a file"
        return "runner.py in your submission is %s (%s): upload your runner.py file itself" % (kind, received)
    nested = [name for name in names if name.endswith("/runner.py")]
    if nested:
        return (
            "no runner.py at the top of your submission, only %s (%s): upload runner.py itself, "
            "not a folder or zip holding it" % (nested[0], received)
        )
    return "no runner.py was submitted (%s): upload your runner.py, under exactly that name" % received


def _received(submission: Path) -> List[str]:
    """The submission's files, by their paths in it (the first thousand)."""
    names: List[str] = []
    for folder, folders, files in os.walk(str(submission)):
        folders.sort()
        for name in sorted(files):
            names.append(os.path.relpath(os.path.join(folder, name), str(submission)))
        if len(names) >= 1000:
            break
    return names


def grader_error_reason(error: str, stderr: Optional[Path]) -> str:
    last = ""
    if stderr is not None:
        try:
            lines = [line.strip() for line in stderr.read_text(encoding="utf-8", errors="replace").splitlines()]
            last = [line for line in lines if line][-1][:300]
        except (OSError, IndexError):
            last = ""
    return "grader error: the grader could not grade this submission (%s%s); please tell the course staff" % (
        error,
        ": " + last if last else "",
    )

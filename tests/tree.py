"""A folder's exact state (names, bytes, modes, times, links), to prove nothing was changed."""

import os
from pathlib import Path
from typing import Dict, Tuple


def tree_state(root: Path) -> Dict[str, Tuple]:
    state = {}
    for folder, dirs, files in os.walk(str(root)):
        for name in dirs + files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            if os.path.islink(path):
                content: object = ("link", os.readlink(path))
            elif os.path.isdir(path):
                content = "dir"
            else:
                with open(path, "rb") as handle:
                    content = handle.read()
            state[os.path.relpath(path, str(root))] = (content, info.st_mode, info.st_mtime_ns)
    top = os.lstat(str(root))
    state["."] = ("dir", top.st_mode, top.st_mtime_ns)
    return state


def learner_folder(root: Path) -> Path:
    """A learner's /root/pyops/sub as they left it, with the awkward cases a restore must keep."""
    (root / "state").mkdir(parents=True)
    (root / "runner.py").write_text("print('my runner')\n")
    (root / "runs.jsonl").write_bytes(b'{"ts": "2026-01-01T00:00:00+00:00", "attempt": 1}\n\xff')
    (root / "applied.log").write_text("first\nsecond\n")
    (root / "state" / "first.done").write_text("")
    (root / "state" / "lock").write_text("")
    (root / "notes").mkdir()
    (root / "notes" / "secret.txt").write_text("keep me")
    os.chmod(str(root / "notes" / "secret.txt"), 0o600)
    os.symlink("runner.py", str(root / "link-to-runner"))
    for path in [root / "notes" / "secret.txt", root / "notes", root / "state", root]:
        os.utime(str(path), ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    return root

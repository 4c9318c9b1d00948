"""Where a project starts and where ipykeep keeps its state inside it.

The project root is the nearest ancestor holding ``ipykeep.toml``, ``pyproject.toml`` or
``.git``; without any, the starting directory itself. All state lives in ``<root>/.ipykeep/``:
``run/`` (0700) holds the daemon descriptor, its locks and log; ``kernels/<kid>/`` holds each
kernel's archival record and artifacts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from ipykeep.platform.files import PRIVATE_DIR, set_mode

ROOT_MARKERS = ("ipykeep.toml", "pyproject.toml", ".git")


def find_project_root(start: Path | str | None = None) -> Path:
    here = Path(start or os.getcwd()).resolve()
    if here.is_file():
        here = here.parent
    for candidate in (here, *here.parents):
        if any((candidate / marker).exists() for marker in ROOT_MARKERS):
            return candidate
    return here


def private_dir(path: Path) -> Path:
    """Create ``path`` and make it 0700, like every parent this creates for it (owner-only ACL
    on Windows)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(parents=True, exist_ok=True)
    for created in {path, *missing}:
        set_mode(created, PRIVATE_DIR)
    return path


def is_stale_temp(name: str) -> bool:
    """A temporary file of a write that never finished: an atomic write's (``atomic``) or a
    checkpoint blob's (``.<pid>.<random>.tmp``, written by the kernel)."""
    return name.endswith(".ipykeep-tmp") or (name.startswith(".") and name.endswith(".tmp"))


def tidy_state(state: Path) -> None:
    """Run by the daemon at start, holding the project's lock (so no writer of this project is
    left): remove the temporary files of writes a SIGKILL cut short, and make every directory
    under ``state`` 0700 and every file 0600 (symlinks untouched), since the state holds tokens,
    keys and everything a kernel printed, for its owner only."""
    for top, dirs, files in os.walk(state):
        for name in (*dirs, *files):
            entry = os.path.join(top, name)
            try:
                if os.path.islink(entry):
                    continue
                if name in dirs:
                    os.chmod(entry, 0o700)
                elif is_stale_temp(name):
                    os.unlink(entry)
                else:
                    os.chmod(entry, 0o600)
            except OSError:
                continue


class ProjectPaths(NamedTuple):
    # Immutable like a frozen dataclass, without loading dataclasses (and inspect) on the
    # thin CLI's path.
    root: Path

    @property
    def state(self) -> Path:
        return self.root / ".ipykeep"

    @property
    def run(self) -> Path:
        return self.state / "run"

    @property
    def descriptor(self) -> Path:
        return self.run / "daemon.json"

    @property
    def start_lock(self) -> Path:
        return self.run / "start.lock"

    @property
    def daemon_lock(self) -> Path:
        """Held by the running daemon for its whole life (``project.daemon_lock``)."""
        return self.run / "daemon.lock"

    @property
    def log(self) -> Path:
        return self.run / "daemon.log"

    @property
    def runtime(self) -> Path:
        """Private directory for kernel connection files and ipc sockets."""
        return self.run / "kernels"

    @property
    def kernels(self) -> Path:
        return self.state / "kernels"

    def kernel_dir(self, kernel_id: str) -> Path:
        return self.kernels / kernel_id

    def ensure_run(self) -> Path:
        private_dir(self.state)
        return private_dir(self.run)


def project_paths(start: Path | str | None = None) -> ProjectPaths:
    return ProjectPaths(find_project_root(start))

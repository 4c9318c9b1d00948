"""Planned file changes: what a file holds now, what it will hold, and writing it atomically."""

from __future__ import annotations

import difflib
import enum
import os
from dataclasses import dataclass
from pathlib import Path

from ipykeep.api.errors import ConfigError
from ipykeep.project.atomic import atomic_write_text


class ChangeStatus(str, enum.Enum):
    create = "create"
    update = "update"
    unchanged = "unchanged"
    conflict = "conflict"  # an existing ipykeep entry differs; left alone (see --replace)


@dataclass(frozen=True)
class FileChange:
    path: Path
    label: str  # what the file is for, e.g. "Claude Code MCP servers"
    before: str | None  # None: the file does not exist
    after: str  # equals ``before`` when unchanged or in conflict
    status: ChangeStatus
    note: str = ""

    @property
    def writes(self) -> bool:
        return self.status in (ChangeStatus.create, ChangeStatus.update)


def read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist; a clear error when it is unreadable."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError as exc:
        raise ConfigError(
            f"{path} is a directory, expected a file", hint=f"move {path} aside"
        ) from exc
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read ({exc.strerror})", hint=f"check the permissions of {path}"
        ) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}: line {line}: not UTF-8 text",
            hint=f"fix the encoding of {path} (nothing was written)",
            details={"file": str(path), "line": line},
        ) from exc


def change(path: Path, label: str, before: str | None, after: str, note: str = "") -> FileChange:
    if before is None:
        status = ChangeStatus.create
    elif before == after:
        status = ChangeStatus.unchanged
    else:
        status = ChangeStatus.update
    return FileChange(path, label, before, after, status, note)


def conflict(path: Path, label: str, before: str, note: str) -> FileChange:
    return FileChange(path, label, before, before, ChangeStatus.conflict, note)


def unified_diff(item: FileChange, display: str) -> str:
    """A unified diff of ``item`` (empty when it writes nothing)."""
    if not item.writes:
        return ""
    before = (item.before or "").splitlines(keepends=True)
    after = item.after.splitlines(keepends=True)
    lines = list(
        difflib.unified_diff(
            before, after, "/dev/null" if item.before is None else f"a/{display}", f"b/{display}"
        )
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically, keeping its mode (new files: 0666 & ~umask).

    A symlinked file is written through the link, so dotfiles managed as links stay links.
    """
    Path(os.path.realpath(path)).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text, follow_symlinks=True, fsync=True)

"""Replacing a file without ever exposing a half-written one: the one helper every writer uses.

The new content goes to a temporary file created beside the target (same directory, so the
rename stays on one file system), which is then renamed over the target. The temporary file is
created 0600 by ``mkstemp`` (readable by nobody else even for a moment) and gets its final
mode before the rename. Its name, ``.<name>.<pid>.<random>.ipykeep-tmp``, is hidden, unique per
writer (two processes never share a temporary file) and ignored by ipykeep's file watchers.

Callers choose what their file needs:

- ``mode``: an explicit mode (``0o600`` for secrets), or ``None`` to keep the target's current
  mode (a new file gets ``0o666 & ~umask``, as ``open()`` would give it);
- ``follow_symlinks``: write through a symlinked target (configuration files managed as links
  stay links) instead of replacing the link itself;
- ``fsync``: flush the data to disk before the rename, for files whose loss after a crash
  matters (notebooks, user configuration); run-time state skips it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from ipykeep.platform.files import current_umask, set_mode

#: Suffix of every temporary file ipykeep writes (watchers and stale-file cleanup match it).
TEMP_SUFFIX = ".ipykeep-tmp"


def write_temp_beside(
    path: Path | str, data: bytes, *, mode: int | None = None, fsync: bool = False
) -> str:
    """A temporary file in ``path``'s directory holding ``data``, with its final mode; returns its
    path.

    For callers that must do more than rename it (``project/notebook.py`` checks the target under a
    lock first); they own the file from here and must rename or unlink it.
    """
    path = os.fspath(path)
    if mode is None:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~current_umask()
    # the writer's pid in the name: a temporary file of a writer that is gone (killed in the
    # middle of a write) is known for one at once (``temp_writer_pid``)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)}.{os.getpid()}.",
        suffix=TEMP_SUFFIX,
        dir=os.path.dirname(path) or ".",
    )
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        set_mode(tmp, mode)  # on Windows a private mode is an owner-only ACL
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def temp_writer_pid(target_name: str, temp_name: str) -> int | None:
    """The pid of the process that made ``temp_name``, a temporary file of ``target_name``
    (None for a name without one)."""
    prefix = f".{target_name}."
    if not (temp_name.startswith(prefix) and temp_name.endswith(TEMP_SUFFIX)):
        return None
    pid = temp_name[len(prefix) :].split(".", 1)[0]
    return int(pid) if pid.isdigit() else None


def atomic_write_bytes(
    path: Path | str,
    data: bytes,
    *,
    mode: int | None = None,
    follow_symlinks: bool = False,
    fsync: bool = False,
) -> None:
    """Give ``path`` the content ``data`` in one rename (the module docstring has the options)."""
    target = os.path.realpath(path) if follow_symlinks else os.fspath(path)
    tmp = write_temp_beside(target, data, mode=mode, fsync=fsync)
    try:
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(
    path: Path | str,
    text: str,
    *,
    mode: int | None = None,
    follow_symlinks: bool = False,
    fsync: bool = False,
) -> None:
    """:func:`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(
        path, text.encode("utf-8"), mode=mode, follow_symlinks=follow_symlinks, fsync=fsync
    )

"""Saving from the browser without ever exposing a half-written notebook.

Jupyter's stock "atomic" writing truncates the file and writes it in place (keeping a backup
copy aside), so a reader at the wrong moment sees an empty or partial file: ipykeep's commands
then fail with "not valid JSON", and a write-back that replaced the file meanwhile would take
the browser's bytes with the old inode. The hosting server saves by writing a temporary file
next to the target and renaming it over the target instead, under an advisory lock on the
notebook's directory (``directory_lock``) that ipykeep's own write-back can share.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

from ..core.notebook import directory_lock


@contextlib.contextmanager
def replacing_writer(path: str, text: bool = True, encoding: str = "utf-8", **kwargs: Any) -> Iterator[IO[Any]]:
    if os.path.islink(path):
        path = os.path.join(os.path.dirname(path), os.readlink(path))
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".jupyter-tmp", dir=directory)
    try:
        if text:
            kwargs.setdefault("newline", "\n")
            fh: IO[Any] = os.fdopen(fd, "w", encoding=encoding, **kwargs)
        else:
            fh = os.fdopen(fd, "wb", **kwargs)
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(OSError):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        with directory_lock(path):
            os.replace(tmp, path)
        tmp = ""
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


class ReplacingFileManager(AsyncLargeFileManager):
    """Jupyter's default contents manager, saving by rename instead of in place."""

    @contextlib.contextmanager
    def atomic_writing(self, os_path: str, *args: Any, **kwargs: Any) -> Iterator[IO[Any]]:
        kwargs.pop("log", None)
        with self.perm_to_403(os_path), replacing_writer(os_path, *args, **kwargs) as fh:
            yield fh

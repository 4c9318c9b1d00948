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
import io
import os
from collections.abc import Iterator
from typing import IO, Any

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

from ipykeep.project.notebook import replace_file


@contextlib.contextmanager
def replacing_writer(
    path: str, text: bool = True, encoding: str = "utf-8", **kwargs: Any
) -> Iterator[IO[Any]]:
    """A file-like for Jupyter's writers; its content replaces ``path`` atomically on exit."""
    if os.path.islink(path):
        path = os.path.join(os.path.dirname(path), os.readlink(path))
    if text:
        text_buffer = io.StringIO(newline=kwargs.get("newline", "\n"))
        yield text_buffer
        data = text_buffer.getvalue().encode(encoding)
    else:
        byte_buffer = io.BytesIO()
        yield byte_buffer
        data = byte_buffer.getvalue()
    replace_file(path, data)


class ReplacingFileManager(AsyncLargeFileManager):
    """Jupyter's default contents manager, saving by rename instead of in place."""

    @contextlib.contextmanager
    def atomic_writing(self, os_path: str, *args: Any, **kwargs: Any) -> Iterator[IO[Any]]:
        kwargs.pop("log", None)
        with self.perm_to_403(os_path), replacing_writer(os_path, *args, **kwargs) as fh:
            yield fh

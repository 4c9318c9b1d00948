"""What the browser may reach in the project, and saving without a half-written notebook.

The served contents stop at the project: a path whose real location (symlinks resolved) is
outside the root directory is answered 404 for reading and writing alike, and ipykeep's own
state directory ``.ipykeep`` (the daemon's token, the checkpoint key) is neither listed nor
reachable, except the published views under ``.ipykeep/publish``.


Jupyter's stock "atomic" writing truncates the file and writes it in place (keeping a backup
copy aside), so a reader at the wrong moment sees an empty or partial file: ipykeep's commands
then fail with "not valid JSON", and a write-back that replaced the file meanwhile would take
the browser's bytes with the old inode. The hosting server saves by writing a temporary file
next to the target and renaming it over the target instead, under an advisory lock on the
notebook's directory (``directory_lock``) that ipykeep's own write-back can share.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import IO, Any

from jupyter_server.base.handlers import AuthenticatedFileHandler
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from tornado.web import HTTPError

from ipykeep.project.notebook import FileIdentity, file_identity, replace_file


@dataclass
class SaveGuard:
    """A save that must not overwrite a version of the file it has not seen (``file_merge``
    sets one around a shared document's save): ``expected`` is the version the document last
    read or wrote; ``written`` gets the version this save wrote, ``refused`` whether the file
    had changed (then nothing was written)."""

    expected: FileIdentity | None
    #: called with the written version at the rename, under the directory lock
    on_written: Callable[[FileIdentity], None] | None = None
    written: FileIdentity | None = None
    refused: bool = False


#: The guard of the save under way in this task (a mutable value: the save runs in a task of
#: its own, which sees the caller's context but not changes made to it).
save_guard: ContextVar[SaveGuard | None] = ContextVar("ipykeep_save_guard", default=None)


class _ChangedOnDisk(HTTPError):
    """The guarded save found another version of the file (Jupyter passes HTTP errors on
    without logging a traceback); private to the Jupyter server process, like ``_Unreachable``,
    and told by ``SaveGuard.refused``."""

    def __init__(self, path: str) -> None:
        super().__init__(409, f"{path} changed on disk before the save")


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
    guard = save_guard.get()
    if guard is None:
        replace_file(path, data)
        return

    def wrote(identity: FileIdentity) -> None:
        guard.written = identity
        if guard.on_written is not None:
            guard.on_written(identity)

    if not replace_file(path, data, still=guard.expected, replaced=wrote):
        guard.refused = True
        raise _ChangedOnDisk(path)


#: ipykeep's state directory, and the one part of it the browser may see (published views).
STATE_DIR = ".ipykeep"
PUBLISHED_DIR = os.path.join(STATE_DIR, "publish")


def reachable(os_path: str, root_dir: str) -> bool:
    """Whether the browser may read or write ``os_path``: its real location is inside
    ``root_dir`` and not in ipykeep's state (published views excepted)."""
    root = os.path.realpath(root_dir)
    real = os.path.realpath(os_path)
    if real != root and not real.startswith(root + os.sep):
        return False
    rel = os.path.relpath(real, root)
    if rel == STATE_DIR or rel.startswith(STATE_DIR + os.sep):
        return rel.startswith(PUBLISHED_DIR + os.sep)
    return True


class _Unreachable(HTTPError, PermissionError):
    """A path outside what is served: 404 to the browser, and an ``EACCES`` ``OSError`` to
    Jupyter's directory listing, which skips such entries (a symlink out of the project is left
    out of the listing instead of failing it). Private to the Jupyter server process: it never
    reaches ipykeep's error tree."""

    def __init__(self, path: str) -> None:
        HTTPError.__init__(self, 404, f"{path} is not in the served project")
        self.errno = errno.EACCES


class ProjectFileHandler(AuthenticatedFileHandler):
    """``/files/…``: Jupyter streams these from disk, past the contents manager; the same
    boundary as ``reachable`` applies."""

    def validate_absolute_path(self, root: str, absolute_path: str) -> str:
        if not reachable(absolute_path, root):
            raise HTTPError(404)
        return super().validate_absolute_path(root, absolute_path)


class ReplacingFileManager(AsyncLargeFileManager):
    """Jupyter's default contents manager, kept inside the project and out of ``.ipykeep``,
    saving by rename instead of in place."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Listed nowhere; ``reachable`` refuses it even by an explicit path.
        self.hide_globs = [*self.hide_globs, STATE_DIR]
        self.files_handler_class = ProjectFileHandler

    def _get_os_path(self, path: str) -> str:
        # Every read, write, listing, rename, delete and checkpoint goes through here.
        # jupyter_server leaves this one unannotated (a str in, a str out).
        os_path: str = super()._get_os_path(path)  # type: ignore[no-untyped-call]
        if not reachable(os_path, self.root_dir):
            raise _Unreachable(path)
        return os_path

    def identity(self, path: str) -> FileIdentity | None:
        """The version of the file at API path ``path`` (``file_identity``)."""
        return file_identity(self._get_os_path(path))

    @contextlib.contextmanager
    def atomic_writing(self, os_path: str, *args: Any, **kwargs: Any) -> Iterator[IO[Any]]:
        kwargs.pop("log", None)
        with self.perm_to_403(os_path), replacing_writer(os_path, *args, **kwargs) as fh:
            yield fh

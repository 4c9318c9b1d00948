"""Exclusive advisory locks: on an open file (daemon start-up) and on a directory (notebook saves).

POSIX uses ``fcntl.flock`` (whole-file, released when the descriptor closes, also when the
process dies). Windows uses ``msvcrt.locking``, also released by the OS when the handle closes
or the process dies; it locks a byte range, not the file, so every ipykeep process locks the
same byte, ``LOCK_OFFSET``, far past any content: Windows locks are mandatory, and a lock on the
content would keep other processes from reading it (the daemon lock holds its pid). ``locking``'s
blocking mode retries ten times a second for ten seconds and then fails: the loop below keeps
waiting, as ``flock`` would. Windows has no shared lock: ``try_lock_fd(shared=True)`` takes an
exclusive one there, which is what a probe (take, then release at once) needs.

A directory cannot be opened for locking on Windows, so there the directory lock is a lock
file (``.ipykeep-dir.lock``) inside it; on POSIX the directory itself is locked and no file is
created.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ipykeep.platform import system

#: The lock file that stands for a directory on Windows (never created on POSIX).
DIRECTORY_LOCK_NAME = ".ipykeep-dir.lock"
#: The byte Windows locks (past any content, which stays readable).
LOCK_OFFSET = 1 << 30


def _msvcrt() -> Any:
    import msvcrt  # Windows only; a function so tests can substitute it

    return msvcrt


def lock_fd(fd: int) -> None:
    """Block until this process holds the exclusive lock on the open file ``fd``."""
    if system.IS_WINDOWS:
        msvcrt = _msvcrt()
        os.lseek(fd, LOCK_OFFSET, os.SEEK_SET)
        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                return
            except OSError:  # LK_LOCK gave up after ten seconds: keep waiting, like flock
                continue
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_EX)


def unlock_fd(fd: int) -> None:
    """Release the lock ``lock_fd`` took (closing the file releases it too)."""
    if system.IS_WINDOWS:
        msvcrt = _msvcrt()
        os.lseek(fd, LOCK_OFFSET, os.SEEK_SET)
        with contextlib.suppress(OSError):
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        return
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)


def try_lock_fd(fd: int, *, shared: bool = False) -> bool:
    """Take the lock on ``fd`` if nobody holds it (shared: others may share it); never waits."""
    if system.IS_WINDOWS:
        msvcrt = _msvcrt()
        os.lseek(fd, LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


@contextlib.contextmanager
def exclusive_lock(file: IO[Any]) -> Iterator[None]:
    """Hold the exclusive lock on an open file for the ``with`` block."""
    lock_fd(file.fileno())
    try:
        yield
    finally:
        unlock_fd(file.fileno())


@contextlib.contextmanager
def directory_lock(directory: Path | str) -> Iterator[None]:
    """Hold the exclusive lock standing for ``directory`` for the ``with`` block."""
    if system.IS_WINDOWS:
        fd = os.open(os.path.join(directory, DIRECTORY_LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o666)
    else:
        fd = os.open(directory, os.O_RDONLY)
    try:
        lock_fd(fd)
        yield
    finally:
        os.close(fd)  # closing releases the lock

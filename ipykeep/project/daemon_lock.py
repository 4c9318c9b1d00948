"""The one-daemon-per-project lock: held by the running daemon, probed by its clients.

The daemon holds an exclusive lock (``ipykeep/platform/locks.py``) on
``.ipykeep/run/daemon.lock`` for as long as it runs and writes its pid into it. The kernel drops
the lock when the process ends, however it ends, so the lock (unlike the descriptor, a plain
file anyone can damage) always tells whether a daemon serves the project, and which one. Clients
that find the descriptor damaged use it to find the live daemon (and ask it to publish its
descriptor again, ``ask_to_republish``; POSIX only, Windows has no user signal), and a second
daemon started for the project gives up instead of running beside the first.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from ipykeep.platform import files, locks, processes

#: What a daemon's command line holds (checked before a client signals the lock's pid).
DAEMON_MODULE = "ipykeep.daemon"


def acquire(lock_path: Path, *, wait: float = 2.0) -> int | None:
    """Take the lock and write this process's pid into it; the open descriptor (keep it open
    for the life of the process) or None when another process holds it after ``wait`` seconds.

    ``wait`` covers clients probing the lock (they hold it for microseconds), not a second
    daemon: the holder of a running daemon keeps it until it exits.
    """
    fd = files.open_private(lock_path, os.O_RDWR)
    deadline = time.monotonic() + wait
    while True:
        try:
            if locks.try_lock_fd(fd):
                break
        except OSError:
            os.close(fd)
            return None
        if time.monotonic() > deadline:
            os.close(fd)
            return None
        time.sleep(0.05)
    os.ftruncate(fd, 0)
    files.write_at(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def ask_to_republish(pid: int) -> None:
    """Ask the lock holder to write its descriptor again (it was damaged or removed)."""
    processes.send_user_signal(pid)


def holder(lock_path: Path) -> int | None:
    """The pid of the process holding the lock, or None when nobody holds it."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | files.NO_INHERIT)
    except OSError:
        return None
    try:
        try:
            if not locks.try_lock_fd(fd, shared=True):
                return _pid_in(fd)
        except OSError:
            return _pid_in(fd)
        locks.unlock_fd(fd)
        return None
    finally:
        os.close(fd)


def _pid_in(fd: int) -> int | None:
    # The holder writes its pid right after taking the lock: retry briefly for that moment.
    for _ in range(20):
        with contextlib.suppress(ValueError, OSError):
            pid = int(files.read_at(fd, 32, 0).decode("ascii").strip())
            if pid > 0 and is_daemon(pid):
                return pid
        time.sleep(0.01)
    return None


def is_daemon(pid: int) -> bool:
    """Whether ``pid`` runs an ipykeep daemon (so it is safe to signal)."""
    args = processes.command_line(pid)
    if args is None:
        # Unknown (no /proc: not Linux, or the process is gone): trust the lock, which only a
        # daemon writes.
        return processes.pid_alive(pid)
    return DAEMON_MODULE.encode() in args

"""The one-daemon-per-project lock: held by the running daemon, probed by its clients.

The daemon holds an exclusive ``flock`` on ``.ipykeep/run/daemon.lock`` for as long as it
runs and writes its pid into it. The kernel drops the lock when the process ends, however it
ends, so the lock (unlike the descriptor, a plain file anyone can damage) always tells whether
a daemon serves the project, and which one. Clients that find the descriptor damaged use it to
find the live daemon (and ask it to publish its descriptor again, ``REPUBLISH_SIGNAL``), and a
second daemon started for the project gives up instead of running beside the first.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import time
from pathlib import Path

#: Sent by a client to the lock holder: write your descriptor again (it was damaged or removed).
REPUBLISH_SIGNAL = signal.SIGUSR1
#: What a daemon's command line holds (checked before a client signals the lock's pid).
DAEMON_MODULE = "ipykeep.daemon"


def acquire(lock_path: Path, *, wait: float = 2.0) -> int | None:
    """Take the lock and write this process's pid into it; the open descriptor (keep it open
    for the life of the process) or None when another process holds it after ``wait`` seconds.

    ``wait`` covers clients probing the lock (they hold it for microseconds), not a second
    daemon: the holder of a running daemon keeps it until it exits.
    """
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.05)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def holder(lock_path: Path) -> int | None:
    """The pid of the process holding the lock, or None when nobody holds it."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _pid_in(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _pid_in(fd: int) -> int | None:
    # The holder writes its pid right after taking the lock: retry briefly for that moment.
    for _ in range(20):
        with contextlib.suppress(ValueError, OSError):
            pid = int(os.pread(fd, 32, 0).decode("ascii").strip())
            if pid > 0 and is_daemon(pid):
                return pid
        time.sleep(0.01)
    return None


def is_daemon(pid: int) -> bool:
    """Whether ``pid`` runs an ipykeep daemon (so it is safe to signal)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return DAEMON_MODULE.encode() in fh.read().split(b"\0")
    except OSError:
        # No /proc (not Linux): trust the lock, which only a daemon writes.
        return _exists(pid)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

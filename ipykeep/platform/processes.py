"""Processes: whether a pid lives, detaching the daemon, a kernel's process tree, stop signals.

- Liveness: POSIX ``os.kill(pid, 0)``, plus on Linux ``/proc/<pid>/stat`` so a zombie child
  counts as dead (macOS has no ``/proc``; a zombie there is the caller's own child, which
  ``Popen.poll`` reaps). Windows: ``OpenProcess`` + ``GetExitCodeProcess`` (there,
  ``os.kill(pid, 0)`` would *terminate* the process).
- Detaching (the daemon): a new session on POSIX; ``DETACHED_PROCESS |
  CREATE_NEW_PROCESS_GROUP`` on Windows (no console, and a Ctrl+C in the launching console does
  not reach it).
- A kernel's process tree: on POSIX the kernel is its session's leader (jupyter_client's
  launcher passes ``start_new_session``), so the tree is its process group and is killed with
  ``killpg``. On Windows the kernel is put in a Job Object that kills everything in it when
  its handle closes; killing the tree terminates the job.
- Interrupting a process group: ``killpg(SIGINT)`` on POSIX. Windows has no process-group
  signal a kernel listens to; only the launcher's interrupt event does (jupyter_client's
  ``win_interrupt``), so there this raises ``PlatformNotSupportedError``.
- Stop signals: SIGTERM, SIGINT and SIGHUP through the event loop on POSIX; SIGINT and
  SIGBREAK through ``signal.signal`` on Windows (its event loop has no signal handlers).
- The user signal (SIGUSR1, "publish your descriptor again"): POSIX only. Windows has no
  user signal (and ``os.kill`` would terminate the process), so there it is never sent and
  never handled (a damaged descriptor is then not republished until the daemon restarts).
- Forking a kernel (checkpoints pickle values in a forked child): safe on Linux; not on macOS,
  where a forked child of a process whose threads have used the system's frameworks may crash
  (why Python's ``multiprocessing`` spawns there by default); absent on Windows.
- A process's command line and its stopped state: ``/proc`` on Linux; elsewhere unknown
  (``None``, and "not stopped").
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ipykeep.api.errors import PlatformNotSupportedError
from ipykeep.platform import system

if TYPE_CHECKING:
    import asyncio


def _winapi() -> Any:
    from ipykeep.platform import winapi

    return winapi


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` is running (a zombie counts as dead where that can be seen)."""
    if system.IS_WINDOWS:
        return bool(_winapi().process_alive(pid))
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if system.IS_LINUX:
        # A zombie child (only possible when this process started it) counts as dead.
        with contextlib.suppress(OSError, IndexError):
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":
                    return False
    return True


def detached_popen_kwargs() -> dict[str, Any]:
    """``subprocess.Popen`` arguments that detach a child from this process's terminal and
    session, so whoever launched it is never held by it."""
    if system.IS_WINDOWS:
        win = _winapi()
        return {"creationflags": win.DETACHED_PROCESS | win.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def kill_now(pid: int) -> None:
    """End process ``pid`` at once, without giving it a chance to clean up (SIGKILL on POSIX,
    TerminateProcess on Windows, which is what ``os.kill`` does there with any signal)."""
    if system.IS_WINDOWS:
        os.kill(pid, signal.SIGTERM)
        return
    os.kill(pid, signal.SIGKILL)


def interrupt_process_group(pid: int) -> None:
    """SIGINT the process group ``pid`` belongs to; ``ProcessLookupError`` if it is gone."""
    if system.IS_WINDOWS:
        raise PlatformNotSupportedError(
            "interrupting a kernel by its pid is not available on Windows",
            hint="interrupt it through ipykeep (`ipykeep interrupt`), which holds the kernel's "
            "interrupt event",
        )
    os.killpg(os.getpgid(pid), signal.SIGINT)


class ProcessTree:
    """A launched process and every process it starts, killed together.

    ``adopt`` right after the launch: on Windows that is when the kernel joins its Job Object
    (children it started before that moment are not in it; a kernel starts none before it
    answers its first request). On POSIX nothing is done then: the process leads its own group.
    """

    def __init__(self, pid: int, job: int | None) -> None:
        self.pid = pid
        self._job = job
        self._gone = False

    @classmethod
    def adopt(cls, pid: int) -> ProcessTree:
        if system.IS_WINDOWS:
            return cls(pid, _winapi().kill_on_close_job(pid))
        return cls(pid, None)

    def kill(self) -> None:
        """Kill the whole tree now (nothing if it is already gone)."""
        if system.IS_WINDOWS:
            if self._job is not None:
                job, self._job = self._job, None
                with contextlib.suppress(OSError):
                    _winapi().terminate_job(job)
            return
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)

    def kill_once_gone(self) -> None:
        """The process died (SIGKILL, ``os._exit``): what it started goes with it. Once only:
        the group's id may be reused after its last member is gone."""
        if not self._gone:
            self._gone = True
            self.kill()


def fork_is_safe() -> bool:
    """Whether a local kernel may fork a child that runs Python code without exec'ing."""
    return not (system.IS_WINDOWS or system.IS_MACOS)


def send_user_signal(pid: int) -> None:
    """Send SIGUSR1 to ``pid``; nothing on Windows, which has no user signal."""
    if system.IS_WINDOWS:
        return
    os.kill(pid, signal.SIGUSR1)


def on_user_signal(
    loop: asyncio.AbstractEventLoop, callback: Callable[..., object], *args: object
) -> None:
    """Call ``callback(*args)`` in the loop on SIGUSR1; nothing on Windows."""
    if system.IS_WINDOWS:
        return
    loop.add_signal_handler(signal.SIGUSR1, callback, *args)


def ignore_user_signal() -> None:
    """Ignore SIGUSR1 until a handler is installed (its default action ends the process)."""
    if system.IS_WINDOWS:
        return
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


def command_line(pid: int) -> list[bytes] | None:
    """The arguments ``pid`` runs with, where the OS shows them cheaply (``/proc`` on Linux);
    None when unknown (other platforms, or the process is gone)."""
    if not system.IS_LINUX:
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().split(b"\0")
    except OSError:
        return None


def process_stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (SIGSTOP, a debugger): its ``/proc`` state ``T`` or ``t`` on
    Linux; elsewhere never seen stopped (then only heartbeats tell)."""
    if not system.IS_LINUX:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"T", b"t")


def add_stop_handlers(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> None:
    """Call ``stop`` (in the loop) when the process is asked to stop by a signal."""
    if system.IS_WINDOWS:

        def on_signal(signum: int, frame: object) -> None:
            loop.call_soon_threadsafe(stop)

        for name in ("SIGINT", "SIGBREAK"):
            signal.signal(getattr(signal, name), on_signal)
        return
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop)


def process_start(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, field 22 of ``/proc/<pid>/stat``), to tell
    a pid's owner from a later process reusing it; None where unknown (not Linux, or gone)."""
    if not system.IS_LINUX:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def available_memory_mb() -> float | None:
    """MemAvailable from ``/proc/meminfo`` on Linux; None where unknown (then no memory bound
    is applied by its callers)."""
    if not system.IS_LINUX:
        return None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None

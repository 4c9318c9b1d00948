"""Telling a kernel that stopped answering from one that is merely busy.

A busy kernel still answers its heartbeat: ipykernel's heartbeat is a zmq device on its own
thread, outside the GIL, so a cell computing for an hour does not silence it. A kernel whose
process is stopped (SIGSTOP, Ctrl-Z on a shell it shares, a debugger holding it) answers
nothing, yet its process is alive, so only ``cell_timeout`` would otherwise end a call on it.
``Responsiveness.check`` is called by the driver's alive watch every half second; once the
kernel has been silent for the grace below it is declared unresponsive (``reason``), and it is
declared responsive again as soon as it answers.
"""

from __future__ import annotations

import time
from typing import Any

from ipykeep.platform import processes

#: Seconds a local kernel's process may be in the stopped state before it is declared
#: unresponsive (the state is exact; the grace lets a debugger's short stops pass).
STOPPED_GRACE = 3.0
#: Seconds of missed heartbeats before a kernel is declared unresponsive (a loaded machine may
#: delay single beats; nothing legitimate silences it this long).
HEARTBEAT_GRACE = 10.0


def process_stopped(pid: int) -> bool:
    """Whether the local process ``pid`` is stopped (``ipykeep/platform``: Linux's /proc)."""
    return processes.process_stopped(pid)


class Responsiveness:
    """The unresponsiveness of one kernel, as seen by successive checks."""

    def __init__(self, name: str) -> None:
        self.name = name
        #: why the kernel does not answer, or None while it answers; ``fix`` says what to do
        self.reason: str | None = None
        self.fix = ""
        self._silent_since: float | None = None

    def reset(self) -> None:
        self.reason = None
        self._silent_since = None

    def check(self, *, local_pid: int | None, client: Any) -> None:
        """Update ``reason`` from the kernel's process state (local kernels) and heartbeat."""
        now = time.monotonic()
        if local_pid is not None and process_stopped(local_pid):
            why, grace = f"its process (pid {local_pid}) is stopped", STOPPED_GRACE
            fix = f"`kill -CONT {local_pid}` resumes it, `ipykeep restart` replaces it"
        elif _heartbeat_missed(client):
            why, grace = "it does not answer its heartbeat", HEARTBEAT_GRACE
            fix = "`ipykeep restart` (MCP: restart_kernel) replaces it"
        else:
            self.reset()
            return
        if self._silent_since is None:
            self._silent_since = now
        if now - self._silent_since >= grace:
            self.reason, self.fix = f"kernel {self.name} is not responding: {why}", fix


def _heartbeat_missed(client: Any) -> bool:
    hb = getattr(client, "hb_channel", None) if client is not None else None
    # Only a running heartbeat channel says anything (remote providers may not run one).
    if hb is None or not hb.is_alive():
        return False
    return not hb.is_beating()

"""Errors of the debugger (subclasses of the shared hierarchy, rebuilt by code over RPC)."""

from __future__ import annotations

from ipykeep.api.errors import IpykeepError


class DebugStateError(IpykeepError):
    """The command needs a state the kernel is not in (nothing paused, no failure recorded)."""

    code = "debug_state"
    exit_code = 1

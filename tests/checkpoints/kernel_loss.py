"""Losing a kernel the way a crash does, for the restore tests."""

from __future__ import annotations

import asyncio

from ipykeep.engine.session import KernelSession
from ipykeep.platform.processes import kill_now


async def sigkill(session: KernelSession) -> None:
    """Kill the kernel process at once (SIGKILL; TerminateProcess on Windows) and wait until
    the engine has seen it die."""
    kill_now(session.process.pid)  # type: ignore[arg-type]
    for _ in range(100):
        if session.state == "dead":
            return
        await asyncio.sleep(0.1)
    assert session.state == "dead", (
        f"kernel {session.kernel_id} still {session.state} 10 s after SIGKILL"
    )

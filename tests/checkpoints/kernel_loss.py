"""Losing a kernel the way a crash does, for the restore tests."""

from __future__ import annotations

import asyncio
import os
import signal

from ipykeep.engine.session import KernelSession


async def sigkill(session: KernelSession) -> None:
    """SIGKILL the kernel process and wait until the engine has seen it die."""
    os.kill(session.process.pid, signal.SIGKILL)  # type: ignore[arg-type]
    for _ in range(100):
        if session.state == "dead":
            return
        await asyncio.sleep(0.1)
    assert session.state == "dead", (
        f"kernel {session.kernel_id} still {session.state} 10 s after SIGKILL"
    )

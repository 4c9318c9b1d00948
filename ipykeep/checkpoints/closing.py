"""Closing a kernel: the checkpoint writers finish its last snapshots before it goes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from ipykeep.api.errors import IpykeepError
from ipykeep.checkpoints import remote
from ipykeep.checkpoints.state import FLUSH_ON_CLOSE_S, call
from ipykeep.engine.session import KernelSession

if TYPE_CHECKING:
    from ipykeep.checkpoints.service import CheckpointService

log = logging.getLogger("ipykeep.checkpoints")


async def flush_last_snapshots(service: CheckpointService, session: KernelSession) -> None:
    """Wait (boundedly) for the last cell's snapshot, the queued manifests and the kernel's
    writer thread; a close never fails for them."""
    with contextlib.suppress(Exception):  # a cancelled batch's last snapshot
        await asyncio.wait_for(service.batch_finished(session), FLUSH_ON_CLOSE_S)
    pending = service.state(session).manifest_write
    if pending is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(pending), FLUSH_ON_CLOSE_S)
    if service.state(session).available and session.process.alive:
        try:
            # The writer is a thread: a cell still running (a loop that never ends, say)
            # must not hold the close for the flush's whole timeout, so ask on a subshell.
            subshell = await session.side_subshell()
            try:
                await session.process.eval_silent(
                    call("flush", FLUSH_ON_CLOSE_S),
                    subshell_id=subshell,
                    timeout=FLUSH_ON_CLOSE_S + 5,
                )
            finally:
                if subshell is not None:
                    session.process.release_subshell(subshell)
            if service.state(session).remote_root is not None:
                await remote.take(session, service.store, service.state(session))
        except IpykeepError as exc:  # the close goes on; the last snapshots may be lost
            log.warning(
                "closing %s: the checkpoint writer's last flush did not answer: %s",
                session.kernel_id,
                exc.message,
            )

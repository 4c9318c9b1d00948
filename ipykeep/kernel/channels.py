"""Readers that hand each message on a kernel channel to the request waiting for it."""

from __future__ import annotations

import asyncio
import queue
from typing import Any

#: Seconds a reader of a channel ipykeep also sends on (shell, control) waits before polling
#: again. Under concurrent load the zmq.asyncio poll of the shell socket sometimes never woke
#: although a reply was waiting (its events said POLLIN; seen with pyzmq 27, likely a missed
#: edge of the socket's descriptor while requests were sent on it), and no later reply woke it
#: either. A fresh poll re-reads the socket's events, so a reply waits at most this long.
CHANNEL_REPOLL = 0.1


async def route_replies(get: Any, pending: dict[str, asyncio.Future[dict[str, Any]]]) -> None:
    """Hand each reply on a channel to the request waiting for it (by parent msg_id).

    The short timeout makes every wait a fresh poll of the socket: under concurrent sends
    zmq.asyncio can miss a reply's wake-up, and the reply would wait for the next message.
    """
    while True:
        try:
            msg = await get(timeout=CHANNEL_REPOLL)
        except queue.Empty:
            continue
        except asyncio.CancelledError:
            raise
        except Exception:  # pragma: no cover
            await asyncio.sleep(0.05)
            continue
        fut = pending.pop(msg.get("parent_header", {}).get("msg_id"), None)
        if fut is not None and not fut.done():
            fut.set_result(msg)

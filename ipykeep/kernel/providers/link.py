"""The state of a remote kernel's connection: up, down and being re-established, or lost.

Shared by the SSH provider and the gateway's websocket channels. A dropped connection is
re-established with backoff for up to ``reconnect_for`` seconds (``remote_reconnect_s``); the
kernel's driver holds new requests while it is down (``on_down``) and, once it is back
(``on_up``), tells the user and marks the gap in the executions that were running meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger("ipykeep.link")

#: Seconds between two attempts: doubling from the first, never more than the last.
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 5.0


@dataclass(frozen=True)
class Stop:
    """A reconnect attempt's answer when trying again cannot help (the other side answered:
    the kernel is gone, or we are no longer let in)."""

    why: str


class RemoteLink:
    """One kernel's connection: ``dropped`` when it goes, ``restored`` when it is back."""

    def __init__(self, where: str, reconnect_for: float, *, replays: str) -> None:
        #: what the connection is, for messages ("the ssh connection to gpu-box")
        self.where = where
        #: seconds a dropped connection is retried before the kernel counts as lost
        self.reconnect_for = reconnect_for
        #: what happens to the kernel's messages sent while the connection is down
        self.replays = replays
        self.reconnects = 0
        self.down_since: float | None = None  # time.time() of the drop while it is down
        #: called when the connection drops (the driver holds new requests until it is back)
        self.on_down: Callable[[], None] | None = None
        #: called when it is back, with the notice for the user and the note for the
        #: executions that were running across the gap
        self.on_up: Callable[[str, str], None] | None = None

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def dropped(self) -> None:
        if self.down_since is None:
            self.down_since = time.time()
            log.warning(
                "%s was lost; re-establishing it for up to %g s", self.where, self.reconnect_for
            )
            if self.on_down is not None:
                self.on_down()

    def restored(self) -> None:
        since = self.down_since if self.down_since is not None else time.time()
        down_for = max(0.0, time.time() - since)
        self.down_since = None
        self.reconnects += 1
        log.warning("%s re-established after %.1f s", self.where, down_for)
        clock = time.strftime("%H:%M:%S", time.localtime(since))
        if self.on_up is not None:
            self.on_up(
                f"{self.where} was lost at {clock} for {down_for:.0f} s and was re-established; "
                "the kernel kept running with its state (nothing to do)",
                f"{self.where} was down from {clock} for {down_for:.0f} s; {self.replays}",
            )

    def given_up(self, why: str) -> str:
        """Why the kernel counts as lost, once retrying for ``reconnect_for`` s did not help."""
        self.down_since = None
        return (
            f"{self.where} was lost and could not be re-established within "
            f"{self.reconnect_for:g} s (remote_reconnect_s): {why}"
        )

    async def retry(self, attempt: Callable[[], Awaitable[str | Stop | None]]) -> str | None:
        """Call ``attempt`` with backoff until it returns None (connected) or the time is up.

        ``attempt`` returns why it failed, or a ``Stop`` to give up at once. The last reason is
        returned when the connection did not come back."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.reconnect_for
        pause = BACKOFF_FIRST
        while True:
            why = await attempt()
            if why is None:
                return None
            if isinstance(why, Stop):
                return why.why
            log.info("%s: not re-established yet: %s", self.where, why)
            left = deadline - loop.time()
            if left <= 0:
                return why
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, BACKOFF_MAX)

"""The ipykernel-7 subshells one kernel lends to scratch work while its main shell is busy."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from ipykeep.api.errors import KernelDiedError

log = logging.getLogger("ipykeep.kernel")

#: Seconds one create_subshell_request may take before the pool stops growing.
CREATE_TIMEOUT = 10.0


class SubshellPool:
    """Subshell ids, created once on first need and lent out one caller at a time.

    ``send_control`` sends a control request and returns the future its reply resolves (the
    kernel's single control-channel reader routes it), so this class never reads a socket.
    """

    def __init__(
        self,
        name: str,
        send_control: Callable[[str, dict[str, Any]], asyncio.Future[dict[str, Any]]],
    ) -> None:
        self.name = name
        self._send_control = send_control
        self.ids: list[str] = []
        self._busy: set[str] = set()
        self._create = asyncio.Lock()
        self._made = False

    def reset(self) -> None:
        """Forget every subshell (the kernel was (re)started)."""
        self.ids.clear()
        self._busy.clear()
        self._made = False

    async def acquire(self, limit: int, alive: Callable[[], bool]) -> str | None:
        """A free subshell id, or None when all are busy (the caller then queues).

        The pool is created once, on first need, with ``limit`` subshells made one after the
        other on the control channel; creating subshells on demand under load raced on the
        channel and stalled callers behind slow replies.
        """
        if not self._made:
            async with self._create:
                if not self._made:
                    await self._make(limit, alive)
        for sid in self.ids:
            if sid not in self._busy:
                self._busy.add(sid)
                return sid
        return None

    async def _make(self, limit: int, alive: Callable[[], bool]) -> None:
        for _ in range(limit):
            if not alive():
                break
            try:
                reply = await asyncio.wait_for(
                    self._send_control("create_subshell_request", {}), CREATE_TIMEOUT
                )
            except (asyncio.TimeoutError, KernelDiedError):
                log.warning("%s: creating a subshell failed; using %d", self.name, len(self.ids))
                break
            sid = reply["content"].get("subshell_id")
            if not sid:  # a kernel without subshells (ipykernel < 7): everything queues
                break
            self.ids.append(sid)
        self._made = True

    def release(self, sid: str) -> None:
        self._busy.discard(sid)

    def retire(self, sid: str) -> None:
        """Stop using a subshell that lost a request (it may still be stuck on it)."""
        with contextlib.suppress(ValueError):
            self.ids.remove(sid)
        self._busy.discard(sid)
        fut = self._send_control("delete_subshell_request", {"subshell_id": sid})
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # nobody waits for it

"""Pooled JSON-RPC connections to one daemon, for asyncio clients that make many calls (MCP)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ipykeep.api.errors import DaemonUnreachableError
from ipykeep.client.wire import MAX_LINE, Endpoint, encode_request, unwrap_response


class AsyncRpcPool:
    """Reusable connections to one daemon, for asyncio clients making many calls (MCP).

    A connection carries one call at a time; concurrent calls each take an idle connection or
    open a new one, so a long ``execute`` never delays a quick ``read_execution``. Reusing
    connections saves a TCP handshake and a daemon-side accept per call.
    """

    def __init__(self, endpoint: Endpoint, max_idle: int = 8) -> None:
        self.endpoint = endpoint
        self.max_idle = max_idle
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._rid = 0

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            return await asyncio.open_connection(
                self.endpoint.host, self.endpoint.port, limit=MAX_LINE
            )
        except OSError as exc:
            raise DaemonUnreachableError(
                f"cannot reach the daemon at {self.endpoint.host}:{self.endpoint.port}: {exc}",
                hint="it may have exited",
            ) from exc

    @property
    def has_idle(self) -> bool:
        return bool(self._idle)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        fresh = not self._idle
        reader, writer = self._idle.pop() if self._idle else await self._connect()
        self._rid += 1
        try:
            writer.write(encode_request(method, params or {}, self.endpoint.token, self._rid))
            await writer.drain()
            line = await reader.readline()
        except OSError as exc:
            writer.close()
            if not fresh:  # a pooled connection the daemon closed meanwhile: retry on a new one
                return await self.call(method, params)
            raise DaemonUnreachableError(f"lost the daemon during {method}: {exc}") from exc
        except BaseException:
            # Cancelled mid-call: the connection is mid-request, never pooled; closing it tells
            # the daemon, which cancels the call (a batch stops, see the RPC server).
            writer.close()
            raise
        if not line:
            writer.close()
            if not fresh:
                return await self.call(method, params)
            raise DaemonUnreachableError(
                f"the daemon closed the connection during {method}", hint="it may have exited"
            )
        if len(self._idle) < self.max_idle:
            self._idle.append((reader, writer))
        else:
            writer.close()
        return unwrap_response(json.loads(line))

    def close(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()

"""Tool calls on stdio served straight from the pipe, past the SDK's dispatcher.

The SDK hands every message through a replay task and a memory stream, spawns a task for each
request inside its middleware chain, and builds a session object per request: about 0.4 ms of
a 5 ms ``ipython("1+1")`` round trip, as much as the hop to the daemon. A ``tools/call`` that
needs nothing of that machinery is served here instead, on the event loop that reads stdin:

- the connection is in the handshake era (``initialize`` answered, ``notifications/initialized``
  received) and the request carries no 2026-07-28 envelope, no progress token and no task;
- its params pass the same checks the SDK applies (``mcp_types.methods.validate_client_request``
  and ``CallToolRequestParams``); anything else, including a malformed call, goes to the SDK,
  which answers it with its own error.

The call is handled by the same ``IpykeepMcp.call_tool``, its result shaped by the SDK's own
``serialize_server_result`` for the negotiated version and written as the SDK writes a
response; a log notice the handler sends is written as the SDK's session would write it, and a
``notifications/cancelled`` for a call served here cancels it without an answer, as the SDK's
dispatcher does. Everything else (the handshake, ``tools/list``, resources, ``logging/setLevel``,
pings, calls with a progress token) is the SDK's. ``IPYKEEP_MCP_DIRECT_CALLS=0`` sends every
call through the SDK; the one thing the direct path leaves out is the SDK's server middleware
(an OpenTelemetry span per request, when a tracer is configured).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from mcp.shared.dispatcher import coerce_request_id
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    PROTOCOL_VERSION_META_KEY,
    CallToolRequestParams,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCResponse,
    LoggingMessageNotificationParams,
)
from mcp_types import methods as surface
from pydantic import ValidationError

from ipykeep.mcp_server.early import switched_on
from ipykeep.mcp_server.stdio import wire_text

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ipykeep.mcp_server.inflight import Ledger
    from ipykeep.mcp_server.server import IpykeepMcp
    from ipykeep.mcp_server.session import Handshake

log = logging.getLogger("ipykeep.mcp")

CALL = "tools/call"
_CALL_MARK = b'"tools/call"'
_CANCEL_MARK = b'"notifications/cancelled"'
#: Params keys a direct call may carry; any other (``task``, a future field) goes to the SDK.
_CALL_KEYS = frozenset({"name", "arguments", "_meta"})


def enabled() -> bool:
    return switched_on("IPYKEEP_MCP_DIRECT_CALLS")


def tool_response(rid: str | int, result: CallToolResult, version: str) -> JSONRPCResponse:
    """A tool result answered as the SDK answers it: shaped for the session's protocol version
    (``serialize_server_result`` drops what that version does not have)."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return JSONRPCResponse(
        jsonrpc="2.0", id=rid, result=surface.serialize_server_result(CALL, version, dumped)
    )


class _DirectSession:
    """What ``IpykeepMcp`` asks of ``ctx.session`` during a call, written straight to stdout."""

    def __init__(self, calls: DirectCalls) -> None:
        self._calls = calls

    async def send_log_message(
        self, level: Any, data: Any, logger: str | None = None, related_request_id: Any = None
    ) -> None:
        # Handshake-era sessions send log entries unconditionally (the SDK's ServerSession).
        params = LoggingMessageNotificationParams(level=level, data=data, logger=logger)
        await self._calls.write(
            JSONRPCNotification(
                jsonrpc="2.0",
                method="notifications/message",
                params=params.model_dump(by_alias=True, mode="json", exclude_none=True),
            )
        )

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None  # a direct call carries no progress token: the SDK would drop it too


@dataclass
class _DirectContext:
    """The parts of the SDK's ``ServerRequestContext`` that ``IpykeepMcp`` reads."""

    session: _DirectSession
    request_id: Any
    params: dict[str, Any]
    method: str = CALL
    request: Any = None
    meta: Any = None


@dataclass
class DirectCalls:
    """Which stdin lines are tool calls to serve here, and serving them."""

    app: IpykeepMcp
    handshake: Handshake
    writer: asyncio.StreamWriter | None = None
    ledger: Ledger | None = None
    _running: dict[str | int, asyncio.Task[None]] = field(default_factory=dict)

    def attach(self, writer: asyncio.StreamWriter, ledger: Ledger) -> None:
        """Serve on ``writer`` (a round of serving), keeping ``ledger`` of open calls."""
        self.writer = writer
        self.ledger = ledger

    def take(self, line: bytes) -> bool:
        """Whether ``line`` is served here (True) or goes on to the SDK (False)."""
        if _CALL_MARK in line:
            return self._take_call(line)
        if _CANCEL_MARK in line:
            self._cancel(line)
        return False

    # -- serving -------------------------------------------------------------------------------
    def accepts(
        self, line: bytes
    ) -> tuple[str | int, dict[str, Any], CallToolRequestParams] | None:
        """``(id, params, typed params)`` when ``line`` is a tool call served here, else None."""
        version = self.handshake.version
        if version is None or not self.handshake.initialized:
            return None
        try:
            message = json.loads(line)
        except ValueError:
            return None
        if not isinstance(message, dict) or message.get("method") != CALL:
            return None
        rid = message.get("id")
        params = message.get("params")
        if (
            message.get("jsonrpc") != "2.0"
            or isinstance(rid, bool)
            or not isinstance(rid, str | int)
            or not isinstance(params, dict)
            or not params.keys() <= _CALL_KEYS
        ):
            return None
        meta = params.get("_meta")
        if meta is not None and (
            not isinstance(meta, dict)
            or "progressToken" in meta
            or PROTOCOL_VERSION_META_KEY in meta
        ):
            return None
        if coerce_request_id(rid) in self._running:
            return None  # a duplicate id: the SDK's dispatcher decides
        try:
            surface.validate_client_request(CALL, version, params)
            typed = CallToolRequestParams.model_validate(params, by_name=False)
        except (ValidationError, ValueError, KeyError):
            return None
        return rid, params, typed

    def _take_call(self, line: bytes) -> bool:
        call = self.accepts(line) if self.writer is not None else None
        if call is None:
            return False
        rid, params, typed = call
        if self.ledger is not None:
            self.ledger.opened(rid, CALL)
        key = coerce_request_id(rid)
        task = asyncio.get_running_loop().create_task(self._serve(rid, params, typed))
        self._running[key] = task
        task.add_done_callback(functools.partial(self._finished, key))
        return True

    def _finished(self, key: str | int, task: asyncio.Task[None]) -> None:
        if self._running.get(key) is task:
            del self._running[key]

    async def _serve(
        self, rid: str | int, params: dict[str, Any], typed: CallToolRequestParams
    ) -> None:
        version = self.handshake.version
        assert version is not None
        ctx = _DirectContext(_DirectSession(self), rid, params)
        try:
            result = await self.app.call_tool(cast("ServerRequestContext[Any]", ctx), typed)
        except asyncio.CancelledError:
            # shut down mid-call: answered as the SDK answers its own (unless the client
            # cancelled it, which ``_cancel`` has already taken off the ledger)
            if self._close_out(rid):
                await self.write(
                    JSONRPCError(
                        jsonrpc="2.0",
                        id=rid,
                        error=ErrorData(code=CONNECTION_CLOSED, message="Connection closed"),
                    )
                )
            raise
        self._close_out(rid)
        try:
            response = tool_response(rid, result, version)
        except ValidationError:
            log.exception("tool %s returned an invalid result", typed.name)
            await self.write(
                JSONRPCError(
                    jsonrpc="2.0",
                    id=rid,
                    error=ErrorData(
                        code=INTERNAL_ERROR, message="Handler returned an invalid result"
                    ),
                )
            )
            return
        await self.write(response)

    def _close_out(self, rid: str | int) -> bool:
        """Take ``rid`` off the ledger before its answer is written; False if it was not on it."""
        if self.ledger is None or coerce_request_id(rid) not in self._running:
            return False
        self.ledger.closed(rid)
        return True

    def _cancel(self, line: bytes) -> None:
        # A request the client cancelled is never answered (the SDK's "interrupt" mode).
        try:
            params = json.loads(line).get("params") or {}
        except (ValueError, AttributeError):
            return
        rid = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(rid, bool) or not isinstance(rid, str | int):
            return
        task = self._running.pop(coerce_request_id(rid), None)
        if task is not None:
            task.cancel()
            if self.ledger is not None:
                self.ledger.closed(rid)

    async def write(self, message: JSONRPCResponse | JSONRPCError | JSONRPCNotification) -> None:
        if self.writer is None or self.writer.is_closing():
            return
        self.writer.write(wire_text(message).encode("utf-8"))
        await self.writer.drain()

    async def close(self) -> None:
        """Cancel the calls still running (stdin closed: nobody reads their answers)."""
        running = list(self._running.values())
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)

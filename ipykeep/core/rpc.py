"""JSON-RPC 2.0 between clients and the daemon: newline-delimited JSON over loopback TCP.

Every request carries the daemon's token in a top-level ``token`` member, compared in
constant time; a request without it or with a wrong one is refused (and logged without the
token). The method table is the engine's public API, exposed generically: a method name maps
to the engine coroutine of that name, params to its keyword arguments, and the typed record it
returns to the ``result`` member. Errors travel as the error envelope and are rebuilt on the
client side as the same error class.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import inspect
import json
import logging
from typing import Any

from .errors import AuthError, DaemonUnreachableError, IpykeepError, UsageError
from .wire import MAX_LINE, Endpoint, _request, _unwrap, call_sync  # noqa: F401  (re-exported)

log = logging.getLogger("ipykeep.rpc")


def to_jsonable(value: Any) -> Any:
    # Duck-typed rather than isinstance(pydantic.BaseModel): the CLI imports this module for
    # call_sync, and loading pydantic would triple its start-up time.
    if hasattr(value, "model_dump") and not isinstance(value, type):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    return value


class RpcServer:
    """Serves ``methods`` (name -> coroutine function) to token-holding clients."""

    def __init__(self, methods: dict[str, Any], token: str) -> None:
        self.methods = methods
        self._token = token.encode()
        self.server: asyncio.base_events.Server | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._serve, host, port, limit=MAX_LINE)
        sock = self.server.sockets[0]
        addr = sock.getsockname()
        return addr[0], addr[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def _authorized(self, req: dict[str, Any]) -> bool:
        token = req.get("token")
        return isinstance(token, str) and hmac.compare_digest(token.encode(), self._token)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                response = await self._handle(line, peer)
                writer.write(json.dumps(response).encode() + b"\n")
                await writer.drain()
                if response.get("error", {}).get("data", {}).get("code") == "unauthorized":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            raise
        finally:
            writer.close()

    async def _handle(self, line: bytes, peer: Any) -> dict[str, Any]:
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except ValueError:
            return {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
        rid = req.get("id")
        if not self._authorized(req):
            log.warning(
                "refused request %r from %s: %s token",
                req.get("method"),
                peer,
                "missing" if "token" not in req else "wrong",
            )
            err = AuthError("request refused: missing or wrong token", hint="use the token from .ipykeep/run/daemon.json")
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32001, "message": err.message, "data": err.envelope()}}
        method = req.get("method")
        params = req.get("params") or {}
        fn = self.methods.get(method) if isinstance(method, str) else None
        try:
            if fn is None:
                raise UsageError(f"unknown method {method!r}", hint=f"known: {', '.join(sorted(self.methods))}")
            if not isinstance(params, dict):
                raise UsageError("params must be an object")
            _check_params(fn, params, method)
            result = fn(**params)
            if inspect.isawaitable(result):
                result = await result
            return {"jsonrpc": "2.0", "id": rid, "result": to_jsonable(result)}
        except IpykeepError as exc:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": exc.message, "data": exc.envelope()}}
        except Exception as exc:
            log.exception("internal error in %s", method)
            err = IpykeepError(f"internal error in {method}: {type(exc).__name__}: {exc}", hint="see .ipykeep/run/daemon.log")
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": err.message, "data": err.envelope()}}


@functools.lru_cache(maxsize=None)
def _signature(fn: Any) -> inspect.Signature:
    return inspect.signature(fn)  # once per method, not on every request


def _check_params(fn: Any, params: dict[str, Any], method: str) -> None:
    sig = _signature(fn)
    unknown = [p for p in params if p not in sig.parameters]
    if unknown:
        raise UsageError(
            f"{method}: unknown argument(s) {', '.join(unknown)}",
            hint=f"{method} takes: {', '.join(sig.parameters)}",
        )
    missing = [
        name
        for name, p in sig.parameters.items()
        if p.default is inspect.Parameter.empty and p.kind is not inspect.Parameter.VAR_KEYWORD and name not in params
    ]
    if missing:
        raise UsageError(f"{method}: missing argument(s) {', '.join(missing)}")


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
            return await asyncio.open_connection(self.endpoint.host, self.endpoint.port, limit=MAX_LINE)
        except OSError as exc:
            raise DaemonUnreachableError(
                f"cannot reach the daemon at {self.endpoint.host}:{self.endpoint.port}: {exc}", hint="it may have exited"
            ) from exc

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        fresh = not self._idle
        reader, writer = self._idle.pop() if self._idle else await self._connect()
        self._rid += 1
        try:
            writer.write(_request(method, params or {}, self.endpoint.token, self._rid))
            await writer.drain()
            line = await reader.readline()
        except OSError as exc:
            writer.close()
            if not fresh:  # a pooled connection the daemon closed meanwhile: retry on a new one
                return await self.call(method, params)
            raise DaemonUnreachableError(f"lost the daemon during {method}: {exc}") from exc
        if not line:
            writer.close()
            if not fresh:
                return await self.call(method, params)
            raise DaemonUnreachableError(f"the daemon closed the connection during {method}", hint="it may have exited")
        if len(self._idle) < self.max_idle:
            self._idle.append((reader, writer))
        else:
            writer.close()
        return _unwrap(json.loads(line))

    def close(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()

"""The daemon's JSON-RPC 2.0 server: newline-delimited JSON over loopback TCP.

Every request carries the daemon's token in a top-level ``token`` member, compared in
constant time; a request without it or with a wrong one is refused (and logged without the
token). The server dispatches through an explicit table of ``api.spec.Binding``s (built by
``ipykeep.daemon.server.method_table``): a method name maps to its declared ``Method`` and the
callable serving it. Params are validated with the method's params model (a wrong type or an unknown
argument is a ``bad_argument`` error naming the field, never ``internal``), the callable gets
the model's fields as keyword arguments, and its result is sent as the declared result type's
JSON. Errors travel as the error envelope and are rebuilt on the client side as the same error
class (see ``api.errors``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import inspect
import json
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ipykeep.api.errors import AuthError, IpykeepError, UsageError
from ipykeep.client.wire import MAX_LINE

if TYPE_CHECKING:
    from ipykeep.api.spec import Served

log = logging.getLogger("ipykeep.rpc")

#: The first request of a connection (which must carry the token) may be this long at most, so
#: an unauthenticated peer cannot make the daemon buffer more.
MAX_UNAUTHENTICATED_LINE = 64 * 1024
#: Authenticated connections served at once; more are closed once they authenticate.
MAX_CONNECTIONS = 256
#: Connections still without their first (authenticated) request at once; past it, the oldest
#: of them is closed to make room, so unauthenticated peers can never fill the daemon: the
#: owner's client authenticates with its first line, within milliseconds of connecting.
MAX_UNAUTHENTICATED = 64
#: Seconds from accept to the first request, which must carry the token: a hard deadline, not
#: reset by bytes, and a first line that is not an authorized request closes the connection.
UNAUTHENTICATED_DEADLINE = 10.0
_TOKEN_HEAD = re.compile(rb'\A\s*\{\s*"token"\s*:\s*"([^"\\]*)"')


class RpcServer:
    """Serves ``methods`` (name -> binding) to token-holding clients."""

    def __init__(self, methods: Mapping[str, Served], token: str) -> None:
        for name, binding in methods.items():
            check_binding(name, binding)
        self.methods = dict(methods)
        self._token = token.encode()
        self.server: asyncio.base_events.Server | None = None
        self._connections = 0
        #: connections not yet authenticated, oldest first (dicts keep insertion order)
        self._pending: dict[asyncio.StreamWriter, None] = {}

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

    def _authorized_line(self, line: bytes) -> bool:
        try:
            req = json.loads(line)
        except ValueError:
            return False
        return isinstance(req, dict) and self._authorized(req)

    def _admit(self, writer: asyncio.StreamWriter, peer: Any) -> None:
        if len(self._pending) >= MAX_UNAUTHENTICATED:
            oldest = next(iter(self._pending))
            del self._pending[oldest]
            log.warning(
                "%d connections without a token: closing the oldest (%s) for %s",
                MAX_UNAUTHENTICATED,
                oldest.get_extra_info("peername"),
                peer,
            )
            oldest.transport.abort()
        self._pending[writer] = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        self._admit(writer, peer)
        counted = False
        try:
            line = await asyncio.wait_for(self._first_line(reader), UNAUTHENTICATED_DEADLINE)
            if writer not in self._pending:  # closed to make room for a newer connection
                return
            del self._pending[writer]
            if not line:
                return
            if not self._authorized_line(line):
                # a parse error or a refusal, logged without the token; then the connection ends
                writer.write(json.dumps(await self._handle(line, peer)).encode() + b"\n")
                await writer.drain()
                return
            if self._connections >= MAX_CONNECTIONS:
                log.warning(
                    "refused a connection from %s: %d connections open", peer, self._connections
                )
                return
            self._connections += 1
            counted = True
            while line:
                response = await self._handle_until_disconnect(line, peer, reader)
                if response is None:  # the client went away; its call was cancelled
                    return
                writer.write(json.dumps(response).encode() + b"\n")
                await writer.drain()
                if response.get("error", {}).get("data", {}).get("code") == "unauthorized":
                    return
                line = await reader.readline()
        except (
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.TimeoutError,
            ValueError,
            asyncio.LimitOverrunError,
        ):
            return
        except asyncio.CancelledError:
            raise
        finally:
            self._pending.pop(writer, None)
            if counted:
                self._connections -= 1
            writer.close()

    async def _first_line(self, reader: asyncio.StreamReader) -> bytes:
        """The first line of a connection, buffered past ``MAX_UNAUTHENTICATED_LINE`` bytes only
        when it begins with the right token (ValueError otherwise)."""
        buf = bytearray()
        while True:
            chunk = await reader.read(MAX_UNAUTHENTICATED_LINE + 1 - len(buf))
            if not chunk:
                return bytes(buf)
            buf += chunk
            if buf.find(b"\n") >= 0:
                break
            if len(buf) > MAX_UNAUTHENTICATED_LINE:
                head = _TOKEN_HEAD.match(bytes(buf))
                if head is None or not hmac.compare_digest(head.group(1), self._token):
                    raise ValueError("long first request without the token at its head")
                return bytes(buf) + await reader.readline()
        nl = buf.find(b"\n")
        if nl + 1 < len(buf):  # pipelined bytes after the first line: not a client of ours
            raise ValueError("data after the first request")
        return bytes(buf)

    async def _handle_until_disconnect(
        self, line: bytes, peer: Any, reader: asyncio.StreamReader
    ) -> dict[str, Any] | None:
        """Handle one request; cancel it if the client disconnects first (a killed CLI, a
        closed MCP session), so a multi-cell run does not go on for nobody."""
        handler = asyncio.ensure_future(self._handle(line, peer))
        eof = asyncio.ensure_future(reader.read(1))
        try:
            done, _ = await asyncio.wait({handler, eof}, return_when=asyncio.FIRST_COMPLETED)
            if handler in done:
                return handler.result()
            if eof.result():  # a client sent more before its answer: protocol misuse
                log.warning("client %s sent data before its answer; closing", peer)
            handler.cancel()
            with contextlib.suppress(BaseException):
                await handler
            return None
        finally:
            if not eof.done():
                eof.cancel()
                with contextlib.suppress(BaseException):
                    await eof

    async def _handle(self, line: bytes, peer: Any) -> dict[str, Any]:
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except ValueError:
            return {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32700, "message": "parse error"},
            }
        rid = req.get("id")
        if not self._authorized(req):
            log.warning(
                "refused request %r from %s: %s token",
                req.get("method"),
                peer,
                "missing" if "token" not in req else "wrong",
            )
            err = AuthError(
                "request refused: missing or wrong token",
                hint="use the token from .ipykeep/run/daemon.json",
            )
            return {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32001, "message": err.message, "data": err.envelope()},
            }
        method = req.get("method")
        params = req.get("params") or {}
        binding = self.methods.get(method) if isinstance(method, str) else None
        try:
            if binding is None:
                raise UsageError(
                    f"unknown method {method!r}", hint=f"known: {', '.join(sorted(self.methods))}"
                )
            if not isinstance(params, dict):
                raise UsageError(f"{method}: params must be an object")
            return {"jsonrpc": "2.0", "id": rid, "result": await invoke(binding, params)}
        except IpykeepError as exc:
            return {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32000, "message": exc.message, "data": exc.envelope()},
            }
        except Exception as exc:
            internal = internal_error(str(method), exc)
            return {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32603, "message": internal.message, "data": internal.envelope()},
            }


async def invoke(binding: Served, params: Mapping[str, Any]) -> Any:
    """Call a bound method as it is served to every caller: ``params`` validated by its params
    model, its result the declared result type's JSON."""
    declared = binding.method
    result = binding.handler(**declared.validate(params).kwargs())
    if inspect.isawaitable(result):
        result = await result
    return declared.dump_result(result)


def internal_error(method: str, exc: Exception) -> IpykeepError:
    """What a caller is told of a failure the method does not declare (a bug), logged here."""
    log.error("internal error in %s", method, exc_info=exc)
    return IpykeepError(
        f"internal error in {method}: {type(exc).__name__}: {exc}",
        hint="see .ipykeep/run/daemon.log",
    )


def check_binding(name: str, binding: Served) -> None:
    """Refuse a table whose callable cannot take its method's params (caught at start-up, not
    on the first call): every field must be a parameter, every required parameter a field."""
    if binding.method.name != name:
        raise ValueError(
            f"method table: {name!r} is bound to the declaration of {binding.method.name!r}"
        )
    sig = inspect.signature(binding.handler)
    fields = set(binding.method.params.model_fields)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    accepted = {
        n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    required = {n for n in accepted if sig.parameters[n].default is inspect.Parameter.empty}
    extra = fields - accepted if not takes_any else set()
    missing = required - fields
    if extra or missing:
        raise ValueError(
            f"method table: {name} params {sorted(fields)} do not fit {binding.handler!r}{sig}"
        )

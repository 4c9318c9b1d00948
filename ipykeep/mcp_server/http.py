"""Streamable HTTP transport: the SDK's app behind a bearer-token check, served by uvicorn.

Every HTTP request must carry ``Authorization: Bearer <token>`` (the scheme matched without
regard to case, as RFC 7235 says; the token compared in constant time); anything else gets 401
before it reaches the MCP app. The one exception is ``/.well-known/*``: clients probe it for
OAuth discovery before they send the token, and a 401 there reads as "OAuth required" (Claude
Code then fails with "Dynamic Client Registration rejected"). It answers 404 — there is no
OAuth server here — and serves nothing. The token comes from
``IPYKEEP_MCP_TOKEN`` or is generated and shown once on stderr; it never appears in logs.
A non-loopback host is refused unless the token was given explicitly. On every loopback
address (127.0.0.2 as much as 127.0.0.1) the Host and Origin headers must name a loopback
host (``loopback_security``): the SDK only turns that check on for three spellings.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ipykeep.api.errors import UsageError
from ipykeep.mcp_server.server import IpykeepMcp
from ipykeep.project.atomic import atomic_write_text

log = logging.getLogger("ipykeep.mcp")

TOKEN_ENV = "IPYKEEP_MCP_TOKEN"
MCP_PATH = "/mcp"

Scope = MutableMapping[str, Any]  # as the ASGI servers and Starlette type it
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class HttpOptions:
    host: str
    port: int
    token: str
    token_explicit: bool
    connection_file: Path | None = None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


MIN_TOKEN_LENGTH = 32
MIN_TOKEN_DISTINCT = 10  # a random hex or base64 secret of 32+ characters has far more


def weak_token(token: str) -> bool:
    """Too short or too repetitive to guard an endpoint others can reach."""
    return len(token) < MIN_TOKEN_LENGTH or len(set(token)) < MIN_TOKEN_DISTINCT


def resolve_token(host: str, environ: dict[str, str] | None = None) -> tuple[str, bool]:
    """The token to require, and whether it was given explicitly."""
    env = os.environ if environ is None else environ
    given = env.get(TOKEN_ENV, "").strip()
    if given:
        if not is_loopback(host) and weak_token(given):
            raise UsageError(
                f"refusing to listen on non-loopback host {host} with a weak {TOKEN_ENV} "
                f"(it needs {MIN_TOKEN_LENGTH}+ characters, not one or two repeated)",
                hint=f"set {TOKEN_ENV} to a long random secret, e.g. "
                '`python -c "import secrets; print(secrets.token_urlsafe(32))"`',
            )
        return given, True
    if not is_loopback(host):
        raise UsageError(
            f"refusing to listen on non-loopback host {host} with a generated token",
            hint=f"set {TOKEN_ENV} to a long random secret, or use --host 127.0.0.1",
        )
    return secrets.token_urlsafe(32), False


async def _send_json(
    send: Send, status: int, payload: dict[str, Any], extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BearerAuth:
    """ASGI middleware: 401 unless the request carries the bearer token; 404 for discovery."""

    def __init__(self, app: AsgiApp, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers") or []:
            if name.lower() == b"authorization":
                scheme, _, credentials = value.strip().partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(
                    credentials.strip(), self._expected
                )
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and str(scope.get("path", "")).startswith("/.well-known/"):
            await _send_json(
                send,
                404,
                {
                    "code": "not_found",
                    "message": "no OAuth discovery here",
                    "retryable": False,
                    "hint": "this server takes a static bearer token:"
                    " send Authorization: Bearer <token>",
                },
            )
            return
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        log.warning(
            "refused %s %s: missing or wrong bearer token",
            scope.get("method", ""),
            scope.get("path", ""),
        )
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await _send_json(
            send,
            401,
            {
                "code": "unauthorized",
                "message": "missing or wrong bearer token",
                "retryable": False,
                "hint": "send Authorization: Bearer <token> (see the connection file)",
            },
            [(b"www-authenticate", b'Bearer realm="ipykeep"')],
        )


def write_connection_file(path: Path, url: str, token: str) -> None:
    """Write ``{"url", "headers"}`` as 0600, atomically (never readable by others, even briefly)."""
    path = path.expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(
        path, json.dumps({"url": url, "headers": {"Authorization": f"Bearer {token}"}}), mode=0o600
    )


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{MCP_PATH}"


def loopback_security(host: str) -> Any:
    """DNS-rebinding protection for a loopback ``host``: the SDK's own for 127.0.0.1, extended
    to the address actually bound; None (the SDK's default) for other hosts."""
    if not is_loopback(host):
        return None
    from mcp.server.transport_security import TransportSecuritySettings

    shown = f"[{host}]" if ":" in host else host
    hosts = sorted({shown, "127.0.0.1", "localhost", "[::1]"})
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{h}:*" for h in hosts],
        allowed_origins=[f"http://{h}:*" for h in hosts],
    )


async def run_http(app: IpykeepMcp, opts: HttpOptions) -> None:
    import uvicorn

    server = app.server()
    starlette_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=opts.host,
        transport_security=loopback_security(opts.host),
    )
    sock = _bind(opts.host, opts.port)
    port = sock.getsockname()[1]
    url = _url(opts.host, port)
    config = uvicorn.Config(
        BearerAuth(starlette_app, opts.token),
        log_config=None,
        access_log=False,
        lifespan="on",
        log_level="warning",
    )
    http = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(http.serve, [sock])
        while not http.started:
            if http.should_exit:
                return
            await anyio.sleep(0.02)
        if opts.connection_file is not None:
            write_connection_file(opts.connection_file, url, opts.token)
        sys.stderr.write(f"ipykeep MCP server listening on {url}\n")
        if not opts.token_explicit:
            sys.stderr.write(f"bearer token (shown once): {opts.token}\n")
        sys.stderr.flush()


def serve_http(app: IpykeepMcp, opts: HttpOptions) -> None:
    anyio.run(run_http, app, opts)

"""Kernels behind a Jupyter Server, Kernel Gateway or Enterprise Gateway (REST + websocket).

The kernel is started with ``POST /api/kernels``, interrupted with the server's interrupt
endpoint, stopped with ``DELETE``, and driven over ``/api/kernels/<id>/channels``
(``wschannels.py``). Settings follow jupyter_server's gateway client so one environment serves
both: the token comes from ``JUPYTER_GATEWAY_AUTH_TOKEN`` (or the variable ``gateway_token_env``
names) and travels as ``Authorization: token …``; ``JUPYTER_GATEWAY_HEADERS`` (JSON) adds
headers (a JupyterHub cookie, a bearer scheme…); ``JUPYTER_GATEWAY_VALIDATE_CERT``,
``JUPYTER_GATEWAY_CA_CERTS``, ``JUPYTER_GATEWAY_CLIENT_CERT``/``_KEY`` configure TLS. The token
is never put in a URL, a message or a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from ipykeep.api.errors import KernelStartError, RemoteAuthError, RemoteUnreachableError, UsageError
from ipykeep.kernel.providers.base import KernelChannels, LaunchSpec, ProviderKind
from ipykeep.kernel.providers.link import RemoteLink
from ipykeep.kernel.providers.wschannels import WebsocketChannels

log = logging.getLogger("ipykeep.gateway")

DEFAULT_TOKEN_ENV = "JUPYTER_GATEWAY_AUTH_TOKEN"
#: Seconds between REST checks that the kernel still exists (the websocket reports a lost
#: connection at once; a kernel culled or deleted on the server only shows here).
MODEL_CHECK_INTERVAL = 5.0
CONNECT_TIMEOUT = 20.0
REQUEST_TIMEOUT = 60.0


def _truthy(value: str) -> bool:
    return value.strip().lower() not in ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class GatewaySettings:
    url: str  # http(s)://host[:port][/base]; no query, no token
    token: str = field(default="", repr=False)
    token_env: str = DEFAULT_TOKEN_ENV
    kernel_name: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    validate_cert: bool = True
    ca_certs: str | None = None
    client_cert: str | None = None
    client_key: str | None = None

    @classmethod
    def from_env(
        cls,
        url: str,
        *,
        token_env: str | None = None,
        kernel_name: str | None = None,
        environ: dict[str, str] | None = None,
    ) -> GatewaySettings:
        env = os.environ if environ is None else environ
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(
                f"gateway URL must be http(s)://host[:port][/base], not {_redact(url)!r}",
                hint="for example --gateway https://hub.example.org/user/me or http://127.0.0.1:8888",
            )
        if parts.query or parts.username or parts.password:
            raise UsageError(
                "the gateway URL must not carry credentials or a query (they would end up in logs)",
                hint=f"put the token in {token_env or DEFAULT_TOKEN_ENV} instead",
            )
        name = token_env or DEFAULT_TOKEN_ENV
        try:
            headers = json.loads(env.get("JUPYTER_GATEWAY_HEADERS") or "{}")
            assert isinstance(headers, dict)
        except (ValueError, AssertionError):
            raise UsageError(
                "JUPYTER_GATEWAY_HEADERS must be a JSON object of header names to values",
                hint='for example JUPYTER_GATEWAY_HEADERS=\'{"Cookie": "..."}\'',
            ) from None
        return cls(
            url=urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", "")),
            token=env.get(name, ""),
            token_env=name,
            kernel_name=kernel_name,
            headers=tuple((str(k), str(v)) for k, v in headers.items()),
            validate_cert=_truthy(env.get("JUPYTER_GATEWAY_VALIDATE_CERT", "true")),
            ca_certs=env.get("JUPYTER_GATEWAY_CA_CERTS") or None,
            client_cert=env.get("JUPYTER_GATEWAY_CLIENT_CERT") or None,
            client_key=env.get("JUPYTER_GATEWAY_CLIENT_KEY") or None,
        )

    def tls_options(self) -> dict[str, Any]:
        """The TLS arguments of every request (REST and websocket alike)."""
        return {
            "validate_cert": self.validate_cert,
            "ca_certs": self.ca_certs,
            "client_cert": self.client_cert,
            "client_key": self.client_key,
        }

    def request_headers(self) -> dict[str, str]:
        out = dict(self.headers)
        if self.token:
            out.setdefault("Authorization", f"token {self.token}")
        return out

    @property
    def ws_url(self) -> str:
        return "ws" + self.url[4:]  # http -> ws, https -> wss


def _redact(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class GatewayProvider:
    """One kernel on a Jupyter server reached over HTTP(S)."""

    kind: ProviderKind = "gateway"
    remote: bool = True
    pid = None
    connection_file = None
    preinstalled: frozenset[str] = frozenset()

    def __init__(
        self,
        spec: LaunchSpec,
        settings: GatewaySettings,
        *,
        kernel_cwd: str | None,
        reconnect_for: float = 120.0,
    ) -> None:
        self.spec = spec
        self.settings = settings
        host = urlsplit(settings.url).hostname or ""
        if (
            settings.url.startswith("http:")
            and settings.token
            and host not in ("127.0.0.1", "localhost", "::1")
        ):
            log.warning(
                "%s: the gateway token goes to %s without TLS; "
                "use https:// (or an ssh tunnel to a loopback port)",
                spec.name,
                host,
            )
        self.location = f"gateway {settings.url}"
        # Jupyter servers keep a kernel's messages for a websocket session that closed and
        # replay them when it reconnects; a drop the server did not notice (the network stalled
        # rather than closed) sends them into the dead connection instead.
        self.link = RemoteLink(
            f"the connection to {self.location}",
            reconnect_for,
            replays="the server replays what the kernel sent meanwhile, "
            "unless it had not noticed the drop",
        )
        self.kernel_cwd = kernel_cwd
        self.kernel_id: str | None = None
        self.channels: WebsocketChannels | None = None
        self.lost_reason: str | None = None
        self._checked = 0.0
        self._http = AsyncHTTPClient(force_instance=True)

    # -- REST --------------------------------------------------------------------------------
    def _kernel_url(self, *tail: str) -> str:
        path = "/api/kernels" + (
            f"/{quote(self.kernel_id or '', safe='')}" if self.kernel_id else ""
        )
        return self.settings.url + path + "".join(f"/{t}" for t in tail)

    async def _request(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        s = self.settings
        req = HTTPRequest(
            url,
            method=method,
            headers={**s.request_headers(), "Content-Type": "application/json"},
            body=json.dumps(body) if body is not None else (b"" if method == "POST" else None),
            connect_timeout=CONNECT_TIMEOUT,
            request_timeout=REQUEST_TIMEOUT,
            **s.tls_options(),
        )
        try:
            resp = await self._http.fetch(req)
        except HTTPClientError as exc:
            raise self._http_error(method, url, exc) from None
        except (OSError, socket.gaierror, asyncio.TimeoutError) as exc:
            raise self._unreachable(exc) from None
        return json.loads(resp.body) if resp.body else None

    def _unreachable(self, exc: BaseException) -> RemoteUnreachableError:
        return RemoteUnreachableError(
            f"cannot reach the Jupyter server at {self.settings.url}: {type(exc).__name__}: {exc}",
            hint="check the gateway URL, that the server is running, and the network (VPN, proxy)",
        )

    def _http_error(self, method: str, url: str, exc: HTTPClientError) -> KernelStartError:
        where = _redact(url)
        if exc.code in (401, 403):
            has = (
                "a token was sent"
                if self.settings.token
                else f"no token was sent (${self.settings.token_env} is unset)"
            )
            return RemoteAuthError(
                f"the Jupyter server at {self.settings.url} refused the credentials "
                f"(HTTP {exc.code}; {has})",
                hint=f"set ${self.settings.token_env} to the server's token "
                "(or JUPYTER_GATEWAY_HEADERS for another scheme)",
            )
        if exc.code == 599:
            return self._unreachable(exc)
        reason = ""
        if exc.response is not None and exc.response.body:
            with contextlib.suppress(ValueError, AttributeError):
                data = json.loads(exc.response.body)
                reason = str(data.get("message") or data.get("reason") or "")
        return KernelStartError(
            f"the Jupyter server at {self.settings.url} answered {method} {where} "
            f"with HTTP {exc.code}" + (f": {reason}" if reason else ""),
            hint="check gateway_kernel_name names a kernel spec the server has "
            "(GET /api/kernelspecs lists them)"
            if method == "POST" and exc.code in (400, 404, 500)
            else "see the server's log",
        )

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, timeout: float) -> KernelChannels:
        self.lost_reason = None
        body: dict[str, Any] = {
            "env": {"KERNEL_WORKING_DIR": self.kernel_cwd} if self.kernel_cwd else {}
        }
        if self.settings.kernel_name:
            body["name"] = self.settings.kernel_name
        model = await self._request("POST", self.settings.url + "/api/kernels", body)
        self.kernel_id = str(model["id"])
        try:
            self.channels = WebsocketChannels(self._connect, where=self.location, link=self.link)
            await self.channels.open()
            await self.channels.wait_for_ready(timeout)
        except BaseException as exc:
            await self.kill()
            if isinstance(exc, KernelStartError):
                raise
            if isinstance(exc, (TimeoutError, ConnectionError, OSError)):
                raise KernelStartError(
                    f"the kernel started at {self.settings.url} did not become ready: {exc}",
                    hint="check the server's log; its kernel spec needs ipykernel "
                    '(and ipyflow-core for dataflow = "ipyflow")',
                ) from None
            raise
        self._checked = time.monotonic()
        return self.channels

    async def _connect(self, session_id: str) -> Any:
        s = self.settings
        req = HTTPRequest(
            s.ws_url
            + self._kernel_url("channels")[len(s.url) :]
            + f"?session_id={quote(session_id)}",
            headers=s.request_headers(),
            connect_timeout=CONNECT_TIMEOUT,
            request_timeout=CONNECT_TIMEOUT,
            **s.tls_options(),
        )
        try:
            # Pings notice a silently dropped connection (a sleeping laptop, a NAT timeout).
            return await websocket_connect(
                req, ping_interval=10, ping_timeout=10, max_message_size=1 << 30
            )
        except HTTPClientError as exc:
            raise self._http_error("GET", req.url, exc) from None
        except (OSError, asyncio.TimeoutError) as exc:
            raise self._unreachable(exc) from None

    async def is_alive(self) -> bool:
        ch = self.channels
        if ch is None or self.kernel_id is None:
            return False
        if ch.kernel_died:
            return False  # the kernel itself died (the server may have started a fresh one)
        if ch.closed:
            self.lost_reason = (
                ch.close_reason or f"the connection to {self.location} was lost"
            ) + "; the kernel may still run on the server"
            return False
        if self.link.down:
            return True  # being re-established (the websocket's reader retries)
        if time.monotonic() - self._checked >= MODEL_CHECK_INTERVAL:
            self._checked = time.monotonic()
            try:
                await self._request("GET", self._kernel_url())
            except KernelStartError as exc:
                if "HTTP 404" in exc.message:
                    self.lost_reason = (
                        f"the kernel is gone from {self.settings.url} (culled or shut down there)"
                    )
                    return False
                log.warning("%s: checking the kernel failed: %s", self.spec.name, exc.message)
        return True

    async def interrupt(self) -> None:
        if self.kernel_id is not None:
            await self._request("POST", self._kernel_url("interrupt"))

    async def kill(self) -> None:
        await self.shutdown(now=True)

    async def shutdown(self, *, now: bool = False) -> None:
        if self.channels is not None:
            self.channels.stop_channels()
            self.channels = None
        if self.kernel_id is not None:
            with contextlib.suppress(KernelStartError, asyncio.TimeoutError):
                await asyncio.wait_for(self._request("DELETE", self._kernel_url()), 10)
            self.kernel_id = None

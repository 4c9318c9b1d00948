"""The client side of the daemon's JSON-RPC: framing, one blocking call, error rebuilding.

Kept apart from ``rpc`` (the asyncio server and pool) so a CLI call loads only json and
socket: the thin CLI's start-up is most of what an agent waits for on a quick command.
"""

from __future__ import annotations

import json
import socket
from typing import Any, NamedTuple

from ipykeep.api.error_codes import error_from_envelope
from ipykeep.api.errors import DaemonUnreachableError, IpykeepError

MAX_LINE = 64 * 1024 * 1024


class Endpoint(NamedTuple):
    # A NamedTuple (immutable like a frozen dataclass) because importing dataclasses costs the
    # thin client a tenth of its start-up.
    host: str
    port: int
    token: str


def encode_request(method: str, params: dict[str, Any], token: str, rid: int) -> bytes:
    # The token comes first: the daemon authenticates a long first request from its head.
    return (
        json.dumps(
            {"token": token, "jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        ).encode()
        + b"\n"
    )


def unwrap_response(response: dict[str, Any]) -> Any:
    if "error" in response:
        err = response["error"]
        data = err.get("data")
        if isinstance(data, dict) and "code" in data:
            raise error_from_envelope(data)
        raise IpykeepError(str(err.get("message", "RPC error")))
    return response.get("result")


def call_sync(
    endpoint: Endpoint,
    method: str,
    params: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> Any:
    """One blocking RPC call (for the CLI)."""
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=10) as sock:
            sock.settimeout(timeout)
            sock.sendall(encode_request(method, params or {}, endpoint.token, 1))
            buf = bytearray()
            while not buf.endswith(b"\n"):
                chunk = sock.recv(1 << 20)
                if not chunk:
                    break
                buf += chunk
    except OSError as exc:
        raise DaemonUnreachableError(
            f"lost the daemon at {endpoint.host}:{endpoint.port} during {method}: {exc}",
            hint="check `.ipykeep/run/daemon.log`; `ipykeep status` shows whether it runs",
        ) from exc
    if not buf:
        raise DaemonUnreachableError(
            f"the daemon closed the connection during {method}",
            hint="it may have exited; see `.ipykeep/run/daemon.log`",
        )
    return unwrap_response(json.loads(buf))

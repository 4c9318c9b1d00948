"""Bearer-token middleware, token policy and connection file (no server process)."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from ipykeep.api.errors import UsageError
from ipykeep.mcp_server.http import BearerAuth, is_loopback, resolve_token, write_connection_file


async def _inner(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def _request(app: BearerAuth, headers: list[tuple[bytes, bytes]], path: str = "/mcp") -> int:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)

    scope = {"type": "http", "method": "POST", "path": path, "headers": headers}
    asyncio.run(app(scope, receive, send))
    return sent[0]["status"]


def test_bearer_auth() -> None:
    app = BearerAuth(_inner, "s3cret")
    assert _request(app, [(b"authorization", b"Bearer s3cret")]) == 200
    assert _request(app, []) == 401
    assert _request(app, [(b"authorization", b"Bearer wrong")]) == 401
    assert _request(app, [(b"authorization", b"s3cret")]) == 401
    assert _request(app, [(b"authorization", b"Basic s3cret")]) == 401
    assert _request(app, [(b"authorization", b"Bearer s3cret-and-more")]) == 401


def test_bearer_scheme_is_case_insensitive() -> None:
    """RFC 7235: the auth scheme is case-insensitive; the token is not."""
    app = BearerAuth(_inner, "s3cret")
    for scheme in (b"bearer", b"BEARER", b"BeArEr"):
        assert _request(app, [(b"authorization", scheme + b" s3cret")]) == 200
    assert _request(app, [(b"authorization", b"bearer S3CRET")]) == 401


def test_oauth_discovery_is_not_found_not_unauthorized() -> None:
    """Hosts probe /.well-known/* before sending a token; 401 there means "OAuth required"."""
    app = BearerAuth(_inner, "s3cret")
    for path in (
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-protected-resource/mcp",
    ):
        assert _request(app, [], path) == 404
        assert (
            _request(app, [(b"authorization", b"Bearer s3cret")], path) == 404
        )  # never reaches the app
    assert _request(app, [], "/mcp") == 401


def test_token_policy() -> None:
    token, explicit = resolve_token("127.0.0.1", {})
    assert len(token) >= 32 and not explicit
    strong = "kq3V_x9Lr2bTzW8mHc4NpYd7sJfA1gUe"
    assert resolve_token("0.0.0.0", {"IPYKEEP_MCP_TOKEN": strong}) == (strong, True)
    assert resolve_token("127.0.0.1", {"IPYKEEP_MCP_TOKEN": "a"}) == ("a", True)  # loopback only
    with pytest.raises(UsageError):
        resolve_token("0.0.0.0", {})
    for weak in ("a", "given", "x" * 64, "ab" * 40, strong[:31]):
        with pytest.raises(UsageError) as caught:
            resolve_token("0.0.0.0", {"IPYKEEP_MCP_TOKEN": weak})
        assert "weak IPYKEEP_MCP_TOKEN" in caught.value.message and caught.value.hint
        assert len(weak) < 8 or weak not in caught.value.message  # the secret is not echoed
    assert is_loopback("localhost") and is_loopback("::1") and not is_loopback("192.168.1.2")


@pytest.mark.posix
def test_connection_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "conn.json"
    write_connection_file(path, "http://127.0.0.1:1/mcp", "tok")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {
        "url": "http://127.0.0.1:1/mcp",
        "headers": {"Authorization": "Bearer tok"},
    }


def test_mcp_serve_on_a_public_host_refuses_a_weak_token_before_listening(tmp_path: Path) -> None:
    from tests.conftest import cli_env, make_project, run_cli

    root = make_project(tmp_path / "p", example=False)
    env = {**cli_env(), "IPYKEEP_MCP_TOKEN": "a"}
    done = run_cli(
        "mcp-serve",
        "--transport",
        "http",
        "--host",
        "0.0.0.0",
        "--port",
        "0",
        cwd=root,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert "weak IPYKEEP_MCP_TOKEN" in done.stderr and "hint" in done.stderr.lower(), done.stderr

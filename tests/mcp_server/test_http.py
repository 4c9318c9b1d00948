"""Streamable HTTP transport: bearer token on every request, connection file, a real tool call."""

from __future__ import annotations

import contextlib
import json
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.mcp_server.harness import (
    HostView,
    McpSession,
    envelope,
    server_env,
    shutdown_daemon,
    text_of,
)

pytestmark = pytest.mark.kernel


class HttpServer:
    def __init__(
        self, proc: subprocess.Popen[bytes], conn: dict[str, Any], stderr_path: Path
    ) -> None:
        self.proc = proc
        self.url: str = conn["url"]
        self.headers: dict[str, str] = conn["headers"]
        self.stderr_path = stderr_path


@contextlib.contextmanager
def launched(project: Path, host: str, name: str) -> Iterator[HttpServer]:
    """``ipykeep mcp-serve --transport http --host HOST`` until the block ends."""
    conn_file = project / ".ipykeep" / f"{name}.json"
    err_path = project / f"{name}.stderr"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ipykeep",
                "mcp-serve",
                "--transport",
                "http",
                "--host",
                host,
                "--port",
                "0",
                "--connection-file",
                str(conn_file),
            ],
            cwd=project,
            env=server_env(project),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 60
        while not conn_file.exists():
            assert proc.poll() is None, err_path.read_text()
            assert time.monotonic() < deadline, "no connection file"
            time.sleep(0.05)
        yield HttpServer(proc, json.loads(conn_file.read_text()), err_path)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def http_server(project: Path) -> Iterator[HttpServer]:
    try:
        with launched(project, "127.0.0.1", "mcp-http") as server:
            yield server
    finally:
        shutdown_daemon(project)


@pytest.fixture(scope="module")
def http_mcp(http_server: HttpServer) -> Iterator[McpSession]:
    def transport() -> Any:
        return streamable_http_client(
            http_server.url, http_client=create_mcp_http_client(headers=http_server.headers)
        )

    session = McpSession(transport, mode="auto").start()
    yield session
    session.close()


@pytest.mark.posix
def test_connection_file_and_stderr(http_server: HttpServer, project: Path) -> None:
    conn_file = project / ".ipykeep" / "mcp-http.json"
    assert stat.S_IMODE(conn_file.stat().st_mode) == 0o600
    assert http_server.url.startswith("http://127.0.0.1:") and http_server.url.endswith("/mcp")
    token = http_server.headers["Authorization"].removeprefix("Bearer ")
    err = http_server.stderr_path.read_text()
    assert http_server.url in err
    assert err.count(token) == 1  # shown once, never logged again


def _post(url: str, headers: dict[str, str]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    return httpx.post(
        url,
        json=body,
        headers={"Accept": "application/json, text/event-stream", **headers},
        timeout=10,
    )


def test_requests_without_the_token_are_refused(http_server: HttpServer) -> None:
    assert _post(http_server.url, {}).status_code == 401
    assert _post(http_server.url, {"Authorization": "Bearer not-the-token"}).status_code == 401
    assert httpx.get(http_server.url.replace("/mcp", "/"), timeout=10).status_code == 401
    assert http_server.proc.poll() is None


def test_oauth_discovery_answers_404_and_bearer_scheme_is_case_insensitive(
    http_server: HttpServer,
) -> None:
    root = http_server.url.removesuffix("/mcp")
    for path in (
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-protected-resource/mcp",
    ):
        assert httpx.get(root + path, timeout=10).status_code == 404
    token = http_server.headers["Authorization"].removeprefix("Bearer ")
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    res = httpx.post(
        http_server.url,
        json=init,
        timeout=10,
        headers={
            "Accept": "application/json, text/event-stream",
            "Authorization": f"bearer {token}",
        },
    )
    assert res.status_code == 200, res.text


def test_tools_over_http(http_mcp: McpSession) -> None:
    listed = http_mcp.run(lambda c: c.list_tools())
    assert "ipython" in {t.name for t in listed.tools}
    assert (
        envelope(http_mcp.tool("ipython", {"kernel_id": "k404", "code": "1"}))["code"]
        == "unknown_kernel"
    )
    created = http_mcp.tool("create_kernel", {"warm": False})
    assert not created.is_error, text_of(created)
    kid = created.structured_content["kernel_id"]
    res = http_mcp.tool("ipython", {"kernel_id": kid, "code": "print('over http')"})
    assert res.structured_content["state"] == "ok" and "over http" in text_of(res)
    # what a host forwards to its model carries the value and the traceback
    assert (
        "42" in HostView(http_mcp.tool("ipython", {"kernel_id": kid, "code": "y = 41; y + 1"})).text
    )
    failed = HostView(http_mcp.tool("ipython", {"kernel_id": kid, "code": "1/0"}))
    assert "ZeroDivisionError" in failed.text and "1/0" in failed.text
    long = HostView(
        http_mcp.tool(
            "ipython",
            {"kernel_id": kid, "code": "for i in range(3000):\n    print(f'line {i:04d}')"},
        )
    )
    assert "line 0000" in long.text and "line 2999" in long.text and long.size < 4096
    sleeper = http_mcp.tool(
        "ipython", {"kernel_id": kid, "code": "__import__('time').sleep(2)", "yield_time_ms": 0}
    )
    assert sleeper.structured_content["state"] in ("queued", "running")
    overlap = http_mcp.tool("ipython", {"kernel_id": kid, "code": "6 * 7"})
    assert overlap.structured_content["output"].strip() == "42" and "42" in HostView(overlap).text
    closed = http_mcp.tool("close_kernel", {"kernel_id": kid})
    assert closed.structured_content["state"] == "closed"


def test_non_loopback_host_needs_an_explicit_token(project: Path) -> None:
    env = {k: v for k, v in server_env(project).items() if k != "IPYKEEP_MCP_TOKEN"}
    proc = subprocess.run(
        [sys.executable, "-m", "ipykeep", "mcp-serve", "--transport", "http", "--host", "0.0.0.0"],
        cwd=project,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert b"non-loopback" in proc.stderr and proc.stdout == b""


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])
def test_every_loopback_host_keeps_the_host_header_check(project: Path, host: str) -> None:
    with launched(project, host, f"mcp-http-{host}") as server:
        assert server.url.startswith(f"http://{host}:")
        port = server.url.split(":")[2].split("/")[0]
        rebound = _post(server.url, {**server.headers, "Host": f"attacker.example:{port}"})
        assert rebound.status_code == 421, rebound.text
        foreign = {**server.headers, "Origin": "http://attacker.example"}
        assert _post(server.url, foreign).status_code == 403
        assert _post(server.url, server.headers).status_code != 421

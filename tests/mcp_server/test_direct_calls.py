"""Tool calls served straight from stdin (``mcp_server/direct.py``), and the SDK kept for the rest.

Pure checks of which lines the direct path takes, then two real ``mcp-serve`` processes on one
project, one with the direct path and one with every call through the SDK's dispatcher, fed the
same JSON-RPC lines: every answer must be the same, error envelopes, SDK errors and log notices
included, and a call the client cancels gets no answer on either.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipykeep.mcp_server.direct import DirectCalls
from tests.mcp_server.harness import make_project, server_env, shutdown_daemon

VERSION = "2025-06-18"


def _call(rid: Any, name: str, arguments: Any = None, **params: Any) -> bytes:
    body: dict[str, Any] = {"name": name, **params}
    if arguments is not None:
        body["arguments"] = arguments
    message = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": body}
    return (json.dumps(message) + "\n").encode()


def _ready() -> DirectCalls:
    calls = DirectCalls(app=None)  # type: ignore[arg-type]  # accepts() never reaches the app
    calls.saw_response(json.dumps({"id": 0, "result": {"protocolVersion": VERSION}}))
    calls.take(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    return calls


def test_takes_only_plain_tool_calls_of_an_initialized_handshake_session() -> None:
    fresh = DirectCalls(app=None)  # type: ignore[arg-type]
    assert fresh.accepts(_call(1, "ipython", {"code": "1"})) is None  # no handshake yet
    calls = _ready()
    assert calls.version == VERSION and calls.initialized
    taken = calls.accepts(_call(1, "ipython", {"kernel_id": "k1", "code": "1"}))
    assert taken is not None and taken[0] == 1 and taken[2].name == "ipython"
    assert calls.accepts(_call("a", "list_kernels")) is not None  # arguments may be absent
    # What the SDK must see: progress, tasks, the 2026 envelope, malformed or odd messages.
    for line in (
        _call(2, "ipython", {"code": "1"}, _meta={"progressToken": 7}),
        _call(3, "ipython", {"code": "1"}, task={"ttl": 1000}),
        _call(4, "ipython", {}, _meta={"io.modelcontextprotocol/protocolVersion": "2026-07-28"}),
        _call(5, "ipython", 5),
        _call(True, "ipython", {}),
        _call(None, "ipython", {}),
        b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}\n',
        b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"name":"tools/call"}}\n',
        b'{"jsonrpc":"2.0","id":8,"method":"tools/call"',
    ):
        assert calls.accepts(line) is None, line


def test_a_server_speaking_a_newer_era_keeps_everything_in_the_sdk() -> None:
    calls = DirectCalls(app=None)  # type: ignore[arg-type]
    calls.saw_response(json.dumps({"id": 0, "result": {"protocolVersion": "2026-07-28"}}))
    calls.take(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    assert calls.version is None
    assert calls.accepts(_call(1, "list_kernels")) is None


class RawServer:
    """``ipykeep mcp-serve`` driven line by line, as a host's transport drives it."""

    def __init__(self, root: Path, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ipykeep", "mcp-serve"],
            cwd=root,
            env={**server_env(root), **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        self._buf = b""
        self.notes: list[dict[str, Any]] = []

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def _next(self, deadline: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self._sel.select(left):
                return None
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def answer(self, rid: Any, timeout: float = 60) -> dict[str, Any]:
        """The answer to ``rid``; notifications met on the way are kept in ``notes``."""
        deadline = time.monotonic() + timeout
        while (message := self._next(deadline)) is not None:
            if message.get("id") == rid and "method" not in message:
                return message
            self.notes.append(message)
        raise AssertionError(f"no answer to {rid!r} within {timeout} s")

    def ask(self, line: bytes, rid: Any) -> dict[str, Any]:
        self.send(line)
        return self.answer(rid)

    def handshake(self, version: str = VERSION) -> dict[str, Any]:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        reply = self.ask((json.dumps(init) + "\n").encode(), 0)
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._sel.close()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


_IDS = re.compile(r"\b[ck]\d+\b")
_CLOCKS = re.compile(r'("(?:duration_s|elapsed_s|started_at|finished_at)": ?)[0-9.e+-]+')
_SECONDS = re.compile(r"\b\d+\.\d+s\b")


def _normalized(message: dict[str, Any]) -> str:
    """An answer with what differs between two kernels running one call (ids, clocks) blanked."""
    text = _IDS.sub("#", json.dumps(message, sort_keys=True))
    return _SECONDS.sub("#s", _CLOCKS.sub(r"\1 0", text))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = make_project(tmp_path_factory.mktemp("direct") / "proj")
    yield root
    shutdown_daemon(root)


@pytest.mark.posix
@pytest.mark.kernel  # real mcp-serve processes and a kernel: left out of the fast tier
@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
def test_direct_and_sdk_dispatch_answer_alike(project: Path, version: str) -> None:
    direct, sdk = RawServer(project), RawServer(project, IPYKEEP_MCP_DIRECT_CALLS="0")
    try:
        for server in (direct, sdk):
            assert server.handshake(version)["result"]["protocolVersion"] == version
        # each its own kernel, so both see the same execution counts
        kids = [
            s.ask(_call(1, "create_kernel", {}), 1)["result"]["structuredContent"]["kernel_id"]
            for s in (direct, sdk)
        ]
        kid = "KID"
        script = [
            _call(2, "ipython", {"kernel_id": kid, "code": "x = 40 + 2\nprint('hi')\nx"}),
            _call(3, "inspect", {"kernel_id": kid, "name": "x"}),
            _call(4, "ipython", {"kernel_id": kid}),  # missing code: ipykeep's envelope
            _call(5, "ipython", {"kernel_id": "k99", "code": "1"}),  # unknown kernel
            _call(6, "no_such_tool", {}),
            _call(7, "ipython", 5),  # malformed: the SDK's own error on both
            _call(8, "list_kernels", {}, _meta={"progressToken": "p"}),  # the SDK's path
            _call("nine", "ipython", {"kernel_id": kid, "code": "1/0"}),
        ]
        for line in script:
            rid = json.loads(line)["id"]
            answers = [
                server.ask(line.replace(b"KID", kid.encode()), rid)
                for server, kid in zip((direct, sdk), kids, strict=True)
            ]
            assert _normalized(answers[0]) == _normalized(answers[1]), line
        assert answers[0]["result"]["isError"] is False  # ran; the error is in the record
    finally:
        direct.close()
        sdk.close()


@pytest.mark.posix
@pytest.mark.kernel
def test_a_cancelled_direct_call_gets_no_answer_and_the_session_goes_on(project: Path) -> None:
    server = RawServer(project)
    try:
        server.handshake()
        kid = server.ask(_call(1, "create_kernel", {}), 1)["result"]["structuredContent"][
            "kernel_id"
        ]
        slow = {"kernel_id": kid, "code": "import time; time.sleep(1.5)", "yield_time_ms": 10000}
        server.send(_call(2, "ipython", slow))
        time.sleep(0.3)
        server.send(
            b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}\n'
        )
        after = server.ask(_call(3, "ipython", {"kernel_id": kid, "code": "'after'"}), 3)
        assert "after" in json.dumps(after)
        assert not any(n.get("id") == 2 for n in server.notes)
    finally:
        server.close()


@pytest.mark.posix
@pytest.mark.kernel
def test_stdin_closing_mid_call_ends_the_server(project: Path) -> None:
    server = RawServer(project)
    server.handshake()
    kid = server.ask(_call(1, "create_kernel", {}), 1)["result"]["structuredContent"]["kernel_id"]
    server.send(_call(2, "ipython", {"kernel_id": kid, "code": "import time; time.sleep(30)"}))
    time.sleep(0.3)
    start = time.monotonic()
    server.close()
    assert server.proc.returncode == 0
    assert time.monotonic() - start < 15

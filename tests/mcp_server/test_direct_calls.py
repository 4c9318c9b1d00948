"""Tool calls served straight from stdin (``mcp_server/direct.py``), and the SDK kept for the rest.

Pure checks of which lines the direct path takes, then two real ``mcp-serve`` processes on one
project, one with the direct path and one with every call through the SDK's dispatcher, fed the
same JSON-RPC lines: every answer must be the same, error envelopes, SDK errors and log notices
included, and a call the client cancels gets no answer on either.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipykeep.mcp_server.direct import DirectCalls
from ipykeep.mcp_server.inflight import Ledger
from ipykeep.mcp_server.server import IpykeepMcp
from ipykeep.mcp_server.session import INITIALIZED_LINE, Handshake
from ipykeep.mcp_server.stdio import Replay, serve_pipes
from ipykeep.project.config import Config
from tests.mcp_server.harness import RawServer, make_project, shutdown_daemon, tool_call

VERSION = "2025-06-18"


def _calls(version: str | None = VERSION) -> DirectCalls:
    """Direct calls of a session whose handshake ended with ``version`` (None: not yet)."""
    handshake = Handshake()
    if version is not None:
        handshake.saw_request(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
        handshake.saw_response(json.dumps({"id": 0, "result": {"protocolVersion": version}}))
        handshake.saw_request(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    return DirectCalls(app=None, handshake=handshake)  # type: ignore[arg-type]  # never called


def test_takes_only_plain_tool_calls_of_an_initialized_handshake_session() -> None:
    assert _calls(None).accepts(tool_call(1, "ipython", {"code": "1"})) is None  # no handshake yet
    calls = _calls()
    assert calls.handshake.ready and calls.handshake.params == {}
    taken = calls.accepts(tool_call(1, "ipython", {"kernel_id": "k1", "code": "1"}))
    assert taken is not None and taken[0] == 1 and taken[2].name == "ipython"
    assert calls.accepts(tool_call("a", "list_kernels")) is not None  # arguments may be absent
    # What the SDK must see: progress, tasks, the 2026 envelope, malformed or odd messages.
    for line in (
        tool_call(2, "ipython", {"code": "1"}, _meta={"progressToken": 7}),
        tool_call(3, "ipython", {"code": "1"}, task={"ttl": 1000}),
        tool_call(
            4, "ipython", {}, _meta={"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
        ),
        tool_call(5, "ipython", 5),
        tool_call(True, "ipython", {}),
        tool_call(None, "ipython", {}),
        b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}\n',
        b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"name":"tools/call"}}\n',
        b'{"jsonrpc":"2.0","id":8,"method":"tools/call"',
    ):
        assert calls.accepts(line) is None, line


def test_a_server_speaking_a_newer_era_keeps_everything_in_the_sdk() -> None:
    calls = _calls("2026-07-28")
    assert calls.handshake.version is None and not calls.handshake.ready
    assert calls.accepts(tool_call(1, "list_kernels")) is None


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
        kids = [s.create_kernel(1) for s in (direct, sdk)]
        kid = "KID"
        script = [
            tool_call(2, "ipython", {"kernel_id": kid, "code": "x = 40 + 2\nprint('hi')\nx"}),
            tool_call(3, "inspect", {"kernel_id": kid, "name": "x"}),
            tool_call(4, "ipython", {"kernel_id": kid}),  # missing code: ipykeep's envelope
            tool_call(5, "ipython", {"kernel_id": "k99", "code": "1"}),  # unknown kernel
            tool_call(6, "no_such_tool", {}),
            tool_call(7, "ipython", 5),  # malformed: the SDK's own error on both
            tool_call(8, "list_kernels", {}, _meta={"progressToken": "p"}),  # the SDK's path
            tool_call("nine", "ipython", {"kernel_id": kid, "code": "1/0"}),
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
        kid = server.create_kernel(1)
        slow = {"kernel_id": kid, "code": "import time; time.sleep(1.5)", "yield_time_ms": 10000}
        server.send(tool_call(2, "ipython", slow))
        time.sleep(0.3)
        server.send(
            b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}\n'
        )
        after = server.ask(tool_call(3, "ipython", {"kernel_id": kid, "code": "'after'"}), 3)
        assert "after" in json.dumps(after)
        assert not server.answered(2)
    finally:
        server.close()


@pytest.mark.posix
@pytest.mark.kernel
def test_stdin_closing_mid_call_ends_the_server(project: Path) -> None:
    server = RawServer(project)
    server.handshake()
    kid = server.create_kernel(1)
    server.send(tool_call(2, "ipython", {"kernel_id": kid, "code": "import time; time.sleep(30)"}))
    time.sleep(0.3)
    start = time.monotonic()
    server.close()
    assert server.proc.returncode == 0
    assert time.monotonic() - start < 15


async def test_the_reader_gives_plain_calls_to_the_direct_path_and_the_rest_to_the_sdk(
    tmp_path: Path,
) -> None:
    """The wiring, in-process over real pipes: which path served each call."""
    app = IpykeepMcp(tmp_path, Config())

    class NoKernels:  # the daemon's answer to list_kernels when it serves none
        descriptor = None

        async def call(self, method: Any, params: Any, *, start: bool = False) -> Any:
            return []

    app.use_backend(NoKernels())
    served_by: list[str] = []
    handler = app.call_tool

    async def recording(ctx: Any, params: Any) -> Any:
        served_by.append(type(ctx).__name__)
        return await handler(ctx, params)

    app.call_tool = recording  # type: ignore[method-assign]
    handshake = Handshake()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    serving = asyncio.create_task(
        serve_pipes(
            app.server(),
            in_r,
            out_w,
            Replay(),
            Ledger(),
            handshake,
            direct=DirectCalls(app, handshake),
        )
    )
    init = {
        "protocolVersion": VERSION,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    init_line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    os.write(in_w, init_line.encode() + b"\n" + INITIALIZED_LINE)
    answers: dict[Any, Any] = {}
    buffer = b""

    async def until(rid: Any) -> None:
        nonlocal buffer
        while rid not in answers:
            buffer += await asyncio.get_running_loop().run_in_executor(None, os.read, out_r, 65536)
            *lines, buffer = buffer.split(b"\n")
            answers.update((m.get("id"), m) for m in map(json.loads, filter(None, lines)))

    await until(1)
    os.write(in_w, tool_call(2, "list_kernels", {}))
    await until(2)
    os.write(in_w, tool_call(3, "list_kernels", {}, _meta={"progressToken": "p"}))
    await until(3)
    os.close(in_w)
    await asyncio.wait_for(serving, 30)
    for fd in (in_r, out_r, out_w):
        os.close(fd)
    assert served_by == ["_DirectContext", "ServerRequestContext"]
    assert answers[2]["result"] == answers[3]["result"]
    assert answers[2]["result"]["structuredContent"] == {"kernels": []}

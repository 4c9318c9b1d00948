"""Both MCP protocol eras, and the fallback between them, with two busy loops on the CPU.

The official client opens each era (``legacy``: the 2025-11-25 handshake; ``auto``: the
2026-07-28 ``server/discover`` probe). A raw stdio host (``benchmarks/stdio_host.py``) opens as
Claude Code does: the probe, a 2.4 s wait, the ``initialize`` fallback, and a second discover
when the server answers ``-32022`` because the probe already opened the 2026-07-28 era; a
variant gives up on the probe at once, so the ``-32022`` recovery is played whatever the
machine's speed. Every later call must succeed. The raw host builds its own JSON lines (it
stands in for a host); ipykeep's server answers them through the SDK alone.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from benchmarks.stdio_host import (
    HANDSHAKE_ERA,
    MODERN_ERA,
    UNSUPPORTED_PROTOCOL_VERSION,
    StdioHost,
    busy_cpu,
    request,
)
from ipykeep.mcp_server.catalog import TOOLS_LIST_BUDGET
from tests.mcp_server.harness import (
    McpSession,
    make_project,
    server_env,
    shutdown_daemon,
    stdio_params,
    text_of,
)

pytestmark = pytest.mark.kernel

#: ``ipython`` calls after each opening.
CALLS = 4


def test_the_eras_are_the_ones_this_sdk_speaks() -> None:
    assert (HANDSHAKE_ERA, MODERN_ERA) == (LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION)


@pytest.fixture(scope="module")
def loaded() -> Iterator[None]:
    """Two busy loops on the CPU for the module's tests."""
    with busy_cpu(2):
        yield


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, loaded: None) -> Iterator[Path]:
    root = make_project(tmp_path_factory.mktemp("eras") / "proj")
    yield root
    shutdown_daemon(root)


@pytest.fixture
async def host(project: Path) -> AsyncIterator[StdioHost]:
    spawned = await StdioHost.spawn(
        [sys.executable, "-m", "ipykeep", "mcp-serve"], project, server_env(project)
    )
    try:
        yield spawned
    finally:
        await spawned.close()


def _result(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


async def _work(host: StdioHost) -> None:
    """``tools/list`` within the byte budget, a kernel, and ``CALLS`` calls that build on each
    other, each answered with its own value."""
    listed = _result(await host.ask("tools/list"))
    size = len(json.dumps(listed, separators=(",", ":"), ensure_ascii=False).encode())
    assert size <= TOOLS_LIST_BUDGET, size
    assert "ipython" in {tool["name"] for tool in listed["tools"]}
    created = _result(await host.call_tool("create_kernel", {}))
    assert not created.get("isError"), created
    kid = created["structuredContent"]["kernel_id"]
    await host.call_tool("ipython", {"kernel_id": kid, "code": "n = 0"})
    for i in range(1, CALLS + 1):
        code = f"n += 1\nprint('call', n, {i})"
        reply = _result(await host.call_tool("ipython", {"kernel_id": kid, "code": code}))
        assert not reply.get("isError"), reply
        assert reply["structuredContent"]["state"] == "ok", reply
        assert f"call {i} {i}" in reply["structuredContent"]["output"], reply


async def test_opening_as_claude_code_does(host: StdioHost) -> None:
    await host.open_like_claude_code()
    assert host.era in (HANDSHAKE_ERA, MODERN_ERA), host.steps
    await _work(host)


async def test_a_late_probe_answer_is_recovered_from_with_minus_32022(host: StdioHost) -> None:
    # The probe opens the 2026-07-28 era before the SDK reads the fallback initialize: the SDK
    # refuses it with -32022 and the host discovers again.
    await host.open_like_claude_code(probe_wait=0)
    assert host.steps == ["probe", "probe unanswered", "initialize", "-32022: discover again"]
    assert host.era == MODERN_ERA
    await _work(host)


async def test_a_call_without_the_envelope_in_the_2026_era_is_refused_clearly(
    host: StdioHost,
) -> None:
    await host.open_discover()
    rid = host.new_id()
    await host.send(request(rid, "tools/list", modern=False))
    reply = await host.answer(rid)
    assert reply is not None and "error" in reply, reply
    assert "envelope" in reply["error"]["message"], reply
    # the session goes on: the same request with the envelope is served
    assert _result(await host.ask("tools/list"))["tools"]


async def test_initialize_after_discover_names_the_versions_served(host: StdioHost) -> None:
    await host.open_discover()
    rid = host.new_id()
    await host.send(request(rid, "initialize", {"protocolVersion": HANDSHAKE_ERA}, modern=False))
    reply = await host.answer(rid)
    assert reply is not None and reply["error"]["code"] == UNSUPPORTED_PROTOCOL_VERSION, reply
    assert MODERN_ERA in json.dumps(reply["error"].get("data")), reply


async def test_an_enveloped_call_in_the_handshake_era_is_refused(host: StdioHost) -> None:
    await host.open_handshake()
    rid = host.new_id()
    await host.send(request(rid, "tools/list", modern=True))
    reply = await host.answer(rid)
    assert reply is not None and "error" in reply, reply
    assert _result(await host.ask("tools/list"))["tools"]


async def test_a_cancelled_call_is_not_answered_and_the_session_goes_on(host: StdioHost) -> None:
    await host.open_handshake()
    kid = _result(await host.call_tool("create_kernel", {}))["structuredContent"]["kernel_id"]
    slow = host.new_id()
    code = "import time\ntime.sleep(25)"
    args = {"kernel_id": kid, "code": code, "yield_time_ms": 30000}
    await host.send(
        request(slow, "tools/call", {"name": "ipython", "arguments": args}, modern=False)
    )
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": slow}}
    await host.send(json.dumps(cancel).encode() + b"\n")
    # The cell still runs in the kernel: stopping it would end the call, and an uncancelled
    # call would then be answered before the calls below.
    assert not _result(await host.call_tool("interrupt", {"kernel_id": kid})).get("isError")
    reply = _result(await host.call_tool("ipython", {"kernel_id": kid, "code": "print('after')"}))
    assert "after" in reply["structuredContent"]["output"], reply
    assert slow not in host.answered_ids, "a cancelled request was answered"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_official_client_in_each_era(project: Path, mode: str) -> None:
    session = McpSession(stdio_params(project), mode=mode).start()
    try:
        version = session.run(lambda c: _protocol_version(c))
        assert version == (HANDSHAKE_ERA if mode == "legacy" else MODERN_ERA)
        created = session.tool("create_kernel", {})
        kid = created.structured_content["kernel_id"]
        session.tool("ipython", {"kernel_id": kid, "code": "base = 40"})
        for i in range(CALLS):
            result = session.tool("ipython", {"kernel_id": kid, "code": f"print(base + {i})"})
            assert not result.is_error, text_of(result)
            assert str(40 + i) in result.structured_content["output"]
        listed = session.run(lambda c: c.list_tools())
        assert "ipython" in {t.name for t in listed.tools}
    finally:
        session.close()


async def _protocol_version(client: Any) -> str:
    version: str = client.session.protocol_version
    return version
